"""A seeded corpus of real-looking image/mask pairs, for benchmarks and decoder tests (not shipped).

Run ``python -m tools.photo_corpus OUT [--pairs 2000] [--seed 0] [--workers N]`` or call
:func:`write_photo_corpus`. Pair ``i`` depends only on ``(seed, i)`` (every random choice comes from
``numpy.random.default_rng([seed, i, stream])``), so a 2,000-pair corpus is the first 2,000 pairs of
an 8,000-pair one, and the same arguments always give byte-identical files.

Why not the sample corpus (``tools/sample_corpus/``): its scenes are drawn from flat shapes and
decode about twice as fast as photographs, which makes every decoder and throughput ratio lie. These
images are crops of scikit-image's photographs, so they decode like camera photos.

Images (480x360 RGB). A photograph from ``skimage.data`` (astronaut, coffee, chelsea, rocket, the
two views of stereo_motorcycle, immunohistochemistry, retina, hubble_deep_field) is resized
(bicubic) by 1.0-2.0x the smallest scale that covers 480x360, cropped at random, flipped half of
the time, blurred like a lens (Gaussian radius 1.0-1.8 px), given a per-channel gain (0.85-1.15) and
a gamma (0.85-1.2), and sensor noise (sigma 0.3-1.0). Saved twice: as PNG (zlib level 6, about
215 KB) and as JPEG (Pillow quality 90, 4:2:0, about 30 KB).

Masks (480x360). The blurred photo is colour-quantised into 3-6 regions (k-means on a thumbnail),
smoothed by a mode filter; each region gets a distinct class id in ``0..num_classes-1`` and pixels
whose 5x5 neighbourhood holds two classes get the ignore label 255, as in VOC. Every
``palette_every``-th mask is a palette PNG (VOC colours; the indices are the class ids), the others
8-bit grey PNGs. About 5 KB each.

Layout::

    OUT/images/000000.png  OUT/jpeg/000000.jpg  OUT/masks/000000.png  ...
    OUT/png.csv    listing: image,mask  (the PNG images)
    OUT/jpeg.csv   listing: image,mask  (the JPEG images, same masks)

Needs scikit-image (pinned in requirements.txt; its photographs ship inside the wheel, nothing is
downloaded). Costs about 0.2 s of CPU per pair; ``--workers`` spreads it over processes.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import csv
import dataclasses
import io
import multiprocessing
import os
import shutil
import sys
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
from PIL import Image, ImageFilter

WIDTH, HEIGHT = 480, 360
IGNORE_LABEL = 255
PNG_LISTING = "png.csv"
JPEG_LISTING = "jpeg.csv"
_PHOTOS = ("astronaut", "coffee", "chelsea", "rocket", "stereo_motorcycle", "immunohistochemistry", "retina",
           "hubble_deep_field")


@dataclasses.dataclass(frozen=True)
class PhotoOptions:
    num_classes: int = 8
    jpeg_quality: int = 90
    jpeg_subsampling: int = 2                         # Pillow's code: 2 = 4:2:0 (its default at quality 90)
    png_compress_level: int = 6
    palette_every: int = 5                            # every 5th mask is a palette PNG; 0: none
    blur_radius: tuple[float, float] = (1.0, 1.8)     # lens blur, Gaussian radius in px
    noise_sigma: tuple[float, float] = (0.3, 1.0)     # sensor noise, in levels
    zoom: tuple[float, float] = (1.0, 2.0)            # resize factor over the smallest covering scale


def voc_palette() -> list[int]:
    """The PASCAL VOC colour map (256 RGB triples, flat): class ids drawn in colours that are not the ids."""
    palette = []
    for index in range(256):
        red = green = blue = 0
        value = index
        for bit in range(8):
            red |= ((value >> 0) & 1) << (7 - bit)
            green |= ((value >> 1) & 1) << (7 - bit)
            blue |= ((value >> 2) & 1) << (7 - bit)
            value >>= 3
        palette += [red, green, blue]
    return palette


_photo_cache: dict[str, np.ndarray] = {}


def photographs() -> list[np.ndarray]:
    """scikit-image's photographs as uint8 RGB arrays, in a fixed order (loaded once per process)."""
    if not _photo_cache:
        from skimage import data  # heavy: only the generator needs it
        for name in _PHOTOS:
            value = getattr(data, name)()
            if isinstance(value, tuple):                      # stereo_motorcycle: (left, right, disparity)
                _photo_cache[name + "_left"] = np.ascontiguousarray(value[0])
                _photo_cache[name + "_right"] = np.ascontiguousarray(value[1])
            else:
                _photo_cache[name] = np.ascontiguousarray(value[..., :3])
    return [_photo_cache[name] for name in sorted(_photo_cache)]


