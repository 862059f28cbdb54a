"""The street-like segmentation scenes: sky, buildings, vegetation, road, vehicles, persons and the
rare sign drawn in layers on a :class:`~tools.sample_corpus.canvas.Canvas`, and the band of
ignore label around object borders.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from tools.sample_corpus.canvas import (
    CLASS_COLOURS, SIGN_SIZE_RANGE, SOURCE_CASTS, Canvas, _choice, _jittered, _paint_class, finish_image, paint,
)
from tools.sample_corpus.shapes import Shape, ellipse_shape, polygon_shape, rect_shape, regular_polygon_vertices
from tools.sample_corpus.spec import (
    BACKGROUND_CLASS, BUILDING, CLASS_PRESENCE, IGNORE_BAND_CLASSES, IGNORE_BAND_PROBABILITY, IGNORE_LABEL, PERSON,
    RAREST_CLASS, ROAD, SIGN, SKY, VEGETATION, VEHICLE,
)

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
