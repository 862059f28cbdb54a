"""Training under MirroredStrategy on two logical CPUs, whole-image validation, gradient accumulation, resuming."""

import json
import subprocess
import sys

import keras
import numpy as np
import pytest

from conftest import ROOT
from trainer_jobs import segmentation_job


@pytest.fixture(scope="module")
def trained(segmentation_run, tmp_path_factory):
    out, _ = segmentation_run
    result, job_dir, log = segmentation_job(out, tmp_path_factory)
    return result, job_dir, out, log


def test_loss_goes_down_under_mirrored_strategy_on_two_cpus(trained):
    result, job_dir, _, _ = trained
    assert "MirroredStrategy" in result["strategy"]
    losses = result["history"]["loss"]
    assert len(losses) == 3 and losses[-1] < losses[0]
    log = (job_dir / "training.csv").read_text().splitlines()
    assert log[0].startswith("epoch") and len(log) == 4
    assert list((job_dir / "checkpoints").glob("epoch-*.weights.h5"))


def test_validation_runs_on_every_whole_val_image_after_each_epoch(trained):
    result, job_dir, out, log = trained
    manifest = json.loads((out / "manifest.json").read_text())
    images = manifest["splits"]["val"]["num_images"]
    assert images == 24                                  # the sample corpus: 10 % of 240 pairs
    lines = [line for line in log.splitlines() if "validation after epoch" in line]
    assert [line.split("validation after epoch ")[1].split()[0] for line in lines] == ["1", "2", "3"]
    assert all(f"on {images} whole val images (full resolution, padded as served" in line for line in lines)
    assert "ran out of data" not in log
    history = result["history"]
    assert len(history["val_loss"]) == len(history["val_mean_iou"]) == 3
    assert all(0.0 <= value <= 1.0 for value in history["val_mean_iou"] + history["val_pixel_accuracy"])
    header = (job_dir / "training.csv").read_text().splitlines()[0].split(",")
    assert {"val_loss", "val_mean_iou", "val_pixel_accuracy"} <= set(header)


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


def test_an_epoch_is_one_pass_over_the_train_records_by_default():
    from trainer.data.artifacts import Artifacts
    from trainer.training.config import parse_config
    from trainer.training.train import steps_for_one_pass
    artifacts = Artifacts(root="unused", manifest={"splits": {"train": {"num_examples": 233}}})
    assert steps_for_one_pass(artifacts, 8) == 30            # 29 full batches and one of 1 example
    assert steps_for_one_pass(artifacts, 233) == 1
    config = parse_config(["--data", "d", "--job_dir", "j"])
    assert config.steps_per_epoch is None and config.validation_steps is None
