"""The verdict cache on any filesystem Beam knows: parts of verdicts per bucket, committed as they fill.

Layout under the cache folder (``--cache_dir``, by default ``OUTPUT/cache``)::

    <fingerprint>/<bucket 0000..1023>/<run_id>-<writer>-<sequence>.verdicts
    <fingerprint>/<bucket 0000..1023>/<run_id>-<spill>-<sequence>.records      (a bucket's spill, gs:// and s3://)
    <fingerprint>/spill/<run_id>-<process>-<split>-<sequence>.spill        (a process's spill, local disks)

A part is the framed, packed Verdicts (core/rerun/verdicts.py) one run wrote for one bucket. A writer
commits a part every COMMIT_EVERY verdicts or COMMIT_SECONDS (a local part is written under a
temporary name and renamed into place; an object appears whole when its upload completes), so a run
that is killed leaves its finished parts, and no half part, for the next run. Parts are read oldest
first (run ids sort by time) and a later verdict of a key replaces an earlier one. A bucket's old
parts are removed once the run has written every verdict of that bucket again, and after a commit
everything but the run's own parts goes (:func:`collect_garbage`): the cache holds the verdicts of
the pairs the last run selected, and nothing older (docs/cache.md). A part that cannot be read is
skipped with a warning: its pairs are validated again.

Validation's spill (io/cache/spill.py) sits beside the parts; a part commits only once the records its verdicts
point to are whole (``PartWriter``'s ``before_commit``).
"""

import logging
import os
import time
import uuid
from typing import Callable, Dict, Iterator, List, Optional

from apache_beam.io.filesystems import FileSystems

from beam_pipeline.core import paths
from beam_pipeline.core.failures import write_failed
from beam_pipeline.core.records import ValidPair, frame_packed, pack, read_framed, unpack
from beam_pipeline.core.rerun.verdicts import VERDICTS_PER_PART, Verdict, newest
from beam_pipeline.io import files

OWNER = "_owner.json"        # which output this cache belongs to (launcher/rerun/cache.py)
SUFFIX = ".verdicts"
TEMP_PREFIX = ".tmp-"
COMMIT_EVERY = VERDICTS_PER_PART
COMMIT_SECONDS = 10.0

_LOG = logging.getLogger("beam_pipeline.cache")


def bucket_folder(folder: str, bucket: int) -> str:
    return paths.join(folder, f"{bucket:04d}")


def part_paths(folder: str, bucket: int) -> List[str]:
    """The committed parts of a bucket, oldest first (half-written temporary files are not parts)."""
    found = files.list_files(bucket_folder(folder, bucket))
    return [paths.join(bucket_folder(folder, bucket), name) for name in sorted(found)
            if name.endswith(SUFFIX) and not name.startswith(TEMP_PREFIX) and "/" not in name]


def read_part(path: str) -> Iterator[Verdict]:
    with FileSystems.open(path, compression_type="uncompressed") as handle:
        for data in read_framed(handle):
            yield unpack(data)


def _readable(parts: List[str]) -> Iterator[Verdict]:
    for path in parts:
        try:
            yield from list(read_part(path))
        except Exception as error:  # noqa: BLE001 - a damaged part is only work to do again, never a failure
            _LOG.warning("ignoring the verdict cache's part %s, which cannot be read (%s): its pairs are "
                         "validated again", path, error)


def load(folder: str, bucket: int) -> Dict[str, Verdict]:
    """The newest verdict of each key of ``bucket`` (a part that cannot be read is skipped, with a warning)."""
    return newest(_readable(part_paths(folder, bucket)))


def remove_others(folder: str, bucket: int, keep: List[str]) -> None:
    """Remove the bucket's parts but ``keep`` (this run's): once a bucket is done, they hold every verdict
    still wanted, and the older ones (or a failed attempt's) are not."""
    keep_set = set(keep)
    files.remove_files([path for path in part_paths(folder, bucket) if path not in keep_set])


def collect_garbage(root: str, fingerprint: str, run_id: str) -> int:
    """After a commit: remove every file under the cache ``root`` but the parts this run committed under
    ``fingerprint`` (and the owner record). A bucket this run wrote no part to holds no pair of the corpus
    any more; another fingerprint's verdicts are read by no run of these options; a temporary file is
    what a killed writer left, and every spill has been written into shards. Emptied local folders go too.
    Returns how many files went."""
    own = f"{run_id}-"
    stale = []
    for relative in files.list_files(root):
        parts = relative.split("/")
        name = parts[-1]
        if relative == OWNER:
            continue
        if not (len(parts) == 3 and parts[0] == fingerprint and name.startswith(own) and name.endswith(SUFFIX)):
            stale.append(paths.join(root, relative))
    files.remove_files(stale)
    files.remove_empty_folders(root)
    return len(stale)


class PartWriter:
    """The verdicts one run writes for one bucket, in parts committed as they fill; ``close`` commits the last
    and returns every part it committed. ``before_commit`` runs before each part commits: the bucket's spill
    (io/cache/spill.BucketSpill.seal) makes every record spilled so far whole first, so that a committed verdict's
    record is readable."""

    def __init__(self, folder: str, bucket: int, run_id: str, clock=time.monotonic,
                 before_commit: Callable[[], None] = lambda: None):
        self._folder = bucket_folder(folder, bucket)
        self._before_commit = before_commit
        self._prefix = f"{run_id}-{uuid.uuid4().hex[:8]}"
        self._clock = clock
        self._local = not paths.split_scheme(folder)[0]
        self._sequence = 0
        self._handle = None
        self._path: Optional[str] = None
        self._temporary: Optional[str] = None
        self._count = 0
        self._opened = 0.0
        self.committed: List[str] = []

    def add(self, verdict: Verdict) -> None:
        if self._handle is None:
            self._open()
        try:
            self._handle.write(frame_packed(pack(verdict)))
        except OSError as error:
            raise write_failed(self._path, error) from error
        self._count += 1
        if self._count >= COMMIT_EVERY or self._clock() - self._opened >= COMMIT_SECONDS:
            self._commit()

    def close(self) -> List[str]:
        if self._handle is not None:
            self._commit()
        return self.committed

    def _open(self) -> None:
        name = f"{self._prefix}-{self._sequence:06d}{SUFFIX}"
        self._sequence += 1
        self._path = paths.join(self._folder, name)
        self._temporary = paths.join(self._folder, TEMP_PREFIX + name) if self._local else self._path
        if self._local:
            os.makedirs(self._folder, exist_ok=True)
        try:
            self._handle = FileSystems.create(self._temporary, compression_type="uncompressed")
        except OSError as error:
            raise write_failed(self._path, error) from error
        self._count, self._opened = 0, self._clock()

    def _commit(self) -> None:
        self._before_commit()                 # the spill first: a committed part's records are whole
        handle, self._handle = self._handle, None
        try:
            handle.close()
            if self._local:
                os.replace(self._temporary, self._path)
        except OSError as error:
            raise write_failed(self._path, error) from error
        self.committed.append(self._path)
