"""Balancing maths: class weights for the loss and repeat factors.

Pure functions on counts; the pipeline feeds them the statistics computed
with tf.Transform and the per-image summaries made at validation.
"""

import math
from typing import Optional, Sequence, Tuple

import numpy as np

from beam_pipeline.core.hashing import unit_interval
from beam_pipeline.core.records import Refusal

REPEAT_SALT = "repeat"


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


def growth_refusal(growth: float, max_growth: float) -> Optional[Refusal]:
    """The refusal of a run whose repeat-factor balancing grows the train split beyond ``max_growth``."""
    if growth <= max_growth:
        return None
    return Refusal("max_growth", f"repeat-factor balancing would grow the train split {growth:.2f}x, above "
                                 f"--max_growth {max_growth:g}; raise --max_growth or lower --balance_threshold")
