"""A seeded segmentation corpus of real photographs with consistent classes, for the trainer's measurements.

Run ``python -m tools.photo_scenes OUT [--pairs 400] [--seed 0]``. There is no CamVid here (nothing is
downloaded), and tools/photo_corpus.py's masks give each region a random class id, which no model can
learn. Here class ``c`` always means the texture of one photograph: the first eight that
``tools.photo_corpus.photographs()`` lists (scikit-image's astronaut, coffee, chelsea, rocket, the left
view of stereo_motorcycle, immunohistochemistry, retina and the Hubble deep field), class ``c`` being
photograph ``c``.

A scene (480x360) is laid out like a street view: a top band (class of the "sky"), a bottom band (the
"road"), and 3-7 blobs between and over them (Voronoi cells of random seeds, clipped to an ellipse), each
region filled with a random crop of its class's photograph at a random scale (0.5-1.5), flipped half of
the time, with a per-channel gain (0.85-1.15). Pixels within 2 px of a region border get the ignore
label 255, as in VOC and CamVid's void. Images are JPEG (quality 90), masks 8-bit grey PNG. Pair ``i``
depends only on ``(seed, i)``.

Layout: ``OUT/images/000000.jpg``, ``OUT/masks/000000.png``, ``OUT/listing.csv`` (image,mask).
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import sys
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
from PIL import Image, ImageFilter

from tools.photo_corpus import photographs

WIDTH, HEIGHT = 480, 360
IGNORE_LABEL = 255
NUM_CLASSES = 8
LISTING = "listing.csv"


def _texture(photo: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A HEIGHTxWIDTH crop of ``photo`` at a random scale, flipped half of the time, with a colour gain."""
    scale = max(rng.uniform(0.5, 1.5), WIDTH / photo.shape[1] * 1.01, HEIGHT / photo.shape[0] * 1.01)
    size = (int(photo.shape[1] * scale) + 1, int(photo.shape[0] * scale) + 1)
    image = np.asarray(Image.fromarray(photo).resize(size, Image.Resampling.BICUBIC), dtype=np.float32)
    top = int(rng.integers(0, image.shape[0] - HEIGHT + 1))
    left = int(rng.integers(0, image.shape[1] - WIDTH + 1))
    crop = image[top:top + HEIGHT, left:left + WIDTH]
    if rng.random() < 0.5:
        crop = crop[:, ::-1]
    return np.clip(crop * rng.uniform(0.85, 1.15, size=3), 0, 255)


def make_scene(index: int, seed: int = 0, photos: Optional[Sequence[np.ndarray]] = None):
    """(uint8 HEIGHTxWIDTHx3 image, uint8 HEIGHTxWIDTH mask) of scene ``index``."""
    photos = photos if photos is not None else photographs()[:NUM_CLASSES]
    rng = np.random.default_rng([seed, index])
    classes = len(photos)
    yy, xx = np.mgrid[0:HEIGHT, 0:WIDTH]
    mask = np.empty((HEIGHT, WIDTH), np.uint8)
    sky, road = rng.choice(classes, size=2, replace=False)
    horizon, kerb = int(rng.integers(90, 160)), int(rng.integers(220, 290))
    mask[:] = sky
    mask[yy >= horizon] = road
    blobs = int(rng.integers(3, 8))
    centres = np.stack([rng.integers(0, HEIGHT, blobs), rng.integers(0, WIDTH, blobs)], axis=1)
    nearest = np.argmin([(yy - y) ** 2 + (xx - x) ** 2 for y, x in centres], axis=0)
    for blob, (y, x) in enumerate(centres):
        radius_y, radius_x = rng.uniform(40, 120), rng.uniform(50, 160)
        inside = ((yy - y) / radius_y) ** 2 + ((xx - x) / radius_x) ** 2 <= 1.0
        mask[inside & (nearest == blob)] = rng.integers(0, classes)
    image = np.zeros((HEIGHT, WIDTH, 3), np.float32)
    for label in np.unique(mask):
        image[mask == label] = _texture(photos[label], rng)[mask == label]
    drawn = Image.fromarray(mask)
    border = np.asarray(drawn.filter(ImageFilter.MaxFilter(5))) != np.asarray(drawn.filter(ImageFilter.MinFilter(5)))
    mask = mask.copy()
    mask[border] = IGNORE_LABEL
    return image.round().astype(np.uint8), mask


def write_scenes(out, pairs: int, seed: int = 0) -> Path:
    out = Path(out)
    (out / "images").mkdir(parents=True)
    (out / "masks").mkdir()
    photos = photographs()[:NUM_CLASSES]
    rows = []
    for index in range(pairs):
        image, mask = make_scene(index, seed, photos)
        image_path, mask_path = out / "images" / f"{index:06d}.jpg", out / "masks" / f"{index:06d}.png"
        buffer = io.BytesIO()
        Image.fromarray(image).save(buffer, format="JPEG", quality=90)
        image_path.write_bytes(buffer.getvalue())
        Image.fromarray(mask).save(mask_path, format="PNG")
        rows.append((str(image_path), str(mask_path)))
    with open(out / LISTING, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["image", "mask"])
        writer.writerows(rows)
    return out / LISTING


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.photo_scenes", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", help="folder to write (must not exist)")
    parser.add_argument("--pairs", type=int, default=400, help="scenes to write (default 400)")
    parser.add_argument("--seed", type=int, default=0, help="seed of every random choice (default 0)")
    args = parser.parse_args(argv)
    if os.path.exists(args.out):
        parser.error(f"{args.out} exists")
    print(write_scenes(args.out, args.pairs, args.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
