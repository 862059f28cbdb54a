"""Trained models that several trainer test modules share, made once per test session.

A module-scoped fixture runs once per test module, so the trainings live here, made once
for all the session's test processes (tests/shared_outputs.py), and each test module's
fixture asks for them. Every training runs in a child process, as a user runs
``python -m trainer``. The job folders are read only: a test that trains on goes elsewhere.
"""

import json
import subprocess
import sys
from pathlib import Path

from conftest import ROOT, run_cli
from shared_outputs import once, root_of

SEGMENTATION = {"depth": 4, "width": 8}       # 2**4: sides padded to multiples of 16 (360 -> 368, 17 -> 32)
CLASSIFICATION = {"depth": 2, "width": 8, "crop": (48, 48)}

MIRRORED_SCRIPT = """
import json, logging, sys
import tensorflow as tf
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from trainer.training.config import parse_config
from trainer.training.train import train
result = train(parse_config(sys.argv[1:]))
print("RESULT " + json.dumps({"history": result["history"], "export": result["export"],
                              "strategy": result["strategy"]}))
"""


def _train(args, log_path):
    completed = subprocess.run([sys.executable, "-c", MIRRORED_SCRIPT, *map(str, args)], cwd=ROOT,
                               capture_output=True, text=True, timeout=900)
    log_path.write_text(completed.stdout + "\n" + completed.stderr)
    assert completed.returncode == 0, completed.stderr[-4000:]
    line = [line for line in completed.stdout.splitlines() if line.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


def segmentation_job(segmentation_out, tmp_path_factory):
    """A small U-Net trained under MirroredStrategy on two logical CPUs: (result, job_dir, log text)."""
    def make(folder):
        job_dir = folder / "job"
        # Unweighted loss: with median-frequency weights (35x for the rarest class) a few dozen steps of
        # random crops give too noisy an epoch mean to show the trend reliably.
        args = ["--data", segmentation_out, "--job_dir", job_dir, "--strategy", "mirrored", "--epochs", 3,
                "--steps_per_epoch", 15, "--global_batch_size", 8, "--crop", "64,64",
                "--depth", SEGMENTATION["depth"], "--width", SEGMENTATION["width"], "--learning_rate", 0.005,
                "--class_weights", "none"]
        return _train(args, folder / "job.log")
    result = once(tmp_path_factory, "seg_job", make)
    folder = root_of(tmp_path_factory, "seg_job")
    return result, folder / "job", (folder / "job.log").read_text()


def classification_out(corpus_dir, tmp_path_factory):
    """The sample corpus's classification folders through the pipeline."""
    def make(folder):
        run_cli("--input", corpus_dir / "classification" / "images", "--output", folder, "--task", "classification")
        return str(folder)
    return Path(once(tmp_path_factory, "cls_data", make))


def classification_job(corpus_dir, tmp_path_factory):
    """A small CNN trained a few steps on the classification sample: (result, job_dir, data folder)."""
    out = classification_out(corpus_dir, tmp_path_factory)

    def make(folder):
        crop = ",".join(map(str, CLASSIFICATION["crop"]))
        args = ["--data", out, "--job_dir", folder / "job", "--strategy", "default", "--epochs", 2,
                "--steps_per_epoch", 10, "--global_batch_size", 8, "--crop", crop, "--depth", CLASSIFICATION["depth"],
                "--width", CLASSIFICATION["width"], "--learning_rate", 0.01]
        return _train(args, folder / "job.log")
    result = once(tmp_path_factory, "cls_job", make)
    return result, root_of(tmp_path_factory, "cls_job") / "job", out
