"""ValidatePairs and DeduplicatePairs.

ValidatePairs reads both files of every pair (bounded by --max_file_bytes),
decodes them fully and checks them (beam_pipeline/stages/pairs.py, core/validation.py),
unless the verdict cache holds the pair's verdict (core/rerun/verdicts.py, docs/cache.md).
A pair validated afresh leaves its record in the cache's spill (core/rerun/spill.py), where the
shard writer takes it, and where a re-run after a kill adopts it (stages/rerun/adopt.py).
Input: PairRef. Output: ValidPair (main), rejected Outcome (``rejected``), each
reason counted by a Beam counter ``ValidatePairs:rejected_<reason>``, and how
many pairs were validated afresh or taken from the cache (``cache``).

DeduplicatePairs keeps one pair per content (image digest, mask digest,
label) and reports the others as duplicates.
"""

import dataclasses
from typing import Optional, Tuple, Union

import apache_beam as beam
from apache_beam.metrics import Metrics

from beam_pipeline import phases
from beam_pipeline.core import reasons
from beam_pipeline.core.rerun import spill
from beam_pipeline.core.reasons import Rejection
from beam_pipeline.core.progress import DUPLICATES, REJECTED_PREFIX, VALID
from beam_pipeline.core.hashing import sha256_hex
from beam_pipeline.core.records import DUPLICATE, REJECTED, Outcome, PairRef, ValidPair, pack, unpack
from beam_pipeline.core.rerun.verdicts import REHASH, REUSE, Verdict, audited, bucket_of, decide, same_content
from beam_pipeline.io import streams
from beam_pipeline.io.cache import spill as spill_store, verdicts as verdict_store
from beam_pipeline.stages import counters, pairs, worker
from beam_pipeline.stages.shuffle import GroupPackedByKey
from beam_pipeline.stages.signatures import AnyOutput
from beam_pipeline.stages.specs import REJECTED_TAG, CacheSpec, CheckSpec, ShuffleSpec


CACHE_TAG = "cache"          # ((how, n), ...): how each bucket's pairs were settled (lineage in manifest.json)
FRESH, FROM_CACHE, REHASHED = "validated", "from_cache", "rehashed"
NOT_SPILLED = "not_spilled"  # validated afresh, their bytes not kept for the writer (--spill)


def _bucket_of(ref: PairRef):
    return bucket_of(ref.key), ref


