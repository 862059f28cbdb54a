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
RECORDS = "records"          # a shard holding another number of records than listed, or bad deleted indices


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


class RecordCounter:
    """Counts the TFRecord records of bytes handed over a chunk at a time (the framing only: an 8-byte length,
    its 4-byte CRC, the data, the data's 4-byte CRC); ``records`` is -1 once the framing is broken or cut."""

    def __init__(self):
        self.records = 0
        self._need = 12                  # bytes still to read of the current header (12) or body (length + 4)
        self._header = b""
        self._in_header = True

    def update(self, chunk: bytes) -> None:
        position = 0
        while position < len(chunk) and self.records >= 0:
            take = min(self._need, len(chunk) - position)
            if self._in_header:
                self._header += chunk[position:position + take]
            position += take
            self._need -= take
            if self._need:
                continue
            if self._in_header:
                self._need = int.from_bytes(self._header[:8], "little") + 4
                self._header, self._in_header = b"", False
            else:
                self.records += 1
                self._need, self._in_header = 12, True

    def total(self) -> int:
        """The records counted, or -1 when the bytes ended inside a record."""
        return self.records if self._in_header and self._need == 12 and not self._header else -1


def deleted_problems(path: str, deleted, records: int) -> List[Problem]:
    """A shard's deleted record indices must be sorted, distinct and below its record count."""
    deleted = list(deleted or ())
    if deleted != sorted(set(deleted)) or (deleted and (deleted[0] < 0 or deleted[-1] >= records)):
        return [Problem(RECORDS, path, f"its deleted records {deleted[:5]}... are not distinct indices below {records}")]
    return []


def shard_entries(splits: Dict[str, dict]) -> Dict[str, dict]:
    """The table entries of the shards, from the digests the writer computed while writing them."""
    return {shard["path"]: {"bytes": shard["bytes"], "sha256": shard["sha256"]}
            for entry_ in splits.values() for shard in entry_["shards"]}


def total_bytes(files: Dict[str, dict]) -> int:
    return sum(item["bytes"] for item in files.values())
