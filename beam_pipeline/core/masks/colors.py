"""Colour masks through a ``--color_map``: every colour matched exactly, counted and converted in Pillow's C.

Colours are 24-bit integers 0xRRGGBB (core/masks/maps.py); a colour one level off is another colour,
never the nearest. In an RGBA mask, alpha 0 is the ignore label (transparent: not annotated, whatever its
RGB), alpha 255 is the colour, and any other alpha is rejected.

* validation counts the mask's colours with Pillow (``Image.getcolors``: about 2.5 ns a pixel) and sums
  them per class (:func:`summarise_colors`); the crop sample points read a few pixels
  (:class:`MappedColors`);
* the writer converts every pixel (:func:`convert_colors`): each colour found is compared once over the
  pixels packed into 32-bit integers (Pillow's own RGBX/RGBA layout), and the class ids stored.

Both take a colour's class from the same table (:func:`color_classes`). Pure: Pillow and numpy.
"""

from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
from PIL import Image

from beam_pipeline.core import reasons
from beam_pipeline.core.reasons import Rejection
from beam_pipeline.core.masks.maps import IGNORE, IGNORE_UNMAPPED, MaskMap, color_text
from beam_pipeline.core.masks.values import (MAX_LISTED, OTHER_UNMAPPED, TRANSPARENT, Summary, cached,
                                            listed)

MAX_COLORS_COUNTED = 4096     # Pillow counts up to this many colours; more is a mask no colour map covers
OPAQUE = 0xFF000000           # the alpha byte of an opaque pixel in Pillow's little-endian RGBX/RGBA words


def color_classes(mask: MaskMap, ignore_label: Optional[int]) -> Dict[int, int]:
    """``{0xRRGGBB: class id, or the ignore label}`` of the map."""
    def build():
        ignore = -4 if ignore_label is None else ignore_label
        return {color: ignore if cls == IGNORE else cls for color, cls in mask.entries}
    return cached(mask, ("colors", ignore_label), build)


def _word(color: int) -> int:
    """0xRRGGBB as Pillow's little-endian 32-bit word of an opaque pixel."""
    return OPAQUE | ((color & 255) << 16) | (color & 0xFF00) | (color >> 16)


def _color(word: np.ndarray) -> np.ndarray:
    """Pillow's words back to 0xRRGGBB (alpha dropped)."""
    return ((word & 255) << 16) | (word & 0xFF00) | ((word >> 16) & 255)


def count_colors(image: Image.Image) -> List[Tuple[int, tuple]]:
    """``getcolors()``'s ``[(pixels, (r, g, b[, a]))]``, also for a mask of more colours than Pillow counts."""
    counted = image.getcolors(MAX_COLORS_COUNTED)
    if counted is not None:
        return counted
    words, counts = np.unique(packed_pixels(image), return_counts=True)
    alpha = image.mode == "RGBA"
    return [(int(n), (int(w) & 255, (int(w) >> 8) & 255, (int(w) >> 16) & 255) + ((int(w) >> 24,) if alpha else ()))
            for w, n in zip(words, counts)]


def packed_pixels(image: Image.Image) -> np.ndarray:
    """Every pixel as a little-endian 32-bit word R | G << 8 | B << 16 | A << 24 (A = 255 for RGB), flat:
    Pillow's own RGBX and RGBA bytes."""
    return np.frombuffer(image.tobytes("raw", "RGBA" if image.mode == "RGBA" else "RGBX"), dtype="<u4")


def summarise_colors(counted: Sequence[Tuple[int, tuple]], mask: MaskMap, num_classes: int,
                     ignore_label: Optional[int]) -> Union[Summary, Rejection]:
    """The class histogram of a colour mask from its colours' pixel counts, or why it is rejected."""
    classes = color_classes(mask, ignore_label)
    class_pixels = [0] * num_classes
    ignore = transparent = partial = 0
    sources: List[Tuple[int, int]] = []
    unknown: List[Tuple[int, int]] = []
    for count, color in counted:
        if len(color) == 4 and color[3] != 255:
            if color[3] == 0:
                transparent += count
            else:
                partial += count
            continue
        packed = (color[0] << 16) | (color[1] << 8) | color[2]
        cls = classes.get(packed)
        if cls is None:
            unknown.append((packed, count))
        elif cls == ignore_label:
            ignore += count
            sources.append((packed, count))
        else:
            class_pixels[cls] += count
            sources.append((packed, count))
    if partial:
        return Rejection(reasons.MASK_ALPHA_PARTIAL,
                        f"mask has {partial:,} partly transparent pixels (alpha 1..254); alpha 0 is the ignore "
                        "label and alpha 255 a colour of the map, anything else is ambiguous")
    if transparent and ignore_label is None:
        return Rejection(reasons.MASK_ALPHA_PARTIAL, f"mask has {transparent:,} transparent pixels (alpha 0), which "
                                                    "are the ignore label, but --ignore_label is -1")
    if unknown and mask.unmapped != IGNORE_UNMAPPED:
        colors, pixels = zip(*unknown)
        return Rejection(reasons.MASK_COLOR_UNKNOWN, f"mask has colours {listed(colors, pixels, color_text)} that "
                                                    f"{mask.source} does not list")
    unknown.sort(key=lambda item: (-item[1], item[0]))
    sources += unknown[:MAX_LISTED]
    merged: Dict[int, int] = {}
    for color, count in sources:                   # a palette may hold one colour at several indices
        merged[color] = merged.get(color, 0) + count
    sources = list(merged.items())
    ignore += transparent + sum(count for _, count in unknown)
    other = sum(count for _, count in unknown[MAX_LISTED:])
    extra = ((OTHER_UNMAPPED, other),) if other else ()
    extra += ((TRANSPARENT, transparent),) if transparent else ()
    return Summary(tuple(class_pixels), ignore, tuple(sorted(sources)) + extra)


