"""The report's pure parts on hand-made values: shard choice, gallery picks, funnel, rejects, overlay, TFRecords.

The last test renders a page for a large made-up corpus to check that its size stays bounded.
"""

import io
import itertools

import numpy as np
import pytest

from beam_pipeline.core.example import frame_record
from beam_pipeline.report import data
from beam_pipeline.report.images import overlay, palette
from beam_pipeline.report.tfrecord import CorruptRecord, read_records


def shard(path, nbytes, class_images, split="train"):
    return data.ShardRef(split, path, sum(class_images), nbytes, tuple(class_images))


def test_choose_shards_covers_the_rarest_class_first():
    shards = [shard("a", 100, [9, 0, 0]), shard("b", 100, [5, 0, 1]), shard("c", 50, [3, 0, 4]),
              shard("d", 80, [2, 6, 0])]
    # Class 2 is rarest: c holds most of it, then b; class 1 needs d; class 0 is covered by then.
    chosen = data.choose_shards(shards, order=[2, 1, 0], per_class=5, max_shards=8, max_bytes=1000)
    assert [s.path for s in chosen] == ["c", "b", "d"]


def test_choose_shards_keeps_to_the_budgets():
    shards = [shard("a", 100, [1, 1]), shard("b", 100, [1, 1]), shard("c", 100, [1, 1])]
    assert len(data.choose_shards(shards, [0, 1], per_class=6, max_shards=2, max_bytes=10_000)) == 2
    assert len(data.choose_shards(shards, [0, 1], per_class=6, max_shards=8, max_bytes=250)) == 2
    # The first shard is taken even when it alone is over the byte budget.
    assert [s.path for s in data.choose_shards(shards, [0, 1], 6, 8, max_bytes=10)] == ["a"]


def test_choose_shards_with_no_class_present_still_samples_one():
    assert [s.path for s in data.choose_shards([shard("x", 5, [0]), shard("y", 3, [0])], [0], 6, 8, 100)] == ["y"]


def item(class_id, source_id, share):
    return data.GalleryItem(class_id, source_id, "train", "s", 4, 4, share, np.zeros((2, 2, 3), np.uint8))


@pytest.mark.parametrize("order", list(itertools.permutations(range(5)))[::17])
def test_gallery_picker_keeps_the_most_visible_whatever_the_order(order):
    offers = [("a", 0.1), ("b", 0.5), ("c", 0.3), ("d", 0.5), ("e", 0.05)]
    picker = data.GalleryPicker(k=3)
    for i in order:
        source_id, share = offers[i]
        if picker.wants(7, share, source_id):
            picker.add(item(7, source_id, share))
    kept = picker.result()[7]
    assert [x.share for x in kept] == [0.5, 0.5, 0.3]
    assert {x.source_id for x in kept} == {"b", "d", "c"}


def test_gallery_picker_refuses_the_same_image_twice():
    picker = data.GalleryPicker(k=3)
    picker.add(item(1, "a", 0.2))
    assert not picker.wants(1, 0.9, "a")
    assert picker.wants(2, 0.0, "a")


def test_quota_per_class_shrinks_with_many_classes():
    limits = data.ReportLimits(gallery_per_class=6, max_gallery_items=600)
    assert data.per_class_quota(8, limits) == 6
    assert data.per_class_quota(101, limits) == 5
    assert data.per_class_quota(1000, limits) == 1


MANIFEST = {
    "num_classes": 3,
    "counts": {"discovered": 20, "filtered_out": {"total": 3, "by_reason": {"include_glob": 3}},
               "rejected": {"total": 4, "by_reason": {"truncated": 1, "size_mismatch": 3}},
               "duplicates": 2, "written": 11, "records_written": 13},
    "splits": {"train": {"num_examples": 13, "num_images": 11, "class_images": [13, 4, 2],
                         "class_pixels": [900, 90, 10]}},
    "balance": {"before": {"class_images": [11, 3, 1], "class_image_share": [1.0, 3 / 11, 1 / 11],
                           "class_pixel_share": [0.9, 0.09, 0.01]},
                "after": {"class_image_share": [1.0, 4 / 13, 2 / 13], "class_pixel_share": [0.85, 0.1, 0.05]}},
}


def test_funnel_rows_add_up_to_discovered():
    rows = data.funnel(MANIFEST)
    assert rows == [("discovered", "", 20), ("filtered out", "", 3), ("filtered out", "include_glob", 3),
                    ("rejected", "", 4), ("rejected", "size_mismatch", 3), ("rejected", "truncated", 1),
                    ("duplicates", "", 2), ("written", "", 11)]
    assert sum(n for stage, reason, n in rows if not reason and stage != "discovered") == 20


def test_rarest_first_uses_presence_before_balancing():
    assert data.rarest_first(MANIFEST) == [2, 1, 0]


def test_class_distributions_before_and_after():
    images = data.class_distributions(MANIFEST, "images")
    assert list(images) == ["train before balancing", "train after balancing"]
    assert images["train after balancing"] == [1.0, 4 / 13, 2 / 13]
    assert data.class_distributions(MANIFEST, "pixels")["train before balancing"] == [0.9, 0.09, 0.01]


def test_reject_examples_are_capped_per_reason_and_know_when_done():
    expected = data.expected_rejects(MANIFEST)
    assert expected == {("rejected", "truncated"): 1, ("rejected", "size_mismatch"): 3,
                        ("duplicate", "duplicate"): 2}
    examples = data.RejectExamples(2, expected)
    rows = [{"status": "rejected", "reason": "size_mismatch", "image": f"m{i}"} for i in range(3)]
    rows += [{"status": "rejected", "reason": "truncated", "image": "t"},
             {"status": "duplicate", "reason": "duplicate", "image": "d0"}]
    for row in rows:
        examples.add(row)
    assert [r["image"] for r in examples.rows[("rejected", "size_mismatch")]] == ["m0", "m1"]
    assert not examples.full()   # one more duplicate is expected
    examples.add({"status": "duplicate", "reason": "duplicate", "image": "d1"})
    assert examples.full()


