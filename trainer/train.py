"""Training: strategy, distributed tf.data input, model, loss, callbacks, resume and export."""

import dataclasses
import json
import logging
import os
from typing import Dict, List, Tuple

import keras
import numpy as np
import tensorflow as tf
import tensorflow_transform as tft

from trainer.artifacts import Artifacts, load_artifacts, verify_dataset
from trainer.config import TrainConfig
from trainer.data import InputConfig, PipelineShard, make_dataset, shard_for_pipeline
from trainer.losses import IgnoringMeanIoU, masked_loss
from trainer.models import ModelConfig, build_model
from trainer.strategy import choose_strategy, is_chief, mixed_precision_policy, worker_dir

_LOG = logging.getLogger(__name__)
EXPORT_DIR = "export"
INPUT_SHARDS = "input_shards.json"      # What each input pipeline of this worker read, per split.


class MaskedSegmentationLoss(keras.losses.Loss):
    """Per-example weighted CE or focal loss over the pixels that are not the ignore label."""

    def __init__(self, class_weights, ignore_label, kind="ce", name="masked_loss"):
        super().__init__(name=name)
        self._class_weights = None if class_weights is None else list(class_weights)
        self._ignore_label = ignore_label
        self._kind = kind

    def call(self, y_true, y_pred):
        def one(pair):
            total, count = masked_loss(pair[1][tf.newaxis], pair[0][tf.newaxis], self._class_weights,
                                       self._ignore_label, self._kind)
            return total / tf.maximum(count, 1.0)
        return tf.map_fn(one, (tf.cast(y_true, tf.int32), tf.cast(y_pred, tf.float32)),
                         fn_output_signature=tf.float32)


def class_weights_for(artifacts: Artifacts, choice: str):
    if choice == "none" or not artifacts.stats:
        return None
    weights = np.asarray(artifacts.stats["class_weights"][choice], dtype=np.float64)
    return np.where(weights > 0, weights, 1.0).tolist()    # a class absent from train keeps weight 1


def _input_config(config: TrainConfig, per_replica_batch: int, training: bool) -> InputConfig:
    return InputConfig(batch_size=per_replica_batch, crop=config.crop, crop_sampling=config.crop_sampling,
                       augment=training, shuffle_buffer=config.shuffle_buffer,
                       cache_dir=None if config.cache == "none" else config.cache,
                       drop_remainder=True)


def split_dataset(artifacts: Artifacts, config: TrainConfig, split: str, training: bool,
                  context: tf.distribute.InputContext) -> Tuple[tf.data.Dataset, List[PipelineShard]]:
    """One input pipeline's batches of ``split`` and the shards it reads; ``context`` says which pipeline.

    Each worker reads its own files: the InputContext (as ``distribute_datasets_from_function`` passes it)
    says which input pipeline this is.
    """
    batch = context.get_per_replica_batch_size(config.global_batch_size)
    input_config = _input_config(config, batch, training)
    strata = artifacts.strata(split) if training and config.sampling == "strata" else []
    if not strata:
        part = shard_for_pipeline(artifacts.shard_paths(split), context.num_input_pipelines,
                                  context.input_pipeline_id)
        return make_dataset(artifacts, split, input_config, training, part), [part]
    parts = [shard_for_pipeline(paths, context.num_input_pipelines, context.input_pipeline_id)
             for _, paths in strata]
    mixed = tf.data.Dataset.sample_from_datasets(
        [make_dataset(artifacts, split, dataclasses.replace(input_config, batch_size=1), True, part).unbatch()
         for part in parts], weights=[w for w, _ in strata], seed=config.seed)
    return mixed.batch(batch, drop_remainder=True).prefetch(tf.data.AUTOTUNE), parts


def build_compiled_model(artifacts: Artifacts, config: TrainConfig, task: str,
                         sync_batch_norm: bool = False) -> keras.Model:
    name = config.model if config.model != "auto" else ("unet" if task == "segmentation" else "cnn")
    model = build_model(task, artifacts.num_classes,
                        ModelConfig(name=name, depth=config.depth, width=config.width, recompute=config.recompute,
                                    weights=config.weights, sync_batch_norm=sync_batch_norm),
                        input_shape=(*config.crop, 3))
    optimizer = keras.optimizers.Adam(
        config.learning_rate,
        gradient_accumulation_steps=config.grad_accum_steps if config.grad_accum_steps > 1 else None)
    weights = class_weights_for(artifacts, config.class_weights)
    if task == "segmentation":
        model.compile(optimizer=optimizer, loss=MaskedSegmentationLoss(weights, artifacts.ignore_label, config.loss),
                      metrics=[IgnoringMeanIoU(artifacts.num_classes, artifacts.ignore_label)])
    else:
        model.compile(optimizer=optimizer, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["accuracy", keras.metrics.SparseTopKCategoricalAccuracy(5, name="top5")])
    return model


