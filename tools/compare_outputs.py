"""Whether two published outputs hold the same dataset (tests and benchmarks; not shipped).

``python -m tools.compare_outputs EXPECTED ACTUAL`` prints every difference and exits 1 when there
is one: two runs of the same input and options must publish the same data, whatever the runner,
the number of workers or the shuffles.

Every file of the manifest's table must be byte-identical, except the files whose bytes are not a
function of the input and options alone (RUN_DEPENDENT): the report shows the run's timing; the
rejects and the class index hold the same lines in an order that follows the runner's bundles (they
are compared as sorted lines); saved_model.pb and fingerprint.pb carry the numeric suffixes
TensorFlow gives traced functions (a per-process counter). The manifest must be equal but for the
entries that name the run or say how it got there (RUN_ENTRIES: the lineage counts cached verdicts).
When the two runs read the same corpus from two places, ``input_roots=(expected root, actual root)`` names them, and the actual run's reject lines are
compared with its root replaced by the expected one.
"""

import json
import re
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

RUN_DEPENDENT = ("report.html", "rejects/", "class_index/", "transform/transform_fn/saved_model.pb",
                 "transform/transform_fn/fingerprint.pb")
RUN_ENTRIES = ("options", "versions", "rejects", "class_index", "run_id", "data_dir", "transform_dir",
               "retained_run_ids", "timing", "files", "lineage", "drift")
# Entries inside a section that say how a version came from its parent, not what it holds: a re-run compares only
# its new hashes with the parent's index (distances_computed, index's reused/rebuilt, note) and moves fewer pairs
# (they start in the parent's splits) than a fresh run, into the same splits.
LINEAGE_FIELDS = {"leakage": ("moved_pairs", "distances_computed", "index", "note")}
_RUN_FOLDER = re.compile(r"runs/\d{8}T\d{6}Z-[0-9a-f]{8}/")


def _without_lineage(manifest: dict) -> dict:
    for section, fields in LINEAGE_FIELDS.items():
        if isinstance(manifest.get(section), dict):
            manifest[section] = {key: value for key, value in manifest[section].items() if key not in fields}
    return manifest


def _raw(out: Path) -> dict:
    return json.loads((Path(out) / "manifest.json").read_text())


def manifest_of(out: Path) -> dict:
    """The published manifest, its paths without the run folders in them: format 3 names every path relative to
    the output folder (``runs/<run_id>/...``), and a version may keep shards of earlier runs; two outputs are
    compared by the names and bytes of what they hold, wherever a run put it."""
    manifest = _raw(out)
    return _without_runs(manifest) if manifest.get("format_version", 1) >= 3 else manifest


def _without_runs(value):
    if isinstance(value, str):
        return _RUN_FOLDER.sub("", value)
    if isinstance(value, list):
        return [_without_runs(item) for item in value]
    if isinstance(value, dict):
        return {_without_runs(key): _without_runs(item) for key, item in value.items()}
    return value


def _locations(out: Path) -> Dict[str, Path]:
    """``{path as manifest_of names it: the file}`` of every file the manifest lists."""
    manifest = _raw(out)
    base = Path(out) if manifest.get("format_version", 1) >= 3 else dataset_dir(out)
    return {_without_runs(path): base / path for path in manifest.get("files", {})}


def dataset_dir(out: Path) -> Path:
    """The version folder the output's manifest.json names (``out/runs/<run_id>``)."""
    return Path(out) / _raw(out)["data_dir"]


def sorted_lines(folder: Path, pattern: str, roots: Optional[Tuple[str, str]] = None) -> List[str]:
    """The lines of the files matching ``pattern``, sorted; ``roots=(old, new)`` rewrites input paths first."""
    lines = (line for path in sorted(Path(folder).glob(pattern)) for line in path.read_text().splitlines())
    return sorted(_without_runs(line.replace(*roots) if roots else line) for line in lines)


