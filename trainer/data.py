"""The trainer's tf.data input pipeline over the pipeline's shards.

Decoding (raw Example -> normalised image and mask, through the tf.Transform
graph the pipeline wrote) is kept apart from training-time parsing (crops,
augmentation), as in Model Garden's segmentation input. Shape of the
elements after each stage is noted in comments.
"""

import dataclasses
from typing import Optional, Tuple

import tensorflow as tf
import tensorflow_transform as tft

from trainer.artifacts import Artifacts

POINT_CLASSES = "image/segmentation/class/sample_points/class"
POINT_YX = "image/segmentation/class/sample_points/yx"


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


class Decoder:
    """Raw serialized Example -> decoded, normalised tensors, with the pipeline's tf.Transform graph."""

    def __init__(self, artifacts: Artifacts):
        self._task = artifacts.task
        self._transform = tft.TFTransformOutput(artifacts.transform_dir)
        self._layer = self._transform.transform_features_layer()
        self._raw_spec = self._transform.raw_feature_spec()
        self._spec = dict(self._raw_spec)
        if self._task == "segmentation":
            self._spec[POINT_CLASSES] = tf.io.VarLenFeature(tf.int64)
            self._spec[POINT_YX] = tf.io.VarLenFeature(tf.int64)

    def __call__(self, serialized):
        # serialized: scalar string
        parsed = tf.io.parse_single_example(serialized, self._spec)
        raw = {name: tf.expand_dims(parsed[name], 0) for name in self._raw_spec}
        transformed = self._layer(raw)
        shape = transformed["image_shape"][0]
        image = tf.reshape(transformed["image"][0], shape)
        # image: float32 [H, W, 3], normalised by the dataset mean and std
        if self._task == "classification":
            return {"image": image, "label": tf.cast(transformed["label"][0], tf.int32)}
        mask = tf.cast(tf.reshape(transformed["mask"][0], shape[:2]), tf.int32)
        # mask: int32 [H, W]
        return {"image": image, "mask": mask,
                "point_classes": tf.cast(tf.sparse.to_dense(parsed[POINT_CLASSES]), tf.int32),
                "point_yx": tf.reshape(tf.cast(tf.sparse.to_dense(parsed[POINT_YX]), tf.int32), [-1, 2])}


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

    def __init__(self, config: InputConfig, task: str, ignore_label: Optional[int], training: bool):
        self._config = config
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
        image = tf.slice(example["image"], [top, left, 0], [cut_h, cut_w, 3])
        mask = tf.slice(example["mask"], [top, left], [cut_h, cut_w])
        image, mask = _pad_to(image, mask, crop_h, crop_w, self._ignore)
        if self._training and self._config.augment:
            image, mask = self._augment(image, mask)
        image = tf.ensure_shape(image, [crop_h, crop_w, 3])
        mask = tf.ensure_shape(mask, [crop_h, crop_w])
        return image, mask

    def _classification(self, example):
        crop_h, crop_w = self._config.crop
        image = tf.image.resize(example["image"], [crop_h, crop_w])
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


def make_dataset(artifacts: Artifacts, split: str, config: InputConfig, training: bool = True,
                 input_context: Optional[tf.distribute.InputContext] = None, files=None) -> tf.data.Dataset:
    """Batches of (image, mask) or (image, label) read from the split's shards."""
    files = list(files if files is not None else artifacts.shard_paths(split))
    dataset = tf.data.Dataset.from_tensor_slices(files)
    # shard path
    if input_context is not None and input_context.num_input_pipelines > 1:
        dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    if training:
        dataset = dataset.shuffle(len(files), reshuffle_each_iteration=True)
    dataset = dataset.interleave(tf.data.TFRecordDataset, cycle_length=min(config.cycle_length, len(files)),
                                 num_parallel_calls=tf.data.AUTOTUNE, deterministic=not training)
    # serialized Example
    if training and not config.cache_dir:
        # Shuffle the serialized records (about 100 KB each), not decoded ones (a float32 image is 25 times
        # larger): the same mixing for a fraction of the memory.
        dataset = dataset.shuffle(config.shuffle_buffer).repeat()
    dataset = dataset.map(Decoder(artifacts), num_parallel_calls=tf.data.AUTOTUNE, deterministic=not training)
    # {"image": float32 [H, W, 3], "mask": int32 [H, W], "point_*": ...} or {"image", "label"}
    if config.cache_dir:
        dataset = dataset.cache(config.cache_dir.rstrip("/") + f"/{split}")
        if training:
            dataset = dataset.shuffle(config.shuffle_buffer).repeat()   # the cache's order is fixed: shuffle after
    dataset = dataset.map(Parser(config, artifacts.task, artifacts.ignore_label, training),
                          num_parallel_calls=tf.data.AUTOTUNE, deterministic=not training)
    # (float32 [h, w, 3], int32 [h, w]) or (float32 [h, w, 3], int32 [])
    dataset = dataset.batch(config.batch_size, drop_remainder=config.drop_remainder)
    return dataset.prefetch(tf.data.AUTOTUNE)
