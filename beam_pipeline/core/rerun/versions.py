"""Versions made of immutable shards from several runs (docs/incremental.md). Pure: no Beam, no TensorFlow.

One word per thing: a *version* is a manifest.json, a *shard* is a file, and a shard's *deleted* records
are a set of record indices (0-based, in file order) that the version no longer holds. Every path is
relative to the output folder.

A re-run into an output whose current version (the *parent*) was written with the same record layout
(:func:`record_layout`):

1. keeps a parent record whose pair is still selected and valid, with the same content, in the same split
   and shard group (:func:`decide`): it stays where the parent holds it, and nothing is written for it;
2. writes a record for every pair that is new or changed, into this run's new shards;
3. deletes every parent record whose pair is gone: removed from the listing, filtered out, now rejected,
   changed in content, or moved to another split;
4. compacts (:func:`compaction`): the live records of a shard that deletions left mostly empty, and of the
   many small shards that successive runs leave in a group, are written again into new shards, and those
   shards leave the version.

A record is known by two digests, kept in its shard's keys file (one line per record, in file order, with
the record's framed size): its *key* (the pair's stable key and repeat copy) and its *content* (its files'
digests, label, source id, split and shard group). Records of the same key and content have the same bytes
under the same layout.
"""

import dataclasses
import hashlib
import json
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple

from beam_pipeline.core.sharding import shard_name_parts

KEEP, WRITE, DELETE = "keep", "write", "delete"
COMPACT_AUTO, COMPACT_NEVER, COMPACT_ALL = "auto", "never", "all"
LIVE_SHARE = 0.5              # --compact auto: a shard with a smaller share of live records is compacted
SMALL_SHARE = 0.25            # ... a shard of less than this share of --target_shard_bytes is small,
MAX_SMALL_SHARDS = 4          # ... and a group with more small shards than this has them compacted
REWRITTEN_GROUPS = ("repeat_factor", "strata")   # --balance methods whose train records depend on every pair
DIGEST_CHARS = 32


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:DIGEST_CHARS]


def record_key(shard_key: str) -> str:
    """The record's key digest: its pair's key and repeat copy (ValidPair.shard_key)."""
    return _digest(shard_key)


def record_content(content_key: str, source_id: str, split: str, group: str) -> str:
    """The record's content digest: what must be equal for a parent's record to be kept."""
    return _digest(json.dumps([content_key, source_id, split, group]))


def keys_line(key: str, content: str, size: int) -> str:
    """A keys file's line: the record's key and content digests, and its framed size in the shard."""
    return f"{key}\t{content}\t{size}\n"


def parse_keys(text: str) -> List[Tuple[str, str, int]]:
    """``[(key, content, framed size)]`` of a keys file, in record order."""
    out = []
    for line in text.splitlines():
        if line:
            key, content, size = line.split("\t")
            out.append((key, content, int(size)))
    return out


def record_layout(verdict_fingerprint: str, balance: str) -> str:
    """What a record's bytes and shard group depend on beyond its pair: the check options, decoders and rules
    (the verdict cache's fingerprint) and the balancing. A parent of another layout is not reused."""
    return _digest(json.dumps({"verdicts": verdict_fingerprint, "balance": balance}))


def reusable_group(group: str, balance: str) -> bool:
    """Whether a parent's shards of ``group`` may be kept: a train split with repeat copies or strata depends on
    every pair's classes (a new pair changes every copy count), so it is written again on every run."""
    return not (group.startswith("train") and balance in REWRITTEN_GROUPS)


@dataclasses.dataclass(frozen=True)
class Located:
    """A parent record: its shard, its index in the shard, its content digest, its framed size."""
    shard: str
    index: int
    content: str
    size: int = 0


def decide(content: Optional[str], parents: Sequence[Located]) -> Tuple[Optional[Located], bool, List[Located]]:
    """(the parent record kept, whether a record is written, the parent records deleted) for one key, whose
    current pair has ``content`` (None: gone) and whose parent records are ``parents``."""
    kept = next((p for p in sorted(parents, key=_order) if content is not None and p.content == content), None)
    deleted = [p for p in sorted(parents, key=_order) if p is not kept]
    return kept, content is not None and kept is None, deleted


def _order(located: Located):
    return located.shard, located.index


@dataclasses.dataclass(frozen=True)
class ShardState:
    """A parent shard after this run's deletions, for :func:`compaction`."""
    path: str
    group: str
    records: int
    live: int
    bytes: int


