"""trainer/data/transform_graph.py against tf.Transform itself, on graphs the pipeline and tf.Transform wrote.

The loader must give what ``tft.TFTransformOutput`` gives (this test may import tf.Transform; the trainer may
not), array for array, on the shards of both tasks; and a graph it cannot run must stop the trainer in one
line naming the cause. The refused graphs are written by tf.Transform (tft_beam) in a child process: a TF1
export that calls ``tft.apply_pyfunc``, a TF2 graph with ``tf.py_function``, and a TF2 graph with an op of
tensorflow_text, which the trainer's process never imports (tf.Transform imports it when it loads a graph).
"""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from conftest import ROOT
from trainer.data.artifacts import load_artifacts
from trainer.data.transform_graph import TransformGraph, TransformGraphError

WRITE_GRAPHS = """
import sys, tempfile
import apache_beam as beam
import tensorflow as tf
import tensorflow_transform as tft
import tensorflow_transform.beam as tft_beam
from tensorflow_transform.tf_metadata import dataset_metadata, schema_utils

SPEC = {"text": tf.io.FixedLenFeature([], tf.string), "x": tf.io.FixedLenFeature([], tf.float32)}

def write(out, preprocessing_fn, compat_v1):
    metadata = dataset_metadata.DatasetMetadata(schema_utils.schema_from_feature_spec(SPEC))
    rows = [{"text": b"a b", "x": 1.0}, {"text": b"c", "x": 3.0}]
    with beam.Pipeline() as pipeline, tft_beam.Context(temp_dir=tempfile.mkdtemp(), force_tf_compat_v1=compat_v1):
        transform_fn = (pipeline | beam.Create(rows), metadata) | tft_beam.AnalyzeDataset(preprocessing_fn)
        _ = transform_fn | tft_beam.WriteTransformFn(out)

def apply_pyfunc(inputs):
    doubled = tft.apply_pyfunc(lambda v: v * 2, tf.float32, False, "double", inputs["x"])
    return {"x": tft.scale_to_z_score(inputs["x"]), "y": tf.reshape(doubled, [-1])}

def py_function(inputs):
    doubled = tf.py_function(lambda v: v * 2, [inputs["x"]], tf.float32)
    return {"x": tft.scale_to_z_score(inputs["x"]), "y": tf.reshape(doubled, [-1])}

def text(inputs):
    import tensorflow_text
    return {"x": tft.scale_to_z_score(inputs["x"]), "text": tensorflow_text.normalize_utf8(inputs["text"], "NFKC")}

root = sys.argv[1]
write(root + "/tf1_pyfunc", apply_pyfunc, True)
write(root + "/py_function", py_function, False)
write(root + "/tensorflow_text", text, False)
"""


def _batches(artifacts, split: str, spec, batch_size: int = 8):
    dataset = tf.data.TFRecordDataset(artifacts.shard_paths(split)).batch(batch_size)
    return dataset.map(lambda serialized: tf.io.parse_example(serialized, spec))


def _arrays(value):
    if isinstance(value, tf.RaggedTensor):
        return [value.flat_values.numpy(), value.row_splits.numpy()]
    return [value.numpy()]


@pytest.mark.parametrize("task", ["segmentation", "classification"])
def test_the_loader_gives_tf_transforms_arrays(task, segmentation_run, classification_run):
    import tensorflow_transform as tft
    out = segmentation_run[0] if task == "segmentation" else classification_run[0]
    artifacts = load_artifacts(str(out))
    reference = tft.TFTransformOutput(artifacts.transform_dir)
    graph = TransformGraph(artifacts.transform_dir)
    assert graph.raw_feature_spec == reference.raw_feature_spec()
    layer = reference.transform_features_layer()
    compared = 0
    for split in ("val", "test"):
        for batch in _batches(artifacts, split, graph.raw_feature_spec):
            ours, theirs = graph(batch), layer(batch)
            assert sorted(ours) == sorted(theirs) == graph.output_names
            for name in ours:
                assert ours[name].dtype == theirs[name].dtype, name
                for mine, reference_array in zip(_arrays(ours[name]), _arrays(theirs[name])):
                    assert mine.dtype == reference_array.dtype and np.array_equal(mine, reference_array), name
            compared += int(tf.shape(batch["image/encoded"])[0])
    splits = artifacts.manifest["splits"]
    assert compared == splits["val"]["num_examples"] + splits["test"]["num_examples"] > 0


TEST_PACKAGES = os.path.join(ROOT, "build", "test-packages")     # requirements-tests-apart.txt (Makefile)


@pytest.fixture(scope="module")
def refused_graphs(tmp_path_factory):
    """The graphs, written in a child process that has tensorflow_text: it is installed apart from .venv, where
    tf.Transform would import it in every run."""
    assert os.path.isdir(os.path.join(TEST_PACKAGES, "tensorflow_text")), \
        f"tensorflow_text is not in {TEST_PACKAGES}: run make install (requirements-tests-apart.txt)"
    root = tmp_path_factory.mktemp("refused_graphs")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [TEST_PACKAGES, os.environ.get("PYTHONPATH")])))
    completed = subprocess.run([sys.executable, "-c", WRITE_GRAPHS, str(root)], cwd=ROOT, capture_output=True,
                               text=True, timeout=600, env=env)
    assert completed.returncode == 0, completed.stderr[-4000:]
    return root


@pytest.mark.parametrize("kind,expected", [
    ("tf1_pyfunc", "is a TF1 export (tft_beam.Context(force_tf_compat_v1=True)), which only tf.Transform can run; "
                   "it also calls Python functions (PyFuncStateless ops): re-run the pipeline, which writes TF2 graphs"),
    ("py_function", "calls Python functions (EagerPyFunc ops, from tft.apply_pyfunc or tf.py_function), which a saved "
                    "graph cannot carry: the preprocessing must use TensorFlow ops only"),
])
def test_a_graph_only_tf_transform_could_run_is_refused(refused_graphs, kind, expected):
    with pytest.raises(TransformGraphError) as error:
        TransformGraph(str(refused_graphs / kind))
    assert str(error.value) == f"the tf.Transform graph at {refused_graphs / kind}/transform_fn {expected}"


def test_the_trainer_stops_in_one_line_on_a_graph_with_ops_of_a_package_not_imported(refused_graphs,
                                                                                      segmentation_run, tmp_path):
    """The real command on a dataset whose transform graph needs tensorflow_text's ops (tensorflow_text is
    installed apart, and the trainer would not import it anyway, so its ops are not registered in that process)."""
    data = tmp_path / "data"
    shutil.copytree(segmentation_run[0], data)
    manifest = json.loads((data / "manifest.json").read_text())
    transform = data / manifest["transform_dir"] / "transform_fn"
    shutil.rmtree(transform)
    shutil.copytree(refused_graphs / "tensorflow_text" / "transform_fn", transform)
    completed = subprocess.run([sys.executable, "-m", "trainer", "--data", str(data), "--job_dir", str(tmp_path / "job"),
                                "--no_verify", "--epochs", "1", "--steps_per_epoch", "1", "--crop", "32,32"],
                               cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert completed.returncode == 2, completed.stderr[-3000:]
    assert "Traceback" not in completed.stderr
    (line,) = [line for line in completed.stderr.splitlines() if line.startswith("error: ")]
    assert line == (f"error: the tf.Transform graph at {transform} needs ops that TensorFlow {tf.__version__} here "
                    "does not have: NormalizeUTF8 (ops of a package that is not installed, such as tensorflow_text, "
                    "or of a newer TensorFlow); the trainer runs graphs of core TensorFlow ops")
