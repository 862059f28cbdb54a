"""Masks read through a map (``--label_map``, ``--color_map``, ``--reduce_zero_label``): decode, check, store.

One decoder (:func:`decode_source`) serves validation and the writer:

* value maps read 8-bit grey and palette masks (the palette *indices*), 1-bit masks (0/1), 16-bit grey
  masks and integer TIFF masks as their stored values (``--mask_formats png,tiff``); an RGB mask is
  rejected as ``mask_not_single_channel``;
* colour maps read RGB and RGBA masks, palette masks through their palette (the palette is the colour
  code: its order means nothing), and grey masks as the colour ``(v, v, v)``; 16-bit colour masks and
  other modes are rejected as ``unsupported_mode``, never reduced to 8 bits.

Validation summarises the decoded mask through the map's table (core/masks/values.py) and stores
nothing; the writer converts every pixel with the same table and stores an 8-bit grey PNG of class ids
(core/pixels.encode_png: deterministic bytes). A mapped mask is therefore always ``converted``; its stored
size is estimated by the source file's (shards are sized by estimates anyway).
"""

import dataclasses
from typing import Optional, Tuple, Union

import numpy as np
from PIL import Image

from beam_pipeline.core import decode, pixels, reasons
from beam_pipeline.core.masks import colors as mc
from beam_pipeline.core.masks import values as mv
from beam_pipeline.core.masks.maps import COLORS, MaskMap
from beam_pipeline.core.masks.plain import MaskCheck
from beam_pipeline.core.pixels import Limits
from beam_pipeline.core.reasons import Rejection

_TIFF_BITS = 258           # the BitsPerSample tag
_SINGLE = {"L": np.uint8, "P": np.uint8, "1": np.uint8}


@dataclasses.dataclass(frozen=True)
class Decoded:
    """A mask's stored values: ``values`` (HxW integers) for value maps, an RGB or RGBA ``image`` for colour maps."""
    height: int
    width: int
    values: Optional[np.ndarray] = None
    counts: Optional[np.ndarray] = None          # the 256-bin histogram of 8-bit values, when Pillow made it
    image: Optional[Image.Image] = None
    rgb: Optional[np.ndarray] = None             # the fast decoder's pixels of that image, when it made them
    index_colors: Optional[list] = None          # a palette mask through a colour map: (r, g, b, a) of each index


def decode_source(data: bytes, limits: Limits, mask_map: MaskMap) -> Union[Decoded, Rejection]:
    """The mask's stored values as its map reads them (module docstring), or why it cannot be read.

    As for every file (core/pixels.py): a PNG whose header or structure the fast path flags, or that libpng
    refuses, is rejected as ``undecodable`` even when Pillow would decode it (its pixels would be a guess).
    """
    colors = mask_map.kind == COLORS
    header = pixels.fast_path_header(data, limits.mask_formats, limits.max_pixels)
    if isinstance(header, decode.Flag):
        return pixels.flagged(data, header, "mask", _with_pillow(data, limits, colors))
    fast = _fast(data, header, colors) if isinstance(header, decode.Header) and header.format == "png" else None
    if isinstance(fast, decode.Flag):
        return pixels.flagged(data, fast, "mask", _with_pillow(data, limits, colors))
    return fast if fast is not None else _with_pillow(data, limits, colors)


def _fast(data: bytes, header: decode.Header, colors: bool) -> Union[Decoded, Rejection, decode.Flag, None]:
    """The fast decoders' reading of a PNG mask; None when Pillow's path decides."""
    if colors and header.depth == 16:
        return Rejection(reasons.UNSUPPORTED_MODE, "mask is a 16-bit colour PNG; a colour map matches 8-bit "
                                                   "colours exactly and 16-bit ones are not reduced")
    if colors and decode.covers_rgb(header):
        rgb = decode.decode_rgb(data, header)
        if not isinstance(rgb, np.ndarray):
            return rgb
        return Decoded(header.height, header.width, image=Image.fromarray(rgb), rgb=rgb)
    if not colors and header.colour == decode.PNG_GREY and header.depth in (8, 16):
        values = decode.decode_grey(data, header, np.uint8 if header.depth == 8 else np.uint16)
        if not isinstance(values, np.ndarray):
            return values
        counts = np.asarray(Image.fromarray(values).histogram(), dtype=np.int64) if header.depth == 8 else None
        return Decoded(header.height, header.width, values=values, counts=counts)
    return None


