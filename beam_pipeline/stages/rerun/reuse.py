"""KeepParentRecords: which records a re-run keeps where its parent version holds them, which it writes, and
which it deletes (core/rerun/versions.py, docs/incremental.md).

Input: the run's pairs as they would be written (ValidPair, after balancing). Outputs:

* ``to_write``: ValidPair to write into this run's new shards: the pairs that are new or changed, those of
  shards it compacts, and every pair of a group whose records depend on all pairs (a train split with
  repeat copies or strata);
* ``kept``: a ShardInfo per parent shard the version keeps: its path, file digests and side files as the
  parent published them, its deleted records (the parent's and this run's), and its live records' tallies;
* ``counts``: ``(what, n)``: records kept, deleted, and written again by compaction (the lineage); for the
  shards the launcher found damaged (``ParentSpec.damaged``, core/rerun/parent.py), never kept, the records
  written again from their sources (``rebuilt``) and those whose pair is gone (``lost``);
* ``lost``: ``(record key, damaged shard)`` of each lost record, for NameLostRecords.

Only metadata crosses the shuffles: pairs and (shard, index, content digest) of the parent's records, read
from the parent's keys files, grouped by record key, and then by shard.

NameLostRecords: a pair rejected because its files are gone (missing, unreadable, empty), whose record was in a
damaged parent shard, is rejected as ``parent_shard_missing`` naming that shard: neither copy of it is left.
"""

import dataclasses

import apache_beam as beam

from beam_pipeline.core import paths, reasons
from beam_pipeline.core.failures import read_failed
from beam_pipeline.core.records import Outcome, ShardTally, ValidPair
from beam_pipeline.core.rerun import versions
from beam_pipeline.io import files
from beam_pipeline.stages.shard_files import content_of
from beam_pipeline.stages.shuffle import GroupPackedByKey, Materialize
from beam_pipeline.stages.specs import ShuffleSpec

WRITE_TAG, DELETED_TAG, COUNTS_TAG, COMPACTED_TAG, LOST_TAG = "write", "deleted", "counts", "compacted", "lost"
KEPT, DELETED, COMPACTED, REBUILT, LOST = "kept", "deleted", "compacted", "rebuilt", "lost"
_PAIR, _PARENT, _DAMAGED = "pair", "parent", "damaged"


def _reusable(pair: ValidPair, balance: str) -> bool:
    return versions.reusable_group(pair.shard_group, balance)


def _keyed_pair(pair: ValidPair):
    return versions.record_key(pair.shard_key), (_PAIR, pair)


