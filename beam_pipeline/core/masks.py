"""Decoding and checking one mask: single-channel 8-bit class ids, every value a class id or the ignore label.

The conversion rule and the decoders are those of :mod:`checks` (its docstring): grey masks keep their
bytes; palette, 16-bit and 1-bit masks are re-encoded as 8-bit grey PNG.
"""

from typing import Optional, Tuple, Union

import numpy as np
from PIL import Image

from beam_pipeline.core import checks, decode, mapped_masks, reasons
from beam_pipeline.core.checks import Limits, MaskCheck, Rejection


def mask_values(image: Image.Image) -> Union[np.ndarray, Rejection]:
    """Class ids of a single-channel mask: palette indices for 'P', values otherwise."""
    if image.mode in ("L", "P"):
        return np.asarray(image)
    if image.mode == "1":
        return np.asarray(image).astype(np.uint8)
    if image.mode in checks.SIXTEEN_BIT:
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


def check_mask(data: bytes, limits: Limits) -> Union[MaskCheck, Rejection]:
    """A valid mask's size, class histogram and values, or why it is rejected (module docstring).

    A mask read through a map (limits.mask_map) is checked by core/mapped_masks.py.
    """
    if limits.mask_map is not None:
        return mapped_masks.check_mapped_mask(data, limits)
    header = checks.fast_path_header(data, limits.mask_formats, limits.max_pixels)
    if isinstance(header, decode.Flag):
        return checks.flagged(data, header, "mask", check_mask_with_pillow(data, limits))
    if header is None or not decode.covers_grey(header):
        return check_mask_with_pillow(data, limits)
    values = decode.decode_grey(data, header)
    if isinstance(values, decode.Flag):
        return checks.flagged(data, values, "mask", check_mask_with_pillow(data, limits))
    if values is None:
        return check_mask_with_pillow(data, limits)
    histogram = class_histogram(values, limits, np.asarray(Image.fromarray(values).histogram(), dtype=np.int64))
    if isinstance(histogram, Rejection):
        return histogram
    return MaskCheck(header.height, header.width, histogram[0], histogram[1], None, values)


def check_mask_with_pillow(data: bytes, limits: Limits) -> Union[MaskCheck, Rejection]:
    """Pillow's path: every mode; grey masks keep their bytes, the others are re-encoded."""
    image = checks.open_checked(data, limits.mask_formats, limits.max_pixels, "mask")
    if isinstance(image, Rejection):
        return image
    failed = checks.load_checked(image, "mask")
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
    stored = None if image.mode == "L" else checks.encode_png(values.astype(np.uint8))
    return MaskCheck(image.height, image.width, class_pixels, ignore, stored, values)


def stored_mask(data: bytes, limits: Optional[Limits] = None) -> Union[bytes, Rejection]:
    """The bytes :func:`check_mask` stores for a mask it converted (8-bit grey PNG), without its checks; through
    ``limits.mask_map`` when there is one (core/mapped_masks.py)."""
    if limits is not None and limits.mask_map is not None:
        return mapped_masks.stored_mapped_mask(data, limits)
    image = checks.decoded(data, "mask")
    values = image if isinstance(image, Rejection) else mask_values(image)
    return values if isinstance(values, Rejection) else checks.encode_png(values.astype(np.uint8))
