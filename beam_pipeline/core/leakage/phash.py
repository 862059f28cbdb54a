"""The perceptual hash of an image, from the pixels validation decoded (never a second decode).

The hash (docs/leakage.md, "The hash"): the image, box-filtered to a 32x32 grey thumbnail, is transformed by
a 2-D DCT, of which the 6x6 lowest frequencies are kept without the mean (35 coefficients), each weighted by the
fourth root of its squared frequency (so that the lowest ones, which every photograph of a street shares, do not
decide alone); 256 fixed random projections of those coefficients (each coefficient +1 or -1, drawn from SHA-256)
give a bit each: 1 when the projection is positive (SimHash). Two images are near duplicates when their hashes
differ in few bits (the Hamming distance). Low frequencies are what a JPEG re-encode, a resize, a brightness
change or a PNG/JPEG round trip leave alone, and what a small crop moves least; random projections spread them
over 256 bits far less correlated than the coefficients' signs, so that bands of the hash make good keys
(core/leakage/bands.py). Chosen by measuring planted copies against distinct photographs and same-layout street
scenes (bench/near_duplicates_hash.py, docs/leakage.md).

Every step is integer arithmetic on Pillow's fixed-point resize: the same pixels give the same hash on every
machine and runner. A grey image gives the hash of its RGB conversion (grey replicated).
"""

import hashlib
from typing import Iterable

import numpy as np
from PIL import Image

NAME = "simhash-dct6-256"       # what manifest.json and the index call this hash; a new hash gets a new name
BITS = 256
DEFAULT_RADIUS = 14             # near duplicates differ in at most this many bits (docs/leakage.md, "The radius")
BYTES = BITS // 8
THUMBNAIL = 32                  # the grey thumbnail's side
FREQUENCIES = 6                 # the lowest DCT frequencies kept per axis
_WEIGHT_SCALE = 16              # frequency weights (u^2 + v^2)^(1/4), as integers of this scale
_FIXED_POINT = 1 << 12          # the DCT matrix's scale: exact integer products
_SALT = b"beam_pipeline.leakage.phash"


def _dct_rows() -> np.ndarray:
    """The first FREQUENCIES rows of the orthonormal DCT-II matrix of THUMBNAIL points, scaled to integers."""
    k = np.arange(FREQUENCIES)[:, None]
    i = np.arange(THUMBNAIL)[None, :]
    rows = np.cos(np.pi * (2 * i + 1) * k / (2 * THUMBNAIL)) * np.sqrt(2 / THUMBNAIL)
    rows[0] /= np.sqrt(2)
    return np.rint(rows * _FIXED_POINT).astype(np.int64)


def _projections() -> np.ndarray:
    """BITS x (FREQUENCIES**2 - 1) weights of +1 or -1, from a SHA-256 stream: the same on every machine."""
    needed = BITS * (FREQUENCIES * FREQUENCIES - 1)
    stream = b"".join(hashlib.sha256(_SALT + i.to_bytes(4, "big")).digest() for i in range(needed // 256 + 1))
    bits = np.unpackbits(np.frombuffer(stream, np.uint8))[:needed]
    return (bits.astype(np.int64) * 2 - 1).reshape(BITS, FREQUENCIES * FREQUENCIES - 1)


def _frequency_weights() -> np.ndarray:
    """(u^2 + v^2)^(1/4) of each kept frequency but the mean, as integers: the same on every machine."""
    u, v = np.meshgrid(np.arange(FREQUENCIES), np.arange(FREQUENCIES), indexing="ij")
    weights = np.rint(_WEIGHT_SCALE * np.hypot(u, v) ** 0.5).astype(np.int64).ravel()
    return weights[1:]


_DCT = _dct_rows()
_WEIGHTS = _projections() * _frequency_weights()[None, :]


def perceptual_hash(image: Image.Image) -> bytes:
    """The BYTES-byte hash of a decoded image (mode RGB or L; an L image hashes as its RGB conversion)."""
    small = image.resize((THUMBNAIL, THUMBNAIL), Image.Resampling.BOX, reducing_gap=2.0)
    if small.mode != "L":
        small = small.convert("L")
    grey = np.asarray(small, dtype=np.int64)
    coefficients = (_DCT @ grey @ _DCT.T).ravel()[1:]          # without the mean (DC): brightness moves it most
    return np.packbits((_WEIGHTS @ coefficients) > 0).tobytes()      # integers: no rounding anywhere


def distance(a: bytes, b: bytes) -> int:
    """The Hamming distance of two hashes: the bits in which they differ."""
    return (int.from_bytes(a, "big") ^ int.from_bytes(b, "big")).bit_count()


def as_words(hashes: Iterable[bytes]) -> np.ndarray:
    """Hashes as an (n, 4) uint64 array, for :func:`distances`."""
    data = b"".join(hashes)
    return np.frombuffer(data, dtype=">u8").astype(np.uint64).reshape(-1, BYTES // 8)


def from_words(words: np.ndarray) -> bytes:
    """The hash of one row of :func:`as_words`."""
    return np.asarray(words, dtype=">u8").tobytes()


def distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise Hamming distances of two (n, 4) word arrays (broadcasting)."""
    return np.bitwise_count(a ^ b).sum(axis=-1, dtype=np.int64)
