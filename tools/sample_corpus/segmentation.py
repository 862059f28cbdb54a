"""Deterministic synthetic image corpus for the Beam -> TFRecord pipeline.

Run ``python -m tools.sample_corpus OUT [--seed 0] [--num_pairs 240]
[--num_class_images 400] [--scale 1] [--overwrite]`` or call
:func:`write_corpus`.  Every random choice comes from
``numpy.random.default_rng`` seeded with ``seed`` (one stream per item, keyed
by ``[seed, stream, index]``), so the same arguments always produce
byte-identical files.  Only the standard library, numpy and Pillow are used.

Layout written under ``OUT``::

    OUT/segmentation/
        images/<stem>.jpg | <stem>.png   scene images (~60% JPEG q90, ~40% PNG)
        masks/<stem>.png                 8-bit single-channel label masks
        manifest.csv                     image,mask,source,capture_year,split
        README.txt                       the broken inputs and why
    OUT/classification/
        images/<class_name>/<stem>.jpg   Food-101-like, imbalanced classes
        manifest.csv                     image,label,source
        README.txt                       the broken inputs and why
    OUT/outside/escape.jpg               target of the path-escaping manifest row

Segmentation
    ``num_pairs * scale`` distinct valid pairs.  Regular pairs are named
    ``img_000000``...; seven of the valid pairs are valid-but-unusual inputs:
    ``gray_000``/``gray_001`` (greyscale 'L' JPEG images), ``rgba_000``/
    ``rgba_001`` (RGBA PNG images), ``palette_000``/``palette_001`` (masks
    saved as palette 'P' PNGs whose indices are the class ids, with a VOC-like
    colour map, so palette colours differ from the ids) and ``mask16_000``
    (mask saved as a 16-bit 'I;16' PNG holding only class ids / 255).
    Images are 480x360, 512x384 or 640x480 (WxH) street-like scenes drawn from
    shapes and textures with a per-class palette, so pixels correlate with
    labels.  Classes are ``CLASS_NAMES`` (ids 0..7); class 0 (background)
    fills what is left.  The rarest class ``RAREST_CLASS`` (7, sign) is in
    ``max(1, round(0.035 * valid_pairs))`` images (about 3.5%) and holds far
    under 0.5% of the labelled pixels.  About half of the masks (all of the
    unusual ones) carry a 1-2 px band of ``IGNORE_LABEL`` (255) around object
    boundaries.  Splits are exactly 80/10/10 (rounded) over the valid pairs.
    Manifest rows: valid pairs, dup_copy, the repeated row, then the broken
    rows (240 valid pairs -> 252 rows).

Deliberately broken segmentation inputs (fixed stems, each appears once
whatever ``scale`` is; all are listed in manifest.csv unless noted):

    broken_truncated    JPEG image cut to half its bytes (valid mask).
    broken_notimage     images/broken_notimage.jpg holds plain text.
    broken_gif          images/broken_gif.png is really a GIF file.
    broken_bomb         images/broken_bomb.png declares 20000x20000 pixels
                        (mode 'L', all zeros, ~390 KB); its mask is a small
                        valid 480x360 mask.
    broken_sizemismatch image 480x360, mask 320x240.
    broken_badlabel     mask contains label 9 (valid: 0..7 and 255).
    broken_rgbmask      mask saved as an RGB (3-channel) PNG.
    broken_emptymask    mask file of 0 bytes.
    broken_missingmask  listed in manifest.csv; the mask file does not exist.
    orphan_image        images/orphan_image.jpg, no mask, NOT in manifest.csv.
    orphan_mask         masks/orphan_mask.png, no image, NOT in manifest.csv.
    duplicate row       the first train regular pair's row appears twice.
    dup_copy            image and mask are byte-identical copies of the second
                        train regular pair (listed; same metadata as source).
    escape              manifest row whose image is ``../outside/escape.jpg``
                        with mask ``masks/escape.png``.  No image for it lives
                        in images/, so for the paired-folder input form
                        ``masks/escape.png`` is simply one more orphan mask.

Classification
    ``num_class_images * scale`` valid JPEGs (256..384 px per side) spread over
    ``CLASSIFICATION_CLASSES`` with geometric decay (largest class ~10x the
    smallest), plus one valid greyscale JPEG
    (``images/<CLASSIFICATION_CLASSES[2]>/gray_000.jpg``) and two broken files:
    ``images/<CLASSIFICATION_CLASSES[0]>/broken_truncated.jpg`` (JPEG cut to
    half its bytes) and ``images/<CLASSIFICATION_CLASSES[1]>/broken_notimage.jpg``
    (plain text).  All of them are listed in manifest.csv.
"""

from __future__ import annotations

import argparse
import csv
import functools
import io
import shutil
import struct
import sys
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from PIL import Image

# --------------------------------------------------------------------------
# Segmentation constants
# --------------------------------------------------------------------------
CLASS_NAMES: tuple[str, ...] = (
    "background",
    "sky",
    "road",
    "building",
    "vegetation",
    "vehicle",
    "person",
    "sign",
)
NUM_CLASSES: int = len(CLASS_NAMES)
BACKGROUND_CLASS: int = 0
SKY, ROAD, BUILDING, VEGETATION, VEHICLE, PERSON, SIGN = range(1, 8)
RAREST_CLASS: int = SIGN
IGNORE_LABEL: int = 255
BAD_LABEL: int = 9  # value written into broken_badlabel's mask

RAREST_CLASS_IMAGE_FRACTION: float = 0.025
# Probability that a (regular) scene contains each non-background, non-rare class.
CLASS_PRESENCE: dict[int, float] = {
    SKY: 0.85,
    ROAD: 0.75,
    BUILDING: 0.6,
    VEGETATION: 0.5,
    VEHICLE: 0.35,
    PERSON: 0.15,
}
IGNORE_BAND_PROBABILITY: float = 0.6
IGNORE_BAND_CLASSES: tuple[int, ...] = (BUILDING, VEGETATION, VEHICLE, PERSON)

IMAGE_SIZES: tuple[tuple[int, int], ...] = ((480, 360), (512, 384), (640, 480))  # (W, H)
IMAGE_SIZE_WEIGHTS: tuple[float, ...] = (0.5, 0.3, 0.2)
PNG_FRACTION: float = 0.4
JPEG_QUALITY: int = 90
PNG_IMAGE_COMPRESS_LEVEL: int = 1  # zlib level for photo PNGs (level 6 is ~5x slower, barely smaller)
PNG_MASK_COMPRESS_LEVEL: int = 1  # zlib level for 8-bit label masks (files stay ~3 KB)

SOURCES: tuple[str, ...] = ("camA", "camB", "camC")
CAPTURE_YEARS: tuple[int, ...] = tuple(range(2018, 2024))
SPLITS: tuple[str, ...] = ("train", "val", "test")
SPLIT_FRACTIONS: tuple[float, ...] = (0.8, 0.1, 0.1)
SEGMENTATION_MANIFEST_COLUMNS: tuple[str, ...] = ("image", "mask", "source", "capture_year", "split")

SEGMENTATION_DIR: str = "segmentation"
CLASSIFICATION_DIR: str = "classification"
OUTSIDE_DIR: str = "outside"
LISTING_NAME: str = "manifest.csv"
README_NAME: str = "README.txt"

# Valid-but-unusual pairs: stem -> kind.
UNUSUAL_PAIRS: tuple[tuple[str, str], ...] = (
    ("gray_000", "gray"),
    ("gray_001", "gray"),
    ("rgba_000", "rgba"),
    ("rgba_001", "rgba"),
    ("palette_000", "palette"),
    ("palette_001", "palette"),
    ("mask16_000", "mask16"),
)
MIN_NUM_PAIRS: int = len(UNUSUAL_PAIRS) + 3

BOMB_SIZE: int = 20000
PNG_SIGNATURE: bytes = b"\x89PNG\r\n\x1a\n"
SIZEMISMATCH_IMAGE_SIZE: tuple[int, int] = (480, 360)
SIZEMISMATCH_MASK_SIZE: tuple[int, int] = (320, 240)
DUP_COPY_STEM: str = "dup_copy"
ESCAPE_STEM: str = "escape"
ESCAPE_IMAGE_REL: str = "../outside/escape.jpg"
ORPHAN_IMAGE_STEM: str = "orphan_image"
ORPHAN_MASK_STEM: str = "orphan_mask"

