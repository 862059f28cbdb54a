"""The fast decode path: a header sniff, a PNG structure guard, and the fastest decoders that agree with TensorFlow.

Validation must accept exactly the files the trainer can decode, to the pixels the statistics are computed
from (docs/validation.md). The trainer decodes with TensorFlow's ops: libpng for PNG, libjpeg-turbo's
accurate integer IDCT for JPEG (``decode_jpeg(dct_method="INTEGER_ACCURATE")``). This module decodes the
common modes faster than Pillow with libraries that give the same pixels:

* 8-bit RGB PNG images: libspng (``imagecodecs.spng_decode``);
* 8-bit grey PNG masks: libpng (``imagecodecs.png_decode``);
* 3-component 8-bit JPEG images: libjpeg-turbo through ``simplejpeg`` with the accurate IDCT, fancy
  upsampling, and ``strict=True`` (every libjpeg warning, such as corrupt or missing data, raises).

libspng checks no CRC and stops reading after the image data, so it accepts PNGs that libpng refuses.
:func:`png_guard` closes that gap: it walks every chunk (length, type, CRC, order) up to IEND without
touching the pixels. The zlib stream itself (its Adler-32, the amount of data, the filter bytes) is left
to the decoder, which checks it.

Every function returns a value; none raises on bad data:

* :func:`sniff` reads the format, size and mode from the first bytes (no pixel is allocated);
* :func:`png_guard` returns None for a PNG whose structure libpng accepts, else why it is flagged;
* :func:`decode_rgb` / :func:`decode_grey` return the pixels, a :class:`Flag` (the decoder found the
  file broken), or None (a mode this path does not cover: the caller uses Pillow).

No Beam and no TensorFlow. The agreement with TensorFlow is not proven here but tested: the fuzz corpus
test (tests/end_to_end/test_fuzz_corpus.py) decodes every written record with the trainer's own decoder.
"""

import dataclasses
import struct
import zlib
from typing import Optional, Union

import imagecodecs
import numpy as np
import simplejpeg

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
JPEG_SIGNATURE = b"\xff\xd8\xff"
PNG_GREY, PNG_RGB, PNG_PALETTE, PNG_GREY_ALPHA, PNG_RGBA = 0, 2, 3, 4, 6
_PNG_DEPTHS = {PNG_GREY: (1, 2, 4, 8, 16), PNG_RGB: (8, 16), PNG_PALETTE: (1, 2, 4, 8), PNG_GREY_ALPHA: (8, 16),
               PNG_RGBA: (8, 16)}
_KNOWN_CRITICAL = (b"IHDR", b"PLTE", b"IDAT", b"IEND")
_TRNS_LENGTH = {PNG_GREY: 2, PNG_RGB: 6}
# Start-of-frame markers (baseline, extended, progressive, lossless; Huffman and arithmetic).
_SOF_MARKERS = frozenset((0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF))
# The coding processes TensorFlow's libjpeg-turbo (2.1) decodes: sequential and progressive, Huffman or arithmetic.
# Lossless and hierarchical JPEGs (which newer libjpeg-turbo builds, Pillow's among them, decode) are not.
DCT_PROCESSES = frozenset((0xC0, 0xC1, 0xC2, 0xC9, 0xCA))
_STANDALONE_MARKERS = frozenset((0x01, 0xD8, *range(0xD0, 0xD8)))
_APP2 = 0xE2
_MPF = b"MPF\x00"            # An APP2 segment that makes a JPEG a multi-picture (MPO) file for Pillow.


@dataclasses.dataclass(frozen=True)
class Header:
    """What the first bytes say, before any decoding."""
    format: str                # "png" or "jpeg"
    width: int
    height: int
    depth: int                 # PNG bit depth; JPEG sample precision
    colour: int                # PNG colour type; JPEG number of components
    multi_picture: bool = False  # JPEG with an MPF segment (Pillow may read it as MPO, another format)
    process: int = 0           # JPEG: the start-of-frame marker (coding process)


@dataclasses.dataclass(frozen=True)
class Flag:
    """The fast path found the file broken (not merely of a mode it does not cover)."""
    message: str


