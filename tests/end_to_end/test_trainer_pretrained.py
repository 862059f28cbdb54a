"""Segmentation with a pretrained encoder on real shards: train, freeze then fine-tune, export, serve.

The weights file is one the test saves (a keras.applications MobileNetV2 without its top, seeded): nothing is
downloaded. DeepLabV3+ trains under MirroredStrategy on two logical CPUs with --recompute and bfloat16 mixed
precision, the encoder frozen for its first epoch; the export is served from a fresh process on images of
three sizes. A weights file that does not fit, and ImageNet weights that cannot be downloaded, stop the
command in one line before training.
"""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from conftest import ROOT, free_port
from trainer.models.networks import ModelConfig, backbone_of, build_model
from trainer_jobs import _train

SERVE_SIZES = """
import json, sys
import tensorflow as tf
serve = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
images = [tf.io.encode_png(tf.cast(tf.random.stateless_uniform([h, w, 3], [1, i], 0, 255), tf.uint8))
          for i, (h, w) in enumerate([(360, 480), (17, 23), (100, 75)])]
out = serve(image_bytes=tf.stack(images))
print(json.dumps([out["height"].numpy().tolist(), out["width"].numpy().tolist(), int(out["class_map"].numpy().max()),
                  int(tf.reduce_min(out["class_map"][1, :17, :23]))]))
"""


@pytest.fixture(scope="module")
def mobilenet_weights(tmp_path_factory):
    keras.utils.set_random_seed(7)
    path = tmp_path_factory.mktemp("weights") / "mobilenet_v2_notop.weights.h5"
    keras.applications.MobileNetV2(include_top=False, weights=None, input_shape=(None, None, 3)).save_weights(path)
    return path


def test_deeplab_frozen_then_fine_tuned_on_two_replicas_exports_and_serves(segmentation_run, mobilenet_weights,
                                                                          tmp_path):
    out, _ = segmentation_run
    job_dir = tmp_path / "job"
    result = _train(["--data", out, "--job_dir", job_dir, "--strategy", "mirrored", "--model", "deeplabv3plus",
                     "--backbone", "MobileNetV2", "--weights", mobilenet_weights, "--freeze_backbone_epochs", 1,
                     "--backbone_learning_rate", 1e-3, "--learning_rate", 1e-2, "--epochs", 2, "--steps_per_epoch", 3,
                     "--global_batch_size", 4, "--crop", "64,64", "--width", 8, "--recompute",
                     "--mixed_precision", "bfloat16", "--validation_steps", 1, "--bn_recalibration_batches", 2],
                    tmp_path / "train.log")
    assert "MirroredStrategy" in result["strategy"] and len(result["history"]["loss"]) == 2
    log = (tmp_path / "train.log").read_text()
    assert "epoch 2: the encoder is trainable from now on" in log
    # Frozen for epoch 1: the encoder still holds the file's weights (batch-norm statistics included);
    # fine-tuned in epoch 2: it has moved.
    keras.mixed_precision.set_global_policy("float32")
    reference = keras.applications.MobileNetV2(include_top=False, weights=None, input_shape=(None, None, 3))
    reference.load_weights(mobilenet_weights)
    model = build_model("segmentation", 8, ModelConfig(name="deeplabv3plus", backbone="MobileNetV2", width=8,
                                                      recompute=True))   # the layout the checkpoints were saved in
    expected = {v.path: np.array(v) for v in reference.weights}          # "Conv1/kernel", ...: layer/variable
    for epoch, frozen in ((1, True), (2, False)):
        model.load_weights(job_dir / "checkpoints" / f"epoch-000{epoch}.weights.h5")
        pairs = [(np.array(v), expected[v.path]) for v in backbone_of(model).weights]
        assert len(pairs) > 100
        same = all(np.array_equal(a, b) for a, b in pairs)
        assert same == frozen, epoch
    served = subprocess.run([sys.executable, "-c", SERVE_SIZES, result["export"]], cwd=ROOT, capture_output=True,
                            text=True, timeout=600)
    assert served.returncode == 0, served.stderr[-3000:]
    heights, widths, highest, lowest_in_small = json.loads(served.stdout.strip().splitlines()[-1])
    assert heights == [360, 17, 100] and widths == [480, 23, 75] and highest < 8 and lowest_in_small >= 0


def test_a_unet_on_a_pretrained_encoder_trains_and_exports(segmentation_run, mobilenet_weights, tmp_path):
    """The encoder U-Net on the saved MobileNetV2 file (ResNet50 and EfficientNetV2S are built and run in
    tests/unit/test_trainer_backbones.py; training ResNet50 here would cost minutes of the suite)."""
    out, _ = segmentation_run
    result = _train(["--data", out, "--job_dir", tmp_path / "job", "--strategy", "default", "--model", "unet",
                     "--backbone", "MobileNetV2", "--weights", mobilenet_weights, "--epochs", 1, "--steps_per_epoch", 2,
                     "--global_batch_size", 2, "--crop", "64,64", "--width", 8, "--validation_steps", 1,
                     "--bn_recalibration_batches", 1], tmp_path / "train.log")
    served = subprocess.run([sys.executable, "-c", SERVE_SIZES, result["export"]], cwd=ROOT, capture_output=True,
                            text=True, timeout=600)
    assert served.returncode == 0, served.stderr[-3000:]
    assert json.loads(served.stdout.strip().splitlines()[-1])[:2] == [[360, 17, 100], [480, 23, 75]]


def _refused(out, job_dir, *args, env=None):
    completed = subprocess.run([sys.executable, "-m", "trainer", "--data", str(out), "--job_dir", str(job_dir),
                                "--model", "deeplabv3plus", "--epochs", "1", "--steps_per_epoch", "1", "--crop", "32,32",
                                *map(str, args)], cwd=ROOT, capture_output=True, text=True, timeout=600,
                               env={**os.environ, **(env or {})})
    assert completed.returncode == 2, completed.stderr[-3000:]
    assert "Traceback" not in completed.stderr and not list(job_dir.rglob("*.weights.h5"))
    (line,) = [line for line in completed.stderr.splitlines() if line.startswith("error: ")]
    return line


def test_weights_that_do_not_fit_or_cannot_be_had_stop_before_training(segmentation_run, tmp_path):
    out, _ = segmentation_run
    keras.applications.ResNet50(include_top=False, weights=None).save_weights(tmp_path / "resnet50.weights.h5")
    line = _refused(out, tmp_path / "job1", "--weights", tmp_path / "resnet50.weights.h5")
    assert line.startswith(f"error: --weights {tmp_path / 'resnet50.weights.h5'}: not the weights of MobileNetV2 "
                           "without its top (include_top=False): ")
    # Keras's own download, through a proxy where nothing listens and with an empty cache: one line.
    closed = free_port()
    line = _refused(out, tmp_path / "job2", "--weights", "imagenet",
                    env={name: f"http://127.0.0.1:{closed}" for name in ("HTTPS_PROXY", "https_proxy")}
                    | {"KERAS_HOME": str(tmp_path / "keras_home")})
    assert line.startswith("error: --weights imagenet: Keras could not get the ImageNet weights of MobileNetV2 (")
    assert line.endswith("pass --weights FILE")
