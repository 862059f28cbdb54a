"""``python -m beam_pipeline.verify OUTPUT_DIR``: check a published dataset against its manifest.json.

Every file the manifest lists (shards, their keys files and class-index parts, everything under
transform/, stats.json, the rejects, report.html, stats/<split>.tfrecord) must be where the manifest
names it, with its size and SHA-256: in the version folder it names, or in an earlier run's folder for
the shards a version keeps (core/rerun/versions.py); a file in the version's own folder that the manifest does
not list is an error too. Prints one line per problem and a summary; exits 0 when the dataset is intact, 1 when a file
is missing, extra, or differs, and 2 when OUTPUT_DIR holds no published dataset. Reads through
Beam's FileSystems: OUTPUT_DIR may be local, gs:// or s3://. Beam's own options after OUTPUT_DIR
configure those filesystems as they do the pipeline (``--s3_endpoint_url``, ``--s3_region_name``,
``--project``, ...); without them S3 takes boto3's default chain (environment, ~/.aws, instance role).
Files are read ``--workers`` at a time (reads and SHA-256 release the GIL), and a check that takes
longer than ``--progress_every`` seconds prints a progress line that often.
"""

import argparse
import concurrent.futures
import dataclasses
import logging
import os
import sys
import threading
import time
import warnings
from typing import List, Optional

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
warnings.filterwarnings("ignore", category=FutureWarning, module=r"google\..*")

INTACT, DAMAGED, NO_DATASET = 0, 1, 2


@dataclasses.dataclass(frozen=True)
class Verification:
    output: str
    data_dir: Optional[str]            # the version folder the manifest names; None without a dataset
    files: int                         # files the manifest lists
    bytes: int
    problems: List[object]             # core.digests.Problem
    error: Optional[str] = None        # why there is no dataset to check

    @property
    def ok(self) -> bool:
        return self.error is None and not self.problems


DEFAULT_WORKERS = 8
DEFAULT_PROGRESS_SECONDS = 5.0


class _Progress:
    """Lines on stderr while files are checked: files and bytes done, rate, ETA; none for a quick check."""

    def __init__(self, files: int, total_bytes: int, every: float, clock=time.monotonic, stream=None):
        self._files, self._total = files, total_bytes
        self._every, self._clock = every, clock
        self._stream = stream
        self._started = self._last = clock()
        self._done = self._bytes = 0
        self._lock = threading.Lock()

    def add(self, size: int) -> None:
        with self._lock:
            self._done += 1
            self._bytes += size
            now = self._clock()
            if now - self._last < self._every or self._done == self._files:
                return
            self._last = now
            rate = self._bytes / max(now - self._started, 1e-9)
            eta = (self._total - self._bytes) / rate if rate else 0.0
            print(f"verifying: {self._done:,}/{self._files:,} files, {self._bytes / 1e9:.2f} of "
                  f"{self._total / 1e9:.2f} GB, {rate / 1e6:.0f} MB/s, ETA {eta:.0f} s",
                  file=self._stream or sys.stderr, flush=True)


def _digests(base: str, table: dict, names: List[str], workers: int, progress: _Progress, shards=()) -> dict:
    """``{relative path: sha256, or the error reading it}`` of ``names``, ``workers`` files at a time; for the
    ``shards``, ``(sha256, records counted)``."""
    from beam_pipeline.core import paths
    from beam_pipeline.io import files

    def one(relative: str):
        try:
            if relative in shards:
                return files.sha256_and_records(paths.join(base, relative))
            return files.sha256(paths.join(base, relative))
        except Exception as error:  # noqa: BLE001 - any failed read is a problem of that file, reported as one
            return error
        finally:
            progress.add(table[relative]["bytes"])
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        return dict(zip(names, pool.map(one, names)))


def verify(output: str, workers: int = DEFAULT_WORKERS, progress_every: float = DEFAULT_PROGRESS_SECONDS,
           stream=None) -> Verification:
    """Check every file of the dataset published in ``output``: one listing, then each file read once,
    ``workers`` at a time, with a progress line every ``progress_every`` seconds on ``stream`` (stderr)."""
    from beam_pipeline.core import digests, paths
    from beam_pipeline.io import files
    from beam_pipeline.launcher import commit
    output = output.rstrip("/")
    try:
        manifest = commit.read_manifest(output)
    except ValueError as error:
        return Verification(output, None, 0, 0, [], f"{output}/manifest.json is not valid JSON: {error}")
    if manifest is None:
        return Verification(output, None, 0, 0, [], f"no dataset: {output} holds no manifest.json")
    if "files" not in manifest or "data_dir" not in manifest:
        return Verification(output, None, 0, 0, [], (
            f"{output}/manifest.json (format {manifest.get('format_version')}) lists no digests of its files; "
            "publish the dataset again with the pipeline's --overwrite to make it verifiable"))
    table = manifest["files"]
    data_dir = paths.join(output, manifest["data_dir"])
    base, found = _listing(output, manifest, table)
    problems = digests.check_sizes(table, found)
    damaged = {problem.path for problem in problems}
    names = sorted(set(table) - damaged)
    progress = _Progress(len(names), sum(table[name]["bytes"] for name in names), progress_every, stream=stream)
    shards = {shard["path"]: shard for entry in manifest.get("splits", {}).values() for shard in entry["shards"]}
    read = _digests(base, table, names, workers, progress, shards)
    problems += [digests.Problem(digests.UNREADABLE, name, f"cannot be read: {error}")
                 for name, error in read.items() if isinstance(error, Exception)]
    problems += _record_problems(shards, read)
    digest_of = {name: value[0] if isinstance(value, tuple) else value for name, value in read.items()}
    problems += digests.check_digests({name: table[name] for name in names if isinstance(digest_of[name], str)},
                                      digest_of.__getitem__)
    return Verification(output, data_dir, len(table), digests.total_bytes(table),
                        sorted(problems, key=lambda problem: (problem.path, problem.kind)))


