"""The verdict cache on any filesystem Beam knows: parts of verdicts per bucket, committed as they fill.

Layout under the cache folder (``--cache_dir``, by default ``OUTPUT/cache``)::

    <fingerprint>/<bucket 0000..1023>/<run_id>-<writer>-<sequence>.verdicts
    <fingerprint>/<bucket 0000..1023>/<run_id>-<writer>-<sequence>.records     (the part's spill, gs:// and s3://)
    <fingerprint>/spill/<run_id>-<process>-<split>-<sequence>.tfrecord        (a process's spill, local disks)

A part is the framed, packed Verdicts (core/verdicts.py) one run wrote for one bucket. A writer
commits a part every COMMIT_EVERY verdicts or COMMIT_SECONDS (a local part is written under a
temporary name and renamed into place; an object appears whole when its upload completes), so a run
that is killed leaves its finished parts, and no half part, for the next run. Parts are read oldest
first (run ids sort by time) and a later verdict of a key replaces an earlier one. A bucket's old
parts are removed once the run has written every verdict of that bucket again, and after a commit
everything but the run's own parts goes (:func:`collect_garbage`): the cache holds the verdicts of
the pairs the last run selected, and nothing older (docs/cache.md). A part that cannot be read is
skipped with a warning: its pairs are validated again.

The spill (core/spill.py) holds the records of the pairs validated afresh, framed as the shards frame them, for
the writer of the same run or of the re-run after a kill. On a local disk each worker process appends them to one
file per split (:class:`ProcessSpill`), a new one every ``--target_shard_bytes``, and flushes it before each part
commits, so a committed verdict's record is whole in a file that a re-run after a kill adopts as a shard
(stages/adopt.py). On object stores, where an object appears only once it is closed, each part has a spill of its
own, closed before the part is committed. Spills go with everything else at the next commit.
"""

import logging
import os
import re
import threading
import time
import uuid
from typing import Dict, Iterator, List, Optional, Tuple

from apache_beam.io.filesystems import FileSystems

from beam_pipeline.core import paths, spill
from beam_pipeline.core.example import Pieces, frame_pieces, pair_example_pieces
from beam_pipeline.core.failures import write_failed
from beam_pipeline.core.records import ValidPair, frame_packed, pack, read_framed, unpack
from beam_pipeline.core.verdicts import VERDICTS_PER_PART, Verdict, newest
from beam_pipeline.io import files, ranges

OWNER = "_owner.json"        # which output this cache belongs to (launcher/cache.py)
SUFFIX = ".verdicts"
SPILL_SUFFIX = ".records"
SPILL_DIR = "spill"
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


_GONE_SPILLS = set()          # spill files this process found missing or unreadable: not asked again


def read_spilled(ref: spill.SpillRef) -> Optional[bytes]:
    """The framed record a spill entry holds, or None when its file is gone (collected by a commit since), cannot
    be read or does not hold the entry written (checked by CRC32C): then the writer reads the sources. A file
    found gone is not asked for again by this process."""
    path, offset = ref[0], ref[1]
    if path in _GONE_SPILLS:
        return None
    try:
        (framed,) = ranges.read_ranges(path, offset, (ref[2],))
    except Exception as error:  # noqa: BLE001 - a spill is only a shortcut: any failure means the sources
        _GONE_SPILLS.add(path)
        _LOG.info("validation's spill %s cannot be read (%s): its pairs are read from their files", path, error)
        return None
    if not spill.matches(ref, framed):
        _LOG.warning("validation's spill %s does not hold the record written at offset %d: the pair is read from "
                     "its files", path, offset)
        return None
    return framed


