"""The dataset checked against manifest.json: a bounded check before the first step, the rest while training.

Before the first step (:func:`check_before_training`), in a time that does not grow with the dataset:

* manifest.json lists its files with their sizes and SHA-256 (format 2 and later);
* every listed file exists with its listed size (one stat per file, several at a time);
* the SHA-256 of the files whose size does not grow with the data: ``stats.json`` and ``transform/``
  (which training reads whole before its first step), ``report.html`` and the TFDV statistics.

While training (:class:`BackgroundVerifier`, a thread started when the first step is done, so that the
first step has the cores and the disk to itself): the SHA-256 of every shard this process reads, and on
the chief also of every file that no worker reads in training (the other splits' shards, the rejects
and class-index files, which grow with the data), read again while tf.data reads the shards, with
progress lines: each listed file is checked by one process. A mismatch stops training with one clear line
(:class:`StopOnDamagedFile` raises ArtifactError after the step that finds it), and training that ends
first waits for the check to finish before it exports anything.

What was verified for a manifest.json (by its SHA-256) is recorded in the process's job folder,
``verified/<sha256>.json``, file by file as it goes, so a restart checks only what is left.
"""

import concurrent.futures
import json
import logging
import os
import posixpath
import threading
import time
from typing import Callable, Dict, Iterable, List, Optional

import keras
import tensorflow as tf

from trainer.data.artifacts import MANIFEST, ArtifactError, Artifacts, file_sha256

_LOG = logging.getLogger(__name__)
VERIFIED_DIR = "verified"
STAT_THREADS = 16                   # stats at once: each is a request on gs://
PROGRESS_SECONDS = 30.0
GROWING = ("rejects/", "class_index/", "keys/")   # non-shard files whose size grows with the dataset


def _shard_names(artifacts: Artifacts) -> set:
    return {shard["path"] for entry in artifacts.manifest["splits"].values() for shard in entry["shards"]}


def _growing(relative: str) -> bool:
    """A file whose size grows with the dataset: checked in the background, with the shards."""
    within = relative.split("/", 2)[2] if relative.startswith("runs/") and relative.count("/") >= 2 else relative
    return within.startswith(GROWING)


def _table(artifacts: Artifacts) -> Dict[str, dict]:
    table = artifacts.manifest.get("files")
    if table is None:
        raise ArtifactError(
            f"{artifacts.root}/{MANIFEST} (format {artifacts.manifest.get('format_version')}) lists no digests "
            "of transform/ and stats.json, so they cannot be checked; publish the dataset again with the "
            "pipeline's --overwrite, or train with --no_verify to skip the check")
    return table


class VerifiedRecord:
    """``verified/<manifest sha256>.json`` in a job folder: ``{relative path: sha256}`` of what was checked."""

    def __init__(self, job_dir: str, artifacts: Artifacts):
        self.path = posixpath.join(job_dir, VERIFIED_DIR, f"{artifacts.manifest_sha256}.json")
        self._lock = threading.Lock()
        self.files: Dict[str, str] = {}
        if tf.io.gfile.exists(self.path):
            with tf.io.gfile.GFile(self.path, "r") as handle:
                self.files = json.load(handle).get("files", {})

    def add(self, relative: str, sha256: str) -> None:
        self.add_all({relative: sha256})

    def add_all(self, digests: Dict[str, str]) -> None:
        with self._lock:
            self.files.update(digests)
            tf.io.gfile.makedirs(posixpath.dirname(self.path))
            temporary = f"{self.path}.tmp"
            with tf.io.gfile.GFile(temporary, "w") as handle:
                json.dump({"files": dict(sorted(self.files.items()))}, handle)
            tf.io.gfile.rename(temporary, self.path, overwrite=True)

    def done(self, relative: str, table: Dict[str, dict]) -> bool:
        return self.files.get(relative) == table[relative]["sha256"]


def repair_hint(artifacts: Artifacts) -> str:
    """Which version is damaged, and what repairs it (docs/recovery.md)."""
    version = artifacts.manifest.get("data_dir") or "the published version"
    return (f" (version {version} of {artifacts.root}). To repair it, run the pipeline's command again on that "
            "output with --overwrite: a damaged shard is not kept and its records are written again from their "
            "sources (--compact all writes every record again); python -m beam_pipeline.verify lists every damaged "
            "file")


def _check_digest(artifacts: Artifacts, relative: str, expected: dict) -> None:
    path = artifacts.path_of(relative)
    if file_sha256(path) != expected["sha256"]:
        raise ArtifactError(f"{path} does not match its SHA-256 in {MANIFEST}: the file is damaged"
                            + repair_hint(artifacts))


