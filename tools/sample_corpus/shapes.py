"""Geometry and texture of the painted shapes: rectangle, ellipse and polygon masks clipped to the
image, and the texture functions that give a shape its (h, w) shade field.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from PIL import Image

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
