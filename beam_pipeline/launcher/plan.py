"""``--plan``: a dry run that estimates a full run from a sample, and writes nothing.

1. List the input as the pipeline does (paths and metadata only) and apply the
   user's selection and splits to every pair: these counts are exact.
2. Keep the ``--plan_sample`` selected pairs with the smallest stable hash
   (the same sample every time; memory bounded by the sample size).
3. Do the pipeline's per-pair work on them in a process per core, with the
   pipeline's own functions: read and check both files, then encode the record
   from the bytes validation keeps in its spill, as the writer does (with
   --no_cache: read the files again and verify their digest). Measure the
   bytes, the outcome, the CPU time and the worker processes' peak memory.
4. Scale up with :func:`beam_pipeline.core.plan.estimate`, and count the object-store requests
   of the run with :func:`beam_pipeline.core.plan.object_store_requests`.

Discovery, selection, checks and records are beam_pipeline/stages/pairs.py's, the
functions the pipeline's composites call. Paired folders are estimated from
the image listing: a missing mask shows in the sample as ``missing_file`` where
the real run reports ``orphan_image``, and masks without an image are not
counted.
"""

import concurrent.futures
import heapq
import logging
import os
import resource
import time
from typing import List, Tuple

from beam_pipeline.core.reasons import Rejection
from beam_pipeline.core.example import frame_record, pair_example
from beam_pipeline.core.gates import offending_values, reject_refusal, summed, top_values, train_refusal
from beam_pipeline.core.hashing import stable_hash
from beam_pipeline.core.paths import split_scheme
from beam_pipeline.core.masks.report import class_warnings, mask_values_table
from beam_pipeline.core.plan import (REQUESTS_PER_OPEN, UPLOAD_CHUNK_BYTES, PairSample, estimate, human_bytes,
                                     human_count, object_store_requests, sample_mask_values, sample_splits,
                                     shards_line)
from beam_pipeline.core.records import REJECTED, VALID, Outcome, pack, unpack
from beam_pipeline.core.selection import SplitSpec
from beam_pipeline.core.tasks import units
from beam_pipeline.launcher.config import CorpusConfig
from beam_pipeline.core.leakage.groups import OFF
from beam_pipeline.core.leakage.summary import plan_estimate, plan_line
from beam_pipeline.launcher.summary import mask_values_lines
from beam_pipeline.stages import pairs
from beam_pipeline.stages.specs import CLASS_FOLDERS, PAIRED, CheckSpec

PLAN_SALT = "plan"
PROGRESS_EVERY = 100_000

_LOG = logging.getLogger("beam_pipeline.plan")        # the name it had before the launcher/ folder


def _load_worker_libraries(compute_stats: bool) -> None:
    """Make a sample process as big as a pipeline worker: with statistics, workers run tf.Transform."""
    if compute_stats:
        import tensorflow_transform.beam  # noqa: F401  (imported for its memory, like a worker's)


def _measure(packed_ref: bytes, spec: CheckSpec, spill: bool = True) -> PairSample:
    """The pipeline's per-pair work on one pair, timed in CPU seconds. With the verdict cache (``spill``) the
    writer encodes the bytes validation kept (core/rerun/spill.py), without it it reads the files again."""
    started = time.process_time()
    ref = unpack(packed_ref)
    ref_bytes = len(packed_ref)
    read = pairs.read_files(ref, spec)
    checked = read if isinstance(read, Rejection) else pairs.checked_bytes(ref, spec, *read)
    if isinstance(checked, Rejection):
        return PairSample(ref.split, REJECTED, checked.reason, 0, 0, ref_bytes, 0, time.process_time() - started,
                          detail=checked.detail)
    result = checked.pair
    stored = pairs.stored_files(checked, read[1], spec) if spill else None
    record = pair_example(result, *stored) if stored is not None else pairs.record(result, spec)
    if isinstance(record, Rejection):
        return PairSample(ref.split, REJECTED, record.reason, 0, 0, ref_bytes, 0, time.process_time() - started)
    framed = frame_record(record)
    return PairSample(ref.split, VALID, "", result.image_stored_bytes + result.mask_stored_bytes,
                      len(framed), ref_bytes, len(pack(result)), time.process_time() - started,
                      result.present_classes, result.class_pixels, result.ignore_pixels, result.source_pixels,
                      phash=result.phash)


