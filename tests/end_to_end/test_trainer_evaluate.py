"""``python -m trainer.evaluate`` against a count made here, with numpy, from the shards and the served maps."""

import io
import json
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from conftest import NUM_CLASSES, ROOT, dataset_dir
from trainer_jobs import segmentation_job

IGNORE = 255


@pytest.fixture(scope="module")
def job(segmentation_run, tmp_path_factory):
    out, _ = segmentation_run
    result, _, _ = segmentation_job(out, tmp_path_factory)
    return result["export"], out


def run_evaluate(*args):
    completed = subprocess.run([sys.executable, "-m", "trainer.evaluate", *map(str, args)], cwd=ROOT,
                               capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return completed


@pytest.fixture(scope="module")
def evaluated(job, tmp_path_factory):
    export, out = job
    output = tmp_path_factory.mktemp("eval") / "eval.json"
    completed = run_evaluate("--model", export, "--data", out, "--split", "test", "--output", output,
                             "--batch_size", 5, "--progress_seconds", 0)
    return json.loads(output.read_text()), completed


def _independent_confusion(export, out, split):
    """Every test image served alone; its class map against its mask, counted with numpy."""
    serve = tf.saved_model.load(export).signatures["serving_default"]
    manifest = json.loads((out / "manifest.json").read_text())
    confusion = np.zeros((NUM_CLASSES, NUM_CLASSES), np.int64)
    images = 0
    for shard in manifest["splits"][split]["shards"]:
        for raw in tf.data.TFRecordDataset(str(out / shard["path"])):
            feature = tf.train.Example.FromString(raw.numpy()).features.feature
            mask = np.asarray(Image.open(io.BytesIO(feature["image/segmentation/class/encoded"].bytes_list.value[0])))
            served = serve(image_bytes=tf.constant([feature["image/encoded"].bytes_list.value[0]]))
            class_map = served["class_map"].numpy()[0]
            assert class_map.shape == mask.shape
            labelled = mask != IGNORE
            np.add.at(confusion, (mask[labelled].astype(np.int64), class_map[labelled]), 1)
            images += 1
    return confusion, images


def test_eval_json_agrees_with_a_numpy_count_of_the_served_maps(job, evaluated):
    export, out = job
    report, completed = evaluated
    confusion, images = _independent_confusion(export, out, "test")
    assert report["images"] == images == 24 and report["failed"] == []
    np.testing.assert_array_equal(np.array(report["confusion_matrix"]), confusion)
    # The figures, by their textbook definitions.
    true_positive = np.diag(confusion).astype(float)
    labelled = confusion.sum(axis=1)
    union = labelled + confusion.sum(axis=0) - true_positive
    present = labelled > 0
    iou = np.divide(true_positive, union, out=np.full(NUM_CLASSES, np.nan), where=union > 0)
    assert report["labelled_pixels"] == confusion.sum()
    assert report["pixel_accuracy"] == pytest.approx(true_positive.sum() / confusion.sum())
    assert report["mean_iou"] == pytest.approx(np.mean(iou[present]))
    assert report["frequency_weighted_iou"] == pytest.approx(np.sum(labelled[present] / labelled.sum()
                                                                    * iou[present]))
    assert report["classes_present"] == int(present.sum())
    for row in report["per_class"]:
        expected = None if np.isnan(iou[row["id"]]) else pytest.approx(iou[row["id"]])
        assert row["iou"] == expected
    # The printed table lists the classes with labelled pixels, rarest first (fewest labelled pixels); the
    # others are counted in one line, and the JSON keeps them all.
    table = [line for line in completed.stdout.splitlines() if line[:3].strip().isdigit()]
    printed = [int(line.split()[0]) for line in table]
    assert printed == sorted((c for c in range(NUM_CLASSES) if labelled[c] > 0), key=lambda c: (labelled[c], c))
    absent = int((labelled == 0).sum())
    assert (f"{absent} class{'es' if absent != 1 else ''} with no labelled" in completed.stdout) == (absent > 0)
    assert len(report["per_class"]) == NUM_CLASSES
    assert "evaluated" in completed.stderr                     # progress lines


def test_max_examples_gives_a_quick_look(job, tmp_path):
    export, out = job
    output = tmp_path / "quick.json"
    completed = run_evaluate("--model", export, "--data", out, "--split", "val", "--output", output,
                             "--max_examples", 5, "--batch_size", 2)
    report = json.loads(output.read_text())
    assert report["images"] == 5 and report["split"] == "val"
    assert "evaluated 5 images of val" in completed.stdout


def test_a_model_for_another_task_is_a_clear_error(job, tmp_path):
    export, out = job
    copy = tmp_path / "data"
    copy.mkdir()
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["task"] = "classification"
    (copy / "manifest.json").write_text(json.dumps(manifest))
    completed = subprocess.run([sys.executable, "-m", "trainer.evaluate", "--model", export, "--data", str(copy)],
                               cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 2
    assert "is for segmentation" in completed.stderr
