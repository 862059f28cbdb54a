"""Validation's spill on disk (core/rerun/spill.py, docs/cache.md): reading an entry back, the room ``--spill auto``
keeps for the shards, and each worker process's local spill files.

A local spill file is ``<cache fingerprint folder>/spill/<run_id>-<process>-<split>-<sequence>.spill``: the
records one worker process validated afresh for one split, framed as a shard frames them, a new file every
``--target_shard_bytes`` (:class:`ProcessSpill`). On gs:// and s3://, where an object appears only once it is
closed, each bucket writer's spill is an object beside its verdicts parts
(``<bucket>/<run_id>-<spill>-<sequence>.records``), closed before the next part commits. :class:`BucketSpill` is
the spill one bucket's writer appends to, on either kind of store; its :meth:`BucketSpill.seal` runs before each
verdicts part commits (io/cache/verdicts.PartWriter), so a committed verdict's record is whole and readable.
"""

import logging
import os
import threading
import uuid
from typing import Dict, Optional, Tuple

from apache_beam.io.filesystems import FileSystems

from beam_pipeline.core import paths
from beam_pipeline.core.example import Pieces, frame_pieces, pair_example_pieces
from beam_pipeline.core.failures import write_failed
from beam_pipeline.core.records import ValidPair
from beam_pipeline.core.rerun import spill
from beam_pipeline.io import streams
from beam_pipeline.io.cache.verdicts import bucket_folder

SPILL_DIR = "spill"
PART_SPILL_SUFFIX = ".records"       # a bucket writer's spill object on gs:// and s3://
DEFAULT_SPILL_FILE_BYTES = 128 * 1024 * 1024

_LOG = logging.getLogger("beam_pipeline.cache")


_GONE_SPILLS = set()          # spill files this process found missing or unreadable: not asked again


def read_spilled(ref: spill.SpillRef) -> Optional[bytes]:
    """The framed record a spill entry holds, or None when its file is gone (collected by a commit since), cannot
    be read or does not hold the entry written (checked by CRC32C): then the writer reads the sources. A file
    found gone is not asked for again by this process."""
    path, offset = ref[0], ref[1]
    if path in _GONE_SPILLS:
        return None
    try:
        (framed,) = streams.read_ranges(path, offset, (ref[2],))
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
    """``--spill``: whether validation keeps one more pair's stored bytes in its spill (core/rerun/spill.py).

    ``never``: none. ``always``: every one. ``auto``: every one while the cache is on a local disk that keeps
    room for the shards afterwards (core/rerun/spill.shard_reserve: every selected pair at the mean entry size seen
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
_REGISTRY_LOCK = threading.Lock()


def spill_room(mode: str, cache_folder: Optional[str], run_id: str, shards_folder: Optional[str],
               selected_pairs: int) -> SpillRoom:
    """This process's SpillRoom for the run ``run_id``."""
    with _REGISTRY_LOCK:
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


def local_spill_left(folder: str) -> bool:
    """Whether the local spill folder of the cache ``folder`` holds a file: what a run killed before its commit
    leaves (a commit collects every spill), and the only files a re-run can adopt (stages/rerun/adopt.py). Asked
    at launch, under the output's lock, before this run spills anything; a cache on gs:// or s3:// adopts nothing."""
    if paths.split_scheme(folder)[0]:
        return False
    try:
        with os.scandir(paths.join(folder, SPILL_DIR)) as entries:
            return any(entry.is_file() for entry in entries)
    except OSError:
        return False


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
        name = f"{self._prefix}-{spill.split_in_name(split)}-{self._sequence:05d}{spill.SPILL_FILE_SUFFIX}"
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
    with _REGISTRY_LOCK:
        key = (folder, run_id)
        found = _PROCESS_SPILLS.get(key)
        if found is None:
            found = _PROCESS_SPILLS[key] = ProcessSpill(folder, run_id, file_bytes)
        return found


class BucketSpill:
    """The spill one bucket's verdicts writer appends to (module docstring): ``append`` a pair's record, ``seal``
    before each verdicts part commits."""

    def __init__(self, folder: str, bucket: int, run_id: str, file_bytes: int = DEFAULT_SPILL_FILE_BYTES):
        self._local = not paths.split_scheme(folder)[0]
        self._process = process_spill(folder, run_id, file_bytes) if self._local else None
        self._folder = bucket_folder(folder, bucket)
        self._prefix = f"{run_id}-{uuid.uuid4().hex[:8]}"     # the run's id first: core/rerun/spill.live
        self._sequence = 0
        self._object = None                  # the open spill object on gs:// or s3://: (handle, path), once used
        self._written = 0                    # bytes in it so far: the next entry's offset

    def append(self, pair: ValidPair, image: bytes, mask: bytes) -> spill.SpillRef:
        """Append the record of ``pair`` (its first copy), storing ``image`` and ``mask``; where it is."""
        framed = frame_pieces(pair_example_pieces(pair, image, mask))
        if self._process is not None:
            return self._process.append(pair.ref.split or "", framed, pair.ref.source_id)
        if self._object is None:
            path = paths.join(self._folder, f"{self._prefix}-{self._sequence:06d}{PART_SPILL_SUFFIX}")
            self._sequence += 1
            try:
                self._object = (FileSystems.create(path, compression_type="uncompressed"), path)
            except OSError as error:
                raise write_failed(path, error) from error
            self._written = 0
        handle, path = self._object
        try:
            for piece in framed:
                handle.write(piece)
        except OSError as error:
            raise write_failed(path, error) from error
        ref = spill.reference(path, self._written, framed, pair.ref.source_id)
        self._written += ref[2]
        return ref

    def seal(self) -> None:
        """Make every record appended so far whole and readable: the local files flushed, the open object closed."""
        if self._process is not None:
            self._process.flush()
        elif self._object is not None:
            (handle, path), self._object = self._object, None
            try:
                handle.close()
            except OSError as error:
                raise write_failed(path, error) from error