def convert_colors(image: Image.Image, mask: MaskMap, ignore_label: Optional[int]) -> Union[np.ndarray, Rejection]:
    """The HxW uint8 class ids (and ignore label) of an RGB or RGBA mask image, every pixel matched exactly."""
    classes = color_classes(mask, ignore_label)
    words = packed_pixels(image)
    out = np.full(words.shape, 0 if ignore_label is None else ignore_label, dtype=np.uint8)
    for _, color in count_colors(image):
        alpha = color[3] if len(color) == 4 else 255
        if alpha == 0:
            continue                                  # transparent: the ignore label, already there
        packed = (color[0] << 16) | (color[1] << 8) | color[2]
        cls = classes.get(packed)
        if alpha != 255 or (cls is None and mask.unmapped != IGNORE_UNMAPPED):
            return Rejection(reasons.MASK_COLOR_UNKNOWN, f"mask has the colour {color_text(packed)} (alpha {alpha}), "
                                                        "which validation did not see")
        if cls is not None and cls != ignore_label:
            out[words == _word(packed)] = cls
    return out.reshape(image.height, image.width)


def palette_colors(image: Image.Image) -> Optional[List[tuple]]:
    """The (r, g, b, a) of each of a palette image's 256 indices (alpha from its tRNS), or None when the palette
    cannot be read that way (then the image is converted to RGBA instead)."""
    try:
        palette = image.getpalette("RGB") or []
    except ValueError:
        return None
    palette = list(palette) + [0] * (768 - len(palette))
    alpha = [255] * 256
    transparency = image.info.get("transparency")
    if isinstance(transparency, int) and 0 <= transparency < 256:
        alpha[transparency] = 0
    elif isinstance(transparency, (bytes, bytearray)):
        alpha[:len(transparency)] = list(transparency)[:256]
    elif transparency is not None:
        return None
    return [(palette[3 * i], palette[3 * i + 1], palette[3 * i + 2], alpha[i]) for i in range(256)]


def index_classes(colors: Sequence[tuple], used: Sequence[int], mask: MaskMap, ignore_label: Optional[int]) -> np.ndarray:
    """int64[256]: the class (or ignore label) of each used palette index of a mask whose index colours are
    ``colors``; -1 for an unused index or one whose colour the map does not list (validation rejects those,
    or makes them ignore with --unmapped ignore)."""
    classes = color_classes(mask, ignore_label)
    ignore = -1 if ignore_label is None else ignore_label
    table = np.full(256, -1, dtype=np.int64)
    for index in used:
        r, g, b, a = colors[index]
        cls = classes.get((r << 16) | (g << 8) | b)
        if a == 0:
            table[index] = ignore
        elif a == 255 and cls is not None:
            table[index] = cls
        elif a == 255 and mask.unmapped == IGNORE_UNMAPPED:
            table[index] = ignore
    return table


class MappedColors:
    """The classes of a colour mask's pixels, for the crop sample points: a few pixels packed and looked up, or
    one class's colours compared channel by channel (cheaper than packing every pixel)."""

    def __init__(self, image: Image.Image, summary: Summary, mask: MaskMap, ignore_label: Optional[int],
                 rgb: Optional[np.ndarray] = None):
        self.size, self.width = image.width * image.height, image.width
        self._image, self._rgb, self._alpha = image, rgb, None
        table = color_classes(mask, ignore_label)
        self._colors = np.asarray(sorted(table), dtype=np.int64)
        self._classes = np.asarray([table[c] for c in sorted(table)], dtype=np.int64)
        self._ignore = -1 if ignore_label is None else ignore_label
        self._present = [color for color, _ in summary.source_pixels if color >= 0]
        self._table = table

    def _pixels(self) -> np.ndarray:
        """Nx3 uint8 (and the alpha channel of an RGBA mask), read from the image once."""
        if self._rgb is None:
            pixels = np.asarray(self._image)
            self._rgb = pixels[:, :, :3]
            self._alpha = pixels[:, :, 3].ravel() if pixels.shape[2] == 4 else None
        return self._rgb.reshape(-1, 3)

    def classes_at(self, indices: np.ndarray) -> np.ndarray:
        pixels = self._pixels()[indices].astype(np.int64)
        colors = (pixels[:, 0] << 16) | (pixels[:, 1] << 8) | pixels[:, 2]
        index = np.clip(np.searchsorted(self._colors, colors), 0, len(self._colors) - 1)
        out = np.where(self._colors[index] == colors, self._classes[index], self._ignore)
        return out if self._alpha is None else np.where(self._alpha[indices] == 0, self._ignore, out)

    def where(self, c: int) -> np.ndarray:
        pixels = self._pixels()
        hit = np.zeros(self.size, dtype=bool)
        for color in (color for color in self._present if self._table.get(color) == c):
            hit |= ((pixels[:, 0] == color >> 16) & (pixels[:, 1] == (color >> 8) & 255)
                    & (pixels[:, 2] == color & 255))
        if self._alpha is not None:
            hit &= self._alpha == 255
        return np.flatnonzero(hit)
