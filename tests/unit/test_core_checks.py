"""Unit tests of the pair checks on tiny hand-made images."""

import io
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from beam_pipeline.core import images, masks, reasons
from beam_pipeline.core.pixels import Limits
from beam_pipeline.core.reasons import Rejection
from beam_pipeline.core.records import PairRef
from beam_pipeline.core.validation import validate_classification, validate_segmentation

LIMITS = Limits(num_classes=3, ignore_label=255, max_pixels=10_000)
REF = PairRef(key="k", source_id="a.png", image="/a.png", mask="/a_mask.png")


def encode(array, fmt="PNG", mode=None, **save):
    out = io.BytesIO()
    image = Image.fromarray(array, mode) if mode else Image.fromarray(array)
    image.save(out, format=fmt, **save)
    return out.getvalue()


def rgb(h=4, w=4):
    return (np.arange(h * w * 3, dtype=np.uint8).reshape(h, w, 3) * 7)


MASK = np.array([[0, 0, 1, 1],
                 [0, 2, 2, 1],
                 [255, 2, 2, 1],
                 [0, 0, 255, 1]], dtype=np.uint8)


def png_header_only(width, height):
    """A PNG whose header claims width x height, with one empty IDAT: a decompression bomb's header."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"")) + chunk(b"IEND", b"")


def test_grey_mask_histogram_and_original_bytes_kept():
    result = masks.check_mask(encode(MASK), LIMITS)
    assert result.class_pixels == (5, 5, 4)
    assert result.ignore_pixels == 2
    assert result.stored is None


def test_palette_mask_uses_indices_not_colours():
    image = Image.frombytes("P", (4, 4), MASK.tobytes())
    palette = [0] * 768
    palette[3:6] = [200, 10, 10]      # index 1 is drawn red
    palette[6:9] = [10, 200, 10]      # index 2 is drawn green
    image.putpalette(palette)
    out = io.BytesIO()
    image.save(out, format="PNG")
    result = masks.check_mask(out.getvalue(), LIMITS)
    assert result.class_pixels == (5, 5, 4)
    assert np.array_equal(np.asarray(Image.open(io.BytesIO(result.stored))), MASK)
    assert Image.open(io.BytesIO(result.stored)).mode == "L"


def test_sixteen_bit_mask_accepted_when_values_fit():
    data = encode(MASK.astype(np.uint16))
    result = masks.check_mask(data, LIMITS)
    assert result.class_pixels == (5, 5, 4)
    assert np.array_equal(np.asarray(Image.open(io.BytesIO(result.stored))), MASK)


def test_sixteen_bit_mask_with_large_value_rejected():
    big = MASK.astype(np.uint16)
    big[0, 0] = 1000
    result = masks.check_mask(encode(big), LIMITS)
    assert result.reason == reasons.MASK_VALUE_OUT_OF_RANGE
    assert "1000" in result.detail


def test_out_of_range_mask_value_named_in_detail():
    bad = MASK.copy()
    bad[1, 1] = 7
    result = masks.check_mask(encode(bad), LIMITS)
    assert result == Rejection(reasons.MASK_VALUE_OUT_OF_RANGE, "mask has values [7] outside 0..2 or ignore label 255")


def test_ignore_label_none_makes_255_invalid():
    result = masks.check_mask(encode(MASK), Limits(num_classes=3, ignore_label=None))
    assert result.reason == reasons.MASK_VALUE_OUT_OF_RANGE


def test_rgb_mask_rejected():
    result = masks.check_mask(encode(rgb()), LIMITS)
    assert result.reason == reasons.MASK_NOT_SINGLE_CHANNEL


def test_jpeg_mask_rejected_by_content():
    result = masks.check_mask(encode(MASK, "JPEG"), LIMITS)
    assert result.reason == reasons.FORMAT_NOT_ALLOWED


@pytest.mark.parametrize("data,reason", [
    (b"", reasons.EMPTY_FILE),
    (b"this is not an image", reasons.UNDECODABLE),
    (png_header_only(50_000, 50_000), reasons.TOO_MANY_PIXELS),
    (png_header_only(200, 200), reasons.TOO_MANY_PIXELS),   # 40,000 > the 10,000 limit here
])
def test_image_rejections(data, reason):
    assert images.check_image(data, LIMITS).reason == reason


def test_truncated_jpeg_and_png():
    big = np.random.default_rng(0).integers(0, 255, (64, 64, 3), dtype=np.uint8)
    limits = Limits(num_classes=3)
    jpeg = encode(big, "JPEG", quality=95)
    assert images.check_image(jpeg[: len(jpeg) // 2], limits).reason == reasons.TRUNCATED
    png = encode(big)
    assert images.check_image(png[: len(png) // 2], limits).reason in (reasons.TRUNCATED, reasons.UNDECODABLE)


def test_gif_is_not_allowed_whatever_its_name():
    out = io.BytesIO()
    Image.fromarray(MASK).save(out, format="GIF")
    result = images.check_image(out.getvalue(), LIMITS)
    assert result.reason == reasons.FORMAT_NOT_ALLOWED
    assert "gif" in result.detail


def test_rgb_image_keeps_original_bytes():
    result = images.check_image(encode(rgb(), "JPEG"), LIMITS)
    assert (result.height, result.width, result.stored_format, result.stored) == (4, 4, "jpeg", None)


def test_a_grey_png_becomes_rgb_png():
    grey = np.array([[0, 50], [100, 250]], dtype=np.uint8)
    result = images.check_image(encode(grey, "PNG"), LIMITS)
    assert result.stored_format == "png"
    decoded = np.asarray(Image.open(io.BytesIO(result.stored)))
    assert decoded.shape == (2, 2, 3)
    assert np.array_equal(decoded[..., 0], decoded[..., 2])


def test_a_grey_jpeg_keeps_its_bytes_and_the_trainers_decoder_reads_the_pixels_its_sums_were_taken_on():
    """Issue 42: greyscale JPEGs grew 4.2x as 3-channel PNGs. Kept as they are, TensorFlow's decode_jpeg with
    channels=3 (the trainer's) gives the grey channel three times, as the conversion rule does."""
    import tensorflow as tf
    grey = np.random.default_rng(3).integers(0, 256, (24, 40), dtype=np.uint8)
    data = encode(grey, "JPEG")
    result = images.check_image(data, LIMITS)
    assert (result.stored_format, result.stored) == ("jpeg", None)
    decoded = tf.io.decode_jpeg(data, channels=3, dct_method="INTEGER_ACCURATE").numpy().astype(np.int64)
    assert result.channel_sum == tuple(int(v) for v in decoded.sum(axis=(0, 1)))
    assert result.channel_sum_squares == tuple(int(v) for v in (decoded * decoded).sum(axis=(0, 1)))
    assert np.array_equal(decoded[..., 0], decoded[..., 2])


def test_rgba_image_drops_alpha_keeping_colours():
    rgba = np.zeros((2, 2, 4), dtype=np.uint8)
    rgba[..., 0] = 200
    rgba[..., 3] = [[0, 255], [128, 255]]
    result = images.check_image(encode(rgba), LIMITS)
    decoded = np.asarray(Image.open(io.BytesIO(result.stored)))
    assert decoded.shape == (2, 2, 3)
    assert (decoded[..., 0] == 200).all()


@pytest.mark.parametrize("mode", ["L", "RGBA", "P"])
def test_the_writer_converts_images_as_validation_stored_them(mode):
    source = Image.fromarray(rgb()).convert(mode)
    data = encode(np.asarray(source), mode=mode) if mode != "P" else _palette_png(source)
    stored = images.stored_image(data)
    decoded = np.asarray(Image.open(io.BytesIO(stored)))
    assert decoded.shape == (4, 4, 3)
    assert np.array_equal(decoded, np.asarray(Image.open(io.BytesIO(data)).convert("RGB")))


def _palette_png(image):
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


@pytest.mark.parametrize("array,mode", [(MASK.astype(np.uint16), None), (MASK > 1, "1")])
def test_the_writer_converts_masks_to_8_bit_grey(array, mode):
    data = encode(array.astype(np.uint8) * 255 if mode == "1" else array, mode="L" if mode == "1" else None)
    if mode == "1":
        image = Image.open(io.BytesIO(data)).convert("1")
        data = _palette_png(image)
    decoded = np.asarray(Image.open(io.BytesIO(masks.stored_mask(data))))
    assert decoded.dtype == np.uint8 and decoded.ndim == 2
    expected = MASK if mode is None else (MASK > 1).astype(np.uint8)
    assert np.array_equal(decoded, expected)


def test_the_writer_reports_bytes_it_cannot_decode():
    assert images.stored_image(b"not an image").reason == reasons.UNDECODABLE
    assert masks.stored_mask(b"").reason == reasons.EMPTY_FILE


def test_validate_segmentation_size_mismatch_and_success():
    small_mask = encode(MASK[:2, :2])
    assert validate_segmentation(REF, encode(rgb()), small_mask, LIMITS).reason == reasons.SIZE_MISMATCH
    pair = validate_segmentation(REF, encode(rgb()), encode(MASK), LIMITS)
    assert (pair.height, pair.width, pair.class_pixels, pair.ignore_pixels) == (4, 4, (5, 5, 4), 2)
    assert not pair.image_converted and not pair.mask_converted


@pytest.mark.parametrize("label,expected", [("cat", 0), ("dog", 1), ("2", 2), ("3", reasons.UNKNOWN_LABEL),
                                            ("cow", reasons.UNKNOWN_LABEL), (None, reasons.UNKNOWN_LABEL)])
def test_classification_labels(label, expected):
    ref = PairRef(key="k", source_id="a.jpg", image="/a.jpg", label=label)
    result = validate_classification(ref, encode(rgb(), "JPEG"), LIMITS, ("cat", "dog", "bird"))
    assert (result.label if expected in (0, 1, 2) else result.reason) == expected
