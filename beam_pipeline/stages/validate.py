"""ValidatePairs and DeduplicatePairs.

ValidatePairs reads both files of every pair (bounded by --max_file_bytes),
decodes them fully and checks them (beam_pipeline/stages/pairs.py, core/checks.py).
Input: PairRef. Output: ValidPair (main) and rejected Outcome (``rejected``),
each reason counted by a Beam counter ``ValidatePairs:rejected_<reason>``.

DeduplicatePairs keeps one pair per content (image digest, mask digest,
label) and reports the others as duplicates.
"""

import apache_beam as beam
from apache_beam.metrics import Metrics

from beam_pipeline import phases
from beam_pipeline.core import reasons
from beam_pipeline.core.checks import Rejection
from beam_pipeline.core.progress import DUPLICATES, REJECTED_PREFIX, VALID
from beam_pipeline.core.records import DUPLICATE, REJECTED, Outcome, PairRef, ValidPair
from beam_pipeline.stages import counters, pairs, worker
from beam_pipeline.stages.shuffle import GroupPackedByKey
from beam_pipeline.stages.specs import REJECTED_TAG, CheckSpec, ShuffleSpec


class ValidatePairFn(counters.CountingDoFn):
    """PairRef -> ValidPair, or a rejected Outcome with a reason code."""

    def __init__(self, spec: CheckSpec):
        self._spec = spec
        self._valid = counters.counter(*VALID)
        self._bytes_read = Metrics.counter("ValidatePairs", "bytes_read")

    def setup(self):
        worker.exit_quickly_when_done()

    def process(self, ref: PairRef):
        phases.reached(phases.VALIDATE)
        result, bytes_read = pairs.check(ref, self._spec)
        self._bytes_read.inc(bytes_read)
        if isinstance(result, Rejection):
            counters.counter(VALID[0], f"{REJECTED_PREFIX}{result.reason}").inc()
            yield beam.pvalue.TaggedOutput(REJECTED_TAG, Outcome.for_ref(ref, REJECTED, result.reason, result.detail))
        else:
            self._valid.inc()
            yield result


class ValidatePairs(beam.PTransform):
    """``valid, rejected = refs | ValidatePairs(CheckSpec(task, limits, ...))``."""

    def __init__(self, spec: CheckSpec):
        super().__init__()
        self._spec = spec

    def expand(self, refs):
        outputs = refs | "CheckPairs" >> beam.ParDo(ValidatePairFn(self._spec)).with_outputs(
            REJECTED_TAG, main="valid")
        # ValidPair | rejected Outcome
        return outputs.valid, outputs[REJECTED_TAG]


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
