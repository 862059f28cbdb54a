"""Training: strategy, distributed tf.data input, model, loss, callbacks, resume and export."""

import dataclasses
import json
import logging
import math
import os
import time
from typing import Dict, List, Optional, Tuple

import keras
import numpy as np
import tensorflow as tf

from trainer.data.artifacts import ArtifactError, Artifacts, load_artifacts
from trainer.training.batch_norm import RecalibrateBatchNorm
from trainer.training.config import TrainConfig
from trainer.data.balance import RepeatCounts, class_repeat_factors, records_per_epoch, sampling_for, threshold_for
from trainer.data.input import InputConfig, PipelineShard, make_dataset, make_whole_image_dataset, shard_for_pipeline
from trainer.export.signature import ServingConfig, export_serving_model
from trainer.models.losses import IgnoringMeanIoU, masked_loss
from trainer.data.decode import dataset_normalisation
from trainer.models.fine_tuning import BackboneAdam, FreezeBackbone
from trainer.models.networks import ModelConfig, backbone_of, build_model, input_multiple
from trainer.training.strategy import choose_strategy, is_chief, mixed_precision_policy, worker_dir
from trainer.training.validation import WholeImageValidation
from trainer.data.verification import (BackgroundVerifier, StopOnDamagedFile, check_before_training, relative_to_data_dir,
                                  verified_record)

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


def input_config_for(config: TrainConfig, per_replica_batch: int, training: bool) -> InputConfig:
    """The input options ``make_dataset`` takes for one replica's batches, from the training config."""
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
    input_config = input_config_for(config, batch, training)
    sampling = sampling_for(artifacts, config.sampling) if training else "shards"
    strata = artifacts.strata(split) if sampling == "strata" else []
    if not strata:
        part = shard_for_pipeline(artifacts.shard_paths(split), context.num_input_pipelines,
                                  context.input_pipeline_id, artifacts.deleted(split))
        counts = None
        if sampling == "repeat_factor":
            factors = class_repeat_factors(artifacts.stats, threshold_for(artifacts.manifest, config.balance_threshold))
            counts = RepeatCounts(factors, artifacts.task, artifacts.num_classes, config.seed)
        return make_dataset(artifacts, split, input_config, training, part, counts=counts), [part]
    parts = [shard_for_pipeline(paths, context.num_input_pipelines, context.input_pipeline_id)
             for _, paths in strata]
    mixed = tf.data.Dataset.sample_from_datasets(
        [make_dataset(artifacts, split, dataclasses.replace(input_config, batch_size=1), True, part).unbatch()
         for part in parts], weights=[w for w, _ in strata], seed=config.seed)
    return mixed.batch(batch, drop_remainder=True).prefetch(tf.data.AUTOTUNE), parts


def model_config(artifacts: Artifacts, config: TrainConfig, task: str, sync_batch_norm: bool = False) -> ModelConfig:
    name = config.model if config.model != "auto" else ("unet" if task == "segmentation" else "cnn")
    pretrained = bool(config.backbone) or name not in ("unet", "cnn")
    mean, std = dataset_normalisation(artifacts) if pretrained else ((0.0,) * 3, (1.0,) * 3)
    return ModelConfig(name=name, depth=config.depth, width=config.width, recompute=config.recompute,
                       backbone=config.backbone, weights=config.weights, mean=mean, std=std,
                       sync_batch_norm=sync_batch_norm, bn_momentum=config.bn_momentum)


