"""Decoding and checking one image: its size, the bytes it is stored as, its channel sums and perceptual hash.

Conversion rule (documented in docs/validation.md): images are read as 3-channel 8-bit RGB. An image in any
other mode is converted with Pillow: grey is replicated to the three channels, palette images are expanded
through their palette, an alpha channel is dropped (colour values are kept, not composited), CMYK and YCbCr use
Pillow's conversion, 16-bit grey keeps its 8 high bits. A converted image is re-encoded as lossless PNG; every
other image keeps its original bytes, and so does a greyscale JPEG: TensorFlow's ``decode_jpeg(channels=3)``, the
trainer's decoder, replicates its grey channel exactly as this rule does (checked in tests), and the JPEG is
about a quarter of the 3-channel PNG. 8-bit RGB PNG and 3-component JPEG images take the fast decoders
(core/pixels.py, core/decode.py), every other one Pillow's path.
"""

import dataclasses
from typing import Optional, Tuple, Union

import numpy as np
from PIL import Image

from beam_pipeline.core import decode, reasons
from beam_pipeline.core.leakage.phash import perceptual_hash
from beam_pipeline.core.pixels import (DECODE_ERRORS, SIXTEEN_BIT, Limits, decoded, encode_png, fast_path_header,
                                       flagged, format_name, load_checked, open_checked)
from beam_pipeline.core.reasons import Rejection

_RGB_CONVERTIBLE = ("L", "LA", "P", "PA", "RGBA", "RGBX", "CMYK", "YCbCr", "1", "La", "RGBa", "LAB", "HSV")


@dataclasses.dataclass(frozen=True)
class ImageCheck:
    """A decoded, valid image. ``stored`` is None when the original bytes are kept.

    ``channel_sum`` and ``channel_sum_squares`` are exact per-channel sums of
    the RGB pixel values (and of their squares): the summary from which the
    dataset mean and standard deviation are computed without decoding again.
    """
    height: int
    width: int
    stored_format: str
    stored: Optional[bytes]
    channel_sum: Tuple[int, int, int] = (0, 0, 0)
    channel_sum_squares: Tuple[int, int, int] = (0, 0, 0)
    phash: bytes = b""            # the perceptual hash of the pixels (core/leakage/phash.py)


def to_rgb(image: Image.Image) -> Union[np.ndarray, Rejection]:
    """The image as HxWx3 uint8 under the conversion rule in the module docstring."""
    if image.mode == "RGB":
        return np.asarray(image)
    if image.mode in SIXTEEN_BIT:
        grey = (np.asarray(image).astype(np.uint32) >> 8).clip(0, 255).astype(np.uint8)
        return np.repeat(grey[:, :, None], 3, axis=2)
    if image.mode in _RGB_CONVERTIBLE:
        try:
            if image.mode in ("P", "PA") and "transparency" in image.info:
                image = image.convert("RGBA")     # raises on a transparency table longer than the palette
            return np.asarray(image.convert("RGB"))
        except DECODE_ERRORS as error:
            return Rejection(reasons.UNDECODABLE, f"image cannot be converted to RGB: {error}")
    return Rejection(reasons.UNSUPPORTED_MODE, f"image mode {image.mode} cannot be converted to RGB")


def check_image(data: bytes, limits: Limits) -> Union[ImageCheck, Rejection]:
    """A valid image's size, stored bytes and channel sums, or why it is rejected (module docstring)."""
    header = fast_path_header(data, limits.image_formats, limits.max_pixels)
    if isinstance(header, decode.Flag):
        return flagged(data, header, "image", check_image_with_pillow(data, limits, reencode=True))
    if header is None or not decode.covers_rgb(header):
        return check_image_with_pillow(data, limits)
    pixels = decode.decode_rgb(data, header)
    if isinstance(pixels, decode.Flag):
        return flagged(data, pixels, "image", check_image_with_pillow(data, limits, reencode=True))
    if pixels is None:
        return check_image_with_pillow(data, limits)
    decoded_image = Image.fromarray(pixels)
    sums, squares = channel_sums(decoded_image.histogram()) if limits.channel_sums else _NO_SUMS
    return ImageCheck(header.height, header.width, header.format, None, sums, squares, perceptual_hash(decoded_image))


def check_image_with_pillow(data: bytes, limits: Limits, reencode: bool = False) -> Union[ImageCheck, Rejection]:
    """Pillow's path: every format and mode. An RGB image keeps its bytes unless ``reencode``."""
    image = open_checked(data, limits.image_formats, limits.max_pixels, "image")
    if isinstance(image, Rejection):
        return image
    failed = load_checked(image, "image")
    if failed:
        return failed
    fmt = format_name(image)
    if image.mode == "RGB" and not reencode:
        sums, squares = channel_sums(image.histogram()) if limits.channel_sums else _NO_SUMS
        return ImageCheck(image.height, image.width, fmt, None, sums, squares, perceptual_hash(image))
    if image.mode == "L" and fmt == "jpeg" and not reencode:      # greyscale JPEG: stored as it is (module docstring)
        sums, squares = channel_sums(image.histogram() * 3) if limits.channel_sums else _NO_SUMS
        return ImageCheck(image.height, image.width, fmt, None, sums, squares, perceptual_hash(image))
    rgb = to_rgb(image)
    if isinstance(rgb, Rejection):
        return rgb
    converted = Image.fromarray(rgb)
    sums, squares = channel_sums(converted.histogram()) if limits.channel_sums else _NO_SUMS
    return ImageCheck(image.height, image.width, "png", encode_png(rgb), sums, squares, perceptual_hash(converted))


_LEVELS = np.arange(256, dtype=np.int64)
_NO_SUMS = ((0, 0, 0), (0, 0, 0))


def channel_sums(histogram) -> Tuple[Tuple[int, ...], Tuple[int, ...]]:
    """Exact per-channel sums of values and of squared values from a 3x256 RGB histogram."""
    counts = np.asarray(histogram, dtype=np.int64).reshape(3, 256)
    return tuple(int(v) for v in counts @ _LEVELS), tuple(int(v) for v in counts @ (_LEVELS * _LEVELS))


def stored_image(data: bytes) -> Union[bytes, Rejection]:
    """The bytes :func:`check_image` stores for an image it converted, without its checks and sums.

    For the writer, whose ``data`` has the digest of the validated file: only the
    decode and the conversion run again.
    """
    image = decoded(data, "image")
    rgb = image if isinstance(image, Rejection) else to_rgb(image)
    return rgb if isinstance(rgb, Rejection) else encode_png(rgb)
