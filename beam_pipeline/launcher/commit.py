"""One run's hold on an output folder: the lock, its version folder, the commit and garbage collection.

What a reader of ``OUTPUT`` sees (docs/recovery.md):

* while a run works, and if it fails or is killed: the previous ``manifest.json`` and the version it
  names, untouched (or no manifest at all); the run's files are only in ``runs/<its run_id>/``,
  which no manifest names;
* from the moment the launcher writes the new ``manifest.json`` (one write: a temporary file and
  ``os.replace`` on local disk; objects appear whole on gs:// and s3://): the new version;
* a reader that loaded the old manifest before that moment keeps reading its version, which stays
  until ``--keep_versions`` newer commits have replaced it.

The commit, in the launcher, which holds the output's lock (beam_pipeline/io/stores/local.py): read the
job's pending manifest; list the version folder once and check every file the job wrote against
the sizes in its ``files`` table (digests were taken as the job wrote them); drop the job's
working files; write ``report.html`` and ``stats/<split>.tfrecord`` (beam_pipeline.report) and
add their digests; check that the lock is still this run's (fencing); write ``manifest.json``.
Then, still under the lock, delete versions beyond ``--keep_versions``, what killed runs left,
and files of the flat layout an older release wrote at the top of the folder.
"""

import concurrent.futures
import datetime
import logging
import os
import uuid
from typing import Dict, List, Optional

from beam_pipeline import phases
from beam_pipeline.core import digests, layout, paths
from beam_pipeline.core.failures import RunFailed
from beam_pipeline.core.rerun import parent as parent_rules
from beam_pipeline.core.rerun import versions
from beam_pipeline.io import files, streams
from beam_pipeline.io.stores.base import Store
from beam_pipeline.launcher.options import CorpusOptionsError

_LOG = logging.getLogger("beam_pipeline.commit")      # the name it had before the launcher/ folder
VERSION_WORKERS = 8        # files whose version is asked at once at the commit (a stat, or one request each)


