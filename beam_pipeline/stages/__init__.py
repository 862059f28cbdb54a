"""The stages: one Beam composite per verb, and the per-pair work they share.

``discover`` (ReadCorpus), ``select`` (SelectSubset), ``validate`` (ValidatePairs, DeduplicatePairs),
``stats`` (ComputeStats, with ``preprocessing``'s tf.Transform ``preprocessing_fn``), ``balance_split``
(BalanceTrainSplit), ``write`` (WriteShards) and ``publish`` (PublishOutputs), in the order a pair meets
them. ``pairs`` is the per-pair spine without Beam (discover, select, check, record), which the composites'
DoFns and ``--plan`` call; ``specs`` the small frozen spec each composite takes; ``shuffle`` how records
cross a shuffle (packed, counted); ``counters`` the workers' counters and their running totals;
``worker`` what this package does to the SDK worker processes.

The stages import I/O and core, never the launcher or the report.
"""

import os as _os
import sys as _sys

# tf.Transform works with Keras 2 only: it sets TF_USE_LEGACY_KERAS=1 itself, but once TensorFlow is imported, whose
# own import has by then loaded Keras 3's optimizers for nothing (0.7 s and 40 MB in every process that computes
# statistics: docs/benchmarks.md, Fast start). Set first, as tf.Transform asks, TensorFlow loads Keras 2's instead,
# which tf.Transform imports anyway. A process that imported TensorFlow already keeps its Keras.
if "tensorflow" not in _sys.modules:
    _os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