def _record_problems(shards: dict, read: dict) -> list:
    """Each shard read holds the records the manifest lists, and its deleted indices are records of it (the
    version's live records are the others: docs/incremental.md)."""
    from beam_pipeline.core import digests
    problems = []
    for path, shard in sorted(shards.items()):
        if not isinstance(read.get(path), tuple):
            continue
        counted = read[path][1]
        if counted != shard["records"]:
            problems.append(digests.Problem(digests.RECORDS, path, f"holds {counted} records (-1: a record is cut), "
                                                                   f"the manifest says {shard['records']}"))
        problems += digests.deleted_problems(path, shard.get("deleted"), shard["records"])
    return problems


def _listing(output: str, manifest: dict, table: dict):
    """(where the table's paths resolve, ``{path: size}`` of what is there): the version's own folder listed
    whole (an unlisted file there is an extra), and the earlier runs' folders it keeps shards of, only for
    the files it names (they hold other versions' files too)."""
    from beam_pipeline.core import layout, paths
    from beam_pipeline.io import files
    own = manifest["data_dir"]
    if manifest.get("format_version", 1) < layout.OUTPUT_RELATIVE_FORMAT:
        return paths.join(output, own), files.list_files(paths.join(output, own))
    found = {layout.in_version(own, relative): size
             for relative, size in files.list_files(paths.join(output, own)).items()
             if relative != layout.VERSION_MANIFEST}
    for folder in sorted({path.rsplit("/", 1)[0] for path in table if not path.startswith(own + "/")}):
        listed = files.list_files(paths.join(output, folder))
        found.update({f"{folder}/{relative}": size for relative, size in listed.items()
                      if f"{folder}/{relative}" in table})
    return output, found


def render(result: Verification) -> str:
    if result.error:
        return f"error: {result.error}"
    if result.ok:
        return f"OK: {result.files} files, {result.bytes:,} bytes in {result.data_dir} match manifest.json"
    lines = [str(problem) for problem in result.problems]
    lines.append(f"FAILED: {len(result.problems)} problem(s) among {result.files} files listed in "
                 f"{result.output}/manifest.json (version {result.data_dir}). To repair it, run the pipeline's "
                 "command again on this output with --overwrite: a damaged shard is not kept and its records are "
                 "written again from their sources (--compact all writes every record again); docs/recovery.md")
    return "\n".join(lines)


def _set_filesystem_options(beam_args: List[str]) -> Optional[str]:
    """Give Beam's filesystems their options (S3 needs some to start at all); the problem with them, or None."""
    from apache_beam.io.filesystems import FileSystems
    from apache_beam.options.pipeline_options import PipelineOptions
    from beam_pipeline.launcher.options import check_known_options
    from beam_pipeline.launcher.options import CorpusOptionsError
    options = PipelineOptions(beam_args)
    try:
        check_known_options(beam_args, options)
    except CorpusOptionsError as error:
        return str(error)
    FileSystems.set_options(options)
    return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m beam_pipeline.verify",
        description="Check a published dataset: every file manifest.json lists must exist in its version folder "
                    "with the listed size and SHA-256, and the folder must hold no other file. Exit status 0: "
                    "intact; 1: a file is missing, extra or differs; 2: no published dataset. OUTPUT_DIR may be "
                    "local, gs:// or s3://.")
    parser.add_argument("output_dir", metavar="OUTPUT_DIR", help="the pipeline's --output folder")
    parser.add_argument("--workers", type=int, default=DEFAULT_WORKERS,
                        help=f"files read and hashed at a time (default {DEFAULT_WORKERS}); more helps on gs:// "
                             "and s3://, where each file is a request")
    parser.add_argument("--progress_every", type=float, default=DEFAULT_PROGRESS_SECONDS,
                        help="seconds between progress lines on stderr while files are checked (default "
                             f"{DEFAULT_PROGRESS_SECONDS:g}); a check that is done sooner prints none")
    parser.epilog = ("Beam's filesystem options may follow OUTPUT_DIR, as for the pipeline: --s3_endpoint_url, "
                     "--s3_region_name, --s3_access_key_id, --project, ...")
    args, beam_args = parser.parse_known_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    problem = _set_filesystem_options(beam_args)
    if problem:
        parser.error(problem)
    if args.workers < 1 or args.progress_every <= 0:
        parser.error("--workers must be at least 1 and --progress_every positive")
    result = verify(args.output_dir, args.workers, args.progress_every)
    print(render(result), file=sys.stdout if result.ok else sys.stderr)
    if result.error:
        return NO_DATASET
    return INTACT if result.ok else DAMAGED


if __name__ == "__main__":
    sys.exit(main())
