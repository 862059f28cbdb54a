"""Whether a re-run may build on its parent version's files (docs/recovery.md, Damaged parents). Pure: the I/O is
launcher/rerun/parent.py's.

A re-run keeps the parent's shards without reading them (core/rerun/versions.py), so before it does it asks, for
every file it would keep (each shard of a reusable group, its keys file and its part of the class index):

1. is it there, with the size the parent's ``files`` table gives? A missing file, or another size, is damaged;
2. is its *version* the one recorded when the parent was published (``files[path]["version"]``: size, mtime in
   ns and inode on a local disk; size, generation and CRC32C on gs://; size, ETag and VersionId on s3://;
   io/streams.file_version)? Then its bytes are taken as the ones published, as the verdict cache takes a
   source file's;
3. otherwise (touched, copied, restored, or a parent published before versions were recorded) its SHA-256 is
   taken and compared with the table's: a file with other bytes is damaged.

Each shard entry's deleted records must also be distinct indices below its record count, and agree with the
version's own copy of its manifest (``runs/<run_id>/manifest.json``, written with it). A shard any of whose
files is damaged is never kept: its live records are written again from their sources, as a changed pair's are
(``--on_damaged_parent rebuild``, the default), or the run stops naming the file (``fail``).
"""

import dataclasses
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from beam_pipeline.core.digests import deleted_problems
from beam_pipeline.core.rerun.versions import ParentShard

REBUILD, FAIL = "rebuild", "fail"          # --on_damaged_parent
OK, HASH = "ok", "hash"                    # judge(): the file may be kept as it is; its SHA-256 decides


@dataclasses.dataclass(frozen=True)
class ParentFile:
    """A file a re-run would keep: its path (relative to the output folder) and its ``files`` table entry."""
    path: str
    bytes: int
    sha256: str
    version: str = ""                      # recorded at publish; "" for a parent published before versions were


@dataclasses.dataclass(frozen=True)
class Damage:
    """A parent shard that is not kept, and why (one line, naming the file)."""
    shard: str
    problem: str
    keys_readable: bool                    # its keys file is intact: which records it held can still be read


def expected_file(path: str, table: Dict[str, dict]) -> ParentFile:
    """``path`` as the ``files`` table records it (a file it does not name: of no size that can match)."""
    entry = table.get(path) or {}
    return ParentFile(path, entry.get("bytes", -1), entry.get("sha256", ""), entry.get("version", ""))


def files_to_check(shards: Iterable[ParentShard], table: Dict[str, dict]) -> List[ParentFile]:
    """Every file of ``shards`` a re-run would keep: each shard and its side files, with their table entries."""
    return [expected_file(path, table) for shard in shards
            for path in (shard.path, shard.keys, shard.class_index) if path]


def version_size(version: str) -> int:
    """The size a file's version gives (its first field)."""
    return int(version.split(":", 1)[0])


def judge(expected: ParentFile, version: Optional[str]) -> str:
    """OK when the file may be kept as it is, HASH when its SHA-256 decides, else the problem (one phrase)."""
    if version is None:
        return "is missing"
    size = version_size(version)
    if size != expected.bytes:
        return f"holds {size:,} bytes, the manifest says {expected.bytes:,}"
    return OK if expected.version and version == expected.version else HASH


def judge_digest(expected: ParentFile, sha256: str) -> str:
    return OK if sha256 == expected.sha256 else (f"has other bytes (SHA-256 {sha256[:12]}…, the manifest says "
                                                 f"{expected.sha256[:12]}…)")


def entry_problems(shards: Sequence[ParentShard], own_copy: Optional[dict]) -> Dict[str, str]:
    """{shard path: problem} of the parent's shard entries: deleted indices that are not distinct indices below the
    record count, or an entry that differs from the version's own copy of its manifest (``own_copy``; None when
    that copy could not be read: only the first check is made)."""
    copied = {}
    for entry in ((own_copy or {}).get("splits") or {}).values():
        for shard in entry.get("shards") or ():
            copied[shard.get("path")] = shard
    problems = {}
    for shard in shards:
        bad = deleted_problems(shard.path, shard.deleted, shard.records)
        if bad:
            problems[shard.path] = f"in manifest.json, {bad[0].detail}"
            continue
        if own_copy is not None:
            twin = copied.get(shard.path)
            if twin is None or (tuple(twin.get("deleted") or ()), twin.get("records"), twin.get("sha256")) != (
                    shard.deleted, shard.records, shard.sha256):
                problems[shard.path] = ("its entry in manifest.json (records, deleted records, SHA-256) differs from "
                                        "the version's own copy of its manifest")
    return problems


def damaged_shards(shards: Sequence[ParentShard], file_problems: Dict[str, str],
                   entry_problems_: Dict[str, str]) -> List[Damage]:
    """The shards not kept: one of their files is damaged, or their entry is (the first problem of each names it)."""
    out = []
    for shard in shards:
        problem = entry_problems_.get(shard.path)
        for path in (shard.path, shard.keys, shard.class_index):
            if problem is None and path and path in file_problems:
                problem = f"{path} {file_problems[path]}"
        if problem is not None:
            if shard.path in entry_problems_:
                problem = f"{shard.path}: {problem}"
            out.append(Damage(shard.path, problem, keys_readable=bool(shard.keys) and shard.keys not in file_problems))
    return out


def split_shards(shards: Sequence[ParentShard], damage: Sequence[Damage]) -> Tuple[Tuple[ParentShard, ...],
                                                                                   Tuple[ParentShard, ...]]:
    """(the shards a re-run may keep, the damaged ones whose keys file can still be read)."""
    damaged = {d.shard: d for d in damage}
    kept = tuple(shard for shard in shards if shard.path not in damaged)
    readable = tuple(shard for shard in shards if shard.path in damaged and damaged[shard.path].keys_readable)
    return kept, readable


def refusal_line(damage: Sequence[Damage], parent_run: str) -> str:
    """--on_damaged_parent fail: one line naming the first damaged file and what to run."""
    more = f" (and {len(damage) - 1} more shard(s))" if len(damage) > 1 else ""
    return (f"the published version runs/{parent_run} is damaged: {damage[0].problem}{more}. Nothing was written. "
            "Run again with --on_damaged_parent rebuild (the default) to write its records again from their "
            "sources, or --compact all to write every record again")
