"""The output lock and whole-file publish on local disk (and any filesystem mounted on this host):
a lock file created complete and ``link()``ed into place, held by ``flock``; publish by temp file,
fsync and ``os.replace``; a file's first bytes under another name without a copy (:func:`link_prefix`)."""

import fcntl
import json
import os
import time
from typing import Optional

from beam_pipeline.core import layout
from beam_pipeline.core.locking import LockLost, OutputLocked, describe, new_record
from beam_pipeline.io.stores.base import ACQUIRE_ATTEMPTS, OutputLock, Store, parse_record


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


def link_prefix(source: str, target: str, length: int) -> bool:
    """``target`` as a hard link to ``source``, cut to its first ``length`` bytes (the two names share the inode: the
    source is cut too); a ``target`` already there (a retried bundle's link) is replaced. False, with nothing left
    at ``target``, when the link cannot be made (another disk, a filesystem without hard links)."""
    try:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if os.path.lexists(target):
            os.unlink(target)
        os.link(source, target)
        if os.path.getsize(target) > length:
            os.truncate(target, length)
    except OSError:
        return False
    return True
