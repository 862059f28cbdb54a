"""core/rerun/parent.py: when a parent's file may be kept, which shards are damaged, and what a refusal says."""

import pytest

from beam_pipeline.core.rerun import parent as rules
from beam_pipeline.core.rerun.versions import ParentShard

RUN = "20261205T100000Z-0000aaaa"
TRAIN = ParentShard(f"runs/{RUN}/train-00000-of-00002.tfrecord", "train", "train", 10, 1000, "a" * 64, (2, 5),
                    f"runs/{RUN}/keys/train-00000-of-00002.tfrecord.tsv",
                    f"runs/{RUN}/class_index/train-00000-of-00002.tfrecord.jsonl")
OTHER = ParentShard(f"runs/{RUN}/train-00001-of-00002.tfrecord", "train", "train", 4, 400, "b" * 64, (),
                    f"runs/{RUN}/keys/train-00001-of-00002.tfrecord.tsv", "")


@pytest.mark.parametrize("version, recorded, verdict", [
    (None, "1000:5:7", "is missing"),
    ("999:5:7", "1000:5:7", "holds 999 bytes, the manifest says 1,000"),
    ("1000:5:7", "1000:5:7", rules.OK),             # as published: kept without a read
    ("1000:6:7", "1000:5:7", rules.HASH),           # touched, copied or rewritten in place: its bytes decide
    ("1000:5:8", "1000:5:7", rules.HASH),
    ("1000:5:7", "", rules.HASH),                   # a parent published before versions were recorded
])
def test_a_file_is_kept_on_its_version_and_hashed_when_it_moved(version, recorded, verdict):
    assert rules.judge(rules.ParentFile("f", 1000, "a" * 64, recorded), version) == verdict


def test_a_hashed_file_is_kept_only_with_the_published_bytes():
    expected = rules.ParentFile("f", 1000, "a" * 64)
    assert rules.judge_digest(expected, "a" * 64) == rules.OK
    assert rules.judge_digest(expected, "c" * 64).startswith("has other bytes (SHA-256 cccccccccccc…")


def test_every_file_a_rerun_would_keep_is_checked_with_its_table_entry():
    table = {TRAIN.path: {"bytes": 1000, "sha256": "a" * 64, "version": "1000:5:7"},
             TRAIN.keys: {"bytes": 30, "sha256": "k" * 64}}
    found = rules.files_to_check([TRAIN, OTHER], table)
    assert [f.path for f in found] == [TRAIN.path, TRAIN.keys, TRAIN.class_index, OTHER.path, OTHER.keys]
    assert found[0] == rules.ParentFile(TRAIN.path, 1000, "a" * 64, "1000:5:7")
    assert found[2].bytes == -1                     # not in the table: never matches, so it is damaged


def _entry(shard: ParentShard, **changes) -> dict:
    entry = {"path": shard.path, "records": shard.records, "sha256": shard.sha256, "deleted": list(shard.deleted)}
    entry.update(changes)
    return entry


def test_deletion_lists_are_checked_alone_and_against_the_versions_own_manifest():
    copy = {"splits": {"train": {"shards": [_entry(TRAIN), _entry(OTHER)]}}}
    assert rules.entry_problems([TRAIN, OTHER], copy) == {}
    out_of_range = ParentShard(**{**TRAIN.__dict__, "deleted": (2, 12)})
    assert "not distinct indices below 10" in rules.entry_problems([out_of_range], copy)[TRAIN.path]
    shortened = ParentShard(**{**TRAIN.__dict__, "deleted": (5,)})       # a valid list, not the one published
    assert "differs from the version's own copy" in rules.entry_problems([shortened], copy)[TRAIN.path]
    assert rules.entry_problems([shortened], None) == {}                 # no copy to compare: the range alone
    assert OTHER.path in rules.entry_problems([OTHER], {"splits": {}})   # a shard the copy does not name


def test_a_shard_is_damaged_by_any_of_its_files_and_its_keys_say_whether_its_records_can_be_traced():
    damage = rules.damaged_shards([TRAIN, OTHER], {TRAIN.class_index: "is missing", OTHER.keys: "is missing"}, {})
    assert [(d.shard, d.keys_readable) for d in damage] == [(TRAIN.path, True), (OTHER.path, False)]
    assert damage[0].problem == f"{TRAIN.class_index} is missing"
    kept, readable = rules.split_shards([TRAIN, OTHER], damage)
    assert kept == () and readable == (TRAIN,)
    (entry,) = rules.damaged_shards([TRAIN], {}, {TRAIN.path: "in manifest.json, x"})
    assert entry.problem == f"{TRAIN.path}: in manifest.json, x"


def test_the_refusal_is_one_line_naming_the_file_and_what_to_run():
    damage = rules.damaged_shards([TRAIN, OTHER], {TRAIN.path: "is missing", OTHER.path: "is missing"}, {})
    line = rules.refusal_line(damage, RUN)
    assert "\n" not in line and f"{TRAIN.path} is missing (and 1 more shard(s))" in line
    assert "--on_damaged_parent rebuild" in line and "--compact all" in line
