"""Re-runs that cost what changed, the pure rules (docs/cache.md, docs/incremental.md): no Beam, no TensorFlow.

A re-run on an output reuses three things of the runs before it, one module each:

* ``verdicts``: a pair's verdict, kept in the verdict cache and reused while its files and the check options
  are the same (the cache's fingerprint, when a verdict may be reused without reading the files);
* ``spill``: the record of a pair validated afresh, kept from validation for the writer, and what a re-run after
  a kill adopts as a shard (a spill entry's reference and its checks);
* ``versions``: the published version's shards, which a re-run keeps where they are, deleting the records that
  are gone and compacting shards left mostly empty (what a version keeps, writes, deletes and compacts).

The same concern has one folder in each layer above: ``io/cache/`` reads and writes the cache's files,
``stages/rerun/`` keeps a parent's records and adopts a killed run's spill, ``launcher/rerun/`` holds the
re-run options and the cache's owner and collection.
"""