# Broken segmentation inputs: stem -> why it is broken (also written to README.txt).
BROKEN_SEGMENTATION_INPUTS: dict[str, str] = {
    "broken_truncated": "images/broken_truncated.jpg is a JPEG cut to half its bytes (mask is valid).",
    "broken_notimage": "images/broken_notimage.jpg holds plain text, not an image (mask is valid).",
    "broken_gif": "images/broken_gif.png is a GIF file with a .png extension (mask is valid).",
    "broken_bomb": (
        f"images/broken_bomb.png declares {BOMB_SIZE}x{BOMB_SIZE} pixels (mode L, all zeros): "
        "a decompression bomb (mask is a small valid mask)."
    ),
    "broken_sizemismatch": "image is 480x360 but masks/broken_sizemismatch.png is 320x240.",
    "broken_badlabel": f"mask contains label {BAD_LABEL} (valid ids are 0..7 and 255).",
    "broken_rgbmask": "masks/broken_rgbmask.png is an RGB (3-channel) PNG.",
    "broken_emptymask": "masks/broken_emptymask.png is an empty (0-byte) file.",
    "broken_missingmask": "listed in manifest.csv but masks/broken_missingmask.png does not exist.",
    ORPHAN_IMAGE_STEM: "images/orphan_image.jpg has no mask and is NOT in manifest.csv.",
    ORPHAN_MASK_STEM: "masks/orphan_mask.png has no image and is NOT in manifest.csv.",
    DUP_COPY_STEM: "image and mask are byte-identical copies of another valid pair (listed in manifest.csv).",
    ESCAPE_STEM: (
        f"manifest row image path {ESCAPE_IMAGE_REL} escapes the manifest folder; "
        "masks/escape.png has no image in images/ (an orphan mask for the paired-folder form)."
    ),
}
# Image file name of each broken stem that has an image in images/.
BROKEN_IMAGE_FILES: dict[str, str] = {
    "broken_truncated": "broken_truncated.jpg",
    "broken_notimage": "broken_notimage.jpg",
    "broken_gif": "broken_gif.png",
    "broken_bomb": "broken_bomb.png",
    "broken_sizemismatch": "broken_sizemismatch.jpg",
    "broken_badlabel": "broken_badlabel.jpg",
    "broken_rgbmask": "broken_rgbmask.jpg",
    "broken_emptymask": "broken_emptymask.jpg",
    "broken_missingmask": "broken_missingmask.jpg",
}

# --------------------------------------------------------------------------
# Classification constants
# --------------------------------------------------------------------------
CLASSIFICATION_CLASSES: tuple[str, ...] = (
    "pizza",
    "sushi",
    "ramen",
    "french_fries",
    "caesar_salad",
    "apple_pie",
    "guacamole",
    "chocolate_cake",
)
CLASSIFICATION_IMBALANCE: float = 10.0  # largest class / smallest class (target)
CLASSIFICATION_SIZE_RANGE: tuple[int, int] = (256, 384)  # inclusive, per side
CLASSIFICATION_JPEG_QUALITY_RANGE: tuple[int, int] = (75, 95)  # inclusive
CLASSIFICATION_MANIFEST_COLUMNS: tuple[str, ...] = ("image", "label", "source")
BROKEN_CLASSIFICATION_INPUTS: dict[str, str] = {
    f"images/{CLASSIFICATION_CLASSES[0]}/broken_truncated.jpg": "JPEG cut to half its bytes.",
    f"images/{CLASSIFICATION_CLASSES[1]}/broken_notimage.jpg": "plain text with a .jpg extension.",
}
CLASSIFICATION_GRAY_IMAGE: str = f"images/{CLASSIFICATION_CLASSES[2]}/gray_000.jpg"
# Files written once on top of the regular images: (path, kind).
CLASSIFICATION_EXTRA_FILES: tuple[tuple[str, str], ...] = (
    (CLASSIFICATION_GRAY_IMAGE, "gray"),
    (f"images/{CLASSIFICATION_CLASSES[0]}/broken_truncated.jpg", "truncated"),
    (f"images/{CLASSIFICATION_CLASSES[1]}/broken_notimage.jpg", "text"),
)

# --------------------------------------------------------------------------
# Rendering constants
# --------------------------------------------------------------------------
Rgb = tuple[int, int, int]

CLASS_COLOURS: dict[int, tuple[Rgb, ...]] = {
    BACKGROUND_CLASS: ((120, 110, 95), (95, 95, 100), (140, 130, 115)),
    SKY: ((135, 190, 235), (170, 200, 225), (110, 160, 220)),
    ROAD: ((75, 75, 80), (95, 92, 90), (60, 62, 66)),
    BUILDING: ((165, 120, 95), (150, 150, 155), (190, 175, 150)),
    VEGETATION: ((60, 130, 50), (40, 100, 35), (90, 140, 60)),
    VEHICLE: ((200, 30, 30), (30, 60, 170), (230, 230, 230), (30, 30, 30), (150, 150, 160)),
    PERSON: ((200, 150, 120), (60, 60, 120), (120, 40, 40)),
    SIGN: ((230, 40, 40), (240, 200, 30), (30, 90, 200)),
}
SOURCE_CASTS: dict[str, tuple[float, float, float]] = {
    "camA": (1.06, 1.0, 0.92),
    "camB": (0.93, 1.0, 1.07),
    "camC": (1.0, 1.0, 1.0),
}
COLOUR_JITTER: float = 12.0
SIGN_SIZE_RANGE: tuple[int, int] = (10, 22)  # px, inclusive

T = TypeVar("T")

# Random streams: every item draws from default_rng([seed, stream, index]).
_STREAM_PLAN = 0
_STREAM_PAIR = 1
_STREAM_UNUSUAL = 2
_STREAM_BROKEN = 3
_STREAM_CLS_PLAN = 4
_STREAM_CLS_IMAGE = 5
_STREAM_CLS_EXTRA = 6


# ==========================================================================
# Small helpers
# ==========================================================================
def _rng(seed: int, stream: int, index: int = 0) -> np.random.Generator:
    """Independent, seeded generator for one item."""
    return np.random.default_rng([seed, stream, index])


def _choice(rng: np.random.Generator, options: Sequence[T]) -> T:
    return options[int(rng.integers(len(options)))]


def _jittered(rng: np.random.Generator, palette: Sequence[Rgb]) -> np.ndarray:
    base = np.asarray(_choice(rng, palette), dtype=np.float32)
    return base + rng.normal(0.0, COLOUR_JITTER, 3).astype(np.float32)


def voc_colormap() -> list[int]:
    """Flat 768-entry PASCAL-VOC-like palette (index 0 black, 1 dark red, ...)."""
    palette: list[int] = []
    for index in range(256):
        red = green = blue = 0
        value = index
        for shift in range(7, -1, -1):
            red |= ((value >> 0) & 1) << shift
            green |= ((value >> 1) & 1) << shift
            blue |= ((value >> 2) & 1) << shift
            value >>= 3
        palette.extend((red, green, blue))
    return palette


# ==========================================================================
# Shapes: each returns ((y0, y1, x0, x1), bool mask of the bbox) or None.
# ==========================================================================
Bbox = tuple[int, int, int, int]
Shape = tuple[Bbox, np.ndarray]


def _clip_bbox(height: int, width: int, y0: float, y1: float, x0: float, x1: float) -> Bbox | None:
    top, bottom = max(0, int(np.floor(y0))), min(height, int(np.ceil(y1)))
    left, right = max(0, int(np.floor(x0))), min(width, int(np.ceil(x1)))
    if bottom <= top or right <= left:
        return None
    return top, bottom, left, right


def rect_shape(height: int, width: int, x0: float, y0: float, x1: float, y1: float) -> Shape | None:
    bbox = _clip_bbox(height, width, y0, y1, x0, x1)
    if bbox is None:
        return None
    return bbox, np.ones((bbox[1] - bbox[0], bbox[3] - bbox[2]), dtype=bool)


def ellipse_shape(height: int, width: int, cx: float, cy: float, rx: float, ry: float) -> Shape | None:
    bbox = _clip_bbox(height, width, cy - ry, cy + ry, cx - rx, cx + rx)
    if bbox is None:
        return None
    top, bottom, left, right = bbox
    ys = (np.arange(top, bottom, dtype=np.float32)[:, None] + 0.5 - cy) / max(ry, 0.5)
    xs = (np.arange(left, right, dtype=np.float32)[None, :] + 0.5 - cx) / max(rx, 0.5)
    mask = ys * ys + xs * xs <= 1.0
    return (bbox, mask) if mask.any() else None


def polygon_shape(height: int, width: int, vertices: Sequence[tuple[float, float]]) -> Shape | None:
    """Even-odd fill of a polygon given as (x, y) vertices, vectorised per edge."""
    xs_v = [v[0] for v in vertices]
    ys_v = [v[1] for v in vertices]
    bbox = _clip_bbox(height, width, min(ys_v), max(ys_v), min(xs_v), max(xs_v))
    if bbox is None:
        return None
    top, bottom, left, right = bbox
    ys = np.arange(top, bottom, dtype=np.float64)[:, None] + 0.5
    xs = np.arange(left, right, dtype=np.float64)[None, :] + 0.5
    inside = np.zeros((bottom - top, right - left), dtype=bool)
    for (xa, ya), (xb, yb) in zip(vertices, list(vertices[1:]) + [vertices[0]]):
        if ya == yb:
            continue
        crosses = (ya > ys) != (yb > ys)
        x_cross = xa + (ys - ya) * (xb - xa) / (yb - ya)
        inside ^= crosses & (xs < x_cross)
    return (bbox, inside) if inside.any() else None


def rotated_rect_vertices(cx: float, cy: float, half_w: float, half_h: float, angle: float) -> list[tuple[float, float]]:
    cos_a, sin_a = float(np.cos(angle)), float(np.sin(angle))
    corners = ((-half_w, -half_h), (half_w, -half_h), (half_w, half_h), (-half_w, half_h))
    return [(cx + dx * cos_a - dy * sin_a, cy + dx * sin_a + dy * cos_a) for dx, dy in corners]


def regular_polygon_vertices(cx: float, cy: float, radius: float, sides: int, phase: float) -> list[tuple[float, float]]:
    angles = phase + 2.0 * np.pi * np.arange(sides) / sides
    return [(cx + radius * float(np.cos(a)), cy + radius * float(np.sin(a))) for a in angles]


