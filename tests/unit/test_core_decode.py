"""The fast decode path (core/decode.py) and its place in the checks (core/images.py), on hand-made files.

Expected pixels come from Pillow or from the arrays the files were made of; expected verdicts are
written out here.
"""

import io
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from beam_pipeline.core import decode, images, masks, reasons
from beam_pipeline.core.masks import plain
from beam_pipeline.core.pixels import Limits
from beam_pipeline.core.reasons import Rejection
from tools.mutations import chunk, chunks

LIMITS = Limits(num_classes=3, ignore_label=255, max_pixels=10_000)
RGB = (np.arange(6 * 5 * 3, dtype=np.uint8).reshape(6, 5, 3) * 7)
MASK = np.array([[0, 0, 1, 1, 2],
                 [0, 2, 2, 1, 255],
                 [0, 0, 1, 1, 2]], dtype=np.uint8)


def png(array, **save):
    out = io.BytesIO()
    Image.fromarray(array).save(out, format="PNG", **save)
    return out.getvalue()


def jpeg(array, **save):
    out = io.BytesIO()
    Image.fromarray(array).save(out, format="JPEG", quality=90, **save)
    return out.getvalue()


def assemble(parts):
    return decode.PNG_SIGNATURE + b"".join(chunk(kind, payload) for kind, payload in parts)


def photo(height=48, width=64, seed=3):
    """A small noisy RGB picture (JPEG coding of flat colours hides IDCT differences)."""
    rng = np.random.default_rng(seed)
    base = np.linspace(0, 255, width, dtype=np.float32)[None, :, None] * np.ones((height, 1, 3), np.float32)
    return np.clip(base + rng.normal(0, 30, (height, width, 3)), 0, 255).astype(np.uint8)


# --------------------------------------------------------------------------
# sniff
# --------------------------------------------------------------------------
def test_sniff_reads_png_and_jpeg_headers_without_decoding():
    assert decode.sniff(png(RGB)) == decode.Header("png", 5, 6, 8, decode.PNG_RGB)
    assert decode.sniff(png(MASK)) == decode.Header("png", 5, 3, 8, decode.PNG_GREY)
    header = decode.sniff(jpeg(photo()))
    assert (header.format, header.width, header.height, header.depth, header.colour, header.process) == \
        ("jpeg", 64, 48, 8, 3, 0xC0)
    assert decode.sniff(jpeg(photo(), progressive=True)).process == 0xC2
    assert decode.sniff(jpeg(photo()[..., 0])).colour == 1


def test_sniff_leaves_other_formats_to_pillow_and_flags_broken_headers():
    gif = io.BytesIO()
    Image.fromarray(MASK).save(gif, format="GIF")
    assert decode.sniff(gif.getvalue()) is None
    data = bytearray(png(RGB))
    data[20] ^= 1                                              # width changed, IHDR CRC no longer matches
    assert decode.sniff(bytes(data)) == decode.Flag("PNG IHDR chunk CRC mismatch")
    assert isinstance(decode.sniff(b"\xff\xd8\xff\xe0" + b"\x00" * 20), decode.Flag)


def test_a_jpeg_with_an_mpf_segment_is_marked_for_pillow():
    data = jpeg(photo())
    app2 = b"\xff\xe2" + struct.pack(">H", 2 + 8) + b"MPF\x00" + b"\x00" * 4
    header = decode.sniff(data[:2] + app2 + data[2:])
    assert header.multi_picture and not decode.covers_rgb(header)


# --------------------------------------------------------------------------
# png_guard
# --------------------------------------------------------------------------
def test_guard_accepts_valid_pngs_and_ignores_bytes_after_iend():
    assert decode.png_guard(png(RGB)) is None
    assert decode.png_guard(png(MASK, optimize=True)) is None
    assert decode.png_guard(png(RGB) + b"trailing bytes") is None


@pytest.mark.parametrize("mutate, message", [
    (lambda parts: parts[:-1], "file ends before the IEND chunk"),
    (lambda parts: [parts[0]] + parts, "second IHDR chunk"),
    (lambda parts: [parts[0], (b"ABCD", b"x")] + parts[1:], "unknown critical chunk b'ABCD'"),
    (lambda parts: parts[:-1] + [(b"IEND", b"x")], "IEND chunk with data, or no IDAT chunk"),
])
def test_guard_flags_structures_libpng_refuses(mutate, message):
    assert decode.png_guard(assemble(mutate(chunks(png(RGB))))) == message


def test_guard_flags_a_bad_crc_in_any_chunk():
    parts = chunks(png(RGB))
    idat = b"".join(chunk(k, p, crc=1 if k == b"IDAT" else None) for k, p in parts)
    assert decode.png_guard(decode.PNG_SIGNATURE + idat) == "IDAT chunk CRC mismatch"
    text = chunk(b"tEXt", b"a\x00b", crc=5)
    data = decode.PNG_SIGNATURE + chunk(*parts[0]) + text + b"".join(chunk(k, p) for k, p in parts[1:])
    assert decode.png_guard(data) == "tEXt chunk CRC mismatch"


def test_guard_flags_a_cut_file():
    data = png(RGB)
    assert decode.png_guard(data[:len(data) - 20]) == "b'IDAT' chunk runs past the end of the file"


# --------------------------------------------------------------------------
# fast decoders
# --------------------------------------------------------------------------
def test_fast_decoders_give_pillows_pixels():
    data = png(RGB)
    assert np.array_equal(decode.decode_rgb(data, decode.sniff(data)), RGB)
    data = png(MASK)
    assert np.array_equal(decode.decode_grey(data, decode.sniff(data)), MASK)
    for save in ({}, {"progressive": True}, {"subsampling": 0}):
        data = jpeg(photo(), **save)
        assert np.array_equal(decode.decode_rgb(data, decode.sniff(data)), np.asarray(Image.open(io.BytesIO(data))))


