"""Converting a decoded mask's stored values to class ids through a MaskMap (core/label_maps.py).

One table per map decides every value, and both paths use it, so validation and the writer cannot
drift apart:

* validation summarises: the source values' histogram (a 16-bit one, or the colours Pillow counts) goes
  through the table, which finds every unmapped value or unknown colour and gives the class histogram,
  without converting a pixel (:func:`summarise_values`, :func:`summarise_colors`); the crop sample points
  read the class of a few pixels only (:class:`MappedValues`, :class:`MappedColors`);
* the writer converts every pixel with the same table (:func:`convert_values`, :func:`convert_colors`)
  and stores an 8-bit grey PNG of class ids and the ignore label.

Value tables have an entry for each of the 65,536 16-bit values: a class id, the ignore label,
UNMAPPED or OUT_OF_RANGE. A value that cannot be a class (negative, above 65535, not an integer) is
rejected before any table is read; nothing wraps. Colours are packed into 24-bit integers 0xRRGGBB
and matched exactly, never to the nearest colour. In an RGBA mask, alpha 0 is the ignore label
(transparent: not annotated), alpha 255 is the colour, and any other alpha is rejected.

Pure: numpy only.
"""

import dataclasses
import functools
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from beam_pipeline.core import reasons
from beam_pipeline.core.label_maps import IDENTITY, IGNORE, IGNORE_UNMAPPED, VALUES, MaskMap, color_text

UNMAPPED = -2                 # a value table's entry for a value the map does not list
OUT_OF_RANGE = -3             # ... for a value that is neither a class id nor the ignore label
TABLE_SIZE = 65536
OTHER_UNMAPPED = -1           # source_pixels: the unmapped values beyond the first few (--unmapped ignore)
TRANSPARENT = -2              # source_pixels: RGBA pixels of alpha 0
MAX_LISTED = 8                # values or colours named in a rejection's detail
MAX_COLORS_COUNTED = 4096     # Pillow counts up to this many colours; more is a mask no colour map covers


@dataclasses.dataclass(frozen=True)
class Summary:
    """A valid mask's class histogram and the source values it holds, with their pixels."""
    class_pixels: Tuple[int, ...]
    ignore_pixels: int
    source_pixels: Tuple[Tuple[int, int], ...]


@dataclasses.dataclass(frozen=True)
class Rejected:
    reason: str
    detail: str


def _ignore_value(ignore_label: Optional[int]) -> int:
    return -4 if ignore_label is None else ignore_label   # never produced: the launcher refuses that


@functools.lru_cache(maxsize=8)
def value_table(mask: MaskMap, num_classes: int, ignore_label: Optional[int]) -> np.ndarray:
    """int32[65536]: the class id, ignore label, UNMAPPED or OUT_OF_RANGE of every 16-bit source value.

    --reduce_zero_label first (0 and the ignore label's own value become ignore, v becomes v - 1), then
    the value map; without a value map the reduced value must be a class id or the ignore label.
    """
    ignore = _ignore_value(ignore_label)
    source = np.arange(TABLE_SIZE, dtype=np.int64)
    ignored = np.zeros(TABLE_SIZE, dtype=bool)
    reduced = source
    if mask.reduce_zero_label:
        reduced = source - 1
        ignored[0] = True
        if ignore_label is not None:
            ignored[ignore_label] = True
    if mask.kind == VALUES:
        lookup = np.full(TABLE_SIZE, UNMAPPED, dtype=np.int64)
        for value, cls in mask.entries:
            lookup[value] = ignore if cls == IGNORE else cls
        if mask.unmapped == IGNORE_UNMAPPED:
            lookup[lookup == UNMAPPED] = ignore
        table = lookup[np.clip(reduced, 0, TABLE_SIZE - 1)]
    else:
        valid = ((reduced >= 0) & (reduced < num_classes)) | (reduced == ignore)
        table = np.where(valid, reduced, OUT_OF_RANGE)
    table = np.where(ignored, ignore, table)
    return table.astype(np.int32)


def integer_values(values: np.ndarray, where: str) -> Union[np.ndarray, Rejected]:
    """``values`` as a non-negative integer array of 16-bit values, or why it cannot hold class ids."""
    if values.dtype.kind == "f":
        return Rejected(reasons.UNSUPPORTED_MODE, "mask has floating-point values; a mask holds integer ids")
    if values.dtype.kind not in "ui":
        return Rejected(reasons.UNSUPPORTED_MODE, f"mask values of type {values.dtype} are not integer ids")
    if values.size and values.dtype.itemsize > 1:
        low, high = int(values.min()), int(values.max())
        if low < 0 or high >= TABLE_SIZE:
            bad = np.unique(values[(values < 0) | (values >= TABLE_SIZE)])[:MAX_LISTED].tolist()
            return Rejected(reasons.MASK_VALUE_OUT_OF_RANGE,
                            f"{where} has values {bad} outside 0..{TABLE_SIZE - 1}; none can be a class id")
    return values