def test_chart_classes_and_evenly_spaced():
    assert data.chart_classes(5, [4, 3, 2, 1, 0], cap=10) == [0, 1, 2, 3, 4]
    assert data.chart_classes(6, [5, 0, 1, 2, 3, 4], cap=4) == [0, 3, 4, 5]
    assert data.evenly_spaced(list(range(10)), 4) == [0, 3, 6, 9]


def test_overlay_blends_class_colours_and_outlines_them():
    image = np.full((2, 4, 3), 100, np.uint8)
    mask = np.array([[0, 0, 1, 1], [0, 0, 1, 1]], np.uint8)
    out = overlay(image, mask, [(200, 0, 0), (0, 0, 200)], ignore_label=255)
    assert out[0, 0].tolist() == [150, 50, 50]        # inside class 0: half its colour
    assert out[0, 1].tolist() == [200, 0, 0]          # class 0 next to class 1: the outline, opaque
    assert out[0, 3].tolist() == [50, 50, 150]        # inside class 1
    assert (out[0] == out[1]).all()


def test_overlay_whitens_ignore_and_leaves_unknown_values():
    image = np.full((2, 2, 3), 100, np.uint8)
    assert overlay(image, np.full((2, 2), 255, np.uint8), [(200, 0, 0)], 255).tolist() == \
        np.full((2, 2, 3), 178).tolist()                # (100 + 255) / 2, rounded
    assert overlay(image, np.full((2, 2), 7, np.uint8), [(200, 0, 0)], 255).tolist() == image.tolist()


@pytest.mark.parametrize("n", [3, 10, 101])
def test_palette_gives_distinct_colours(n):
    colours = palette(n)
    assert len(colours) == n == len(set(colours))


def test_tfrecord_reader_reads_what_the_pipeline_writes_and_checks_crcs():
    records = [b"", b"a", b"x" * 1000]
    blob = b"".join(frame_record(r) for r in records)
    assert list(read_records(io.BytesIO(blob))) == records
    assert list(read_records(io.BytesIO(blob), max_bytes=500)) == [b"", b"a"]
    damaged = bytearray(blob)
    damaged[-10] ^= 1
    with pytest.raises(CorruptRecord, match="data checksum"):
        list(read_records(io.BytesIO(bytes(damaged))))
    with pytest.raises(CorruptRecord, match="ends inside"):
        list(read_records(io.BytesIO(blob[:-3])))


def test_size_quantiles_count_each_image():
    import collections
    sizes = collections.Counter({(100, 50): 3, (200, 100): 1, (400, 300): 1})
    quantiles = data.size_quantiles(sizes, (0.0, 0.5, 1.0))
    assert quantiles["width (px)"] == [100, 100, 400]
    assert quantiles["height (px)"] == [50, 50, 300]
    assert quantiles["megapixels"] == [0.005, 0.005, 0.12]


@pytest.mark.parametrize("task,classes", [("classification", 1000), ("segmentation", 250)])
def test_page_stays_bounded_for_a_large_corpus(task, classes):
    """Many classes and 5,000 shards, with a gallery of noise (JPEG's worst case): still a few MB."""
    import collections
    import time

    from beam_pipeline.report.render import render_html

    rng = np.random.default_rng(0)
    shards = 5000
    class_images = rng.integers(0, 50, size=(shards, classes))
    split = {"num_examples": 500_000, "num_images": 400_000, "num_bytes": 5000 << 27,
             "class_images": class_images.sum(0).tolist(), "class_pixels": (class_images.sum(0) * 1000).tolist(),
             "ignore_pixels": 0, "shards": [{"path": f"train-{i:05d}-of-{shards:05d}.tfrecord", "records": 100,
                                             "bytes": 1 << 27, "class_images": row.tolist()}
                                            for i, row in enumerate(class_images)]}
    manifest = {"format_version": 1, "task": task, "num_classes": classes, "ignore_label": 255,
                "class_names": [f"class_{c:04d}" for c in range(classes)],
                "counts": {"discovered": 400_000, "filtered_out": {"total": 0, "by_reason": {}},
                           "rejected": {"total": 0, "by_reason": {}}, "duplicates": 0, "written": 400_000,
                           "records_written": 500_000},
                "splits": {"train": split}, "statistics": None, "balance": {"method": "none"},
                "options": {}, "versions": {}}
    limits = data.ReportLimits()
    quota = data.per_class_quota(classes, limits)
    px = data.thumbnail_size(classes, limits)
    noise = rng.integers(0, 256, size=(px * 3 // 4, px, 3), dtype=np.uint8)
    mask = rng.integers(0, classes, size=noise.shape[:2], dtype=np.uint8) if task == "segmentation" else None
    gallery = {c: [data.GalleryItem(c, f"images/{c}_{k}.jpg", "train", "s", 480, 640, 0.1, noise, mask)
                   for k in range(quota)] for c in range(0, classes, 2)}
    sample = data.ShardSample(shards=["s"] * 8, records=4000, originals=4000,
                              sizes=collections.Counter({(640 + i, 480 - i): 10 for i in range(400)}))
    report = data.ReportData(manifest, None, data.class_names(manifest, None), {}, True, sample, gallery)
    started = time.monotonic()
    page = render_html(report, limits).encode("utf-8")
    assert len(page) < 5_000_000, len(page)
    assert time.monotonic() - started < 120
    assert page.count(b"<figure>") >= 200