# ==========================================================================
# Textures: (h, w) float32 shade fields, roughly in [-1, 1].
# ==========================================================================
def _texture_flat(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    return np.zeros((height, width), dtype=np.float32)


def _texture_noise(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    return rng.random((height, width), dtype=np.float32) - np.float32(0.5)


def _texture_blotch(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    cell = int(rng.integers(4, 16))
    small = rng.standard_normal((height // cell + 2, width // cell + 2), dtype=np.float32)
    field = Image.fromarray(small).resize((width, height), Image.Resampling.BILINEAR)
    return np.asarray(field, dtype=np.float32)


def _texture_stripes(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    period = float(rng.uniform(4.0, 18.0))
    angle = float(rng.uniform(0.0, np.pi))
    ys = np.arange(height, dtype=np.float32)[:, None]
    xs = np.arange(width, dtype=np.float32)[None, :]
    phase = (xs * np.cos(angle) + ys * np.sin(angle)) * (2.0 * np.pi / period)
    return np.sin(phase).astype(np.float32)


def _texture_gradient(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    angle = float(rng.uniform(0.0, 2.0 * np.pi))
    ys = np.linspace(-1.0, 1.0, height, dtype=np.float32)[:, None]
    xs = np.linspace(-1.0, 1.0, width, dtype=np.float32)[None, :]
    return (xs * np.cos(angle) + ys * np.sin(angle)).astype(np.float32)


def _texture_checker(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    cell = int(rng.integers(4, 20))
    ys = (np.arange(height)[:, None] // cell) % 2
    xs = (np.arange(width)[None, :] // cell) % 2
    return ((ys ^ xs) * 2 - 1).astype(np.float32)


def _texture_windows(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    step_x, step_y = int(rng.integers(8, 20)), int(rng.integers(10, 24))
    ys = (np.arange(height)[:, None] % step_y) < step_y * 0.55
    xs = (np.arange(width)[None, :] % step_x) < step_x * 0.5
    return np.where(ys & xs, -1.0, 0.3).astype(np.float32)


TextureFn = Callable[[np.random.Generator, int, int], np.ndarray]
TEXTURES: dict[str, TextureFn] = {
    "flat": _texture_flat,
    "noise": _texture_noise,
    "blotch": _texture_blotch,
    "stripes": _texture_stripes,
    "gradient": _texture_gradient,
    "checker": _texture_checker,
    "windows": _texture_windows,
}


# ==========================================================================
# Canvas and painting
# ==========================================================================
@dataclass
class Canvas:
    """Label map plus a paint-by-numbers image.

    Each painted shape becomes an entry of ``colours``; ``instance`` holds the
    entry per pixel and ``shade`` a per-pixel brightness offset (texture).
    :meth:`to_rgb` combines them; this keeps painting single-channel and cheap.
    """

    label: np.ndarray  # (H, W) uint8 class ids
    instance: np.ndarray  # (H, W) uint8 index into colours
    shade: np.ndarray  # (H, W) float32 brightness offset
    colours: list[np.ndarray]

    @classmethod
    def blank(cls, width: int, height: int) -> Canvas:
        zeros_u8 = np.zeros((height, width), dtype=np.uint8)
        return cls(zeros_u8, zeros_u8.copy(), np.zeros((height, width), dtype=np.float32), [np.zeros(3, np.float32)])

    @property
    def height(self) -> int:
        return int(self.label.shape[0])

    @property
    def width(self) -> int:
        return int(self.label.shape[1])

    def add_colour(self, colour: np.ndarray) -> int:
        if len(self.colours) >= 256:
            raise ValueError("a canvas holds at most 256 painted shapes")
        self.colours.append(np.asarray(colour, dtype=np.float32))
        return len(self.colours) - 1

    def to_rgb(self, gain: np.ndarray, luminance: np.ndarray) -> np.ndarray:
        """uint8 RGB = clip(colour * gain + shade + luminance), in int16 arithmetic.

        ``luminance`` (H, W) float32 is used as scratch space and modified.
        """
        table = np.clip(np.stack(self.colours) * gain[None, :], -255.0, 510.0).astype(np.int16)
        luminance += self.shade
        offset = luminance.astype(np.int16)
        out = np.empty((self.height, self.width, 3), dtype=np.uint8)
        for channel in range(3):  # per-channel 1-D lookups are much faster than table[instance]
            plane = np.take(table[:, channel], self.instance)
            plane += offset
            np.clip(plane, 0, 255, out=plane)
            out[..., channel] = plane
        return out


def paint(
    canvas: Canvas,
    shape: Shape | None,
    class_id: int,
    colour: np.ndarray,
    texture: str,
    amplitude: float,
    rng: np.random.Generator,
) -> None:
    """Paint a shape with a textured colour and write its class into the label map."""
    if shape is None:
        return
    (top, bottom, left, right), mask = shape
    instance_id = canvas.add_colour(colour)
    if amplitude == 0.0 or texture == "flat":
        shade: np.ndarray | np.float32 = np.float32(0.0)
    else:
        shade = TEXTURES[texture](rng, bottom - top, right - left) * np.float32(amplitude)
    views = (
        (canvas.label[top:bottom, left:right], class_id),
        (canvas.instance[top:bottom, left:right], instance_id),
        (canvas.shade[top:bottom, left:right], shade),
    )
    full = bool(mask.all())
    for view, value in views:
        if full:
            view[...] = value
        else:
            np.copyto(view, value, where=mask)


def _paint_class(canvas: Canvas, rng: np.random.Generator, shape: Shape | None, class_id: int, texture: str, amplitude: float) -> None:
    paint(canvas, shape, class_id, _jittered(rng, CLASS_COLOURS[class_id]), texture, amplitude, rng)


def finish_image(canvas: Canvas, rng: np.random.Generator, cast: Sequence[float]) -> np.ndarray:
    """Apply camera cast, brightness, vignette and luminance grain; return uint8 RGB."""
    height, width = canvas.height, canvas.width
    gain = np.asarray(cast, dtype=np.float32) * np.float32(rng.uniform(0.85, 1.15))
    vignette_strength = np.float32(rng.uniform(5.0, 20.0))
    grain = rng.random((height, width), dtype=np.float32) - np.float32(0.5)
    grain *= np.float32(rng.uniform(4.0, 10.0))
    grain -= _radius_squared(height, width) * vignette_strength  # darker corners
    return canvas.to_rgb(gain, grain)


@functools.lru_cache(maxsize=8)
def _radius_squared(height: int, width: int) -> np.ndarray:
    """Read-only (H, W) squared distance from the centre, corners = 2."""
    ys = np.linspace(-1.0, 1.0, height, dtype=np.float32)[:, None]
    xs = np.linspace(-1.0, 1.0, width, dtype=np.float32)[None, :]
    radius = xs * xs + ys * ys
    radius.flags.writeable = False
    return radius


# ==========================================================================
# Segmentation scenes
# ==========================================================================
def _perspective(canvas: Canvas, rng: np.random.Generator, horizon: int) -> tuple[float, float]:
    """Random ground point below the horizon and its depth scale in (0, 1]."""
    y_bottom = float(rng.uniform(horizon + 0.12 * (canvas.height - horizon), canvas.height))
    scale = (y_bottom - horizon) / max(1.0, canvas.height - horizon)
    return y_bottom, scale


def _draw_clutter(canvas: Canvas, rng: np.random.Generator) -> None:
    for _ in range(int(rng.integers(2, 6))):
        cx, cy = rng.uniform(0, canvas.width), rng.uniform(0, canvas.height)
        radius = rng.uniform(0.05, 0.25) * canvas.width
        sides = int(rng.integers(3, 7))
        shape = polygon_shape(canvas.height, canvas.width, regular_polygon_vertices(cx, cy, radius, sides, rng.uniform(0, np.pi)))
        texture = _choice(rng, ("noise", "checker", "blotch"))
        _paint_class(canvas, rng, shape, BACKGROUND_CLASS, texture, 18.0)


def _draw_sky(canvas: Canvas, rng: np.random.Generator, horizon: int) -> None:
    shape = rect_shape(canvas.height, canvas.width, 0, 0, canvas.width, horizon)
    colour = _jittered(rng, CLASS_COLOURS[SKY])
    paint(canvas, shape, SKY, colour, "gradient", 15.0, rng)
    for _ in range(int(rng.integers(0, 4))):  # clouds, still sky
        cloud = ellipse_shape(
            canvas.height, canvas.width, rng.uniform(0, canvas.width), rng.uniform(0, horizon * 0.7),
            rng.uniform(20, 80), rng.uniform(6, 20),
        )
        paint(canvas, _restrict(cloud, canvas, SKY), SKY, colour + 45.0, "blotch", 8.0, rng)


def _restrict(shape: Shape | None, canvas: Canvas, class_id: int) -> Shape | None:
    """Keep only the part of a shape currently labelled ``class_id``."""
    if shape is None:
        return None
    (top, bottom, left, right), mask = shape
    mask = mask & (canvas.label[top:bottom, left:right] == class_id)
    return ((top, bottom, left, right), mask) if mask.any() else None


def _draw_buildings(canvas: Canvas, rng: np.random.Generator, horizon: int) -> None:
    for _ in range(int(rng.integers(1, 5))):
        width = rng.uniform(0.08, 0.25) * canvas.width
        height = rng.uniform(0.15, 0.4) * canvas.height
        x0 = rng.uniform(-0.05 * canvas.width, canvas.width - 0.5 * width)
        y1 = horizon + rng.uniform(0.0, 0.05) * canvas.height
        shape = rect_shape(canvas.height, canvas.width, x0, y1 - height, x0 + width, y1)
        _paint_class(canvas, rng, shape, BUILDING, _choice(rng, ("windows", "stripes", "checker")), 30.0)


def _draw_vegetation(canvas: Canvas, rng: np.random.Generator, horizon: int) -> None:
    for _ in range(int(rng.integers(1, 6))):
        shape = ellipse_shape(
            canvas.height, canvas.width, rng.uniform(0, canvas.width),
            horizon + rng.uniform(-0.12, 0.08) * canvas.height,
            rng.uniform(0.04, 0.14) * canvas.width, rng.uniform(0.05, 0.18) * canvas.height,
        )
        _paint_class(canvas, rng, shape, VEGETATION, "blotch", 25.0)


def _draw_road(canvas: Canvas, rng: np.random.Generator, horizon: int) -> None:
    vanish = rng.uniform(0.3, 0.7) * canvas.width
    half_top = rng.uniform(0.01, 0.05) * canvas.width
    left = rng.uniform(-0.3, 0.2) * canvas.width
    right = rng.uniform(0.8, 1.3) * canvas.width
    bottom = float(canvas.height)
    vertices = [(left, bottom), (right, bottom), (vanish + half_top, horizon), (vanish - half_top, horizon)]
    _paint_class(canvas, rng, polygon_shape(canvas.height, canvas.width, vertices), ROAD, "noise", 14.0)
    lane_half = max(1.0, 0.006 * canvas.width)
    centre_bottom = (left + right) / 2.0
    lane = [(centre_bottom - lane_half, bottom), (centre_bottom + lane_half, bottom), (vanish + 0.5, horizon), (vanish - 0.5, horizon)]
    lane_colour = np.asarray((220.0, 215.0, 200.0), dtype=np.float32)
    paint(canvas, polygon_shape(canvas.height, canvas.width, lane), ROAD, lane_colour, "flat", 0.0, rng)


def _draw_vehicles(canvas: Canvas, rng: np.random.Generator, horizon: int) -> None:
    for _ in range(int(rng.integers(1, 4))):
        y_bottom, scale = _perspective(canvas, rng, horizon)
        body_w = canvas.width * (0.06 + 0.2 * scale)
        body_h = body_w * rng.uniform(0.3, 0.4)
        x0 = rng.uniform(-0.1 * body_w, canvas.width - 0.9 * body_w)
        colour = _jittered(rng, CLASS_COLOURS[VEHICLE])
        body = rect_shape(canvas.height, canvas.width, x0, y_bottom - body_h, x0 + body_w, y_bottom - 0.15 * body_h)
        paint(canvas, body, VEHICLE, colour, "gradient", 25.0, rng)
        cabin_top = y_bottom - body_h * 1.7
        cabin = [
            (x0 + 0.15 * body_w, y_bottom - body_h + 1),
            (x0 + 0.85 * body_w, y_bottom - body_h + 1),
            (x0 + 0.7 * body_w, cabin_top),
            (x0 + 0.3 * body_w, cabin_top),
        ]
        paint(canvas, polygon_shape(canvas.height, canvas.width, cabin), VEHICLE, colour * 0.8, "gradient", 20.0, rng)
        wheel_r = 0.13 * body_w
        tyre = np.asarray((25.0, 25.0, 25.0), dtype=np.float32)
        for wheel_x in (x0 + 0.22 * body_w, x0 + 0.78 * body_w):
            wheel = ellipse_shape(canvas.height, canvas.width, wheel_x, y_bottom - wheel_r, wheel_r, wheel_r)
            paint(canvas, wheel, VEHICLE, tyre, "noise", 6.0, rng)


def _draw_persons(canvas: Canvas, rng: np.random.Generator, horizon: int) -> None:
    for _ in range(int(rng.integers(1, 4))):
        y_bottom, scale = _perspective(canvas, rng, horizon)
        height = canvas.height * (0.08 + 0.3 * scale)
        width = height * rng.uniform(0.25, 0.35)
        cx = rng.uniform(0, canvas.width)
        head_r = width * 0.35
        clothes = _jittered(rng, CLASS_COLOURS[PERSON])
        body = rect_shape(canvas.height, canvas.width, cx - width / 2, y_bottom - height + 2 * head_r, cx + width / 2, y_bottom)
        paint(canvas, body, PERSON, clothes, _choice(rng, ("stripes", "flat", "noise")), 20.0, rng)
        skin = np.asarray((205.0, 160.0, 130.0), dtype=np.float32) + rng.normal(0, 15, 3).astype(np.float32)
        head = ellipse_shape(canvas.height, canvas.width, cx, y_bottom - height + head_r, head_r, head_r * 1.1)
        paint(canvas, head, PERSON, skin, "flat", 0.0, rng)


def _draw_sign(canvas: Canvas, rng: np.random.Generator, horizon: int) -> None:
    """Small traffic sign on a (background) pole; always leaves sign pixels."""
    size = float(rng.integers(SIGN_SIZE_RANGE[0], SIGN_SIZE_RANGE[1] + 1))
    cx = rng.uniform(0.05 * canvas.width + size, 0.95 * canvas.width - size)
    cy = rng.uniform(0.2 * canvas.height, max(0.2 * canvas.height + 1, horizon + 0.1 * canvas.height))
    pole_colour = np.asarray((90.0, 90.0, 95.0), dtype=np.float32)
    pole = rect_shape(canvas.height, canvas.width, cx - 1.5, cy, cx + 1.5, cy + 4 * size)
    paint(canvas, pole, BACKGROUND_CLASS, pole_colour, "flat", 0.0, rng)
    sides = _choice(rng, (3, 4, 8))
    phase = -np.pi / 2 if sides == 3 else np.pi / sides
    radius = size * (0.75 if sides == 4 else 0.65)
    face = polygon_shape(canvas.height, canvas.width, regular_polygon_vertices(cx, cy, radius, sides, phase))
    _paint_class(canvas, rng, face, SIGN, "flat", 0.0)


def add_ignore_band(label: np.ndarray, classes: Sequence[int], width: int) -> np.ndarray:
    """Return a copy of ``label`` with a ``width`` (1 or 2) px IGNORE_LABEL band on the borders of ``classes``."""
    band = np.zeros(label.shape, dtype=bool)
    for class_id in classes:
        inside = label == class_id
        if not inside.any():
            continue
        outside_near = _dilate(~inside)
        band |= (_dilate(inside) & outside_near) if width >= 2 else (inside & outside_near)
    out = label.copy()
    out[band & (label != RAREST_CLASS)] = IGNORE_LABEL
    return out


def _dilate(mask: np.ndarray) -> np.ndarray:
    """4-neighbour binary dilation by one pixel."""
    out = mask.copy()
    out[1:] |= mask[:-1]
    out[:-1] |= mask[1:]
    out[:, 1:] |= mask[:, :-1]
    out[:, :-1] |= mask[:, 1:]
    return out


def render_scene(
    rng: np.random.Generator,
    width: int,
    height: int,
    with_rare: bool,
    source: str,
    ignore_probability: float = IGNORE_BAND_PROBABILITY,
) -> tuple[np.ndarray, np.ndarray]:
    """Draw one street-like scene; return (uint8 RGB image, uint8 label mask)."""
    canvas = Canvas.blank(width, height)
    horizon = int(height * rng.uniform(0.3, 0.55))
    _paint_class(canvas, rng, rect_shape(height, width, 0, 0, width, height), BACKGROUND_CLASS, "blotch", 20.0)
    _draw_clutter(canvas, rng)
    presence = {class_id: bool(rng.random() < prob) for class_id, prob in CLASS_PRESENCE.items()}
    layers: tuple[tuple[int, Callable[[Canvas, np.random.Generator, int], None]], ...] = (
        (SKY, _draw_sky),
        (BUILDING, _draw_buildings),
        (VEGETATION, _draw_vegetation),
        (ROAD, _draw_road),
        (VEHICLE, _draw_vehicles),
        (PERSON, _draw_persons),
    )
    for class_id, draw in layers:
        if presence[class_id]:
            draw(canvas, rng, horizon)
    if with_rare:
        _draw_sign(canvas, rng, horizon)
    label = canvas.label
    if rng.random() < ignore_probability:
        label = add_ignore_band(label, IGNORE_BAND_CLASSES, int(rng.integers(1, 3)))
    return finish_image(canvas, rng, SOURCE_CASTS[source]), label


# ==========================================================================
# Encoding helpers
# ==========================================================================
def encode_image(image: Image.Image, fmt: str, quality: int = JPEG_QUALITY) -> bytes:
    """Encode a photo-like image with Pillow (JPEG at ``quality``, or e.g. GIF)."""
    buffer = io.BytesIO()
    if fmt == "JPEG":
        image.save(buffer, format="JPEG", quality=quality)
    else:
        image.save(buffer, format=fmt)
    return buffer.getvalue()


def encode_filtered_png(pixels: np.ndarray, level: int, up_filter: bool) -> bytes:
    """Fast 8-bit PNG of an (H, W), (H, W, 3) or (H, W, 4) uint8 array.

    With ``up_filter`` every row but the first uses the PNG 'Up' filter (good
    for photos), otherwise no filter (best for flat label masks).  Skipping
    Pillow's adaptive per-row filter search makes this ~2x faster at a
    similar size.
    """
    height, width = pixels.shape[:2]
    channels = 1 if pixels.ndim == 2 else int(pixels.shape[2])
    colour_type = {1: 0, 3: 2, 4: 6}[channels]
    rows = np.ascontiguousarray(pixels, dtype=np.uint8).reshape(height, width * channels)
    filtered = np.empty((height, width * channels + 1), dtype=np.uint8)
    filtered[:, 0] = 0  # filter type None
    filtered[:, 1:] = rows
    if up_filter:
        filtered[1:, 0] = 2  # Up: byte minus the byte above, modulo 256
        np.subtract(rows[1:], rows[:-1], out=filtered[1:, 1:])
    ihdr = struct.pack(">IIBBBBB", width, height, 8, colour_type, 0, 0, 0)
    idat = zlib.compress(filtered.tobytes(), level)
    return PNG_SIGNATURE + _png_chunk(b"IHDR", ihdr) + _png_chunk(b"IDAT", idat) + _png_chunk(b"IEND", b"")


def encode_png_photo(pixels: np.ndarray) -> bytes:
    return encode_filtered_png(pixels, PNG_IMAGE_COMPRESS_LEVEL, up_filter=True)


def encode_mask_png(image: Image.Image) -> bytes:
    """Encode a label mask as PNG with Pillow's default compression."""
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def encode_palette_mask(label: np.ndarray) -> bytes:
    height, width = label.shape
    image = Image.frombytes("P", (width, height), np.ascontiguousarray(label).tobytes())  # index == class id
    image.putpalette(voc_colormap())
    return encode_mask_png(image)


def encode_mask16(label: np.ndarray) -> bytes:
    return encode_mask_png(Image.fromarray(label.astype(np.uint16)))


def encode_gray_mask(label: np.ndarray) -> bytes:
    """8-bit greyscale ('L') PNG label mask."""
    return encode_filtered_png(label, PNG_MASK_COMPRESS_LEVEL, up_filter=False)


def bomb_png_bytes(size: int = BOMB_SIZE, rows_per_block: int = 500) -> bytes:
    """All-zero ``size`` x ``size`` 8-bit greyscale PNG, built without the big buffer.

    The zlib stream is assembled from raw-deflate blocks ended by a full flush:
    after a full flush the compressor forgets its history, so one compressed
    block of identical rows can be repeated verbatim.
    """
    raw_row = bytes(size + 1)  # filter byte 0 + zero pixels
    block = raw_row * rows_per_block
    full_blocks, rest_rows = divmod(size, rows_per_block)
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = compressor.compress(block) + compressor.flush(zlib.Z_FULL_FLUSH)
    repeat = compressor.compress(block) + compressor.flush(zlib.Z_FULL_FLUSH)
    parts = [first] + [repeat] * (full_blocks - 1)
    checksum = 1
    for _ in range(full_blocks):
        checksum = zlib.adler32(block, checksum)
    if rest_rows:
        tail_block = raw_row * rest_rows
        parts.append(compressor.compress(tail_block))
        checksum = zlib.adler32(tail_block, checksum)
    parts.append(compressor.flush())
    idat = b"\x78\xda" + b"".join(parts) + checksum.to_bytes(4, "big")
    ihdr = struct.pack(">IIBBBBB", size, size, 8, 0, 0, 0, 0)
    return PNG_SIGNATURE + _png_chunk(b"IHDR", ihdr) + _png_chunk(b"IDAT", idat) + _png_chunk(b"IEND", b"")


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


# ==========================================================================
# Segmentation corpus
# ==========================================================================
@dataclass(frozen=True)
class PairRecord:
    """One manifest row (paths relative to the segmentation folder)."""

    stem: str
    image: str
    mask: str
    source: str
    capture_year: int
    split: str
    has_rare: bool = False

    def row(self) -> list[str]:
        return [self.image, self.mask, self.source, str(self.capture_year), self.split]


def rarest_image_count(num_valid: int) -> int:
    return max(1, int(round(RAREST_CLASS_IMAGE_FRACTION * num_valid)))


def split_assignment(rng: np.random.Generator, count: int) -> list[str]:
    """Exact (rounded) 80/10/10 split labels in a random order."""
    n_val = int(round(SPLIT_FRACTIONS[1] * count))
    n_test = int(round(SPLIT_FRACTIONS[2] * count))
    labels = [SPLITS[1]] * n_val + [SPLITS[2]] * n_test
    labels = [SPLITS[0]] * (count - len(labels)) + labels
    return [labels[i] for i in rng.permutation(count)]


def _metadata(rng: np.random.Generator) -> tuple[str, int]:
    return _choice(rng, SOURCES), _choice(rng, CAPTURE_YEARS)


def _scene_size(rng: np.random.Generator) -> tuple[int, int]:
    index = int(rng.choice(len(IMAGE_SIZES), p=IMAGE_SIZE_WEIGHTS))
    return IMAGE_SIZES[index]


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _write_regular_pair(seg_dir: Path, seed: int, index: int, with_rare: bool, split: str) -> PairRecord:
    rng = _rng(seed, _STREAM_PAIR, index)
    stem = f"img_{index:06d}"
    source, year = _metadata(rng)
    width, height = _scene_size(rng)
    as_png = bool(rng.random() < PNG_FRACTION)
    rgb, label = render_scene(rng, width, height, with_rare, source)
    image_rel = f"images/{stem}.png" if as_png else f"images/{stem}.jpg"
    _write(seg_dir / image_rel, encode_png_photo(rgb) if as_png else _jpeg(rgb))
    _write(seg_dir / f"masks/{stem}.png", encode_gray_mask(label))
    return PairRecord(stem, image_rel, f"masks/{stem}.png", source, year, split, with_rare)


def _write_unusual_pair(seg_dir: Path, seed: int, index: int, stem: str, kind: str, split: str) -> PairRecord:
    rng = _rng(seed, _STREAM_UNUSUAL, index)
    source, year = _metadata(rng)
    width, height = _scene_size(rng)
    rgb, label = render_scene(rng, width, height, False, source, ignore_probability=1.0)  # always has 255
    image = Image.fromarray(rgb)
    image_rel = f"images/{stem}.jpg"
    mask_bytes = encode_gray_mask(label)
    if kind == "gray":
        image_bytes = encode_image(image.convert("L"), "JPEG")
    elif kind == "rgba":
        image_rel = f"images/{stem}.png"
        image_bytes = encode_png_photo(np.asarray(image.convert("RGBA")))
    elif kind == "palette":
        image_bytes = encode_image(image, "JPEG")
        mask_bytes = encode_palette_mask(label)
    elif kind == "mask16":
        image_bytes = encode_image(image, "JPEG")
        mask_bytes = encode_mask16(label)
    else:
        raise ValueError(f"unknown unusual pair kind {kind!r}")
    _write(seg_dir / image_rel, image_bytes)
    _write(seg_dir / f"masks/{stem}.png", mask_bytes)
    return PairRecord(stem, image_rel, f"masks/{stem}.png", source, year, split)


def _broken_scene(seed: int, index: int, size: tuple[int, int] | None = None) -> tuple[np.random.Generator, str, int, np.ndarray, np.ndarray]:
    rng = _rng(seed, _STREAM_BROKEN, index)
    source, year = _metadata(rng)
    width, height = size if size is not None else _scene_size(rng)
    rgb, label = render_scene(rng, width, height, False, source)
    return rng, source, year, rgb, label


def _broken_split(rng: np.random.Generator) -> str:
    return SPLITS[int(rng.choice(len(SPLITS), p=SPLIT_FRACTIONS))]


BrokenBuilder = Callable[[np.ndarray, np.ndarray], tuple[bytes | None, bytes | None]]  # (rgb, label) -> (image, mask)


def _write_broken_inputs(seg_dir: Path, out_dir: Path, seed: int) -> list[PairRecord]:
    """Write every broken input; return the manifest rows (orphans excluded)."""
    records: list[PairRecord] = []
    images, masks = seg_dir / "images", seg_dir / "masks"
    builders: tuple[tuple[str, BrokenBuilder], ...] = (
        ("broken_truncated", _broken_truncated),
        ("broken_notimage", _broken_notimage),
        ("broken_gif", _broken_gif),
        ("broken_bomb", _broken_bomb),
        ("broken_sizemismatch", _broken_sizemismatch),
        ("broken_badlabel", _broken_badlabel),
        ("broken_rgbmask", _broken_rgbmask),
        ("broken_emptymask", _broken_emptymask),
        ("broken_missingmask", _broken_missingmask),
    )
    for index, (stem, build) in enumerate(builders):
        size = SIZEMISMATCH_IMAGE_SIZE if stem == "broken_sizemismatch" else None
        rng, source, year, rgb, label = _broken_scene(seed, index, size)
        image_bytes, mask_bytes = build(rgb, label)
        image_name = BROKEN_IMAGE_FILES[stem]
        if image_bytes is not None:
            _write(images / image_name, image_bytes)
        if mask_bytes is not None:
            _write(masks / f"{stem}.png", mask_bytes)
        records.append(PairRecord(stem, f"images/{image_name}", f"masks/{stem}.png", source, year, _broken_split(rng)))

    base = len(builders)
    _, _, _, rgb, _ = _broken_scene(seed, base)
    _write(images / f"{ORPHAN_IMAGE_STEM}.jpg", encode_image(Image.fromarray(rgb), "JPEG"))
    _, _, _, _, label = _broken_scene(seed, base + 1)
    _write(masks / f"{ORPHAN_MASK_STEM}.png", encode_gray_mask(label))

    rng, source, year, rgb, label = _broken_scene(seed, base + 2)
    _write(out_dir / OUTSIDE_DIR / f"{ESCAPE_STEM}.jpg", encode_image(Image.fromarray(rgb), "JPEG"))
    _write(masks / f"{ESCAPE_STEM}.png", encode_gray_mask(label))
    records.append(PairRecord(ESCAPE_STEM, ESCAPE_IMAGE_REL, f"masks/{ESCAPE_STEM}.png", source, year, _broken_split(rng)))
    return records


def _jpeg(rgb: np.ndarray) -> bytes:
    return encode_image(Image.fromarray(rgb), "JPEG")


def _broken_truncated(rgb: np.ndarray, label: np.ndarray) -> tuple[bytes | None, bytes | None]:
    data = _jpeg(rgb)
    return data[: len(data) // 2], encode_gray_mask(label)


def _broken_notimage(rgb: np.ndarray, label: np.ndarray) -> tuple[bytes | None, bytes | None]:
    text = b"This is not an image.\nIt is a plain text file with a .jpg extension.\n"
    return text, encode_gray_mask(label)


def _broken_gif(rgb: np.ndarray, label: np.ndarray) -> tuple[bytes | None, bytes | None]:
    gif = Image.fromarray(rgb).quantize(colors=64)
    return encode_image(gif, "GIF"), encode_gray_mask(label)


def _broken_bomb(rgb: np.ndarray, label: np.ndarray) -> tuple[bytes | None, bytes | None]:
    return bomb_png_bytes(), encode_gray_mask(label)


def _broken_sizemismatch(rgb: np.ndarray, label: np.ndarray) -> tuple[bytes | None, bytes | None]:
    small = Image.fromarray(label).resize(SIZEMISMATCH_MASK_SIZE, Image.Resampling.NEAREST)
    return _jpeg(rgb), encode_mask_png(small)


def _broken_badlabel(rgb: np.ndarray, label: np.ndarray) -> tuple[bytes | None, bytes | None]:
    bad = label.copy()
    height, width = bad.shape
    bad[height // 2 : height // 2 + 24, width // 3 : width // 3 + 32] = BAD_LABEL
    return _jpeg(rgb), encode_gray_mask(bad)


def _broken_rgbmask(rgb: np.ndarray, label: np.ndarray) -> tuple[bytes | None, bytes | None]:
    colours = np.asarray(voc_colormap(), dtype=np.uint8).reshape(256, 3)
    return _jpeg(rgb), encode_mask_png(Image.fromarray(colours[label]))


def _broken_emptymask(rgb: np.ndarray, label: np.ndarray) -> tuple[bytes | None, bytes | None]:
    return _jpeg(rgb), b""


def _broken_missingmask(rgb: np.ndarray, label: np.ndarray) -> tuple[bytes | None, bytes | None]:
    return _jpeg(rgb), None


def _first_train_plain(records: Sequence[PairRecord], skip: int) -> PairRecord:
    """The ``skip``-th regular pair without the rare class, train pairs first."""
    candidates = [r for r in records if not r.has_rare and r.stem.startswith("img_")]
    candidates.sort(key=_not_train)  # stable: keeps generation order within each group
    return candidates[skip]


def _not_train(record: PairRecord) -> bool:
    return record.split != SPLITS[0]


def _write_csv(path: Path, header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)


def _segmentation_readme(duplicate_stem: str, dup_source_stem: str) -> str:
    lines = [
        "Synthetic segmentation corpus written by tools.sample_corpus.",
        f"Classes (id: name): {', '.join(f'{i}: {n}' for i, n in enumerate(CLASS_NAMES))}; ignore label {IGNORE_LABEL}.",
        "Valid-but-unusual pairs: " + ", ".join(f"{stem} ({kind})" for stem, kind in UNUSUAL_PAIRS) + ".",
        "",
        "Deliberately broken inputs:",
    ]
    lines += [f"  {stem}: {why}" for stem, why in BROKEN_SEGMENTATION_INPUTS.items()]
    lines += [
        f"  ({DUP_COPY_STEM} copies the files of {dup_source_stem}.)",
        f"  duplicate row: the manifest row of {duplicate_stem} appears twice (exact same row).",
        "",
    ]
    return "\n".join(lines)


def write_segmentation(out_dir: Path, seed: int, num_valid: int) -> dict[str, Any]:
    seg_dir = out_dir / SEGMENTATION_DIR
    (seg_dir / "images").mkdir(parents=True, exist_ok=True)
    (seg_dir / "masks").mkdir(parents=True, exist_ok=True)
    plan = _rng(seed, _STREAM_PLAN)
    num_regular = num_valid - len(UNUSUAL_PAIRS)
    rare = set(plan.choice(num_regular, size=rarest_image_count(num_valid), replace=False).tolist())
    splits = split_assignment(plan, num_valid)

    records = [_write_regular_pair(seg_dir, seed, i, i in rare, splits[i]) for i in range(num_regular)]
    for j, (stem, kind) in enumerate(UNUSUAL_PAIRS):
        records.append(_write_unusual_pair(seg_dir, seed, j, stem, kind, splits[num_regular + j]))

    duplicate = _first_train_plain(records, 0)
    dup_source = _first_train_plain(records, 1)
    dup_image = f"images/{DUP_COPY_STEM}{Path(dup_source.image).suffix}"
    shutil.copyfile(seg_dir / dup_source.image, seg_dir / dup_image)
    shutil.copyfile(seg_dir / dup_source.mask, seg_dir / f"masks/{DUP_COPY_STEM}.png")
    dup_copy = PairRecord(DUP_COPY_STEM, dup_image, f"masks/{DUP_COPY_STEM}.png", dup_source.source, dup_source.capture_year, dup_source.split)

    broken = _write_broken_inputs(seg_dir, out_dir, seed)
    rows = [r.row() for r in records] + [dup_copy.row(), duplicate.row()] + [r.row() for r in broken]
    _write_csv(seg_dir / LISTING_NAME, SEGMENTATION_MANIFEST_COLUMNS, rows)
    (seg_dir / README_NAME).write_text(_segmentation_readme(duplicate.stem, dup_source.stem), encoding="utf-8")
    return {
        "dir": str(seg_dir),
        "valid_pairs": num_valid,
        "regular_pairs": num_regular,
        "unusual_pairs": len(UNUSUAL_PAIRS),
        "rarest_class_images": len(rare),
        "manifest_rows": len(rows),
        "duplicate_row_stem": duplicate.stem,
        "dup_copy_source_stem": dup_source.stem,
        "broken_stems": sorted(BROKEN_SEGMENTATION_INPUTS),
        **_dir_stats(seg_dir),
    }


# ==========================================================================
# Classification corpus
# ==========================================================================
@dataclass(frozen=True)
class FoodStyle:
    colours: tuple[Rgb, ...]
    accent: Rgb
    shape: str
    texture: str


FOOD_STYLES: dict[str, FoodStyle] = {
    "pizza": FoodStyle(((225, 170, 90), (235, 190, 110)), (170, 40, 30), "disc_dots", "noise"),
    "sushi": FoodStyle(((245, 245, 238), (235, 235, 225)), (240, 120, 70), "rolls", "noise"),
    "ramen": FoodStyle(((220, 190, 140), (200, 160, 100)), (245, 230, 170), "bowl", "stripes"),
    "french_fries": FoodStyle(((235, 195, 80), (225, 180, 60)), (200, 40, 30), "sticks", "noise"),
    "caesar_salad": FoodStyle(((110, 170, 70), (140, 190, 90)), (235, 225, 190), "blobs", "blotch"),
    "apple_pie": FoodStyle(((205, 155, 80), (190, 140, 70)), (150, 90, 40), "wedge", "checker"),
    "guacamole": FoodStyle(((120, 160, 60), (100, 140, 50)), (200, 60, 40), "mound", "blotch"),
    "chocolate_cake": FoodStyle(((80, 45, 30), (100, 60, 40)), (240, 235, 225), "layers", "stripes"),
}
TABLE_COLOURS: tuple[Rgb, ...] = ((150, 110, 70), (120, 85, 55), (200, 200, 195), (60, 60, 65))
PLATE_COLOURS: tuple[Rgb, ...] = ((240, 240, 235), (225, 228, 232), (30, 30, 35))


def class_counts(total: int, num_classes: int, imbalance: float = CLASSIFICATION_IMBALANCE) -> list[int]:
    """Geometric-decay counts summing to ``total`` (each >= 1), largest first."""
    ratio = imbalance ** (-1.0 / max(1, num_classes - 1))
    weights = ratio ** np.arange(num_classes)
    exact = total * weights / weights.sum()
    counts = np.maximum(1, np.floor(exact)).astype(int)
    order = np.argsort(-(exact - np.floor(exact)), kind="stable")
    position = 0
    while counts.sum() < total:
        counts[order[position % num_classes]] += 1
        position += 1
    while counts.sum() > total:
        counts[int(np.argmax(counts))] -= 1
    return counts.tolist()


FoodDrawFn = Callable[[Canvas, np.random.Generator, FoodStyle, float, float, float], None]


def _food_colour(rng: np.random.Generator, style: FoodStyle) -> np.ndarray:
    return _jittered(rng, style.colours)


def _accent(rng: np.random.Generator, style: FoodStyle) -> np.ndarray:
    return np.asarray(style.accent, dtype=np.float32) + rng.normal(0, 8, 3).astype(np.float32)


def _draw_disc_dots(canvas: Canvas, rng: np.random.Generator, style: FoodStyle, cx: float, cy: float, radius: float) -> None:
    h, w = canvas.height, canvas.width
    paint(canvas, ellipse_shape(h, w, cx, cy, radius * 0.9, radius * 0.9), 0, _food_colour(rng, style), style.texture, 15.0, rng)
    for _ in range(int(rng.integers(6, 13))):
        angle, dist = rng.uniform(0, 2 * np.pi), rng.uniform(0, radius * 0.7)
        dot_r = radius * rng.uniform(0.08, 0.14)
        dot = ellipse_shape(h, w, cx + dist * np.cos(angle), cy + dist * np.sin(angle), dot_r, dot_r)
        paint(canvas, dot, 0, _accent(rng, style), "noise", 10.0, rng)


def _draw_rolls(canvas: Canvas, rng: np.random.Generator, style: FoodStyle, cx: float, cy: float, radius: float) -> None:
    h, w = canvas.height, canvas.width
    for _ in range(int(rng.integers(3, 8))):
        px, py = cx + rng.uniform(-0.6, 0.6) * radius, cy + rng.uniform(-0.6, 0.6) * radius
        half_w, half_h = radius * rng.uniform(0.18, 0.28), radius * rng.uniform(0.1, 0.15)
        angle = rng.uniform(-0.5, 0.5)
        rice = polygon_shape(h, w, rotated_rect_vertices(px, py, half_w, half_h, angle))
        paint(canvas, rice, 0, _food_colour(rng, style), style.texture, 10.0, rng)
        fish = polygon_shape(h, w, rotated_rect_vertices(px, py - half_h * 0.6, half_w * 1.05, half_h * 0.6, angle))
        paint(canvas, fish, 0, _accent(rng, style), "stripes", 20.0, rng)


def _draw_bowl(canvas: Canvas, rng: np.random.Generator, style: FoodStyle, cx: float, cy: float, radius: float) -> None:
    h, w = canvas.height, canvas.width
    bowl_colour = np.asarray(_choice(rng, ((30, 30, 30), (180, 40, 30), (230, 230, 225))), dtype=np.float32)
    paint(canvas, ellipse_shape(h, w, cx, cy, radius, radius), 0, bowl_colour, "gradient", 15.0, rng)
    paint(canvas, ellipse_shape(h, w, cx, cy, radius * 0.82, radius * 0.82), 0, _food_colour(rng, style), "blotch", 10.0, rng)
    noodles = _restrict(ellipse_shape(h, w, cx, cy + radius * 0.15, radius * 0.7, radius * 0.45), canvas, 0)
    paint(canvas, noodles, 0, _accent(rng, style), style.texture, 35.0, rng)
    egg = ellipse_shape(h, w, cx - radius * 0.35, cy - radius * 0.35, radius * 0.18, radius * 0.15)
    paint(canvas, egg, 0, np.asarray((250.0, 250.0, 240.0), dtype=np.float32), "flat", 0.0, rng)
    yolk = ellipse_shape(h, w, cx - radius * 0.35, cy - radius * 0.35, radius * 0.08, radius * 0.07)
    paint(canvas, yolk, 0, np.asarray((250.0, 170.0, 40.0), dtype=np.float32), "flat", 0.0, rng)


def _draw_sticks(canvas: Canvas, rng: np.random.Generator, style: FoodStyle, cx: float, cy: float, radius: float) -> None:
    h, w = canvas.height, canvas.width
    for _ in range(int(rng.integers(20, 40))):
        px, py = cx + rng.uniform(-0.7, 0.7) * radius, cy + rng.uniform(-0.7, 0.7) * radius
        stick = polygon_shape(h, w, rotated_rect_vertices(px, py, radius * rng.uniform(0.2, 0.35), radius * 0.04, rng.uniform(0, np.pi)))
        paint(canvas, stick, 0, _food_colour(rng, style), style.texture, 12.0, rng)
    ketchup = ellipse_shape(h, w, cx + radius * 0.5, cy + radius * 0.5, radius * 0.2, radius * 0.15)
    paint(canvas, ketchup, 0, _accent(rng, style), "gradient", 15.0, rng)


def _draw_blobs(canvas: Canvas, rng: np.random.Generator, style: FoodStyle, cx: float, cy: float, radius: float) -> None:
    h, w = canvas.height, canvas.width
    for _ in range(int(rng.integers(12, 30))):
        px, py = cx + rng.uniform(-0.7, 0.7) * radius, cy + rng.uniform(-0.7, 0.7) * radius
        leaf = ellipse_shape(h, w, px, py, radius * rng.uniform(0.1, 0.25), radius * rng.uniform(0.06, 0.15))
        paint(canvas, leaf, 0, _food_colour(rng, style), style.texture, 25.0, rng)
    for _ in range(int(rng.integers(3, 9))):
        px, py = cx + rng.uniform(-0.6, 0.6) * radius, cy + rng.uniform(-0.6, 0.6) * radius
        crouton = rect_shape(h, w, px, py, px + radius * 0.1, py + radius * 0.1)
        paint(canvas, crouton, 0, _accent(rng, style), "noise", 15.0, rng)


def _draw_wedge(canvas: Canvas, rng: np.random.Generator, style: FoodStyle, cx: float, cy: float, radius: float) -> None:
    h, w = canvas.height, canvas.width
    start = rng.uniform(0, 2 * np.pi)
    span = rng.uniform(0.8, 1.6)
    tip = (cx - 0.3 * radius * np.cos(start + span / 2), cy - 0.3 * radius * np.sin(start + span / 2))
    arc = [(tip[0] + radius * np.cos(a), tip[1] + radius * np.sin(a)) for a in np.linspace(start, start + span, 8)]
    paint(canvas, polygon_shape(h, w, [tip] + arc), 0, _food_colour(rng, style), style.texture, 20.0, rng)
    crust_angles = np.linspace(start, start + span, 8)
    crust = [(tip[0] + radius * np.cos(a), tip[1] + radius * np.sin(a)) for a in crust_angles]
    crust += [(tip[0] + radius * 0.85 * np.cos(a), tip[1] + radius * 0.85 * np.sin(a)) for a in crust_angles[::-1]]
    paint(canvas, polygon_shape(h, w, crust), 0, _accent(rng, style), "noise", 10.0, rng)


def _draw_mound(canvas: Canvas, rng: np.random.Generator, style: FoodStyle, cx: float, cy: float, radius: float) -> None:
    h, w = canvas.height, canvas.width
    paint(canvas, ellipse_shape(h, w, cx, cy, radius * 0.75, radius * 0.65), 0, _food_colour(rng, style), style.texture, 25.0, rng)
    for _ in range(int(rng.integers(4, 10))):
        px, py = cx + rng.uniform(-0.5, 0.5) * radius, cy + rng.uniform(-0.45, 0.45) * radius
        bit = rect_shape(h, w, px, py, px + radius * 0.08, py + radius * 0.08)
        paint(canvas, bit, 0, _accent(rng, style), "flat", 0.0, rng)
    chip = polygon_shape(h, w, regular_polygon_vertices(cx + radius * 0.8, cy, radius * 0.3, 3, rng.uniform(0, np.pi)))
    paint(canvas, chip, 0, np.asarray((230.0, 200.0, 120.0), dtype=np.float32), "noise", 10.0, rng)


def _draw_layers(canvas: Canvas, rng: np.random.Generator, style: FoodStyle, cx: float, cy: float, radius: float) -> None:
    h, w = canvas.height, canvas.width
    half_w = radius * rng.uniform(0.5, 0.7)
    n_layers = int(rng.integers(3, 6))
    layer_h = radius * 1.2 / n_layers
    top = cy - radius * 0.6
    for k in range(n_layers):
        colour = _food_colour(rng, style) if k % 2 == 0 else _accent(rng, style)
        layer = rect_shape(h, w, cx - half_w, top + k * layer_h, cx + half_w, top + (k + 1) * layer_h)
        paint(canvas, layer, 0, colour, style.texture if k % 2 == 0 else "flat", 10.0, rng)


FOOD_DRAWERS: dict[str, FoodDrawFn] = {
    "disc_dots": _draw_disc_dots,
    "rolls": _draw_rolls,
    "bowl": _draw_bowl,
    "sticks": _draw_sticks,
    "blobs": _draw_blobs,
    "wedge": _draw_wedge,
    "mound": _draw_mound,
    "layers": _draw_layers,
}


def render_food(rng: np.random.Generator, class_name: str, width: int, height: int, source: str) -> np.ndarray:
    """Draw one plated dish of ``class_name``; return uint8 RGB."""
    style = FOOD_STYLES[class_name]
    canvas = Canvas.blank(width, height)
    table = _jittered(rng, TABLE_COLOURS)
    paint(canvas, rect_shape(height, width, 0, 0, width, height), 0, table, "stripes", 12.0, rng)
    cx = width / 2 + rng.uniform(-0.1, 0.1) * width
    cy = height / 2 + rng.uniform(-0.1, 0.1) * height
    radius = min(width, height) * rng.uniform(0.38, 0.46)
    plate = ellipse_shape(height, width, cx, cy, radius, radius * rng.uniform(0.85, 1.0))
    paint(canvas, plate, 0, _jittered(rng, PLATE_COLOURS), "gradient", 10.0, rng)
    FOOD_DRAWERS[style.shape](canvas, rng, style, cx, cy, radius * 0.8)
    return finish_image(canvas, rng, SOURCE_CASTS[source])


def _food_image(rng: np.random.Generator, class_name: str) -> tuple[np.ndarray, str, int]:
    low, high = CLASSIFICATION_SIZE_RANGE
    width, height = (int(v) for v in rng.integers(low, high + 1, size=2))
    source = _choice(rng, SOURCES)
    quality = int(rng.integers(CLASSIFICATION_JPEG_QUALITY_RANGE[0], CLASSIFICATION_JPEG_QUALITY_RANGE[1] + 1))
    return render_food(rng, class_name, width, height, source), source, quality


def _classification_readme() -> str:
    lines = [
        "Synthetic Food-101-like classification corpus written by tools.sample_corpus.",
        f"Classes: {', '.join(CLASSIFICATION_CLASSES)} (imbalanced, largest ~{CLASSIFICATION_IMBALANCE:g}x smallest).",
        f"Valid greyscale image: {CLASSIFICATION_GRAY_IMAGE}.",
        "",
        "Deliberately broken inputs:",
    ]
    lines += [f"  {path}: {why}" for path, why in BROKEN_CLASSIFICATION_INPUTS.items()]
    return "\n".join(lines) + "\n"


def write_classification(out_dir: Path, seed: int, num_images: int) -> dict[str, Any]:
    cls_dir = out_dir / CLASSIFICATION_DIR
    counts = class_counts(num_images, len(CLASSIFICATION_CLASSES))
    rows: list[list[str]] = []
    index = 0
    for class_name, count in zip(CLASSIFICATION_CLASSES, counts):
        (cls_dir / "images" / class_name).mkdir(parents=True, exist_ok=True)
        for _ in range(count):
            rng = _rng(seed, _STREAM_CLS_IMAGE, index)
            rgb, source, quality = _food_image(rng, class_name)
            rel = f"images/{class_name}/img_{index:06d}.jpg"
            _write(cls_dir / rel, encode_image(Image.fromarray(rgb), "JPEG", quality))
            rows.append([rel, class_name, source])
            index += 1

    for extra_index, (rel, kind) in enumerate(CLASSIFICATION_EXTRA_FILES):
        rng = _rng(seed, _STREAM_CLS_EXTRA, extra_index)
        class_name = Path(rel).parent.name
        rgb, source, quality = _food_image(rng, class_name)
        _write(cls_dir / rel, _classification_extra_bytes(rgb, kind, quality))
        rows.append([rel, class_name, source])

    _write_csv(cls_dir / LISTING_NAME, CLASSIFICATION_MANIFEST_COLUMNS, rows)
    (cls_dir / README_NAME).write_text(_classification_readme(), encoding="utf-8")
    return {
        "dir": str(cls_dir),
        "valid_images": num_images + 1,
        "broken_images": len(BROKEN_CLASSIFICATION_INPUTS),
        "per_class": dict(zip(CLASSIFICATION_CLASSES, counts)),
        "manifest_rows": len(rows),
        **_dir_stats(cls_dir),
    }


def _classification_extra_bytes(rgb: np.ndarray, kind: str, quality: int) -> bytes:
    if kind == "gray":
        return encode_image(Image.fromarray(rgb).convert("L"), "JPEG", quality)
    if kind == "truncated":
        data = encode_image(Image.fromarray(rgb), "JPEG", quality)
        return data[: len(data) // 2]
    if kind == "text":
        return b"not a jpeg: plain text pretending to be a food photo\n"
    raise ValueError(f"unknown classification extra kind {kind!r}")


# ==========================================================================
# Entry points
# ==========================================================================
def _dir_stats(root: Path) -> dict[str, int]:
    files = [p for p in root.rglob("*") if p.is_file()]
    return {"files": len(files), "bytes": sum(p.stat().st_size for p in files)}


def _prepare_out_dir(out_dir: Path, overwrite: bool) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in (SEGMENTATION_DIR, CLASSIFICATION_DIR, OUTSIDE_DIR):
        target = out_dir / name
        if not target.exists():
            continue
        if not overwrite and any(target.iterdir()):
            raise FileExistsError(f"{target} already exists and is not empty (use overwrite=True / --overwrite)")
        shutil.rmtree(target)


def write_corpus(
    out_dir: str | Path,
    seed: int = 0,
    num_pairs: int = 240,
    num_class_images: int = 400,
    scale: int = 1,
    *,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Write the segmentation and classification corpora under ``out_dir``.

    ``num_pairs * scale`` distinct valid segmentation pairs (the 7 unusual ones
    included) and ``num_class_images * scale`` valid classification images are
    written; broken inputs are written once.  Returns a summary dict.
    """
    if scale < 1:
        raise ValueError(f"scale must be >= 1, got {scale}")
    if num_pairs * scale < MIN_NUM_PAIRS:
        raise ValueError(f"num_pairs * scale must be >= {MIN_NUM_PAIRS}, got {num_pairs * scale}")
    if num_class_images * scale < len(CLASSIFICATION_CLASSES):
        raise ValueError(f"num_class_images * scale must be >= {len(CLASSIFICATION_CLASSES)}")
    out = Path(out_dir)
    _prepare_out_dir(out, overwrite)
    segmentation = write_segmentation(out, seed, num_pairs * scale)
    classification = write_classification(out, seed, num_class_images * scale)
    totals = [_dir_stats(out / name) for name in (SEGMENTATION_DIR, CLASSIFICATION_DIR, OUTSIDE_DIR)]
    return {
        "out_dir": str(out),
        "seed": seed,
        "scale": scale,
        "segmentation": segmentation,
        "classification": classification,
        "files": sum(t["files"] for t in totals),
        "bytes": sum(t["bytes"] for t in totals),
    }


def format_summary(summary: dict[str, Any], seconds: float) -> str:
    seg, cls = summary["segmentation"], summary["classification"]
    return "\n".join(
        [
            f"Wrote sample corpus to {summary['out_dir']} in {seconds:.1f}s "
            f"({summary['files']} files, {summary['bytes'] / 1e6:.1f} MB)",
            f"  segmentation:   {seg['valid_pairs']} valid pairs ({seg['unusual_pairs']} unusual), "
            f"{seg['rarest_class_images']} with class {RAREST_CLASS} ({CLASS_NAMES[RAREST_CLASS]}), "
            f"{len(seg['broken_stems'])} broken/odd entries, {seg['manifest_rows']} manifest rows, "
            f"{seg['files']} files, {seg['bytes'] / 1e6:.1f} MB -> {seg['dir']}",
            f"  classification: {cls['valid_images']} valid images in {len(cls['per_class'])} classes "
            f"(largest {max(cls['per_class'].values())}, smallest {min(cls['per_class'].values())}), "
            f"{cls['broken_images']} broken, {cls['files']} files, {cls['bytes'] / 1e6:.1f} MB -> {cls['dir']}",
        ]
    )


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tools.sample_corpus",
        description=(
            "Deterministically write a synthetic image corpus: OUT/segmentation (images, masks, manifest.csv, "
            "with deliberately broken inputs) and OUT/classification (Food-101-like class folders, manifest.csv). "
            "Same arguments give byte-identical files."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("out", metavar="OUT", help="output directory (created if missing)")
    parser.add_argument("--seed", type=int, default=0, help="seed for numpy.random.default_rng; everything derives from it")
    parser.add_argument(
        "--num_pairs", type=_positive_int, default=240,
        help=(
            f"distinct valid segmentation image/mask pairs per scale unit, including the {len(UNUSUAL_PAIRS)} "
            f"unusual-format pairs (num_pairs * scale >= {MIN_NUM_PAIRS})"
        ),
    )
    parser.add_argument("--num_class_images", type=_positive_int, default=400, help="valid classification images per scale unit")
    parser.add_argument(
        "--scale", type=_positive_int, default=1,
        help=(
            "multiply num_pairs and num_class_images, e.g. 3 for a 3x benchmark corpus; the extra items are new "
            "distinct images, broken inputs are still written once"
        ),
    )
    parser.add_argument(
        "--overwrite", action="store_true",
        help="delete existing OUT/segmentation, OUT/classification and OUT/outside first instead of failing",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    start = time.perf_counter()
    try:
        summary = write_corpus(args.out, args.seed, args.num_pairs, args.num_class_images, args.scale, overwrite=args.overwrite)
    except (ValueError, FileExistsError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(format_summary(summary, time.perf_counter() - start))
    return 0


if __name__ == "__main__":
    sys.exit(main())