def test_transparency_is_ignored_in_images_and_left_to_pillow_in_masks():
    out = io.BytesIO()
    Image.fromarray(RGB).save(out, format="PNG", transparency=(0, 7, 14))
    data = out.getvalue()
    assert np.array_equal(decode.decode_rgb(data, decode.sniff(data)), RGB)     # as Pillow's 'RGB' and TF's 3 channels
    out = io.BytesIO()
    Image.fromarray(MASK).save(out, format="PNG", transparency=255)
    data = out.getvalue()
    assert decode.decode_grey(data, decode.sniff(data)) is None                  # libpng gives grey + alpha
    assert masks.check_mask(data, LIMITS) == plain.check_mask_with_pillow(data, LIMITS)


def test_broken_data_is_flagged_by_the_fast_decoders():
    parts = chunks(png(RGB))
    rows = zlib.decompress(b"".join(p for k, p in parts if k == b"IDAT"))
    short = assemble([parts[0], (b"IDAT", zlib.compress(rows[:-16]))] + [p for p in parts if p[0] == b"IEND"])
    assert isinstance(decode.decode_rgb(short, decode.sniff(short)), decode.Flag)
    data = jpeg(photo())
    scan = data.index(b"\xff\xda")
    cut = data[:scan + (len(data) - scan) // 2]              # a JPEG cut in its scan: libjpeg warns
    assert isinstance(decode.decode_rgb(cut, decode.sniff(cut)), decode.Flag)


# --------------------------------------------------------------------------
# in the checks
# --------------------------------------------------------------------------
def test_fast_path_summaries_equal_pillows():
    limits = Limits(num_classes=3, ignore_label=255)
    for data in (png(RGB), jpeg(photo())):
        fast = images.check_image(data, limits)
        slow = images.check_image_with_pillow(data, limits)
        assert fast == slow and fast.stored is None
    fast, slow = masks.check_mask(png(MASK), limits), plain.check_mask_with_pillow(png(MASK), limits)
    assert fast == slow and np.array_equal(fast.values, MASK) and fast.class_pixels == (5, 5, 4)


def test_a_png_that_pillow_decodes_but_libpng_refuses_is_rejected_with_the_flag():
    no_iend = assemble(chunks(png(MASK))[:-1])
    assert not isinstance(plain.check_mask_with_pillow(no_iend, LIMITS), Rejection)    # Pillow alone takes it
    result = masks.check_mask(no_iend, LIMITS)
    assert result.reason == reasons.UNDECODABLE
    assert result.detail.startswith("mask: file ends before the IEND chunk; Pillow decodes it")
    result = images.check_image(assemble(chunks(png(RGB))[:-1]), LIMITS)
    assert result.reason == reasons.UNDECODABLE and "IEND" in result.detail


def test_a_flagged_png_that_pillow_refuses_keeps_pillows_reason():
    data = png(RGB)
    assert images.check_image(data[:60], LIMITS) == images.check_image_with_pillow(data[:60], LIMITS)


def test_a_jpeg_libjpeg_warns_about_is_stored_as_a_png_of_pillows_pixels():
    data = jpeg(photo())
    dqt = data.index(b"\xff\xdb")
    warned = data[:dqt] + b"\x00\x00\x00\x00" + data[dqt:]   # "extraneous bytes before marker": a libjpeg warning
    pillow = np.asarray(Image.open(io.BytesIO(warned)).convert("RGB"))
    result = images.check_image(warned, Limits(num_classes=3))
    assert result.stored_format == "png" and result.stored is not None
    assert np.array_equal(np.asarray(Image.open(io.BytesIO(result.stored))), pillow)
    assert result.channel_sum == tuple(int(v) for v in pillow.reshape(-1, 3).astype(np.int64).sum(axis=0))
    assert images.stored_image(warned) == result.stored       # the writer stores the same bytes


def test_a_lossless_jpeg_is_not_stored_as_read():
    data = bytearray(jpeg(photo()))
    sof = data.index(b"\xff\xc0")
    data[sof + 1] = 0xC3                                       # claims the lossless process
    header = decode.sniff(bytes(data))
    assert not decode.covers_rgb(header)
    assert "SOF marker 0xC3" in decode.jpeg_process_flag(header).message
    result = images.check_image(bytes(data), Limits(num_classes=3))
    assert isinstance(result, Rejection) or result.stored is not None


def test_palette_transparency_longer_than_the_palette_is_rejected_not_raised():
    image = Image.frombytes("P", (5, 3), MASK.tobytes())
    image.putpalette([v for i in range(256) for v in (i, 255 - i, (7 * i) % 256)])
    parts = chunks(_png_image(image))
    long_trns = [parts[0]] + [p for p in parts[1:] if p[0] == b"PLTE"] + [(b"tRNS", b"\x80" * 300)] + \
        [p for p in parts[1:] if p[0] != b"PLTE"]
    data = assemble(long_trns)
    result = images.check_image(data, LIMITS)
    assert isinstance(result, Rejection) and result.reason == reasons.UNDECODABLE
    assert isinstance(images.stored_image(data), Rejection)
    image = Image.open(io.BytesIO(data))
    image.load()
    assert isinstance(images.to_rgb(image), Rejection)          # Pillow's convert raises; to_rgb does not


def _png_image(image):
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()
