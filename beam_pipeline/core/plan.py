"""The arithmetic of ``--plan``: from a measured sample of pairs to estimates for the whole run.

Counts of discovered and selected pairs, and the split of each, are exact
(the listing is cheap: paths and metadata only). Everything that needs the
file contents (sizes, rejects, record bytes, CPU, memory) is measured on a
sample chosen by stable hash and scaled up. Pure: no Beam, no TensorFlow.
"""

import dataclasses
import math
from typing import Dict, List, Mapping, Sequence

from beam_pipeline.core.balance import class_repeat_factors, expected_growth, image_repeat_factor
from beam_pipeline.core.records import VALID
from beam_pipeline.core.selection import TRAIN
from beam_pipeline.core.sharding import num_shards_for
from beam_pipeline.core.rerun.verdicts import NUM_BUCKETS, VERDICTS_PER_PART

# Work the pipeline does per pair beyond what the sample measures (validation, the re-read,
# the digest and the encoding): Beam's per-element overhead, the shuffles and tf.Transform.
# How it was measured and chosen: docs/plan.md.
PIPELINE_OVERHEAD = 1.25
# Each pair crosses three shuffles as metadata: the spread over workers (PairRef), the
# grouping by content for deduplication and the grouping by shard (ValidPair each).
SHUFFLES_OF_REF = 1
SHUFFLES_OF_PAIR = 2
# An SDK worker peaks above a process that only loads the same libraries and checks the same
# pairs (Beam's bundle buffers, tf.Transform's record batches); measured with bench/plan_accuracy.py
# (docs/plan.md).
MEMORY_HEADROOM = 1.35
WRITER_READ_AHEAD = 2        # write.READ_THREADS: records read ahead while a shard is written

# Object-store requests (gs://, s3://): the model of docs/runners.md, "Cost per TB", from Beam 2.70's filesystems.
# Opening a file costs a metadata request (GCS: objects.get in gcsio.BeamBlobReader; S3: HEAD in
# s3io.S3Downloader) and one ranged GET per 16 MiB (their read buffer); pairs.read_file stops at the short
# read that ends a file, so a file of up to 16 MiB costs 2. Counted against a GCS JSON-API emulator.
REQUESTS_PER_OPEN = 2
SPILL_REQUESTS_PER_RECORD = 1   # the writer's read of a record's spill entry: one ranged GET (io/streams.read_ranges)
LIST_PAGE_OBJECTS = 1000     # objects per listing page (GCS objects.list, S3 ListObjectsV2)
# Writing a shard: GCS resumable upload (gcsio.BeamBlobWriter): a start request and one per 16 MiB chunk;
# S3 multipart upload (s3io.S3Uploader): create, one part per 5 MiB, complete. Then publishing moves the
# shard into place: a copy (Beam's rename is copy + delete, and deletes are not billed).
UPLOAD_CHUNK_BYTES = {"gs://": 16 * 1024 * 1024, "s3://": 5 * 1024 * 1024}
UPLOAD_FIXED_REQUESTS = {"gs://": 1, "s3://": 2}
MOVE_REQUESTS = 1
TB = 10**12


@dataclasses.dataclass(frozen=True)
class PairSample:
    """What measuring one sampled pair gave."""
    split: str
    status: str                 # VALID or REJECTED (core/records.py)
    reason: str                 # Reject reason, "" when valid.
    file_bytes: int             # Bytes of the image and mask files read.
    record_bytes: int           # Bytes of its TFRecord record (0 when rejected).
    ref_bytes: int              # Bytes of the shuffled PairRef.
    pair_bytes: int             # Bytes of the shuffled ValidPair (0 when rejected).
    cpu_seconds: float          # CPU time of the pipeline's per-pair work, measured.
    present_classes: tuple = ()
    class_pixels: tuple = ()    # segmentation: the pair's class histogram, its ignore pixels, and (mapped
    ignore_pixels: int = 0      # masks) the source values it holds, for the sample's mask values and warnings
    source_pixels: tuple = ()
    detail: str = ""            # rejected: its detail (the mask values it names, for the reject gate's message)
    phash: bytes = b""          # valid: its image's perceptual hash (the near-duplicate estimate: docs/leakage.md)


