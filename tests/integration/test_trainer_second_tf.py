"""The trainer on another TensorFlow: its own install with TensorFlow 2.20, on data the pipeline wrote with 2.21.

A second virtualenv holds ``requirements-trainer.txt`` and ``tensorflow==2.20.0`` (the ops of
``tensorflow-tpu`` 2.20, PyPI's newest TPU build) and nothing else: no Beam, no tf.Transform, no tfx-bsl.
It is built here on first use, under build/venvs/, keyed by the requirements file's digest (a clean
clone downloads about 0.6 GB and installs 2.1 GB; docs/testing.md), and reused after. There, on the
sample corpus's outputs written by the pipeline under this environment's TensorFlow 2.21:

- the decoded and transformed arrays of both tasks are identical to 2.21's;
- the trainer trains and exports, the export serves over HTTP, and ``trainer.evaluate`` gives the same
  confusion matrix as under 2.21 on the same model (2.20's export and 2.21's);
- ``--strategy tpu --tpu local`` ends in one line saying that no TPU was found.
"""

import base64
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
import tensorflow as tf

from conftest import ROOT, free_port, stop_process_group, wait_for_port
from trainer.data.artifacts import load_artifacts

sys.path.insert(0, os.path.join(ROOT, "tests", "end_to_end"))   # the trained models the trainer's tests share
from trainer_jobs import segmentation_job  # noqa: E402

SECOND_TF = "2.20.0"
REQUIREMENTS = Path(ROOT, "requirements-trainer.txt")
NOT_THERE = ("apache-beam", "tensorflow-transform", "tfx-bsl", "tensorflow-metadata", "tf-keras")

ARRAYS = """
import sys
import numpy as np
import tensorflow as tf
from trainer.data.artifacts import load_artifacts
from trainer.data.decode import Decoder
from trainer.data.transform_graph import TransformGraph

arrays = {}
for task, root in zip(sys.argv[2::2], sys.argv[3::2]):
    artifacts = load_artifacts(root)
    records = list(tf.data.TFRecordDataset(artifacts.shard_paths("val")).take(6))
    direct, through_graph = Decoder(artifacts, probe=records[0]), Decoder(artifacts)
    assert direct.direct and not through_graph.direct
    for index, record in enumerate(records):
        for way, decoder in (("direct", direct), ("graph", through_graph)):
            for name, value in decoder(record).items():
                arrays[f"{task}/{index}/{way}/{name}"] = value.numpy()
        arrays[f"{task}/{index}/normalised"] = direct.normalise(direct(record)["image"]).numpy()
    graph = TransformGraph(artifacts.transform_dir)
    transformed = graph(tf.io.parse_example(tf.stack(records), graph.raw_feature_spec))
    for name, value in transformed.items():
        arrays[f"{task}/transformed/{name}"] = value.flat_values.numpy() if hasattr(value, "flat_values") else value.numpy()
np.savez(sys.argv[1], **arrays)
print(tf.__version__)
"""


def _run(command, timeout=900, **kwargs):
    completed = subprocess.run(list(map(str, command)), capture_output=True, text=True, timeout=timeout, **kwargs)
    assert completed.returncode == 0, f"{command}\n{completed.stdout[-2000:]}\n{completed.stderr[-4000:]}"
    return completed


def build_second_tf_venv() -> Path:
    """The virtualenv's python: requirements-trainer.txt and tensorflow==2.20.0, built once per digest."""
    key = hashlib.sha256(REQUIREMENTS.read_bytes() + f"tensorflow=={SECOND_TF}".encode()).hexdigest()[:12]
    venvs = Path(ROOT, "build", "venvs")
    venvs.mkdir(parents=True, exist_ok=True)
    venv = venvs / f"trainer-tf{SECOND_TF}-{key}"
    python = venv / "bin" / "python"
    with open(venvs / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)            # two test runs at once build it once
        if not (venv / ".complete").exists():
            shutil.rmtree(venv, ignore_errors=True)
            _run([sys.executable, "-m", "venv", venv])
            completed = subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-cache-dir", "-r", REQUIREMENTS,
                                        f"tensorflow=={SECOND_TF}"], capture_output=True, text=True, timeout=1800)
            if completed.returncode != 0:
                shutil.rmtree(venv, ignore_errors=True)
                pytest.skip(f"pip could not install tensorflow=={SECOND_TF}: {completed.stderr.strip()[-500:]}")
            (venv / ".complete").write_text(f"requirements-trainer.txt + tensorflow=={SECOND_TF}\n")
    return python


