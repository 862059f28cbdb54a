"""The exported serving model run over a split (``python -m trainer.evaluate``, trainer/evaluate.py): the figures.

It loads the SavedModel that is deployed (not the training graph), sends it the
split's encoded images in batches through its ``serving_default`` signature, at
full resolution, and compares the answers with the labels in the shards:

- segmentation: a confusion matrix over the labelled pixels (the ignore label
  excluded), per-class IoU, mean IoU over the classes present, pixel accuracy
  and frequency-weighted IoU (definitions in ``trainer.evaluation.metrics``);
- classification: accuracy, top-5 accuracy, per-class recall and the confusion
  matrix.

Every original image of the split is evaluated once: the repeat copies that
balancing adds to a split are skipped. Reading, parsing and mask decoding run in
parallel in tf.data while the model works. A batch the model refuses is retried
image by image; an image it still refuses is listed under ``failed`` with the
reason, and the run goes on.
"""

import dataclasses
import json
import logging
import time
from typing import Dict, List, Optional

import numpy as np

_LOG = logging.getLogger("trainer.evaluate")
SOURCE_ID = "image/source_id"
UNLABELLED = -1                  # Mask padding in a batch (never a class, never the ignore label).


@dataclasses.dataclass(frozen=True)
class EvaluateConfig:
    model: str                           # The exported serving model (a SavedModel folder).
    data: str                            # The pipeline's --output folder.
    split: str = "test"
    output: Optional[str] = None         # eval.json; None: print only.
    batch_size: int = 8                  # Images per request to the model.
    max_examples: Optional[int] = None   # Stop after this many images (a quick look).
    progress_seconds: float = 10.0       # Seconds between progress lines.
    log_level: str = "info"              # debug | info | warning | error (trainer/console.py)


def _examples(artifacts, split: str, batch_size: int, max_examples: Optional[int]):
    """Batches of {"bytes": string [B], "source": string [B], "mask": int32 [B, H, W] | "label": int32 [B]}."""
    import tensorflow as tf

    from trainer.data.input import live_records, shard_for_pipeline
    from trainer.data.decode import CLASS_LABEL, IMAGE_ENCODED, MASK_ENCODED, REPEAT_COPY

    segmentation = artifacts.task == "segmentation"
    spec = {IMAGE_ENCODED: tf.io.FixedLenFeature([], tf.string),
            SOURCE_ID: tf.io.FixedLenFeature([], tf.string, b""),
            REPEAT_COPY: tf.io.FixedLenFeature([], tf.int64, 0)}
    spec.update({MASK_ENCODED: tf.io.FixedLenFeature([], tf.string)} if segmentation else
                {CLASS_LABEL: tf.io.FixedLenFeature([], tf.int64)})

    def parse(serialized):
        return tf.io.parse_single_example(serialized, spec)

    def original(example):
        return tf.equal(example[REPEAT_COPY], 0)

    def select(example):
        out = {"bytes": example[IMAGE_ENCODED], "source": example[SOURCE_ID]}
        if segmentation:
            out["mask"] = tf.cast(tf.io.decode_png(example[MASK_ENCODED], channels=1)[..., 0], tf.int32)
        else:
            out["label"] = tf.cast(example[CLASS_LABEL], tf.int32)
        return out

    shard = shard_for_pipeline(artifacts.shard_paths(split), deleted=artifacts.deleted(split))
    dataset = live_records(shard, 8, deterministic=True)
    # serialized Example of the version's live records
    dataset = dataset.map(parse, num_parallel_calls=tf.data.AUTOTUNE).filter(original)
    if max_examples:
        dataset = dataset.take(max_examples)
    dataset = dataset.map(select, num_parallel_calls=tf.data.AUTOTUNE)
    # {"bytes": string [], "source": string [], "mask": int32 [H, W] | "label": int32 []}
    if segmentation:
        dataset = dataset.padded_batch(batch_size, padding_values={"bytes": "", "source": "", "mask": UNLABELLED})
    else:
        dataset = dataset.batch(batch_size)
    # {"bytes": [B], "source": [B], "mask": [B, H_max, W_max] (UNLABELLED outside each mask) | "label": [B]}
    return dataset.prefetch(tf.data.AUTOTUNE)


