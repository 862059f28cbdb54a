"""Trained models that several trainer test modules share, made once per test session.

A module-scoped fixture runs once per test module, so the trainings live here,
cached in this module (imported once per session), and each test module's
fixture asks for them. Every training runs in a child process, as a user runs
``python -m trainer``.
"""

import json
import subprocess
import sys

from conftest import ROOT, run_cli

SEGMENTATION = {"depth": 4, "width": 8}       # 2**4: sides padded to multiples of 16 (360 -> 368, 17 -> 32)
CLASSIFICATION = {"depth": 2, "width": 8, "crop": (48, 48)}

MIRRORED_SCRIPT = """
import json, logging, sys
import tensorflow as tf
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from trainer.config import parse_config
from trainer.train import train
result = train(parse_config(sys.argv[1:]))
print("RESULT " + json.dumps({"history": result["history"], "export": result["export"],
                              "strategy": result["strategy"]}))
"""

_CACHE = {}


def _train(args, log_path):
    completed = subprocess.run([sys.executable, "-c", MIRRORED_SCRIPT, *map(str, args)], cwd=ROOT,
                               capture_output=True, text=True, timeout=900)
    log_path.write_text(completed.stdout + "\n" + completed.stderr)
    assert completed.returncode == 0, completed.stderr[-4000:]
    line = [line for line in completed.stdout.splitlines() if line.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


def segmentation_job(segmentation_out, tmp_path_factory):
    """A small U-Net trained under MirroredStrategy on two logical CPUs: (result, job_dir, log text)."""
    if "segmentation" not in _CACHE:
        job_dir = tmp_path_factory.mktemp("seg_job")
        # Unweighted loss: with median-frequency weights (35x for the rarest class) a few dozen steps of
        # random crops give too noisy an epoch mean to show the trend reliably.
        args = ["--data", segmentation_out, "--job_dir", job_dir, "--strategy", "mirrored", "--epochs", 3,
                "--steps_per_epoch", 15, "--global_batch_size", 8, "--crop", "64,64",
                "--depth", SEGMENTATION["depth"], "--width", SEGMENTATION["width"], "--learning_rate", 0.005,
                "--class_weights", "none"]
        log = job_dir.parent / f"{job_dir.name}.log"
        result = _train(args, log)
        _CACHE["segmentation"] = (result, job_dir, log.read_text())
    return _CACHE["segmentation"]


def classification_out(corpus_dir, tmp_path_factory):
    """The sample corpus's classification folders through the pipeline."""
    if "classification_out" not in _CACHE:
        out = tmp_path_factory.mktemp("cls_out")
        run_cli("--input", corpus_dir / "classification" / "images", "--output", out, "--task", "classification")
        _CACHE["classification_out"] = out
    return _CACHE["classification_out"]


def classification_job(corpus_dir, tmp_path_factory):
    """A small CNN trained a few steps on the classification sample: (result, job_dir, data folder)."""
    if "classification" not in _CACHE:
        out = classification_out(corpus_dir, tmp_path_factory)
        job_dir = tmp_path_factory.mktemp("cls_job")
        crop = ",".join(map(str, CLASSIFICATION["crop"]))
        args = ["--data", out, "--job_dir", job_dir, "--strategy", "default", "--epochs", 2, "--steps_per_epoch", 10,
                "--global_batch_size", 8, "--crop", crop, "--depth", CLASSIFICATION["depth"],
                "--width", CLASSIFICATION["width"], "--learning_rate", 0.01]
        result = _train(args, job_dir.parent / f"{job_dir.name}.log")
        _CACHE["classification"] = (result, job_dir, out)
    return _CACHE["classification"]
