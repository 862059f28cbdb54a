"""core/rerun/versions.py (what a re-run keeps, writes, deletes and compacts; what garbage collection may remove) and
the TFRecord counter verify uses, on hand-made values."""

import struct

import pytest

from beam_pipeline.core import digests
from beam_pipeline.core.rerun import versions as v
from beam_pipeline.core.example import frame_record

A, B = v.Located("runs/a/train-00000-of-00001.tfrecord", 3, "c1"), v.Located("runs/b/train-00000-of-00001.tfrecord", 0, "c2")


@pytest.mark.parametrize("content, parents, kept, write, deleted", [
    ("c1", [A], A, False, []),              # unchanged: kept where the parent holds it
    ("c9", [A], None, True, [A]),           # changed content or split: written anew, the old record deleted
    (None, [A], None, False, [A]),          # gone (removed, filtered out, rejected): deleted
    ("c1", [], None, True, []),             # new
    ("c2", [A, B], B, False, [A]),          # held twice (never written so): the matching one kept
])
def test_decide(content, parents, kept, write, deleted):
    assert v.decide(content, parents) == (kept, write, deleted)


def state(path, records, live, size=100, group="train"):
    return v.ShardState(path, group, records, live, size)


def test_compaction_auto_rewrites_sparse_shards_and_many_small_ones():
    target = 1000
    full = [state(f"f{i}", 10, 10, 1000) for i in range(3)]
    assert v.compaction(full, v.COMPACT_AUTO, target) == set()
    sparse = [state("half", 10, 5, 1000), state("less", 10, 4, 1000)]
    assert v.compaction(full + sparse, v.COMPACT_AUTO, target) == {"less"}            # below half live
    small = [state(f"s{i}", 2, 2, 200) for i in range(v.MAX_SMALL_SHARDS)]
    assert v.compaction(full + small, v.COMPACT_AUTO, target) == set()                 # not yet too many
    more = small + [state("s9", 2, 2, 200)]
    assert v.compaction(full + more, v.COMPACT_AUTO, target) == {s.path for s in more}
    other_groups = [state(f"o{i}", 2, 2, 200, group=f"g{i}") for i in range(6)]      # counted per group
    assert v.compaction(other_groups, v.COMPACT_AUTO, target) == set()
    assert v.compaction(full + sparse, v.COMPACT_ALL, target) == {s.path for s in full + sparse}
    assert v.compaction(full + sparse, v.COMPACT_NEVER, target) == set()


def test_train_groups_that_depend_on_every_pair_are_not_kept():
    assert v.reusable_group("val", "repeat_factor") and v.reusable_group("train", "none")
    assert v.reusable_group("train", "training")
    assert not v.reusable_group("train", "repeat_factor") and not v.reusable_group("train-stratum003", "strata")


def test_keys_files_round_trip_and_digests_name_what_they_hold():
    line = v.keys_line(v.record_key("k#copy1"), v.record_content("img:mask:-1", "a.png", "train", "train"), 1234)
    (key, content, size), = v.parse_keys(line)
    assert size == 1234
    assert key == v.record_key("k#copy1") != v.record_key("k") and len(key) == v.DIGEST_CHARS
    assert content != v.record_content("img:mask:-1", "a.png", "val", "val")          # another split
    assert v.group_of("runs/r/train-stratum003-00001-of-00004.tfrecord") == "train-stratum003"


def test_reuse_needs_a_parent_of_this_format_and_layout():
    layout = v.record_layout("fingerprint", "none")
    assert v.reuse_refusal(None, layout) == "no published version to build on"
    assert "older format" in v.reuse_refusal({"format_version": 2}, layout)
    assert "other options" in v.reuse_refusal({"format_version": 3, "record_layout": "x"}, layout)
    assert v.reuse_refusal({"format_version": 3, "record_layout": layout}, layout) is None
    assert layout != v.record_layout("fingerprint", "repeat_factor")


def test_parent_shards_carry_their_deleted_records_and_side_files():
    manifest = {"files": {"runs/a/keys/val-00000-of-00001.tfrecord.tsv": {"bytes": 7, "sha256": "k"}},
                "splits": {"val": {"shards": [{"path": "runs/a/val-00000-of-00001.tfrecord", "records": 5, "bytes": 50,
                                               "sha256": "s", "deleted": [1, 3],
                                               "keys": "runs/a/keys/val-00000-of-00001.tfrecord.tsv"}]}}}
    (shard,) = v.parent_shards(manifest)
    assert (shard.group, shard.split, shard.live, shard.deleted) == ("val", "val", 3, (1, 3))
    assert shard.side_files == (("runs/a/keys/val-00000-of-00001.tfrecord.tsv", 7, "k"),)
    assert v.merged_deleted(shard.deleted, [0, 3]) == [0, 1, 3]


def test_garbage_is_what_no_kept_version_names():
    kept = [{"files": {"runs/b/x.tfrecord": {}, "runs/a/y.tfrecord": {}}}]
    found = ["runs/a/y.tfrecord", "runs/a/stats.json", "runs/b/x.tfrecord", "runs/c/z.tfrecord", "runs/old/any"]
    assert v.removable(found, kept, ["runs/old"]) == ["runs/a/stats.json", "runs/c/z.tfrecord"]


def test_the_record_counter_follows_the_framing_across_chunks():
    data = b"".join(frame_record(bytes([i]) * (i * 37)) for i in range(9))
    for chunk in (1, 5, 12, 64, len(data)):
        counter = digests.RecordCounter()
        for start in range(0, len(data), chunk):
            counter.update(data[start:start + chunk])
        assert counter.total() == 9, chunk
    cut = digests.RecordCounter()
    cut.update(data[:-3])
    assert cut.total() == -1
    huge = digests.RecordCounter()
    huge.update(struct.pack("<Q", 10) + b"\0" * 4 + b"short")
    assert huge.total() == -1
    assert digests.deleted_problems("s", [0, 4], 5) == []
    assert [p.kind for p in digests.deleted_problems("s", [4, 1], 5) + digests.deleted_problems("s", [5], 5)] == [
        digests.RECORDS, digests.RECORDS]


def test_repeat_weights_sum_to_the_same_float_however_the_records_are_grouped():
    """A version's splits sum their records' repeat factors shard by shard, grouped unlike a fresh run's: the
    exact sums give the correctly rounded total (math.fsum) for every grouping, where float sums need not."""
    import math
    import random
    from beam_pipeline.core.repeat_weights import weight_of, weight_units
    rng = random.Random(5)
    factors = [max(1.0, math.sqrt(0.5 / rng.uniform(0.001, 1.0))) for _ in range(2000)]
    totals = set()
    for _ in range(20):
        rng.shuffle(factors)
        cuts = sorted(rng.sample(range(1, len(factors)), 30))
        groups = [factors[a:b] for a, b in zip([0, *cuts], [*cuts, len(factors)])]
        totals.add(weight_of(sum(sum(weight_units(f) for f in group) for group in groups)))
    assert totals == {math.fsum(factors)}


def test_a_shard_path_gives_back_its_group_index_and_count():
    from beam_pipeline.core.sharding import shard_name_parts
    assert shard_name_parts("runs/20261202T193807Z-d94d7366/train-00003-of-00012.tfrecord") == ("train", 3, 12)
    assert shard_name_parts("train_stratum-2-00000-of-00001.tfrecord") == ("train_stratum-2", 0, 1)
