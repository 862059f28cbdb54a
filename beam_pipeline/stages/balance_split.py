"""BalanceTrainSplit: image-level class balancing of the train split, from the tf.Transform stats.

Input: unique ValidPair, and the stats dict as a side input. Output: ValidPair
(main), where each train image carries its repeat factor r for the trainer to
apply (``--balance training``, the default), appears ``copies_for(key, r)`` times
(``--balance repeat_factor``: LVIS repeat-factor sampling, the fraction
resolved by a stable hash) or carries its stratum, the rarest class it
contains (``--balance strata``). Val and test pass unchanged. Also the train
split's growth factor (copies / images), from which the pipeline's growth
check (core.balance.growth_refusal) may refuse the run before any shard is
written.
"""

import dataclasses

import apache_beam as beam
from apache_beam.metrics import Metrics

from beam_pipeline.core.balance import (class_repeat_factors, copies_for, image_repeat_factor, presence_counts,
                                        rarest_class)
from beam_pipeline.core.records import ValidPair
from beam_pipeline.core.selection import TRAIN
from beam_pipeline.stages.shuffle import Materialize
from beam_pipeline.stages.specs import BalanceSpec, ShuffleSpec


def repeat_factors(stats: dict, threshold: float):
    return class_repeat_factors(presence_counts(stats), stats["num_images"], threshold)


class ExpandTrainFn(beam.DoFn):
    """ValidPair -> its repeat copies or its stratum (train), or itself (other splits)."""

    def __init__(self, spec: BalanceSpec):
        self._spec = spec
        self._copies = Metrics.counter("BalanceTrainSplit", "train_records")

    def process(self, pair: ValidPair, stats):
        if pair.ref.split != TRAIN or self._spec.method == "none":
            yield pair
        else:
            factors = repeat_factors(stats, self._spec.threshold)
            factor = image_repeat_factor(pair.present_classes, factors)
            if self._spec.method == "training":        # the trainer repeats it (trainer/data/balance.py)
                yield dataclasses.replace(pair, repeat_factor=factor)
            elif self._spec.method == "strata":
                yield dataclasses.replace(pair, stratum=rarest_class(pair.present_classes, factors),
                                          repeat_factor=factor)
            else:
                for copy in range(copies_for(pair.ref.key, factor)):
                    self._copies.inc()
                    yield dataclasses.replace(pair, copy=copy, repeat_factor=factor)


def _train_original_and_copy(pair: ValidPair):
    """(originals, records) contributed by one record of the train split."""
    return (1 if pair.copy == 0 else 0), 1


def _is_train(pair: ValidPair) -> bool:
    return pair.ref.split == TRAIN


def _sum_pairs(pairs):
    originals = records = 0
    for a, b in pairs:
        originals += a
        records += b
    return originals, records


def _growth(counts) -> float:
    originals, records = counts
    return records / originals if originals else 1.0


class BalanceTrainSplit(beam.PTransform):
    """``balanced, growth = unique | BalanceTrainSplit(BalanceSpec(method, threshold), stats, ShuffleSpec())``."""

    def __init__(self, spec: BalanceSpec, stats, shuffle: ShuffleSpec = ShuffleSpec()):
        super().__init__()
        self._spec = spec
        self._stats = stats
        self._shuffle = shuffle

    def expand(self, pairs):
        balanced = (pairs
                    | "HoldForStats" >> Materialize(self._shuffle)
                    # ValidPair, held (in files, or by the runner) until the statistics are known
                    | "ExpandTrain" >> beam.ParDo(ExpandTrainFn(self._spec),
                                                  stats=beam.pvalue.AsSingleton(self._stats)))
        # ValidPair (train: copies or stratum set)
        growth = (balanced
                  | "KeepTrain" >> beam.Filter(_is_train)
                  | "OriginalsAndRecords" >> beam.Map(_train_original_and_copy)
                  | "SumTrain" >> beam.CombineGlobally(_sum_pairs)
                  # (train images, train records)
                  | "GrowthFactor" >> beam.Map(_growth))
                  # float
        return balanced, growth
