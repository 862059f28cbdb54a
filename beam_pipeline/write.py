"""WriteShards: size shards by bytes, spread examples by stable hash, write TFRecords.

Input: unique ValidPair. Output: ShardInfo per written shard, and rejected
Outcomes for pairs whose files changed between validation and writing.

Only metadata is shuffled. The writer reads each file again, checks it
against the SHA-256 taken at validation, and writes the record itself (one
file per shard, no grouping of record bytes), into ``<output>/.staging``;
PublishOutputs moves the shards into place.
"""

import hashlib
from typing import Dict, Tuple

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics

from beam_pipeline import io_utils
from beam_pipeline.core import checks, paths, reasons
from beam_pipeline.core.checks import Rejection
from beam_pipeline.core.example import frame_record, pair_example
from beam_pipeline.core.hashing import sha256_hex
from beam_pipeline.core.records import ClassTally, Outcome, ShardInfo, ValidPair, pack, unpack
from beam_pipeline.core.sharding import (bucket_of, num_shards_for, pack_buckets, record_order,
                                         shard_file_name)
from beam_pipeline.options import CorpusConfig

REJECTED = "rejected"
STAGING_DIR = ".staging"


def staging_dir(output: str) -> str:
    return paths.join(output, STAGING_DIR)


def _split_bytes(pair: ValidPair):
    return pair.ref.split, pair.estimated_record_bytes


def _bucket_bytes(pair: ValidPair, totals: Dict[str, int], target: int):
    shards = num_shards_for(totals[pair.ref.split], target)
    return (pair.ref.split, bucket_of(pair.ref.key, shards)), pair.estimated_record_bytes


def _regroup_by_split(element):
    (split, bucket), size = element
    return split, (bucket, size)


class PackBucketsFn(beam.DoFn):
    """(split, [(bucket, bytes), ...]) -> ((split, bucket), shard) for every bucket."""

    def __init__(self, target_shard_bytes: int):
        self._target = target_shard_bytes

    def process(self, element, totals):
        split, bucket_bytes = element
        shards = num_shards_for(totals[split], self._target)
        for bucket, shard in sorted(pack_buckets(bucket_bytes, shards).items()):
            yield (split, bucket), shard


def _assign_shard(pair: ValidPair, totals: Dict[str, int], packing: Dict[Tuple[str, int], int], target: int):
    split = pair.ref.split
    shards = num_shards_for(totals[split], target)
    return (split, packing[(split, bucket_of(pair.ref.key, shards))], shards), pack(pair)


class WriteShardFn(beam.DoFn):
    """((split, shard, num_shards), [ValidPair, ...]) -> ShardInfo; rejected Outcome for changed files."""

    def __init__(self, config: CorpusConfig):
        self._config = config
        self._records = Metrics.counter("WriteShards", "records_written")
        self._bytes = Metrics.counter("WriteShards", "bytes_written")

    def process(self, element):
        (split, index, num_shards), pairs = element
        name = shard_file_name(split, index, num_shards)
        digest = hashlib.sha256()
        records = written_bytes = 0
        tally = ClassTally(self._config.num_classes)
        with FileSystems.create(paths.join(staging_dir(self._config.output), name)) as handle:
            for pair in sorted((unpack(data) for data in pairs), key=_order_key):
                record = self._record(pair)
                if isinstance(record, Rejection):
                    Metrics.counter("WriteShards", f"rejected_{record.reason}").inc()
                    yield beam.pvalue.TaggedOutput(REJECTED, Outcome(
                        "rejected", record.reason, record.detail, key=pair.ref.key, image=pair.ref.image,
                        mask=pair.ref.mask, label=pair.ref.label))
                    continue
                framed = frame_record(record)
                handle.write(framed)
                digest.update(framed)
                records += 1
                written_bytes += len(framed)
                tally.add(pair)
        self._records.inc(records)
        self._bytes.inc(written_bytes)
        yield ShardInfo(split=split, index=index, num_shards=num_shards, path=name, records=records,
                        bytes=written_bytes, sha256=digest.hexdigest(), class_images=tally.images(),
                        class_pixels=tally.pixels(), ignore_pixels=tally.ignore)

    def _record(self, pair: ValidPair):
        """The serialized example, read again from the source and checked against its digest."""
        limits = self._config.limits
        image = self._read_verified(pair.ref.image, pair.image_sha256, "image")
        if isinstance(image, Rejection):
            return image
        if pair.image_converted:
            image = checks.check_image(image, limits).stored
        if self._config.task == "classification":
            return pair_example(pair, image)
        mask = self._read_verified(pair.ref.mask, pair.mask_sha256, "mask")
        if isinstance(mask, Rejection):
            return mask
        if pair.mask_converted:
            mask = checks.check_mask(mask, limits).stored
        return pair_example(pair, image, mask)

    def _read_verified(self, path: str, expected_sha256: str, what: str):
        data = io_utils.read_bytes(path, self._config.max_file_bytes, what)
        if isinstance(data, Rejection):
            return Rejection(reasons.CHANGED_SINCE_VALIDATION, data.detail)
        if sha256_hex(data) != expected_sha256:
            return Rejection(reasons.CHANGED_SINCE_VALIDATION, f"{what} bytes differ from those validated")
        return data


def _order_key(pair: ValidPair):
    return record_order(pair.ref.key), pair.ref.key


class WriteShards(beam.PTransform):
    """``shard_infos, rejected = unique_pairs | WriteShards(config)``."""

    def __init__(self, config: CorpusConfig):
        super().__init__()
        self._config = config

    def expand(self, pairs):
        target = self._config.target_shard_bytes
        totals = beam.pvalue.AsDict(
            pairs
            | "EstimateBytes" >> beam.Map(_split_bytes)
            # (split, record bytes)
            | "SumBytesPerSplit" >> beam.CombinePerKey(sum))
            # (split, total bytes)
        packing = beam.pvalue.AsDict(
            pairs
            | "BucketBytes" >> beam.Map(_bucket_bytes, totals=totals, target=target)
            # ((split, bucket), record bytes)
            | "SumBytesPerBucket" >> beam.CombinePerKey(sum)
            # ((split, bucket), bucket bytes)
            | "RegroupBySplit" >> beam.Map(_regroup_by_split)
            | "GroupBucketsBySplit" >> beam.GroupByKey()
            # (split, [(bucket, bytes), ...])
            | "PackBuckets" >> beam.ParDo(PackBucketsFn(target), totals=totals))
            # ((split, bucket), shard)
        outputs = (pairs
                   | "AssignShards" >> beam.Map(_assign_shard, totals=totals, packing=packing, target=target)
                   # ((split, shard, num_shards), packed ValidPair)
                   | "GroupByShard" >> beam.GroupByKey()
                   # ((split, shard, num_shards), [packed ValidPair, ...])
                   | "WriteShardFiles" >> beam.ParDo(WriteShardFn(self._config)).with_outputs(
                       REJECTED, main="shards"))
                   # ShardInfo | rejected Outcome
        return outputs.shards, outputs[REJECTED]
