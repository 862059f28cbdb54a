"""SelectSubset: the user's filter, globs, sampling, --max_examples and splits.

Input: PairRef. Output: (PairRef with ``split`` set, Outcome for everything
filtered out or without a split). Every decision depends on the key and the
metadata only, never on order or on Python's ``hash()``.
"""

import dataclasses
from typing import Optional

import apache_beam as beam
from apache_beam.metrics import Metrics

from beam_pipeline.core import reasons
from beam_pipeline.core.filter_expr import FilterEvalError
from beam_pipeline.core.hashing import stable_hash
from beam_pipeline.core.paths import matches_any
from beam_pipeline.core.records import Outcome, PairRef
from beam_pipeline.core.selection import SplitSpec, assign_split, keep_in_sample
from beam_pipeline.options import CorpusConfig

DROPPED = "dropped"
MAX_EXAMPLES_SALT = "max_examples"


def selection_reason(ref: PairRef, config: CorpusConfig) -> Optional[Outcome]:
    """Why ``ref`` is left out of the subset, or None when it stays."""
    if config.include and not matches_any(ref.source_id, config.include):
        return Outcome.for_ref(ref, "filtered", reasons.FILTERED_BY_INCLUDE, "matches no --include glob")
    if config.exclude and matches_any(ref.source_id, config.exclude):
        return Outcome.for_ref(ref, "filtered", reasons.FILTERED_BY_EXCLUDE, "matches an --exclude glob")
    if config.filter is not None:
        row = ref.meta()
        row.update(image=ref.source_id, mask=ref.mask, label=ref.label)
        try:
            keep = config.filter(row)
        except FilterEvalError as error:
            return Outcome.for_ref(ref, "rejected", reasons.FILTER_ERROR, f"--filter on this row: {error}")
        if not keep:
            return Outcome.for_ref(ref, "filtered", reasons.FILTERED_BY_EXPRESSION, "--filter is false")
    if not keep_in_sample(ref.key, config.sample_fraction):
        return Outcome.for_ref(ref, "filtered", reasons.FILTERED_BY_SAMPLING, "not in the --sample_fraction sample")
    return None


class SelectFn(beam.DoFn):
    """PairRef -> PairRef kept, or a dropped Outcome (filtered or filter_error)."""

    def __init__(self, config: CorpusConfig):
        self._config = config
        self._kept = Metrics.counter("SelectSubset", "kept")

    def process(self, ref: PairRef):
        outcome = selection_reason(ref, self._config)
        if outcome is None:
            self._kept.inc()
            yield ref
        else:
            Metrics.counter("SelectSubset", f"{outcome.status}_{outcome.reason}").inc()
            yield beam.pvalue.TaggedOutput(DROPPED, outcome)


class AssignSplitFn(beam.DoFn):
    """PairRef -> PairRef with its split, or a rejected Outcome when it has none."""

    def __init__(self, spec: SplitSpec):
        self._spec = spec

    def process(self, ref: PairRef):
        split = assign_split(self._spec, ref.key, ref.meta(), ref.meta().get("folder", ""))
        if split is None:
            yield beam.pvalue.TaggedOutput(DROPPED, Outcome.for_ref(
                ref, "rejected", reasons.BAD_MANIFEST_ROW, f"no split ({self._spec.mode} {self._spec.column_name})"))
        else:
            yield dataclasses.replace(ref, split=split)


def max_examples_rank(ref: PairRef) -> int:
    """A 63-bit rank (Beam's integer coder is signed 64-bit)."""
    return stable_hash(MAX_EXAMPLES_SALT, ref.key) >> 1


class CapExamplesFn(beam.DoFn):
    """PairRef -> PairRef when its rank is within --max_examples, else a filtered Outcome."""

    def process(self, ref: PairRef, threshold):
        if max_examples_rank(ref) <= threshold:
            yield ref
        else:
            yield beam.pvalue.TaggedOutput(DROPPED, Outcome.for_ref(
                ref, "filtered", reasons.FILTERED_BY_MAX_EXAMPLES, "beyond --max_examples"))


def _largest_kept_rank(smallest_ranks) -> int:
    return max(smallest_ranks) if smallest_ranks else -1


class SelectSubset(beam.PTransform):
    """``kept, dropped = refs | SelectSubset(config, split_spec)``."""

    def __init__(self, config: CorpusConfig, split_spec: SplitSpec):
        super().__init__()
        self._config = config
        self._split_spec = split_spec

    def expand(self, refs):
        selected = refs | "ApplyFilters" >> beam.ParDo(SelectFn(self._config)).with_outputs(DROPPED, main="kept")
        # PairRef | dropped Outcome
        kept, dropped = selected.kept, [selected[DROPPED]]
        if self._config.max_examples is not None:
            threshold = (kept
                         | "RankForMaxExamples" >> beam.Map(max_examples_rank)
                         # int rank
                         | "SmallestRanks" >> beam.combiners.Top.Smallest(self._config.max_examples)
                         # [rank, ...] (at most max_examples)
                         | "LargestKeptRank" >> beam.Map(_largest_kept_rank))
            capped = kept | "CapExamples" >> beam.ParDo(
                CapExamplesFn(), threshold=beam.pvalue.AsSingleton(threshold)).with_outputs(DROPPED, main="kept")
            kept = capped.kept
            dropped.append(capped[DROPPED])
        split = kept | "AssignSplits" >> beam.ParDo(AssignSplitFn(self._split_spec)).with_outputs(
            DROPPED, main="kept")
        # PairRef with split | rejected Outcome
        dropped.append(split[DROPPED])
        return split.kept, dropped | "MergeDropped" >> beam.Flatten()
