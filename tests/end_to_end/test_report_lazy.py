"""The gallery decodes lazily: on the sample corpus's real shards, the picks equal those of an eager picker
that decodes every example it wants, and only the final picks are decoded, once per record.

The records are read back with tf.data and parsed as tf.train.Examples (not with the report's reader); the
eager reference decodes with Pillow here, as the report did before it decoded lazily.
"""

import io

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from beam_pipeline.core import features
from beam_pipeline.report import ReportLimits, data, read
from conftest import dataset_dir
from test_report import load


def parsed(raw: bytes) -> dict:
    f = tf.train.Example.FromString(raw).features.feature
    ints = lambda name: list(f[name].int64_list.value)   # noqa: E731
    return {"source_id": f[features.IMAGE_SOURCE_ID].bytes_list.value[0].decode(),
            "height": ints(features.IMAGE_HEIGHT)[0], "width": ints(features.IMAGE_WIDTH)[0],
            "copy": (ints(features.REPEAT_COPY) or [0])[0], "image": f[features.IMAGE_ENCODED].bytes_list.value[0],
            "mask": f[features.MASK_ENCODED].bytes_list.value[0], "pixels": ints(features.CLASS_PIXELS),
            "ignore": ints(features.IGNORE_PIXELS)[0], "label": None, "example": raw}


@pytest.fixture(scope="module")
def shard_set(segmentation_run):
    """(manifest, limits, [(split, shard path, record)]): the originals of the shards the report reads."""
    out = segmentation_run[0]                          # the output folder: the manifest's paths are below it
    manifest, _ = load(dataset_dir(out))
    limits = ReportLimits(gallery_per_class=3, max_shards=3)   # small quotas, so that picks get displaced
    sample, _ = read.sample_shards(str(out), manifest, limits)
    split_of = {s["path"]: split for split, entry in manifest["splits"].items() for s in entry["shards"]}
    records = [(split_of[path], path, parsed(raw.numpy())) for path in sample.shards
               for raw in tf.data.TFRecordDataset(str(out / path))]
    return out, manifest, limits, [r for r in records if r[2]["copy"] == 0]


def eager_reference(records, quota, px):
    """The picks as chosen before: every wanted example decoded on the spot (Pillow, LANCZOS thumbnail)."""
    picker, decodes = data.GalleryPicker(quota), 0
    for split, path, record in records:
        thumb = None
        shares = data.mask_shares(record["pixels"], record["ignore"])
        for c, share in enumerate(shares):
            if record["pixels"][c] > 0 and picker.wants(c, share, record["source_id"]):
                if thumb is None:
                    decodes += 1
                    with Image.open(io.BytesIO(record["image"])) as image:
                        image = image.convert("RGB")
                        image.thumbnail((px, px), Image.Resampling.LANCZOS)
                        thumb = np.asarray(image)
                    with Image.open(io.BytesIO(record["mask"])) as mask:
                        small = np.asarray(mask.resize((thumb.shape[1], thumb.shape[0]), Image.Resampling.NEAREST))
                picker.add(data.GalleryItem(c, record["source_id"], split, path, record["height"],
                                            record["width"], share, thumb, small))
    return picker.result(), decodes


def counted_thumbnails(monkeypatch):
    calls = []
    real = read._thumbnail

    def thumbnail(encoded, px):
        calls.append(px)
        return real(encoded, px)
    monkeypatch.setattr(read, "_thumbnail", thumbnail)
    return calls


def assert_same_picks(lazy, eager):
    assert {c: [(i.source_id, i.split, i.shard, i.share) for i in items] for c, items in lazy.items()} == \
        {c: [(i.source_id, i.split, i.shard, i.share) for i in items] for c, items in eager.items()}
    for c, items in lazy.items():
        for mine, theirs in zip(items, eager[c]):
            assert mine.source is None and mine.image.shape == theirs.image.shape
            assert np.abs(mine.image.astype(int) - theirs.image).mean() < 2.0    # resampling may differ a little
            assert np.array_equal(mine.mask, theirs.mask)


@pytest.mark.parametrize("budget", [256 << 20, 0])
def test_lazy_gallery_picks_as_the_eager_one_and_decodes_only_its_picks(shard_set, monkeypatch, budget):
    """With room for the encoded bytes, one decode per distinct pick; with none, each held record is decoded
    as soon as it is held (memory bounded by the thumbnails), and the picks are still the same."""
    _, manifest, limits, records = shard_set
    quota = data.per_class_quota(manifest["num_classes"], limits)
    px = data.thumbnail_size(manifest["num_classes"], limits)
    eager, eager_decodes = eager_reference(records, quota, px)
    calls = counted_thumbnails(monkeypatch)
    gallery = read.LazyGallery(quota, px, "segmentation", max_pending_bytes=budget)
    held_ever = set()
    for split, path, record in records:
        gallery.offer(record, split, path)
        held = {id(i.source): i.source for i in gallery._picker.held()}
        held_ever |= {i.source_id for i in gallery._picker.held()}
        undecoded = sum(len(s.example) for s in held.values() if s.decoded is None)
        assert gallery.pending == undecoded <= budget
    lazy = gallery.result()
    assert_same_picks(lazy, eager)
    picks = {i.source_id for items in lazy.values() for i in items}
    if budget:
        assert len(calls) == len(picks)
        assert eager_decodes > len(picks)        # the eager picker decoded examples it later displaced
    else:
        assert len(calls) == len(held_ever)


def test_report_decodes_one_thumbnail_per_distinct_pick(shard_set, monkeypatch):
    out, manifest, limits, records = shard_set
    calls = counted_thumbnails(monkeypatch)
    _, gallery = read.sample_shards(str(out), manifest, limits)
    eager, _ = eager_reference(records, data.per_class_quota(manifest["num_classes"], limits),
                               data.thumbnail_size(manifest["num_classes"], limits))
    assert_same_picks(gallery, eager)
    assert len(calls) == len({i.source_id for items in gallery.values() for i in items}) > 0
