"""SelectSubset: the user's filter, globs, sampling, --max_examples and splits.

Input: PairRef. Output: PairRef with ``split`` set and its metadata dropped; rejected Outcomes (a
--filter that cannot be evaluated on a row, a pair without a split); and the inputs filtered out,
counted per reason as ``((FILTERED, reason), n)`` for each bundle, not one element per input: they are
never written to a file, only counted, and most of a listing of the whole corpus is filtered out.
Every decision depends on the key and the metadata only, never on order or on Python's ``hash()``;
the per-pair decisions are in beam_pipeline/stages/pairs.py.
"""

from typing import Dict, Tuple

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.transforms.window import GlobalWindows

from beam_pipeline.core.progress import SELECTED
from beam_pipeline.core.records import FILTERED, Outcome, PairRef
from beam_pipeline.stages import counters, pairs
from beam_pipeline.stages.shuffle import Materialize
from beam_pipeline.stages.specs import REJECTED_TAG, SelectSpec, ShuffleSpec


FILTERED_TAG = "filtered"        # ((FILTERED, reason), n): the inputs a bundle filtered out, per reason


class _FilteredCounts:
    """The inputs one bundle filtered out, counted per reason and emitted once, at the bundle's end."""

    def __init__(self):
        self._counts: Dict[Tuple[str, str], int] = {}
        self._counters: Dict[Tuple[str, str], counters.ProgressCounter] = {}

    def add(self, outcome: Outcome) -> None:
        key = (outcome.status, outcome.reason)
        self._counts[key] = self._counts.get(key, 0) + 1
        counter = self._counters.get(key)
        if counter is None:
            counter = self._counters[key] = counters.counter("SelectSubset", f"{outcome.status}_{outcome.reason}")
        counter.inc()

    def emit(self):
        counts, self._counts = self._counts, {}
        for key, n in sorted(counts.items()):
            yield beam.pvalue.TaggedOutput(FILTERED_TAG, GlobalWindows.windowed_value((key, n)))


class SelectFn(counters.CountingDoFn):
    """PairRef -> PairRef kept, a rejected Outcome (a --filter error), or a count of it filtered out."""

    def __init__(self, spec: SelectSpec):
        self._spec = spec
        self._kept = Metrics.counter("SelectSubset", "kept")
        self._filtered = _FilteredCounts()

    def process(self, ref: PairRef):
        outcome = pairs.excluded(ref, self._spec)
        if outcome is None:
            self._kept.inc()
            yield ref
        elif outcome.status == FILTERED:
            self._filtered.add(outcome)
        else:
            counters.counter("SelectSubset", f"{outcome.status}_{outcome.reason}").inc()
            yield beam.pvalue.TaggedOutput(REJECTED_TAG, outcome)

    def finish_bundle(self):
        yield from self._filtered.emit()
        super().finish_bundle()


class AssignSplitFn(counters.CountingDoFn):
    """PairRef -> PairRef with its split, or a rejected Outcome when it has none."""

    def __init__(self, spec: SelectSpec):
        self._spec = spec
        self._selected = counters.counter(*SELECTED)

    def process(self, ref: PairRef):
        item = pairs.with_split(ref, self._spec)
        if isinstance(item, Outcome):
            counters.counter("SelectSubset", f"{item.status}_{item.reason}").inc()
            yield beam.pvalue.TaggedOutput(REJECTED_TAG, item)
        else:
            self._selected.inc()
            yield item


class CapExamplesFn(counters.CountingDoFn):
    """PairRef -> PairRef when its rank is within --max_examples, else a count of it filtered out."""

    def __init__(self):
        self._filtered = _FilteredCounts()

    def process(self, ref: PairRef, threshold):
        if pairs.max_examples_rank(ref) <= threshold:
            yield ref
        else:
            self._filtered.add(pairs.beyond_max_examples(ref))

    def finish_bundle(self):
        yield from self._filtered.emit()
        super().finish_bundle()


def _largest_kept_rank(smallest_ranks) -> int:
    return max(smallest_ranks) if smallest_ranks else -1


class SelectSubset(beam.PTransform):
    """``kept, rejected, filtered = refs | SelectSubset(SelectSpec(split, ...), ShuffleSpec())``."""

    def __init__(self, spec: SelectSpec, shuffle: ShuffleSpec = ShuffleSpec()):
        super().__init__()
        self._spec = spec
        self._shuffle = shuffle

    def expand(self, refs):
        spec = self._spec
        selected = refs | "ApplyFilters" >> beam.ParDo(SelectFn(spec)).with_outputs(
            REJECTED_TAG, FILTERED_TAG, main="kept")
        # PairRef | rejected Outcome | ((FILTERED, reason), n) per bundle
        kept, dropped, filtered = selected.kept, [selected[REJECTED_TAG]], [selected[FILTERED_TAG]]
        if spec.max_examples is not None:
            threshold = (kept
                         | "RankForMaxExamples" >> beam.Map(pairs.max_examples_rank)
                         # int rank
                         | "SmallestRanks" >> beam.combiners.Top.Smallest(spec.max_examples)
                         # [rank, ...] (at most max_examples)
                         | "LargestKeptRank" >> beam.Map(_largest_kept_rank))
            capped = (kept
                      | "HoldForTheCap" >> Materialize(self._shuffle)
                      # PairRef, held (in files, or by the runner) until the cap's rank is known
                      | "CapExamples" >> beam.ParDo(CapExamplesFn(), threshold=beam.pvalue.AsSingleton(
                          threshold)).with_outputs(FILTERED_TAG, main="kept"))
            kept = capped.kept
            filtered.append(capped[FILTERED_TAG])
        split = kept | "AssignSplits" >> beam.ParDo(AssignSplitFn(spec)).with_outputs(REJECTED_TAG, main="kept")
        # PairRef with split, no metadata | rejected Outcome
        dropped.append(split[REJECTED_TAG])
        filtered_counts = (filtered
                           | "MergeFiltered" >> beam.Flatten()
                           | "SumFilteredPerReason" >> beam.CombinePerKey(sum))
                           # ((FILTERED, reason), n), one per reason
        return split.kept, dropped | "MergeDropped" >> beam.Flatten(), filtered_counts