def listed_lines(out: Path, entry: str, roots: Optional[Tuple[str, str]] = None) -> List[str]:
    """The sorted lines of the files the manifest lists under ``entry`` (``rejects``, ``class_index``), without
    the run folders they name; a shard's deleted records' class-index lines are left out."""
    manifest = _raw(out)
    base = Path(out) if manifest.get("format_version", 1) >= 3 else dataset_dir(out)
    deleted = {shard["path"]: set(shard.get("deleted") or ()) for entry_ in manifest.get("splits", {}).values()
               for shard in entry_["shards"]}
    lines = []
    for path in manifest.get(entry) or []:
        for line in (base / path).read_text().splitlines():
            if entry == "class_index" and json.loads(line)["record"] in deleted.get(json.loads(line)["shard"], ()):
                continue
            lines.append(_without_runs(line.replace(*roots) if roots else line))
    return sorted(lines)


def file_content(entry: dict) -> dict:
    """A files-table entry without its ``version`` (size, mtime and inode, or a generation: the run's, not the
    data's)."""
    return {key: value for key, value in entry.items() if key != "version"}


def differences(expected_dir: Path, actual_dir: Path,
                input_roots: Optional[Tuple[str, str]] = None) -> List[str]:
    """What differs between two published outputs of the same input and options; empty when nothing."""
    roots = (input_roots[1], input_roots[0]) if input_roots else None
    expected, actual = (_without_lineage(manifest_of(expected_dir)), _without_lineage(manifest_of(actual_dir)))
    found = []
    for key in sorted(set(expected) | set(actual)):
        if key not in RUN_ENTRIES and expected.get(key) != actual.get(key):
            found.append(f"manifest.json {key}: {expected.get(key)!r} != {actual.get(key)!r}"[:500])
    if sorted(actual["files"]) != sorted(expected["files"]):
        found.append(f"the files tables list other files: {sorted(set(expected['files']) ^ set(actual['files']))}")
    expected_files, actual_files = _locations(expected_dir), _locations(actual_dir)
    for path, entry in sorted(expected["files"].items()):
        if path.startswith(RUN_DEPENDENT) or path not in actual["files"]:
            continue
        if (file_content(actual["files"][path]) != file_content(entry)
                or actual_files[path].read_bytes() != expected_files[path].read_bytes()):
            found.append(f"{path} differs")
    stats = [dataset_dir(out) / "stats.json" for out in (expected_dir, actual_dir)]
    if stats[0].exists() and json.loads(stats[1].read_text()) != json.loads(stats[0].read_text()):
        found.append("stats.json differs")
    for entry in ("rejects", "class_index"):
        if listed_lines(actual_dir, entry, roots if entry == "rejects" else None) != listed_lines(expected_dir, entry):
            found.append(f"{entry} hold other lines")
    return found


def live_record_digests(out: Path) -> Dict[str, Dict[str, int]]:
    """``{split: {SHA-256 of a live record: how many}}``: what a version holds, wherever its shards are and
    without its deleted records (read with the report's TFRecord reader, checksums checked: no TensorFlow)."""
    import collections
    import hashlib
    from beam_pipeline.report.tfrecord import read_records
    manifest = _raw(out)
    base = Path(out) if manifest.get("format_version", 1) >= 3 else dataset_dir(out)
    found = {}
    for split, entry in manifest.get("splits", {}).items():
        counts = collections.Counter()
        for shard in entry["shards"]:
            deleted = set(shard.get("deleted") or ())
            with (base / shard["path"]).open("rb") as handle:
                for index, record in enumerate(read_records(handle)):
                    if index not in deleted:
                        counts[hashlib.sha256(record).hexdigest()] += 1
        found[split] = dict(counts)
    return found


def record_differences(expected_dir: Path, actual_dir: Path) -> List[str]:
    """What differs between what two versions hold: their live records (as multisets per split), stats.json and
    the counts; empty when they hold the same dataset, however their shards are laid out (docs/incremental.md)."""
    found = []
    if live_record_digests(expected_dir) != live_record_digests(actual_dir):
        found.append("the live records differ")
    stats = [dataset_dir(out) / "stats.json" for out in (expected_dir, actual_dir)]
    if stats[0].exists() and stats[0].read_bytes() != stats[1].read_bytes():
        found.append("stats.json differs")
    if _raw(expected_dir)["counts"] != _raw(actual_dir)["counts"]:
        found.append("the counts differ")
    return found


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        print("usage: python -m tools.compare_outputs EXPECTED_OUTPUT ACTUAL_OUTPUT", file=sys.stderr)
        return 2
    found = differences(Path(args[0]), Path(args[1]))
    for line in found:
        print(line)
    print("the same dataset" if not found else f"{len(found)} difference(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
