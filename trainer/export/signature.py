"""The exported serving model: a batch of encoded images in, a class map or class per image out.

Signature ``serving_default``, input ``image_bytes``: string ``[None]``, each a
JPEG or PNG file's bytes. Images in one batch may differ in size; any size
works. Each image is decoded and normalised by the pipeline's tf.Transform
graph (the same values training used), then:

- segmentation: mirrored at the bottom and right to the sides the U-Net needs
  (``trainer.data.padding``), run through the network on its own, and its class map
  cropped back to the image. Outputs:
    ``class_map``     int32 [N, H_max, W_max]: image i's class map is
                      ``class_map[i, :height[i], :width[i]]``; every other
                      entry is -1 (``PADDING_CLASS``), so padding can never be
                      mistaken for a class.
    ``height``, ``width``  int32 [N]: each image's own size.
- classification: resized to the training image size (as training does) and
  classified. Outputs ``probabilities`` float32 [N, num_classes], ``class_id``
  int32 [N], ``class_name`` string [N].

Bytes that are not a JPEG or PNG image, or an image over ``max_pixels``, fail
the request with an InvalidArgumentError naming the offending batch entries;
the model (and a server holding it) stays usable.
"""

import dataclasses
import logging
from typing import Tuple

import keras
import tensorflow as tf

from trainer.data.padding import pad_for_network
from trainer.data.transform_graph import TransformGraph

_LOG = logging.getLogger(__name__)
INPUT_NAME = "image_bytes"
PADDING_CLASS = -1                       # class_map entries outside an image's own height x width
IMAGE_ENCODED = "image/encoded"          # the raw feature of the tf.Transform graph that holds the bytes
JPEG_MAGIC = b"\xff\xd8\xff"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
DEFAULT_MAX_PIXELS = 2 ** 23             # 8.4 megapixels; see ServingConfig.max_pixels


@dataclasses.dataclass(frozen=True)
class ServingConfig:
    task: str                                   # segmentation | classification
    class_names: Tuple[str, ...]
    multiple: int = 16                          # segmentation: sides padded to multiples of this (2**depth)
    image_size: Tuple[int, int] = (256, 256)    # classification: images resized to this, as in training
    max_pixels: int = DEFAULT_MAX_PIXELS        # larger images are refused: the U-Net's activations grow with
                                                # the pixels, and a decompression bomb must not take the server's
                                                # memory


def _header_sizes(image_bytes):
    """(is_jpeg, is_png, height, width) per entry, read from the file headers without decoding the pixels."""
    is_jpeg = tf.equal(tf.strings.substr(image_bytes, 0, 3), JPEG_MAGIC)
    is_png = tf.equal(tf.strings.substr(image_bytes, 0, 8), PNG_MAGIC)

    def size(args):
        data, jpeg, png = args

        def png_size():
            # IHDR: width and height as big-endian uint32 at bytes 16..23.
            header = tf.io.decode_raw(tf.strings.substr(data + b"\0" * 24, 16, 8), tf.uint8)
            values = tf.reshape(tf.cast(header, tf.int64), [2, 4])
            width_height = tf.reduce_sum(values * tf.constant([2 ** 24, 2 ** 16, 2 ** 8, 1], tf.int64), axis=1)
            return tf.reverse(width_height, [0])

        def jpeg_size():
            return tf.cast(tf.image.extract_jpeg_shape(data)[:2], tf.int64)

        return tf.case([(jpeg, jpeg_size), (png, png_size)], default=lambda: tf.zeros([2], tf.int64))

    sizes = tf.map_fn(size, (image_bytes, is_jpeg, is_png), fn_output_signature=tf.TensorSpec([2], tf.int64))
    return is_jpeg, is_png, sizes[:, 0], sizes[:, 1]


def check_encoded_images(image_bytes, max_pixels: int):
    """Assert ops that fail the request, naming the batch entries, for bytes that are not a JPEG or PNG image
    or for images over ``max_pixels``."""
    recognised = tf.logical_or(tf.equal(tf.strings.substr(image_bytes, 0, 3), JPEG_MAGIC),
                               tf.equal(tf.strings.substr(image_bytes, 0, 8), PNG_MAGIC))
    unknown = tf.debugging.Assert(
        tf.reduce_all(recognised),
        [f"{INPUT_NAME}: these entries (0-based) are not JPEG or PNG images:", tf.where(~recognised)[:, 0]],
        summarize=20)
    with tf.control_dependencies([unknown]):
        _, _, height, width = _header_sizes(image_bytes)
    too_large = height * width > max_pixels
    return tf.debugging.Assert(
        tf.logical_not(tf.reduce_any(too_large)),
        [f"{INPUT_NAME}: images over the served limit of {max_pixels} pixels (entry, height, width):",
         tf.stack([tf.where(too_large)[:, 0], tf.boolean_mask(height, too_large),
                   tf.boolean_mask(width, too_large)], axis=1)],
        summarize=60)