class SpillRoom:
    """``--spill``: whether validation keeps one more pair's stored bytes in its spill (core/spill.py).

    ``never``: none. ``always``: every one. ``auto``: every one while the cache is on a local disk that keeps
    room for the shards afterwards (core/spill.shard_reserve: every selected pair at the mean entry size seen
    so far, when the shards go to the same disk; else a margin), checked before each entry; once an entry
    would not leave that room, no other is spilled in this process, and the writer reads those pairs' files
    again. On gs:// and s3:// ``auto`` spills every one. One per process and run (:func:`spill_room`), so
    the disk is reported once, whatever the bundles and threads."""

    def __init__(self, mode: str, cache_folder: Optional[str], shards_folder: Optional[str], selected_pairs: int):
        self._mode = mode
        self._folder = cache_folder
        self._checked = (mode == "auto" and bool(cache_folder) and not paths.split_scheme(cache_folder)[0])
        # The folder whose disk is asked, found once: the cache's nearest existing folder is on the cache's disk.
        self._disk = _existing(cache_folder) if self._checked else None
        self._selected = selected_pairs if self._checked and shards_folder and _same_disk(
            cache_folder, shards_folder) else 0
        self._entries = self._entry_bytes = 0
        self._full = False
        self._lock = threading.Lock()

    def allows(self, size: int) -> bool:
        """Whether an entry of ``size`` bytes may be spilled."""
        with self._lock:
            self._entries += 1
            self._entry_bytes += size
            if self._mode == "never" or self._full:
                return False
            if not self._checked:
                return True
            free = _free_bytes(self._disk)
            reserve = spill.shard_reserve(self._selected, self._entries, self._entry_bytes)
            if free is None or spill.room_for_entry(free, size, reserve):
                return True
            self._full = True
        _LOG.warning("the disk of the verdict cache %s has %.2f GB free and keeps %.2f GB for the shards: "
                     "validation stops keeping pairs' bytes in its spill, and the writer reads their files "
                     "again (--spill)", self._folder, free / 1e9, reserve / 1e9)
        return False


_ROOMS: Dict[Tuple[str, str], SpillRoom] = {}
_ROOMS_LOCK = threading.Lock()


def spill_room(mode: str, cache_folder: Optional[str], run_id: str, shards_folder: Optional[str],
               selected_pairs: int) -> SpillRoom:
    """This process's SpillRoom for the run ``run_id``."""
    with _ROOMS_LOCK:
        key = (cache_folder or "", run_id)
        room = _ROOMS.get(key)
        if room is None:
            room = _ROOMS[key] = SpillRoom(mode, cache_folder, shards_folder, selected_pairs)
        return room


def _existing(path: str) -> str:
    """``path``, or its nearest folder that exists (the cache and the version folder are made as they fill)."""
    path = os.path.abspath(path)
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


def _same_disk(one: str, other: str) -> bool:
    if paths.split_scheme(other)[0]:
        return False
    try:
        return os.stat(_existing(one)).st_dev == os.stat(_existing(other)).st_dev
    except OSError:
        return True                         # cannot tell: keep the room for the shards


def _free_bytes(folder: str) -> Optional[int]:
    """Bytes free to this user on the disk of ``folder`` (one that exists), or None when the system cannot say."""
    try:
        info = os.statvfs(folder)
    except OSError:
        return None
    return info.f_bavail * info.f_frsize


class ProcessSpill:
    """This process's local spill files for one run: one open file per split, a new one once a file holds
    ``file_bytes``; entries are appended whole under a lock, so a file is a sequence of framed records.
    :meth:`flush` makes every entry appended so far readable by other processes (and whole after a kill)."""

    def __init__(self, folder: str, run_id: str, file_bytes: int):
        self._folder = paths.join(folder, SPILL_DIR)
        self._prefix = f"{run_id}-{uuid.uuid4().hex[:8]}"
        self._file_bytes = file_bytes
        self._open: Dict[str, list] = {}             # split -> [handle, path, bytes so far]
        self._sequence = 0
        self._lock = threading.Lock()

    def append(self, split: str, framed: Pieces, source_id: str) -> spill.SpillRef:
        with self._lock:
            entry = self._open.get(split)
            if entry is None or entry[2] >= self._file_bytes:
                if entry is not None:
                    self._close(entry)
                entry = self._open[split] = self._new_file(split)
            handle, path, offset = entry
            try:
                for piece in framed:
                    handle.write(piece)
            except OSError as error:
                raise write_failed(path, error) from error
            ref = spill.reference(path, offset, framed, source_id)
            entry[2] += ref[2]
            return ref

    def flush(self) -> None:
        with self._lock:
            for handle, path, _ in self._open.values():
                try:
                    handle.flush()
                except OSError as error:
                    raise write_failed(path, error) from error

    def _new_file(self, split: str) -> list:
        name = f"{self._prefix}-{re.sub(r'[^A-Za-z0-9_.]', '_', split)}-{self._sequence:05d}{spill.SPILL_FILE_SUFFIX}"
        self._sequence += 1
        path = paths.join(self._folder, name)
        try:
            os.makedirs(self._folder, exist_ok=True)
            return [open(path, "wb"), path, 0]
        except OSError as error:
            raise write_failed(path, error) from error

    @staticmethod
    def _close(entry: list) -> None:
        try:
            entry[0].close()
        except OSError as error:
            raise write_failed(entry[1], error) from error


