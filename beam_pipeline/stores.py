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

:func:`store_for` picks the backend from the output's scheme. :class:`LocalStore` is tested here
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
import logging
import os
import threading
import time
from typing import Callable, Optional

from beam_pipeline.core import layout, paths
from beam_pipeline.core.locking import LockLost, OutputLocked, describe, is_stale, new_record

_LOG = logging.getLogger(__name__)
DEFAULT_LEASE_SECONDS = 600.0      # far longer than clock skew between hosts; refreshed every lease / 3
_ACQUIRE_ATTEMPTS = 5


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
        for _ in range(_ACQUIRE_ATTEMPTS):
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
            holder = _parse(os.pread(fd, 1 << 16, 0))
            os.close(fd)
            raise OutputLocked(f"{describe(holder)} holds this output (its process still holds the lock "
                               f"{self.path})") from None
        if os.fstat(fd).st_nlink == 0:        # released (unlinked) while we opened it
            os.close(fd)
            return None
        holder = _parse(os.pread(fd, 1 << 16, 0))
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


def _parse(data: bytes) -> dict:
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


# --------------------------------------------------------------------------
# Object stores: a lease lock on conditional writes
# --------------------------------------------------------------------------
class Conflict(Exception):
    """A conditional write's precondition did not hold (the object exists, or changed)."""


class ObjectStoreLock(OutputLock):
    """The lease lock on an object store, through a backend of four conditional operations:

    ``create(body) -> version`` (only if absent), ``read() -> (body, version)``,
    ``replace(body, version) -> version`` (only if unchanged) and ``delete(version)``; each raises
    Conflict when its precondition fails and FileNotFoundError when the object is gone.
    """

    def __init__(self, backend, lease_seconds: float = DEFAULT_LEASE_SECONDS,
                 log: Callable[[str], None] = _LOG.warning):
        self.backend = backend
        self.lease = lease_seconds
        self.log = log
        self.version = None
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._mutex = threading.Lock()
        self._thread: Optional[threading.Thread] = None

    def acquire(self, run_id: str) -> Optional[str]:
        record = new_record(run_id, time.time(), self.lease)
        body = json.dumps(record).encode("utf-8")
        for _ in range(_ACQUIRE_ATTEMPTS):
            try:
                self.version = self.backend.create(body)
                return self._held(record, None)
            except Conflict:
                pass
            try:
                current, version = self.backend.read()
            except FileNotFoundError:
                continue                          # released between our create and our read
            holder = _parse(current)
            stale, why = is_stale(holder, time.time())
            if not stale:
                raise OutputLocked(f"{describe(holder)} holds this output: {why}")
            try:
                self.version = self.backend.replace(body, version)
            except (Conflict, FileNotFoundError):
                continue                          # another contender took it over first: look again
            return self._held(record, f"taking over the stale lock of {describe(holder)}: {why}")
        raise OutputLocked("the output's lock keeps changing; another run is starting on this output")

    def _held(self, record: dict, message: Optional[str]) -> Optional[str]:
        self.record = record
        self._thread = threading.Thread(target=self._beat, name="output-lock-heartbeat", daemon=True)
        self._thread.start()
        return message

    def _beat(self) -> None:
        while not self._stop.wait(self.lease / 3):
            try:
                self.refresh()
            except LockLost as error:
                self.log(str(error))
                return
            except Exception as error:  # noqa: BLE001 - a transient store error: the next beat tries again
                self.log(f"the output lock's heartbeat failed, trying again in {self.lease / 3:.0f} s: {error}")

    def refresh(self) -> None:
        """Move the heartbeat forward by compare-and-swap; LockLost when the record is no longer ours."""
        with self._mutex:
            if self.lost.is_set():
                raise LockLost(f"the lock of run {self.record['run_id']} was taken over by another run")
            record = dict(self.record, heartbeat=time.time())
            try:
                self.version = self.backend.replace(json.dumps(record).encode("utf-8"), self.version)
                self.record = record
            except (Conflict, FileNotFoundError):
                self.lost.set()
                raise LockLost(f"the lock of run {self.record['run_id']} was taken over by another run") from None

    def check(self) -> None:
        self.refresh()

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._mutex:
            if self.record is None or self.lost.is_set():
                return
            try:
                self.backend.delete(self.version)
            except (Conflict, FileNotFoundError):
                self.log(f"the lock of run {self.record['run_id']} was no longer its own at release")


