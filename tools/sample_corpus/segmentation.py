"""OUT/segmentation of the sample corpus: the regular and the valid-but-unusual image/mask pairs,
the deliberately broken inputs (and the orphans, the duplicate and the path-escaping row),
manifest.csv and README.txt.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from tools.sample_corpus.canvas import _STREAM_BROKEN, _STREAM_PAIR, _STREAM_PLAN, _STREAM_UNUSUAL, _choice, _rng, voc_colormap
from tools.sample_corpus.encoding import (
    bomb_png_bytes, encode_gray_mask, encode_image, encode_mask16, encode_mask_png, encode_palette_mask, encode_png_photo,
)
from tools.sample_corpus.files import _dir_stats, _write, _write_csv
from tools.sample_corpus.scenes import render_scene
from tools.sample_corpus.spec import (
    BAD_LABEL, BROKEN_IMAGE_FILES, BROKEN_SEGMENTATION_INPUTS, CAPTURE_YEARS, CLASS_NAMES, DUP_COPY_STEM, ESCAPE_IMAGE_REL,
    ESCAPE_STEM, IGNORE_LABEL, IMAGE_SIZE_WEIGHTS, IMAGE_SIZES, LISTING_NAME, ORPHAN_IMAGE_STEM, ORPHAN_MASK_STEM,
    OUTSIDE_DIR, PNG_FRACTION, README_NAME, RAREST_CLASS_IMAGE_FRACTION, SEGMENTATION_DIR,
    SEGMENTATION_MANIFEST_COLUMNS, SIZEMISMATCH_IMAGE_SIZE, SIZEMISMATCH_MASK_SIZE, SOURCES, SPLIT_FRACTIONS, SPLITS,
    UNUSUAL_PAIRS,
)

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