def sample_splits(samples: List[PairSample], num_classes: int) -> Dict[str, dict]:
    """The valid samples' class tallies per split, in manifest.json's shape (core/masks/report.py reads it)."""
    splits: Dict[str, dict] = {}
    for s in samples:
        if s.status != VALID:
            continue
        entry = splits.setdefault(s.split, {"num_images": 0, "class_images": [0] * num_classes,
                                            "class_pixels": [0] * num_classes if s.class_pixels else [],
                                            "ignore_pixels": 0})
        entry["num_images"] += 1
        for c in s.present_classes:
            entry["class_images"][c] += 1
        for c, pixels in enumerate(s.class_pixels):
            entry["class_pixels"][c] += pixels
        entry["ignore_pixels"] += s.ignore_pixels
    return splits


def sample_mask_values(samples: List[PairSample]) -> Dict[int, tuple]:
    """``{source: (pixels, masks)}`` over the valid samples (mapped masks)."""
    totals: Dict[int, list] = {}
    for s in samples:
        for source, pixels in s.source_pixels if s.status == VALID else ():
            tally = totals.setdefault(source, [0, 0])
            tally[0] += pixels
            tally[1] += 1
    return {source: tuple(tally) for source, tally in sorted(totals.items())}


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _scaled(count: int, part: int, whole: int) -> int:
    return round(count * part / whole) if whole else 0


def estimate(*, discovered: int, selected_by_split: Mapping[str, int], samples: List[PairSample],
             target_shard_bytes: int, balance: str, balance_threshold: float, num_classes: int,
             sample_worker_rss_bytes: int) -> dict:
    """Estimates for the full run; see docs/plan.md for each formula."""
    selected = sum(selected_by_split.values())
    valid = [s for s in samples if s.status == VALID]
    valid_share = len(valid) / len(samples) if samples else 0.0
    reject_reasons: Dict[str, int] = {}
    for s in samples:
        if s.status != VALID:
            reject_reasons[s.reason] = reject_reasons.get(s.reason, 0) + 1
    record_bytes = _mean([s.record_bytes for s in valid])
    pair_bytes = _mean([s.pair_bytes for s in valid])
    growth = _train_growth([s for s in valid if s.split == TRAIN], balance, balance_threshold, num_classes)
    splits = {}
    for split, count in sorted(selected_by_split.items()):
        records = count * valid_share * (growth if split == TRAIN else 1.0)
        total = records * record_bytes
        shards = num_shards_for(int(total), target_shard_bytes) if records >= 1 else 0
        splits[split] = {"records": round(records), "bytes": round(total), "shards": shards,
                         "shard_bytes": round(total / shards) if shards else 0}
    written = selected * valid_share
    shuffle = (selected * _mean([s.ref_bytes for s in samples]) * SHUFFLES_OF_REF
               + written * pair_bytes * SHUFFLES_OF_PAIR)
    cpu_per_pair = _mean([s.cpu_seconds for s in samples])
    largest_shard = max((entry["shard_bytes"] for entry in splits.values()), default=0)
    records_per_shard = largest_shard / record_bytes if record_bytes else 0
    memory_per_core = (sample_worker_rss_bytes * MEMORY_HEADROOM
                       + records_per_shard * pair_bytes
                       + WRITER_READ_AHEAD * max((s.record_bytes for s in valid), default=0))
    return {
        "sample_pairs": len(samples),
        "discovered": discovered,
        "selected": selected,
        "input_bytes": round(selected * _mean([s.file_bytes for s in samples])),
        "written": round(written),
        "rejected": {reason: _scaled(selected, n, len(samples)) for reason, n in sorted(reject_reasons.items())},
        "train_growth": growth,
        "splits": splits,
        "output_bytes": sum(entry["bytes"] for entry in splits.values()),
        "shuffle_bytes": round(shuffle),
        "worker_memory_per_core_bytes": round(memory_per_core),
        "cpu_seconds_per_pair": cpu_per_pair,
        "vcpu_hours": selected * cpu_per_pair * PIPELINE_OVERHEAD / 3600.0,
    }


