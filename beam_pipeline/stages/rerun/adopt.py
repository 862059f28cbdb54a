"""AdoptKilledSpill: a re-run after a kill takes the killed run's spill files as shards of its version, instead of
copying their records into new ones (docs/cache.md, docs/incremental.md).

On a local disk validation appends each pair's record, framed exactly as a shard frames it, to one spill file per
worker process and split (io/cache/spill.ProcessSpill), and flushes it before each verdicts part commits. A run
killed before its commit leaves those files and the verdicts that point into them; the re-run restores the
verdicts (ValidatePairs), and here every spill file of another run that holds records this run writes becomes a
shard of this run's version:

* its records up to the last one this run keeps stay where they are; the file is hard-linked into the version
  folder (``runs/<run_id>/resumed/<split>-<i>-of-<n>.tfrecord``, no byte copied) and cut after that record;
* the records before it that this version does not hold (their verdicts part never committed, a duplicate, a pair
  now filtered out or rejected) are the shard's deleted records, as a re-run's deletions are (core/rerun/versions.py);
* its keys file and class-index part are written beside it, and its SHA-256 is taken by reading it once.

A file is not adopted, and its pairs go to WriteShards, when fewer than half its records would be live
(``--compact auto``'s rule), when a record does not match what the verdict says was written there, or when the file
cannot be linked into the version folder (another disk). ``--compact all`` adopts nothing: every record is written
again, as a fresh run writes it.

Input: ValidPair to write. Outputs: ValidPair still to write (main), a ShardInfo per adopted file (``shards``) and
``("adopted", n)`` counts (``counts``). Only a pair's metadata crosses the shuffle; each file is read by one worker.
"""

import hashlib
from typing import List, Optional, Tuple

import apache_beam as beam

from beam_pipeline import phases
from beam_pipeline.core import layout, paths
from beam_pipeline.core.rerun import spill, versions
from beam_pipeline.core.records import ShardInfo, ValidPair
from beam_pipeline.core.sharding import shard_file_name
from beam_pipeline.io import stores
from beam_pipeline.stages import worker
from beam_pipeline.stages.shard_files import ShardSideFiles
from beam_pipeline.stages.shuffle import GroupPackedByKey, Materialize
from beam_pipeline.stages.specs import AdoptSpec, ShuffleSpec

SHARDS_TAG, COUNTS_TAG = "shards", "counts"
ADOPTED = "adopted"


def file_split(path: str) -> str:
    """The split a local spill file holds (io/cache/spill.ProcessSpill names it
    ``<run_id>-<process>-<split>-<sequence>.spill``, the split with every character but [A-Za-z0-9_.] as _)."""
    return path.rsplit("/", 1)[-1].split("-")[3]


def _adoptable(pair: ValidPair, spec: AdoptSpec) -> bool:
    return (spec.enabled and pair.copy == 0 and pair.stratum < 0 and bool(pair.spill)
            and spill.adoptable(pair.spill, spec.run_id)
            and spill.verbatim(pair.spill, pair.copy, pair.ref.source_id)
            and versions.reusable_group(pair.shard_group, spec.balance)
            and file_split(pair.spill[0]) == spill.split_in_name(pair.ref.split or ""))


class _Frames:
    """The framed records of a spill file read from its start, checked against what the kept pairs' verdicts say."""

    def __init__(self, path: str, claimed: dict, end: int):
        self.records: List[Tuple[int, Optional[ValidPair]]] = []   # (framed bytes, the live pair or None)
        self.cut = 0                                               # the end of the last live record
        self.sha256 = ""
        self.mismatched: List[ValidPair] = []
        digest = hashlib.sha256()
        at = 0
        with open(path, "rb") as handle:
            while at < end:
                header = handle.read(spill.FRAME_HEADER)
                length = spill.frame_length(header)
                if length is None:
                    break
                body = handle.read(length + spill.FRAME_FOOTER)
                if len(body) < length + spill.FRAME_FOOTER:
                    break
                digest.update(header)
                digest.update(body)
                pair = claimed.pop(at, None)
                size = len(header) + len(body)
                if pair is not None and not (size == pair.spill[2]
                                             and spill.checksum((header, body)) == pair.spill[3]):
                    self.mismatched.append(pair)
                    pair = None
                self.records.append((size, pair))
                at += size
                if pair is not None:
                    self.cut, self.sha256 = at, digest.hexdigest()
        self.mismatched.extend(claimed.values())            # not at a record's start, or past the file's end
        while self.records and self.records[-1][1] is None:
            self.records.pop()

    @property
    def live(self) -> int:
        return sum(1 for _, pair in self.records if pair is not None)