def _select(config: CorpusConfig, split_spec: SplitSpec, sample_size: int):
    """Exact counts of the listing and selection, and the sample (smallest stable hashes)."""
    discovered = 0
    by_split = {}
    sample: List[Tuple[int, bytes]] = []       # bounded max-heap of (-hash, packed ref)
    select_spec = config.select_spec(split_spec)
    for item in pairs.discover(config.discover_spec()):
        discovered += 1
        if discovered % PROGRESS_EVERY == 0:
            _LOG.info("--plan: listed %d inputs", discovered)
        selected = item if isinstance(item, Outcome) else pairs.select(item, select_spec)
        if isinstance(selected, Outcome):
            continue
        by_split[selected.split] = by_split.get(selected.split, 0) + 1
        _push_bounded(sample, (-stable_hash(PLAN_SALT, selected.key), pack(selected)), sample_size)
    selected_count = sum(by_split.values())
    if config.max_examples is not None and selected_count > config.max_examples:    # the cap keeps a hash sample
        by_split = {k: round(v * config.max_examples / selected_count) for k, v in by_split.items()}
    return discovered, by_split, pairs.with_drawings(config.discover_spec(), [packed for _, packed in sample])


def _push_bounded(heap: list, item, size: int) -> None:
    if len(heap) < size:
        heapq.heappush(heap, item)
    elif item > heap[0]:
        heapq.heapreplace(heap, item)


def make_plan(config: CorpusConfig, split_spec: SplitSpec, sample_size: int, workers: int = 0) -> dict:
    """The estimates of :func:`beam_pipeline.core.plan.estimate`, plus how long planning took."""
    started = time.monotonic()
    discovered, by_split, sample = _select(config, split_spec, sample_size)
    workers = workers or os.cpu_count() or 1
    with concurrent.futures.ProcessPoolExecutor(max_workers=workers, initializer=_load_worker_libraries,
                                                initargs=(config.compute_stats,)) as pool:
        samples = list(pool.map(_measure, sample, [config.check_spec()] * len(sample),
                                [config.use_cache] * len(sample), chunksize=8))
    # ru_maxrss of children: the largest worker process's peak, in KiB on Linux.
    worker_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    plan = estimate(discovered=discovered, selected_by_split=by_split, samples=samples,
                    target_shard_bytes=config.target_shard_bytes, balance=config.balance,
                    balance_threshold=config.balance_threshold, num_classes=config.num_classes,
                    sample_worker_rss_bytes=worker_rss)
    plan["requests"] = _requests(config, plan)
    plan.update(_masks_and_warnings(config, samples))
    plan["refusals"] = _refusals(config, plan, samples)
    if config.near_duplicates != OFF:
        plan["near_duplicates"] = plan_estimate([s.phash for s in samples], plan["selected"],
                                                config.near_duplicates_radius)
    plan["unit"] = units(config.task)
    plan["planning_seconds"] = time.monotonic() - started
    return plan


def _masks_and_warnings(config: CorpusConfig, samples: List[PairSample]) -> dict:
    """What the summary says of the masks and classes, on the sample: the source values and the warnings."""
    limits = config.limits
    names = list(config.class_names) or [str(c) for c in range(config.num_classes)]
    values = (mask_values_table(config.mask_map, sample_mask_values(samples), names, config.num_classes,
                                limits.ignore_label) if config.mask_map is not None else [])
    warnings = class_warnings(task=config.task, num_classes=config.num_classes, class_names=names,
                              ignore_label=limits.ignore_label, splits=sample_splits(samples, config.num_classes),
                              mask=config.mask_map, labels=config.label_map, values=values)
    return {"mask_values": values, "maps": {"source": config.mask_map.source} if config.mask_map else None,
            "warnings": warnings}


def _refusals(config: CorpusConfig, plan: dict, samples: List[PairSample]) -> List[str]:
    """What the real run's gates would say before writing, estimated on the sample: the reject rate (with the
    values rejected most often, and their fix) and the train split (its presence is exact)."""
    totals: dict = {}
    for sample in samples:
        outcome = Outcome(REJECTED, sample.reason, sample.detail, key="", image=None)
        for key, value in (offending_values(outcome) if sample.status == REJECTED else ()):
            totals[key] = summed([totals.get(key, (0, 0)), value])
    counts = [((REJECTED, reason), n) for reason, n in plan["rejected"].items()]
    refusals = [reject_refusal(counts, plan["selected"], config.max_reject_fraction, top_values(totals.items())),
                train_refusal(_split_signals(plan, samples), config.allow_no_train)]
    return [refusal.message for refusal in refusals if refusal is not None]


def _split_signals(plan: dict, samples: List[PairSample]) -> List[Tuple[str, Tuple[int, int]]]:
    """(split, (records, records holding a class)) estimated for the no-train gate: the split's records from the
    plan, and whether a sampled valid pair of the split holds a class."""
    sampled = {sample.split for sample in samples if sample.status == VALID}
    holding = {sample.split for sample in samples if sample.status == VALID and
               (sum(sample.class_pixels) > 0 or not sample.class_pixels)}
    return [(split, (entry["records"], int(split in holding or split not in sampled)))
            for split, entry in plan["splits"].items() if entry["records"]]


