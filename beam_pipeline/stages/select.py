"""SelectSubset: the user's filter, globs, sampling, --max_examples and splits.

Input: PairRef. Output: (PairRef with ``split`` set and its metadata dropped,
Outcome for everything filtered out or without a split). Every decision
depends on the key and the metadata only, never on order or on Python's
``hash()``; the per-pair decisions are in beam_pipeline/stages/pairs.py.
"""

import apache_beam as beam
from apache_beam.metrics import Metrics

from beam_pipeline.core.progress import SELECTED
from beam_pipeline.core.records import Outcome, PairRef
from beam_pipeline.stages import counters, pairs
from beam_pipeline.stages.specs import REJECTED_TAG, SelectSpec


class SelectFn(counters.CountingDoFn):
    """PairRef -> PairRef kept, or an Outcome (filtered, or rejected by a --filter error)."""

    def __init__(self, spec: SelectSpec):
        self._spec = spec
        self._kept = Metrics.counter("SelectSubset", "kept")

    def process(self, ref: PairRef):
        outcome = pairs.excluded(ref, self._spec)
        if outcome is None:
            self._kept.inc()
            yield ref
        else:
            counters.counter("SelectSubset", f"{outcome.status}_{outcome.reason}").inc()
            yield beam.pvalue.TaggedOutput(REJECTED_TAG, outcome)


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


class CapExamplesFn(beam.DoFn):
    """PairRef -> PairRef when its rank is within --max_examples, else a filtered Outcome."""

    def process(self, ref: PairRef, threshold):
        if pairs.max_examples_rank(ref) <= threshold:
            yield ref
        else:
            yield beam.pvalue.TaggedOutput(REJECTED_TAG, pairs.beyond_max_examples(ref))


def _largest_kept_rank(smallest_ranks) -> int:
    return max(smallest_ranks) if smallest_ranks else -1


class SelectSubset(beam.PTransform):
    """``kept, dropped = refs | SelectSubset(SelectSpec(split, ...))``."""

    def __init__(self, spec: SelectSpec):
        super().__init__()
        self._spec = spec

    def expand(self, refs):
        spec = self._spec
        selected = refs | "ApplyFilters" >> beam.ParDo(SelectFn(spec)).with_outputs(REJECTED_TAG, main="kept")
        # PairRef | filtered (or rejected) Outcome
        kept, dropped = selected.kept, [selected[REJECTED_TAG]]
        if spec.max_examples is not None:
            threshold = (kept
                         | "RankForMaxExamples" >> beam.Map(pairs.max_examples_rank)
                         # int rank
                         | "SmallestRanks" >> beam.combiners.Top.Smallest(spec.max_examples)
                         # [rank, ...] (at most max_examples)
                         | "LargestKeptRank" >> beam.Map(_largest_kept_rank))
            capped = kept | "CapExamples" >> beam.ParDo(
                CapExamplesFn(), threshold=beam.pvalue.AsSingleton(threshold)).with_outputs(REJECTED_TAG, main="kept")
            kept = capped.kept
            dropped.append(capped[REJECTED_TAG])
        split = kept | "AssignSplits" >> beam.ParDo(AssignSplitFn(spec)).with_outputs(REJECTED_TAG, main="kept")
        # PairRef with split, no metadata | rejected Outcome
        dropped.append(split[REJECTED_TAG])
        return split.kept, dropped | "MergeDropped" >> beam.Flatten()
