"""Class balancing at training time: LVIS repeat factors applied per epoch (the pipeline's ``--balance training``).

The shards hold each train image once. Every epoch, each record is read ``n`` times, ``n`` drawn by stochastic
rounding of its repeat factor ``r``: ``floor(r)``, plus one with probability ``r - floor(r)``, the draw seeded by
(seed, epoch, the record's source id), so that it is the same on every worker and every restart, and another
each epoch. ``r`` is the largest ``r_c = max(1, sqrt(t / f_c))`` over the classes the record holds, ``f_c`` the
share of train images that hold class ``c`` (stats.json: the pipeline's exact statistics), as Detectron2's
RepeatFactorTrainingSampler does over indices. An epoch holds ``sum(r)`` records in expectation.

The factors are a pure function of stats.json (:func:`class_repeat_factors`); :func:`repeat_counts` is the one
tf.data step that repeats records. A shuffle after it spreads the copies (trainer/data/input.py).
"""

import math
from typing import Optional, Sequence

import tensorflow as tf

from trainer.data.decode import CLASS_LABEL, CLASS_PIXELS, SOURCE_ID

HASH_BUCKETS = 2 ** 31


def sampling_for(artifacts, requested: str) -> str:
    """--sampling, with auto resolved from the pipeline's --balance (manifest.json): training -> repeat_factor,
    strata -> strata, anything else -> shards."""
    if requested != "auto":
        return requested
    method = (artifacts.manifest.get("balance") or {}).get("method")
    if method == "training" and artifacts.stats:
        return "repeat_factor"
    return "strata" if method == "strata" else "shards"


def threshold_for(manifest: dict, requested: Optional[float]) -> float:
    """--balance_threshold, or the pipeline's as manifest.json records it."""
    return requested if requested is not None else float((manifest.get("balance") or {}).get("threshold", 0.5))


def records_per_epoch(artifacts, threshold: float, default: int) -> float:
    """The records an epoch of repeat-factor sampling holds in expectation, as the pipeline summed them at the
    same threshold; ``default`` when it summed at another."""
    balance = artifacts.manifest.get("balance") or {}
    after = balance.get("after") or {}
    if balance.get("threshold") == threshold and after.get("records_per_epoch"):
        return after["records_per_epoch"]
    return default


def class_repeat_factors(stats: dict, threshold: float) -> Sequence[float]:
    """``r_c`` per class from stats.json's presence counts of the train images (1 for a class in none)."""
    counts = stats["class_images"] if "class_images" in stats else stats["label_counts"]
    images = stats["num_images"]
    return [max(1.0, math.sqrt(threshold / (count / images))) if count > 0 and images > 0 else 1.0
            for count in counts]


def image_repeat_factors(present: Sequence[Sequence[int]], factors: Sequence[float]) -> Sequence[float]:
    """Each image's ``r``: the largest factor over the classes it holds (1 with none)."""
    return [max((factors[c] for c in classes), default=1.0) for classes in present]


class RepeatCounts:
    """serialized Example, epoch -> how many times the epoch reads it (a tf.data function)."""

    def __init__(self, factors: Sequence[float], task: str, num_classes: int, seed: int):
        self._factors = tf.constant(list(factors), tf.float32)
        self._task = task
        self._seed = tf.constant(str(seed))
        if task == "segmentation":
            self._spec = {CLASS_PIXELS: tf.io.FixedLenFeature([num_classes], tf.int64),
                          SOURCE_ID: tf.io.FixedLenFeature([], tf.string)}
        else:
            self._spec = {CLASS_LABEL: tf.io.FixedLenFeature([], tf.int64),
                          SOURCE_ID: tf.io.FixedLenFeature([], tf.string)}

    def _factor(self, parsed) -> tf.Tensor:
        if self._task == "segmentation":
            present = parsed[CLASS_PIXELS] > 0
            return tf.reduce_max(tf.where(present, self._factors, tf.ones_like(self._factors)))
        return tf.gather(self._factors, parsed[CLASS_LABEL])

    def factor(self, serialized) -> tf.Tensor:
        return self._factor(tf.io.parse_single_example(serialized, self._spec))

    def __call__(self, serialized, epoch) -> tf.Tensor:
        parsed = tf.io.parse_single_example(serialized, self._spec)        # one parse for the factor and the key
        factor = self._factor(parsed)
        key = tf.strings.join([self._seed, tf.strings.as_string(epoch), parsed[SOURCE_ID]], separator="|")
        draw = tf.cast(tf.strings.to_hash_bucket_fast(key, HASH_BUCKETS), tf.float32) / HASH_BUCKETS
        whole = tf.floor(factor)
        return tf.cast(whole, tf.int64) + tf.cast(draw < factor - whole, tf.int64)


def repeat_counts(records: tf.data.Dataset, counts: RepeatCounts, epoch) -> tf.data.Dataset:
    """``records`` (serialized Examples), each as many times as ``counts`` draws for ``epoch``, in order: the draws
    in parallel (parsing a record is most of their cost), the repeating (cheap) in one flat_map."""
    drawn = records.map(lambda serialized: (serialized, counts(serialized, epoch)),
                        num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    # (serialized Example, int64 copies)
    return drawn.flat_map(lambda serialized, n: tf.data.Dataset.from_tensors(serialized).repeat(n))