class ValidateBucketFn(AnyOutput, counters.CountingDoFn):
    """(verdict bucket, [PairRef, ...]) -> ValidPair, a rejected Outcome with a reason code, and at the end
    of the bucket how its pairs were settled (CACHE_TAG).

    With a cache (CacheSpec.folder) each pair's verdict is looked up first (core/rerun/verdicts.py): reused
    without reading the files when their versions are the verdict's, after hashing them when their
    bytes are, and taken afresh otherwise; every verdict of the bucket is written again to this run's
    parts, and the bucket's older parts are removed once it is done (io/cache/verdicts.py). A pair validated
    afresh keeps its stored bytes in the spill as ``--spill`` allows (io/cache/spill.SpillRoom, given the
    number of selected pairs ``selected``)."""

    def __init__(self, spec: CheckSpec, cache: CacheSpec):
        self._spec = spec
        self._cache = cache
        self._valid = counters.counter(*VALID)
        self._bytes_read = Metrics.counter("ValidatePairs", "bytes_read")
        self._how = {how: Metrics.counter("ValidatePairs", how)
                     for how in (FRESH, FROM_CACHE, REHASHED, NOT_SPILLED)}
        self._room: Optional[spill_store.SpillRoom] = None
        self._not_spilled = 0

    def setup(self):
        worker.prepare_sdk_worker()

    def process(self, element, selected=0):
        bucket, refs = element
        folder = self._cache.folder
        if self._room is None:
            self._room = spill_store.spill_room(self._cache.spill, folder, self._cache.run_id,
                                                  self._cache.shards_folder, selected)
        self._not_spilled = 0
        verdicts = verdict_store.load(folder, bucket) if folder else {}
        writer = spilled = None
        if folder:
            spilled = spill_store.BucketSpill(folder, bucket, self._cache.run_id, self._cache.spill_file_bytes)
            writer = verdict_store.PartWriter(folder, bucket, self._cache.run_id, before_commit=spilled.seal)
        settled = {FRESH: 0, FROM_CACHE: 0, REHASHED: 0}
        for ref in refs:
            phases.reached(phases.VALIDATE)
            result, how, verdict = self._settle(ref, verdicts.get(ref.key), spilled)
            settled[how] += 1
            self._how[how].inc()
            if writer is not None and verdict is not None:
                writer.add(verdict)
            if isinstance(result, Rejection):
                counters.counter(VALID[0], f"{REJECTED_PREFIX}{result.reason}").inc()
                yield beam.pvalue.TaggedOutput(REJECTED_TAG, Outcome.for_ref(ref, REJECTED, result.reason,
                                                                             result.detail))
            else:
                self._valid.inc()
                yield result
        if writer is not None:
            verdict_store.remove_others(folder, bucket, keep=writer.close())
            phases.reached(phases.VERDICTS_COMMITTED)
        settled[NOT_SPILLED] = self._not_spilled
        self._how[NOT_SPILLED].inc(self._not_spilled)
        for how, n in sorted(settled.items()):
            if n:
                yield beam.pvalue.TaggedOutput(CACHE_TAG, (how, n))

    def _settle(self, ref: PairRef, cached: Optional[Verdict], spilled: Optional[spill_store.BucketSpill]):
        """(ValidPair or Rejection, how it was settled, the verdict to keep or None). A pair validated afresh
        leaves its stored bytes in the bucket's spill, for the shard writer (core/rerun/spill.py)."""
        cache = self._cache
        if cache.folder is None:
            result, bytes_read = pairs.check(ref, self._spec)
            self._bytes_read.inc(bytes_read)
            return result, FRESH, None
        versions = (_pre_key(ref.image), pairs.mask_version(ref, _pre_key))     # a drawn mask: its drawing's too
        decision = decide(cached, ref.label, versions, cache.revalidate, audited(ref.key, cache.run_id, cache.audit))
        if decision == REUSE:
            return restored(cached, ref, cache.committed_run), FROM_CACHE, cached
        read = pairs.read_files(ref, self._spec)
        if isinstance(read, Rejection):                 # missing, unreadable, empty, too large: never kept
            return read, FRESH, None
        image, mask = read
        self._bytes_read.inc(len(image) + len(mask))
        digests = None
        if decision == REHASH:
            digests = _digests(image, mask)
            if same_content(cached, *digests):
                return restored(cached, ref, cache.committed_run), REHASHED, dataclasses.replace(
                    cached, image_version=versions[0], mask_version=versions[1])
        checked = pairs.checked_bytes(ref, self._spec, image, mask)
        if isinstance(checked, Rejection):
            result = checked
        else:
            result, refused = _spilled(checked, mask, self._spec, spilled, self._room)
            self._not_spilled += refused
        if digests is None:              # a valid pair carries the digests validation took; hash only a rejected one
            digests = ((result.image_sha256, result.mask_sha256) if isinstance(result, ValidPair)
                       else _digests(image, mask))
        return result, FRESH, verdict_of(ref, versions, digests, result)


def _spilled(checked, mask: bytes, spec: CheckSpec, spilled: spill_store.BucketSpill,
             room: spill_store.SpillRoom) -> Tuple[ValidPair, bool]:
    """(the pair, with its stored bytes in the spill of the part its verdict goes to when ``room`` allows, and then
    without the annotations its mask was drawn from: pairs.spilled_ref; whether ``room`` refused them)."""
    stored = pairs.stored_files(checked, mask, spec)
    if stored is None:
        return checked.pair, False
    if not room.allows(len(stored[0]) + len(stored[1])):
        return checked.pair, True
    return dataclasses.replace(checked.pair, spill=spilled.append(checked.pair, *stored),
                               ref=pairs.spilled_ref(checked.pair.ref)), False


def _digests(image: bytes, mask: bytes):
    return sha256_hex(image), sha256_hex(mask) if mask else ""


def _pre_key(path: str) -> Optional[str]:
    """The file's path and version (io/streams.py file_version): equal pre-keys are taken as equal bytes."""
    version = streams.file_version(path)
    return None if version is None else f"{path}|{version}"


