"""OUT/classification of the sample corpus: Food-101-like plated dishes drawn per class, in
imbalanced class folders, plus the greyscale and the broken files, manifest.csv and README.txt.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from tools.sample_corpus.canvas import (
    _STREAM_CLS_EXTRA, _STREAM_CLS_IMAGE, SOURCE_CASTS, Canvas, Rgb, _choice, _jittered, _rng, finish_image, paint,
)
from tools.sample_corpus.encoding import encode_image
from tools.sample_corpus.files import _dir_stats, _write, _write_csv
from tools.sample_corpus.scenes import _restrict
from tools.sample_corpus.shapes import ellipse_shape, polygon_shape, rect_shape, regular_polygon_vertices, rotated_rect_vertices
from tools.sample_corpus.spec import (
    BROKEN_CLASSIFICATION_INPUTS, CLASSIFICATION_CLASSES, CLASSIFICATION_DIR, CLASSIFICATION_EXTRA_FILES,
    CLASSIFICATION_GRAY_IMAGE, CLASSIFICATION_IMBALANCE, CLASSIFICATION_JPEG_QUALITY_RANGE,
    CLASSIFICATION_MANIFEST_COLUMNS, CLASSIFICATION_SIZE_RANGE, LISTING_NAME, README_NAME, SOURCES,
)

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