class S3LockBackend:
    """Conditional writes on one S3 object (PutObject If-None-Match / If-Match, DeleteObject If-Match)."""

    def __init__(self, client, bucket: str, key: str):
        self.client, self.bucket, self.key = client, bucket, key

    def _call(self, method, **kwargs):
        from botocore.exceptions import ClientError
        try:
            return method(Bucket=self.bucket, Key=self.key, **kwargs)
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code")
            status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            # 409 ConditionalRequestConflict: a concurrent conditional write on the same key
            if code in ("PreconditionFailed", "ConditionalRequestConflict") or status in (409, 412):
                raise Conflict(code) from None
            if code in ("NoSuchKey", "404") or status == 404:
                raise FileNotFoundError(self.key) from None
            raise

    def create(self, body: bytes) -> str:
        return self._call(self.client.put_object, Body=body, IfNoneMatch="*")["ETag"]

    def read(self):
        response = self._call(self.client.get_object)
        return response["Body"].read(), response["ETag"]

    def replace(self, body: bytes, version: str) -> str:
        return self._call(self.client.put_object, Body=body, IfMatch=version)["ETag"]

    def delete(self, version: str) -> None:
        self._call(self.client.delete_object, IfMatch=version)


class GcsLockBackend:
    """Conditional writes on one GCS object (ifGenerationMatch on upload, read and delete)."""

    def __init__(self, client, bucket: str, name: str):
        self.client, self.bucket, self.name = client, bucket, name

    def _blob(self):
        return self.client.bucket(self.bucket).blob(self.name)

    @staticmethod
    def _guard(call):
        from google.api_core.exceptions import NotFound, PreconditionFailed
        try:
            return call()
        except PreconditionFailed:
            raise Conflict("conditionNotMet") from None
        except NotFound:
            raise FileNotFoundError() from None

    def _upload(self, body: bytes, generation: int) -> int:
        blob = self._blob()
        self._guard(lambda: blob.upload_from_string(body, content_type="application/json",
                                                    if_generation_match=generation))
        return blob.generation

    def create(self, body: bytes) -> int:
        return self._upload(body, 0)

    def read(self):
        blob = self._guard(lambda: self.client.bucket(self.bucket).get_blob(self.name))
        if blob is None:
            raise FileNotFoundError(self.name)
        generation = blob.generation
        return self._guard(lambda: blob.download_as_bytes(if_generation_match=generation)), generation

    def replace(self, body: bytes, version: int) -> int:
        return self._upload(body, version)

    def delete(self, version: int) -> None:
        self._guard(lambda: self._blob().delete(if_generation_match=version))


def _bucket_and_key(url: str):
    bucket, _, key = paths.split_scheme(url)[1].partition("/")
    return bucket, key


class _ObjectStore(Store):
    """Objects appear whole when their upload completes, so a whole-file publish is one FileSystems write."""

    def __init__(self, output: str, options):
        super().__init__(output)
        self.options = options

    def publish_file(self, path: str, data: bytes) -> None:
        from apache_beam.io.filesystems import FileSystems
        with FileSystems.create(path) as handle:
            handle.write(data)


class S3Store(_ObjectStore):
    def _client(self):
        from apache_beam.io.aws.clients.s3 import boto3_client
        return boto3_client.Client(options=self.options).client

    def lock(self) -> OutputLock:
        bucket, key = _bucket_and_key(paths.join(self.output, layout.LOCK))
        return ObjectStoreLock(S3LockBackend(self._client(), bucket, key))

    def abort_unfinished_uploads(self) -> int:
        """Abort the multipart uploads a killed writer left under the output (invisible, but billed)."""
        client = self._client()
        bucket, prefix = _bucket_and_key(self.output.rstrip("/") + "/")
        aborted = 0
        for page in client.get_paginator("list_multipart_uploads").paginate(Bucket=bucket, Prefix=prefix):
            for upload in page.get("Uploads", []):
                client.abort_multipart_upload(Bucket=bucket, Key=upload["Key"], UploadId=upload["UploadId"])
                aborted += 1
        return aborted


class GcsStore(_ObjectStore):
    def lock(self) -> OutputLock:
        from apache_beam.io.gcp import gcsio
        bucket, name = _bucket_and_key(paths.join(self.output, layout.LOCK))
        return ObjectStoreLock(GcsLockBackend(gcsio.create_storage_client(self.options), bucket, name))


def store_for(output: str, options) -> Store:
    """The backend of ``output``'s scheme: local disk, gs:// or s3://."""
    scheme = paths.split_scheme(output)[0]
    if not scheme:
        return LocalStore(output)
    if scheme == "gs://":
        return GcsStore(output, options)
    if scheme == "s3://":
        return S3Store(output, options)
    raise ValueError(f"--output {output}: no lock is known for {scheme} outputs (local paths, gs:// and s3:// are)")
