"""Pictures for the report: class colours, masks over images, and data: URIs (Pillow and numpy only)."""

import base64
import colorsys
import io
from typing import List, Optional, Tuple

import numpy as np
from PIL import Image

RGB = Tuple[int, int, int]

# Tableau's ten categorical colours (matplotlib's "tab10"), then golden-angle hues for more classes.
_TAB10 = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
          "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
IGNORE_COLOUR: RGB = (255, 255, 255)
MASK_ALPHA = 0.5


def _hex_to_rgb(value: str) -> RGB:
    return int(value[1:3], 16), int(value[3:5], 16), int(value[5:7], 16)


def palette(num_classes: int) -> List[RGB]:
    """One distinct colour per class, the same in every chart and overlay."""
    if num_classes <= len(_TAB10):
        return [_hex_to_rgb(value) for value in _TAB10[:num_classes]]
    colours = []
    for c in range(num_classes):
        hue = (c * 0.618033988749895) % 1.0
        lightness = (0.45, 0.6, 0.35)[c % 3]
        r, g, b = colorsys.hls_to_rgb(hue, lightness, 0.75)
        colours.append((round(r * 255), round(g * 255), round(b * 255)))
    return colours


def hex_colour(rgb: RGB) -> str:
    return "#{:02x}{:02x}{:02x}".format(*rgb)


def overlay(image: np.ndarray, mask: np.ndarray, colours: List[RGB], ignore_label: Optional[int]) -> np.ndarray:
    """``image`` (h, w, 3) with each class's colour blended in at MASK_ALPHA, class outlines opaque.

    Ignore pixels are whitened; values that are neither a class nor the ignore label are left as they are.
    """
    lut = np.zeros((256, 3), np.float32)
    colours = colours[:256]                      # masks are 8-bit
    lut[:len(colours)] = colours
    painted = np.isin(mask, np.arange(len(colours)))
    if ignore_label is not None:
        lut[ignore_label] = IGNORE_COLOUR
        painted |= mask == ignore_label
    blended = image.astype(np.float32)
    blended[painted] = (1 - MASK_ALPHA) * blended[painted] + MASK_ALPHA * lut[mask[painted]]
    edges = boundaries(mask) & painted
    blended[edges] = lut[mask[edges]]
    return np.clip(blended + 0.5, 0, 255).astype(np.uint8)


def boundaries(mask: np.ndarray) -> np.ndarray:
    """Pixels whose right or lower neighbour holds another class: drawn opaque, so outlines show."""
    edges = np.zeros(mask.shape, bool)
    edges[:, :-1] |= mask[:, :-1] != mask[:, 1:]
    edges[:-1, :] |= mask[:-1, :] != mask[1:, :]
    return edges


def jpeg_data_uri(pixels: np.ndarray, quality: int = 82) -> str:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="JPEG", quality=quality, optimize=True)
    return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def png_data_uri(pixels: np.ndarray) -> str:
    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(pixels)).save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def svg_data_uri(svg: str) -> str:
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode("utf-8")).decode("ascii")
