"""ValidatePairs and DeduplicatePairs.

ValidatePairs reads both files of every pair (bounded by --max_file_bytes),
decodes them fully and checks them (beam_pipeline/stages/pairs.py, core/validation.py),
unless the verdict cache holds the pair's verdict (core/rerun/verdicts.py, docs/cache.md).
A pair validated afresh leaves its record in the cache's spill (core/rerun/spill.py), where the
shard writer takes it, and where a re-run after a kill adopts it (stages/rerun/adopt.py).
With ``threads`` above 1 (the DirectRunner running the whole job in the launcher with one worker: launcher/runners.py
``validation_threads``) the pairs are read, decoded and checked by that many threads, a few pairs ahead of the one
being settled, across the buckets of a bundle; what they leave (the spill, the verdicts, the outputs, the counters)
is written in the pairs' order by the worker's own thread, so the bytes are those of one thread.
Input: PairRef. Output: ValidPair (main), rejected Outcome (``rejected``), each
reason counted by a Beam counter ``ValidatePairs:rejected_<reason>``, and how
many pairs were validated afresh or taken from the cache (``cache``).

DeduplicatePairs keeps one pair per content (image digest, mask digest,
label) and reports the others as duplicates.
"""

import collections
import concurrent.futures
import dataclasses
from typing import Dict, Optional, Tuple, Union

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.transforms.window import GlobalWindows

from beam_pipeline import phases
from beam_pipeline.core import reasons
from beam_pipeline.core.rerun import spill, unchanged
from beam_pipeline.core.reasons import Rejection
from beam_pipeline.core.progress import DUPLICATES, REJECTED_PREFIX, VALID
from beam_pipeline.core.hashing import sha256_hex
from beam_pipeline.core.records import DUPLICATE, REJECTED, Outcome, PairRef, ValidPair, pack, unpack
from beam_pipeline.core.validation import Checked
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


AHEAD_PER_THREAD = 2         # pairs examined ahead of the one being settled, per thread: a few pairs' bytes held


@dataclasses.dataclass(frozen=True)
class _Examined:
    """What examining a pair found (ValidateBucketFn._examine): its result, how it was settled, the verdict to keep
    and the bytes read; for a pair that passed its checks, what its spill and its verdict still need."""
    result: Union[ValidPair, Rejection, Checked]
    how: str
    verdict: Optional[Verdict] = None
    bytes_read: int = 0
    mask: bytes = b""
    versions: Tuple = ()
    digests: Optional[Tuple[str, str]] = None
    token: Tuple[int, ...] = ()     # its part of the version's inputs digest (core/rerun/unchanged.py), with a cache


@dataclasses.dataclass
class _Bucket:
    """A verdict bucket being settled: its cached verdicts, its spill and verdict part (None without a cache), what
    its pairs came to, and (threads > 1) how many of its pairs are still examined ahead."""
    bucket: int
    verdicts: Dict[str, Verdict]
    spilled: Optional[spill_store.BucketSpill] = None
    writer: Optional[verdict_store.PartWriter] = None
    opened: bool = False
    settled: Dict[str, int] = dataclasses.field(default_factory=lambda: {FRESH: 0, FROM_CACHE: 0, REHASHED: 0})
    not_spilled: int = 0
    inputs: unchanged.Tally = dataclasses.field(default_factory=unchanged.Tally)
    ahead: int = 0
    all_queued: bool = False


def _windowed(value):
    """An output of finish_bundle: in the global window, as Beam asks there."""
    if isinstance(value, beam.pvalue.TaggedOutput):
        return beam.pvalue.TaggedOutput(value.tag, GlobalWindows.windowed_value(value.value))
    return GlobalWindows.windowed_value(value)