@pytest.fixture(scope="module")
def second_tf():
    python = build_second_tf_venv()
    installed = {line.split("==")[0].lower() for line in _run([python, "-m", "pip", "freeze"]).stdout.split()}
    assert not installed & set(NOT_THERE), installed & set(NOT_THERE)
    version = _run([python, "-c", "import tensorflow as tf; print(tf.__version__)"], cwd=ROOT).stdout.split()[-1]
    assert version == SECOND_TF and tf.__version__ != SECOND_TF
    return python


def test_decoded_and_transformed_arrays_are_identical_to_2_21s(second_tf, segmentation_run, classification_run,
                                                              tmp_path):
    import numpy as np
    data = ["segmentation", segmentation_run[0], "classification", classification_run[0]]
    loaded = {}
    for name, python in (("here", sys.executable), ("second", second_tf)):
        _run([python, "-c", ARRAYS, tmp_path / f"{name}.npz", *data], cwd=ROOT)
        loaded[name] = np.load(tmp_path / f"{name}.npz")
    here, second = loaded["here"], loaded["second"]
    assert sorted(here.files) == sorted(second.files) and len(here.files) > 60
    for key in here.files:
        assert here[key].dtype == second[key].dtype and np.array_equal(here[key], second[key]), key


def _evaluate(python, export, out, path):
    _run([python, "-m", "trainer.evaluate", "--model", export, "--data", out, "--split", "test", "--output", path],
         cwd=ROOT)
    return json.loads(Path(path).read_text())


def _serve_one(python, export, out):
    """One test image through ``python -m trainer.serve`` of ``python``: the prediction's size and the image's."""
    artifacts = load_artifacts(str(out))
    record = next(iter(tf.data.TFRecordDataset(artifacts.shard_paths("test"))))
    spec = {name: tf.io.FixedLenFeature([], dtype) for name, dtype in
            (("image/encoded", tf.string), ("image/height", tf.int64), ("image/width", tf.int64))}
    example = tf.io.parse_single_example(record, spec)
    port = free_port()
    server = subprocess.Popen([str(python), "-m", "trainer.serve", "--model", str(export), "--port", str(port)],
                              cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for_port(port, server, timeout=180)
        body = json.dumps({"instances": [{"b64": base64.b64encode(example["image/encoded"].numpy()).decode()}]})
        request = urllib.request.Request(f"http://localhost:{port}/v1/models/model:predict", data=body.encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=300) as response:
            (prediction,) = json.loads(response.read())["predictions"]
    finally:
        stop_process_group(server)
    return (prediction["height"], prediction["width"]), (int(example["image/height"]), int(example["image/width"]))


def test_it_trains_exports_serves_and_evaluates_as_2_21_does(second_tf, segmentation_run, tmp_path_factory,
                                                             tmp_path):
    out, _ = segmentation_run
    job_dir = tmp_path / "job"
    trained = _run([second_tf, "-m", "trainer", "--data", out, "--job_dir", job_dir, "--epochs", 1,
                    "--steps_per_epoch", 3, "--global_batch_size", 4, "--crop", "64,64", "--width", 8,
                    "--validation_steps", 1, "--bn_recalibration_batches", 2], cwd=ROOT)
    assert trained.stdout.splitlines()[-1].startswith("trained 1 epoch(s)") and "Traceback" not in trained.stderr
    export_2_20 = job_dir / "export"
    served, image = _serve_one(second_tf, export_2_20, out)
    assert served == image
    export_2_21 = segmentation_job(out, tmp_path_factory)[0]["export"]
    for name, export in (("2.20", export_2_20), ("2.21", export_2_21)):
        under_2_20 = _evaluate(second_tf, export, out, tmp_path / f"{name}-on-2.20.json")
        under_2_21 = _evaluate(sys.executable, export, out, tmp_path / f"{name}-on-2.21.json")
        assert under_2_20["images"] == under_2_21["images"] > 0 and not under_2_20["failed"]
        assert under_2_20["confusion_matrix"] == under_2_21["confusion_matrix"], name


def test_tpu_local_says_no_tpu_was_found(second_tf, segmentation_run, tmp_path):
    env = {name: value for name, value in os.environ.items() if name not in ("TPU_NAME", "TF_CONFIG")}
    completed = subprocess.run([str(second_tf), "-m", "trainer", "--data", str(segmentation_run[0]), "--job_dir",
                                str(tmp_path / "job"), "--strategy", "tpu", "--tpu", "local"], cwd=ROOT,
                               capture_output=True, text=True, timeout=300, env=env)
    assert completed.returncode == 2, completed.stderr[-3000:]
    assert completed.stderr.strip().splitlines() == [
        "error: --strategy tpu: no TPU was found: --tpu local means this machine's TPU chips, and it has none (no "
        "Google TPU among its PCI devices, no /dev/accel*)"]
