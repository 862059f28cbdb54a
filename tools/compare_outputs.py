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
import sys
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

RUN_DEPENDENT = ("report.html", "rejects/", "class_index/", "transform/transform_fn/saved_model.pb",
                 "transform/transform_fn/fingerprint.pb")
RUN_ENTRIES = ("options", "versions", "rejects", "class_index", "run_id", "data_dir", "transform_dir",
               "retained_run_ids", "timing", "files", "lineage")


def manifest_of(out: Path) -> dict:
    """The published manifest, its paths made relative to its version folder (format 3 names them relative to
    the output folder, with the run's id in them: two runs' manifests are compared without it)."""
    manifest = json.loads((Path(out) / "manifest.json").read_text())
    if manifest.get("format_version", 1) >= 3:
        return _without_prefix(manifest, manifest["data_dir"] + "/")
    return manifest


def _without_prefix(value, prefix: str):
    if isinstance(value, str):
        return value[len(prefix):] if value.startswith(prefix) else value
    if isinstance(value, list):
        return [_without_prefix(item, prefix) for item in value]
    if isinstance(value, dict):
        return {_without_prefix(key, prefix): _without_prefix(item, prefix) for key, item in value.items()}
    return value


def dataset_dir(out: Path) -> Path:
    """The version folder the output's manifest.json names (``out/runs/<run_id>``)."""
    return Path(out) / manifest_of(out)["data_dir"]


def sorted_lines(folder: Path, pattern: str, roots: Optional[Tuple[str, str]] = None) -> List[str]:
    """The lines of the files matching ``pattern``, sorted; ``roots=(old, new)`` rewrites input paths first."""
    lines = (line for path in sorted(Path(folder).glob(pattern)) for line in path.read_text().splitlines())
    version = f"runs/{Path(folder).name}/"         # the class index names shards relative to the output folder
    return sorted((line.replace(*roots) if roots else line).replace(version, "") for line in lines)


def differences(expected_dir: Path, actual_dir: Path,
                input_roots: Optional[Tuple[str, str]] = None) -> List[str]:
    """What differs between two published outputs of the same input and options; empty when nothing."""
    roots = (input_roots[1], input_roots[0]) if input_roots else None
    expected, actual = manifest_of(expected_dir), manifest_of(actual_dir)
    found = []
    for key in sorted(set(expected) | set(actual)):
        if key not in RUN_ENTRIES and expected.get(key) != actual.get(key):
            found.append(f"manifest.json {key}: {expected.get(key)!r} != {actual.get(key)!r}"[:500])
    if sorted(actual["files"]) != sorted(expected["files"]):
        found.append(f"the files tables list other files: {sorted(set(expected['files']) ^ set(actual['files']))}")
    expected_data, actual_data = dataset_dir(expected_dir), dataset_dir(actual_dir)
    for path, entry in sorted(expected["files"].items()):
        if path.startswith(RUN_DEPENDENT) or path not in actual["files"]:
            continue
        if actual["files"][path] != entry or (actual_data / path).read_bytes() != (expected_data / path).read_bytes():
            found.append(f"{path} differs")
    stats = [folder / "stats.json" for folder in (expected_data, actual_data)]
    if stats[0].exists() and json.loads(stats[1].read_text()) != json.loads(stats[0].read_text()):
        found.append("stats.json differs")
    for pattern in ("rejects/*", "class_index/*"):
        if sorted_lines(actual_data, pattern, roots if pattern.startswith("rejects") else None) != \
                sorted_lines(expected_data, pattern):
            found.append(f"{pattern.split('/')[0]} hold other lines")
    shard_names = [sorted(p.name for p in folder.glob("*.tfrecord")) for folder in (expected_data, actual_data)]
    if shard_names[0] != shard_names[1]:
        found.append("the version folders hold other shards")
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
