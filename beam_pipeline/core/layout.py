"""Where everything lives in an output folder: one name for each published file and working file.

An output folder holds versions of one dataset::

    OUTPUT/manifest.json          the commit point: names the current version and every file of it
    OUTPUT/_lock.json             the lock record of the run that holds the output (beam_pipeline/io/stores/local.py)
    OUTPUT/runs/<run_id>/         one version: shards, transform/, stats.json, rejects/, class_index/,
                                  report.html, stats/<split>.tfrecord

A run writes only into its own ``runs/<run_id>/``; nothing a reader uses changes until the run
writes ``manifest.json``, in one write, after everything else exists. A version may also name shards
that earlier runs wrote in their folders (core/rerun/versions.py), so every path inside a manifest is
relative to the output folder (format 3; formats 1 and 2 named paths relative to their version folder:
:func:`resolve` reads both). Each version folder also keeps a copy of its own manifest
(``VERSION_MANIFEST``), which garbage collection reads to know what the kept versions still name.
"""

import datetime
import re

from beam_pipeline.core import paths

DATASET_MANIFEST = "manifest.json"          # written last: a reader that sees it sees a complete dataset
VERSION_MANIFEST = "manifest.json"          # inside runs/<run_id>/: a copy of that version's manifest
OUTPUT_RELATIVE_FORMAT = 3                  # manifests from this format on name paths relative to the output
LOCK = "_lock.json"                         # the lock record of the run that holds the output
RUNS_DIR = "runs"                           # one folder per version: runs/<run_id>/
CACHE_DIR = "cache"                         # the verdict cache by default (--cache_dir; docs/cache.md)

# Inside a version folder (paths relative to it):
STATS = "stats.json"
TRANSFORM_DIR = "transform"                 # tf.Transform: transform_fn/, transformed_metadata/, metadata/
ADOPTED_DIR = "resumed"        # <version>/resumed/: shards a re-run adopted from a killed run's spill (stages/rerun/adopt.py)
RAW_METADATA_DIR = "metadata"               # inside TRANSFORM_DIR: the raw feature schema
REJECTS_PREFIX = "rejects/rejects"          # + -00000-of-00001.jsonl
CLASS_INDEX_PREFIX = "class_index/class_index"
REPORT = "report.html"                      # the dataset report (beam_pipeline/report), written at publish
STATISTICS_DIR = "stats"                    # stats/<split>.tfrecord: the TFDV statistics, written at publish
# Working files of a run inside its version folder; none is listed in a manifest.
TEMP_DIR = ".tmp"                           # tf.Transform's temporary files without --temp_location
PENDING_MANIFEST = "_pending_manifest.json"  # the job's result for the launcher, which commits it
REFUSAL = "_refusal.json"                   # why a refused run wrote nothing

# The layout before versions (format 1): every file at the top of the output folder. Garbage
# collection removes these after the first versioned commit (shards: the old manifest lists them).
FLAT_LAYOUT_NAMES = (STATS, TRANSFORM_DIR, "rejects", "class_index", REPORT, STATISTICS_DIR, ".staging", TEMP_DIR)

_RUN_ID = re.compile(r"^\d{8}T\d{6}Z-[0-9a-f]{8}$")


def new_run_id(now: datetime.datetime, suffix: str) -> str:
    """``20261130T232834Z-ad1c1f9d``: UTC start time (sorts by age) and a random suffix (unique)."""
    return now.astimezone(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + suffix


def is_run_id(name: str) -> bool:
    return bool(_RUN_ID.match(name))


def runs_dir(output: str) -> str:
    return paths.join(output, RUNS_DIR)


def cache_dir(output: str) -> str:
    """Where the verdict cache of ``output`` lives without --cache_dir: beside the versions, kept by every commit."""
    return paths.join(output, CACHE_DIR)


def version_dir(output: str, run_id: str) -> str:
    return paths.join(runs_dir(output), run_id)


def data_dir_entry(run_id: str) -> str:
    """The manifest's ``data_dir``: the version folder relative to the output folder."""
    return f"{RUNS_DIR}/{run_id}"


def version_entry(data_dir: str) -> str:
    """``runs/<run_id>``: the manifest's ``data_dir`` of the version folder ``data_dir`` (any scheme)."""
    return "/".join(data_dir.rstrip("/").split("/")[-2:])


def in_version(entry: str, name: str) -> str:
    """A file of the version folder ``entry`` (``runs/<run_id>``) as a manifest names it (``entry`` empty: a
    composite test's folder of its own, named relative to itself)."""
    return f"{entry}/{name}" if entry else name


def resolve(output: str, manifest: dict, relative: str) -> str:
    """Where a path a manifest names is: below the output folder (format 3 and later), else below the
    version folder it names (``data_dir``; the output folder itself before versions)."""
    if manifest.get("format_version", 1) >= OUTPUT_RELATIVE_FORMAT:
        return paths.join(output, relative)
    base = paths.join(output, manifest["data_dir"]) if manifest.get("data_dir") else output
    return paths.join(base, relative)


def transform_dir(data_dir: str) -> str:
    return paths.join(data_dir, TRANSFORM_DIR)


def temp_dir(data_dir: str) -> str:
    return paths.join(data_dir, TEMP_DIR)


def parts_dir(data_dir: str, kind: str) -> str:
    """Where the job writes the parts of a JSON-lines output (``rejects``, ``class_index``) before
    PublishOutputs joins them into the one file the manifest lists; removed with the temporary files."""
    return paths.join(paths.join(temp_dir(data_dir), "parts"), kind)


def is_working_file(relative: str) -> bool:
    """A run's own working file inside its version folder, never published (Beam's and tf.Transform's
    temporary folders, the pending manifest, a refusal)."""
    first = relative.split("/", 1)[0]
    return (first in (TEMP_DIR, PENDING_MANIFEST, REFUSAL) or first.startswith("beam-temp-")
            or "/beam-temp-" in relative)


def publish_temp_name(name: str, token: str) -> str:
    """The temporary name a file is written under before it is moved into place (local disk)."""
    return f".{name}.{token}.tmp"


PUBLISH_TEMP_GLOB = publish_temp_name(DATASET_MANIFEST, "*")   # what a launcher killed mid-publish may leave
