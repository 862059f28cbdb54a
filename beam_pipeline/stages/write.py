"""WriteShards: size shards by bytes, spread examples by stable hash, write TFRecords.

Input: unique ValidPair (with repeat copies and strata when balancing), and
the run's refusals (core.records.Refusal: when there is one, nothing is
written). Output: ShardInfo per written shard, rejected Outcomes for pairs
whose files changed between validation and writing, and class-index lines for
the train split.

Only metadata is shuffled. Examples fall into hash buckets; the byte total of
every (bucket, copy) is packed onto shards (core/sharding.py), keeping the
copies of one image on different shards. The writer copies each pair's bytes
from validation's spill, or reads its files again and checks them against the
SHA-256 taken at validation (pairs.framed_record_pieces), and writes the records itself (one file per
shard, no grouping of record bytes) straight
into the run's version folder (``runs/<run_id>/``, core/layout.py): nothing is
renamed afterwards (a rename is a copy on object stores), and no reader looks
there until the launcher commits the version by writing manifest.json. A write
that fails raises an error naming the shard and the cause.
"""

import hashlib
from typing import Iterable, Iterator, Tuple

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics

from beam_pipeline import phases
from beam_pipeline.core import paths
from beam_pipeline.core.reasons import Rejection
from beam_pipeline.core.failures import write_failed
from beam_pipeline.core.progress import PAIRS_WRITTEN, RECORDS_WRITTEN, REJECTED_PREFIX
from beam_pipeline.core.records import REJECTED, Outcome, ValidPair
from beam_pipeline.core.sharding import (bucket_of, num_shards_for, pack_buckets, record_order, same_images,
                                         shard_file_name)
from beam_pipeline.io.ahead import mapped_ahead
from beam_pipeline.stages import counters, pairs, worker
from beam_pipeline.stages.shard_files import ShardSideFiles
from beam_pipeline.stages.shuffle import GroupPackedByKey, Materialize
from beam_pipeline.stages.specs import REJECTED_TAG, ShuffleSpec, WriteSpec

READ_AHEAD = 8          # Records read, checked and encoded ahead of the one being written.
READ_THREADS = 2        # File reads, SHA-256 and zlib release the GIL, so threads overlap them.


def _bucket_bytes(pair: ValidPair):
    return (pair.shard_group, bucket_of(pair.ref.key), pair.copy), pair.estimated_record_bytes


def _regroup_by_group(element):
    (group, bucket, copy), size = element
    return group, ((bucket, copy), size)


class PackBucketsFn(beam.DoFn):
    """(group, [((bucket, copy), bytes), ...]) -> ((group, bucket, copy), (shard, num_shards)) for every item."""

    def __init__(self, target_shard_bytes: int):
        self._target = target_shard_bytes

    def process(self, element):
        group, item_bytes = element
        item_bytes = list(item_bytes)
        shards = num_shards_for(sum(size for _, size in item_bytes), self._target)
        for (bucket, copy), shard in sorted(pack_buckets(item_bytes, shards, group_of=same_images).items()):
            yield (group, bucket, copy), (shard, shards)


class AssignShardFn(beam.DoFn):
    """ValidPair -> ((group, shard, num_shards), ValidPair); nothing when the run is refused."""

    def process(self, pair: ValidPair, packing, refusals):
        if refusals:
            return
        group = pair.shard_group
        shard, shards = packing[(group, bucket_of(pair.ref.key), pair.copy)]
        yield (group, shard, shards), pair