def _requests(config: CorpusConfig, plan: dict) -> dict:
    """Object-store requests of the full run; a local --input or --output is counted as if on gs://."""
    output_scheme = split_scheme(config.output)[0]
    model = output_scheme if output_scheme in UPLOAD_CHUNK_BYTES else "gs://"
    # Folder inputs list every file: paired folders their images and (one per image) masks.
    listed = {PAIRED: 2 * plan["discovered"], CLASS_FOLDERS: plan["discovered"]}.get(config.input_format, 0)
    requests = object_store_requests(
        files_per_pair=1 if config.task == "classification" else 2, validated_pairs=plan["selected"],
        written_records=sum(entry["records"] for entry in plan["splits"].values()), listed_objects=listed,
        shard_sizes=[entry["shard_bytes"] for entry in plan["splits"].values() for _ in range(entry["shards"])],
        input_bytes=plan["input_bytes"], output_scheme=model, cache=config.use_cache)
    local = not (split_scheme(config.input)[0] in UPLOAD_CHUNK_BYTES and output_scheme in UPLOAD_CHUNK_BYTES)
    return dict(requests, model=model, local=local, cache=config.use_cache)


def render_plan(plan: dict) -> str:
    unit = plan.get("unit", "pairs")            # images (classification) or pairs (segmentation)
    lines = [f"Plan (dry run, nothing written): measured {plan['sample_pairs']:,} sampled {unit}, "
             f"took {plan['planning_seconds']:.1f} s",
             f"  discovered inputs        {plan['discovered']:,} (exact)",
             f"  {'selected ' + unit:<24} {plan['selected']:,} (exact), {human_bytes(plan['input_bytes'])} to read",
             f"  written (estimate)       {plan['written']:,} {unit}, {human_bytes(plan['output_bytes'])} of shards"]
    for reason, count in plan["rejected"].items():
        lines.append(f"  {'rejected ' + reason:<24} ~{count:,}")
    if plan["train_growth"] != 1.0:
        lines.append(f"  train growth             ~{plan['train_growth']:.2f}x (repeat-factor copies)")
    for split, entry in plan["splits"].items():
        lines.append(f"  {split:<24} ~{entry['records']:,} records: {shards_line(entry)}")
    lines += [f"  shuffle                  ~{human_bytes(plan['shuffle_bytes'])} of metadata",
              f"  worker memory per core   ~{human_bytes(plan['worker_memory_per_core_bytes'])}",
              f"  {'CPU per ' + unit[:-1]:<24} {plan['cpu_seconds_per_pair'] * 1000:.1f} ms",
              f"  compute                  ~{plan['vcpu_hours']:.2f} vCPU-hours "
              f"(about {plan['vcpu_hours'] * 3600 / max(os.cpu_count() or 1, 1):,.0f} s on this machine's "
              f"{os.cpu_count()} cores)"]
    lines += plan_line(plan.get("near_duplicates"))
    lines += _request_lines(plan["requests"], plan["splits"])
    if plan.get("mask_values"):
        lines += ["  " + line for line in mask_values_lines(plan, "in the sample")]
    lines += [f"warning: {w['message']} (in the sample)" for w in plan.get("warnings") or ()]
    lines += [f"warning: the real run would be refused: {message}" for message in plan.get("refusals") or ()]
    return "\n".join(lines)


def _request_lines(requests: dict, splits: dict) -> list:
    shards = sum(entry["shards"] for entry in splits.values())
    per_tb = requests["per_tb"]
    where = (f"as on {requests['model']}; this run's local paths make none" if requests["local"]
             else requests["model"])
    if requests.get("cache"):
        gets = (f"~{human_count(requests['validation_gets'])} validation + ~{human_count(requests['spill_gets'])} "
                f"the writer's reads of validation's spill (1 per record), {REQUESTS_PER_OPEN} per file opened and 1 per "
                "validated file for its version (the verdict cache; a first run)")
        uploads = (f"~{human_count(requests['shard_uploads'])} for {shards:,} shard(s) (start, chunks, move into "
                   f"place) + ~{human_count(requests['cache_uploads'])} for the verdict cache and its spill")
    else:
        gets = (f"~{human_count(requests['validation_gets'])} validation + ~{human_count(requests['reread_gets'])} "
                f"the writer's re-read, {REQUESTS_PER_OPEN} per file opened")
        uploads = f"~{human_count(requests['uploads'])} for {shards:,} shard(s) (start, chunks, move into place)"
    return [f"  object-store requests    ({where}; docs/runners.md \"Cost per TB\")",
            f"    GETs                   ~{human_count(requests['gets'])}: {gets}",
            f"    listing pages          ~{human_count(requests['list_pages'])}",
            f"    uploads                {uploads}",
            f"    per TB of input        ~{human_count(per_tb['gets'])} GETs, ~{human_count(per_tb['list_pages'])} "
            f"listing pages, ~{human_count(per_tb['uploads'])} uploads"]
