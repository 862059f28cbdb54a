"""The trainer's tf.data input pipeline over the pipeline's shards.

Decoding (raw Example -> image, mask and sample points: trainer/data/decode.py) is
kept apart from training-time parsing (crops, augmentation, normalisation,
here), as in Model Garden's segmentation input. Shape of the elements after
each stage is noted in comments.
"""

import dataclasses
import logging
from typing import Mapping, Optional, Sequence, Tuple

import tensorflow as tf

from trainer.data.artifacts import Artifacts
from trainer.data.balance import repeat_counts
from trainer.data.decode import REPEAT_COPY, Decoder
from trainer.data.padding import pad_for_network, pad_labels

_LOG = logging.getLogger(__name__)



@dataclasses.dataclass(frozen=True)
class InputConfig:
    """How examples are read and turned into training batches."""
    batch_size: int = 8                      # Per input pipeline (per replica group).
    crop: Tuple[int, int] = (256, 256)       # Patch height and width.
    crop_sampling: str = "class_uniform"     # class_uniform | uniform (segmentation only).
    jitter: float = 0.25                     # Crop-centre jitter, as a fraction of the crop size.
    shuffle_buffer: int = 256                # Examples (serialized; decoded with cache_dir); bounded.
    cycle_length: int = 8                    # Shards read at once by interleave.
    augment: bool = True                     # Flips (image and mask), brightness/contrast (image).
    drop_remainder: bool = False             # True on TPU: static batch shapes.
    cache_dir: Optional[str] = None          # Cache decoded examples to files here (never in memory).


@dataclasses.dataclass(frozen=True)
class PipelineShard:
    """The part of a split that one input pipeline reads (one per worker under MultiWorkerMirrored)."""
    files: Tuple[str, ...]       # Read by this pipeline only, unless record_shards > 1.
    pipeline_id: int = 0         # tf.distribute.InputContext.input_pipeline_id
    num_pipelines: int = 1       # tf.distribute.InputContext.num_input_pipelines
    record_shards: int = 1       # > 1 when there are fewer files than pipelines: every pipeline reads all the
                                 # files in a fixed order and keeps every record_shards-th record from pipeline_id.
    deleted: Tuple[Tuple[int, ...], ...] = ()   # per file, the record indices the version does not hold


def shard_for_pipeline(files: Sequence[str], num_pipelines: int = 1, pipeline_id: int = 0,
                       deleted: Optional[Mapping[str, Sequence[int]]] = None) -> PipelineShard:
    """Pipeline i of n reads files i, i+n, i+2n...; with fewer files than pipelines, records are dealt out.
    ``deleted``: each file's deleted records (Artifacts.deleted), skipped wherever a file is read."""
    files = tuple(files)
    if not files:
        raise ValueError("no files to read")
    if not 0 <= pipeline_id < num_pipelines:
        raise ValueError(f"input pipeline {pipeline_id} of {num_pipelines}")
    if num_pipelines == 1:
        chosen, shard = files, PipelineShard(files)
    elif len(files) >= num_pipelines:
        chosen = files[pipeline_id::num_pipelines]
        shard = PipelineShard(chosen, pipeline_id, num_pipelines)
    else:
        chosen, shard = files, PipelineShard(files, pipeline_id, num_pipelines, record_shards=num_pipelines)
    gone = tuple(tuple((deleted or {}).get(path, ())) for path in chosen)
    return dataclasses.replace(shard, deleted=gone) if any(gone) else shard


def live_records(shard: PipelineShard, cycle_length: int, deterministic: bool,
                 shuffle_files: bool = False) -> tf.data.Dataset:
    """The serialized records of ``shard``'s files without their deleted ones, interleaved ``cycle_length`` files
    at a time (and dealt out when ``record_shards`` > 1)."""
    files = list(shard.files)
    dataset = tf.data.Dataset.from_tensor_slices((files, tf.range(len(files), dtype=tf.int64)))
    # (shard path, its index)
    if shuffle_files:
        dataset = dataset.shuffle(len(files), reshuffle_each_iteration=True)
    table = _deleted_table(shard)

    def records_of(path, number):
        records = tf.data.TFRecordDataset(path)
        if table is None:
            return records
        return (records.enumerate()
                .filter(lambda index, _: tf.equal(table.lookup(number * _FILE_STRIDE + index), 0))
                .map(lambda _, record: record))
    dataset = dataset.interleave(records_of, cycle_length=min(cycle_length, len(files)),
                                 num_parallel_calls=tf.data.AUTOTUNE, deterministic=deterministic)
    # serialized Example
    return dataset.shard(shard.record_shards, shard.pipeline_id) if shard.record_shards > 1 else dataset


