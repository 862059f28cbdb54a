"""Converting a decoded mask's stored values to class ids through a MaskMap (core/masks/maps.py).

One table per map decides every value, and both paths use it, so validation and the writer cannot
drift apart:

* validation summarises: the source values' histogram goes through the table, which finds every unmapped
  value and gives the class histogram, without converting a pixel (:func:`summarise_values`); the crop
  sample points read the class of a few pixels only (core/masks/mapped.py);
* the writer converts every pixel with the same table (:func:`convert_values`) and stores an 8-bit grey
  PNG of class ids and the ignore label.

Colour masks: core/masks/colors.py, with the same records.

Value tables have an entry for each of the 65,536 16-bit values: a class id, the ignore label,
UNMAPPED or OUT_OF_RANGE. A value that cannot be a class (negative, above 65535, not an integer) is
rejected before any table is read; nothing wraps.

Pure: numpy and Pillow.
"""

import dataclasses
import re
from typing import Dict, List, Optional, Tuple, Union

import numpy as np
from PIL import Image

from beam_pipeline.core import reasons
from beam_pipeline.core.reasons import Rejection
from beam_pipeline.core.masks.maps import IDENTITY, IGNORE, IGNORE_UNMAPPED, VALUES, MaskMap, color_text

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


def _ignore_value(ignore_label: Optional[int]) -> int:
    return -4 if ignore_label is None else ignore_label   # never produced: the launcher refuses that


_CACHE: Dict[int, Tuple[object, Dict[tuple, object]]] = {}


def cached(owner, key: tuple, build):
    """``build()``, kept per ``owner`` object (a map lives as long as its worker's spec): a map is not hashed on
    every mask, and equal maps of other specs do not share (tests build many)."""
    entry = _CACHE.get(id(owner))
    if entry is None or entry[0] is not owner:
        if len(_CACHE) > 32:
            _CACHE.clear()
        entry = _CACHE[id(owner)] = (owner, {})
    if key not in entry[1]:
        entry[1][key] = build()
    return entry[1][key]


def value_table(mask: MaskMap, num_classes: int, ignore_label: Optional[int]) -> np.ndarray:
    return cached(mask, ("values", num_classes, ignore_label), lambda: _value_table(mask, num_classes, ignore_label))


def _value_table(mask: MaskMap, num_classes: int, ignore_label: Optional[int]) -> np.ndarray:
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


def integer_values(values: np.ndarray, where: str) -> Union[np.ndarray, Rejection]:
    """``values`` as a non-negative integer array of 16-bit values, or why it cannot hold class ids."""
    if values.dtype.kind == "f":
        return Rejection(reasons.UNSUPPORTED_MODE, "mask has floating-point values; a mask holds integer ids")
    if values.dtype.kind not in "ui":
        return Rejection(reasons.UNSUPPORTED_MODE, f"mask values of type {values.dtype} are not integer ids")
    if values.size and values.dtype.itemsize > 1:
        low, high = int(values.min()), int(values.max())
        if low < 0 or high >= TABLE_SIZE:
            bad = np.unique(values[(values < 0) | (values >= TABLE_SIZE)])[:MAX_LISTED].tolist()
            return Rejection(reasons.MASK_VALUE_OUT_OF_RANGE,
                            f"{where} has values {bad} outside 0..{TABLE_SIZE - 1}; none can be a class id")
    return values


def source_histogram(values: np.ndarray, counts: Optional[np.ndarray] = None,
                     mask: Optional[MaskMap] = None) -> Tuple[np.ndarray, np.ndarray]:
    """(the source values present, in order; their pixels). ``counts``: the 256-bin histogram when the
    decoder made it. A 16-bit mask through a map of at most 254 values is counted by its entries' codes
    (one 64 KiB table, then Pillow's 256-bin histogram), a pass over the pixels cheaper than a 65,536-bin
    count; the values the map does not list are counted exactly, apart."""
    if counts is None and values.dtype != np.uint8 and mask is not None and mask.kind == VALUES \
            and len(mask.entries) <= MAX_CODES:
        return _coded_histogram(values, mask)
    if counts is None:
        counts = np.bincount(values.ravel(), minlength=256 if values.dtype == np.uint8 else TABLE_SIZE)
    present = present_values(counts)
    return present, counts[present].astype(np.int64)


MAX_CODES = 254


