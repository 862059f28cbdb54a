"""Decoding and checking one mask whose values are class ids (no map): single-channel, every value a class id or
the ignore label.

Conversion rule (docs/validation.md): masks are stored as single-channel 8-bit PNG. Grey ('L') masks keep their
original bytes. Palette ('P') masks are read as their palette *indices* (the class ids), 16-bit masks are accepted
when every value is a valid class id or the ignore label, and 1-bit masks become 0/1; these three are re-encoded
as 8-bit grey PNG. 8-bit grey PNG masks take the fast decoders (core/pixels.py, core/decode.py), every other one
Pillow's path. A mask read through a map: core/masks/mapped.py.
"""

import dataclasses
from typing import Optional, Tuple, Union

import numpy as np
from PIL import Image

from beam_pipeline.core import decode, pixels, reasons
from beam_pipeline.core.pixels import Limits
from beam_pipeline.core.reasons import Rejection


@dataclasses.dataclass(frozen=True)
class MaskCheck:
    """A decoded, valid mask (not kept past validation).

    ``values`` is the HxW array of class ids, or for a mask read through a map a view that gives the class
    of any pixel (core/masks/mapped.py), for the crop sample points. ``stored`` holds the bytes to store
    when validation converted the mask; a mapped mask is ``converted`` by the writer alone, and its stored
    size is only estimated (``stored_estimate``). ``source_pixels``: (source value or colour, pixels) of a
    mapped mask.
    """
    height: int
    width: int
    class_pixels: Tuple[int, ...]
    ignore_pixels: int
    stored: Optional[bytes]
    values: Optional[object] = dataclasses.field(default=None, compare=False, repr=False)
    converted: bool = False
    stored_estimate: int = 0
    source_pixels: Tuple[Tuple[int, int], ...] = ()


def mask_values(image: Image.Image) -> Union[np.ndarray, Rejection]:
    """Class ids of a single-channel mask: palette indices for 'P', values otherwise."""
    if image.mode in ("L", "P"):
        return np.asarray(image)
    if image.mode == "1":
        return np.asarray(image).astype(np.uint8)
    if image.mode in pixels.SIXTEEN_BIT:
        return np.asarray(image)
    return Rejection(reasons.MASK_NOT_SINGLE_CHANNEL,
                     f"mask mode is {image.mode} ({len(image.getbands())} channels); a mask must be single-channel")


def class_histogram(values: np.ndarray, limits: Limits,
                    counts: Optional[np.ndarray] = None) -> Union[Tuple[Tuple[int, ...], int], Rejection]:
    """Per-class pixel counts and the ignore-label count, or the out-of-range values.

    ``counts`` is the 256-bin histogram when the decoder already made it.
    """
    if counts is None:
        flat = values.ravel()
        if flat.dtype != np.uint8:
            ignore = limits.ignore_label if limits.ignore_label is not None else -1
            large = flat[(flat > 255) & (flat != ignore)]
            if large.size:
                return Rejection(reasons.MASK_VALUE_OUT_OF_RANGE,
                                 _out_of_range_detail(np.unique(large)[:8].tolist(), limits))
            flat = flat.astype(np.uint8)
        counts = np.bincount(flat, minlength=256)
    valid = np.zeros(256, dtype=bool)
    valid[:limits.num_classes] = True
    if limits.ignore_label is not None:
        valid[limits.ignore_label] = True
    bad = np.flatnonzero(counts[~valid] > 0)
    if bad.size:
        bad_values = np.flatnonzero(~valid)[bad]
        return Rejection(reasons.MASK_VALUE_OUT_OF_RANGE, _out_of_range_detail(bad_values[:8].tolist(), limits))
    ignore = int(counts[limits.ignore_label]) if limits.ignore_label is not None else 0
    return tuple(int(c) for c in counts[:limits.num_classes]), ignore


def _out_of_range_detail(bad_values, limits: Limits) -> str:
    allowed = f"0..{limits.num_classes - 1}"
    if limits.ignore_label is not None:
        allowed += f" or ignore label {limits.ignore_label}"
    return f"mask has values {bad_values} outside {allowed}"


def check_plain_mask(data: bytes, limits: Limits) -> Union[MaskCheck, Rejection]:
    """A valid mask's size, class histogram and values, or why it is rejected (module docstring)."""
    header = pixels.fast_path_header(data, limits.mask_formats, limits.max_pixels)
    if isinstance(header, decode.Flag):
        return pixels.flagged(data, header, "mask", check_mask_with_pillow(data, limits))
    if header is None or not decode.covers_grey(header):
        return check_mask_with_pillow(data, limits)
    values = decode.decode_grey(data, header)
    if isinstance(values, decode.Flag):
        return pixels.flagged(data, values, "mask", check_mask_with_pillow(data, limits))
    if values is None:
        return check_mask_with_pillow(data, limits)
    histogram = class_histogram(values, limits, np.asarray(Image.fromarray(values).histogram(), dtype=np.int64))
    if isinstance(histogram, Rejection):
        return histogram
    return MaskCheck(header.height, header.width, histogram[0], histogram[1], None, values)


def check_mask_with_pillow(data: bytes, limits: Limits) -> Union[MaskCheck, Rejection]:
    """Pillow's path: every mode; grey masks keep their bytes, the others are re-encoded."""
    image = pixels.open_checked(data, limits.mask_formats, limits.max_pixels, "mask")
    if isinstance(image, Rejection):
        return image
    failed = pixels.load_checked(image, "mask")
    if failed:
        return failed
    values = mask_values(image)
    if isinstance(values, Rejection):
        return values
    # Pillow counts 8-bit (and palette-index) values in C, faster than numpy.
    counts = np.asarray(image.histogram(), dtype=np.int64) if image.mode in ("L", "P") else None
    histogram = class_histogram(values, limits, counts)
    if isinstance(histogram, Rejection):
        return histogram
    class_pixels, ignore = histogram
    stored = None if image.mode == "L" else pixels.encode_png(values.astype(np.uint8))
    return MaskCheck(image.height, image.width, class_pixels, ignore, stored, values)


def stored_plain_mask(data: bytes) -> Union[bytes, Rejection]:
    """The bytes :func:`check_plain_mask` stores for a mask it converted (8-bit grey PNG), without its checks."""
    image = pixels.decoded(data, "mask")
    values = image if isinstance(image, Rejection) else mask_values(image)
    return values if isinstance(values, Rejection) else pixels.encode_png(values.astype(np.uint8))
