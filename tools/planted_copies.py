"""Planted near-duplicate copies of real photographs, and video-like sequences (tests and benchmarks; not shipped).

``python -m tools.planted_copies OUT [--bases 100] [--distinct 150] [--seed 0]`` or :func:`write_planted`:

* ``bases`` scenes of tools/photo_scenes.py (collages of scikit-image's photographs, each a different layout),
  saved as JPEG (quality 90) or PNG, every other one; and one copy of each, made by one of KINDS in turn:
  ``jpeg`` re-encoded as JPEG at quality 60-90; ``resize`` to 50-90 % of its size; ``crop`` keeping 95-99.5 % of
  its pixels (each side losing up to 2.5 % of the width or height, at a random place); ``bright`` brightened or
  darkened by 3-10 %; ``format`` saved as the other format (PNG <-> JPEG). A copy's mask is the base's mask put
  through the same geometry. A copy's name is chosen so that the default per-image split
  (train=0.8,val=0.1,test=0.1 by a stable hash of the pair's key) puts it in another split than its base: without
  grouping every planted pair would leak.
* ``distinct`` more scenes without a copy, and scikit-image's other photographs (``DISTINCT_PHOTOS``): different
  scenes, which must not be paired.

Layout: ``OUT/images/*.{jpg,png}``, ``OUT/masks/*.png``, ``OUT/listing.csv`` (image,mask), ``OUT/planted.csv``
(base image, copy image, kind). :func:`write_sequences` writes video-like frames: ``OUT/seqNN/frame_MMM.jpg``, each
sequence a slow pan over one scene, with ``OUT/masks/...`` and ``OUT/listing.csv``. Everything depends only on the
seed.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import csv
import io
import multiprocessing
import os
import sys
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

import numpy as np
from PIL import Image

from beam_pipeline.core.selection import assign_split, parse_split
from tools.photo_scenes import make_scene

KINDS = ("jpeg", "resize", "crop", "bright", "format")
DEFAULT_SPLIT = parse_split("train=0.8,val=0.1,test=0.1")
DISTINCT_PHOTOS = ("astronaut", "brick", "camera", "cell", "clock", "coffee", "coins", "colorwheel", "grass",
                   "gravel", "horse", "hubble_deep_field", "immunohistochemistry", "moon", "page", "retina", "rocket",
                   "text", "chelsea")
SCENE_OFFSET = 50_000          # scene indices of the bases; the distinct scenes follow them


def _encode(pixels: np.ndarray, fmt: str, quality: int = 90) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format=fmt, **({"quality": quality} if fmt == "JPEG" else {}))
    return buffer.getvalue()


def _decode(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


def planted_copy(image: np.ndarray, mask: np.ndarray, fmt: str, kind: str,
                 rng: np.random.Generator) -> Tuple[bytes, str, np.ndarray]:
    """(the copy's file bytes, its format, its mask) of a base saved as ``fmt``."""
    if kind == "jpeg":
        return _encode(image, "JPEG", int(rng.integers(60, 91))), "JPEG", mask
    if kind == "format":
        other = "PNG" if fmt == "JPEG" else "JPEG"
        return _encode(image, other), other, mask
    if kind == "bright":
        factor = 1 + rng.choice([-1, 1]) * rng.uniform(0.03, 0.10)
        return _encode(np.clip(np.rint(image * factor), 0, 255).astype(np.uint8), fmt), fmt, mask
    height, width = mask.shape
    if kind == "resize":
        scale = rng.uniform(0.5, 0.9)
        size = (int(width * scale), int(height * scale))
        resized = np.asarray(Image.fromarray(image).resize(size, Image.Resampling.BICUBIC))
        return _encode(resized, fmt), fmt, np.asarray(Image.fromarray(mask).resize(size, Image.Resampling.NEAREST))
    keep = np.sqrt(rng.uniform(0.95, 0.995))             # of each side: the area kept is keep ** 2
    dx, dy = int(round(width * (1 - keep))), int(round(height * (1 - keep)))
    left, top = int(rng.integers(0, dx + 1)), int(rng.integers(0, dy + 1))
    box = (slice(top, height - (dy - top)), slice(left, width - (dx - left)))
    return _encode(np.ascontiguousarray(image[box]), fmt), fmt, np.ascontiguousarray(mask[box])


def _key(image: str, mask: str) -> str:
    return f"{image}|{mask}"


def _split(image: str, mask: str) -> str:
    return assign_split(DEFAULT_SPLIT, _key(image, mask), {}, "")


def _scene(index: int, seed: int):
    return make_scene(index, seed)


def _scenes(indices: Sequence[int], seed: int, workers: int) -> List[tuple]:
    # Spawned, not forked: a fork of a process that runs TensorFlow's threads (the tests') can hang in the child.
    with concurrent.futures.ProcessPoolExecutor(max_workers=workers,
                                                mp_context=multiprocessing.get_context("spawn")) as pool:
        return list(pool.map(_scene, indices, [seed] * len(indices), chunksize=8))


def _photo(name: str) -> np.ndarray:
    from skimage import data                           # heavy: only the generator needs it
    value = getattr(data, name)()
    value = np.asarray(value[0] if isinstance(value, tuple) else value)
    if value.dtype == bool:
        value = value.astype(np.uint8) * 255
    if value.ndim == 2:
        value = np.repeat(value[:, :, None], 3, axis=2)
    return np.ascontiguousarray(value[..., :3])


def write_planted(out, bases: int = 100, distinct: int = 150, seed: int = 0, workers: int = 0) -> Path:
    """Write the corpus (module docstring); returns the listing."""
    out = Path(out)
    (out / "images").mkdir(parents=True)
    (out / "masks").mkdir()
    rng = np.random.default_rng([seed, 43])
    scenes = _scenes(range(SCENE_OFFSET, SCENE_OFFSET + bases + distinct), seed, workers or os.cpu_count() or 1)
    rows, planted = [], []

    def save(name: str, data: bytes, fmt: str, mask: np.ndarray) -> Tuple[str, str]:
        image = f"images/{name}.{'jpg' if fmt == 'JPEG' else 'png'}"
        (out / image).write_bytes(data)
        mask_path = f"masks/{name}.png"
        Image.fromarray(mask).save(out / mask_path, format="PNG")
        rows.append((image, mask_path))
        return image, mask_path

    for index, (image, mask) in enumerate(scenes):
        fmt = "JPEG" if index % 2 == 0 else "PNG"
        base = save(f"scene_{index:04d}", _encode(image, fmt), fmt, mask)
        if index >= bases:
            continue
        kind = KINDS[index % len(KINDS)]
        data, copy_fmt, copy_mask = planted_copy(_decode(_encode(image, fmt)), mask, fmt, kind, rng)
        for attempt in range(100):                         # a name the per-image split puts elsewhere
            name = f"copy_{index:04d}_{kind}_{attempt}"
            ext = "jpg" if copy_fmt == "JPEG" else "png"
            if _split(f"images/{name}.{ext}", f"masks/{name}.png") != _split(*base):
                break
        copy = save(name, data, copy_fmt, copy_mask)
        planted.append((base[0], copy[0], kind))
    for name in DISTINCT_PHOTOS:
        photo = _photo(name)
        save(f"photo_{name}", _encode(photo, "PNG"), "PNG", np.zeros(photo.shape[:2], np.uint8))
    _write_csv(out / "listing.csv", ["image", "mask"], rows)
    _write_csv(out / "planted.csv", ["base", "copy", "kind"], planted)
    return out / "listing.csv"


def write_sequences(out, sequences: int = 6, frames: int = 20, seed: int = 0, size=(240, 180), step: int = 3) -> Path:
    """Video-like frames: sequence ``s`` pans over scene ``s`` by ``step`` pixels a frame (``OUT/seqNN/frame_MMM.jpg``,
    masks under ``OUT/masks/seqNN/``); returns the listing (image,mask)."""
    out = Path(out)
    rows = []
    for s in range(sequences):
        image, mask = make_scene(90_000 + s, seed)
        width, height = size
        folder, masks = out / f"seq{s:02d}", out / "masks" / f"seq{s:02d}"
        folder.mkdir(parents=True)
        masks.mkdir(parents=True)
        for f in range(frames):
            left = min(step * f, image.shape[1] - width)
            top = (image.shape[0] - height) // 2
            frame = image[top:top + height, left:left + width]
            (folder / f"frame_{f:03d}.jpg").write_bytes(_encode(np.ascontiguousarray(frame), "JPEG", 90))
            Image.fromarray(np.ascontiguousarray(mask[top:top + height, left:left + width])).save(
                masks / f"frame_{f:03d}.png", format="PNG")
            rows.append((f"seq{s:02d}/frame_{f:03d}.jpg", f"masks/seq{s:02d}/frame_{f:03d}.png"))
    _write_csv(out / "listing.csv", ["image", "mask"], rows)
    return out / "listing.csv"


def _write_csv(path: Path, header: List[str], rows) -> None:
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.planted_copies", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", help="folder to write (must not exist)")
    parser.add_argument("--bases", type=int, default=100, help="scenes with a planted copy (default 100)")
    parser.add_argument("--distinct", type=int, default=150, help="scenes without a copy (default 150)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if os.path.exists(args.out):
        print(f"error: {args.out} exists", file=sys.stderr)
        return 2
    print(write_planted(args.out, args.bases, args.distinct, args.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