class ReadParentKeysFn(beam.DoFn):
    """(ParentShard, damaged) -> (record key, ("parent" | "damaged", Located)) for each of its live records (its keys
    file, read once). A keys file the launcher checked (launcher/rerun/parent.py) that cannot be read now fails the
    run in one line naming it."""

    def process(self, element, output: str):
        shard, damaged = element
        path = paths.join(output, shard.keys)
        try:
            text = files.read_bytes(path).decode("utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise read_failed(path, error) from error
        deleted = set(shard.deleted)
        for index, (key, content, size) in enumerate(versions.parse_keys(text)):
            if index not in deleted:
                yield key, (_DAMAGED if damaged else _PARENT, versions.Located(shard.path, index, content, size))


class DecideFn(beam.DoFn):
    """(record key, [("pair", ValidPair) | ("parent" | "damaged", Located), ...]) -> (shard, ("kept", (index, pair,
    size))), pairs to write, (shard, ("deleted", index)), (record key, damaged shard) of a record lost with its damaged
    shard (``lost``), and ``(what, n)`` counts. A record in a damaged shard is never kept: its pair is written again
    (``rebuilt``), or, when the pair is gone, the record is lost."""

    def process(self, element):
        key, values = element
        pair, parents, damaged = None, [], []
        for kind, value in values:
            if kind == _PAIR:
                pair = value
            else:
                (damaged if kind == _DAMAGED else parents).append(value)
        kept, write, deleted = versions.decide(None if pair is None else content_of(pair), parents)
        if damaged and pair is None:
            yield beam.pvalue.TaggedOutput(LOST_TAG, (key, damaged[0].shard))
            yield beam.pvalue.TaggedOutput(COUNTS_TAG, (LOST, 1))
        elif damaged and write:
            yield beam.pvalue.TaggedOutput(COUNTS_TAG, (REBUILT, 1))
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
    """``to_write, kept, counts, lost = pairs | KeepParentRecords(ParentSpec(...), output, num_classes,
    ShuffleSpec())`` (module docstring)."""

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
        shards = [(shard, False) for shard in spec.shards if versions.reusable_group(shard.group, spec.balance)]
        shards += [(shard, True) for shard in spec.damaged]
        parent_records = (pairs.pipeline
                          | "ParentShards" >> beam.Create(shards)
                          | "ReadParentKeys" >> beam.ParDo(ReadParentKeysFn(), output=self._output))
        # (record key, ("parent" | "damaged", Located)): the parent's live records, and those of its damaged shards
        decided = ((reusable | "KeyByRecord" >> beam.Map(_keyed_pair), parent_records)
                   | "GroupByRecord" >> GroupPackedByKey(self._shuffle)
                   # (record key, [("pair", ValidPair) | ("parent", Located), ...])
                   | "Decide" >> beam.ParDo(DecideFn()).with_outputs(WRITE_TAG, DELETED_TAG, COUNTS_TAG, LOST_TAG,
                                                                    main="kept"))
        # (shard, ("kept", (index, ValidPair, size))) | ValidPair to write | (shard, ("deleted", index)) | (what, n)
        # | (record key, damaged shard) of a record lost with it
        live = decided.kept | "OnePerKept" >> beam.Map(_kept_one) | "LivePerShard" >> beam.CombinePerKey(sum)
        # (shard, live records)
        compacted = (pairs.pipeline
                     | "Once" >> beam.Create([None])
                     | "PlanCompaction" >> beam.FlatMap(_plan_compaction, live=beam.pvalue.AsList(live), spec=spec))
        # shard path: the parent shards whose live records are written again
        versioned = ((decided.kept, decided[DELETED_TAG])
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
        to_write = ((decided[WRITE_TAG], versioned[COMPACTED_TAG], rewritten) | "ToWrite" >> Materialize(self._shuffle))
        # ValidPair to write, flattened through files: a Flatten would hold them all in the runner
        return to_write, versioned.kept, counts, decided[LOST_TAG]


def _keyed_outcome(outcome: Outcome):
    return versions.record_key(outcome.key), outcome


def _named(element):
    """(record key, {"outcome": [Outcome], "lost": [damaged shard]}) -> each Outcome, the lost ones renamed."""
    _, grouped = element
    shards = grouped["lost"]
    for outcome in grouped["outcome"]:
        if shards and outcome.reason in reasons.SOURCE_GONE:
            outcome = dataclasses.replace(outcome, reason=reasons.PARENT_SHARD_MISSING,
                                          detail=f"its record was in the damaged parent shard {shards[0]}, and "
                                                 f"{outcome.detail}")
        yield outcome


class NameLostRecords(beam.PTransform):
    """``outcomes = rejected | NameLostRecords(lost)`` (module docstring): the rejected Outcomes, those of a record
    lost with a damaged parent shard renamed ``parent_shard_missing``."""

    def __init__(self, lost):
        super().__init__()
        self._lost = lost

    def expand(self, rejected):
        keyed = rejected | "KeyByRecord" >> beam.Map(_keyed_outcome)
        # (record key, Outcome)
        return ({"outcome": keyed, "lost": self._lost}
                | "JoinLost" >> beam.CoGroupByKey()
                # (record key, {"outcome": [Outcome], "lost": [damaged shard path]})
                | "NameLost" >> beam.FlatMap(_named))