_FILE_STRIDE = 2 ** 32          # a deleted record's key: its file's number * stride + its index


def _deleted_table(shard: PipelineShard):
    """A lookup of (file number, record index) -> 1 for the deleted records; None when none is deleted."""
    keys = [number * _FILE_STRIDE + index for number, gone in enumerate(shard.deleted) for index in gone]
    if not keys:
        return None
    return tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
        tf.constant(keys, tf.int64), tf.ones(len(keys), tf.int64)), default_value=0)


def _pad_to(image, mask, height: int, width: int, ignore_label: int):
    """Pad image (with 0, the dataset mean after normalisation) and mask (with the ignore label)."""
    shape = tf.shape(image)
    target_h = tf.maximum(shape[0], height)
    target_w = tf.maximum(shape[1], width)
    image = tf.image.pad_to_bounding_box(image, 0, 0, target_h, target_w)
    mask = tf.image.pad_to_bounding_box(mask[..., tf.newaxis] - ignore_label, 0, 0, target_h, target_w)
    return image, mask[..., 0] + ignore_label


def crop_origin(point_classes, point_yx, height, width, crop: Tuple[int, int], mode: str, jitter: float):
    """Top-left corner of a crop: centred on a point of a uniformly chosen class, uniform, or the centre."""
    crop_h, crop_w = crop
    max_top = tf.maximum(height - crop_h, 0)
    max_left = tf.maximum(width - crop_w, 0)
    if mode == "center":
        return max_top // 2, max_left // 2
    uniform = (tf.random.uniform([], 0, max_top + 1, tf.int32), tf.random.uniform([], 0, max_left + 1, tf.int32))
    if mode != "class_uniform":
        return uniform
    classes, _ = tf.unique(point_classes)

    def centred():
        chosen = classes[tf.random.uniform([], 0, tf.size(classes), tf.int32)]
        candidates = tf.where(tf.equal(point_classes, chosen))[:, 0]
        y_x = point_yx[candidates[tf.random.uniform([], 0, tf.size(candidates), tf.int32)]]
        dy = tf.cast(tf.random.uniform([], -jitter, jitter) * crop_h, tf.int32)
        dx = tf.cast(tf.random.uniform([], -jitter, jitter) * crop_w, tf.int32)
        top = tf.clip_by_value(y_x[0] + dy - crop_h // 2, 0, max_top)
        left = tf.clip_by_value(y_x[1] + dx - crop_w // 2, 0, max_left)
        return top, left

    return tf.cond(tf.size(classes) > 0, centred, lambda: uniform)


class Parser:
    """Decoded example -> training (or evaluation) input: a patch crop and augmentation."""

    def __init__(self, config: InputConfig, task: str, ignore_label: Optional[int], training: bool,
                 normalise=tf.identity):
        self._config = config
        self._normalise = normalise   # Decoder.normalise: decoded image -> float32 normalised
        self._task = task
        self._ignore = 255 if ignore_label is None else ignore_label
        self._training = training

    def __call__(self, example):
        if self._task == "classification":
            return self._classification(example)
        return self._segmentation(example)

    def _segmentation(self, example):
        crop_h, crop_w = self._config.crop
        height, width = tf.shape(example["mask"])[0], tf.shape(example["mask"])[1]
        mode = self._config.crop_sampling if self._training else "center"   # Evaluation is deterministic.
        # The crop's origin in the image padded (bottom and right) to at least the crop size; the window is cut
        # from the unpadded image and only the cut is padded, so that no whole-image copy is made.
        top, left = crop_origin(example["point_classes"], example["point_yx"], tf.maximum(height, crop_h),
                                tf.maximum(width, crop_w), self._config.crop, mode,
                                self._config.jitter if self._training else 0.0)
        cut_h, cut_w = tf.minimum(crop_h, height - top), tf.minimum(crop_w, width - left)
        image = self._normalise(tf.slice(example["image"], [top, left, 0], [cut_h, cut_w, 3]))
        mask = tf.cast(tf.slice(example["mask"], [top, left], [cut_h, cut_w]), tf.int32)
        image, mask = _pad_to(image, mask, crop_h, crop_w, self._ignore)
        if self._training and self._config.augment:
            image, mask = self._augment(image, mask)
        image = tf.ensure_shape(image, [crop_h, crop_w, 3])
        mask = tf.ensure_shape(mask, [crop_h, crop_w])
        return image, mask

    def _classification(self, example):
        crop_h, crop_w = self._config.crop
        image = tf.image.resize(self._normalise(example["image"]), [crop_h, crop_w])
        if self._training and self._config.augment:
            image, _ = self._augment(image, None)
        return tf.ensure_shape(image, [crop_h, crop_w, 3]), example["label"]

    def _augment(self, image, mask):
        flip = tf.random.uniform([]) < 0.5
        image = tf.cond(flip, lambda: tf.image.flip_left_right(image), lambda: image)
        if mask is not None:
            mask = tf.cond(flip, lambda: tf.reverse(mask, axis=[1]), lambda: mask)
        # Brightness and contrast on the normalised image (about unit variance): image only.
        image = image + tf.random.uniform([], -0.2, 0.2)
        mean = tf.reduce_mean(image, axis=[0, 1], keepdims=True)
        image = (image - mean) * tf.random.uniform([], 0.8, 1.2) + mean
        return image, mask


def _first_record(files):
    """The first serialized record of the first shard (the Decoder's probe), or None (none, or not eager)."""
    if not files or not tf.executing_eagerly():
        return None
    for serialized in tf.data.TFRecordDataset(files[:1]).take(1):
        return serialized
    return None


def record_stream(shard: PipelineShard, config: InputConfig, training: bool = True,
                  counts=None) -> tf.data.Dataset:
    """The serialized records make_dataset decodes: the shard's live records once in order, or, when training,
    pass after pass, each record repeated as ``counts`` draws for its pass, and shuffled (unless the decoded
    examples are cached: make_dataset shuffles those)."""
    by_records = shard.record_shards > 1
    in_order = not training or by_records          # Dealing out records needs the same order on every pipeline.

    def one_pass(epoch=None):
        records = live_records(shard, config.cycle_length, in_order, shuffle_files=training and not by_records)
        return records if counts is None else repeat_counts(records, counts, epoch)
    if training and counts is not None:
        # With a cache the first pass's draw is cached, and the cache repeated: the same copies every epoch.
        passes = tf.data.Dataset.range(1 if config.cache_dir else 2 ** 62)
        dataset = passes.flat_map(one_pass)
        # serialized Example, each as many times as its pass's draw says, pass after pass
    else:
        dataset = one_pass()
        # serialized Example
    if training and not config.cache_dir:
        # Shuffle the serialized records (about 100 KB each), not decoded ones (a float32 image is 25 times
        # larger): the same mixing for a fraction of the memory.
        dataset = dataset.shuffle(config.shuffle_buffer)
        dataset = dataset if counts is not None else dataset.repeat()
    return dataset


def make_dataset(artifacts: Artifacts, split: str, config: InputConfig, training: bool = True,
                 shard: Optional[PipelineShard] = None, graph=None, counts=None) -> tf.data.Dataset:
    """Batches of (image, mask) or (image, label) read from the split's shards (or from ``shard`` only);
    ``graph``: the transform graph to decode with (default: trainer.data.transform_graph's, see Decoder).
    ``counts`` (trainer.data.balance.RepeatCounts): repeat each record that many times per epoch (--sampling
    repeat_factor); the copies are shuffled after repeating, so that they rarely share a batch."""
    shard = shard or shard_for_pipeline(artifacts.shard_paths(split), deleted=artifacts.deleted(split))
    dataset = record_stream(shard, config, training, counts)
    # serialized Example (shuffled and repeated when training)
    decoder = Decoder(artifacts, probe=_first_record(list(shard.files)), graph=graph)
    dataset = dataset.map(decoder, num_parallel_calls=tf.data.AUTOTUNE, deterministic=not training)
    # {"image": uint8 [H, W, 3], "mask": uint8 [H, W], "point_*": ...} or {"image", "label"}
    # (image float32 and normalised, mask int32, when decoded through the tf.Transform graph)
    if config.cache_dir:
        suffix = f"-{shard.pipeline_id}-of-{shard.num_pipelines}" if shard.num_pipelines > 1 else ""
        dataset = dataset.cache(config.cache_dir.rstrip("/") + f"/{split}{suffix}")     # One cache per worker.
        if training:
            dataset = dataset.shuffle(config.shuffle_buffer).repeat()   # the cache's order is fixed: shuffle after
    dataset = dataset.map(Parser(config, artifacts.task, artifacts.ignore_label, training, decoder.normalise),
                          num_parallel_calls=tf.data.AUTOTUNE, deterministic=not training)
    # (float32 [h, w, 3], int32 [h, w]) or (float32 [h, w, 3], int32 [])
    dataset = dataset.batch(config.batch_size, drop_remainder=config.drop_remainder)
    return dataset.prefetch(tf.data.AUTOTUNE)


def _is_original(serialized):
    """False for the repeat copies that balancing adds to a split (``image/repeat/copy`` > 0)."""
    copy = tf.io.parse_single_example(serialized, {REPEAT_COPY: tf.io.FixedLenFeature([], tf.int64, 0)})
    return tf.equal(copy[REPEAT_COPY], 0)


def make_whole_image_dataset(artifacts: Artifacts, split: str, batch_size: int, multiple: int,
                             image_size: Tuple[int, int], shard: Optional[PipelineShard] = None) -> tf.data.Dataset:
    """Every image of ``split`` once (repeat copies skipped), in shard order, as the served model sees it.

    Segmentation: (image float32 [B, H, W, 3], mask int32 [B, H, W]) at full resolution, each image mirrored
    at the bottom and right to sides that are multiples of ``multiple`` exactly as serving pads it
    (``trainer.data.padding``), its mask padded with the ignore label. A batch holds images of one padded size
    only, so an image's logits do not depend on the other images of its batch. Classification:
    (image [B, h, w, 3] resized to ``image_size`` as in training and serving, label int32 [B]).
    """
    shard = shard or shard_for_pipeline(artifacts.shard_paths(split), deleted=artifacts.deleted(split))
    dataset = live_records(shard, 8, deterministic=True)
    # serialized Example
    dataset = dataset.filter(_is_original)
    decoder = Decoder(artifacts, probe=_first_record(list(shard.files)))
    dataset = dataset.map(decoder, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    # {"image": uint8 [H, W, 3], "mask": uint8 [H, W], ...} or {"image", "label"} (see make_dataset)
    if artifacts.task == "classification":
        parser = Parser(InputConfig(crop=tuple(image_size), augment=False), artifacts.task, artifacts.ignore_label,
                        training=False, normalise=decoder.normalise)
        dataset = dataset.map(parser, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        # (float32 [h, w, 3], int32 [])
        return dataset.batch(batch_size).prefetch(tf.data.AUTOTUNE)
    ignore = 255 if artifacts.ignore_label is None else artifacts.ignore_label

    def pad(example):
        image = pad_for_network(decoder.normalise(example["image"]), multiple)
        padded = tf.shape(image)
        return image, pad_labels(tf.cast(example["mask"], tf.int32), padded[0], padded[1], ignore)

    def padded_size(image, mask):
        return tf.cast(tf.shape(image)[0], tf.int64) * 1_000_000 + tf.cast(tf.shape(image)[1], tf.int64)

    dataset = dataset.map(pad, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    # (float32 [H', W', 3] mirrored, int32 [H', W'] with the ignore label outside the image)
    dataset = dataset.group_by_window(padded_size, lambda _, images: images.batch(batch_size), window_size=batch_size)
    # (float32 [B, H', W', 3], int32 [B, H', W']): one padded size per batch
    return dataset.prefetch(tf.data.AUTOTUNE)