def make_photo(index: int, seed: int = 0, options: PhotoOptions = PhotoOptions()) -> np.ndarray:
    """The uint8 HEIGHTxWIDTHx3 photo of pair ``index``."""
    rng = np.random.default_rng([seed, index, 1])
    sources = photographs()
    source = sources[int(rng.integers(len(sources)))]
    height, width = source.shape[:2]
    scale = max(WIDTH / width, HEIGHT / height) * float(rng.uniform(*options.zoom))
    size = (max(WIDTH, int(round(width * scale))), max(HEIGHT, int(round(height * scale))))
    image = Image.fromarray(source).resize(size, Image.Resampling.BICUBIC)
    left = int(rng.integers(0, size[0] - WIDTH + 1))
    top = int(rng.integers(0, size[1] - HEIGHT + 1))
    image = image.crop((left, top, left + WIDTH, top + HEIGHT))
    if rng.random() < 0.5:
        image = image.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    image = image.filter(ImageFilter.GaussianBlur(float(rng.uniform(*options.blur_radius))))
    pixels = np.asarray(image, dtype=np.float32)
    gain = rng.uniform(0.85, 1.15, size=3).astype(np.float32)
    gamma = float(rng.uniform(0.85, 1.2))
    pixels = 255.0 * (np.clip(pixels * gain, 0, 255) / 255.0) ** gamma
    pixels += rng.normal(0.0, float(rng.uniform(*options.noise_sigma)), size=pixels.shape).astype(np.float32)
    return np.clip(np.rint(pixels), 0, 255).astype(np.uint8)


def _kmeans(samples: np.ndarray, k: int, rng: np.random.Generator, rounds: int = 8) -> np.ndarray:
    centres = samples[rng.choice(len(samples), size=k, replace=False)].astype(np.float32)
    for _ in range(rounds):
        labels = ((samples[:, None, :] - centres[None]) ** 2).sum(-1).argmin(1)
        for j in range(k):
            members = samples[labels == j]
            if len(members):
                centres[j] = members.mean(0)
    return centres


def make_mask(photo: np.ndarray, index: int, seed: int = 0, options: PhotoOptions = PhotoOptions()) -> np.ndarray:
    """A uint8 HEIGHTxWIDTH mask of ``photo``: a class id per region, IGNORE_LABEL on region borders."""
    rng = np.random.default_rng([seed, index, 2])
    k = int(rng.integers(3, 7))
    blurred = np.asarray(Image.fromarray(photo).filter(ImageFilter.GaussianBlur(6)), dtype=np.float32)
    centres = _kmeans(blurred[::8, ::8].reshape(-1, 3), k, rng)
    half = blurred[::2, ::2]                                  # nearest centre on a half-resolution grid
    regions = ((half[:, :, None, :] - centres[None, None]) ** 2).sum(-1).argmin(-1).astype(np.uint8)
    regions = Image.fromarray(regions).filter(ImageFilter.ModeFilter(7))
    regions = np.asarray(regions.resize((WIDTH, HEIGHT), Image.Resampling.NEAREST))
    classes = rng.choice(options.num_classes, size=k, replace=False).astype(np.uint8)
    mask = classes[regions]
    drawn = Image.fromarray(mask)
    border = (np.asarray(drawn.filter(ImageFilter.MaxFilter(5))) != np.asarray(drawn.filter(ImageFilter.MinFilter(5))))
    mask = mask.copy()
    mask[border] = IGNORE_LABEL
    return mask