class _Tally:
    """Running confusion matrix (and top-5 hits) over what the model answered."""

    def __init__(self, task: str, num_classes: int, ignore_label: Optional[int]):
        self.task = task
        self.num_classes = num_classes
        self.ignore = ignore_label
        self.confusion = np.zeros([num_classes, num_classes], np.int64)
        self.top5 = 0
        self.examples = 0
        self.failed: List[Dict[str, str]] = []

    def add(self, batch: dict, outputs: dict) -> None:
        if self.task == "segmentation":
            self._add_segmentation(batch, outputs)
        else:
            self._add_classification(batch, outputs)

    def _add_segmentation(self, batch, outputs):
        masks = batch["mask"]
        class_maps = outputs["class_map"].numpy()
        heights, widths = outputs["height"].numpy(), outputs["width"].numpy()
        for index in range(len(heights)):
            height, width = int(heights[index]), int(widths[index])
            mask = masks[index]
            if (mask[:height, :width] == UNLABELLED).any() or (mask[height:] != UNLABELLED).any() or \
                    (mask[:, width:] != UNLABELLED).any():
                raise ValueError(f"{batch['source'][index].decode()}: the served class map is {height}x{width} "
                                 f"but the mask in the shard has another size")
            labels = mask[:height, :width].ravel().astype(np.int64)
            predicted = class_maps[index, :height, :width].ravel().astype(np.int64)
            valid = (labels >= 0) & (labels < self.num_classes)
            if self.ignore is not None:
                valid &= labels != self.ignore
            self.confusion += np.bincount(labels[valid] * self.num_classes + predicted[valid],
                                          minlength=self.num_classes ** 2).reshape(self.confusion.shape)
            self.examples += 1

    def _add_classification(self, batch, outputs):
        labels = batch["label"].astype(np.int64)
        probabilities = outputs["probabilities"].numpy()
        predicted = probabilities.argmax(axis=1)
        np.add.at(self.confusion, (labels, predicted), 1)
        top = np.argsort(-probabilities, axis=1, kind="stable")[:, :min(5, self.num_classes)]
        self.top5 += int((top == labels[:, None]).any(axis=1).sum())
        self.examples += len(labels)


def _numpy_batch(batch) -> dict:
    return {name: value.numpy() for name, value in batch.items()}


def _one(batch: dict, index: int) -> dict:
    return {name: value[index:index + 1] for name, value in batch.items()}


def _serve(signature, batch: dict, tally: _Tally) -> None:
    """Send a batch; if the model refuses it, send its images one by one and record those it refuses."""
    import tensorflow as tf

    try:
        tally.add(batch, signature(image_bytes=tf.constant(batch["bytes"])))
        return
    except tf.errors.InvalidArgumentError:
        if len(batch["bytes"]) == 1:
            raise
    for index in range(len(batch["bytes"])):
        single = _one(batch, index)
        if "mask" in single:       # Back to the image's own size: the batch padded it to the largest mask.
            rows = np.any(single["mask"][0] != UNLABELLED, axis=1).sum()
            cols = np.any(single["mask"][0] != UNLABELLED, axis=0).sum()
            single["mask"] = single["mask"][:, :rows, :cols]
        try:
            tally.add(single, signature(image_bytes=tf.constant(single["bytes"])))
        except tf.errors.InvalidArgumentError as error:
            reason = [line for line in str(error).splitlines() if line.strip()][-1].strip()
            tally.failed.append({"source_id": single["source"][0].decode(), "error": reason})
            _LOG.warning("the model refused %s: %s", single["source"][0].decode(), reason)


def _model_metadata(loaded) -> dict:
    if not hasattr(loaded, "metadata"):
        return {}
    return {name: value.numpy() for name, value in loaded.metadata().items()}


def evaluate(config: EvaluateConfig) -> dict:
    """Run the served model over the split; returns the report (also written to ``config.output``)."""
    import tensorflow as tf

    from trainer.data.artifacts import load_artifacts
    from trainer.evaluation.metrics import classification_report, segmentation_report

    artifacts = load_artifacts(config.data)
    split = artifacts.split(config.split)
    loaded = tf.saved_model.load(config.model)
    signature = loaded.signatures["serving_default"]
    metadata = _model_metadata(loaded)
    if metadata and metadata["task"].decode() != artifacts.task:
        raise ValueError(f"the model at {config.model} is for {metadata['task'].decode()}, "
                         f"the data at {config.data} for {artifacts.task}")
    if metadata and len(metadata["class_names"]) != artifacts.num_classes:
        raise ValueError(f"the model has {len(metadata['class_names'])} classes, the data {artifacts.num_classes}")
    total = split.get("num_images", split["num_examples"])
    if config.max_examples:
        total = min(total, config.max_examples)
    tally = _Tally(artifacts.task, artifacts.num_classes, artifacts.ignore_label)
    started = last = time.monotonic()
    for batch in _examples(artifacts, config.split, config.batch_size, config.max_examples):
        _serve(signature, _numpy_batch(batch), tally)
        now = time.monotonic()
        if now - last >= config.progress_seconds:
            last = now
            done = tally.examples + len(tally.failed)
            _LOG.info("evaluated %d/%d images of %s (%.2f images/s)", done, total, config.split,
                      done / (now - started))
    seconds = time.monotonic() - started
    if artifacts.task == "segmentation":
        report = segmentation_report(tally.confusion, artifacts.class_names)
    else:
        report = classification_report(tally.confusion, tally.top5, artifacts.class_names)
    result = {"model": config.model, "data": config.data, "split": config.split, "task": artifacts.task,
              "images": tally.examples, "failed": tally.failed, "seconds": round(seconds, 3),
              "images_per_second": round(tally.examples / seconds, 3) if seconds > 0 else None,
              "ignore_label": artifacts.ignore_label, **report}
    if config.output:
        with tf.io.gfile.GFile(config.output, "w") as handle:
            json.dump(result, handle, indent=1)
    return result
