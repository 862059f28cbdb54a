"""The writer's side of one pair (pairs.record) on real files: what it reads again and what it stores."""

import dataclasses
import io
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from beam_pipeline.core import features, reasons
from beam_pipeline.core.pixels import Limits
from beam_pipeline.core.reasons import Rejection
from beam_pipeline.core.records import PairRef, ValidPair
from beam_pipeline.core.rerun.verdicts import Verdict
from beam_pipeline.io.cache import spill as spill_store, verdicts as verdict_store
from beam_pipeline.stages import pairs
from beam_pipeline.stages.specs import CheckSpec

SPEC = CheckSpec(task="segmentation", limits=Limits(num_classes=4, ignore_label=255, max_pixels=1_000_000))
PALETTE = [0, 0, 0, 128, 0, 0, 0, 128, 0, 128, 128, 0] + [0] * (256 * 3 - 12)


def _noise(shape, seed):
    return np.random.default_rng(seed).integers(0, 256, size=shape, dtype=np.uint8)


def _save(image: Image.Image, path) -> None:
    image.save(path, format="PNG")


def _mask_indices(h, w):
    indices = (np.arange(h)[:, None] // 7 + np.arange(w)[None, :] // 9) % 4
    return indices.astype(np.uint8)


def _palette_mask(h, w) -> Image.Image:
    mask = Image.fromarray(_mask_indices(h, w), mode="P")
    mask.putpalette(PALETTE)
    return mask


def _stored(serialized: bytes, key: str) -> bytes:
    example = tf.train.Example.FromString(serialized)
    return example.features.feature[key].bytes_list.value[0]


def _validated(tmp_path, image: Image.Image, mask: Image.Image) -> ValidPair:
    _save(image, tmp_path / "a.png")
    _save(mask, tmp_path / "a_mask.png")
    ref = PairRef(key="a", source_id="a.png", image=str(tmp_path / "a.png"), mask=str(tmp_path / "a_mask.png"))
    pair, _ = pairs.check(ref, SPEC)
    assert isinstance(pair, ValidPair), pair
    return pair


def test_a_palette_mask_is_converted_again_from_its_source_by_the_writer(tmp_path):
    """No file's bytes cross a shuffle: the writer reads the palette mask again and stores its class ids."""
    pair = _validated(tmp_path, Image.fromarray(_noise((60, 80, 3), 1)), _palette_mask(60, 80))
    assert pair.mask_converted
    serialized = pairs.record(pair, SPEC)
    assert isinstance(serialized, bytes)
    stored = _stored(serialized, features.MASK_ENCODED)
    assert len(stored) == pair.mask_stored_bytes                  # what validation converted it to
    assert np.array_equal(np.asarray(Image.open(io.BytesIO(stored))), _mask_indices(60, 80))
    assert np.array_equal(tf.io.decode_png(stored, channels=1).numpy()[..., 0], _mask_indices(60, 80))
    (tmp_path / "a_mask.png").unlink()
    gone = pairs.record(pair, SPEC)
    assert isinstance(gone, Rejection) and gone.reason == reasons.CHANGED_SINCE_VALIDATION


def test_files_stored_as_read_are_read_again_and_checked(tmp_path):
    image = Image.fromarray(_noise((60, 80, 3), 2))
    pair = _validated(tmp_path, image, Image.fromarray(_mask_indices(60, 80), mode="L"))
    assert not pair.mask_converted and not pair.image_converted
    serialized = pairs.record(pair, SPEC)
    assert _stored(serialized, features.IMAGE_ENCODED) == (tmp_path / "a.png").read_bytes()
    assert _stored(serialized, features.MASK_ENCODED) == (tmp_path / "a_mask.png").read_bytes()
    _save(Image.fromarray(_noise((60, 80, 3), 3)), tmp_path / "a.png")   # changed after validation
    changed = pairs.record(pair, SPEC)
    assert isinstance(changed, Rejection) and changed.reason == reasons.CHANGED_SINCE_VALIDATION


@pytest.mark.parametrize("side", [60, 200])
def test_a_converted_image_is_converted_again_from_its_source(tmp_path, side):
    grey = Image.fromarray(_noise((side, side), 4), mode="L")          # stored as RGB PNG: 3 noisy channels
    pair = _validated(tmp_path, grey, Image.fromarray(_mask_indices(side, side), mode="L"))
    assert pair.image_converted
    expected = np.repeat(np.asarray(grey)[:, :, None], 3, axis=2)
    stored = _stored(pairs.record(pair, SPEC), features.IMAGE_ENCODED)
    assert len(stored) == pair.image_stored_bytes
    assert np.array_equal(tf.io.decode_png(stored, channels=3).numpy(), expected)
    (tmp_path / "a.png").unlink()
    after = pairs.record(pair, SPEC)
    assert isinstance(after, Rejection) and after.reason == reasons.CHANGED_SINCE_VALIDATION


# --------------------------------------------------------------------------
# read_file: the bytes, whatever the size against the reads it asks for
# --------------------------------------------------------------------------
@pytest.mark.parametrize("size", [1, pairs._FIRST_READ - 1, pairs._FIRST_READ, pairs._FIRST_READ + 1,
                                  3 * pairs._FIRST_READ, pairs._CHUNK + 17, 3 * pairs._CHUNK])
def test_read_file_returns_every_byte_whatever_its_size(tmp_path, size):
    data = np.random.default_rng(size).integers(0, 256, size=size, dtype=np.uint8).tobytes()
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    assert pairs.read_file(str(path), 10 * pairs._CHUNK, "image") == data
    # the writer's size hint: exact, too small (the file grew since validation) or too large
    for hint in (size, max(1, size // 3), size + 1000):
        assert pairs.read_file(str(path), 10 * pairs._CHUNK, "image", hint) == data


@pytest.mark.parametrize("size,limit,hint", [(1000, 999, 0), (1000, 999, 1000), (pairs._FIRST_READ + 1,
                                             pairs._FIRST_READ, 0), (pairs._CHUNK * 2, pairs._CHUNK + 5, 0)])
def test_read_file_refuses_a_file_over_the_limit(tmp_path, size, limit, hint):
    path = tmp_path / "f.bin"
    path.write_bytes(b"x" * size)
    result = pairs.read_file(str(path), limit, "mask", hint)
    assert isinstance(result, Rejection) and result.reason == reasons.FILE_TOO_LARGE


def test_read_file_at_exactly_the_limit_is_read(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"y" * pairs._FIRST_READ)
    assert pairs.read_file(str(path), pairs._FIRST_READ, "image") == b"y" * pairs._FIRST_READ


# --------------------------------------------------------------------------
# validation's spill: the writer copies the stored bytes validation kept
# --------------------------------------------------------------------------
def _spilled(tmp_path, image: Image.Image, mask: Image.Image, run_id="20261204T000000Z-00000001"):
    """A pair validated as ValidatePairs does with a cache: checked, its stored bytes in a part's spill."""
    _save(image, tmp_path / "a.png")
    _save(mask, tmp_path / "a_mask.png")
    ref = PairRef(key="a", source_id="a.png", image=str(tmp_path / "a.png"), mask=str(tmp_path / "a_mask.png"))
    image_bytes, mask_bytes = pairs.read_files(ref, SPEC)
    checked = pairs.checked_bytes(ref, SPEC, image_bytes, mask_bytes)
    spilled = spill_store.BucketSpill(str(tmp_path / "cache"), 3, run_id)
    writer = verdict_store.PartWriter(str(tmp_path / "cache"), 3, run_id, before_commit=spilled.seal)
    other = dataclasses.replace(checked.pair, ref=dataclasses.replace(ref, key="b", source_id="b.png"))
    spilled.append(other, b"another pair's bytes before it", b"")
    pair = dataclasses.replace(checked.pair, spill=spilled.append(checked.pair, *pairs.stored_files(checked, mask_bytes,
                                                                                                     SPEC)))
    writer.add(Verdict(key="a", label=None, image_version=None, mask_version=None, image_sha256="",
                       mask_sha256="", valid=b"v"))
    writer.close()
    return pair


@pytest.mark.parametrize("image,mask", [
    (Image.fromarray(_noise((60, 80), 5), mode="L"), _palette_mask(60, 80)),            # both converted
    (Image.fromarray(_noise((60, 80, 3), 6)), Image.fromarray(_mask_indices(60, 80), mode="L")),   # as read
])
def test_a_spilled_pair_is_written_from_the_spill_with_the_bytes_the_sources_give(tmp_path, image, mask):
    pair = _spilled(tmp_path, image, mask)
    from_sources = pairs.record(dataclasses.replace(pair, spill=()), SPEC)
    assert isinstance(from_sources, bytes)
    assert pairs.record(pair, SPEC) == from_sources
    # a repeat copy, and the same pair under another source id, are encoded again around the spilled bytes
    copy = dataclasses.replace(pair, copy=2)
    moved = dataclasses.replace(pair, ref=dataclasses.replace(pair.ref, source_id="sub/a.png"))
    expected = [pairs.record(dataclasses.replace(p, spill=()), SPEC) for p in (copy, moved)]
    assert expected[0] != from_sources and expected[1] != from_sources
    (tmp_path / "a.png").rename(tmp_path / "moved.png")         # the writer no longer reads the sources
    assert pairs.record(pair, SPEC) == from_sources
    assert [pairs.record(copy, SPEC), pairs.record(moved, SPEC)] == expected
    assert isinstance(pairs.record(dataclasses.replace(pair, spill=()), SPEC), Rejection)


def test_a_damaged_or_collected_spill_sends_the_writer_to_the_sources(tmp_path):
    pair = _spilled(tmp_path, Image.fromarray(_noise((60, 80, 3), 7)), _palette_mask(60, 80))
    expected = pairs.record(dataclasses.replace(pair, spill=()), SPEC)
    path, offset = pair.spill[0], pair.spill[1]
    data = bytearray(Path(path).read_bytes())
    data[offset + 100] ^= 0xFF                                  # one byte of the entry flipped
    Path(path).write_bytes(bytes(data))
    assert pairs.record(pair, SPEC) == expected
    Path(path).unlink()                                         # collected by a commit
    assert pairs.record(pair, SPEC) == expected
    (tmp_path / "a_mask.png").unlink()                          # then the sources are what counts
    after = pairs.record(pair, SPEC)
    assert isinstance(after, Rejection) and after.reason == reasons.CHANGED_SINCE_VALIDATION
