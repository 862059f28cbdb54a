"""Before a re-run builds on its parent version: every file it would keep checked, cheaply (docs/recovery.md).

The rules are core/rerun/parent.py's; here the launcher, which holds the output's lock, looks at the files: one
version each (a ``stat`` on a local disk, one metadata request on gs:// and s3://), ``WORKERS`` at a time, and
the SHA-256 of those whose version moved since the parent was published (read in chunks, never whole). A damaged
shard is then left out of the parent the run builds on, or (``--on_damaged_parent fail``) the run stops here in
one line, before anything is written.
"""

import concurrent.futures
import dataclasses
import logging
import time
from typing import List, Optional, Tuple

from beam_pipeline.core import layout, paths
from beam_pipeline.core.failures import RunFailed
from beam_pipeline.core.rerun import parent as rules
from beam_pipeline.core.rerun.versions import ParentShard, ParentSpec, reusable_group
from beam_pipeline.io import files, streams

WORKERS = 8            # files looked at at once: a stat or a HEAD each, reads and SHA-256 release the GIL

_LOG = logging.getLogger("beam_pipeline.parent")


@dataclasses.dataclass(frozen=True)
class ParentCheck:
    """What the check found: the damaged shards, and what it cost."""
    damage: Tuple[rules.Damage, ...] = ()
    files: int = 0                       # files looked at
    hashed: int = 0                      # ... of which read and hashed: their version had moved
    hashed_bytes: int = 0
    seconds: float = 0.0

    def lineage(self) -> dict:
        """What manifest.json's lineage records of it."""
        return {"parent_check": {"files": self.files, "hashed": self.hashed, "hashed_bytes": self.hashed_bytes,
                                 "seconds": round(self.seconds, 2)},
                "damaged_parent": [{"shard": d.shard, "problem": d.problem} for d in self.damage]}


def _look(output: str, expected: rules.ParentFile) -> Tuple[str, int]:
    """(OK or the problem, bytes hashed) of one file."""
    path = paths.join(output, expected.path)
    verdict = rules.judge(expected, streams.file_version(path, with_ctime=False))
    if verdict != rules.HASH:
        return verdict, 0
    try:
        return rules.judge_digest(expected, files.sha256(path)), expected.bytes
    except OSError as error:
        return f"cannot be read ({str(error).splitlines()[0] if str(error) else type(error).__name__})", 0


def look_at(output: str, to_check: List[rules.ParentFile]) -> List[Tuple[str, int]]:
    """(OK or the problem, bytes hashed) of each file, ``WORKERS`` at a time."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=WORKERS) as pool:
        return list(pool.map(lambda expected: _look(output, expected), to_check))


def _own_copy(output: str, previous: dict) -> Optional[dict]:
    """The parent version's own copy of its manifest, or None when it cannot be read."""
    try:
        return files.read_json(paths.join(layout.version_dir(output, previous["run_id"]), layout.VERSION_MANIFEST))
    except Exception:  # noqa: BLE001 - without the copy only the entries' own consistency is checked
        return None


def check_parent(output: str, previous: dict, shards: Tuple[ParentShard, ...], balance: str) -> ParentCheck:
    """Every file of ``shards`` (those of groups a re-run may keep) looked at; the damaged shards."""
    started = time.monotonic()
    shards = tuple(shard for shard in shards if reusable_group(shard.group, balance))
    to_check = rules.files_to_check(shards, previous.get("files") or {})
    looked = look_at(output, to_check)
    problems = {expected.path: verdict for expected, (verdict, _) in zip(to_check, looked) if verdict != rules.OK}
    entries = rules.entry_problems(shards, _own_copy(output, previous))
    damage = tuple(rules.damaged_shards(shards, problems, entries))
    hashed = [size for _, size in looked if size]
    return ParentCheck(damage, len(to_check), len(hashed), sum(hashed), time.monotonic() - started)


def checked_parent(output: str, previous: Optional[dict], shards: Tuple[ParentShard, ...], balance: str,
                   on_damage: str) -> ParentCheck:
    """:func:`check_parent`, with what a damaged parent means: a warning per shard (``rebuild``), or RunFailed
    naming the first one (``fail``). No parent, no check."""
    if previous is None or not shards:
        return ParentCheck()
    check = check_parent(output, previous, shards, balance)
    if check.damage and on_damage == rules.FAIL:
        raise RunFailed(rules.refusal_line(check.damage, previous["run_id"]))
    for damage in check.damage:
        _LOG.warning("the published version's shard %s is damaged and is not kept: %s; its records are written "
                     "again from their sources", damage.shard, damage.problem)
    return check


def without_damaged(parent: ParentSpec, damage: Tuple[rules.Damage, ...]) -> ParentSpec:
    """``parent`` without its damaged shards, which it reads only to know which records they held."""
    kept, readable = rules.split_shards(parent.shards, damage)
    return dataclasses.replace(parent, shards=kept, damaged=readable)
