"""Crop sample points: a few pixel coordinates of each class present in a mask.

The trainer centres crops on them to sample classes uniformly. Chosen by a
generator seeded from a stable hash of the example key, so the same example
always gives the same points; stored compactly while in flight.
"""

from typing import Dict, Sequence, Tuple

import numpy as np

from beam_pipeline.core.hashing import stable_hash

POINT_DTYPE = "<u2"    # Coordinates fit: images are at most 65535 pixels wide and high (core/pixels.py).
POINTS_SALT = "points"
PROBES = 2048


class ArrayView:
    """The classes of a mask that holds class ids: its pixels themselves."""

    def __init__(self, mask: np.ndarray):
        self.flat = mask.ravel()
        self.size, self.width = self.flat.size, mask.shape[1]

    def classes_at(self, indices: np.ndarray) -> np.ndarray:
        return self.flat[indices]

    def where(self, c: int) -> np.ndarray:
        return np.flatnonzero(self.flat == c)


def sample_points(mask, key: str, num_classes: int, per_class: int,
                  class_pixels: Sequence[int] = None) -> Dict[int, np.ndarray]:
    """Up to ``per_class`` distinct (y, x) coordinates of each class present in ``mask``.

    Random pixels are probed by a generator seeded from a stable hash of the
    key, so the same example always gives the same points; a class too rare to
    be hit often enough (a few pixels of a sign) is then looked up exactly.
    ``class_pixels`` (the mask's histogram, if known) saves counting again.
    ``mask`` is an HxW array of class ids, or a view of a mask read through a map that gives the class of
    any pixel (core/masks/mapped.py; ``class_pixels`` is then required): both give the same points for
    the same classes.
    """
    view = ArrayView(mask) if isinstance(mask, np.ndarray) else mask
    if class_pixels is None:
        class_pixels = np.bincount(view.flat, minlength=num_classes)[:num_classes]
    rng = np.random.default_rng(stable_hash(POINTS_SALT, key))
    size = view.size
    probes = rng.integers(0, size, size=min(PROBES, size)) if size else np.zeros(0, np.int64)
    probe_classes = view.classes_at(probes)
    points = {}
    for c in range(num_classes):
        count = int(class_pixels[c])
        if count == 0:
            continue
        hits = probes[probe_classes == c]
        _, first = np.unique(hits, return_index=True)
        chosen = hits[np.sort(first)][:per_class]
        if len(chosen) < min(per_class, count):
            exact = view.where(c)
            chosen = exact[rng.choice(len(exact), size=min(per_class, len(exact)), replace=False)]
        points[c] = np.stack([chosen // view.width, chosen % view.width], axis=1).astype(np.int64)
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
