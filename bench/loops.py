"""Two plain loops doing the minimal work of validating a segmentation corpus: the baselines the pipeline's
throughput is measured against (pipeline_throughput.py) and whose per-pair bodies per_pair_floor.py times.

Written directly here, independent of ``beam_pipeline.core``. Each loop runs in a
``multiprocessing.Pool(LOOP_PROCESSES)`` over the listing's rows (timed from reading the listing to joining
the pool): read both files, check the format by content and the pixel limit, decode both fully, check that
the sizes are equal and every mask value is < num_classes or == 255, and count the class histogram with
``np.bincount``.

``pillow``  decodes everything with Pillow (what the pipeline did before it had fast decoders);
``fast``    decodes with the fastest decoders the pipeline uses: libspng (imagecodecs) for 8-bit RGB PNG,
            libpng (imagecodecs) for 8-bit grey masks, libjpeg-turbo (simplejpeg, accurate IDCT) for
            3-component JPEG; Pillow for anything else (palette masks).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import multiprocessing
import os
import struct
import time
import zlib
from pathlib import Path
from typing import Optional

import imagecodecs
import numpy as np
import simplejpeg
from PIL import Image

import common
from common import NUM_CLASSES, Corpus, machine_busy_seconds, other_cores

IGNORE_LABEL = 255
MAX_PIXELS = 64_000_000  # the pipeline's default --max_pixels, so a decompression bomb is refused alike
LOOPS = ("pillow", "fast")
LOOP_PROCESSES = 2
LOOP_CHUNKSIZE = 8

_DECODE_ERRORS = (OSError, ValueError, SyntaxError, EOFError, struct.error, zlib.error, IndexError, RuntimeError,
                  Image.DecompressionBombError)
_IMAGE_FORMATS = ("JPEG", "PNG")
_MASK_MODES = ("L", "P", "I;16", "I;16B", "I;16L", "I")
_PNG = b"\x89PNG\r\n\x1a\n"
_JPEG = b"\xff\xd8\xff"


def read_listing(listing: Path) -> list[tuple[str, str]]:
    """(image path, mask path) of every row, resolved against the listing's folder."""
    root = listing.parent
    with listing.open(newline="", encoding="utf-8") as handle:
        return [(os.path.normpath(root / row["image"]), os.path.normpath(root / row["mask"]))
                for row in csv.DictReader(handle)]


def _read(path: str) -> bytes:
    with open(path, "rb") as handle:
        data = handle.read()
    if not data:
        raise ValueError("empty file")
    return data


def _pillow(data: bytes, allowed: tuple[str, ...]) -> Image.Image:
    """Open, check the format by content and the pixel count, and decode fully with Pillow."""
    image = Image.open(io.BytesIO(data))
    if image.format not in allowed:
        raise ValueError(f"format {image.format}")
    if image.width * image.height > MAX_PIXELS:
        raise ValueError("too many pixels")
    image.load()
    return image


def _pillow_mask(data: bytes) -> np.ndarray:
    mask = _pillow(data, ("PNG",))
    if mask.mode not in _MASK_MODES:
        raise ValueError(f"mask mode {mask.mode}")
    return np.asarray(mask)


def _pillow_pair(image_path: str, mask_path: str) -> tuple[tuple[int, int], np.ndarray]:
    image = _pillow(_read(image_path), _IMAGE_FORMATS)
    return (image.height, image.width), _pillow_mask(_read(mask_path))


def _png_header(data: bytes) -> tuple[int, int, int, int]:
    """(width, height, bit depth, colour type) from the IHDR, with the pixel limit."""
    width, height, depth, colour = struct.unpack(">IIBB", data[16:26])
    if width * height > MAX_PIXELS:
        raise ValueError("too many pixels")
    return width, height, depth, colour


