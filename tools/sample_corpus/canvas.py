"""Painting a scene: the per-class and per-camera colours, the seeded random streams and small
random helpers every drawer uses, the VOC-like colour map, and the :class:`Canvas` that shapes are
painted on (label map, colour index, shade) with :func:`finish_image` turning it into RGB.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from tools.sample_corpus.shapes import TEXTURES, Shape
from tools.sample_corpus.spec import BACKGROUND_CLASS, BUILDING, PERSON, ROAD, SIGN, SKY, VEGETATION, VEHICLE

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
