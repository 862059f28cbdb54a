"""The output lock and whole-file publish on object stores (gs://, s3://): lease locks by conditional writes.

See the package docstring (io/stores/__init__.py) for the table of guarantees per backend. A lock
holder refreshes its record every ``lease/3`` seconds from a thread; a failed compare-and-swap means
another run took the lock over, and :meth:`ObjectStoreLock.check` (called just before the commit) then
raises LockLost, so a run that lost its lock never writes manifest.json (fencing).
"""

import json
import logging
import threading
import time
from typing import Callable, Optional

from beam_pipeline.core import layout, paths
from beam_pipeline.core.locking import LockLost, OutputLocked, describe, is_stale, new_record
from beam_pipeline.io.stores.base import ACQUIRE_ATTEMPTS, OutputLock, Store, parse_record

_LOG = logging.getLogger("beam_pipeline.object_stores")   # the name it had before io/stores/
DEFAULT_LEASE_SECONDS = 600.0      # far longer than clock skew between hosts; refreshed every lease / 3


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
        for _ in range(ACQUIRE_ATTEMPTS):
            try:
                self.version = self.backend.create(body)
                return self._held(record, None)
            except Conflict:
                pass
            try:
                current, version = self.backend.read()
            except FileNotFoundError:
                continue                          # released between our create and our read
            holder = parse_record(current)
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
