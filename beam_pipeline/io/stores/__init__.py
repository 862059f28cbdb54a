"""What Beam's FileSystems lacks, per storage backend: the output lock, a whole-file publish, cleaning up
uploads a killed run left unfinished, and a file's first bytes under another name without a copy.

Everything else (reading, writing, listing, deleting) goes through Beam's FileSystems and so works on
every scheme Beam knows. These four need guarantees FileSystems does not expose:

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
a prefix, no copy       hard link, then truncate        none: the caller copies   none: the caller copies
=====================  ==============================  ========================  ===========================

:func:`store_for` picks the backend from the output's scheme: :class:`local.LocalStore`, or the object
stores of objects.py; base.py holds what every backend implements. The local one is tested
(tests/unit/test_locks.py and the kill matrix); the S3 and GCS backends call boto3 and
google-cloud-storage directly, built from the same pipeline options Beam's filesystems use, and
import them only when used (their tests run against local S3 and GCS servers: issue 14).

A lock holder on an object store refreshes its record every ``lease/3`` seconds from a thread; a
failed compare-and-swap means another run took the lock over, and :meth:`OutputLock.check`
(called just before the commit) then raises LockLost, so a run that lost its lock never writes
manifest.json (fencing).
"""

from beam_pipeline.core import paths
from beam_pipeline.io.stores.base import Store
from beam_pipeline.io.stores import local
from beam_pipeline.io.stores.local import LocalStore


def store_for(output: str, options) -> Store:
    """The backend of ``output``'s scheme: local disk, gs:// or s3://."""
    scheme = paths.split_scheme(output)[0]
    if not scheme:
        return LocalStore(output)
    from beam_pipeline.io.stores import objects     # boto3 or google-cloud-storage only when used
    if scheme == "gs://":
        return objects.GcsStore(output, options)
    if scheme == "s3://":
        return objects.S3Store(output, options)
    raise ValueError(f"--output {output}: no lock is known for {scheme} outputs (local paths, gs:// and s3:// are)")


def link_prefix(source: str, target: str, length: int) -> bool:
    """Make ``target`` hold the first ``length`` bytes of ``source`` without copying them (a re-run adopting a killed
    run's spill file as a shard: stages/rerun/adopt.py). True when done; False where the store cannot (an object
    store, another disk), and the caller writes the bytes itself."""
    if paths.split_scheme(source)[0] or paths.split_scheme(target)[0]:
        return False
    return local.link_prefix(source, target, length)
