"""A version's near-duplicate index, and what a re-run reuses of its parent's (docs/leakage.md, "Re-runs").

Each version that compared hashes keeps, in ``runs/<run>/leakage/``:

* ``index-BBB.rows``: the band rows of bucket BBB (core/leakage/bands.py), sorted: (band, band value, image id,
  unit id, the hash's four words) as big-endian uint64. Every hash is in the files of its bands' buckets; band 0
  holds each hash once.
* ``pairs-00000-of-00001.jsonl``: every near-duplicate pair, one JSON object a line, sorted: the two images
  (source ids), their distance, their splits, and the ids a re-run needs (images, units, the component).

A re-run whose parent was indexed with the same hash, radius and ``--split_group`` reads the parent's files
instead of comparing every hash again: a bucket's new rows are compared with the parent's rows of that bucket (no
other), the parent's pairs keep their components unless a new pair or a gone image touches them, and only the
components touched are joined again. Anything else (no parent index, another radius) compares every hash.
"""

import dataclasses
import json
from typing import Dict, Optional, Tuple

from beam_pipeline.core.leakage import bands, phash

FOLDER = "leakage"
PAIRS_PREFIX = "leakage/pairs"          # + -00000-of-00001.jsonl
INDEX_VERSION = 1                       # the index files' layout; another one is never read


def index_file(bucket: int) -> str:
    """A bucket's index file, relative to its version folder."""
    return f"{FOLDER}/index-{bucket:03d}.rows"


def pairs_file() -> str:
    return f"{PAIRS_PREFIX}-00000-of-00001.jsonl"


def description(radius: int, split_group: str, files: Dict[int, str]) -> dict:
    """manifest.json's ``leakage.index``: what a re-run must match to reuse the index, and its files."""
    return {"version": INDEX_VERSION, "hash": phash.NAME, "radius": radius, "split_group": split_group or None,
            "buckets": bands.BUCKETS, "files": {str(bucket): path for bucket, path in sorted(files.items())}}


@dataclasses.dataclass(frozen=True)
class ParentIndex:
    """The parent version's index files (paths relative to the output folder) a re-run reads."""
    run_id: str
    files: Tuple[Tuple[int, str], ...]     # (bucket, index file)
    pairs_file: str
    pairs_bytes: int = 0                   # the pairs file's size in the parent's manifest (0: not known)

    def file(self, bucket: int) -> Optional[str]:
        return dict(self.files).get(bucket)


def parent_index(parent: Optional[dict], radius: int, split_group: str) -> Tuple[Optional[ParentIndex], str]:
    """(the parent's index when this run may reuse it, else None; why not, for the manifest)."""
    if parent is None:
        return None, "no published version"
    leakage = parent.get("leakage") or {}
    index = leakage.get("index") or {}
    if not index:
        return None, "the published version has no near-duplicate index"
    wanted = {"version": INDEX_VERSION, "hash": phash.NAME, "radius": radius, "split_group": split_group or None,
              "buckets": bands.BUCKETS}
    if any(index.get(key) != value for key, value in wanted.items()):
        return None, "the published version's index was made with another hash, radius or --split_group"
    files = tuple(sorted((int(bucket), path) for bucket, path in index["files"].items()))
    pairs_file = leakage.get("pairs_file") or ""
    pairs_bytes = ((parent.get("files") or {}).get(pairs_file) or {}).get("bytes") or 0
    return ParentIndex(parent["run_id"], files, pairs_file, int(pairs_bytes)), ""


def pair_line(pair: dict) -> str:
    return json.dumps(pair, sort_keys=True, separators=(",", ":"))


def pair_ids(line: str) -> Tuple[int, int, int, int, int, int, int]:
    """(image a, image b, unit a, unit b, distance, component, 0) of a pairs-file line."""
    pair = json.loads(line)
    a, b, unit_a, unit_b = (int(value, 16) for value in pair["ids"])
    return a, b, unit_a, unit_b, int(pair["distance"]), int(pair["component"], 16), 0


def hex_id(value: int) -> str:
    return f"{value:016x}"