def build_compiled_model(artifacts: Artifacts, config: TrainConfig, task: str,
                         sync_batch_norm: bool = False) -> keras.Model:
    """The model, compiled; one with a pretrained encoder gets BackboneAdam, built for every variable, and its
    encoder frozen when --freeze_backbone_epochs asks (trainer/models/fine_tuning.py)."""
    model = build_model(task, artifacts.num_classes, model_config(artifacts, config, task, sync_batch_norm),
                        input_shape=(*config.crop, 3))
    backbone = backbone_of(model)
    accumulate = {"gradient_accumulation_steps": config.grad_accum_steps if config.grad_accum_steps > 1 else None}
    if backbone is None:
        optimizer = keras.optimizers.Adam(config.learning_rate, **accumulate)
    else:
        optimizer = BackboneAdam(config.learning_rate, config.backbone_learning_rate or config.learning_rate,
                                 **accumulate)
    weights = class_weights_for(artifacts, config.class_weights)
    if task == "segmentation":
        model.compile(optimizer=optimizer, loss=MaskedSegmentationLoss(weights, artifacts.ignore_label, config.loss),
                      metrics=[IgnoringMeanIoU(artifacts.num_classes, artifacts.ignore_label)])
    else:
        model.compile(optimizer=optimizer, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["accuracy", keras.metrics.SparseTopKCategoricalAccuracy(5, name="top5")])
    if backbone is not None:
        optimizer.build_for(model.trainable_variables, backbone.trainable_variables)
        backbone.trainable = not config.freeze_backbone_epochs
    return model


def network_multiple(config: TrainConfig, task: str) -> int:
    """What the sides of a segmentation input must be multiples of (trainer.models.networks.input_multiple)."""
    name = config.model if config.model != "auto" else ("unet" if task == "segmentation" else "cnn")
    return input_multiple(task, ModelConfig(name=name, depth=config.depth, backbone=config.backbone))


def serving_config(artifacts: Artifacts, config: TrainConfig, task: str) -> ServingConfig:
    return ServingConfig(task=task, class_names=tuple(artifacts.class_names), multiple=network_multiple(config, task),
                         image_size=tuple(config.crop), max_pixels=config.serving_max_pixels)


def steps_for_one_pass(artifacts: Artifacts, global_batch_size: int, config: Optional[TrainConfig] = None) -> int:
    """Training steps that read as many examples as an epoch holds (the default epoch length): the train split's
    live records, or with repeat-factor sampling their expected copies (the sum of their repeat factors)."""
    records = artifacts.split("train")["num_examples"]
    if config is not None and sampling_for(artifacts, config.sampling) == "repeat_factor":
        records = records_per_epoch(artifacts, threshold_for(artifacts.manifest, config.balance_threshold), records)
    return max(1, math.ceil(records / global_batch_size))


def whole_image_validation(artifacts: Artifacts, config: TrainConfig, task: str,
                           model: keras.Model) -> WholeImageValidation:
    """The callback that validates on every val image at full resolution, padded as served."""
    def make():
        return make_whole_image_dataset(artifacts, "val", config.global_batch_size, network_multiple(config, task),
                                        config.crop)

    if task == "segmentation":
        per_example_loss = model.loss.call
    else:
        def per_example_loss(labels, logits):
            return keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
    return WholeImageValidation(make, task, artifacts.num_classes, artifacts.ignore_label, per_example_loss,
                                artifacts.class_names, max_batches=config.validation_steps)


def _validation_plan(artifacts: Artifacts, config: TrainConfig, here: bool) -> str:
    """What the validation after each epoch covers, for the log."""
    if "val" not in artifacts.manifest["splits"]:
        return "none (no val split)"
    if not here:
        return "on the chief"
    if config.validation_steps is None:
        return "every val image at full resolution after each epoch"
    return f"the first {config.validation_steps} val batch(es) at full resolution after each epoch"


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


def _verify_in_background(artifacts: Artifacts, unverified: List[str], read: Dict[str, List[PipelineShard]],
                          record, chief: bool) -> BackgroundVerifier:
    """The check of the digests left after the first check (started after the first step): the shards this process reads, and on the
    chief also every file no worker reads in training (the other splits' shards, the files that grow
    with the dataset), so that each file is checked by one process (trainer/data/verification.py)."""
    mine = set(relative_to_data_dir(artifacts, [f for parts in read.values() for part in parts for f in part.files]))
    if chief:
        train_shards = set(relative_to_data_dir(artifacts, artifacts.shard_paths("train")))
        mine |= {f for f in unverified if f not in train_shards}
    verifier = BackgroundVerifier(artifacts, [f for f in unverified if f in mine], record)
    if verifier.files:       # started by StopOnDamagedFile once the first step is done
        _LOG.info("verifying the SHA-256 of %d file(s) in the background from the first step on, while training "
                  "reads them", len(verifier.files))
    return verifier


