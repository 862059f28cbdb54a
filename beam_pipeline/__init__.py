"""Apache Beam pipeline: raw image corpus -> validated, sharded TFRecords + manifest.json.

The folders, in dependency order (each imports only those after it; shared leaves anywhere):

* ``__main__`` and ``verify``: the commands (``python -m beam_pipeline``, ``python -m beam_pipeline.verify``);
* ``launcher/``: options and config, launch checks, the pipeline's wiring and ``run()``, watching, the
  commit, ``--plan``, the summary;
* ``stages/`` (the composites and the per-pair spine they share) and ``report/`` (report.html, TFDV
  statistics);
* ``io/``: the input listing, byte streams and whole files on any filesystem, the output's lock and
  publish per store;
* ``core/``: pure functions and records, without Beam or TensorFlow.

Shared leaves, importing nothing of the project but each other: ``console`` (what the commands
print; with the top-level ``native_stderr`` package) and ``phases`` (named points of a run where
tests hold or kill it). tests/unit/test_layers.py keeps this order.
"""
