"""AdoptFileFn (beam_pipeline/stages/rerun/adopt.py) on real spill files: what a re-run after a kill makes of one of the
killed run's spill files. The DoFn runs as a Beam worker runs it (its process method on a grouped element); the
files are read back with tf.data, and digests are taken here with hashlib."""

import dataclasses
import hashlib
import os
from pathlib import Path

import apache_beam as beam
import tensorflow as tf

from beam_pipeline.core.records import PairRef, ShardInfo, ValidPair
from beam_pipeline.io.cache import spill as spill_store, verdicts as verdict_store
from beam_pipeline.stages.rerun.adopt import AdoptFileFn
from beam_pipeline.stages.specs import AdoptSpec

KILLED, RESUMED = "20261204T100000Z-0000aaaa", "20261204T110000Z-0000bbbb"


def killed_spill(tmp_path: Path, count: int = 4):
    """``count`` train pairs a killed run validated and spilled into one local spill file (its parts committed)."""
    spilled = spill_store.BucketSpill(str(tmp_path / "cache" / "fp"), 7, KILLED)
    writer = verdict_store.PartWriter(str(tmp_path / "cache" / "fp"), 7, KILLED, before_commit=spilled.seal)
    out = []
    for i in range(count):
        ref = PairRef(key=f"k{i}", source_id=f"img{i}.jpg", image=f"/in/img{i}.jpg", label="1", split="train")
        pair = ValidPair(ref=ref, height=2, width=3, image_format="jpeg", image_sha256=f"{i:064d}",
                         image_stored_bytes=500, image_converted=False, label=1)
        out.append(dataclasses.replace(pair, spill=spilled.append(pair, bytes([i]) * 500, b"")))
        writer.add(verdict_store.Verdict(key=ref.key, label="1", image_version=None, mask_version=None,
                                         image_sha256="", mask_sha256="", valid=b"v"))
    writer.close()
    assert len({pair.spill[0] for pair in out}) == 1
    return out[0].spill[0], out


def adopt(tmp_path: Path, path: str, claimed, compact: str = "auto"):
    data_dir = tmp_path / "out" / "runs" / RESUMED
    spec = AdoptSpec(data_dir=str(data_dir), version=f"runs/{RESUMED}", run_id=RESUMED, num_classes=3,
                     compact=compact)
    outputs = list(AdoptFileFn(spec).process((path, list(claimed)), files=[("train", path)], refusals=[]))
    shards = [o.value for o in outputs if isinstance(o, beam.pvalue.TaggedOutput) and o.tag == "shards"]
    back = [o for o in outputs if isinstance(o, ValidPair)]
    return shards, back, data_dir


def records_of(path) -> list:
    return [r.numpy() for r in tf.data.TFRecordDataset(str(path))]


def test_a_spill_file_becomes_a_shard_with_its_unclaimed_records_deleted_and_no_byte_copied(tmp_path):
    path, pairs = killed_spill(tmp_path)
    before = records_of(path)
    (shard,), back, data_dir = adopt(tmp_path, path, [pairs[0], pairs[2], pairs[3]])   # k1: its verdict not kept
    assert back == [] and isinstance(shard, ShardInfo)
    adopted = data_dir / "resumed" / "train-00000-of-00001.tfrecord"
    assert shard.path == f"runs/{RESUMED}/resumed/train-00000-of-00001.tfrecord"
    assert os.stat(adopted).st_ino == os.stat(path).st_ino                  # a link, not a copy
    assert records_of(adopted) == before and shard.records == 4 and shard.deleted == (1,)
    data = adopted.read_bytes()
    assert shard.bytes == len(data) and shard.sha256 == hashlib.sha256(data).hexdigest()
    keys = (data_dir / "keys" / "resumed" / "train-00000-of-00001.tfrecord.tsv").read_text().splitlines()
    assert len(keys) == 4 and keys[1].startswith("-\t-\t") and not keys[0].startswith("-")
    assert shard.live_bytes == sum(int(line.split("\t")[2]) for i, line in enumerate(keys) if i != 1)
    assert shard.class_images == (0, 3, 0) and shard.originals == 3


def test_the_file_is_cut_after_the_last_record_the_version_holds(tmp_path):
    path, pairs = killed_spill(tmp_path)
    before = records_of(path)
    (shard,), back, data_dir = adopt(tmp_path, path, pairs[:2])
    assert back == [] and shard.records == 2 and shard.deleted == ()
    assert records_of(data_dir / "resumed" / "train-00000-of-00001.tfrecord") == before[:2]


def test_a_mostly_deleted_file_and_a_damaged_record_go_to_the_writer(tmp_path):
    path, pairs = killed_spill(tmp_path)
    shards, back, data_dir = adopt(tmp_path, path, [pairs[3]])              # 1 live record of 4
    assert shards == [] and back == [pairs[3]] and not (data_dir / "resumed").exists()
    shards, back, _ = adopt(tmp_path, path, [pairs[3]], compact="never")    # --compact never adopts it all the same
    assert len(shards) == 1 and shards[0].deleted == (0, 1, 2)
    data = bytearray(Path(path).read_bytes())
    data[pairs[2].spill[1] + 100] ^= 0xFF                                    # a byte of k2's record flipped
    Path(path).write_bytes(bytes(data))
    (shard,), back, _ = adopt(tmp_path, path, pairs)
    assert back == [pairs[2]] and shard.deleted == (2,)                     # k2 is written from its sources


def test_a_spill_file_names_its_split_as_adoption_reads_it(tmp_path):
    from beam_pipeline.core.rerun import spill
    from beam_pipeline.io.cache.spill import ProcessSpill
    from beam_pipeline.stages.rerun.adopt import file_split
    ref = ProcessSpill(str(tmp_path), KILLED, 1000).append("hold-out é", [b"x"], "a.jpg")
    assert Path(ref[0]).name.startswith(f"{KILLED}-") and spill.adoptable(ref, RESUMED)
    assert file_split(ref[0]) == spill.split_in_name("hold-out é") == "hold_out__"