def source_histogram(values: np.ndarray, counts: Optional[np.ndarray] = None) -> np.ndarray:
    """Pixels of each source value (``counts``: the 256-bin histogram when the decoder made it)."""
    if counts is not None:
        return counts
    return np.bincount(values.ravel(), minlength=256 if values.dtype == np.uint8 else 0)


def summarise_values(histogram: np.ndarray, mask: MaskMap, num_classes: int,
                     ignore_label: Optional[int]) -> Union[Summary, Rejected]:
    """The class histogram of a mask whose source values have ``histogram``, or why it is rejected."""
    table = value_table(mask, num_classes, ignore_label)
    present = np.flatnonzero(histogram)
    pixels = histogram[present].astype(np.int64)
    classes = table[present]
    unmapped = classes == UNMAPPED
    if unmapped.any():
        return Rejected(reasons.MASK_VALUE_UNMAPPED,
                        f"mask has values {_listed(present[unmapped], pixels[unmapped], str)} that "
                        f"{mask.source} does not list")
    bad = classes == OUT_OF_RANGE
    if bad.any():
        allowed = f"0..{num_classes - 1}" + (f" or ignore label {ignore_label}" if ignore_label is not None else "")
        return Rejected(reasons.MASK_VALUE_OUT_OF_RANGE,
                        f"mask has values {_listed(present[bad], pixels[bad], str)} that are outside {allowed} "
                        "after --reduce_zero_label")
    return _summary(present, pixels, classes, num_classes, ignore_label, mask)


def _summary(present, pixels, classes, num_classes, ignore_label, mask: MaskMap) -> Summary:
    is_class = classes < num_classes
    class_pixels = np.bincount(classes[is_class], weights=pixels[is_class], minlength=num_classes)
    ignore = int(pixels[classes == ignore_label].sum()) if ignore_label is not None else 0
    sources = _source_pixels(present, pixels, classes, mask)
    return Summary(tuple(int(c) for c in class_pixels[:num_classes]), ignore, sources)


def _source_pixels(present, pixels, classes, mask: MaskMap) -> Tuple[Tuple[int, int], ...]:
    """(source, pixels) of each listed source value; unmapped ones (--unmapped ignore) beyond the first few
    are summed under OTHER_UNMAPPED, so that a record stays small."""
    listed = set(value for value, _ in mask.entries) if mask.kind != IDENTITY else None
    out, other, extra = [], 0, 0
    for value, count in zip(present.tolist(), pixels.tolist()):
        if listed is None or value in listed or extra < MAX_LISTED:
            out.append((int(value), int(count)))
            extra += listed is not None and value not in listed
        else:
            other += int(count)
    if other:
        out.append((OTHER_UNMAPPED, other))
    return tuple(out)


def _listed(values, pixels, text) -> str:
    """``3 (1,024 px), 17 (12 px)``: the values with the most pixels first, at most MAX_LISTED."""
    order = np.argsort(-np.asarray(pixels), kind="stable")[:MAX_LISTED]
    parts = [f"{text(int(values[i]))} ({int(pixels[i]):,} px)" for i in order]
    more = len(values) - len(order)
    return ", ".join(parts) + (f" and {more} more" if more > 0 else "")


def convert_values(values: np.ndarray, mask: MaskMap, num_classes: int,
                   ignore_label: Optional[int]) -> Union[np.ndarray, Rejected]:
    """The HxW uint8 class ids (and ignore label) of an integer mask: every pixel through the table."""
    values = integer_values(values, "mask")
    if isinstance(values, Rejected):
        return values
    converted = value_table(mask, num_classes, ignore_label)[values]
    if (converted < 0).any():
        return Rejected(reasons.MASK_VALUE_UNMAPPED, "mask has values the map does not list")
    return converted.astype(np.uint8)


# --------------------------------------------------------------------------
# Colours
# --------------------------------------------------------------------------
@functools.lru_cache(maxsize=8)
def color_lookup(mask: MaskMap, ignore_label: Optional[int]) -> Tuple[np.ndarray, np.ndarray]:
    """(sorted packed colours uint32, their classes int32: a class id or the ignore label)."""
    ignore = _ignore_value(ignore_label)
    keys = np.asarray([color for color, _ in mask.entries], dtype=np.uint32)
    classes = np.asarray([ignore if cls == IGNORE else cls for _, cls in mask.entries], dtype=np.int32)
    return keys, classes


