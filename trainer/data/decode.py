"""Decoding the pipeline's records: raw serialized Example -> image, mask (or label) and sample points.

Kept apart from training-time parsing (trainer/data/input.py: crops, augmentation,
normalisation), as in Model Garden's segmentation input. The values are those
of the tf.Transform graph the pipeline wrote (see ``Decoder``).
"""

import logging
from typing import Tuple

import numpy as np
import tensorflow as tf

from trainer.data.artifacts import ArtifactError, Artifacts
from trainer.data.transform_graph import TransformGraph

_LOG = logging.getLogger(__name__)

IMAGE_ENCODED = "image/encoded"
MASK_ENCODED = "image/segmentation/class/encoded"
CLASS_LABEL = "image/class/label"
POINT_CLASSES = "image/segmentation/class/sample_points/class"
POINT_YX = "image/segmentation/class/sample_points/yx"
STATS_MEAN = "stats/image_mean"          # tf.Transform graph outputs: what it normalises images by
STATS_STD = "stats/image_std"
REPEAT_COPY = "image/repeat/copy"
CLASS_PIXELS = "image/segmentation/class/pixel_count"
SOURCE_ID = "image/source_id"
PROBE_TOLERANCE = 1e-5   # Largest difference to the graph's normalised pixels accepted on the probe record.


def decode_image(encoded):
    """An encoded image (JPEG or PNG; scalar string) -> uint8 [H, W, 3], as the pipeline's statistics saw it.

    JPEG is decoded with libjpeg's accurate integer IDCT (``INTEGER_ACCURATE``), the one the pipeline
    validates and summarises with; ``decode_image``'s default (and only) JPEG IDCT is the fast one, whose
    pixels differ by a few levels. ``decode_image`` has no ``dct_method``, hence the ``is_jpeg`` branch.
    The tf.Transform graph (beam_pipeline/stages/preprocessing.py) decodes the same way.
    """
    return tf.cond(tf.io.is_jpeg(encoded),
                   lambda: tf.io.decode_jpeg(encoded, channels=3, dct_method="INTEGER_ACCURATE"),
                   lambda: tf.io.decode_image(encoded, channels=3, expand_animations=False))


def decode_mask(encoded):
    """An encoded mask (8-bit grey PNG, as the pipeline stores every mask) -> uint8 [H, W] class ids."""
    return tf.io.decode_png(encoded, channels=1)[..., 0]


def graph_normalisation(transformed) -> Tuple[tf.Tensor, tf.Tensor]:
    """Per-channel mean and std (float32 [3]) by which the tf.Transform graph normalises images: its own
    ``stats/image_mean`` and ``stats/image_std`` outputs (the Decoder checks them against its pixels)."""
    return transformed[STATS_MEAN][0], transformed[STATS_STD][0]


def dataset_normalisation(artifacts: Artifacts) -> Tuple[Tuple[float, ...], Tuple[float, ...]]:
    """The graph's per-channel mean and std, from its outputs on the first train record: what a model with a
    pretrained encoder undoes before the encoder's own preprocessing (trainer/models/backbones.py)."""
    graph = TransformGraph(artifacts.transform_dir)
    missing = {STATS_MEAN, STATS_STD} - set(graph.output_names)
    if missing:
        raise ArtifactError(f"the tf.Transform graph at {artifacts.transform_dir} has no "
                            f"{' and '.join(sorted(missing))} output, which a pretrained encoder needs to undo the "
                            "dataset's normalisation")
    for serialized in tf.data.TFRecordDataset(artifacts.shard_paths("train")[:1]).take(1):
        parsed = tf.io.parse_single_example(serialized, graph.raw_feature_spec)
        mean, std = graph_normalisation(graph({name: tf.expand_dims(value, 0) for name, value in parsed.items()}))
        return tuple(mean.numpy().tolist()), tuple(std.numpy().tolist())
    raise ArtifactError(f"the train split of {artifacts.root} has no record")


