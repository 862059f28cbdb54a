"""The statistics' input and output: one pair's summary for tf.Transform, and stats.json from its totals.

Pure: :func:`summary_values` gives the raw features the analysis reads (no
pixels); :func:`build_stats` takes the integer totals and returns a JSON-ready
dict with shares, the image mean and standard deviation per channel, and both
kinds of class weights.
"""

import math
from typing import Dict, List, Sequence

from beam_pipeline.core import features as f
from beam_pipeline.core.balance import inverse_sqrt_weights, median_frequency_weights
from beam_pipeline.core.selection import TRAIN


def summary_values(pair, task: str) -> Dict[str, List]:
    """The raw features of one ValidPair as the analysis reads them: its summaries, empty encoded bytes."""
    values = {f.IMAGE_ENCODED: [b""], f.IMAGE_HEIGHT: [pair.height], f.IMAGE_WIDTH: [pair.width],
              f.CHANNEL_SUM: list(pair.channel_sum), f.CHANNEL_SUM_SQUARES: list(pair.channel_sum_squares)}
    if task == "classification":
        values[f.CLASS_LABEL] = [pair.label]
    else:
        values.update({f.MASK_ENCODED: [b""], f.CLASS_PIXELS: list(pair.class_pixels),
                       f.IGNORE_PIXELS: [pair.ignore_pixels]})
    return values


def channel_moments(channel_sum: Sequence[int], channel_sum_squares: Sequence[int], pixels: int):
    """Per-channel mean and (population) standard deviation from exact integer sums."""
    if pixels <= 0:
        return [0.0] * len(channel_sum), [1.0] * len(channel_sum)
    means = [s / pixels for s in channel_sum]
    stds = [math.sqrt(max(q / pixels - m * m, 0.0)) for q, m in zip(channel_sum_squares, means)]
    return means, stds


def build_stats(totals: Dict[str, object], task: str, num_classes: int, ignore_label, class_names) -> dict:
    """``totals`` holds the tf.Transform sums (see beam_pipeline/stages/preprocessing.py)."""
    names = list(class_names) or [str(c) for c in range(num_classes)]
    num_images = int(totals["num_images"])
    pixels = int(totals["pixels"])
    means, stds = channel_moments(totals["channel_sum"], totals["channel_sum_squares"], pixels)
    stats = {
        "split": TRAIN,
        "task": task,
        "num_classes": num_classes,
        "class_names": names,
        "num_images": num_images,
        "image_pixels": pixels,
        "image_mean": means,
        "image_std": stds,
    }
    if task == "classification":
        counts = [int(c) for c in totals["label_counts"]]
        stats["label_counts"] = counts
        stats["label_share"] = [c / num_images if num_images else 0.0 for c in counts]
        present = sum(counts)
        stats["class_weights"] = {
            "median_freq": list(median_frequency_weights(counts, [present] * num_classes)),
            "inv_sqrt": list(inverse_sqrt_weights(counts)),
        }
        return stats
    class_pixels = [int(c) for c in totals["class_pixels"]]
    class_images = [int(c) for c in totals["class_images"]]
    class_image_pixels = [int(c) for c in totals["class_image_pixels"]]
    ignore = int(totals["ignore_pixels"])
    labelled = sum(class_pixels)
    stats.update({
        "ignore_label": ignore_label,
        "class_pixels": class_pixels,
        "class_images": class_images,
        "class_image_pixels": class_image_pixels,
        "ignore_pixels": ignore,
        "ignore_share": ignore / pixels if pixels else 0.0,
        "class_pixel_share": [p / labelled if labelled else 0.0 for p in class_pixels],
        "class_image_share": [n / num_images if num_images else 0.0 for n in class_images],
        "class_weights": {
            "median_freq": list(median_frequency_weights(class_pixels, class_image_pixels)),
            "inv_sqrt": list(inverse_sqrt_weights(class_pixels)),
        },
    })
    return stats
