"""The trainer's commands with tf.Transform and tfx-bsl made unimportable: train, export, evaluate, serve.

Both are installed in this environment (the pipeline needs them), so each command runs in a child process
whose first meta-path finder refuses any module of ``tensorflow_transform`` or ``tfx_bsl`` and writes the
name it was asked for to a file: an import attempted anywhere, even one whose ImportError is caught, is
seen. (tests/integration/test_trainer_second_tf.py runs the same commands where neither is installed.)
"""

import base64
import importlib.util
import json
import subprocess
import sys
import urllib.request

import pytest
import tensorflow as tf

from conftest import ROOT, free_port, stop_process_group, wait_for_port
from trainer.data.artifacts import load_artifacts

BLOCKED = ("tensorflow_transform", "tfx_bsl")
BLOCKING_RUNNER = """
import importlib.abc, runpy, sys
BLOCKED, LOG = ("tensorflow_transform", "tfx_bsl"), sys.argv[1]

class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            with open(LOG, "a") as log:
                log.write(name + "\\n")
            raise ImportError(f"{name} is blocked in this test")
        return None

sys.meta_path.insert(0, Refuse())
module, sys.argv = sys.argv[2], [sys.argv[2]] + sys.argv[3:]
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""


def _blocked(log, module, *args, **kwargs):
    return [sys.executable, "-c", BLOCKING_RUNNER, str(log), module, *map(str, args)]


def _run(command):
    completed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert completed.returncode == 0, completed.stderr[-4000:]
    return completed


def _test_images(out, count):
    artifacts = load_artifacts(str(out))
    spec = {"image/encoded": tf.io.FixedLenFeature([], tf.string), "image/height": tf.io.FixedLenFeature([], tf.int64),
            "image/width": tf.io.FixedLenFeature([], tf.int64)}
    records = tf.data.TFRecordDataset(artifacts.shard_paths("test")).take(count)
    return [tf.io.parse_single_example(record, spec) for record in records]


def test_train_export_evaluate_and_serve_without_tf_transform(segmentation_run, tmp_path):
    assert all(importlib.util.find_spec(name) for name in BLOCKED)          # what is blocked is installed
    out, _ = segmentation_run
    log, job_dir = tmp_path / "blocked.txt", tmp_path / "job"
    _run(_blocked(log, "trainer", "--data", out, "--job_dir", job_dir, "--epochs", 1, "--steps_per_epoch", 2,
                  "--global_batch_size", 4, "--crop", "32,32", "--width", 8, "--validation_steps", 1,
                  "--bn_recalibration_batches", 1))
    export = job_dir / "export"
    _run(_blocked(log, "trainer.evaluate", "--model", export, "--data", out, "--split", "test", "--max_examples", 4,
                  "--output", tmp_path / "eval.json"))
    figures = json.loads((tmp_path / "eval.json").read_text())
    assert figures["images"] == 4 and len(figures["confusion_matrix"]) == load_artifacts(str(out)).num_classes

    port = free_port()
    server = subprocess.Popen(_blocked(log, "trainer.serve", "--model", export, "--port", port), cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for_port(port, server, timeout=180)
        examples = _test_images(out, 2)
        body = json.dumps({"instances": [{"b64": base64.b64encode(e["image/encoded"].numpy()).decode()}
                                         for e in examples]}).encode()
        request = urllib.request.Request(f"http://localhost:{port}/v1/models/model:predict", data=body,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=300) as response:
            predictions = json.loads(response.read())["predictions"]
    finally:
        stop_process_group(server)
    assert [(p["height"], p["width"]) for p in predictions] == [
        (int(e["image/height"]), int(e["image/width"])) for e in examples]
    assert not log.exists(), f"imports attempted: {log.read_text()}"
