"""The verdict cache's rules (core/rerun/verdicts.py) and its store on local disk (io/cache/verdicts.py)."""

import os
from pathlib import Path

import pytest

from beam_pipeline.core.rerun import verdicts
from beam_pipeline.core.rerun.verdicts import REHASH, REUSE, VALIDATE, Verdict, decide
from beam_pipeline.io import streams
from beam_pipeline.io.cache import spill as spill_store, verdicts as verdict_store

OPTIONS = {"task": "segmentation", "limits": {"num_classes": 8, "ignore_label": 255}, "sample_points_per_class": 8}
VERSIONS = {"imagecodecs": "2026.3.6", "simplejpeg": "1.9.0", "pillow": "13.0.0", "numpy": "2.3.5", "tensorflow": "x"}


def verdict(key="a", label=None, versions=("img|1", "mask|1"), digests=("i" * 64, "m" * 64), valid=b"v"):
    return Verdict(key=key, label=label, image_version=versions[0], mask_version=versions[1],
                   image_sha256=digests[0], mask_sha256=digests[1], valid=valid)


@pytest.mark.parametrize("cached,label,now,revalidate,audit,expected", [
    (None, None, ("img|1", "mask|1"), False, False, VALIDATE),            # never seen
    (verdict(), None, ("img|1", "mask|1"), False, False, REUSE),           # both pre-keys as they were
    (verdict(), None, ("img|2", "mask|1"), False, False, REHASH),          # the image touched or rewritten
    (verdict(), None, ("img|1", "mask|2"), False, False, REHASH),          # the mask
    (verdict(), None, ("img|1", "mask|1"), True, False, REHASH),           # --revalidate
    (verdict(), None, ("img|1", "mask|1"), False, True, REHASH),           # an audited hit
    (verdict(), None, (None, "mask|1"), False, False, REHASH),             # a store that gives no version
    (verdict(label="cat", versions=("img|1", None), digests=("i" * 64, "")), "dog", ("img|1", None), False,
     False, VALIDATE),                                                     # relabelled
    (verdict(label="cat", versions=("img|1", None), digests=("i" * 64, "")), "cat", ("img|1", None), False,
     False, REUSE),                                                        # classification: no mask
])
def test_a_verdict_is_reused_only_on_its_files_pre_keys_and_rehashed_otherwise(cached, label, now, revalidate,
                                                                             audit, expected):
    assert decide(cached, label, now, revalidate, audit) == expected


def test_the_fingerprint_changes_with_every_check_option_and_decoder_but_not_other_packages():
    base = verdicts.fingerprint(OPTIONS, VERSIONS)
    assert len(base) == 16 and base == verdicts.fingerprint(dict(OPTIONS), dict(VERSIONS))
    assert verdicts.fingerprint({**OPTIONS, "sample_points_per_class": 4}, VERSIONS) != base
    assert verdicts.fingerprint({**OPTIONS, "limits": {"num_classes": 9, "ignore_label": 255}}, VERSIONS) != base
    for package in ("imagecodecs", "simplejpeg", "pillow", "numpy"):
        assert verdicts.fingerprint(OPTIONS, {**VERSIONS, package: "0"}) != base, package
    assert verdicts.fingerprint(OPTIONS, {**VERSIONS, "tensorflow": "other"}) == base


def test_buckets_and_the_audit_draw_are_stable_hashes():
    assert verdicts.bucket_of("images/a.png") == verdicts.bucket_of("images/a.png")
    buckets = {verdicts.bucket_of(f"k{i}") for i in range(5000)}
    assert len(buckets) > 900 and max(buckets) < verdicts.NUM_BUCKETS
    drawn = [verdicts.audited(f"k{i}", "run1", 0.1) for i in range(5000)]
    assert 400 < sum(drawn) < 600                                  # about a tenth
    assert drawn == [verdicts.audited(f"k{i}", "run1", 0.1) for i in range(5000)]
    assert drawn != [verdicts.audited(f"k{i}", "run2", 0.1) for i in range(5000)]   # drawn anew per run
    assert not any(verdicts.audited(f"k{i}", "run1", 0.0) for i in range(100))
    assert all(verdicts.audited(f"k{i}", "run1", 1.0) for i in range(100))


def test_a_local_files_version_follows_its_size_mtime_and_inode(tmp_path):
    path = tmp_path / "a.png"
    path.write_bytes(b"1234")
    first = streams.file_version(str(path))
    assert first == streams.file_version(str(path))
    stat = path.stat()
    path.write_bytes(b"1235")                                      # one byte changed, size kept ...
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))        # ... and the mtime put back: ctime shows it
    assert streams.file_version(str(path)) != first
    assert streams.file_version(str(tmp_path / "missing.png")) is None


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_parts_are_committed_as_they_fill_and_a_killed_writer_leaves_only_whole_parts(tmp_path, monkeypatch):
    monkeypatch.setattr(verdict_store, "COMMIT_EVERY", 3)
    folder, clock = str(tmp_path / "fp"), Clock()
    writer = verdict_store.PartWriter(folder, 7, "20261201T000000Z-00000001", clock=clock)
    for i in range(4):
        writer.add(verdict(key=f"k{i}"))
    # three verdicts committed; the fourth is in a temporary file, which is no part
    assert len(verdict_store.part_paths(folder, 7)) == 1
    assert sorted(verdict_store.load(folder, 7)) == ["k0", "k1", "k2"]
    assert any(name.startswith(verdict_store.TEMP_PREFIX) for name in os.listdir(Path(folder) / "0007"))
    clock.now = verdict_store.COMMIT_SECONDS                      # ten seconds on: the next verdict commits
    writer.add(verdict(key="k4"))
    assert sorted(verdict_store.load(folder, 7)) == ["k0", "k1", "k2", "k3", "k4"]
    assert writer.close() == verdict_store.part_paths(folder, 7)


