"""Balancing maths: class weights for the loss, repeat factors and crop sample points.

Pure functions on counts and numpy arrays; the pipeline feeds them the
statistics computed with tf.Transform and the per-image summaries made at
validation.
"""

import math
from typing import Dict, Sequence, Tuple

import numpy as np

from beam_pipeline.core.hashing import stable_hash, unit_interval

REPEAT_SALT = "repeat"
POINT_DTYPE = "<u2"    # Coordinates fit: images are at most 65535 pixels wide and high (see checks.py).
POINTS_SALT = "points"


def median_frequency_weights(class_pixels: Sequence[int], class_image_pixels: Sequence[int]) -> Tuple[float, ...]:
    """Median-frequency balancing (Eigen & Fergus 2015, as used by SegNet).

    ``freq(c) = pixels of class c / total pixels of the images that contain c``
    and ``weight(c) = median(freq) / freq(c)``, the median taken over classes that
    occur. A class that never occurs gets weight 0. Ignore-label pixels are not
    counted in either input.
    """
    freqs = [p / t if p > 0 and t > 0 else 0.0 for p, t in zip(class_pixels, class_image_pixels)]
    present = [f for f in freqs if f > 0]
    if not present:
        return tuple(0.0 for _ in freqs)
    median = float(np.median(present))
    return tuple(median / f if f > 0 else 0.0 for f in freqs)


def inverse_sqrt_weights(class_pixels: Sequence[int]) -> Tuple[float, ...]:
    """``weight(c) = 1 / sqrt(share(c))``, rescaled so the pixel-weighted mean weight is 1.

    With that scaling the loss keeps its overall magnitude. Absent classes get 0.
    """
    total = float(sum(class_pixels))
    if total <= 0:
        return tuple(0.0 for _ in class_pixels)
    raw = [1.0 / math.sqrt(p / total) if p > 0 else 0.0 for p in class_pixels]
    mean = sum(w * p for w, p in zip(raw, class_pixels)) / total
    return tuple(w / mean for w in raw)


def class_repeat_factors(class_images: Sequence[int], num_images: int, threshold: float) -> Tuple[float, ...]:
    """LVIS repeat factors per class: ``r_c = max(1, sqrt(t / f_c))``.

    ``f_c`` is the fraction of the ``num_images`` training images that contain
    class ``c``. A class in no image gets 1 (it can raise nothing).
    """
    factors = []
    for count in class_images:
        if count <= 0 or num_images <= 0:
            factors.append(1.0)
            continue
        factors.append(max(1.0, math.sqrt(threshold / (count / num_images))))
    return tuple(factors)


def image_repeat_factor(present_classes: Sequence[int], factors: Sequence[float]) -> float:
    """An image's factor: the largest ``r_c`` over the classes it contains (1 if none)."""
    return max((factors[c] for c in present_classes), default=1.0)


def copies_for(key: str, factor: float) -> int:
    """``floor(factor)`` copies, plus one more with probability ``frac(factor)`` by stable hash."""
    whole = math.floor(factor)
    return whole + (1 if unit_interval(REPEAT_SALT, key) < factor - whole else 0)


def rarest_class(present_classes: Sequence[int], factors: Sequence[float]) -> int:
    """The present class with the largest repeat factor (the rarest by presence); -1 if none."""
    if not present_classes:
        return -1
    return min(present_classes, key=lambda c: (-factors[c], c))


def presence_counts(stats: dict) -> Sequence[int]:
    """Images that contain each class (segmentation) or have each label (classification)."""
    return stats["class_images"] if "class_images" in stats else stats["label_counts"]


def expected_growth(image_factors: Sequence[float]) -> float:
    """Expected dataset size after repeat-factor sampling, relative to before."""
    return sum(image_factors) / len(image_factors) if image_factors else 1.0


PROBES = 2048


def sample_points(mask: np.ndarray, key: str, num_classes: int, per_class: int,
                  class_pixels: Sequence[int] = None) -> Dict[int, np.ndarray]:
    """Up to ``per_class`` distinct (y, x) coordinates of each class present in ``mask``.

    Random pixels are probed by a generator seeded from a stable hash of the
    key, so the same example always gives the same points; a class too rare to
    be hit often enough (a few pixels of a sign) is then looked up exactly.
    ``class_pixels`` (the mask's histogram, if known) saves counting again.
    """
    flat = mask.ravel()
    width = mask.shape[1]
    if class_pixels is None:
        class_pixels = np.bincount(flat, minlength=num_classes)[:num_classes]
    rng = np.random.default_rng(stable_hash(POINTS_SALT, key))
    probes = rng.integers(0, flat.size, size=min(PROBES, flat.size)) if flat.size else np.zeros(0, np.int64)
    probe_classes = flat[probes]
    points = {}
    for c in range(num_classes):
        count = int(class_pixels[c])
        if count == 0:
            continue
        hits = probes[probe_classes == c]
        _, first = np.unique(hits, return_index=True)
        chosen = hits[np.sort(first)][:per_class]
        if len(chosen) < min(per_class, count):
            exact = np.flatnonzero(flat == c)
            chosen = exact[rng.choice(len(exact), size=min(per_class, len(exact)), replace=False)]
        points[c] = np.stack([chosen // width, chosen % width], axis=1).astype(np.int64)
    return points


def flatten_points(points: Dict[int, np.ndarray], num_classes: int) -> Tuple[bytes, bytes]:
    """Points as two compact byte strings: class ids (uint8) and (y, x) pairs (uint16, little-endian).

    Bytes keep the in-flight record small; :func:`unflatten_points` gives the int lists back.
    """
    classes, coords = [], []
    for c in range(num_classes):
        if c in points:
            classes.extend([c] * len(points[c]))
            coords.append(points[c].ravel())
    yx = np.concatenate(coords).astype(POINT_DTYPE) if coords else np.zeros(0, POINT_DTYPE)
    return np.asarray(classes, dtype=np.uint8).tobytes(), yx.tobytes()


def unflatten_points(classes: bytes, yx: bytes) -> Tuple[np.ndarray, np.ndarray]:
    return np.frombuffer(classes, dtype=np.uint8), np.frombuffer(yx, dtype=POINT_DTYPE)
