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