def restored(verdict: Verdict, ref: PairRef, committed_run: str = "") -> Union[ValidPair, Rejection]:
    """What a kept verdict says of ``ref``: its ValidPair with ``ref``'s paths and split, or its Rejection.
    Its spill is kept only when a run after ``committed_run`` (the last to commit) wrote it: a killed run's;
    the commit collected the others."""
    if verdict.valid:
        pair = unpack(verdict.valid)
        if pair.spill and not spill.live(pair.spill, committed_run):
            return dataclasses.replace(pair, ref=ref, spill=())
        return dataclasses.replace(pair, ref=ref)
    return Rejection(*verdict.rejection)


def verdict_of(ref: PairRef, versions, digests, result: Union[ValidPair, Rejection]) -> Verdict:
    valid = pack(dataclasses.replace(result, ref=None)) if isinstance(result, ValidPair) else b""
    rejection = () if isinstance(result, ValidPair) else (result.reason, result.detail)
    return Verdict(key=ref.key, label=ref.label, image_version=versions[0], mask_version=versions[1],
                   image_sha256=digests[0], mask_sha256=digests[1], valid=valid, rejection=rejection)


class ValidatePairs(beam.PTransform):
    """``valid, rejected, settled = refs | ValidatePairs(CheckSpec(task, limits, ...), CacheSpec(), ShuffleSpec())``.

    The pairs are grouped by verdict bucket, which spreads them over the workers, and each bucket is
    checked by one worker, with its part of the cache. ``settled``: ``(how, n)`` per bucket
    (validated afresh, reused from the cache, reused after hashing the files, not spilled).
    ``selected_count``: the number of selected pairs (one int), which ``--spill auto`` keeps room for."""

    def __init__(self, spec: CheckSpec, cache: CacheSpec = CacheSpec(), shuffle: ShuffleSpec = ShuffleSpec(),
                 selected_count=None):
        super().__init__()
        self._spec = spec
        self._cache = cache
        self._shuffle = shuffle
        self._selected_count = selected_count

    def expand(self, refs):
        side = {} if self._selected_count is None else {
            "selected": beam.pvalue.AsSingleton(self._selected_count)}
        outputs = (refs
                   | "KeyByVerdictBucket" >> beam.Map(_bucket_of)
                   # (verdict bucket, PairRef)
                   | "GroupByVerdictBucket" >> GroupPackedByKey(self._shuffle)
                   # (verdict bucket, [PairRef, ...]): a bucket on one worker, the buckets over every worker
                   | "CheckPairs" >> beam.ParDo(ValidateBucketFn(self._spec, self._cache), **side).with_outputs(
                       REJECTED_TAG, CACHE_TAG, main="valid"))
        # ValidPair | rejected Outcome | (how, n)
        return outputs.valid, outputs[REJECTED_TAG], outputs[CACHE_TAG]


def _by_content(pair: ValidPair):
    return pair.content_key, pair


def _first_wins_order(pair: ValidPair):
    return pair.ref.key, pair.ref.image or "", pair.ref.mask or "", pair.ref.split or ""


class KeepFirstFn(counters.CountingDoFn):
    """(content key, [ValidPair, ...]) -> the pair with the smallest key; duplicates as Outcomes."""

    def process(self, element):
        _, group = element
        ordered = sorted(group, key=_first_wins_order)
        kept = ordered[0]
        yield kept
        for other in ordered[1:]:
            counters.counter(*DUPLICATES).inc()
            yield beam.pvalue.TaggedOutput(REJECTED_TAG, Outcome.for_ref(
                other.ref, DUPLICATE, reasons.DUPLICATE, f"same content as {kept.ref.source_id}"))


class DeduplicatePairs(beam.PTransform):
    """``unique, duplicates = valid | DeduplicatePairs(ShuffleSpec())``: one pair per content."""

    def __init__(self, shuffle: ShuffleSpec = ShuffleSpec()):
        super().__init__()
        self._shuffle = shuffle

    def expand(self, valid):
        outputs = (valid
                   | "KeyByContent" >> beam.Map(_by_content)
                   # (content key, ValidPair)
                   | "GroupByContent" >> GroupPackedByKey(self._shuffle)
                   # (content key, [ValidPair, ...])
                   | "KeepFirst" >> beam.ParDo(KeepFirstFn()).with_outputs(REJECTED_TAG, main="unique"))
                   # ValidPair | duplicate Outcome
        return outputs.unique, outputs[REJECTED_TAG]