class ServingModule(tf.Module):
    """Encoded image bytes [N] -> class maps (segmentation) or class probabilities, ids and names."""

    def __init__(self, model: keras.Model, transform_dir: str, config: ServingConfig):
        super().__init__()
        self.model = model
        self.transform = TransformGraph(transform_dir)
        self._raw_spec = self.transform.raw_feature_spec
        self._config = config
        self._class_names = tf.constant(list(config.class_names))

    def _raw_features(self, image_bytes):
        """The tf.Transform graph's raw features for a batch of images: the bytes, and neutral values for the
        rest (an empty mask decodes to no pixels)."""
        count = tf.shape(image_bytes)[0]
        features = {}
        for name, spec in self._raw_spec.items():
            shape = tf.concat([[count], tf.constant(spec.shape, tf.int32)], axis=0)
            features[name] = (image_bytes if name == IMAGE_ENCODED else
                              tf.fill(shape, "") if spec.dtype == tf.string else tf.zeros(shape, spec.dtype))
        return features

    def _decoded(self, image_bytes):
        """(flat normalised pixels, ragged [N, None]; [N, 3] int32 shapes), from the tf.Transform graph."""
        checked = check_encoded_images(image_bytes, self._config.max_pixels)
        with tf.control_dependencies([checked]):
            image_bytes = tf.identity(image_bytes)
        transformed = self.transform(self._raw_features(image_bytes))
        return transformed["image"], tf.cast(transformed["image_shape"], tf.int32)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name=INPUT_NAME)])
    def serve(self, image_bytes):
        # An empty batch gets empty outputs (the tf.Transform graph's map_fn cannot run over no images).
        return tf.cond(tf.size(image_bytes) > 0, lambda: self._predict(image_bytes), self._empty)

    def _predict(self, image_bytes):
        pixels, shapes = self._decoded(image_bytes)
        if self._config.task == "segmentation":
            return self._segment(pixels, shapes)
        return self._classify(pixels, shapes)

    def _empty(self):
        if self._config.task == "segmentation":
            none = tf.zeros([0], tf.int32)
            return {"class_map": tf.zeros([0, 0, 0], tf.int32), "height": none, "width": none}
        return {"probabilities": tf.zeros([0, len(self._config.class_names)]), "class_id": tf.zeros([0], tf.int32),
                "class_name": tf.zeros([0], tf.string)}

    def _segment(self, pixels, shapes):
        height, width = shapes[:, 0], shapes[:, 1]
        out_height = tf.reduce_max(tf.concat([height, [0]], 0))
        out_width = tf.reduce_max(tf.concat([width, [0]], 0))

        def one(args):
            # One image at a time, so that its class map does not depend on the other images of the batch.
            flat, shape = args
            image = tf.reshape(flat, shape)
            logits = self.model(pad_for_network(image, self._config.multiple)[tf.newaxis], training=False)
            classes = tf.argmax(logits[0, :shape[0], :shape[1]], axis=-1, output_type=tf.int32)
            return tf.pad(classes, [[0, out_height - shape[0]], [0, out_width - shape[1]]],
                          constant_values=PADDING_CLASS)

        class_map = tf.map_fn(one, (pixels, shapes), fn_output_signature=tf.TensorSpec([None, None], tf.int32))
        return {"class_map": class_map, "height": height, "width": width}

    def _classify(self, pixels, shapes):
        size = list(self._config.image_size)

        def one(args):
            flat, shape = args
            return tf.image.resize(tf.reshape(flat, shape), size)      # as trainer.data.input.Parser does

        images = tf.map_fn(one, (pixels, shapes), fn_output_signature=tf.TensorSpec(size + [3], tf.float32))
        logits = tf.cast(self.model(images, training=False), tf.float32)
        class_id = tf.argmax(logits, axis=-1, output_type=tf.int32)
        return {"probabilities": tf.nn.softmax(logits), "class_id": class_id,
                "class_name": tf.gather(self._class_names, class_id)}

    @tf.function(input_signature=[])
    def metadata(self):
        """What a client or trainer.evaluate needs to know about this model."""
        return {"task": tf.constant(self._config.task), "class_names": self._class_names,
                "multiple": tf.constant(self._config.multiple),
                "image_size": tf.constant(list(self._config.image_size)),
                "max_pixels": tf.constant(self._config.max_pixels, tf.int64)}


def export_serving_model(model: keras.Model, transform_dir: str, path: str, config: ServingConfig) -> str:
    module = ServingModule(model, transform_dir, config)
    tf.saved_model.save(module, path, signatures={"serving_default": module.serve})
    _LOG.info("exported the serving model to %s (serving_default: %s [None] JPEG/PNG bytes -> %s)", path,
              INPUT_NAME, "class_map, height, width" if config.task == "segmentation"
              else "probabilities, class_id, class_name")
    return path
