"""Training under MirroredStrategy on two logical CPUs, export and serving, gradient accumulation."""

import io
import json
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from conftest import ROOT

MIRRORED_SCRIPT = """
import json, sys
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from trainer.config import parse_config
from trainer.train import train
result = train(parse_config(sys.argv[1:]))
strategy = tf.distribute.get_strategy()
print("RESULT " + json.dumps({"loss": result["history"]["loss"], "export": result["export"],
                              "strategy": result["strategy"]}))
"""


@pytest.fixture(scope="module")
def trained(segmentation_run, tmp_path_factory):
    out, _ = segmentation_run
    job_dir = tmp_path_factory.mktemp("job")
    # Unweighted loss: with median-frequency weights (35x for the rarest class) a few dozen steps of
    # random crops give too noisy an epoch mean to show the trend reliably.
    args = ["--data", str(out), "--job_dir", str(job_dir), "--strategy", "mirrored", "--epochs", "3",
            "--steps_per_epoch", "15", "--global_batch_size", "8", "--crop", "64,64", "--depth", "2",
            "--width", "8", "--validation_steps", "2", "--learning_rate", "0.005", "--class_weights", "none"]
    completed = subprocess.run([sys.executable, "-c", MIRRORED_SCRIPT, *args], cwd=ROOT, capture_output=True,
                               text=True, timeout=900)
    assert completed.returncode == 0, completed.stderr[-4000:]
    line = [l for l in completed.stdout.splitlines() if l.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):]), job_dir, out


def test_loss_goes_down_under_mirrored_strategy_on_two_cpus(trained):
    result, job_dir, _ = trained
    assert "MirroredStrategy" in result["strategy"]
    losses = result["loss"]
    assert len(losses) == 3 and losses[-1] < losses[0]
    log = (job_dir / "training.csv").read_text().splitlines()
    assert log[0].startswith("epoch") and len(log) == 4
    assert list((job_dir / "checkpoints").glob("epoch-*.weights.h5"))


def test_exported_model_serves_raw_bytes_in_a_fresh_process(trained):
    result, _, out = trained
    manifest = json.loads((out / "manifest.json").read_text())
    shard = out / manifest["data_dir"] / manifest["splits"]["test"]["shards"][0]["path"]
    raw = next(iter(tf.data.TFRecordDataset(str(shard))))
    image_bytes = tf.train.Example.FromString(raw.numpy()).features.feature["image/encoded"].bytes_list.value[0]
    height, width = np.asarray(Image.open(io.BytesIO(image_bytes))).shape[:2]
    script = ("import sys, tensorflow as tf; m = tf.saved_model.load(sys.argv[1]); "
              "out = m.signatures['serving_default'](image_bytes=tf.constant(open(sys.argv[2], 'rb').read())); "
              "c = out['class_map'].numpy(); print('SHAPE', c.shape[0], c.shape[1], c.min(), c.max())")
    image_path = out.parent / "serving_probe.bin"
    image_path.write_bytes(image_bytes)
    completed = subprocess.run([sys.executable, "-c", script, result["export"], str(image_path)], capture_output=True,
                               text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    _, h, w, low, high = [l for l in completed.stdout.splitlines() if l.startswith("SHAPE")][0].split()
    assert (int(h), int(w)) == (height, width)
    assert 0 <= int(low) <= int(high) < manifest["num_classes"]


def test_gradient_accumulation_matches_one_large_batch():
    def model_and_optimizer(accumulate):
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(5, activation="relu"), keras.layers.Dense(3)])
        optimizer = keras.optimizers.SGD(0.1, gradient_accumulation_steps=accumulate)
        model.compile(optimizer=optimizer,
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        return model

    rng = np.random.default_rng(0)
    x = rng.normal(size=(8, 6)).astype("float32")
    y = rng.integers(0, 3, size=8)
    accumulated = model_and_optimizer(2)
    accumulated.train_on_batch(x[:4], y[:4])
    accumulated.train_on_batch(x[4:], y[4:])
    large = model_and_optimizer(None)
    large.train_on_batch(x, y)
    for a, b in zip(accumulated.get_weights(), large.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_a_killed_run_resumes_from_the_saved_epoch(segmentation_run, tmp_path):
    import signal
    import time
    out, _ = segmentation_run
    args = [sys.executable, "-m", "trainer", "--data", str(out), "--job_dir", str(tmp_path), "--epochs", "4",
            "--steps_per_epoch", "15", "--global_batch_size", "4", "--crop", "64,64", "--depth", "2", "--width", "8",
            "--validation_steps", "1", "--no_verify_shards"]
    log = tmp_path / "training.csv"
    first = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and first.poll() is None:
        if log.exists() and len(log.read_text().splitlines()) >= 2:      # header + epoch 0 done
            break
        time.sleep(0.2)
    assert first.poll() is None, "the first run ended before it could be killed"
    first.send_signal(signal.SIGKILL)
    first.wait()
    done_before = [int(line.split(",")[0]) for line in log.read_text().splitlines()[1:]]
    assert done_before and max(done_before) < 3
    completed = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert completed.returncode == 0, completed.stderr[-3000:]
    epochs = [int(line.split(",")[0]) for line in log.read_text().splitlines() if line[:1].isdigit()]
    resumed = epochs[len(done_before):]
    assert resumed and resumed[0] == max(done_before) + 1, (done_before, resumed)
    assert resumed[-1] == 3
