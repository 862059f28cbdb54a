"""KeepParentRecords: which records a re-run keeps where its parent version holds them, which it writes, and
which it deletes (core/rerun/versions.py, docs/incremental.md).

Input: the run's pairs as they would be written (ValidPair, after balancing). Outputs:

* ``to_write``: ValidPair to write into this run's new shards: the pairs that are new or changed, those of
  shards it compacts, and every pair of a group whose records depend on all pairs (a train split with
  repeat copies or strata);
* ``kept``: a ShardInfo per parent shard the version keeps: its path, file digests and side files as the
  parent published them, its deleted records (the parent's and this run's), and its live records' tallies;
* ``counts``: ``(what, n)``: records kept, deleted, and written again by compaction (the lineage).

Only metadata crosses the shuffles: pairs and (shard, index, content digest) of the parent's records, read
from the parent's keys files, grouped by record key, and then by shard.
"""

import apache_beam as beam

from beam_pipeline.core.rerun import versions
from beam_pipeline.core.records import ShardTally, ValidPair
from beam_pipeline.io import files
from beam_pipeline.stages.shard_files import content_of
from beam_pipeline.stages.shuffle import GroupPackedByKey
from beam_pipeline.stages.specs import ShuffleSpec

WRITE_TAG, DELETED_TAG, COUNTS_TAG, COMPACTED_TAG = "write", "deleted", "counts", "compacted"
KEPT, DELETED, COMPACTED = "kept", "deleted", "compacted"
_PAIR, _PARENT = "pair", "parent"


def _reusable(pair: ValidPair, balance: str) -> bool:
    return versions.reusable_group(pair.shard_group, balance)


def _keyed_pair(pair: ValidPair):
    return versions.record_key(pair.shard_key), (_PAIR, pair)


class ReadParentKeysFn(beam.DoFn):
    """ParentShard -> (record key, ("parent", Located)) for each of its live records (its keys file, read once)."""

    def process(self, shard: versions.ParentShard, output: str):
        from beam_pipeline.core import paths
        deleted = set(shard.deleted)
        text = files.read_bytes(paths.join(output, shard.keys)).decode("utf-8")
        for index, (key, content, size) in enumerate(versions.parse_keys(text)):
            if index not in deleted:
                yield key, (_PARENT, versions.Located(shard.path, index, content, size))


class DecideFn(beam.DoFn):
    """(record key, [("pair", ValidPair) | ("parent", Located), ...]) -> (shard, ("kept", (index, pair, size))), pairs to
    write, (shard, ("deleted", index)), and ``(what, n)`` counts."""

    def process(self, element):
        _, values = element
        pair, parents = None, []
        for kind, value in values:
            if kind == _PAIR:
                pair = value
            else:
                parents.append(value)
        kept, write, deleted = versions.decide(None if pair is None else content_of(pair), parents)
        if kept is not None:
            yield kept.shard, (KEPT, (kept.index, pair, kept.size))
        if write:
            yield beam.pvalue.TaggedOutput(WRITE_TAG, pair)
        for located in deleted:
            yield beam.pvalue.TaggedOutput(DELETED_TAG, (located.shard, (DELETED, located.index)))
        if deleted:
            yield beam.pvalue.TaggedOutput(COUNTS_TAG, (DELETED, len(deleted)))


def _plan_compaction(_, live, spec: versions.ParentSpec):
    """The parent shards this run compacts, from the records it keeps in each (``live``)."""
    yield from sorted(versions.compaction(versions.shard_states(spec, dict(live)), spec.compact,
                                          spec.target_shard_bytes))


def _kept_one(element):
    shard, _ = element
    return shard, 1


