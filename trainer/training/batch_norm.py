"""Batch-norm statistics re-estimated for the current weights before validation and export ("precise BN").

In training mode a batch-norm layer normalises with the statistics of the batch; in
inference mode (validation, the served model) with its moving mean and variance,
an exponential average over past batches: ``moving = m * moving + (1 - m) * batch``
with momentum m = 0.99. Those lag behind the weights: after 40 steps they still
hold 0.99**40 = 67 % of their initial values (mean 0, variance 1), and while the
weights move fast they describe the network of about a hundred steps earlier.
The inference-mode network then labels far worse than the trained one (docs/training.md,
"Validation that follows training", has the measurements).

``recalibrate`` re-estimates them from ``batches`` training batches run forward in
training mode (no gradient, no weight change), as Wu and Johnson ("Rethinking
'Batch' in BatchNorm", 2021) recommend: it sets every moving mean and variance
to zero, runs the batches, so that each layer's moving value becomes
``(1 - m) * sum_k m**(K-k) * batch_k``, and divides by ``1 - m**K``, which leaves
an average of the K batches' statistics (weights between m**(K-1) and 1). The
forward passes run in the distribution strategy's replicas, so synchronized
batch norm reduces the statistics over all replicas and workers, and every
worker ends with the same values.
"""

import logging
import time
from typing import List

import keras
import tensorflow as tf

_LOG = logging.getLogger(__name__)


def batch_norm_layers(model: keras.Model) -> List[keras.layers.BatchNormalization]:
    """The batch-norm layers that train: a frozen one (a frozen encoder's) runs in inference mode, so its
    statistics are neither updated by the forward passes nor re-estimated."""
    return [layer for layer in model._flatten_layers(include_self=False)          # noqa: SLF001 (Keras API)
            if isinstance(layer, keras.layers.BatchNormalization) and layer.trainable]


class RecalibrateBatchNorm(keras.callbacks.Callback):
    """At the end of every epoch (before validation and checkpoints): the moving statistics re-estimated on
    ``batches`` batches of the training data, on every worker."""

    def __init__(self, dataset, strategy: tf.distribute.Strategy, batches: int):
        super().__init__()
        self._dataset = dataset              # the distributed training dataset (repeats): its own iterator here
        self._strategy = strategy
        self._batches = batches
        self._iterator = None
        self._step = None

    def _build_step(self):
        model = self.model

        @tf.function
        def forward(iterator):
            def replica_step(images, labels):
                model(images, training=True)           # updates the moving statistics; no gradient
            self._strategy.run(replica_step, args=next(iterator))
        return forward

    def recalibrate(self) -> None:
        layers = batch_norm_layers(self.model)
        if not layers or self._batches < 1:
            return
        started = time.monotonic()
        if self._iterator is None:
            self._iterator = iter(self._dataset)
            self._step = self._build_step()
        for layer in layers:
            layer.moving_mean.assign(tf.zeros_like(layer.moving_mean))
            layer.moving_variance.assign(tf.zeros_like(layer.moving_variance))
        for _ in range(self._batches):
            self._step(self._iterator)
        for layer in layers:
            correction = 1.0 - layer.momentum ** self._batches
            layer.moving_mean.assign(layer.moving_mean / correction)
            layer.moving_variance.assign(layer.moving_variance / correction)
        _LOG.info("batch norm: moving statistics of %d layers re-estimated on %d training batches (%.1f s)",
                  len(layers), self._batches, time.monotonic() - started)

    def on_epoch_end(self, epoch, logs=None):
        self.recalibrate()