_PROCESS_SPILLS: Dict[Tuple[str, str], ProcessSpill] = {}


def process_spill(folder: str, run_id: str, file_bytes: int) -> ProcessSpill:
    """This process's ProcessSpill for the run ``run_id`` in the cache folder ``folder``."""
    with _ROOMS_LOCK:
        key = (folder, run_id)
        found = _PROCESS_SPILLS.get(key)
        if found is None:
            found = _PROCESS_SPILLS[key] = ProcessSpill(folder, run_id, file_bytes)
        return found


DEFAULT_SPILL_FILE_BYTES = 128 * 1024 * 1024


class PartWriter:
    """The verdicts one run writes for one bucket, in parts committed as they fill; ``close`` commits the last
    and returns every part it committed. :meth:`spill` keeps a pair's record in the spill: the process's local
    spill files (:class:`ProcessSpill`, flushed before each part commits), or on object stores the open part's."""

    def __init__(self, folder: str, bucket: int, run_id: str, clock=time.monotonic,
                 spill_file_bytes: int = DEFAULT_SPILL_FILE_BYTES):
        self._folder = bucket_folder(folder, bucket)
        self._process_spill = None
        self._spill_args = (folder, run_id, spill_file_bytes)
        self._prefix = f"{run_id}-{uuid.uuid4().hex[:8]}"
        self._clock = clock
        self._local = not paths.split_scheme(folder)[0]
        self._sequence = 0
        self._handle = None
        self._path: Optional[str] = None
        self._temporary: Optional[str] = None
        self._count = 0
        self._opened = 0.0
        self._spill = None                   # the open part's spill: (handle, path, temporary path), once used
        self._spilled = 0                    # bytes in it so far: the next entry's offset
        self.committed: List[str] = []

    def spill(self, pair: ValidPair, image: bytes, mask: bytes) -> spill.SpillRef:
        """Append the record of ``pair`` (its first copy), storing ``image`` and ``mask``, whose verdict is added
        next; where it is."""
        framed = frame_pieces(pair_example_pieces(pair, image, mask))
        if self._local:
            if self._process_spill is None:
                self._process_spill = process_spill(*self._spill_args)
            return self._process_spill.append(pair.ref.split or "", framed, pair.ref.source_id)
        if self._handle is None:
            self._open()
        if self._spill is None:
            path = self._path[:-len(SUFFIX)] + SPILL_SUFFIX
            try:
                self._spill = (FileSystems.create(path, compression_type="uncompressed"), path, path)
            except OSError as error:
                raise write_failed(path, error) from error
            self._spilled = 0
        handle, path, _ = self._spill
        try:
            for piece in framed:
                handle.write(piece)
        except OSError as error:
            raise write_failed(path, error) from error
        ref = spill.reference(path, self._spilled, framed, pair.ref.source_id)
        self._spilled += ref[2]
        return ref

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
        if self._process_spill is not None:  # the spill first: a committed part's records are whole
            self._process_spill.flush()
        if self._spill is not None:
            (spilled, path, _), self._spill = self._spill, None
            try:
                spilled.close()
            except OSError as error:
                raise write_failed(path, error) from error
        handle, self._handle = self._handle, None
        try:
            handle.close()
            if self._local:
                os.replace(self._temporary, self._path)
        except OSError as error:
            raise write_failed(self._path, error) from error
        self.committed.append(self._path)