class AdoptFileFn(beam.DoFn):
    """(spill file, [ValidPair, ...]) -> the adopted shard's ShardInfo (``shards``) and ("adopted", n) (``counts``),
    or the pairs themselves (main: written by WriteShards) when the file is not adopted."""

    def __init__(self, spec: AdoptSpec):
        self._spec = spec

    def setup(self):
        worker.prepare_sdk_worker()

    def process(self, element, files, refusals):
        path, pairs = element
        if refusals:
            return
        pairs = list(pairs)
        claimed = {pair.spill[1]: pair for pair in pairs}
        if len(claimed) < len(pairs):                       # two pairs on one record: not from one validation
            yield from pairs
            return
        try:
            frames = _Frames(path, dict(claimed), max(p.spill[1] + p.spill[2] for p in pairs))
        except OSError:
            yield from pairs                                # gone or unreadable: the writer reads the sources
            return
        yield from frames.mismatched
        live = frames.live
        mostly_deleted = live < versions.LIVE_SHARE * len(frames.records)
        if not live or (self._spec.compact != versions.COMPACT_NEVER and mostly_deleted):
            yield from (pair for _, pair in frames.records if pair is not None)
            return
        group = pairs[0].shard_group
        in_group = sorted(f for g, f in files if g == group)
        name = f"{layout.ADOPTED_DIR}/{shard_file_name(group, in_group.index(path), len(in_group))}"
        target = paths.join(self._spec.data_dir, name)
        phases.reached(phases.WRITE_SHARD)                   # a shard of the version is made here
        if not stores.link_prefix(path, target, frames.cut):
            yield from (pair for _, pair in frames.records if pair is not None)
            return
        yield beam.pvalue.TaggedOutput(SHARDS_TAG, self._shard_info(name, group, frames))
        yield beam.pvalue.TaggedOutput(COUNTS_TAG, (ADOPTED, live))

    def _shard_info(self, name: str, group: str, frames: _Frames) -> ShardInfo:
        spec = self._spec
        side = ShardSideFiles(spec.data_dir, spec.version, name, spec.num_classes)
        deleted, split = [], group
        for index, (size, pair) in enumerate(frames.records):
            if pair is None:
                deleted.append(index)
                side.add_deleted(size)
            else:
                split = pair.ref.split
                side.add(pair, size)
        return side.info(group, split, bytes=frames.cut, sha256=frames.sha256, deleted=tuple(deleted))


def _by_file(pair: ValidPair):
    return pair.spill[0], pair


def _group_and_file(pair: ValidPair):
    return pair.shard_group, pair.spill[0]


class AdoptKilledSpill(beam.PTransform):
    """``to_write, shards, counts = pairs | AdoptKilledSpill(AdoptSpec(...), refusals, ShuffleSpec())`` (module
    docstring)."""

    def __init__(self, spec: AdoptSpec, refusals, shuffle: ShuffleSpec = ShuffleSpec()):
        super().__init__()
        self._spec = spec
        self._refusals = refusals
        self._shuffle = shuffle

    def expand(self, pairs):
        spec = self._spec
        adoptable, others = pairs | "SplitAdoptable" >> beam.Partition(
            lambda pair, _: 0 if _adoptable(pair, spec) else 1, 2)
        # ValidPair whose record is in a killed run's local spill file | ValidPair to write
        files = (adoptable
                 | "GroupAndFile" >> beam.Map(_group_and_file)
                 | "DistinctFiles" >> beam.Distinct()
                 | "ListFiles" >> beam.combiners.ToList())
        # [(shard group, spill file), ...]: names the adopted shards of each group
        adopted = (adoptable
                   | "KeyBySpillFile" >> beam.Map(_by_file)
                   # (spill file, ValidPair)
                   | "GroupBySpillFile" >> GroupPackedByKey(self._shuffle)
                   # (spill file, [ValidPair, ...])
                   | "AdoptFiles" >> beam.ParDo(
                       AdoptFileFn(spec), files=beam.pvalue.AsSingleton(files),
                       refusals=beam.pvalue.AsList(self._refusals)).with_outputs(SHARDS_TAG, COUNTS_TAG, main="pairs"))
        # ValidPair of a file not adopted | ShardInfo of an adopted file | ("adopted", n)
        to_write = (others, adopted.pairs) | "StillToWrite" >> Materialize(self._shuffle)
        # ValidPair still to write, flattened through files: a Flatten would hold them all in the runner
        return to_write, adopted[SHARDS_TAG], adopted[COUNTS_TAG]