def compaction(shards: Iterable[ShardState], mode: str, target_shard_bytes: int) -> Set[str]:
    """The parent shards whose live records this run writes again (``--compact``)."""
    shards = list(shards)
    if mode == COMPACT_ALL:
        return {s.path for s in shards}
    if mode == COMPACT_NEVER:
        return set()
    chosen = {s.path for s in shards if s.live < LIVE_SHARE * s.records}
    small: Dict[str, List[str]] = {}
    for s in shards:
        if s.path not in chosen and s.bytes * s.live < SMALL_SHARE * target_shard_bytes * max(s.records, 1):
            small.setdefault(s.group, []).append(s.path)
    for paths in small.values():
        if len(paths) > MAX_SMALL_SHARDS:
            chosen.update(paths)
    return chosen


def merged_deleted(before: Sequence[int], now: Iterable[int]) -> List[int]:
    """A kept shard's deleted indices: its parent's and this run's, sorted."""
    return sorted(set(before) | set(now))


def files_of(manifest: dict) -> Set[str]:
    """Every file a version names (its ``files`` table), relative to the output folder; format 3 and later."""
    return set((manifest.get("files") or {}).keys())


def removable(found: Iterable[str], kept: Sequence[dict], kept_folders: Sequence[str]) -> List[str]:
    """The files under ``runs/`` that no kept version names: ``found`` are paths relative to the output folder;
    ``kept_folders`` are version folders kept whole (a version of an older format, whose manifest names its
    files relative to its own folder)."""
    named: Set[str] = set()
    for manifest in kept:
        named |= files_of(manifest)
    return sorted(path for path in found
                  if path not in named and not any(path.startswith(folder + "/") for folder in kept_folders))


# --------------------------------------------------------------------------
# The parent version, as a re-run reads it
# --------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class ParentShard:
    """A shard of the parent version: its manifest entry and its keys file."""
    path: str
    group: str
    split: str
    records: int
    bytes: int
    sha256: str
    deleted: Tuple[int, ...] = ()
    keys: str = ""
    class_index: str = ""
    side_files: Tuple[Tuple[str, int, str], ...] = ()   # (path, bytes, sha256) of its keys file and class index

    @property
    def live(self) -> int:
        return self.records - len(self.deleted)


@dataclasses.dataclass(frozen=True)
class ParentSpec:
    """What a re-run keeps from: the parent's shards, and how to compact (KeepParentRecords). ``damaged``: shards
    found damaged (core/rerun/parent.py), never kept, whose keys files still say which records they held."""
    run_id: str
    shards: Tuple[ParentShard, ...]
    balance: str = "none"
    compact: str = COMPACT_AUTO
    target_shard_bytes: int = 128 * 1024 * 1024
    damaged: Tuple[ParentShard, ...] = ()

    def shard(self, path: str) -> ParentShard:
        return self._by_path()[path]

    def _by_path(self) -> Dict[str, ParentShard]:
        return {shard.path: shard for shard in self.shards}


def group_of(shard_path: str) -> str:
    """``train`` of ``runs/<id>/train-00001-of-00004.tfrecord`` (core/sharding.shard_file_name)."""
    return shard_name_parts(shard_path)[0]


def parent_shards(manifest: dict) -> Tuple[ParentShard, ...]:
    """The shards a format-3 manifest names, with their deleted records and side files."""
    table = manifest.get("files") or {}
    out = []
    for split, entry in sorted(manifest.get("splits", {}).items()):
        for shard in entry["shards"]:
            side = tuple((path, table[path]["bytes"], table[path]["sha256"])
                         for path in (shard.get("keys"), shard.get("class_index")) if path and path in table)
            out.append(ParentShard(shard["path"], group_of(shard["path"]), split, shard["records"], shard["bytes"],
                                   shard["sha256"], tuple(shard.get("deleted", ())), shard.get("keys", ""),
                                   shard.get("class_index", ""), side))
    return tuple(out)


def reuse_refusal(parent: Optional[dict], layout: str) -> Optional[str]:
    """Why a re-run writes every record afresh (None: it may keep the parent's): no parent, a parent of an older
    format, or of another record layout (check options, decoders, rules, balancing)."""
    if parent is None:
        return "no published version to build on"
    if parent.get("format_version", 1) < 3 or not parent.get("record_layout"):
        return "the published version is of an older format"
    if parent["record_layout"] != layout:
        return "the published version was written with other options, decoders or rules"
    return None


def shard_states(spec: ParentSpec, live: Dict[str, int]) -> List[ShardState]:
    """The parent's reusable shards after this run's decisions (``live``: records kept per shard)."""
    return [ShardState(s.path, s.group, s.records, live.get(s.path, 0), s.bytes)
            for s in spec.shards if reusable_group(s.group, spec.balance)]
