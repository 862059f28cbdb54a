"""What Beam's FileSystems lacks, per storage backend: the output lock, a whole-file publish, and
cleaning up uploads a killed run left unfinished.

Everything else (reading, writing, listing, deleting) goes through Beam's FileSystems and so works on
every scheme Beam knows. These three need guarantees FileSystems does not expose:

=====================  ==============================  ========================  ===========================
                       local disk                      gs://                     s3://
=====================  ==============================  ========================  ===========================
lock: create if absent  ``link()`` of a complete file  ``ifGenerationMatch=0``   ``If-None-Match: *``
lock: is the holder     it still holds the ``flock``   heartbeat within lease    heartbeat within lease
alive                   (exact, dies with the process) (or its pid, same host)   (or its pid, same host)
lock: take-over         under that ``flock``           compare-and-swap on the   compare-and-swap on the
                                                       generation read           ETag read (``If-Match``)
whole-file publish      temp file, fsync, os.replace   an upload appears whole   a PUT appears whole
unfinished uploads      none                           none (sessions expire)    abort multipart uploads
=====================  ==============================  ========================  ===========================

:func:`store_for` picks the backend from the output's scheme. :class:`LocalStore` is here, the object
stores' in object_stores.py. The local one is tested
(tests/test_locks.py and the kill matrix); the S3 and GCS backends call boto3 and
google-cloud-storage directly, built from the same pipeline options Beam's filesystems use, and
import them only when used (their tests run against local S3 and GCS servers: issue 14).

A lock holder on an object store refreshes its record every ``lease/3`` seconds from a thread; a
failed compare-and-swap means another run took the lock over, and :meth:`OutputLock.check`
(called just before the commit) then raises LockLost, so a run that lost its lock never writes
manifest.json (fencing).
"""

import abc
import fcntl
import json
import os
import time
from typing import Optional

from beam_pipeline.core import layout, paths
from beam_pipeline.core.locking import LockLost, OutputLocked, describe, new_record

ACQUIRE_ATTEMPTS = 5               # tries to create or take over a lock record that keeps changing


class OutputLock(abc.ABC):
    """One run's hold on an output folder: acquire before writing anything, check before the commit."""

    record: Optional[dict] = None

    @abc.abstractmethod
    def acquire(self, run_id: str) -> Optional[str]:
        """Take the lock for ``run_id``; raises OutputLocked naming a live holder.

        Returns the line that says a stale lock was taken over, or None.
        """

    @abc.abstractmethod
    def check(self) -> None:
        """Raise LockLost when another run has taken the lock over (fencing, just before the commit)."""

    @abc.abstractmethod
    def release(self) -> None:
        """Give the lock up (a killed run cannot; the next run takes its stale lock over)."""


class Store(abc.ABC):
    """The backend-specific operations for one output folder."""

    def __init__(self, output: str):
        self.output = output

    @abc.abstractmethod
    def lock(self) -> OutputLock:
        """A new, not yet acquired, lock on the output folder."""

    @abc.abstractmethod
    def publish_file(self, path: str, data: bytes) -> None:
        """Write a small file so that readers see either the old content or the whole new one."""

    def abort_unfinished_uploads(self) -> int:
        """Remove what killed writers left invisible under the output; returns how many. Nothing by default."""
        return 0


# --------------------------------------------------------------------------
# Local disk (and any filesystem mounted on this host)
# --------------------------------------------------------------------------
class LocalLock(OutputLock):
    """``OUTPUT/_lock.json``, created complete and flock()ed under a temporary name, then link()ed into place.

    The holder keeps the flock for the whole run; the kernel drops it when the process dies, however
    it dies, so a contender that can flock the existing file knows its holder is gone, and takes it
    over while holding that flock (only one contender can).
    """

    def __init__(self, output: str):
        self.path = os.path.join(output, layout.LOCK)
        self._fd: Optional[int] = None

    def acquire(self, run_id: str) -> Optional[str]:
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        record = new_record(run_id, time.time(), 0.0)
        for _ in range(ACQUIRE_ATTEMPTS):
            if self._create(record):
                return None
            taken = self._take_over(record)
            if taken is not None:
                return taken
        raise OutputLocked(f"the lock {self.path} keeps changing; another run is starting on this output")

    def _create(self, record: dict) -> bool:
        temp = f"{self.path}.{record['run_id']}.tmp"
        fd = os.open(temp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.write(fd, json.dumps(record).encode("utf-8"))
            os.fsync(fd)
            os.link(temp, self.path)          # atomic; fails when a lock file exists
        except FileExistsError:
            os.close(fd)
            return False
        except BaseException:
            os.close(fd)
            raise
        finally:
            os.unlink(temp)
        self._fd, self.record = fd, record
        return True

    def _take_over(self, record: dict) -> Optional[str]:
        """None when the lock file went away meanwhile (try again); raises OutputLocked for a live holder."""
        try:
            fd = os.open(self.path, os.O_RDWR)
        except FileNotFoundError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = parse_record(os.pread(fd, 1 << 16, 0))
            os.close(fd)
            raise OutputLocked(f"{describe(holder)} holds this output (its process still holds the lock "
                               f"{self.path})") from None
        if os.fstat(fd).st_nlink == 0:        # released (unlinked) while we opened it
            os.close(fd)
            return None
        holder = parse_record(os.pread(fd, 1 << 16, 0))
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(record).encode("utf-8"), 0)
        os.fsync(fd)
        self._fd, self.record = fd, record
        return f"taking over the stale lock of {describe(holder)}: its process no longer holds the lock"

    def _still_ours(self) -> bool:
        try:
            return self._fd is not None and os.stat(self.path).st_ino == os.fstat(self._fd).st_ino
        except FileNotFoundError:
            return False

    def check(self) -> None:
        if not self._still_ours():
            raise LockLost(f"the lock {self.path} is no longer this run's (removed or replaced)")

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            if self._still_ours():
                os.unlink(self.path)          # while still flocked: no contender can take it in between
        finally:
            os.close(self._fd)
            self._fd = None


def parse_record(data: bytes) -> dict:
    try:
        return json.loads(data or b"{}")
    except ValueError:
        return {}


class LocalStore(Store):
    def lock(self) -> OutputLock:
        return LocalLock(self.output)

    def publish_file(self, path: str, data: bytes) -> None:
        """Temp file in the same folder, fsync, os.replace, fsync of the folder: old or new, never half."""
        folder = os.path.dirname(path) or "."
        os.makedirs(folder, exist_ok=True)
        temp = os.path.join(folder, layout.publish_temp_name(os.path.basename(path), str(os.getpid())))
        try:
            with open(temp, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temp, path)
        except BaseException:
            if os.path.exists(temp):
                os.unlink(temp)
            raise
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def store_for(output: str, options) -> Store:
    """The backend of ``output``'s scheme: local disk, gs:// or s3://."""
    scheme = paths.split_scheme(output)[0]
    if not scheme:
        return LocalStore(output)
    from beam_pipeline import object_stores     # boto3 or google-cloud-storage only when used
    if scheme == "gs://":
        return object_stores.GcsStore(output, options)
    if scheme == "s3://":
        return object_stores.S3Store(output, options)
    raise ValueError(f"--output {output}: no lock is known for {scheme} outputs (local paths, gs:// and s3:// are)")
