"""manifest.json's ``files`` table, and checking a version folder against it. Pure: the I/O is passed in.

``files`` maps every published file's path (relative to the version folder) to its size and
SHA-256: the shards, every file under ``transform/``, ``stats.json``, the rejects and class-index
files, ``report.html`` and ``stats/<split>.tfrecord``. A reader that checks it finds a damaged,
missing or half-copied file before it uses any.
"""

import dataclasses
import hashlib
from typing import Callable, Dict, Iterable, List

CHUNK_BYTES = 8 * 1024 * 1024

# Problem.kind
MISSING = "missing"          # listed in the manifest, not found
SIZE = "size"                # found with another size
SHA256 = "sha256"            # found with the right size and another digest
EXTRA = "extra"              # found in the version folder, not listed
UNREADABLE = "unread"        # found with the right size, but reading it failed


@dataclasses.dataclass(frozen=True)
class Problem:
    kind: str
    path: str                # relative to the version folder
    detail: str

    def __str__(self) -> str:
        return f"{self.kind:<7} {self.path}: {self.detail}"


def entry(data: bytes) -> dict:
    """The table entry of a file whose bytes are at hand."""
    return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


class StreamDigest:
    """The table entry of bytes handed over a chunk at a time."""

    def __init__(self):
        self._digest = hashlib.sha256()
        self._size = 0

    def update(self, chunk: bytes) -> None:
        self._digest.update(chunk)
        self._size += len(chunk)

    def entry(self) -> dict:
        return {"bytes": self._size, "sha256": self._digest.hexdigest()}


def stream_entry(chunks: Iterable[bytes]) -> dict:
    """The table entry of a file read in chunks (never whole in memory)."""
    digest = hashlib.sha256()
    size = 0
    for chunk in chunks:
        digest.update(chunk)
        size += len(chunk)
    return {"bytes": size, "sha256": digest.hexdigest()}


def check_sizes(files: Dict[str, dict], found: Dict[str, int], extras: bool = True) -> List[Problem]:
    """Missing files, wrong sizes and (with ``extras``) unlisted files, from one listing ``{path: size}``."""
    problems = []
    for path, expected in sorted(files.items()):
        if path not in found:
            problems.append(Problem(MISSING, path, f"listed with {expected['bytes']} bytes, not found"))
        elif found[path] != expected["bytes"]:
            problems.append(Problem(SIZE, path, f"{found[path]} bytes, the manifest says {expected['bytes']}"))
    if extras:
        problems += [Problem(EXTRA, path, f"{found[path]} bytes, not listed in the manifest")
                     for path in sorted(set(found) - set(files))]
    return problems


def check_digests(files: Dict[str, dict], digest_of: Callable[[str], str],
                  skip: Iterable[str] = ()) -> List[Problem]:
    """Files whose SHA-256 differs from the table's; ``digest_of(path)`` reads one file."""
    skipped = set(skip)
    problems = []
    for path, expected in sorted(files.items()):
        if path in skipped:
            continue
        actual = digest_of(path)
        if actual != expected["sha256"]:
            problems.append(Problem(SHA256, path, f"SHA-256 {actual[:16]}…, the manifest says "
                                                  f"{expected['sha256'][:16]}…"))
    return problems


def shard_entries(splits: Dict[str, dict]) -> Dict[str, dict]:
    """The table entries of the shards, from the digests the writer computed while writing them."""
    return {shard["path"]: {"bytes": shard["bytes"], "sha256": shard["sha256"]}
            for entry_ in splits.values() for shard in entry_["shards"]}


def total_bytes(files: Dict[str, dict]) -> int:
    return sum(item["bytes"] for item in files.values())
