"""The verdict cache's part in the launcher (docs/cache.md): the owner of a ``--cache_dir``, and the
garbage collection after a commit.

The cache is read and written by ValidatePairs (stages/validate.py, io/cache/verdicts.py); runs on one
output are one at a time (its lock), and so are their writes to its cache. A cache shared by two
outputs would have each run's garbage collection remove the other's verdicts, so a ``--cache_dir``
records the output it belongs to and another output is refused in one line.
"""

import logging

from beam_pipeline.core import paths
from beam_pipeline.io import files
from beam_pipeline.io.cache import verdicts as verdict_store
from beam_pipeline.launcher.options import CorpusOptionsError
from beam_pipeline.stages.specs import CacheSpec

_LOG = logging.getLogger("beam_pipeline.cache")


def claim_cache(root: str, output: str) -> None:
    """Record ``output`` as the owner of the cache folder ``root``, or refuse one another output owns."""
    record = paths.join(root, verdict_store.OWNER)
    owner = files.read_json(record).get("output") if files.exists(record) else None
    if owner is None:
        files.write_bytes(record, files.json_bytes({"output": output}))
    elif owner != output:
        raise CorpusOptionsError(
            f"--cache_dir {root} is the verdict cache of {owner}: give each output its own --cache_dir (a shared "
            f"cache would lose the other output's verdicts), or remove {record} to hand it over to {output}")


def collect_cache(root: str, cache: CacheSpec) -> None:
    """After the commit: keep only this run's parts (stale buckets, other fingerprints, temporary files go)."""
    fingerprint = cache.folder.rstrip("/").rsplit("/", 1)[-1]
    try:
        removed = verdict_store.collect_garbage(root, fingerprint, cache.run_id)
    except Exception as error:  # noqa: BLE001 - the dataset is published; the next run collects again
        _LOG.warning("published, but cleaning the verdict cache %s failed: %s (the next run tries again)", root, error)
        return
    if removed:
        _LOG.info("removed %d file(s) of the verdict cache %s that no pair of this run needs", removed, root)