def test_the_newest_verdict_of_a_key_wins_and_a_damaged_part_is_skipped(tmp_path, caplog):
    folder = str(tmp_path / "fp")
    old = verdict_store.PartWriter(folder, 1, "20261201T000000Z-00000001")
    old.add(verdict(key="a", valid=b"old"))
    old.add(verdict(key="b", valid=b"old"))
    old_parts = old.close()
    new = verdict_store.PartWriter(folder, 1, "20261202T000000Z-00000002")
    new.add(verdict(key="a", valid=b"new"))
    new_parts = new.close()
    loaded = verdict_store.load(folder, 1)
    assert (loaded["a"].valid, loaded["b"].valid) == (b"new", b"old")
    Path(old_parts[0]).write_bytes(Path(old_parts[0]).read_bytes()[:-5])     # cut off inside a record
    assert {key: v.valid for key, v in verdict_store.load(folder, 1).items()} == {"a": b"new"}
    assert "cannot be read" in caplog.text
    verdict_store.remove_others(folder, 1, keep=new_parts)
    assert verdict_store.part_paths(folder, 1) == new_parts


def test_garbage_collection_keeps_only_the_runs_own_parts_of_its_fingerprint(tmp_path):
    root = tmp_path / "cache"
    run, old = "20261202T000000Z-00000002", "20261201T000000Z-00000001"
    kept = []
    for bucket, run_id in ((1, run), (2, old), (3, run)):
        writer = verdict_store.PartWriter(str(root / "fp"), bucket, run_id)
        writer.add(verdict(key=f"k{bucket}"))
        parts = writer.close()
        kept += parts if run_id == run else []
    other = verdict_store.PartWriter(str(root / "otherfp"), 1, old)
    other.add(verdict())
    other.close()
    (root / "fp" / "0003" / ".tmp-left-by-a-kill.verdicts").write_bytes(b"x")
    (root / verdict_store.OWNER).write_text("{}")
    assert verdict_store.collect_garbage(str(root), "fp", run) == 3
    left = sorted(str(path) for path in root.rglob("*") if path.is_file())
    assert left == sorted(kept + [str(root / verdict_store.OWNER)])


def spill_pair(i: int, split: str = "train"):
    """A small classification pair as validation would spill it."""
    from beam_pipeline.core.records import PairRef, ValidPair
    ref = PairRef(key=f"k{i}", source_id=f"img{i}.jpg", image=f"/in/img{i}.jpg", label="0", split=split)
    return ValidPair(ref=ref, height=2, width=3, image_format="jpeg", image_sha256="i" * 64,
                     image_stored_bytes=9, image_converted=False, label=i % 2)


def parsed(framed: bytes):
    """The tf.train.Example a framed record holds, read by TensorFlow's own parser (length and CRCs checked)."""
    import tensorflow as tf
    import tempfile
    with tempfile.NamedTemporaryFile(suffix=".tfrecord") as handle:
        handle.write(framed)
        handle.flush()
        (record,) = [r.numpy() for r in tf.data.TFRecordDataset(handle.name)]
    return tf.train.Example.FromString(record)


def test_local_spill_records_are_flushed_before_their_part_commits_and_collected_after_a_commit(tmp_path, monkeypatch):
    monkeypatch.setattr(verdict_store, "COMMIT_EVERY", 2)
    root, run = tmp_path / "cache", "20261204T000000Z-00000001"
    spilled = spill_store.BucketSpill(str(root / "fp"), 5, run)
    writer = verdict_store.PartWriter(str(root / "fp"), 5, run, before_commit=spilled.seal)
    refs = []
    for i in range(3):
        refs.append(spilled.append(spill_pair(i, "train" if i != 1 else "val"), f"image {i}".encode(), b""))
        writer.add(verdict(key=f"k{i}"))
    spill_dir = root / "fp" / spill_store.SPILL_DIR
    files = sorted(path.name for path in spill_dir.iterdir())
    assert len(files) == 2 and all(name.startswith(run + "-") and name.endswith(".spill") for name in files)
    assert refs[0][0] == refs[2][0] != refs[1][0]             # one file per split, for the whole process
    assert refs[0][1] == 0 and refs[2][1] == refs[0][2]       # appended one after the other
    # the first part (k0, k1) is committed, and its records are readable (flushed) in another handle
    example = parsed(spill_store.read_spilled(refs[0]))
    assert example.features.feature["image/encoded"].bytes_list.value == [b"image 0"]
    assert example.features.feature["image/source_id"].bytes_list.value == [b"img0.jpg"]
    assert example.features.feature["image/class/label"].int64_list.value == [0]
    parts = writer.close()
    assert parsed(spill_store.read_spilled(refs[2])).features.feature["image/encoded"].bytes_list.value == [
        b"image 2"]
    assert len(parts) == 2
    assert verdict_store.collect_garbage(str(root), "fp", run) == 2       # both spill files: written into shards
    assert sorted(str(path) for path in root.rglob("*") if path.is_file()) == sorted(parts)
    assert spill_store.read_spilled(refs[2]) is None        # gone: the writer reads the sources


