"""Classification end to end: the pipeline on the class folders, a few training steps, export, serve, evaluate."""

import io
import json
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from conftest import ROOT, dataset_dir
from trainer_jobs import classification_job

# The sample corpus's class folders, sorted: the pipeline numbers the classes in this order.
CLASS_IDS = {"apple_pie": 0, "caesar_salad": 1, "chocolate_cake": 2, "french_fries": 3, "guacamole": 4,
             "pizza": 5, "ramen": 6, "sushi": 7}

SERVE_SCRIPT = """
import json, sys
import tensorflow as tf
serve = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
out = serve(image_bytes=tf.constant([open(path, "rb").read() for path in sys.argv[2:]]))
print("SERVED " + json.dumps({name: value.numpy().tolist() if value.dtype != tf.string else
                              [v.decode() for v in value.numpy()] for name, value in out.items()}))
"""


@pytest.fixture(scope="module")
def job(corpus_dir, tmp_path_factory):
    return classification_job(corpus_dir, tmp_path_factory)


def _examples(out, split):
    """(folder of the source image, label, encoded bytes) of every record of ``split``, read with protobuf."""
    manifest = json.loads((out / "manifest.json").read_text())
    rows = []
    for shard in manifest["splits"][split]["shards"]:
        for raw in tf.data.TFRecordDataset(str(out / shard["path"])):
            feature = tf.train.Example.FromString(raw.numpy()).features.feature
            source = feature["image/source_id"].bytes_list.value[0].decode()
            rows.append((source.split("/")[-2], feature["image/class/label"].int64_list.value[0],
                         feature["image/encoded"].bytes_list.value[0]))
    return rows


def test_every_label_in_the_shards_is_its_class_folder(job):
    _, _, out = job
    assert json.loads((out / "manifest.json").read_text())["class_names"] == list(CLASS_IDS)
    for split in ("train", "val", "test"):
        rows = _examples(out, split)
        assert rows
        assert all(label == CLASS_IDS[folder] for folder, label, _ in rows), split
    pizza = [label for folder, label, _ in _examples(out, "test") if folder == "pizza"]
    assert pizza and set(pizza) == {5}


def test_trained_model_serves_a_batch_of_sizes_with_probabilities_ids_and_names(job, tmp_path):
    result, _, out = job
    assert len(result["history"]["loss"]) == 2 and len(result["history"]["val_accuracy"]) == 2
    rows = _examples(out, "test")
    sizes = set()
    paths = []
    for folder, _, encoded in rows:
        size = Image.open(io.BytesIO(encoded)).size
        if size not in sizes:
            sizes.add(size)
            paths.append(tmp_path / f"{len(paths)}.jpg")
            paths[-1].write_bytes(encoded)
        if len(paths) == 3:
            break
    assert len(paths) == 3                                    # three different sizes in one batch
    completed = subprocess.run([sys.executable, "-c", SERVE_SCRIPT, result["export"], *map(str, paths)],
                               capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    served = json.loads([line for line in completed.stdout.splitlines() if line.startswith("SERVED ")][0][7:])
    probabilities = np.array(served["probabilities"])
    assert probabilities.shape == (3, len(CLASS_IDS))
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-5)
    assert served["class_id"] == probabilities.argmax(axis=1).tolist()
    names = {index: name for name, index in CLASS_IDS.items()}
    assert served["class_name"] == [names[index] for index in served["class_id"]]


def test_evaluation_counts_every_test_image_against_its_label(job, tmp_path):
    result, _, out = job
    output = tmp_path / "eval.json"
    completed = subprocess.run([sys.executable, "-m", "trainer.evaluate", "--model", result["export"], "--data",
                                str(out), "--split", "test", "--output", str(output), "--batch_size", "16"],
                               cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr[-3000:]
    report = json.loads(output.read_text())
    rows = _examples(out, "test")
    confusion = np.array(report["confusion_matrix"])
    # Each true class's row holds exactly the test images of that class folder.
    per_folder = np.bincount([CLASS_IDS[folder] for folder, _, _ in rows], minlength=len(CLASS_IDS))
    np.testing.assert_array_equal(confusion.sum(axis=1), per_folder)
    assert report["images"] == len(rows)
    # Accuracy, top-5 and recall from the served probabilities, computed here.
    serve = tf.saved_model.load(result["export"]).signatures["serving_default"]
    probabilities = np.concatenate([serve(image_bytes=tf.constant([encoded for _, _, encoded in rows[i:i + 7]]))
                                    ["probabilities"].numpy() for i in range(0, len(rows), 7)])
    labels = np.array([CLASS_IDS[folder] for folder, _, _ in rows])
    predicted = probabilities.argmax(axis=1)
    assert report["accuracy"] == pytest.approx(np.mean(predicted == labels))
    top5 = np.argsort(-probabilities, axis=1)[:, :5]
    assert report["top5_accuracy"] == pytest.approx(np.mean([label in row for label, row in zip(labels, top5)]))
    for row in report["per_class"]:
        mine = labels == row["id"]
        assert row["recall"] == (pytest.approx(np.mean(predicted[mine] == row["id"])) if mine.any() else None)
    assert "top-5 accuracy" in completed.stdout