class WriteShardFn(counters.CountingDoFn):
    """((group, shard, num_shards), [ValidPair, ...]) -> ShardInfo, rejected Outcomes. Beside the shard it writes
    its keys file and its part of the class index (stages/shard_files.py)."""

    def __init__(self, spec: WriteSpec):
        self._spec = spec
        self._records = counters.counter(*RECORDS_WRITTEN)
        self._pairs = counters.counter(*PAIRS_WRITTEN)
        self._bytes = Metrics.counter("WriteShards", "bytes_written")

    def setup(self):
        worker.prepare_sdk_worker()

    def process(self, element):
        (group, index, num_shards), group_pairs = element
        name = shard_file_name(group, index, num_shards)
        side = ShardSideFiles(self._spec.data_dir, self._spec.version, name, self._spec.check.limits.num_classes)
        digest = hashlib.sha256()
        split = stratum = None
        ordered = sorted(group_pairs, key=_order_key)
        path = paths.join(self._spec.data_dir, name)
        try:
            handle = FileSystems.create(path)
        except OSError as error:
            raise write_failed(path, error) from error
        with _closing_or_failed(handle, path):
            for pair, record in self._records_in_order(ordered):
                split, stratum = pair.ref.split, pair.stratum
                if isinstance(record, Rejection):
                    counters.counter(PAIRS_WRITTEN[0], f"{REJECTED_PREFIX}{record.reason}").inc()
                    yield beam.pvalue.TaggedOutput(REJECTED_TAG, Outcome.for_ref(
                        pair.ref, REJECTED, record.reason, record.detail))
                    continue
                framed_bytes = 0                        # the framed record's size
                for piece in record:                   # framed; the image's and mask's bytes as read, never copied
                    handle.write(piece)
                    digest.update(piece)
                    framed_bytes += len(piece)
                if side.records == 0:
                    phases.reached(phases.WRITE_SHARD)
                side.add(pair, framed_bytes)
                self._records.inc()
                if pair.copy == 0:
                    self._pairs.inc()
        self._bytes.inc(side.tally.live_bytes)
        yield side.info(group, split or group, bytes=side.tally.live_bytes, sha256=digest.hexdigest(),
                        stratum=-1 if stratum is None else stratum)

    def _records_in_order(self, ordered: Iterable[ValidPair]) -> Iterator[Tuple[ValidPair, object]]:
        """(pair, record or Rejection) in the given order, prepared a few records ahead on threads.

        At most READ_AHEAD records are in memory at once, whatever the shard size.
        """
        check = self._spec.check
        return mapped_ahead(lambda pair: pairs.framed_record_pieces(pair, check), ordered, READ_THREADS, READ_AHEAD)


class _closing_or_failed:
    """Close a shard's handle on leaving; an OSError while writing or closing names the shard."""

    def __init__(self, handle, path: str):
        self._handle = handle
        self._path = path

    def __enter__(self):
        return self._handle

    def __exit__(self, kind, error, traceback):
        if kind is not None:
            _close_quietly(self._handle)
            if isinstance(error, OSError):
                raise write_failed(self._path, error) from error
            return False
        try:
            self._handle.close()
        except OSError as close_error:
            raise write_failed(self._path, close_error) from close_error
        return False


def _close_quietly(handle) -> None:
    try:
        handle.close()
    except OSError:
        pass                  # the first error is the one reported


def _order_key(pair: ValidPair):
    return record_order(pair.shard_key), pair.shard_key


class WriteShards(beam.PTransform):
    """``shard_infos, rejected = valid | WriteShards(WriteSpec(data_dir, check, ...), refusals, ShuffleSpec())``."""

    def __init__(self, spec: WriteSpec, refusals, shuffle: ShuffleSpec = ShuffleSpec()):
        super().__init__()
        self._spec = spec
        self._refusals = refusals
        self._shuffle = shuffle

    def expand(self, valid):
        packing = beam.pvalue.AsDict(
            valid
            | "BucketBytes" >> beam.Map(_bucket_bytes)
            # ((group, bucket, copy), record bytes)
            | "SumBytesPerBucket" >> beam.CombinePerKey(sum)
            # ((group, bucket, copy), bytes)
            | "RegroupByGroup" >> beam.Map(_regroup_by_group)
            | "GroupBucketsByGroup" >> beam.GroupByKey()
            # (group, [((bucket, copy), bytes), ...])
            | "PackBuckets" >> beam.ParDo(PackBucketsFn(self._spec.target_shard_bytes)))
            # ((group, bucket, copy), (shard, num_shards))
        outputs = (valid
                   | "HoldForShardSizes" >> Materialize(self._shuffle)
                   # ValidPair, held (in files, or by the runner) until the shard sizes are known
                   | "AssignShards" >> beam.ParDo(
                       AssignShardFn(), packing=packing, refusals=beam.pvalue.AsList(self._refusals))
                   # ((group, shard, num_shards), ValidPair); nothing when the run is refused
                   | "GroupByShard" >> GroupPackedByKey(self._shuffle)
                   # ((group, shard, num_shards), [ValidPair, ...])
                   | "WriteShardFiles" >> beam.ParDo(WriteShardFn(self._spec)).with_outputs(
                       REJECTED_TAG, main="shards"))
                   # ShardInfo (with its keys file and class index part) | rejected Outcome
        return outputs.shards, outputs[REJECTED_TAG]