def _record_input_shards(read: Dict[str, List[PipelineShard]], out_dir: str) -> None:
    """Log and write to ``out_dir/input_shards.json`` the files (and records) each input pipeline read."""
    for split, parts in read.items():
        for part in parts:
            records = (f", every {part.record_shards}th record from #{part.pipeline_id}"
                       if part.record_shards > 1 else "")
            _LOG.info("%s: input pipeline %d of %d reads %d file(s)%s: %s", split, part.pipeline_id,
                      part.num_pipelines, len(part.files), records, ", ".join(map(os.path.basename, part.files)))
    with tf.io.gfile.GFile(os.path.join(out_dir, INPUT_SHARDS), "w") as handle:
        json.dump({split: [dataclasses.asdict(part) for part in parts] for split, parts in read.items()}, handle,
                  indent=1)


def train(config: TrainConfig) -> dict:
    """Train and export; returns the history, the export path (None on a worker that is not the chief) and
    the folder this process wrote to.

    Under MultiWorkerMirroredStrategy every worker runs this with the same config; the chief writes to
    ``--job_dir``, the other workers to ``job_dir/workertemp_<id>`` (their backup for resuming and
    checkpoints; their export is deleted).
    """
    keras.utils.set_random_seed(config.seed)
    artifacts = load_artifacts(config.data)
    task = artifacts.task if config.task == "auto" else config.task
    if config.verify_shards:
        verify_dataset(artifacts)
    strategy, why = choose_strategy(config.strategy, config.tpu)
    _LOG.info("strategy: %s (%s)", type(strategy).__name__, why)
    policy = mixed_precision_policy(config.mixed_precision, strategy)
    if policy:
        keras.mixed_precision.set_global_policy(policy)
    _LOG.info("mixed precision: %s", policy or "off")
    out_dir = worker_dir(config.job_dir, strategy)
    with strategy.scope():
        # Several replicas: batch norm statistics over the global batch, so every worker keeps the same
        # moving mean and variance (per-replica statistics would differ from worker to worker).
        model = build_compiled_model(artifacts, config, task, sync_batch_norm=strategy.num_replicas_in_sync > 1)
    read: Dict[str, List[PipelineShard]] = {"train": [], "val": []}

    def dataset_fn(split: str, training: bool):
        def make(context: tf.distribute.InputContext) -> tf.data.Dataset:
            dataset, parts = split_dataset(artifacts, config, split, training, context)
            read[split].extend(parts)
            return dataset
        return make

    train_data = strategy.distribute_datasets_from_function(dataset_fn("train", True))
    val_data = None
    if "val" in artifacts.manifest["splits"]:
        val_data = strategy.distribute_datasets_from_function(dataset_fn("val", False))
    if "://" not in out_dir:
        os.makedirs(out_dir, exist_ok=True)
    _record_input_shards(read, out_dir)
    callbacks = [
        keras.callbacks.BackupAndRestore(os.path.join(out_dir, "backup")),
        keras.callbacks.ModelCheckpoint(os.path.join(out_dir, "checkpoints", "epoch-{epoch:04d}.weights.h5"),
                                        save_weights_only=True),
        keras.callbacks.TensorBoard(os.path.join(out_dir, "logs")),
        keras.callbacks.CSVLogger(os.path.join(out_dir, "training.csv"), append=True),
    ]
    history = model.fit(train_data, epochs=config.epochs, steps_per_epoch=config.steps_per_epoch,
                        validation_data=val_data, validation_steps=config.validation_steps, callbacks=callbacks,
                        verbose=2)
    export_path = export_serving_model(model, artifacts, os.path.join(out_dir, EXPORT_DIR), task)
    if not is_chief(strategy):
        tf.io.gfile.rmtree(export_path)        # Every worker takes part in saving; only the chief's export is kept.
        export_path = None
    return {"history": history.history, "export": export_path, "strategy": why, "job_dir": out_dir}


class ServingModule(tf.Module):
    """Encoded image bytes -> class map (segmentation) or class probabilities, with the same preprocessing."""

    def __init__(self, model: keras.Model, artifacts: Artifacts, task: str):
        super().__init__()
        self.model = model
        transform_output = tft.TFTransformOutput(artifacts.transform_dir)
        self.transform = transform_output.transform_features_layer()
        self._raw_spec = transform_output.raw_feature_spec()
        self._task = task

    def _raw_features(self, encoded):
        features = {}
        for name, spec in self._raw_spec.items():
            shape = [1] + list(spec.shape)
            features[name] = (tf.reshape(encoded, [1]) if name == "image/encoded" else
                              tf.fill(shape, "") if spec.dtype == tf.string else tf.zeros(shape, spec.dtype))
        return features

    @tf.function(input_signature=[tf.TensorSpec([], tf.string, name="image_bytes")])
    def serve(self, image_bytes):
        transformed = self.transform(self._raw_features(image_bytes))
        image = tf.reshape(transformed["image"][0], transformed["image_shape"][0])[tf.newaxis]
        logits = tf.cast(self.model(image, training=False), tf.float32)
        if self._task == "segmentation":
            return {"class_map": tf.argmax(logits[0], axis=-1, output_type=tf.int32)}
        return {"probabilities": tf.nn.softmax(logits[0])}


def export_serving_model(model: keras.Model, artifacts: Artifacts, path: str, task: str) -> str:
    module = ServingModule(model, artifacts, task)
    tf.saved_model.save(module, path, signatures={"serving_default": module.serve})
    _LOG.info("exported the serving model to %s", path)
    return path