def _coded_histogram(values: np.ndarray, mask: MaskMap) -> Tuple[np.ndarray, np.ndarray]:
    listed = np.asarray([value for value, _ in mask.entries], dtype=np.int64)

    def build():
        codes = np.full(TABLE_SIZE, 255, dtype=np.uint8)
        codes[listed] = np.arange(len(listed), dtype=np.uint8)
        return codes
    codes = np.take(cached(mask, ("codes",), build), values.reshape(values.shape[0], -1))
    counts = np.asarray(Image.fromarray(np.ascontiguousarray(codes)).histogram(), dtype=np.int64)
    found = np.flatnonzero(counts[:len(listed)])
    present, pixels = listed[found], counts[found]
    if counts[255]:
        others, other_pixels = np.unique(values[codes == 255], return_counts=True)
        order = np.argsort(np.concatenate([present, others]), kind="stable")
        present = np.concatenate([present, others.astype(np.int64)])[order]
        pixels = np.concatenate([pixels, other_pixels.astype(np.int64)])[order]
    return present, pixels


def present_values(histogram: np.ndarray) -> np.ndarray:
    """The values of non-zero bins, in order; a 16-bit histogram is searched a row of 256 bins at a time."""
    if len(histogram) != TABLE_SIZE:
        return np.flatnonzero(histogram)
    rows = np.flatnonzero(histogram.reshape(256, 256).any(axis=1))
    return np.concatenate([row * 256 + np.flatnonzero(histogram[row * 256:(row + 1) * 256]) for row in rows]
                          ) if len(rows) else np.zeros(0, np.int64)


def summarise_values(histogram: Tuple[np.ndarray, np.ndarray], mask: MaskMap, num_classes: int,
                     ignore_label: Optional[int]) -> Union[Summary, Rejection]:
    """The class histogram of a mask whose source values are ``histogram`` (:func:`source_histogram`), or why
    it is rejected."""
    table = value_table(mask, num_classes, ignore_label)
    present, pixels = histogram
    classes = table[present]
    unmapped = classes == UNMAPPED
    if unmapped.any():
        return Rejection(reasons.MASK_VALUE_UNMAPPED,
                        f"mask has values {listed(present[unmapped], pixels[unmapped], str)} that "
                        f"{mask.source} does not list")
    bad = classes == OUT_OF_RANGE
    if bad.any():
        allowed = f"0..{num_classes - 1}" + (f" or ignore label {ignore_label}" if ignore_label is not None else "")
        return Rejection(reasons.MASK_VALUE_OUT_OF_RANGE,
                        f"mask has values {listed(present[bad], pixels[bad], str)} that are outside {allowed} "
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


def listed(values, pixels, text) -> str:
    """``3 (1,024 px), 17 (12 px)``: the values with the most pixels first, at most MAX_LISTED
    (:func:`listed_in` reads them back)."""
    order = np.argsort(-np.asarray(pixels), kind="stable")[:MAX_LISTED]
    parts = [f"{text(int(values[i]))} ({int(pixels[i]):,} px)" for i in order]
    more = len(values) - len(order)
    return ", ".join(parts) + (f" and {more} more" if more > 0 else "")


_LISTED = re.compile(r"(\(\d+,\d+,\d+\)|-?\d+) \(([\d,]+) px\)")
_BRACKETED = re.compile(r"values \[([-\d, ]+)\]")


def listed_in(detail: str) -> List[Tuple[str, int]]:
    """(value or colour, pixels) of each offending value a rejection's detail names: as :func:`listed` writes them,
    or as a plain mask's check does (``values [255, 9]``, no pixel counts: 0)."""
    found = [(value, int(pixels.replace(",", ""))) for value, pixels in _LISTED.findall(detail)]
    if found:
        return found
    bracketed = _BRACKETED.search(detail)
    return [(value.strip(), 0) for value in bracketed.group(1).split(",") if value.strip()] if bracketed else []


def convert_values(values: np.ndarray, mask: MaskMap, num_classes: int,
                   ignore_label: Optional[int]) -> Union[np.ndarray, Rejection]:
    """The HxW uint8 class ids (and ignore label) of an integer mask: every pixel through the table."""
    values = integer_values(values, "mask")
    if isinstance(values, Rejection):
        return values
    converted = np.take(value_table(mask, num_classes, ignore_label), values)
    if (converted < 0).any():
        return Rejection(reasons.MASK_VALUE_UNMAPPED, "mask has values the map does not list")
    return converted.astype(np.uint8)