def _fast_image(data: bytes) -> tuple[int, int]:
    """(height, width) of an image decoded fully by the fastest decoder for its kind."""
    if data[:8] == _PNG:
        if _png_header(data)[2:] == (8, 2):
            return imagecodecs.spng_decode(data).shape[:2]
    elif data[:3] == _JPEG:
        height, width, colourspace, _ = simplejpeg.decode_jpeg_header(data)
        if height * width > MAX_PIXELS:
            raise ValueError("too many pixels")
        if colourspace in ("YCbCr", "RGB"):
            return simplejpeg.decode_jpeg(data, colorspace="RGB", fastdct=False, fastupsample=False).shape[:2]
    image = _pillow(data, _IMAGE_FORMATS)
    return image.height, image.width


def _fast_pair(image_path: str, mask_path: str) -> tuple[tuple[int, int], np.ndarray]:
    size = _fast_image(_read(image_path))
    data = _read(mask_path)
    if data[:8] == _PNG and _png_header(data)[2:] == (8, 0):
        values = imagecodecs.png_decode(data)
        if values.ndim != 2:
            raise ValueError("mask is not single-channel")
        return size, values
    return size, _pillow_mask(data)


_PAIR_DECODERS = {"pillow": _pillow_pair, "fast": _fast_pair}


def check_pair(loop: str, paths: tuple[str, str]) -> Optional[tuple[int, ...]]:
    """One loop's work on one pair: the class histogram (num_classes counts + ignore count), or None when
    the pair is invalid. ``loop`` is a name of LOOPS."""
    try:
        size, mask = _PAIR_DECODERS[loop](*paths)
        if size != mask.shape[:2]:
            return None
        counts = np.bincount(mask.ravel(), minlength=256)
    except _DECODE_ERRORS:
        return None
    if counts[NUM_CLASSES:IGNORE_LABEL].any() or counts[IGNORE_LABEL + 1:].any():
        return None
    return tuple(int(c) for c in counts[:NUM_CLASSES]) + (int(counts[IGNORE_LABEL]),)


def _check_pillow(paths):
    return check_pair("pillow", paths)


def _check_fast(paths):
    return check_pair("fast", paths)


_LOOP_WORKERS = {"pillow": _check_pillow, "fast": _check_fast}   # picklable for the pool


def _inside(root: str, paths: tuple[str, str]) -> bool:
    """Both paths lie under ``root`` (the pipeline rejects rows that leave the listing's folder)."""
    return all(path.startswith(root + os.sep) for path in paths)


@dataclasses.dataclass
class LoopRun:
    loop: str           # a name of LOOPS
    scale: int
    seconds: float
    cpu_seconds: float
    valid: int
    rejected: int
    other_cores: float  # CPU used by other processes on the machine meanwhile (noise), in cores

    @property
    def cores(self) -> float:
        return self.cpu_seconds / self.seconds


def run_loop(corpus: Corpus, loop: str) -> LoopRun:
    """The minimal work over every listing row in a Pool(2); timed from reading the listing to join."""
    cpu_before, busy_before = common.cpu_seconds(), machine_busy_seconds()
    started = time.perf_counter()
    rows = read_listing(corpus.manifest)
    root = os.path.normpath(corpus.manifest.parent)
    inside = [paths for paths in rows if _inside(root, paths)]
    histogram = np.zeros(NUM_CLASSES + 1, dtype=np.int64)  # summed like the pipeline's class statistics
    valid = 0
    with multiprocessing.Pool(LOOP_PROCESSES) as pool:
        for result in pool.imap_unordered(_LOOP_WORKERS[loop], inside, chunksize=LOOP_CHUNKSIZE):
            if result is not None:
                valid += 1
                histogram += result
        pool.close()
        pool.join()  # worker shutdown is part of the loop's time
    seconds = time.perf_counter() - started
    cpu = common.cpu_seconds() - cpu_before
    return LoopRun(loop, corpus.scale, seconds, cpu, valid, len(rows) - valid, other_cores(busy_before, cpu, seconds))
