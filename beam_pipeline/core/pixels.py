"""A file's pixels within the limits, for images and masks alike: its header read and checked before anything
is decoded, the fast path's header and structure checks, Pillow's full decode, and the deterministic PNG a
converted file is stored as. Images are checked by core/images.py, masks by core/masks/, a pair by
core/validation.py; each returns a summary of the valid input or a :class:`~beam_pipeline.core.reasons.Rejection`.

Decoders (docs/validation.md): every PNG and JPEG is first sniffed from its header (format, size, mode;
the pixel limits apply before anything is decoded) and every PNG's chunk structure is checked
(:mod:`decode`). The fast decoders then give the pixels TensorFlow's decode ops give; every other mode and format
takes Pillow's path, unchanged. A file the fast path flags as broken is handed to Pillow too: if Pillow
refuses it, Pillow's reason stands; if Pillow decodes it, a JPEG is stored re-encoded as PNG from
Pillow's pixels (TensorFlow decodes those exactly), and a PNG is rejected as ``undecodable`` with the
flag, since a PNG that libpng refuses is damaged and Pillow's pixels for it are a guess (:func:`flagged`).
"""

import dataclasses
import io
import warnings
from typing import Optional, Tuple, Union

import numpy as np
from PIL import Image

from beam_pipeline.core import decode, reasons
from beam_pipeline.core.reasons import Rejection

_FORMAT_NAMES = {"JPEG": "jpeg", "PNG": "png", "GIF": "gif", "BMP": "bmp", "TIFF": "tiff", "WEBP": "webp"}
SIXTEEN_BIT = ("I;16", "I;16B", "I;16L", "I")
MAX_SIDE = 65535   # Also the limit of PNG-friendly tools and of the stored uint16 sample points.
# What Pillow raises on hostile bytes: OSError, ValueError, SyntaxError, EOFError, struct.error, zlib.error,
# IndexError, TypeError, and from some plugins NotImplementedError, KeyError, ... (the fuzz corpus test found
# a DDS header that raises NotImplementedError in Image.open). Any of them makes the file a rejection, never
# a crash of the run, so every exception a decoder raises is caught (not BaseException: not KeyboardInterrupt).
DECODE_ERRORS = (Exception,)


@dataclasses.dataclass(frozen=True)
class Limits:
    """What a valid image or mask file may be, and the classes a mask's values name. Built from the command-line
    options; how a mask's stored values become class ids (a map) is the pair check's (core/validation.py)."""
    num_classes: int
    ignore_label: Optional[int] = 255
    max_pixels: int = 64_000_000
    image_formats: Tuple[str, ...] = ("jpeg", "png")
    mask_formats: Tuple[str, ...] = ("png",)
    channel_sums: bool = True         # Summarise pixel values for the statistics (off with --no_stats).


def _header(data: bytes, what: str) -> Union[Image.Image, Rejection]:
    """Open ``data``: read its header only, nothing is decoded yet."""
    if not data:
        return Rejection(reasons.EMPTY_FILE, f"{what} file is empty")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            return Image.open(io.BytesIO(data))
    except Image.DecompressionBombError as error:
        return Rejection(reasons.TOO_MANY_PIXELS, f"{what}: {error}")
    except Image.UnidentifiedImageError:
        return Rejection(reasons.UNDECODABLE, f"{what} is not a recognised image format")
    except DECODE_ERRORS as error:
        return Rejection(reasons.UNDECODABLE, f"{what} header: {error}")


def open_checked(data: bytes, allowed: Tuple[str, ...], max_pixels: int, what: str) -> Union[Image.Image, Rejection]:
    """Open ``data`` and check its format (by content) and pixel count before decoding."""
    image = _header(data, what)
    if isinstance(image, Rejection):
        return image
    fmt = format_name(image)
    if fmt not in allowed:
        return Rejection(reasons.FORMAT_NOT_ALLOWED, f"{what} is {fmt} by content; allowed: {', '.join(allowed)}")
    pixels = image.width * image.height
    if image.width > MAX_SIDE or image.height > MAX_SIDE:
        return Rejection(reasons.TOO_MANY_PIXELS,
                         f"{what} is {image.width}x{image.height}; each side must be at most {MAX_SIDE}")
    if pixels > max_pixels:
        return Rejection(reasons.TOO_MANY_PIXELS,
                         f"{what} is {image.width}x{image.height} = {pixels} pixels, limit {max_pixels}")
    return image


def format_name(image: Image.Image) -> str:
    """The image's format as detected from its content: jpeg, png, gif, ..."""
    return _FORMAT_NAMES.get(image.format, str(image.format).lower())


def load_checked(image: Image.Image, what: str) -> Optional[Rejection]:
    """Force a full decode, so truncated and corrupt data is caught now."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            image.load()
    except DECODE_ERRORS as error:
        message = str(error)
        reason = reasons.TRUNCATED if "truncat" in message.lower() else reasons.UNDECODABLE
        return Rejection(reason, f"{what}: {message}")
    return None


def encode_png(array: np.ndarray) -> bytes:
    """Lossless, deterministic PNG bytes of a uint8 HxW or HxWx3 array."""
    out = io.BytesIO()
    Image.fromarray(array).save(out, format="PNG", compress_level=6)
    return out.getvalue()


def fast_path_header(data: bytes, allowed: Tuple[str, ...], max_pixels: int) -> Union[decode.Header, decode.Flag,
                                                                                       None]:
    """The sniffed header when the fast path may go on; a Flag for a broken header or PNG structure; None
    when Pillow's path decides (another format, or a header that is rejected: Pillow words the reason)."""
    header = decode.sniff(data)
    if not isinstance(header, decode.Header):
        return header
    pixels = header.width * header.height
    if (header.format not in allowed or max(header.width, header.height) > MAX_SIDE or pixels > max_pixels
            or pixels > 2 * Image.MAX_IMAGE_PIXELS):      # Pillow refuses those as decompression bombs
        return None
    if header.format == "png":
        flag = decode.png_guard(data)
        return decode.Flag(flag) if flag else header
    return decode.jpeg_process_flag(header) or header


def flagged(data: bytes, flag: decode.Flag, what: str, pillow):
    """What a file the fast path flags becomes: Pillow's rejection; a PNG Pillow decodes is rejected all the same
    (``pillow`` holds a JPEG's re-encoded pixels; see the module docstring)."""
    if isinstance(pillow, Rejection) or data[:8] != decode.PNG_SIGNATURE:
        return pillow
    return Rejection(reasons.UNDECODABLE, f"{what}: {flag.message}; Pillow decodes it, but TensorFlow's PNG "
                                          "decoder (libpng) refuses or misreads such a file")


def decoded(data: bytes, what: str) -> Union[Image.Image, Rejection]:
    image = _header(data, what)
    if isinstance(image, Rejection):
        return image
    return load_checked(image, what) or image