class ValidateBucketFn(AnyOutput, counters.CountingDoFn):
    """(verdict bucket, [PairRef, ...]) -> ValidPair, a rejected Outcome with a reason code, and at the end
    of the bucket how its pairs were settled (CACHE_TAG).

    With a cache (CacheSpec.folder) each pair's verdict is looked up first (core/rerun/verdicts.py): reused
    without reading the files when their versions are the verdict's, after hashing them when their
    bytes are, and taken afresh otherwise; every verdict of the bucket is written again to this run's
    parts, and the bucket's older parts are removed once it is done (io/cache/verdicts.py). A pair validated
    afresh keeps its stored bytes in the spill as ``--spill`` allows (io/cache/spill.SpillRoom, given the
    number of selected pairs ``selected``)."""

    def __init__(self, spec: CheckSpec, cache: CacheSpec, threads: int = 1):
        self._spec = spec
        self._cache = cache
        self._threads = threads
        self._valid = counters.counter(*VALID)
        self._bytes_read = Metrics.counter("ValidatePairs", "bytes_read")
        self._how = {how: Metrics.counter("ValidatePairs", how)
                     for how in (FRESH, FROM_CACHE, REHASHED, NOT_SPILLED)}
        self._room: Optional[spill_store.SpillRoom] = None
        self._pool: Optional[concurrent.futures.ThreadPoolExecutor] = None
        self._queue: collections.deque = collections.deque()

    def setup(self):
        worker.prepare_sdk_worker()

    def start_bundle(self):
        self._queue = collections.deque()     # (_Bucket, PairRef, future of its _Examined), in the pairs' order

    def process(self, element, selected=0):
        bucket, refs = element
        folder = self._cache.folder
        if self._room is None:
            self._room = spill_store.spill_room(self._cache.spill, folder, self._cache.run_id,
                                                  self._cache.shards_folder, selected)
        state = _Bucket(bucket, verdict_store.load(folder, bucket) if folder else {})
        if self._threads <= 1:
            self._open(state)
            for ref in refs:
                phases.reached(phases.VALIDATE)
                yield from self._emit(state, ref, self._examine(ref, state.verdicts.get(ref.key)))
            yield from self._close(state)
            return
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(self._threads, thread_name_prefix="ValidatePairs")
        for ref in refs:
            state.ahead += 1
            self._queue.append((state, ref, self._pool.submit(self._examine, ref, state.verdicts.get(ref.key))))
            while len(self._queue) > self._threads * AHEAD_PER_THREAD:
                yield from self._settle_first()
        state.all_queued = True
        if state.ahead == 0:                    # no pair (or all settled already): the bucket is done
            self._open(state)
            yield from self._close(state)

    def finish_bundle(self):
        while self._queue:
            for value in self._settle_first():
                yield _windowed(value)
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    def teardown(self):
        if self._pool is not None:          # a bundle that failed: its pairs examined ahead are dropped
            self._pool.shutdown(cancel_futures=True)
            self._pool = None

    def _settle_first(self):
        """The first pair examined ahead settled (threads > 1), and its bucket closed after its last pair."""
        state, ref, future = self._queue.popleft()
        self._open(state)
        phases.reached(phases.VALIDATE)
        yield from self._emit(state, ref, future.result())
        state.ahead -= 1
        if state.all_queued and state.ahead == 0:
            yield from self._close(state)

    def _open(self, state: _Bucket) -> None:
        """The bucket's spill and verdict part, once, before its first pair is settled."""
        folder = self._cache.folder
        if state.opened:
            return
        state.opened = True
        if folder:
            state.spilled = spill_store.BucketSpill(folder, state.bucket, self._cache.run_id,
                                                    self._cache.spill_file_bytes)
            state.writer = verdict_store.PartWriter(folder, state.bucket, self._cache.run_id,
                                                    before_commit=state.spilled.seal)

    def _emit(self, state: _Bucket, ref: PairRef, examined: "_Examined"):
        """One pair settled, in order: its spill, its verdict, its output and counters."""
        result, how, verdict = self._settle(ref, examined, state)
        state.settled[how] += 1
        if examined.token:
            state.inputs.add(examined.token)
        self._how[how].inc()
        if state.writer is not None and verdict is not None:
            state.writer.add(verdict)
        if isinstance(result, Rejection):
            counters.counter(VALID[0], f"{REJECTED_PREFIX}{result.reason}").inc()
            yield beam.pvalue.TaggedOutput(REJECTED_TAG, Outcome.for_ref(ref, REJECTED, result.reason,
                                                                         result.detail))
        else:
            self._valid.inc()
            yield result

    def _close(self, state: _Bucket):
        """The bucket done: its verdicts committed, its older parts removed, how its pairs were settled."""
        if state.writer is not None:
            verdict_store.remove_others(self._cache.folder, state.bucket, keep=state.writer.close())
            phases.reached(phases.VERDICTS_COMMITTED)
        settled = dict(state.settled, **{NOT_SPILLED: state.not_spilled})
        self._how[NOT_SPILLED].inc(state.not_spilled)
        for how, n in sorted(settled.items()) + state.inputs.items():
            if n:
                yield beam.pvalue.TaggedOutput(CACHE_TAG, (how, n))

    def _examine(self, ref: PairRef, cached: Optional[Verdict]) -> _Examined:
        """What settling ``ref`` reads and computes, which a thread can do beside others: its files' versions, the
        cache's decision, and, unless the verdict is reused as it is, its files read, hashed or checked."""
        cache = self._cache
        if cache.folder is None:
            result, bytes_read = pairs.check(ref, self._spec)
            return _Examined(result, FRESH, bytes_read=bytes_read)
        versions = versions_of(ref)
        examined = self._decided(ref, cached, versions)
        return dataclasses.replace(examined, token=unchanged.pair_token(ref.key, ref.label, versions))

    def _decided(self, ref: PairRef, cached: Optional[Verdict], versions) -> _Examined:
        """_examine with a cache, once the files' versions are known."""
        cache = self._cache
        decision = decide(cached, ref.label, versions, cache.revalidate, audited(ref.key, cache.run_id, cache.audit))
        if decision == REUSE:
            return _Examined(restored(cached, ref, cache.committed_run), FROM_CACHE, cached)
        read = pairs.read_files(ref, self._spec)
        if isinstance(read, Rejection):                 # missing, unreadable, empty, too large: never kept
            return _Examined(read, FRESH)
        image, mask = read
        digests = None
        if decision == REHASH:
            digests = _digests(image, mask)
            if same_content(cached, *digests):
                return _Examined(restored(cached, ref, cache.committed_run), REHASHED, dataclasses.replace(
                    cached, image_version=versions[0], mask_version=versions[1]), len(image) + len(mask))
        checked = pairs.checked_bytes(ref, self._spec, image, mask)
        if isinstance(checked, Rejection):              # a valid pair carries its digests; hash a rejected one here
            return _Examined(checked, FRESH, verdict_of(ref, versions, digests or _digests(image, mask), checked),
                             len(image) + len(mask))
        return _Examined(checked, FRESH, None, len(image) + len(mask), mask, versions, digests)

    def _settle(self, ref: PairRef, examined: _Examined, state: _Bucket):
        """(ValidPair or Rejection, how it was settled, the verdict to keep or None), in the pairs' order. A pair
        validated afresh leaves its stored bytes in the bucket's spill, for the shard writer (core/rerun/spill.py)."""
        if examined.bytes_read:
            self._bytes_read.inc(examined.bytes_read)
        if not isinstance(examined.result, Checked):
            return examined.result, examined.how, examined.verdict
        result, refused = _spilled(examined.result, examined.mask, self._spec, state.spilled, self._room)
        state.not_spilled += refused
        digests = examined.digests or (result.image_sha256, result.mask_sha256)
        return result, FRESH, verdict_of(ref, examined.versions, digests, result)


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