def train(config: TrainConfig) -> dict:
    """Train and export; returns the history, the export path (None on a worker that is not the chief) and
    the folder this process wrote to.

    Under MultiWorkerMirroredStrategy every worker runs this with the same config; the chief writes to
    ``--job_dir``, the other workers to ``job_dir/workertemp_<id>`` (their backup for resuming and
    checkpoints; their export is deleted).
    """
    started = time.monotonic()
    keras.utils.set_random_seed(config.seed)
    artifacts = load_artifacts(config.data)
    task = artifacts.task if config.task == "auto" else config.task
    strategy, why = choose_strategy(config.strategy, config.tpu)
    out_dir = worker_dir(config.job_dir, strategy)
    record = verified_record(out_dir, artifacts) if config.verify_shards else None
    unverified = check_before_training(artifacts, record) if config.verify_shards else []
    _LOG.info("strategy: %s (%s)", type(strategy).__name__, why)
    policy = mixed_precision_policy(config.mixed_precision, strategy)
    if policy:
        keras.mixed_precision.set_global_policy(policy)
    _LOG.info("mixed precision: %s", policy or "off")
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
    steps_per_epoch = config.steps_per_epoch or steps_for_one_pass(artifacts, config.global_batch_size, config)
    validation = None
    if "val" in artifacts.manifest["splits"] and is_chief(strategy):
        validation = whole_image_validation(artifacts, config, task, model)
        read["val"].append(shard_for_pipeline(artifacts.shard_paths("val"), deleted=artifacts.deleted("val")))
    if "://" not in out_dir:
        os.makedirs(out_dir, exist_ok=True)
    _record_input_shards(read, out_dir)
    verifier = _verify_in_background(artifacts, unverified, read, record, is_chief(strategy))
    callbacks = [
        keras.callbacks.BackupAndRestore(os.path.join(out_dir, "backup")),
        keras.callbacks.ModelCheckpoint(os.path.join(out_dir, "checkpoints", "epoch-{epoch:04d}.weights.h5"),
                                        save_weights_only=True),
        keras.callbacks.TensorBoard(os.path.join(out_dir, "logs")),
        keras.callbacks.CSVLogger(os.path.join(out_dir, "training.csv"), append=True),
    ]
    if validation is not None:
        callbacks.insert(0, validation)      # Before the others: they log the val_* values it adds.
    callbacks.insert(0, StopOnDamagedFile(verifier, started))
    if config.freeze_backbone_epochs and backbone_of(model) is not None:
        callbacks.insert(0, FreezeBackbone(backbone_of(model), config.freeze_backbone_epochs))
    if config.bn_recalibration_batches:      # First: validation and checkpoints see the re-estimated statistics.
        callbacks.insert(0, RecalibrateBatchNorm(train_data, strategy, config.bn_recalibration_batches))
    _LOG.info("%d epoch(s) of %d steps of %d examples (%s); validation: %s", config.epochs, steps_per_epoch,
              config.global_batch_size,
              "--steps_per_epoch" if config.steps_per_epoch else "one pass over the train split's records",
              _validation_plan(artifacts, config, validation is not None))
    try:
        history = model.fit(train_data, epochs=config.epochs, steps_per_epoch=steps_per_epoch, callbacks=callbacks,
                            shuffle=False, verbose=2)
    except tf.errors.DataLossError as error:     # a record's CRC failed before the background check got there
        verifier.finish()                        # names the damaged file when it is one the manifest lists
        raise ArtifactError(f"a shard of {config.data} is damaged: {str(error).strip().splitlines()[0]}") from None
    verifier.finish()                            # Nothing is exported from a damaged dataset.
    export_path = export_serving_model(model, artifacts.transform_dir, os.path.join(out_dir, EXPORT_DIR),
                                       serving_config(artifacts, config, task))
    if not is_chief(strategy):
        tf.io.gfile.rmtree(export_path)        # Every worker takes part in saving; only the chief's export is kept.
        export_path = None
    return {"history": history.history, "export": export_path, "strategy": why, "job_dir": out_dir}