def _versions(output: str, relative: List[str]) -> Dict[str, Optional[str]]:
    """{path: its version (io/streams.file_version, no ctime), None when missing} of files under ``output``."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=VERSION_WORKERS) as pool:
        found = pool.map(lambda path: streams.file_version(paths.join(output, path), with_ctime=False), relative)
        return dict(zip(relative, found))


def read_manifest(output: str) -> Optional[dict]:
    """The published manifest.json of ``output``, or None."""
    path = paths.join(output, layout.DATASET_MANIFEST)
    return files.read_json(path) if files.exists(path) else None


def _run_of(path: str) -> Optional[str]:
    """The run id of a path under ``runs/`` (relative to the output folder), else None."""
    parts = path.split("/")
    return parts[1] if len(parts) > 1 and parts[0] == layout.RUNS_DIR else None


def kept_versions(manifest: Optional[dict]) -> List[str]:
    """The run ids a published manifest keeps alive: its own and those it retains."""
    if not manifest or not manifest.get("run_id"):
        return []
    return [manifest["run_id"], *manifest.get("retained_run_ids", [])]


def version_ids(output: str) -> List[str]:
    """The run ids that have a folder under ``OUTPUT/runs/`` (anything else there is left alone)."""
    runs = layout.runs_dir(output)
    names = {relative.split("/", 1)[0] for relative in files.list_files(runs)}
    if not paths.split_scheme(runs)[0] and os.path.isdir(runs):
        names.update(os.listdir(runs))        # local folders without files (a run killed early)
    return sorted(name for name in names if layout.is_run_id(name))


class OutputRun:
    """``with OutputRun(store, output, overwrite, keep_versions) as run: ... run.commit(pending, timing)``.

    Entering takes the lock (raises OutputLocked naming a live holder, or takes over a stale lock
    with a warning), refuses an existing dataset without ``overwrite``, and removes versions that
    killed runs left. Leaving without a commit removes this run's version folder; leaving always
    releases the lock.
    """

    def __init__(self, store: Store, output: str, overwrite: bool, keep_versions: int):
        self.store = store
        self.output = output
        self.overwrite = overwrite
        self.keep_versions = keep_versions
        now = datetime.datetime.now(datetime.timezone.utc)
        self.run_id = layout.new_run_id(now, uuid.uuid4().hex[:8])
        self.started = now.isoformat(timespec="seconds")
        self.data_dir = layout.version_dir(output, self.run_id)
        self.committed = False
        self._lock = None
        self._previous: Optional[dict] = None

    def __enter__(self) -> "OutputRun":
        lock = self.store.lock()
        try:
            took_over = lock.acquire(self.run_id)
        except OSError as error:
            raise RunFailed(f"cannot take the lock of {self.output}: {error}. Nothing was written") from error
        self._lock = lock
        try:
            if took_over:
                _LOG.warning("%s", took_over)
            self._previous = read_manifest(self.output)
            if self._previous is not None and not self.overwrite:
                raise CorpusOptionsError(
                    f"{self.output} already holds a manifest.json; use --overwrite to replace it")
            self._remove_unnamed(self._previous, why="left by a run that did not finish")
        except BaseException:
            self._release()
            raise
        return self

    def __exit__(self, kind, error, traceback) -> bool:
        try:
            if not self.committed:
                try:
                    files.remove_folder(self.data_dir)
                except Exception as cleanup_error:  # noqa: BLE001 - the next run removes it; report the first error
                    _LOG.warning("could not remove %s: %s (the next run on this output will)", self.data_dir,
                                 cleanup_error)
        finally:
            self._release()
        return False

    @property
    def previous(self) -> Optional[dict]:
        """The manifest published before this run (the parent of its version), or None."""
        return self._previous

    def _release(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    # ----------------------------------------------------------------------
    def commit(self, pending: dict, timing: dict, lineage: Optional[dict] = None) -> dict:
        """Check the job's files and those the version keeps from earlier runs, add the report and TFDV statistics,
        record every file's version, write the version's copy of its manifest and then manifest.json; returns it.
        ``lineage``: what the launcher adds to the manifest's (the parent check's figures)."""
        phases.reached(phases.PUBLISH)
        manifest = dict(pending)
        table = dict(manifest.pop("files"))
        self._check_job_files(table)
        kept = self._check_kept_files(table)
        manifest.update(run_id=self.run_id, data_dir=layout.data_dir_entry(self.run_id),
                        transform_dir=(paths.join(layout.data_dir_entry(self.run_id), layout.TRANSFORM_DIR)
                                       if manifest.get("statistics") else None),
                        retained_run_ids=kept_versions(self._previous)[:self.keep_versions], timing=timing,
                        files=table, lineage=dict(manifest.get("lineage") or {}, **(lineage or {}),
                                                  parent_run_id=(self._previous or {}).get("run_id")))
        table.update(self._write_report(manifest))
        manifest["files"] = self._with_versions(table, kept)
        phases.reached(phases.PUBLISH_REPORT)
        files.write_bytes(paths.join(self.data_dir, layout.VERSION_MANIFEST), files.json_bytes(manifest))
        self._lock.check()
        phases.reached(phases.PUBLISH_MANIFEST)
        manifest_path = paths.join(self.output, layout.DATASET_MANIFEST)
        try:
            self.store.publish_file(manifest_path, files.json_bytes(manifest))
        except OSError as error:
            raise RunFailed(f"cannot write {manifest_path}: {error.strerror or error}") from error
        self.committed = True
        phases.reached(phases.COMMITTED)
        self._collect_garbage(manifest)
        return manifest

    def _check_job_files(self, table: dict) -> None:
        """One listing of the version folder: every file the job wrote is there with its size; working files go.
        (Files of earlier runs that the version keeps were checked when those runs wrote them.)"""
        prefix = layout.data_dir_entry(self.run_id) + "/"
        table = {path[len(prefix):]: entry for path, entry in table.items() if path.startswith(prefix)}
        found = files.list_files(self.data_dir)
        unlisted = [relative for relative in found if relative not in table]
        unexpected = [relative for relative in unlisted if not layout.is_working_file(relative)]
        if unexpected:
            _LOG.warning("removing files the job left in %s without listing them: %s", self.data_dir,
                         ", ".join(unexpected[:10]))
        files.remove_files([paths.join(self.data_dir, relative) for relative in unlisted])
        problems = digests.check_sizes(table, found, extras=False)
        if problems:
            raise RunFailed(f"the job's files in {self.data_dir} do not match what it wrote: "
                            + "; ".join(map(str, problems[:5])))

    def _check_kept_files(self, table: dict) -> Dict[str, str]:
        """Every file the version names outside its own folder (the shards it keeps from earlier runs, their side
        files) is there with its size, just before the commit: else the run stops in one line and nothing is
        published. Returns their versions (io/streams.file_version), which the manifest records."""
        prefix = layout.data_dir_entry(self.run_id) + "/"
        others = sorted(path for path in table if not path.startswith(prefix))
        versions_ = _versions(self.output, others)
        for path in others:
            expected = parent_rules.ParentFile(path, table[path]["bytes"], table[path]["sha256"])
            problem = parent_rules.judge(expected, versions_[path])
            if problem != parent_rules.HASH:          # no version was recorded to compare: the size decides
                raise RunFailed(f"cannot publish: {path}, which this version keeps from an earlier run, {problem} "
                                f"(it was intact when the run began). Nothing was published: {self.output} holds what "
                                "it held before; run again with --overwrite to write its records again")
        return versions_

    def _with_versions(self, table: dict, known: Dict[str, str]) -> dict:
        """The ``files`` table, each entry with its file's version as published (core/rerun/parent.py)."""
        found = dict(known)
        found.update(_versions(self.output, [path for path in table if path not in found]))
        return {path: dict(entry, **({"version": found[path]} if found.get(path) else {}))
                for path, entry in sorted(table.items())}

    def _write_report(self, manifest: dict) -> dict:
        """report.html and stats/<split>.tfrecord into the version folder; returns their ``files`` entries."""
        from beam_pipeline.report import render_report, statistics_files
        entry = layout.data_dir_entry(self.run_id)
        stats_path = paths.join(self.data_dir, layout.STATS)
        stats = files.read_json(stats_path) if layout.in_version(entry, layout.STATS) in manifest["files"] else None
        written = {layout.in_version(entry, layout.REPORT): files.write_bytes(
            paths.join(self.data_dir, layout.REPORT), render_report(manifest, self.output, stats=stats))}
        for relative, content in statistics_files(manifest, stats).items():
            written[layout.in_version(entry, relative)] = files.write_bytes(paths.join(self.data_dir, relative),
                                                                             content)
        return written

    # ----------------------------------------------------------------------
    def _collect_garbage(self, manifest: dict) -> None:
        """After the commit: older versions beyond --keep_versions, the flat layout, stray temporary files."""
        try:
            self._remove_unnamed(manifest, why="beyond --keep_versions")
            if self._previous is not None and not self._previous.get("data_dir"):
                self._remove_flat_layout(self._previous)
            files.remove_files(files.match_paths(paths.join(self.output, layout.PUBLISH_TEMP_GLOB)))
            aborted = self.store.abort_unfinished_uploads()
            if aborted:
                _LOG.info("aborted %d unfinished upload(s) under %s", aborted, self.output)
        except Exception as error:  # noqa: BLE001 - the dataset is published; the next run collects again
            _LOG.warning("published, but removing old versions failed: %s (the next run on this output "
                         "tries again)", error)

    def _remove_unnamed(self, current: Optional[dict], why: str) -> None:
        """Remove what no kept version names: ``current`` and the versions it retains (--keep_versions). A version
        may name shards in earlier runs' folders, so a folder goes only when no kept version names a file in it,
        and a kept folder loses the files no kept version names (this run's own folder is left alone)."""
        kept, whole = [], {self.run_id}
        for run_id in kept_versions(current):
            manifest = current if current.get("run_id") == run_id else self._version_manifest(run_id)
            if manifest is None or manifest.get("format_version", 1) < layout.OUTPUT_RELATIVE_FORMAT:
                whole.add(run_id)                     # an older format: its files are named within its folder
            else:
                kept.append(manifest)
        named = set(whole) | {_run_of(path) for m in kept for path in [m["data_dir"], *versions.files_of(m)]}
        for run_id in version_ids(self.output):
            if run_id not in named:
                _LOG.info("removing %s (%s)", layout.version_dir(self.output, run_id), why)
                files.remove_folder(layout.version_dir(self.output, run_id))
        copies = [layout.in_version(m["data_dir"], layout.VERSION_MANIFEST) for m in kept]
        for run_id in sorted(named - whole - {None}):
            found = [layout.in_version(layout.data_dir_entry(run_id), relative)
                     for relative in files.list_files(layout.version_dir(self.output, run_id))]
            unnamed = [path for path in versions.removable(found, kept, []) if path not in copies]
            if unnamed:
                _LOG.info("removing %d file(s) of %s that no kept version names", len(unnamed),
                          layout.version_dir(self.output, run_id))
                files.remove_files([paths.join(self.output, path) for path in unnamed])
        files.remove_empty_folders(layout.runs_dir(self.output))

    def _version_manifest(self, run_id: str) -> Optional[dict]:
        path = paths.join(layout.version_dir(self.output, run_id), layout.VERSION_MANIFEST)
        return files.read_json(path) if files.exists(path) else None

    def _remove_flat_layout(self, previous: dict) -> None:
        """The files of a dataset published before versions: shards and folders at the top of the output."""
        shards = [shard["path"] for entry in previous.get("splits", {}).values() for shard in entry["shards"]]
        files.remove_files([paths.join(self.output, shard) for shard in shards])
        for name in layout.FLAT_LAYOUT_NAMES:
            path = paths.join(self.output, name)
            files.remove_folder(path)
            files.remove_files([path])
        _LOG.info("removed the previous dataset's files of the flat layout from %s", self.output)