def check_before_training(artifacts: Artifacts, record: Optional[VerifiedRecord]) -> List[str]:
    """Sizes of every listed file and digests of the fixed-size ones; raises ArtifactError naming the
    first problem. Returns the files left for :class:`BackgroundVerifier` (shards and growing files)."""
    table = _table(artifacts)

    def size_problem(relative: str) -> Optional[str]:
        path = artifacts.path_of(relative)
        try:
            size = tf.io.gfile.stat(path).length
        except tf.errors.NotFoundError:
            return f"{path} is listed in {MANIFEST} but missing"
        expected = table[relative]["bytes"]
        return None if size == expected else f"{path} has {size} bytes, {MANIFEST} says {expected}"

    names = sorted(table)
    with concurrent.futures.ThreadPoolExecutor(max_workers=STAT_THREADS) as pool:
        problems = [problem for problem in pool.map(size_problem, names) if problem]
    if problems:
        raise ArtifactError(problems[0] + repair_hint(artifacts))
    shards = _shard_names(artifacts)
    later = [name for name in names if name in shards or _growing(name)]
    checked = []
    for relative in names:
        if relative in later or (record is not None and record.done(relative, table)):
            continue
        _check_digest(artifacts, relative, table[relative])
        checked.append(relative)
    if record is not None and checked:           # recorded only when every one passed: a failed check writes nothing
        record.add_all({relative: table[relative]["sha256"] for relative in checked})
    return later


class BackgroundVerifier(threading.Thread):
    """The SHA-256 of ``files`` (relative to the version folder), one after the other, with progress lines."""

    def __init__(self, artifacts: Artifacts, files: Iterable[str], record: Optional[VerifiedRecord],
                 clock: Callable[[], float] = time.monotonic):
        super().__init__(name="BackgroundVerifier", daemon=True)
        self._artifacts = artifacts
        self._table = _table(artifacts)
        self._record = record
        self._clock = clock
        self.files = sorted(f for f in files if record is None or not record.done(f, self._table))
        self.error: Optional[str] = None
        self.checked = 0

    def run(self) -> None:
        total = sum(self._table[f]["bytes"] for f in self.files)
        started = last = self._clock()
        done_bytes = 0
        for relative in self.files:
            try:
                _check_digest(self._artifacts, relative, self._table[relative])
            except (ArtifactError, tf.errors.OpError, OSError) as error:
                self.error = (str(error) if isinstance(error, ArtifactError)
                              else f"cannot read {relative}: {error}" + repair_hint(self._artifacts))
                _LOG.error("%s", self.error)
                return
            if self._record is not None:
                self._record.add(relative, self._table[relative]["sha256"])
            self.checked += 1
            done_bytes += self._table[relative]["bytes"]
            now = self._clock()
            if now - last >= PROGRESS_SECONDS and self.checked < len(self.files):
                last = now
                _LOG.info("verifying in the background: %d of %d files, %.2f of %.2f GB", self.checked,
                          len(self.files), done_bytes / 1e9, total / 1e9)
        if self.files:
            _LOG.info("verified the SHA-256 of %d file(s) read in training (%.2f GB) in %.0f s", len(self.files),
                      total / 1e9, self._clock() - started)

    def raise_if_damaged(self) -> None:
        if self.error:
            raise ArtifactError(self.error)

    def begin(self) -> None:
        """Start the check (once; nothing to do without files)."""
        if self.files and self.ident is None:
            self.start()

    def finish(self) -> None:
        """Wait for the check to end (starting it if training ended before its first step); raise
        ArtifactError if it found a damaged file."""
        self.begin()
        if self.files:
            self.join()
        self.raise_if_damaged()


class StopOnDamagedFile(keras.callbacks.Callback):
    """Starts the background check when the first step is done (so that it does not compete with the
    first step's tracing and first reads for the cores and the disk), logs that step's time counted from
    ``started`` (the trainer's start), and stops training at the step after the check finds a damaged
    file, with its one line."""

    def __init__(self, verifier: BackgroundVerifier, started: float, clock: Callable[[], float] = time.monotonic):
        super().__init__()
        self._verifier = verifier
        self._started = started
        self._clock = clock
        self._first = True

    def on_train_batch_end(self, batch, logs=None):
        if self._first:
            self._first = False
            _LOG.info("first step done %.1f s after the trainer started", self._clock() - self._started)
            self._verifier.begin()
        self._verifier.raise_if_damaged()


def verified_record(job_dir: str, artifacts: Artifacts) -> VerifiedRecord:
    """The record of this manifest's verification in ``job_dir`` (created empty when there is none)."""
    return VerifiedRecord(job_dir, artifacts)


def relative_to_data_dir(artifacts: Artifacts, paths: Iterable[str]) -> List[str]:
    """The manifest's names of these paths (relative to the output folder from format 3 on)."""
    prefix = artifacts.base.rstrip("/") + "/"
    return sorted({path[len(prefix):] if path.startswith(prefix) else os.path.basename(path) for path in paths})


def verify_all(artifacts: Artifacts) -> int:
    """Every listed file against its size and SHA-256, now, in this thread; returns the bytes checked.

    What ``python -m trainer`` checks before and while training, all at once (for a reader that trains
    nothing: the tests, a notebook). Raises ArtifactError naming the first problem."""
    verifier = BackgroundVerifier(artifacts, check_before_training(artifacts, None), None)
    verifier.run()
    verifier.raise_if_damaged()
    return sum(entry["bytes"] for entry in _table(artifacts).values())