def _with_pillow(data: bytes, limits: Limits, colors: bool) -> Union[Decoded, Rejection]:
    image = pixels.open_checked(data, limits.mask_formats, limits.max_pixels, "mask")
    if isinstance(image, Rejection):
        return image
    if getattr(image, "n_frames", 1) > 1:
        return Rejection(reasons.UNSUPPORTED_MODE, f"mask has {image.n_frames} frames or pages; a mask is one")
    failed = pixels.load_checked(image, "mask")
    if failed:
        return failed
    return _colors_of(image) if colors else _values_of(image)


def _values_of(image: Image.Image) -> Union[Decoded, Rejection]:
    if image.mode in _SINGLE:
        values = np.asarray(image).astype(np.uint8)
        counts = np.asarray(image.histogram(), dtype=np.int64) if image.mode != "1" else None
        return Decoded(image.height, image.width, values=values, counts=counts)
    if image.mode in pixels.SIXTEEN_BIT or image.mode == "F":
        values = mv.integer_values(np.asarray(image), "mask")
        if isinstance(values, Rejection):
            return values
        return Decoded(image.height, image.width, values=values)
    return Rejection(reasons.MASK_NOT_SINGLE_CHANNEL,
                     f"mask mode is {image.mode} ({len(image.getbands())} channels); --label_map reads "
                     "single-channel masks (colour-coded masks: --color_map)")


def _colors_of(image: Image.Image) -> Union[Decoded, Rejection]:
    bits = image.tag_v2.get(_TIFF_BITS) if hasattr(image, "tag_v2") else None
    if bits and max(bits if isinstance(bits, tuple) else (bits,)) > 8:
        return Rejection(reasons.UNSUPPORTED_MODE, f"mask is a {max(bits)}-bit colour TIFF; a colour map matches "
                                                   "8-bit colours exactly and deeper ones are not reduced")
    mode = image.mode
    if mode == "P":                                 # the indices, and the palette as the colour code
        colors = mc.palette_colors(image)
        if colors is not None:
            return Decoded(image.height, image.width, values=np.asarray(image),
                           counts=np.asarray(image.histogram(), dtype=np.int64), index_colors=colors)
    try:
        if mode in ("P", "PA"):
            image = image.convert("RGBA" if ("transparency" in image.info or mode == "PA") else "RGB")
        elif mode in ("L", "1"):
            image = image.convert("RGB")
        elif mode == "LA":
            image = image.convert("RGBA")
    except pixels.DECODE_ERRORS as error:
        return Rejection(reasons.UNDECODABLE, f"mask cannot be read as colours: {error}")
    if image.mode not in ("RGB", "RGBA"):
        return Rejection(reasons.UNSUPPORTED_MODE, f"mask mode {mode} cannot be a colour mask "
                                                   "(RGB, RGBA, palette or 8-bit grey)")
    return Decoded(image.height, image.width, image=image)