def versions_of(ref: PairRef) -> Tuple[Optional[str], Optional[str]]:
    """The pre-keys of a pair's image and mask, as its verdict keeps them (a drawn mask: its drawing's too)."""
    return pre_key(ref.image), pairs.mask_version(ref, pre_key)


def pre_key(path: str) -> Optional[str]:
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
    ``selected_count``: the number of selected pairs (one int), which ``--spill auto`` keeps room for.
    ``threads``: how many pairs a worker reads and checks at once (see the module's docstring)."""

    def __init__(self, spec: CheckSpec, cache: CacheSpec = CacheSpec(), shuffle: ShuffleSpec = ShuffleSpec(),
                 selected_count=None, threads: int = 1):
        super().__init__()
        self._spec = spec
        self._cache = cache
        self._shuffle = shuffle
        self._selected_count = selected_count
        self._threads = threads

    def expand(self, refs):
        side = {} if self._selected_count is None else {
            "selected": beam.pvalue.AsSingleton(self._selected_count)}
        outputs = (refs
                   | "KeyByVerdictBucket" >> beam.Map(_bucket_of)
                   # (verdict bucket, PairRef)
                   | "GroupByVerdictBucket" >> GroupPackedByKey(self._shuffle)
                   # (verdict bucket, [PairRef, ...]): a bucket on one worker, the buckets over every worker
                   | "CheckPairs" >> beam.ParDo(ValidateBucketFn(self._spec, self._cache, self._threads),
                                                **side).with_outputs(
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