class Decoder:
    """Raw serialized Example -> decoded tensors with the values of the pipeline's tf.Transform graph.

    Two ways give the same values. The graph (what the served model applies) decodes the image and
    normalises all of it by the dataset's mean and std, through ``tf.map_fn`` with ragged outputs: about
    10 ms of CPU for a 640x480 example, most of it spent on pixels that the crop then drops. Decoding
    *directly*, the Decoder runs the graph's decode ops itself (:func:`decode_image`, :func:`decode_mask`),
    keeps image and mask uint8, and ``normalise`` applies the graph's mean and std
    to the crop only (about 3 ms). With a ``probe`` record it decodes that record both ways and decodes
    directly when the values agree; otherwise (a graph that does more than decode and normalise, or
    without the ``stats/`` outputs) it logs a warning and decodes through the graph.
    """

    def __init__(self, artifacts: Artifacts, probe=None, graph=None):
        self._task = artifacts.task
        # graph: the transform graph (raw_feature_spec and a call on batched raw features); bench/transform_loader.py
        # passes tf.Transform's own layer to compare.
        self._graph = graph if graph is not None else TransformGraph(artifacts.transform_dir)
        self._raw_spec = self._graph.raw_feature_spec
        self._spec = dict(self._raw_spec)
        if self._task == "segmentation":
            self._spec[POINT_CLASSES] = tf.io.VarLenFeature(tf.int64)
            self._spec[POINT_YX] = tf.io.VarLenFeature(tf.int64)
        self.direct = False
        self._mean = self._std = None
        if probe is not None:
            self.direct = self._agrees_with_graph(probe)

    def __call__(self, serialized):
        # serialized: scalar string
        parsed = tf.io.parse_single_example(serialized, self._spec)
        decoded = self._decode_direct(parsed) if self.direct else self._decode_with_graph(parsed)
        # image: uint8 [H, W, 3] (direct) or float32 [H, W, 3] normalised (graph)
        # mask: uint8 [H, W] (direct) or int32 [H, W] (graph); or label: int32 []
        if self._task == "segmentation":
            decoded["point_classes"] = tf.cast(tf.sparse.to_dense(parsed[POINT_CLASSES]), tf.int32)
            decoded["point_yx"] = tf.reshape(tf.cast(tf.sparse.to_dense(parsed[POINT_YX]), tf.int32), [-1, 2])
        return decoded

    def normalise(self, image):
        """float32 image normalised as the graph does; decoded images are already when decoded through it."""
        if not self.direct:
            return image
        return (tf.cast(image, tf.float32) - self._mean) / self._std

    def _transform_parsed(self, parsed):
        return self._graph({name: tf.expand_dims(parsed[name], 0) for name in self._raw_spec})

    def _decode_with_graph(self, parsed, transformed=None):
        transformed = self._transform_parsed(parsed) if transformed is None else transformed
        shape = transformed["image_shape"][0]
        image = tf.reshape(transformed["image"][0], shape)
        if self._task == "classification":
            return {"image": image, "label": tf.cast(transformed["label"][0], tf.int32)}
        return {"image": image, "mask": tf.cast(tf.reshape(transformed["mask"][0], shape[:2]), tf.int32)}

    def _decode_direct(self, parsed):
        image = decode_image(parsed[IMAGE_ENCODED])
        if self._task == "classification":
            return {"image": image, "label": tf.cast(parsed[CLASS_LABEL], tf.int32)}
        return {"image": image, "mask": decode_mask(parsed[MASK_ENCODED])}

    def _agrees_with_graph(self, serialized) -> bool:
        """Decode ``serialized`` both ways; keep the graph's mean and std when the values agree."""
        parsed = tf.io.parse_single_example(serialized, self._spec)
        transformed = self._transform_parsed(parsed)
        if not {STATS_MEAN, STATS_STD} <= set(transformed):
            _LOG.warning("the tf.Transform graph has no %s and %s outputs: decoding through it (slower)",
                         STATS_MEAN, STATS_STD)
            return False
        graph = self._decode_with_graph(parsed, transformed)
        self._mean, self._std = graph_normalisation(transformed)
        self.direct = True
        direct = self._decode_direct(parsed)
        image = self.normalise(direct["image"]).numpy()
        differences = []
        if image.shape != tuple(graph["image"].shape):
            differences.append(f"image shape {image.shape} != {tuple(graph['image'].shape)}")
        elif not np.allclose(image, graph["image"].numpy(), rtol=0, atol=PROBE_TOLERANCE):
            differences.append(f"pixels differ by up to {np.abs(image - graph['image'].numpy()).max():.3g}")
        for name in ("mask", "label"):
            if name in graph and not np.array_equal(direct[name].numpy(), graph[name].numpy()):
                differences.append(f"{name} differs")
        self.direct = not differences
        if differences:
            _LOG.warning("decoding directly does not give the tf.Transform graph's values (%s): decoding through "
                         "the graph (slower)", "; ".join(differences))
        else:
            _LOG.info("decoding directly, crops normalised by the tf.Transform graph's mean and std "
                      "(the same values as the graph on the first record)")
        return self.direct