def object_store_requests(*, files_per_pair: int, validated_pairs: int, written_records: int,
                          listed_objects: int, shard_sizes: Sequence[int], input_bytes: int,
                          output_scheme: str = "gs://", cache: bool = True) -> dict:
    """The requests a run makes when its input and output are on an object store.

    Every validated pair's files are opened once by validation: REQUESTS_PER_OPEN GETs each. With the
    verdict cache on, validation first asks each file's version (one metadata request; its pre-key,
    docs/cache.md), and keeps the bytes each record stores in the cache's spill (core/rerun/spill.py): a spill
    file beside each verdicts part, about the input's bytes in all. The writer then reads each record's
    spill entry (SPILL_REQUESTS_PER_RECORD, on the cache's store; repeat-factor copies included) and no
    source file. Without the cache it opens every written record's files again to re-read and verify them.
    This counts a first run, when nothing is cached. A folder input is listed a page of
    LIST_PAGE_OBJECTS objects at a time (a listing file input lists nothing). Each shard is uploaded in
    chunks and moved into place; the cache's files are uploaded where they stay (a bucket's part, and
    its spill, at least every VERDICTS_PER_PART verdicts). ``per_tb`` divides by the terabytes of input read.
    """
    validation = validated_pairs * files_per_pair * (REQUESTS_PER_OPEN + (1 if cache else 0))
    reread = 0 if cache else written_records * files_per_pair * REQUESTS_PER_OPEN
    spill_reads = written_records * SPILL_REQUESTS_PER_RECORD if cache else 0
    pages = math.ceil(listed_objects / LIST_PAGE_OBJECTS)
    chunk = UPLOAD_CHUNK_BYTES.get(output_scheme, UPLOAD_CHUNK_BYTES["gs://"])
    fixed = UPLOAD_FIXED_REQUESTS.get(output_scheme, UPLOAD_FIXED_REQUESTS["gs://"])
    uploads = sum(fixed + max(1, math.ceil(size / chunk)) + MOVE_REQUESTS for size in shard_sizes)
    cache_uploads = 0
    if cache and validated_pairs:
        # the buckets that hold a pair (their expected number), and one more part per VERDICTS_PER_PART verdicts
        buckets = round(NUM_BUCKETS * (1 - (1 - 1 / NUM_BUCKETS) ** validated_pairs))
        parts = buckets + validated_pairs // VERDICTS_PER_PART
        # each part: its verdicts (a start and one chunk) and its spill (a start and its chunks)
        cache_uploads = parts * (2 * fixed + 1) + max(parts, math.ceil(input_bytes / chunk))
    terabytes = input_bytes / TB
    totals = {"gets": validation + reread + spill_reads, "list_pages": pages, "uploads": uploads + cache_uploads}
    return {"validation_gets": validation, "reread_gets": reread, "spill_gets": spill_reads,
            "shard_uploads": uploads, "cache_uploads": cache_uploads, **totals,
            "per_tb": {name: (value / terabytes if terabytes else 0.0) for name, value in totals.items()}}


def _train_growth(train: List[PairSample], balance: str, threshold: float, num_classes: int) -> float:
    """Repeat-factor growth of the train split, with class presence taken from the sample."""
    if balance != "repeat_factor" or not train:
        return 1.0
    presence = [0] * num_classes
    for s in train:
        for c in s.present_classes:
            presence[c] += 1
    factors = class_repeat_factors(presence, len(train), threshold)
    return expected_growth([image_repeat_factor(s.present_classes, factors) for s in train])


def human_bytes(value: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(value) < 1000 or unit == "TB":
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1000.0
    return f"{value:.1f} TB"


def human_count(value: float) -> str:
    """``950``, ``12,400``, ``3.1 M``."""
    return f"{value / 1e6:,.1f} M" if value >= 1e6 else f"{value:,.0f}"


def shards_line(entry: Mapping[str, int]) -> str:
    if not entry["shards"]:
        return "no records"
    return f"{entry['shards']} shard(s) of ~{human_bytes(entry['shard_bytes'])}"

