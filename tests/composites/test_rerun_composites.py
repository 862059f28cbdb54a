"""TestPipeline tests of the re-run's composites, every output read: KeepParentRecords on a parent that ValidatePairs
and WriteShards really wrote, and AdoptKilledSpill on the spill a killed ValidatePairs really left.

Which parent record is which is read from the parent's shard with tf.data (its source ids in file order), never
from the keys files the composite reads."""

import dataclasses
import io
import os

import apache_beam as beam
import numpy as np
import pytest
import tensorflow as tf
from apache_beam.testing.test_pipeline import TestPipeline
from PIL import Image

from beam_pipeline.core.pixels import Limits
from beam_pipeline.core.records import PairRef, ShardInfo
from beam_pipeline.core.rerun.versions import ParentShard, ParentSpec
from beam_pipeline.stages.rerun.adopt import AdoptKilledSpill
from beam_pipeline.stages.rerun.reuse import KeepParentRecords
from beam_pipeline.stages.specs import AdoptSpec, CacheSpec, CheckSpec, WriteSpec
from beam_pipeline.stages.validate import ValidatePairs
from beam_pipeline.stages.write import WriteShards

CHECK = CheckSpec("segmentation", Limits(num_classes=2), max_file_bytes=10**6)
PARENT, KILLED, RESUMED = "20261205T100000Z-0000aaaa", "20261205T110000Z-0000bbbb", "20261205T120000Z-0000cccc"
_COLLECTED = {}                      # what a pipeline handed back, by name (the DirectRunner runs in this process)


def _collect(element, name):
    _COLLECTED.setdefault(name, []).append(element)


def collected(name):
    return _COLLECTED.pop(name, [])


def png(array) -> bytes:
    out = io.BytesIO()
    Image.fromarray(array).save(out, format="PNG")
    return out.getvalue()


def write_pair(folder, stem: str, seed: int) -> PairRef:
    """A pair of real files: a noisy image, and a mask of both classes whose split depends on ``seed``."""
    rng = np.random.default_rng(seed)
    image = rng.integers(0, 256, (8, 12, 3), dtype=np.uint8)
    mask = np.zeros((8, 12), np.uint8)
    mask[:, : 2 + seed % 9] = 1
    (folder / f"{stem}.png").write_bytes(png(image))
    (folder / f"{stem}_mask.png").write_bytes(png(mask))
    return PairRef(key=stem, source_id=f"{stem}.png", image=str(folder / f"{stem}.png"),
                   mask=str(folder / f"{stem}_mask.png"), split="train")


def source_ids(shard_file) -> list:
    return [tf.train.Example.FromString(r.numpy()).features.feature["image/source_id"].bytes_list.value[0].decode()
            for r in tf.data.TFRecordDataset(str(shard_file))]


@pytest.fixture
def parent(tmp_path):
    """A parent version of five train pairs, written by ValidatePairs and WriteShards into one shard."""
    inputs = tmp_path / "in"
    inputs.mkdir()
    refs = [write_pair(inputs, f"p{i}", i) for i in range(5)]
    out = tmp_path / "out"
    spec = WriteSpec(str(out / "runs" / PARENT), CHECK, target_shard_bytes=10**9, version=f"runs/{PARENT}")
    with TestPipeline() as p:
        valid, _, _ = p | beam.Create(refs) | ValidatePairs(CHECK)
        shards, _ = valid | WriteShards(spec, refusals=p | "NoRefusals" >> beam.Create([]))
        _ = shards | beam.Map(_collect, "parent")
    (shard,) = collected("parent")
    parent_shard = ParentShard(path=shard.path, group=shard.group, split=shard.split, records=shard.records,
                               bytes=shard.bytes, sha256=shard.sha256, keys=shard.keys, class_index=shard.class_index,
                               side_files=shard.side_files)
    return inputs, out, parent_shard, source_ids(out / shard.path)


def _run_keep(inputs, out, parent_shard, refs, compact="auto"):
    spec = ParentSpec(run_id=PARENT, shards=(parent_shard,), balance="none", compact=compact)
    with TestPipeline() as p:
        valid, _, _ = p | beam.Create(refs) | ValidatePairs(CHECK)
        to_write, kept, counts, _ = valid | KeepParentRecords(spec, str(out), num_classes=2)
        _ = to_write | "ToWrite" >> beam.Map(lambda pair: pair.ref.key) | "CollectWrite" >> beam.Map(_collect, "write")
        _ = kept | "CollectKept" >> beam.Map(_collect, "kept")
        _ = counts | "CollectCounts" >> beam.Map(_collect, "counts")
    totals = {}
    for what, n in collected("counts"):
        totals[what] = totals.get(what, 0) + n
    return sorted(collected("write")), collected("kept"), totals