def _png(image: Image.Image, level: int) -> bytes:
    out = io.BytesIO()
    image.save(out, format="PNG", compress_level=level)
    return out.getvalue()


def encode_mask(mask: np.ndarray, palette: bool, level: int = 6) -> bytes:
    image = Image.fromarray(mask)
    if palette:
        image = Image.frombytes("P", image.size, mask.tobytes())
        image.putpalette(voc_palette())
    return _png(image, level)


def make_pair(index: int, seed: int = 0, options: PhotoOptions = PhotoOptions()) -> tuple[bytes, bytes, bytes]:
    """(image PNG, image JPEG, mask PNG) bytes of pair ``index``."""
    photo = make_photo(index, seed, options)
    mask = make_mask(photo, index, seed, options)
    every = options.palette_every
    jpeg = io.BytesIO()
    Image.fromarray(photo).save(jpeg, format="JPEG", quality=options.jpeg_quality,
                                subsampling=options.jpeg_subsampling)
    return (_png(Image.fromarray(photo), options.png_compress_level), jpeg.getvalue(),
            encode_mask(mask, palette=every > 0 and index % every == every - 1))


def _write_pairs(out: str, indices: Sequence[int], seed: int, options: PhotoOptions) -> None:
    root = Path(out)
    for index in indices:
        for folder, data in zip(("images", "jpeg", "masks"), make_pair(index, seed, options)):
            suffix = ".jpg" if folder == "jpeg" else ".png"
            (root / folder / f"{index:06d}{suffix}").write_bytes(data)


def write_photo_corpus(out, pairs: int, seed: int = 0, options: PhotoOptions = PhotoOptions(),
                       workers: int = 1, overwrite: bool = False) -> Path:
    """Write ``pairs`` pairs and both listings under ``out`` (written to ``out.tmp``, renamed when complete)."""
    final = Path(out)
    if final.exists():
        if not overwrite:
            raise FileExistsError(f"{final} exists (pass overwrite=True / --overwrite)")
        shutil.rmtree(final)
    tmp = final.with_name(final.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    for folder in ("images", "jpeg", "masks"):
        (tmp / folder).mkdir(parents=True)
    chunks = [list(range(start, min(start + 50, pairs))) for start in range(0, pairs, 50)]
    if workers > 1:
        # spawned, not forked: a caller that has started threads (TensorFlow's, a test process's) can leave a lock
        # held in a forked child, which then hangs
        with concurrent.futures.ProcessPoolExecutor(max_workers=workers,
                                                    mp_context=multiprocessing.get_context("spawn")) as pool:
            for future in [pool.submit(_write_pairs, str(tmp), chunk, seed, options) for chunk in chunks]:
                future.result()
    else:
        for chunk in chunks:
            _write_pairs(str(tmp), chunk, seed, options)
    for listing, folder, suffix in ((PNG_LISTING, "images", ".png"), (JPEG_LISTING, "jpeg", ".jpg")):
        with (tmp / listing).open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(["image", "mask"])
            writer.writerows([f"{folder}/{i:06d}{suffix}", f"masks/{i:06d}.png"] for i in range(pairs))
    tmp.rename(final)
    return final


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.photo_corpus", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", help="folder to write (refused if it exists, unless --overwrite)")
    parser.add_argument("--pairs", type=int, default=2000, help="pairs to write")
    parser.add_argument("--seed", type=int, default=0, help="seed of every random choice")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="processes that generate pairs")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing folder")
    args = parser.parse_args(argv)
    if args.pairs < 1:
        parser.error("--pairs must be at least 1")
    try:
        out = write_photo_corpus(args.out, args.pairs, args.seed, workers=args.workers, overwrite=args.overwrite)
    except FileExistsError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    sizes = {folder: sum(p.stat().st_size for p in (out / folder).iterdir()) / args.pairs / 1024
             for folder in ("images", "jpeg", "masks")}
    print(f"{args.pairs} pairs in {out}: PNG {sizes['images']:.0f} KB, JPEG {sizes['jpeg']:.0f} KB, "
          f"mask {sizes['masks']:.1f} KB on average; listings {PNG_LISTING}, {JPEG_LISTING}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
