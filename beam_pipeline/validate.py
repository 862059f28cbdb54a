"""ValidatePairs and DeduplicatePairs.

ValidatePairs reads both files of every pair (bounded by --max_file_bytes),
decodes them fully and checks them (see core/checks.py). Input: PairRef.
Output: ValidPair (main) and rejected Outcome (``rejected``), each reason
counted by a Beam counter ``ValidatePairs:rejected_<reason>``.

DeduplicatePairs keeps one pair per content (image digest, mask digest,
label) and reports the others as duplicates.
"""

import logging
import time
from typing import Union

import apache_beam as beam
from apache_beam.metrics import Metrics

from beam_pipeline import io_utils
from beam_pipeline.core import reasons
from beam_pipeline.core.checks import Rejection
from beam_pipeline.core.records import Outcome, PairRef, ValidPair, pack, unpack
from beam_pipeline.core.validation import validate_classification, validate_segmentation
from beam_pipeline.metrics import shuffled
from beam_pipeline.options import CorpusConfig

REJECTED = "rejected"
PROGRESS_EVERY = 500

_LOG = logging.getLogger(__name__)


def check_pair(ref: PairRef, config: CorpusConfig) -> Union[ValidPair, Rejection]:
    """Read both files of ``ref`` (bounded by --max_file_bytes) and check them."""
    bytes_read = Metrics.counter("ValidatePairs", "bytes_read")
    image_bytes = io_utils.read_bytes(ref.image, config.max_file_bytes, "image")
    if isinstance(image_bytes, Rejection):
        return image_bytes
    bytes_read.inc(len(image_bytes))
    if config.task == "classification":
        return validate_classification(ref, image_bytes, config.limits, config.class_names)
    mask_bytes = io_utils.read_bytes(ref.mask, config.max_file_bytes, "mask")
    if isinstance(mask_bytes, Rejection):
        return mask_bytes
    bytes_read.inc(len(mask_bytes))
    return validate_segmentation(ref, image_bytes, mask_bytes, config.limits, config.sample_points_per_class)


class ValidatePairFn(beam.DoFn):
    """PairRef -> ValidPair, or a rejected Outcome with a reason code."""

    def __init__(self, config: CorpusConfig):
        self._config = config
        self._valid = Metrics.counter("ValidatePairs", "valid")

    def setup(self):
        self._seen = 0
        self._started = time.monotonic()

    def process(self, ref: PairRef):
        result = check_pair(ref, self._config)
        self._progress()
        if isinstance(result, Rejection):
            Metrics.counter("ValidatePairs", f"rejected_{result.reason}").inc()
            yield beam.pvalue.TaggedOutput(REJECTED, Outcome.for_ref(ref, "rejected", result.reason, result.detail))
        else:
            self._valid.inc()
            yield result

    def _progress(self):
        self._seen += 1
        if self._seen % PROGRESS_EVERY == 0:
            elapsed = time.monotonic() - self._started
            _LOG.info("ValidatePairs: this worker checked %d pairs (%.1f pairs/s)",
                         self._seen, self._seen / max(elapsed, 1e-9))


class ValidatePairs(beam.PTransform):
    """``valid, rejected = refs | ValidatePairs(config)``."""

    def __init__(self, config: CorpusConfig):
        super().__init__()
        self._config = config

    def expand(self, refs):
        outputs = refs | "CheckPairs" >> beam.ParDo(ValidatePairFn(self._config)).with_outputs(
            REJECTED, main="valid")
        # ValidPair | rejected Outcome
        return outputs.valid, outputs[REJECTED]


def _by_content(pair: ValidPair):
    return pair.content_key, shuffled(pack(pair))


def _first_wins_order(pair: ValidPair):
    return pair.ref.key, pair.ref.image or "", pair.ref.mask or "", pair.ref.split or ""


class KeepFirstFn(beam.DoFn):
    """(content key, [ValidPair, ...]) -> the pair with the smallest key; duplicates as Outcomes."""

    def process(self, element):
        _, group = element
        ordered = sorted((unpack(data) for data in group), key=_first_wins_order)
        kept = ordered[0]
        yield kept
        for other in ordered[1:]:
            Metrics.counter("DeduplicatePairs", "duplicates").inc()
            yield beam.pvalue.TaggedOutput(REJECTED, Outcome.for_ref(
                other.ref, "duplicate", reasons.DUPLICATE, f"same content as {kept.ref.source_id}"))


class DeduplicatePairs(beam.PTransform):
    """``unique, duplicates = valid | DeduplicatePairs()``: one pair per content."""

    def expand(self, valid):
        outputs = (valid
                   | "KeyByContent" >> beam.Map(_by_content)
                   # (content key, packed ValidPair)
                   | "GroupByContent" >> beam.GroupByKey()
                   # (content key, [packed ValidPair, ...])
                   | "KeepFirst" >> beam.ParDo(KeepFirstFn()).with_outputs(REJECTED, main="unique"))
                   # ValidPair | duplicate Outcome
        return outputs.unique, outputs[REJECTED]
