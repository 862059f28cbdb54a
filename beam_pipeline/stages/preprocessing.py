"""The tf.Transform preprocessing_fn: exact dataset statistics and the model-ready transform.

Analysis runs over small per-image summaries made at validation (channel sums,
class pixel counts), so no pixel is decoded twice for statistics. The same
graph, applied to a raw Example, decodes the image (JPEG with the accurate integer
IDCT, as validation does) and normalises it by the dataset's per-channel mean and standard deviation, and decodes the mask as
int32: the trainer and the served model use exactly this preprocessing.

Outputs (per example):
  ``image``        float32, flat (H*W*3), (pixel - mean) / std; reshape with ``image_shape``
  ``image_shape``  int64[3]: H, W, 3 of the decoded image
  ``mask``         int64, flat (H*W), class ids (segmentation); tf.Transform outputs no int32,
                   so ``decode_transformed`` (and the trainer) cast it to int32
  ``label``        int64 (classification)
  ``stats/...``    the dataset totals, the same in every example (read into stats.json), and
                   ``stats/image_mean``, ``stats/image_std``: float32[3], what ``image`` is normalised by
                   (the trainer reads them to normalise crops the same way)
"""

import functools

import tensorflow as tf
import tensorflow_transform as tft

from beam_pipeline.core import features as f

STATS_PREFIX = "stats/"
SCALAR_TOTALS = ("num_images", "pixels", "ignore_pixels")
NORMALISATION = ("image_mean", "image_std")   # stats/ outputs that are not totals


def raw_feature_spec(task: str, num_classes: int) -> dict:
    """Features of the shard Examples that the transform reads (all present in every shard record)."""
    spec = {
        f.IMAGE_ENCODED: tf.io.FixedLenFeature([], tf.string),
        f.IMAGE_HEIGHT: tf.io.FixedLenFeature([], tf.int64),
        f.IMAGE_WIDTH: tf.io.FixedLenFeature([], tf.int64),
        f.CHANNEL_SUM: tf.io.FixedLenFeature([3], tf.int64),
        f.CHANNEL_SUM_SQUARES: tf.io.FixedLenFeature([3], tf.int64),
    }
    if task == "classification":
        spec[f.CLASS_LABEL] = tf.io.FixedLenFeature([], tf.int64)
    else:
        spec[f.MASK_ENCODED] = tf.io.FixedLenFeature([], tf.string)
        spec[f.CLASS_PIXELS] = tf.io.FixedLenFeature([num_classes], tf.int64)
        spec[f.IGNORE_PIXELS] = tf.io.FixedLenFeature([], tf.int64)
    return spec


def _decode_rgb(encoded):
    """uint8 [H, W, 3]; JPEG with the accurate integer IDCT, the pixels validation summarised (the trainer's
    ``trainer.data.decode.decode_image`` decodes the same way; ``decode_image`` would use the fast IDCT)."""
    return tf.cond(tf.io.is_jpeg(encoded),
                   lambda: tf.io.decode_jpeg(encoded, channels=3, dct_method="INTEGER_ACCURATE"),
                   lambda: tf.io.decode_image(encoded, channels=3, expand_animations=False))


def _decode_image(encoded, mean, std):
    """One encoded image -> (flat normalised float32 pixels, [H, W, 3]); empty bytes give no pixels."""
    image = tf.cond(
        tf.strings.length(encoded) > 0,
        lambda: _decode_rgb(encoded),
        lambda: tf.zeros([0, 0, 3], tf.uint8))
    normalised = (tf.cast(image, tf.float32) - mean) / std
    return tf.reshape(normalised, [-1]), tf.cast(tf.shape(image), tf.int64)


def _decode_mask(encoded):
    mask = tf.cond(
        tf.strings.length(encoded) > 0,
        lambda: tf.io.decode_png(encoded, channels=1),
        lambda: tf.zeros([0, 0, 1], tf.uint8))
    return tf.reshape(tf.cast(mask, tf.int64), [-1])


def _broadcast(total, ones):
    """A dataset-level int64 total repeated for every example of the batch."""
    if total.shape.rank == 0:
        return ones * total
    return ones[:, tf.newaxis] * total[tf.newaxis, :]


def preprocessing_fn(inputs, task: str, num_classes: int):
    """Analyzers over the summaries, then the per-example transform. Bind task/num_classes with partial."""
    height = inputs[f.IMAGE_HEIGHT]
    pixels = height * inputs[f.IMAGE_WIDTH]
    ones = tf.ones_like(pixels)
    totals = {
        "num_images": tft.sum(ones),
        "pixels": tft.sum(pixels),
        "channel_sum": tft.sum(inputs[f.CHANNEL_SUM], reduce_instance_dims=False),
        "channel_sum_squares": tft.sum(inputs[f.CHANNEL_SUM_SQUARES], reduce_instance_dims=False),
    }
    if task == "classification":
        one_hot = tf.one_hot(inputs[f.CLASS_LABEL], num_classes, dtype=tf.int64)
        totals["label_counts"] = tft.sum(one_hot, reduce_instance_dims=False)
    else:
        class_pixels = inputs[f.CLASS_PIXELS]
        present = tf.cast(class_pixels > 0, tf.int64)
        totals["class_pixels"] = tft.sum(class_pixels, reduce_instance_dims=False)
        totals["class_images"] = tft.sum(present, reduce_instance_dims=False)
        totals["class_image_pixels"] = tft.sum(present * pixels[:, tf.newaxis], reduce_instance_dims=False)
        totals["ignore_pixels"] = tft.sum(inputs[f.IGNORE_PIXELS])

    pixel_count = tf.maximum(tf.cast(totals["pixels"], tf.float64), 1.0)
    mean = tf.cast(totals["channel_sum"], tf.float64) / pixel_count
    variance = tf.cast(totals["channel_sum_squares"], tf.float64) / pixel_count - tf.square(mean)
    std = tf.maximum(tf.sqrt(tf.maximum(variance, 0.0)), 1e-6)
    normalisation = {"image_mean": tf.cast(mean, tf.float32), "image_std": tf.cast(std, tf.float32)}
    decode = functools.partial(_decode_image, mean=normalisation["image_mean"], std=normalisation["image_std"])
    image, shape = tf.map_fn(
        decode, inputs[f.IMAGE_ENCODED],
        fn_output_signature=(tf.RaggedTensorSpec([None], tf.float32, ragged_rank=0),
                             tf.TensorSpec([3], tf.int64)))
    outputs = {"image": image, "image_shape": shape}
    if task == "classification":
        outputs["label"] = inputs[f.CLASS_LABEL]
    else:
        outputs["mask"] = tf.map_fn(
            _decode_mask, inputs[f.MASK_ENCODED],
            fn_output_signature=tf.RaggedTensorSpec([None], tf.int64, ragged_rank=0))
    for name, total in totals.items():
        outputs[STATS_PREFIX + name] = _broadcast(total, ones)
    float_ones = tf.cast(ones, tf.float32)[:, tf.newaxis]
    for name, value in normalisation.items():
        outputs[STATS_PREFIX + name] = float_ones * value[tf.newaxis, :]
    return outputs


def bound_preprocessing_fn(task: str, num_classes: int):
    return functools.partial(preprocessing_fn, task=task, num_classes=num_classes)
