"""Decoding and checking one image (masks: :mod:`masks`), and the checks of a pair.

Each check returns either a summary of the valid input or a rejection with a
reason code (:mod:`reasons`) and a detail string; it never raises on bad data.

Conversion rule (documented in docs/validation.md):
* Images are stored as 3-channel 8-bit RGB. An image in any other mode is
  converted with Pillow: grey is replicated to the three channels, palette
  images are expanded through their palette, an alpha channel is dropped
  (colour values are kept, not composited), CMYK and YCbCr use Pillow's
  conversion, 16-bit grey keeps its 8 high bits. A converted image is
  re-encoded as lossless PNG; every other image keeps its original bytes.
* Masks are stored as single-channel 8-bit PNG. Grey ('L') masks keep their
  original bytes. Palette ('P') masks are read as their palette *indices*
  (the class ids), 16-bit masks are accepted when every value is a valid class
  id or the ignore label, and 1-bit masks become 0/1; these three are
  re-encoded as 8-bit grey PNG.

Decoders (docs/validation.md): every PNG and JPEG is first sniffed from its header (format, size, mode;
the pixel limits apply before anything is decoded) and every PNG's chunk structure is checked
(:mod:`decode`). 8-bit RGB PNG and 3-component JPEG images and 8-bit grey PNG masks are then decoded by
the fast decoders, which give the pixels TensorFlow's decode ops give; every other mode and format takes
Pillow's path below, unchanged. A file the fast path flags as broken is handed to Pillow too: if Pillow
refuses it, Pillow's reason stands; if Pillow decodes it, a JPEG is stored re-encoded as PNG from
Pillow's pixels (TensorFlow decodes those exactly), and a PNG is rejected as ``undecodable`` with the
flag, since a PNG that libpng refuses is damaged and Pillow's pixels for it are a guess.
"""

import dataclasses
import io
import warnings
from typing import Optional, Tuple, Union

import numpy as np
from PIL import Image

from beam_pipeline.core import decode, reasons
from beam_pipeline.core.label_maps import LabelMap, MaskMap

_FORMAT_NAMES = {"JPEG": "jpeg", "PNG": "png", "GIF": "gif", "BMP": "bmp", "TIFF": "tiff", "WEBP": "webp"}
_RGB_CONVERTIBLE = ("L", "LA", "P", "PA", "RGBA", "RGBX", "CMYK", "YCbCr", "1", "La", "RGBa", "LAB", "HSV")
SIXTEEN_BIT = ("I;16", "I;16B", "I;16L", "I")
MAX_SIDE = 65535   # Also the limit of PNG-friendly tools and of the stored uint16 sample points.
# What Pillow raises on hostile bytes: OSError, ValueError, SyntaxError, EOFError, struct.error, zlib.error,
# IndexError, TypeError, and from some plugins NotImplementedError, KeyError, ... (the fuzz corpus test found
# a DDS header that raises NotImplementedError in Image.open). Any of them makes the file a rejection, never
# a crash of the run, so every exception a decoder raises is caught (not BaseException: not KeyboardInterrupt).
_DECODE_ERRORS = (Exception,)
DECODE_ERRORS = _DECODE_ERRORS


@dataclasses.dataclass(frozen=True)
class Limits:
    """What a valid input may be. Built from the command-line options."""
    num_classes: int
    ignore_label: Optional[int] = 255
    max_pixels: int = 64_000_000
    image_formats: Tuple[str, ...] = ("jpeg", "png")
    mask_formats: Tuple[str, ...] = ("png",)
    channel_sums: bool = True         # Summarise pixel values for the statistics (off with --no_stats).
    mask_map: Optional[MaskMap] = None    # How stored mask values become class ids; None: they are class ids.
    label_map: Optional[LabelMap] = None  # Classification: how source labels become class ids; None: names or ids.


@dataclasses.dataclass(frozen=True)
class Rejection:
    reason: str
    detail: str


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