class ShardVersionFn(beam.DoFn):
    """(shard, [("kept", (index, pair, size)) | ("deleted", index), ...]) -> the kept shard's ShardInfo; or, for a shard
    this run compacts, its live pairs to write again (``compacted``)."""

    def __init__(self, spec: versions.ParentSpec, num_classes: int):
        self._spec = spec
        self._num_classes = num_classes
        self._shards = None

    def setup(self):
        self._shards = {shard.path: shard for shard in self._spec.shards}

    def process(self, element, compacted):
        path, values = element
        shard = self._shards[path]
        kept, deleted = [], []
        for kind, value in values:
            (kept if kind == KEPT else deleted).append(value)
        if path in set(compacted):
            for _, pair, _ in kept:
                yield beam.pvalue.TaggedOutput(COMPACTED_TAG, pair)
            if kept:
                yield beam.pvalue.TaggedOutput(COUNTS_TAG, (COMPACTED, len(kept)))
            return
        tally = ShardTally(self._num_classes)
        for _, pair, size in sorted(kept, key=lambda item: item[0]):
            tally.add(pair, size)
        if kept:
            yield beam.pvalue.TaggedOutput(COUNTS_TAG, (KEPT, len(kept)))
        yield tally.info(path, shard.group, shard.split, records=shard.records, bytes=shard.bytes,
                         sha256=shard.sha256, side_files=(shard.keys, shard.class_index, shard.side_files),
                         deleted=tuple(versions.merged_deleted(shard.deleted, deleted)))


class KeepParentRecords(beam.PTransform):
    """``to_write, kept, counts = pairs | KeepParentRecords(ParentSpec(...), output, num_classes, ShuffleSpec())``
    (module docstring)."""

    def __init__(self, spec: versions.ParentSpec, output: str, num_classes: int, shuffle: ShuffleSpec = ShuffleSpec()):
        super().__init__()
        self._spec = spec
        self._output = output
        self._num_classes = num_classes
        self._shuffle = shuffle

    def expand(self, pairs):
        spec = self._spec
        reusable, rewritten = pairs | "SplitByGroup" >> beam.Partition(
            lambda pair, _: 0 if _reusable(pair, spec.balance) else 1, 2)
        # ValidPair of groups whose parent shards may be kept | ValidPair of groups written again whole
        shards = [shard for shard in spec.shards if versions.reusable_group(shard.group, spec.balance)]
        parent_records = (pairs.pipeline
                          | "ParentShards" >> beam.Create(shards)
                          | "ReadParentKeys" >> beam.ParDo(ReadParentKeysFn(), output=self._output))
        # (record key, ("parent", Located)): the parent's live records
        decided = ((reusable | "KeyByRecord" >> beam.Map(_keyed_pair), parent_records)
                   | "CurrentAndParent" >> beam.Flatten()
                   | "GroupByRecord" >> GroupPackedByKey(self._shuffle)
                   # (record key, [("pair", ValidPair) | ("parent", Located), ...])
                   | "Decide" >> beam.ParDo(DecideFn()).with_outputs(WRITE_TAG, DELETED_TAG, COUNTS_TAG, main="kept"))
        # (shard, ("kept", (index, ValidPair, size))) | ValidPair to write | (shard, ("deleted", index)) | (what, n)
        live = decided.kept | "OnePerKept" >> beam.Map(_kept_one) | "LivePerShard" >> beam.CombinePerKey(sum)
        # (shard, live records)
        compacted = (pairs.pipeline
                     | "Once" >> beam.Create([None])
                     | "PlanCompaction" >> beam.FlatMap(_plan_compaction, live=beam.pvalue.AsList(live), spec=spec))
        # shard path: the parent shards whose live records are written again
        versioned = ((decided.kept, decided[DELETED_TAG])
                     | "KeptAndDeleted" >> beam.Flatten()
                     | "GroupByShard" >> GroupPackedByKey(self._shuffle)
                     # (shard, [("kept", (index, ValidPair, framed size)) | ("deleted", index), ...])
                     | "VersionShards" >> beam.ParDo(ShardVersionFn(spec, self._num_classes),
                                                     compacted=beam.pvalue.AsList(compacted)).with_outputs(
                         COMPACTED_TAG, COUNTS_TAG, main="kept"))
        # ShardInfo of each kept parent shard | ValidPair compacted | (what, n)
        dropped = sum(shard.live for shard in spec.shards if not versions.reusable_group(shard.group, spec.balance))
        counts = ((decided[COUNTS_TAG], versioned[COUNTS_TAG],
                   pairs.pipeline | "DroppedGroups" >> beam.Create([(DELETED, dropped)] if dropped else []))
                  | "AllCounts" >> beam.Flatten())
        to_write = ((decided[WRITE_TAG], versioned[COMPACTED_TAG], rewritten) | "ToWrite" >> beam.Flatten())
        return to_write, versioned.kept, counts
