"""The verdict cache's files on any filesystem Beam knows (docs/cache.md): ``verdicts``, the parts of verdicts
per bucket, committed as they fill and collected after a commit; ``spill``, validation's spill (each worker
process's local spill files, a part's spill on gs:// and s3://, reading an entry back, the room ``--spill auto``
keeps for the shards). The rules they follow are core/rerun/."""