def summarise_colors(counted: Sequence[Tuple[int, tuple]], mask: MaskMap, num_classes: int,
                     ignore_label: Optional[int]) -> Union[Summary, Rejected]:
    """The class histogram of a colour mask from Pillow's ``getcolors()`` list ``[(pixels, (r, g, b[, a]))]``."""
    keys, classes = color_lookup(mask, ignore_label)
    colors: Dict[int, int] = {}
    transparent = partial = 0
    for count, color in counted:
        if len(color) == 4 and color[3] != 255:
            if color[3] == 0:
                transparent += count
            else:
                partial += count
            continue
        packed = (color[0] << 16) | (color[1] << 8) | color[2]
        colors[packed] = colors.get(packed, 0) + count
    if partial:
        return Rejected(reasons.MASK_ALPHA_PARTIAL,
                        f"mask has {partial:,} partly transparent pixels (alpha 1..254); alpha 0 is the ignore "
                        "label and alpha 255 a colour of the map, anything else is ambiguous")
    if transparent and ignore_label is None:
        return Rejected(reasons.MASK_ALPHA_PARTIAL,
                        f"mask has {transparent:,} transparent pixels (alpha 0), which are the ignore label, "
                        "but --ignore_label is -1")
    present = np.asarray(sorted(colors), dtype=np.int64)
    pixels = np.asarray([colors[c] for c in present.tolist()], dtype=np.int64)
    index = np.clip(np.searchsorted(keys, present), 0, max(len(keys) - 1, 0))
    known = keys[index] == present if len(keys) else np.zeros(len(present), dtype=bool)
    ignore = _ignore_value(ignore_label)
    if not known.all() and mask.unmapped != IGNORE_UNMAPPED:
        return Rejected(reasons.MASK_COLOR_UNKNOWN,
                        f"mask has colours {_listed(present[~known], pixels[~known], color_text)} that "
                        f"{mask.source} does not list")
    cls = np.where(known, classes[index] if len(keys) else ignore, ignore)
    summary = _summary(present, pixels, cls, num_classes, ignore_label, mask)
    if transparent:
        sources = summary.source_pixels + ((TRANSPARENT, transparent),)
        summary = Summary(summary.class_pixels, summary.ignore_pixels + transparent, sources)
    return summary


def count_colors(rgb: np.ndarray, alpha: Optional[np.ndarray]) -> List[Tuple[int, tuple]]:
    """``getcolors()``'s list from arrays, for a mask with more colours than Pillow is asked to count."""
    packed = pack_colors(rgb).astype(np.int64)
    if alpha is not None:
        packed = packed | (alpha.astype(np.int64) << 24)
    values, counts = np.unique(packed, return_counts=True)
    out = []
    for value, count in zip(values.tolist(), counts.tolist()):
        color = ((value >> 16) & 255, (value >> 8) & 255, value & 255)
        out.append((count, color + ((value >> 24) & 255,) if alpha is not None else color))
    return out


def pack_colors(rgb: np.ndarray) -> np.ndarray:
    """HxWx3 uint8 -> HxW uint32 0xRRGGBB."""
    return (rgb[..., 0].astype(np.uint32) << 16) | (rgb[..., 1].astype(np.uint32) << 8) | rgb[..., 2]


def convert_colors(rgb: np.ndarray, alpha: Optional[np.ndarray], mask: MaskMap,
                   ignore_label: Optional[int]) -> Union[np.ndarray, Rejected]:
    """The HxW uint8 class ids (and ignore label) of a colour mask, every pixel matched exactly."""
    keys, classes = color_lookup(mask, ignore_label)
    packed = pack_colors(rgb)
    index = np.clip(np.searchsorted(keys, packed), 0, len(keys) - 1)
    known = keys[index] == packed
    out = classes[index]
    ignore = _ignore_value(ignore_label)
    if alpha is not None:
        out = np.where(alpha == 0, ignore, out)
        known = known | (alpha == 0)
        if ((alpha != 0) & (alpha != 255)).any():
            return Rejected(reasons.MASK_ALPHA_PARTIAL, "mask has partly transparent pixels")
    if not known.all():
        if mask.unmapped != IGNORE_UNMAPPED:
            return Rejected(reasons.MASK_COLOR_UNKNOWN, "mask has colours the map does not list")
        out = np.where(known, out, ignore)
    return out.astype(np.uint8)