def check_mapped_mask(data: bytes, limits: Limits, mask_map: MaskMap) -> Union[MaskCheck, Rejection]:
    """A mapped mask's size, class histogram and source values, or why it is rejected."""
    decoded = decode_source(data, limits, mask_map)
    if isinstance(decoded, Rejection):
        return decoded
    mask, n, ignore = mask_map, limits.num_classes, limits.ignore_label
    if decoded.index_colors is not None:
        used = np.flatnonzero(decoded.counts).tolist()
        summary = mc.summarise_colors([(int(decoded.counts[i]), decoded.index_colors[i]) for i in used], mask, n,
                                      ignore)
        view = None if isinstance(summary, Rejection) else IndexView(
            decoded.values, mc.index_classes(decoded.index_colors, used, mask, ignore))
    elif decoded.image is not None:
        summary = mc.summarise_colors(mc.count_colors(decoded.image), mask, n, ignore)
        view = None if isinstance(summary, Rejection) else mc.MappedColors(decoded.image, summary, mask, ignore,
                                                                              decoded.rgb)
    else:
        histogram = mv.source_histogram(decoded.values, decoded.counts, mask)
        summary = mv.summarise_values(histogram, mask, n, ignore)
        view = None if isinstance(summary, Rejection) else MappedValues(decoded.values, summary, mask, n, ignore)
    if isinstance(summary, Rejection):
        return summary
    return MaskCheck(decoded.height, decoded.width, summary.class_pixels, summary.ignore_pixels, None, view,
                     converted=True, stored_estimate=len(data), source_pixels=summary.source_pixels)


def stored_mapped_mask(data: bytes, limits: Limits, mask_map: MaskMap) -> Union[bytes, Rejection]:
    """The 8-bit grey PNG of class ids the writer stores for a mapped mask: every pixel through the map."""
    decoded = decode_source(data, limits, mask_map)
    if isinstance(decoded, Rejection):
        return decoded
    if decoded.index_colors is not None:
        used = np.flatnonzero(decoded.counts).tolist()
        table = mc.index_classes(decoded.index_colors, used, mask_map, limits.ignore_label)
        converted = (Rejection(reasons.MASK_COLOR_UNKNOWN, "mask has a colour validation did not see")
                     if (table[used] < 0).any() else np.take(table.astype(np.uint8), decoded.values))
    elif decoded.image is not None:
        converted = mc.convert_colors(decoded.image, mask_map, limits.ignore_label)
    else:
        converted = mv.convert_values(decoded.values, mask_map, limits.num_classes, limits.ignore_label)
    if isinstance(converted, Rejection):
        return Rejection(reasons.CHANGED_SINCE_VALIDATION, converted.detail)
    return pixels.encode_png(converted)


# --------------------------------------------------------------------------
# The class of a few pixels, for the crop sample points (core/points.py); colours: core/masks/colors.py
# --------------------------------------------------------------------------
def _sources_of(summary: mv.Summary, classes_of, c: int) -> Tuple[int, ...]:
    return tuple(v for v, _ in summary.source_pixels if v >= 0 and classes_of(v) == c)


class MappedValues:
    """The classes of a value mask's pixels, read through the table one pixel (or one class) at a time."""

    def __init__(self, values: np.ndarray, summary: mv.Summary, mask, num_classes: int, ignore: Optional[int]):
        self.flat = values.ravel()
        self.size, self.width = self.flat.size, values.shape[1]
        self._table = mv.value_table(mask, num_classes, ignore)
        self._summary = summary

    def classes_at(self, indices: np.ndarray) -> np.ndarray:
        return np.take(self._table, self.flat[indices])

    def where(self, c: int) -> np.ndarray:
        sources = _sources_of(self._summary, lambda v: self._table[v], c)
        if len(sources) == 1:
            return np.flatnonzero(self.flat == sources[0])
        return np.flatnonzero(np.isin(self.flat, sources))


class IndexView:
    """The classes of a palette mask's pixels through a colour map: its indices through a 256-entry table."""

    def __init__(self, indices: np.ndarray, table: np.ndarray):
        self.flat = indices.ravel()
        self.size, self.width = self.flat.size, indices.shape[1]
        self._table = table

    def classes_at(self, indices: np.ndarray) -> np.ndarray:
        return np.take(self._table, self.flat[indices])

    def where(self, c: int) -> np.ndarray:
        sources = np.flatnonzero(self._table == c)
        if len(sources) == 1:
            return np.flatnonzero(self.flat == sources[0])
        return np.flatnonzero(np.isin(self.flat, sources))
