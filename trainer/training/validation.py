"""Validation during training on whole images, as the served model sees them.

Keras's own validation would run on patch crops, batched at one fixed size, and
with ``validation_steps=None`` on a dataset of unknown length it ends every
pass with "Your input ran out of data". This callback instead runs, after each
epoch, over every image of the val split once, at full resolution, padded the
way serving pads (``trainer.data.input.make_whole_image_dataset``), with the model in
inference mode (batch-norm moving statistics), and writes into the epoch's logs:

- ``val_loss``: the training loss (same class weights) averaged over the images;
- segmentation: ``val_mean_iou`` (over the classes present in the val labels),
  ``val_pixel_accuracy`` and ``val_frequency_weighted_iou``, from one confusion
  matrix over all labelled val pixels (``trainer.evaluation.metrics``);
- classification: ``val_accuracy``, ``val_top5``.

It must come before the other callbacks, so that CSVLogger, TensorBoard and
History see these values. It runs in the process that calls it, outside the
distribution strategy's replicas; under MultiWorkerMirrored only the chief
runs it.
"""

import logging
import time
from typing import Callable, Optional, Sequence

import keras
import numpy as np
import tensorflow as tf

from trainer.evaluation.metrics import classification_report, format_segmentation_table, iou_line, segmentation_report

_LOG = logging.getLogger(__name__)


class WholeImageValidation(keras.callbacks.Callback):
    """After every epoch: loss and metrics over the whole val split at full resolution (see module doc)."""

    def __init__(self, make_dataset: Callable[[], tf.data.Dataset], task: str, num_classes: int,
                 ignore_label: Optional[int], per_example_loss: Callable, class_names: Sequence[str],
                 max_batches: Optional[int] = None):
        super().__init__()
        self._make_dataset = make_dataset          # () -> the dataset of the whole val split
        self._task = task
        self._num_classes = num_classes
        self._ignore = ignore_label
        self._per_example_loss = per_example_loss  # (labels, logits) -> float32 [B]
        self._class_names = list(class_names)
        self._max_batches = max_batches
        self._step = None
        self._dataset = None

    def _build_step(self):
        num_classes = self._num_classes
        segmentation = self._task == "segmentation"
        ignore = self._ignore

        @tf.function(reduce_retracing=True)
        def step(images, labels):
            logits = tf.cast(self.model(images, training=False), tf.float32)
            losses = self._per_example_loss(labels, logits)
            predicted = tf.argmax(logits, axis=-1, output_type=tf.int32)
            labels = tf.cast(labels, tf.int32)
            valid = tf.logical_and(labels >= 0, labels < num_classes)
            if segmentation and ignore is not None:
                valid = tf.logical_and(valid, tf.not_equal(labels, ignore))
            pairs = tf.boolean_mask(labels * num_classes + predicted, valid)
            confusion = tf.reshape(tf.math.bincount(pairs, minlength=num_classes ** 2,
                                                    maxlength=num_classes ** 2, dtype=tf.int64),
                                   [num_classes, num_classes])
            top5 = tf.constant(0, tf.int64)
            if not segmentation:
                top5 = tf.reduce_sum(tf.cast(tf.math.in_top_k(labels, logits, min(5, num_classes)), tf.int64))
            return tf.reduce_sum(losses), tf.size(losses), confusion, top5
        return step

    def on_epoch_end(self, epoch, logs=None):
        if logs is None:
            return
        if self._step is None:
            self._step = self._build_step()
            self._dataset = self._make_dataset()     # Iterated from its start at every epoch.
        started = time.monotonic()
        confusion = np.zeros([self._num_classes] * 2, np.int64)
        loss_sum, examples, top5, batches = 0.0, 0, 0, 0
        for images, labels in self._dataset:
            if self._max_batches is not None and batches >= self._max_batches:
                break
            batch_loss, count, batch_confusion, batch_top5 = self._step(images, labels)
            loss_sum += float(batch_loss)
            examples += int(count)
            confusion += batch_confusion.numpy()
            top5 += int(batch_top5)
            batches += 1
        if not examples:
            _LOG.warning("validation: the val split gave no examples")
            return
        logs["val_loss"] = loss_sum / examples
        if self._task == "segmentation":
            report = segmentation_report(confusion, self._class_names)
            logs["val_mean_iou"] = report["mean_iou"]
            logs["val_pixel_accuracy"] = report["pixel_accuracy"]
            logs["val_frequency_weighted_iou"] = report["frequency_weighted_iou"]
            _LOG.info("validation after epoch %d on %d whole val images (full resolution, padded as served, "
                      "inference-mode batch norm): loss %.4f, mean IoU %.4f, pixel accuracy %.4f; IoU per class: "
                      "%s (%.1f s)", epoch + 1, examples, logs["val_loss"], report["mean_iou"],
                      report["pixel_accuracy"], iou_line(report), time.monotonic() - started)
            _LOG.debug("\n%s", format_segmentation_table(report))
        else:
            report = classification_report(confusion, top5, self._class_names)
            logs["val_accuracy"] = report["accuracy"]
            logs["val_top5"] = report["top5_accuracy"]
            _LOG.info("validation after epoch %d on %d whole val images (resized as served, inference-mode batch "
                      "norm): loss %.4f, accuracy %.4f, top-5 %.4f (%.1f s)", epoch + 1, examples,
                      logs["val_loss"], report["accuracy"], report["top5_accuracy"], time.monotonic() - started)