def sniff(data: bytes) -> Union[Header, Flag, None]:
    """The header of a PNG or JPEG; a Flag for a PNG or JPEG whose header is malformed; None for other data."""
    if data[:8] == PNG_SIGNATURE:
        return _sniff_png(data)
    if data[:3] == JPEG_SIGNATURE:
        return _sniff_jpeg(data)
    return None


def _sniff_png(data: bytes) -> Union[Header, Flag]:
    if len(data) < 33 or data[8:16] != b"\x00\x00\x00\x0dIHDR":
        return Flag("PNG does not start with a 13-byte IHDR chunk")
    width, height, depth, colour, compression, filtering, interlace = struct.unpack(">IIBBBBB", data[16:29])
    if zlib.crc32(data[12:29]) != struct.unpack(">I", data[29:33])[0]:
        return Flag("PNG IHDR chunk CRC mismatch")
    if not (0 < width < 2 ** 31 and 0 < height < 2 ** 31) or compression or filtering or interlace > 1:
        return Flag("PNG IHDR has invalid values")
    if depth not in _PNG_DEPTHS.get(colour, ()):
        return Flag(f"PNG IHDR bit depth {depth} is invalid for colour type {colour}")
    return Header("png", width, height, depth, colour)


def _sniff_jpeg(data: bytes) -> Union[Header, Flag]:
    """Walk the marker segments up to the frame header (SOF)."""
    position, size, multi_picture = 2, len(data), False
    while position + 4 <= size:
        if data[position] != 0xFF:
            return Flag(f"JPEG marker expected at byte {position}")
        marker = data[position + 1]
        if marker == 0xFF:                                  # a fill byte
            position += 1
            continue
        if marker in _STANDALONE_MARKERS:
            position += 2
            continue
        if marker in (0xDA, 0xD9):
            return Flag("JPEG scan or end before any frame header")
        length = struct.unpack(">H", data[position + 2:position + 4])[0]
        if marker == _APP2 and data[position + 4:position + 8] == _MPF:
            multi_picture = True
        if marker in _SOF_MARKERS:
            if position + 10 > size:
                break
            precision, height, width, components = struct.unpack(">BHHB", data[position + 4:position + 10])
            if width == 0 or height == 0:
                return Flag("JPEG frame header with a zero side")
            return Header("jpeg", width, height, precision, components, multi_picture, marker)
        position += 2 + length
    return Flag("JPEG without a frame header")


def png_guard(data: bytes) -> Optional[str]:
    """None when the chunk structure of a PNG is one libpng (TensorFlow's decoder) accepts; else why not.

    Walks every chunk up to IEND: lengths inside the file, CRC of every chunk (ancillary ones too: Pillow
    refuses a bad ancillary CRC), IHDR first and once, PLTE/tRNS/IDAT order and sizes, no unknown critical
    chunk, and an IEND without data. Bytes after IEND are ignored, as libpng does. About 0.1 ms per 200 KB.
    """
    if data[:8] != PNG_SIGNATURE:
        return "not a PNG signature"
    size, position = len(data), 8
    colour = depth = palette_entries = None
    idat = 0                     # 0: no IDAT yet, 1: in the IDAT run, 2: after it
    while True:
        if position + 12 > size:
            return "file ends before the IEND chunk"
        length, kind = struct.unpack(">I4s", data[position:position + 8])
        end = position + 12 + length
        if length > 0x7FFFFFFF or end > size:
            return f"{kind!r} chunk runs past the end of the file"
        if not kind.isalpha():
            return f"invalid chunk type {kind!r}"
        if zlib.crc32(data[position + 4:end - 4]) != struct.unpack(">I", data[end - 4:end])[0]:
            return f"{kind.decode('latin-1')} chunk CRC mismatch"
        if position == 8:
            if kind != b"IHDR" or length != 13:
                return "first chunk is not a 13-byte IHDR"
            depth, colour = data[24], data[25]
        else:
            problem = _chunk_problem(kind, length, colour, depth, palette_entries, idat)
            if problem:
                return problem
            if kind == b"IEND":
                return None
            if kind == b"PLTE":
                palette_entries = length // 3
            if kind == b"IDAT":
                idat = 1
            elif idat == 1:
                idat = 2
        position = end