def test_keep_parent_records_keeps_the_unchanged_writes_the_new_and_changed_and_deletes_the_rest(parent):
    inputs, out, parent_shard, order = parent
    refs = [write_pair(inputs, f"p{i}", i) for i in (0, 2, 3)]                  # unchanged; p4 is gone
    refs.append(write_pair(inputs, "p1", 101))                                  # p1's files changed
    refs.append(write_pair(inputs, "p5", 5))                                    # new
    to_write, kept, counts = _run_keep(inputs, out, parent_shard, refs)
    assert to_write == ["p1", "p5"]
    (shard,) = kept
    assert isinstance(shard, ShardInfo) and shard.path == parent_shard.path and shard.sha256 == parent_shard.sha256
    assert shard.deleted == tuple(sorted(order.index(f"{stem}.png") for stem in ("p1", "p4")))
    assert (shard.records, shard.originals, shard.keys) == (5, 3, parent_shard.keys)
    assert shard.class_images == (3, 3)                    # every kept mask holds both classes
    assert 0 < shard.live_bytes < shard.bytes
    assert counts == {"kept": 3, "deleted": 2}


def test_keep_parent_records_compacts_a_shard_left_mostly_deleted(parent):
    inputs, out, parent_shard, _ = parent
    refs = [write_pair(inputs, "p0", 0), write_pair(inputs, "p1", 101)]         # one of five still live
    to_write, kept, counts = _run_keep(inputs, out, parent_shard, refs)
    assert to_write == ["p0", "p1"] and kept == []
    assert counts == {"deleted": 4, "compacted": 1}
    to_write, kept, counts = _run_keep(inputs, out, parent_shard, refs, compact="never")
    assert to_write == ["p1"] and len(kept) == 1 and kept[0].deleted and counts == {"kept": 1, "deleted": 4}


@pytest.fixture
def killed(tmp_path):
    """Four train pairs that a killed run validated afresh, their records in its local spill (ValidatePairs with
    a cache, every part committed)."""
    inputs = tmp_path / "in"
    inputs.mkdir()
    refs = [write_pair(inputs, f"k{i}", i) for i in range(4)]
    cache = CacheSpec(str(tmp_path / "cache" / "fp"), KILLED, spill="always")
    with TestPipeline() as p:
        valid, _, _ = p | beam.Create(refs) | ValidatePairs(CHECK, cache)
        _ = valid | beam.Map(_collect, "killed")
    pairs = sorted(collected("killed"), key=lambda pair: pair.ref.key)
    assert len({pair.spill[0] for pair in pairs}) == 1 and all(pair.spill for pair in pairs)
    return tmp_path, pairs


def _run_adopt(tmp_path, pairs, compact="auto", enabled=True):
    data_dir = tmp_path / "out" / "runs" / RESUMED
    spec = AdoptSpec(str(data_dir), f"runs/{RESUMED}", RESUMED, num_classes=2, compact=compact, enabled=enabled)
    with TestPipeline() as p:
        to_write, shards, counts = (p | beam.Create(pairs)
                                    | AdoptKilledSpill(spec, refusals=p | "NoRefusals" >> beam.Create([])))
        _ = to_write | "Keys" >> beam.Map(lambda pair: pair.ref.key) | "CollectWrite" >> beam.Map(_collect, "write")
        _ = shards | "CollectShards" >> beam.Map(_collect, "shards")
        _ = counts | "CollectCounts" >> beam.Map(_collect, "counts")
    return sorted(collected("write")), collected("shards"), collected("counts"), data_dir


def test_adopt_killed_spill_makes_the_spill_file_a_shard_and_sends_the_rest_to_the_writer(killed):
    tmp_path, pairs = killed
    spill_file = pairs[0].spill[0]
    order = source_ids(spill_file)                                  # the records as validation spilled them
    dropped = order[1].split(".")[0]                                # a record between two kept ones
    claimed = [pair for pair in pairs if pair.ref.key != dropped]  # no longer selected
    no_spill = dataclasses.replace(pairs[0], ref=PairRef(key="n", source_id="n.png", image="/in/n.png",
                                                         mask="/in/n_mask.png", split="train"), spill=())
    to_write, shards, counts, data_dir = _run_adopt(tmp_path, claimed + [no_spill])
    assert to_write == ["n"] and counts == [("adopted", 3)]
    (shard,) = shards
    adopted = data_dir / "resumed" / "train-00000-of-00001.tfrecord"
    assert shard.path == f"runs/{RESUMED}/resumed/train-00000-of-00001.tfrecord"
    assert os.stat(adopted).st_ino == os.stat(spill_file).st_ino                      # linked, not copied
    assert source_ids(adopted) == order and shard.records == 4 and shard.deleted == (1,)
    assert shard.originals == 3 and shard.class_images == (3, 3) and shard.live_bytes < shard.bytes


def test_adopt_killed_spill_adopts_nothing_when_disabled_or_from_a_mostly_deleted_file(killed):
    tmp_path, pairs = killed
    to_write, shards, counts, _ = _run_adopt(tmp_path, pairs, enabled=False)         # --compact all
    assert to_write == ["k0", "k1", "k2", "k3"] and shards == [] and counts == []
    last = source_ids(pairs[0].spill[0])[-1].split(".")[0]
    only_last = [pair for pair in pairs if pair.ref.key == last]                    # one live record of four
    to_write, shards, counts, _ = _run_adopt(tmp_path, only_last)
    assert to_write == [last] and shards == [] and counts == []
    to_write, shards, counts, _ = _run_adopt(tmp_path, only_last, compact="never")   # adopted all the same
    assert to_write == [] and len(shards) == 1 and shards[0].deleted == (0, 1, 2) and counts == [("adopted", 1)]
