"""Models, losses and metrics of the trainer, on small hand-made inputs."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from trainer.models.losses import IgnoringMeanIoU, masked_loss
from trainer.models.networks import ModelConfig, build_model


def test_unet_output_shape_and_float32_head_under_mixed_precision():
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        model = build_model("segmentation", 5, ModelConfig(depth=3, width=4))
        logits = model(tf.zeros([2, 64, 96, 3]))
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert logits.shape == (2, 64, 96, 5)
    assert logits.dtype == tf.float32


def test_cnn_head_pools_instead_of_flattening():
    model = build_model("classification", 101, ModelConfig(name="cnn", depth=3, width=8))
    assert model(tf.zeros([1, 128, 128, 3])).shape == (1, 101)
    assert not any(isinstance(layer, keras.layers.Flatten) for layer in model.layers)
    dense = model.get_layer("logits")
    assert dense.kernel.shape == (32, 101)     # 4x8 channels after global average pooling, not HxWxC


def test_wrong_model_for_task_is_a_clear_error():
    with pytest.raises(ValueError, match="unet is for segmentation"):
        build_model("classification", 3, ModelConfig(name="unet"))
    with pytest.raises(ValueError, match="keras.applications"):
        build_model("classification", 3, ModelConfig(name="NoSuchNet"), input_shape=(32, 32, 3))


def test_recompute_gives_the_same_gradients():
    keras.utils.set_random_seed(0)
    plain = build_model("segmentation", 3, ModelConfig(depth=2, width=4))
    recomputed = build_model("segmentation", 3, ModelConfig(depth=2, width=4, recompute=True))
    recomputed.set_weights(plain.get_weights())
    images = tf.random.stateless_normal([2, 16, 16, 3], seed=[1, 2])
    labels = tf.random.stateless_uniform([2, 16, 16], seed=[3, 4], maxval=3, dtype=tf.int32)

    def gradients(model):
        with tf.GradientTape() as tape:
            total, count = masked_loss(model(images, training=True), labels, None, None)
            loss = total / count
        return tape.gradient(loss, model.trainable_variables)

    for a, b in zip(gradients(plain), gradients(recomputed)):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-6)


def test_masked_cross_entropy_hand_worked():
    logits = tf.constant([[[2.0, 0.0], [0.0, 0.0], [5.0, -5.0]]])     # 1 x 3 pixels x 2 classes
    labels = tf.constant([[0, 1, 255]])                                 # the last pixel is ignored
    total, count = masked_loss(logits, labels, None, 255)
    expected = np.log(1 + np.exp(-2.0)) + np.log(2.0)                   # -log softmax of the true classes
    assert count.numpy() == 2
    assert total.numpy() == pytest.approx(expected, rel=1e-5)
    weighted, _ = masked_loss(logits, labels, [1.0, 3.0], 255)
    assert weighted.numpy() == pytest.approx(np.log(1 + np.exp(-2.0)) + 3 * np.log(2.0), rel=1e-5)
    focal, _ = masked_loss(logits, labels, None, 255, kind="focal")
    p0, p1 = 1 / (1 + np.exp(-2.0)), 0.5
    assert focal.numpy() == pytest.approx(-(1 - p0) ** 2 * np.log(p0) - (1 - p1) ** 2 * np.log(p1), rel=1e-5)


def test_mean_iou_skips_the_ignore_label():
    metric = IgnoringMeanIoU(num_classes=2, ignore_label=255)
    y_true = tf.constant([[0, 0, 1, 255]])
    logits = tf.constant([[[1.0, 0.0], [0.0, 1.0], [0.0, 1.0], [0.0, 1.0]]])   # predicts 0, 1, 1, 1
    metric.update_state(y_true, logits)
    # class 0: intersection 1, union 2 -> 0.5; class 1: intersection 1, union 2 -> 0.5
    assert metric.result().numpy() == pytest.approx(0.5)


def test_recalibrated_batch_norm_statistics_average_the_batches():
    from trainer.training.batch_norm import RecalibrateBatchNorm
    momentum, batches = 0.9, 4
    model = keras.Sequential([keras.Input((3, 3, 2)), keras.layers.BatchNormalization(momentum=momentum)])
    rng = np.random.default_rng(0)
    data = [rng.normal(loc=k, scale=1 + k, size=(2, 3, 3, 2)).astype(np.float32) for k in range(batches)]
    dataset = tf.data.Dataset.from_tensor_slices((np.stack(data), np.zeros(batches))).repeat()
    strategy = tf.distribute.get_strategy()
    callback = RecalibrateBatchNorm(strategy.experimental_distribute_dataset(dataset), strategy, batches)
    callback.set_model(model)
    callback.on_epoch_end(0)
    # Batch k weighs momentum**(batches - 1 - k); statistics per channel over batch, height and width.
    weights = momentum ** np.arange(batches - 1, -1, -1)
    means = np.array([batch.mean(axis=(0, 1, 2)) for batch in data])
    variances = np.array([batch.var(axis=(0, 1, 2)) for batch in data])
    layer = model.layers[0]
    np.testing.assert_allclose(layer.moving_mean.numpy(), weights @ means / weights.sum(), rtol=1e-5)
    np.testing.assert_allclose(layer.moving_variance.numpy(), weights @ variances / weights.sum(), rtol=1e-4)