def _chunk_problem(kind: bytes, length: int, colour: int, depth: int, palette_entries: Optional[int],
                   idat: int) -> Optional[str]:
    """Why a chunk after IHDR is out of place or malformed, or None."""
    if kind == b"IHDR":
        return "second IHDR chunk"
    if kind == b"PLTE":
        if palette_entries is not None or idat or length % 3 or not 0 < length <= 768 or colour in (0, 4):
            return "misplaced or malformed PLTE chunk"
        if colour == PNG_PALETTE and length // 3 > 2 ** depth:
            return "PLTE has more entries than the bit depth allows"
    elif kind == b"tRNS":
        if idat or colour in (PNG_GREY_ALPHA, PNG_RGBA):
            return "misplaced tRNS chunk"
        if colour == PNG_PALETTE and (palette_entries is None or length > palette_entries):
            return "tRNS chunk longer than the palette"
        if colour in _TRNS_LENGTH and length != _TRNS_LENGTH[colour]:
            return "tRNS chunk of the wrong length"
    elif kind == b"IDAT":
        if idat == 2:
            return "IDAT chunks are not consecutive"
        if colour == PNG_PALETTE and palette_entries is None:
            return "palette image without a PLTE chunk"
    elif kind == b"IEND":
        if length or idat == 0:
            return "IEND chunk with data, or no IDAT chunk"
    elif kind[:1].isupper() and kind not in _KNOWN_CRITICAL:
        return f"unknown critical chunk {kind!r}"
    return None


def covers_rgb(header: Header) -> bool:
    """An image this path decodes: 8-bit RGB PNG, or 8-bit 3-component JPEG that Pillow also calls JPEG.

    A 3-component JPEG of another coding process is not covered either: see :func:`jpeg_process_flag`.
    """
    if header.format == "png":
        return header.colour == PNG_RGB and header.depth == 8
    return (header.colour == 3 and header.depth == 8 and not header.multi_picture
            and header.process in DCT_PROCESSES)


def jpeg_process_flag(header: Header) -> Optional[Flag]:
    """A Flag for a JPEG whose coding process TensorFlow's decoder does not support (lossless, hierarchical)."""
    if header.format == "jpeg" and header.process not in DCT_PROCESSES:
        return Flag(f"JPEG coding process (SOF marker 0x{header.process:02X}) that TensorFlow's decoder "
                    "does not support")
    return None


def covers_grey(header: Header) -> bool:
    """A mask this path decodes: 8-bit grey PNG."""
    return header.format == "png" and header.colour == PNG_GREY and header.depth == 8


def decode_rgb(data: bytes, header: Header) -> Union[np.ndarray, Flag, None]:
    """HxWx3 uint8 pixels of an image :func:`covers_rgb` covers (a PNG must have passed :func:`png_guard`).

    None when the decoder returns another layout (an RGB PNG with a tRNS chunk decodes to RGBA): not
    covered, Pillow decides. A Flag when the decoder finds the file broken.
    """
    try:
        if header.format == "png":
            pixels = imagecodecs.spng_decode(data)
        else:
            pixels = simplejpeg.decode_jpeg(data, colorspace="RGB", fastdct=False, fastupsample=False, strict=True)
    except Exception as error:      # noqa: BLE001 - any decoder error on hostile bytes is a Flag, never a crash
        return Flag(f"{'libspng' if header.format == 'png' else 'libjpeg-turbo'}: {error}")
    if pixels.dtype != np.uint8 or pixels.shape != (header.height, header.width, 3):
        return None
    return pixels


def decode_grey(data: bytes, header: Header, dtype=np.uint8) -> Union[np.ndarray, Flag, None]:
    """HxW values of a mask :func:`covers_grey` covers (after :func:`png_guard`); None or a Flag as above.
    ``dtype`` np.uint16: a 16-bit grey PNG (masks read through a map, core/masks/mapped.py)."""
    try:
        values = imagecodecs.png_decode(data)
    except Exception as error:      # noqa: BLE001 - as in decode_rgb
        return Flag(f"libpng: {error}")
    if values.ndim == 3 and values.shape[2] == 1:
        values = values[:, :, 0]
    if values.dtype != dtype or values.shape != (header.height, header.width):
        return None                        # a grey PNG with a tRNS chunk decodes to grey + alpha
    return values