@dataclasses.dataclass(frozen=True)
class MaskCheck:
    """A decoded, valid mask (not kept past validation).

    ``values`` is the HxW array of class ids, or for a mask read through a map a view that gives the class
    of any pixel (core/mapped_masks.py), for the crop sample points. ``stored`` holds the bytes to store
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
    except _DECODE_ERRORS as error:
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
    except _DECODE_ERRORS as error:
        message = str(error)
        reason = reasons.TRUNCATED if "truncat" in message.lower() else reasons.UNDECODABLE
        return Rejection(reason, f"{what}: {message}")
    return None


def encode_png(array: np.ndarray) -> bytes:
    """Lossless, deterministic PNG bytes of a uint8 HxW or HxWx3 array."""
    out = io.BytesIO()
    Image.fromarray(array).save(out, format="PNG", compress_level=6)
    return out.getvalue()


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
        except _DECODE_ERRORS as error:
            return Rejection(reasons.UNDECODABLE, f"image cannot be converted to RGB: {error}")
    return Rejection(reasons.UNSUPPORTED_MODE, f"image mode {image.mode} cannot be converted to RGB")


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
    sums, squares = channel_sums(Image.fromarray(pixels).histogram()) if limits.channel_sums else _NO_SUMS
    return ImageCheck(header.height, header.width, header.format, None, sums, squares)


def flagged(data: bytes, flag: decode.Flag, what: str, pillow):
    """What a file the fast path flags becomes: Pillow's rejection; a PNG Pillow decodes is rejected all the same
    (``pillow`` holds a JPEG's re-encoded pixels; see the module docstring)."""
    if isinstance(pillow, Rejection) or data[:8] != decode.PNG_SIGNATURE:
        return pillow
    return Rejection(reasons.UNDECODABLE, f"{what}: {flag.message}; Pillow decodes it, but TensorFlow's PNG "
                                          "decoder (libpng) refuses or misreads such a file")


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
        return ImageCheck(image.height, image.width, fmt, None, sums, squares)
    rgb = to_rgb(image)
    if isinstance(rgb, Rejection):
        return rgb
    sums, squares = channel_sums(Image.fromarray(rgb).histogram()) if limits.channel_sums else _NO_SUMS
    return ImageCheck(image.height, image.width, "png", encode_png(rgb), sums, squares)


_LEVELS = np.arange(256, dtype=np.int64)
_NO_SUMS = ((0, 0, 0), (0, 0, 0))


def channel_sums(histogram) -> Tuple[Tuple[int, ...], Tuple[int, ...]]:
    """Exact per-channel sums of values and of squared values from a 3x256 RGB histogram."""
    counts = np.asarray(histogram, dtype=np.int64).reshape(3, 256)
    return tuple(int(v) for v in counts @ _LEVELS), tuple(int(v) for v in counts @ (_LEVELS * _LEVELS))


def decoded(data: bytes, what: str) -> Union[Image.Image, Rejection]:
    image = _header(data, what)
    if isinstance(image, Rejection):
        return image
    return load_checked(image, what) or image


def stored_image(data: bytes) -> Union[bytes, Rejection]:
    """The bytes :func:`check_image` stores for an image it converted, without its checks and sums.

    For the writer, whose ``data`` has the digest of the validated file: only the
    decode and the conversion run again.
    """
    image = decoded(data, "image")
    rgb = image if isinstance(image, Rejection) else to_rgb(image)
    return rgb if isinstance(rgb, Rejection) else encode_png(rgb)


def check_same_size(image: ImageCheck, mask: MaskCheck) -> Optional[Rejection]:
    if (image.height, image.width) != (mask.height, mask.width):
        return Rejection(reasons.SIZE_MISMATCH,
                         f"image is {image.width}x{image.height}, mask is {mask.width}x{mask.height}")
    return None


def parse_label(label: Optional[str], class_names: Tuple[str, ...], num_classes: int,
                label_map: Optional[LabelMap] = None) -> Union[int, Rejection]:
    """A class id from a label given as a class name or as an integer id, or through ``label_map``."""
    text = "" if label is None else str(label).strip()
    if label_map is not None:
        cls = label_map.lookup(text)
        if cls is None or cls < 0:        # ignored labels are filtered out before (core/selection.py)
            return Rejection(reasons.UNKNOWN_LABEL, f"label {text!r} is not listed in {label_map.source}")
        return cls
    if text in class_names:
        return class_names.index(text)
    try:
        value = int(text)
    except ValueError:
        return Rejection(reasons.UNKNOWN_LABEL, f"label {text!r} is not a known class")
    if 0 <= value < num_classes:
        return value
    return Rejection(reasons.UNKNOWN_LABEL, f"label {value} is outside 0..{num_classes - 1}")
