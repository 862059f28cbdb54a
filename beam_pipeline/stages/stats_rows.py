"""TrainRows: ComputeStats' first part (stages/stats.py), run where the pairs are made.

Input: unique ValidPair. Output: the train pairs' raw rows (core.stats.summary_values: their summaries, no
pixels) held by HoldRecords: with files, the paths of the files they were written to, so that the runner holds
paths until tf.Transform's analysis reads them (it waits on its traced graph). This module imports neither
TensorFlow nor tf.Transform: on the DirectRunner the rest of the statistics runs in the launcher
(launcher/runners.statistics_in_the_launcher), and this part in the SDK workers, which never import them.
"""

import apache_beam as beam

from beam_pipeline.core.records import ValidPair
from beam_pipeline.core.selection import TRAIN
from beam_pipeline.core.stats import summary_values
from beam_pipeline.stages.shuffle import HoldRecords
from beam_pipeline.stages.specs import ShuffleSpec


def _is_train(pair: ValidPair) -> bool:
    return pair.ref.split == TRAIN


class TrainRows(beam.PTransform):
    """``held = unique_pairs | TrainRows(task, ShuffleSpec())``; read back with ``ReadHeldRecords``."""

    def __init__(self, task: str, shuffle: ShuffleSpec = ShuffleSpec()):
        super().__init__()
        self._task = task
        self._shuffle = shuffle

    def expand(self, pairs):
        return (pairs
                | "KeepTrainSplit" >> beam.Filter(_is_train)
                | "Summaries" >> beam.Map(summary_values, self._task)
                # raw row dict of a train pair: its summaries, no pixels
                | "Hold" >> HoldRecords(self._shuffle))
