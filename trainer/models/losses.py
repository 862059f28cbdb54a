"""Losses and metrics that skip the ignore label and weight classes from stats.json."""

from typing import Optional, Sequence

import keras
import tensorflow as tf


def masked_loss(logits, labels, class_weights: Optional[Sequence[float]], ignore_label: Optional[int],
                kind: str = "ce", gamma: float = 2.0):
    """Per-example losses summed over valid pixels, and the number of valid pixels.

    Pixels equal to the ignore label contribute nothing. ``kind`` is ``ce``
    (weighted cross-entropy) or ``focal`` (Lin et al. 2017, weighted).
    Returns ``(sum of losses, count)`` so callers can average over a global
    batch (or over accumulated steps) exactly.
    """
    num_classes = logits.shape[-1]
    labels = tf.cast(labels, tf.int32)
    valid = tf.ones_like(labels, dtype=tf.bool) if ignore_label is None else tf.not_equal(labels, ignore_label)
    safe = tf.where(valid, labels, tf.zeros_like(labels))
    logits = tf.cast(logits, tf.float32)
    log_probs = tf.nn.log_softmax(logits, axis=-1)
    picked = tf.gather(log_probs, safe, axis=-1, batch_dims=len(safe.shape))
    losses = -picked
    if kind == "focal":
        losses = losses * tf.pow(1.0 - tf.exp(picked), gamma)
    elif kind != "ce":
        raise ValueError(f"unknown loss {kind!r}: use ce or focal")
    if class_weights is not None:
        weights = tf.constant(list(class_weights), tf.float32)
        if weights.shape[0] != num_classes:
            raise ValueError(f"{weights.shape[0]} class weights for {num_classes} classes")
        losses = losses * tf.gather(weights, safe)
    valid_f = tf.cast(valid, tf.float32)
    return tf.reduce_sum(losses * valid_f), tf.reduce_sum(valid_f)


class IgnoringMeanIoU(keras.metrics.MeanIoU):
    """Mean IoU over the classes, from logits, skipping pixels with the ignore label."""

    def __init__(self, num_classes: int, ignore_label: Optional[int], name: str = "mean_iou", **kwargs):
        super().__init__(num_classes=num_classes, name=name, **kwargs)
        self._ignore_label = ignore_label

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true = tf.cast(y_true, tf.int32)
        predicted = tf.argmax(y_pred, axis=-1, output_type=tf.int32)
        valid = tf.ones_like(y_true, tf.bool) if self._ignore_label is None else tf.not_equal(
            y_true, self._ignore_label)
        return super().update_state(tf.boolean_mask(y_true, valid), tf.boolean_mask(predicted, valid))