def test_a_local_spill_file_is_a_tfrecord_file_and_a_new_one_begins_past_the_file_size(tmp_path):
    import tensorflow as tf
    spilled = spill_store.BucketSpill(str(tmp_path / "fp"), 1, "20261204T000000Z-00000002", file_bytes=600)
    writer = verdict_store.PartWriter(str(tmp_path / "fp"), 1, "20261204T000000Z-00000002", before_commit=spilled.seal)
    refs = [spilled.append(spill_pair(i), bytes([i]) * 100, b"") for i in range(5)]
    writer.add(verdict())
    writer.close()
    files = sorted({ref[0] for ref in refs})
    sizes = [os.path.getsize(path) for path in files]
    assert len(files) > 1 and all(size >= 600 for size in sizes[:-1])        # a new file once one holds 600 bytes
    assert all(size - ref[2] < 600 for ref in refs for size in [os.path.getsize(ref[0])] if ref[1] + ref[2] == size)
    records = [r.numpy() for path in files for r in tf.data.TFRecordDataset(path)]
    images = [tf.train.Example.FromString(r).features.feature["image/encoded"].bytes_list.value[0] for r in records]
    assert images == [bytes([i]) * 100 for i in range(5)]


def test_a_spill_is_live_only_when_a_run_after_the_last_commit_wrote_it():
    from beam_pipeline.core.rerun import spill
    killed = spill.reference("/out/cache/fp/spill/20261204T100000Z-0000aaaa-1234abcd-train-00000.spill", 0,
                             [b"fra", b"me"], "a.jpg")
    committed_before, committed_by_it = "20261204T090000Z-ffffffff", "20261204T100000Z-0000aaaa"
    assert spill.live(killed, "")                             # nothing committed yet: a killed first run's spill
    assert spill.live(killed, committed_before)
    assert not spill.live(killed, committed_by_it)            # its own commit collected it
    assert not spill.live(killed, "20261204T110000Z-00000000")
    assert spill.matches(killed, b"frame")
    assert not spill.matches(killed, b"framE") and not spill.matches(killed, b"frames")
    assert spill.verbatim(killed, 0, "a.jpg")
    assert not spill.verbatim(killed, 1, "a.jpg") and not spill.verbatim(killed, 0, "b.jpg")
    # a re-run adopts another run's local spill files, never its own, nor a per-part spill on an object store
    assert spill.adoptable(killed, "20261204T110000Z-00000000")
    assert not spill.adoptable(killed, committed_by_it)
    remote = spill.reference("gs://b/cache/fp/0001/20261204T100000Z-0000aaaa-1234abcd-000000.records", 0,
                             [b"x"], "a.jpg")
    assert not spill.adoptable(remote, "20261204T110000Z-00000000") and not spill.adoptable((), "x")


def test_the_shard_reserve_is_every_selected_pair_at_the_mean_entry_size_and_a_margin():
    from beam_pipeline.core.rerun import spill
    margin = 16 * 2 ** 20
    assert spill.shard_reserve(1000, 0, 0) == margin                         # nothing seen yet
    assert spill.shard_reserve(0, 10, 2_000_000) == margin                   # the shards are on another disk
    # 1000 pairs at a mean of 200,000 bytes, 5 % more for the records' own bytes: 210,000,000
    assert spill.shard_reserve(1000, 10, 2_000_000) == 210_000_000 + margin
    assert spill.room_for_entry(300, 100, 200) and not spill.room_for_entry(299, 100, 200)


def test_spill_room_modes(tmp_path):
    never = spill_store.SpillRoom("never", str(tmp_path), str(tmp_path), 10)
    always = spill_store.SpillRoom("always", str(tmp_path), str(tmp_path), 10 ** 12)
    roomy = spill_store.SpillRoom("auto", str(tmp_path / "not yet made"), str(tmp_path), 10)
    full = spill_store.SpillRoom("auto", str(tmp_path), str(tmp_path), 10 ** 12)      # an exabyte of shards
    remote = spill_store.SpillRoom("auto", "gs://bucket/cache/fp", str(tmp_path), 10 ** 12)
    assert [never.allows(100), always.allows(100), roomy.allows(100), remote.allows(100)] == [False, True, True, True]
    assert not full.allows(100)         # the first entry already says 10 ** 12 pairs of 105 bytes will not fit
    assert not full.allows(1)           # and once refused, never again in this process
