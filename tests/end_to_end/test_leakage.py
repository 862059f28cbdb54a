"""Splits you can trust, end to end (docs/leakage.md): real pipeline runs, the shards read back with tf.data.

* Planted copies (tools/planted_copies.py): 100 collages of real photographs each with one copy (a JPEG
  re-encode, a resize, a crop keeping 95 % or more of the pixels, a brightness change, the other format), named so
  that the per-image split separates the two, among 150 more scenes and 19 of scikit-image's photographs. With
  the default ``--near_duplicates group`` at least 95 % of the planted pairs end in one split, and fewer pairs
  than 0.1 % of the images pair two different scenes. The statistics are those of the final train split.
* A re-run that adds copies and scenes compares only the new hashes with its parent's index and ends with the
  splits and pairs of a fresh run; its drift table is there, and a low --drift_threshold warns.
* Video-like sequences: with ``--split_group folder`` no sequence spans two splits; ``--near_duplicates report``
  keeps the splits of ``off`` and warns with the cross-split pairs; ``off`` publishes no leakage section.
* The sample corpus with its split column and ``--split_group column:source``: the groups the listing puts in two
  splits are counted in a warning.
"""

import collections
import csv
import hashlib
import json
import pickle
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tensorflow as tf

from conftest import NUM_CLASSES, ROOT, run_cli
from tools.planted_copies import write_planted, write_sequences

OPTIONS = ["--num_classes", str(NUM_CLASSES)]
_RUN = re.compile(r"runs/\d{8}T\d{6}Z-[0-9a-f]{8}/")


def source_splits(out: Path) -> dict:
    """{source id: split} of every live record, read with tf.data."""
    manifest = json.loads((out / "manifest.json").read_text())
    found = {}
    spec = {"image/source_id": tf.io.FixedLenFeature([], tf.string)}
    for split, entry in manifest["splits"].items():
        for shard in entry["shards"]:
            deleted = set(shard.get("deleted", ()))
            for index, record in enumerate(tf.data.TFRecordDataset(str(out / shard["path"]))):
                if index not in deleted:
                    source = tf.io.parse_single_example(record, spec)["image/source_id"].numpy().decode()
                    found[source] = split
    return found


def pair_lines(out: Path) -> list:
    manifest = json.loads((out / "manifest.json").read_text())
    return [_RUN.sub("", line) for line in (out / manifest["leakage"]["pairs_file"]).read_text().splitlines()]


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """(folder, final listing, D listing, planted pairs): D lacks every sixth copy and every tenth other scene."""
    folder = tmp_path_factory.mktemp("planted") / "corpus"
    listing = write_planted(folder, bases=100, distinct=150, seed=0, workers=2)
    with open(folder / "planted.csv", newline="") as handle:
        pairs = [(row["base"], row["copy"], row["kind"]) for row in csv.DictReader(handle)]
    rows = list(csv.DictReader(open(listing, newline="")))
    later = {copy for index, (_, copy, _) in enumerate(pairs) if index % 6 == 0}
    later |= {row["image"] for index, row in enumerate(rows) if "scene_0" in row["image"] and index % 10 == 7
              and not any(row["image"] == base for base, _, _ in pairs)}
    with open(folder / "d.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["image", "mask"])
        writer.writeheader()
        writer.writerows(row for row in rows if row["image"] not in later)
    return folder, listing, folder / "d.csv", pairs


@pytest.fixture(scope="module")
def grouped(planted, tmp_path_factory):
    """(output, stdout): the planted corpus with the default options."""
    out = tmp_path_factory.mktemp("grouped") / "out"
    return out, run_cli("--input", planted[1], "--output", out, *OPTIONS).stdout


@pytest.fixture(scope="module")
def rerun(planted, tmp_path_factory):
    """(output, stdout of the re-run, the D run's run id): D, then the final listing with --overwrite."""
    out = tmp_path_factory.mktemp("rerun") / "out"
    run_cli("--input", planted[2], "--output", out, *OPTIONS)
    parent = json.loads((out / "manifest.json").read_text())["run_id"]
    completed = run_cli("--input", planted[1], "--output", out, *OPTIONS, "--overwrite", "--drift_threshold", "0.001")
    return out, completed.stdout, parent


def test_planted_copies_end_in_one_split_and_distinct_scenes_are_not_paired(planted, grouped):
    _, _, _, pairs = planted
    out, stdout = grouped
    splits = source_splits(out)
    together = [kind for base, copy, kind in pairs if splits[base] == splits[copy]]
    assert len(together) >= 0.95 * len(pairs), collections.Counter(k for _, _, k in pairs) - collections.Counter(together)
    planted_pairs = {frozenset((base, copy)) for base, copy, _ in pairs}
    found = [json.loads(line) for line in pair_lines(out)]
    false = [p for p in found if frozenset((p["a"], p["b"])) not in planted_pairs]
    assert len(false) < 0.001 * len(splits), false
    assert len(found) - len(false) >= 0.95 * len(pairs)
    manifest = json.loads((out / "manifest.json").read_text())
    leakage = manifest["leakage"]
    assert leakage["cross_split_pairs"]["after"] == 0
    assert leakage["cross_split_pairs"]["before"] == sum(p["splits_before"][0] != p["splits_before"][1] for p in found)
    assert re.search(r"^near-duplicates: \d+ within 14 of 256 bits", stdout, re.M)


@pytest.mark.parametrize("shuffle", ["files", "beam"])
def test_hash_to_min_rounds_and_union_find_in_one_worker_give_the_same_version(planted, grouped, tmp_path, shuffle):
    """The planted corpus is far below --near_duplicates_one_worker_pairs, so its components were joined by
    union-find in one worker; with 0 they are joined by the Hash-to-Min rounds, and the version is the same: the
    records' splits, the pairs file, the leakage section (but for ``rounds``) and the shards' bytes. The rounds'
    messages cross the files shuffle or Beam's; with Beam's, which has the most buckets, each part of the pairs
    file is also cut into 16 sorted runs that the join merges (stages/leakage/files.py)."""
    out, _ = grouped
    rounds = tmp_path / "rounds"
    run_cli("--input", planted[1], "--output", rounds, *OPTIONS, "--near_duplicates_one_worker_pairs", "0",
            "--shuffle", shuffle)
    one, many = (json.loads((folder / "manifest.json").read_text()) for folder in (out, rounds))
    assert (one["leakage"].pop("rounds"), many["leakage"].pop("rounds")) == (0, 16)
    strip = _RUN.sub  # the pairs file's and index's paths name their run
    assert json.loads(strip("", json.dumps(one["leakage"]))) == json.loads(strip("", json.dumps(many["leakage"])))
    assert one["leakage"]["components"]["count"] > 50 and one["leakage"]["finished_in_one_worker"] == 0
    assert source_splits(out) == source_splits(rounds) and pair_lines(out) == pair_lines(rounds)
    assert {s: [shard["sha256"] for shard in e["shards"]] for s, e in one["splits"].items()} == {
        s: [shard["sha256"] for shard in e["shards"]] for s, e in many["splits"].items()}


def test_statistics_and_counts_are_those_of_the_final_splits(grouped):
    out, _ = grouped
    manifest = json.loads((out / "manifest.json").read_text())
    stats = json.loads((out / manifest["statistics"]["stats_file"]).read_text())
    train = [source for source, split in source_splits(out).items() if split == "train"]
    assert stats["num_images"] == len(train) == manifest["splits"]["train"]["num_images"]
    counts = manifest["counts"]
    assert counts["discovered"] == (counts["written"] + counts["rejected"]["total"] + counts["duplicates"]
                                    + counts["filtered_out"]["total"])
    pairs_file = manifest["leakage"]["pairs_file"]
    entry = manifest["files"][pairs_file]
    assert entry["sha256"] == hashlib.sha256((out / pairs_file).read_bytes()).hexdigest()
    assert all(path in manifest["files"] for path in manifest["leakage"]["index"]["files"].values())


def test_a_rerun_compares_only_new_hashes_and_ends_as_a_fresh_run(grouped, rerun):
    fresh, _ = grouped
    out, stdout, parent = rerun
    manifest = json.loads((out / "manifest.json").read_text())
    full = json.loads((fresh / "manifest.json").read_text())
    assert manifest["leakage"]["index"]["reused"] == parent
    assert manifest["leakage"]["distances_computed"] < full["leakage"]["distances_computed"]
    assert source_splits(out) == source_splits(fresh)
    assert pair_lines(out) == pair_lines(fresh)
    rows = {row["feature"]: row for row in manifest["drift"]["rows"]}
    assert set(rows) == {"class share of images", "class share of pixels", "image size", "brightness"}
    moved = [name for name, row in rows.items() if row["value"] > 0.001]
    assert moved and all(f"warning: {name} moved since version {parent}" in stdout for name in moved)
    report = (out / manifest["data_dir"] / "report.html").read_text()
    assert 'id="drift"' in report and 'id="leakage"' in report and "data-near-pair" in (
        (fresh / full["data_dir"] / "report.html").read_text())


def test_a_rerun_that_removes_most_images_drops_them_from_the_index(planted, tmp_path):
    """Every bucket of the parent's index is read on a re-run, also one that no image of the re-run reaches: a
    removed image's rows leave the index (one band-0 row per image the version holds), so that no later image
    is paired with it."""
    import numpy as np
    folder, listing, _, _ = planted
    rows = list(csv.DictReader(open(listing, newline="")))

    def first(n: int) -> Path:
        path = folder / f"first_{n}.csv"
        with open(path, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=["image", "mask"])
            writer.writeheader()
            writer.writerows(rows[:n])
        return path

    out = tmp_path / "out"
    run_cli("--input", first(40), "--output", out, *OPTIONS)
    parent = json.loads((out / "manifest.json").read_text())["run_id"]
    run_cli("--input", first(5), "--output", out, *OPTIONS, "--overwrite")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["leakage"]["index"]["reused"] == parent
    band_zero = 0
    for relative in manifest["leakage"]["index"]["files"].values():
        band_rows = np.frombuffer((out / relative).read_bytes(), ">u8").reshape(-1, 8)
        band_zero += int((band_rows[:, 0] == 0).sum())
    assert band_zero == manifest["counts"]["written"] == 5


@pytest.fixture(scope="module")
def sequences(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sequences") / "frames"
    return write_sequences(folder, sequences=6, frames=20)


@pytest.fixture(scope="module")
def sequence_runs(sequences, tmp_path_factory):
    """{policy: (output, stdout)} of the frames with --split_group folder, --near_duplicates report and off."""
    runs = {}
    for name, extra in (("folder", ["--split_group", "folder"]), ("report", ["--near_duplicates", "report"]),
                        ("off", ["--near_duplicates", "off"])):
        out = tmp_path_factory.mktemp(f"seq_{name}") / "out"
        runs[name] = out, run_cli("--input", sequences, "--output", out, *OPTIONS, *extra, "--allow_no_train").stdout
    return runs


def test_split_group_keeps_each_sequence_in_one_split(sequence_runs):
    out, _ = sequence_runs["folder"]
    by_sequence = collections.defaultdict(set)
    for source, split in source_splits(out).items():
        by_sequence[source.split("/")[0]].add(split)
    assert len(by_sequence) == 6 and all(len(splits) == 1 for splits in by_sequence.values()), by_sequence
    leakage = json.loads((out / "manifest.json").read_text())["leakage"]
    assert sum(leakage["groups_per_split"].values()) == 6 and leakage["cross_split_pairs"]["after"] == 0


def test_report_keeps_the_splits_and_warns_with_the_cross_split_pairs(sequence_runs):
    out, stdout = sequence_runs["report"]
    off, _ = sequence_runs["off"]
    assert source_splits(out) == source_splits(off)
    found = [json.loads(line) for line in pair_lines(out)]
    crossing = sum(p["splits"][0] != p["splits"][1] for p in found)
    assert crossing > 0
    assert f"warning: {crossing:,} near-duplicate pairs lie across splits (--near_duplicates report" in stdout
    manifest = json.loads((off / "manifest.json").read_text())
    assert "leakage" not in manifest and "profile" not in manifest


def test_groups_the_listing_puts_in_two_splits_are_counted(corpus_dir, tmp_path):
    listing = corpus_dir / "segmentation" / "manifest.csv"
    out = tmp_path / "out"
    stdout = run_cli("--input", listing, "--output", out, *OPTIONS, "--split_group", "column:source").stdout
    source_of = {row["image"]: row["source"] for row in csv.DictReader(open(listing, newline=""))}
    spread = collections.defaultdict(set)
    for source, split in source_splits(out).items():
        spread[source_of[source]].add(split)
    expected = sum(len(splits) > 1 for splits in spread.values())
    assert expected > 0
    assert f"warning: {expected} split groups (--split_group column:source) lie in two or more splits" in stdout
    shutil.rmtree(out)


# A run in a fresh process whose engine records every bundle it hands a stage (Beam's own
# BundleManager._send_input_to_worker, the path of every stage's input on the DirectRunner's engine).
_HANDED = """
import json, pickle, sys
from apache_beam.runners.portability.fn_api_runner import fn_runner
send, handed = fn_runner.BundleManager._send_input_to_worker, {}
def recorded(manager, bundle_id, transform_id, byte_streams):
    byte_streams = list(byte_streams)
    handed[transform_id] = handed.get(transform_id, b"") + b"".join(bytes(chunk) for chunk in byte_streams)
    return send(manager, bundle_id, transform_id, byte_streams)
fn_runner.BundleManager._send_input_to_worker = recorded
from beam_pipeline.launcher.pipeline import run
result = run(sys.argv[2:])
with open(sys.argv[1], "wb") as out:
    pickle.dump(handed, out)
print(json.dumps(result["counts"]))
"""


def test_no_stage_is_handed_a_record_a_pair(planted, tmp_path):
    """What the runner hands its stages is paths, counts and tallies, never a record per pair: Beam's
    DirectRunner engine holds every stage's input in the launcher's memory (docs/scale.md). Measured by the
    image names found in the bytes handed to stages, in a run with grouping, statistics and balancing on and
    150 rows whose files are missing (rejects): only the closest cross-split pairs of the leakage tallies
    (summary.CLOSEST) may name images, and no reject is named."""
    from beam_pipeline.core.leakage.summary import CLOSEST
    folder, listing, _, _ = planted
    with open(listing, newline="") as handle:
        names = [row["image"] for row in csv.DictReader(handle)]
    missing = [f"images/missing_{index:04d}.jpg" for index in range(150)]
    with_rejects = folder / "with_rejects.csv"             # beside the corpus, whose paths it names
    shutil.copyfile(listing, with_rejects)
    with open(with_rejects, "a", newline="") as handle:
        csv.writer(handle).writerows((image, image.replace("images/", "masks/")) for image in missing)
    out, handed = tmp_path / "out", tmp_path / "handed.bin"
    completed = subprocess.run([sys.executable, "-c", _HANDED, str(handed), "--input", str(with_rejects),
                                "--output", str(out), *OPTIONS, "--max_reject_fraction", "1"], cwd=ROOT,
                               capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr[-3000:]
    counts = json.loads(completed.stdout.strip().splitlines()[-1])
    assert counts["written"] == len(names) > 200 and counts["rejected"]["total"] == len(missing)
    with open(handed, "rb") as handle:
        inputs = pickle.load(handle)                           # {read transform: the bytes handed to it}
    assert sum(map(len, inputs.values())) > 10_000             # the recording saw the run's stages

    def naming(candidates):
        """{read transform: the candidates named in what it was handed}"""
        return {transform: found for transform, data in inputs.items()
                if (found := {name for name in candidates if name.encode() in data})}
    named = naming(names)
    assert len(set().union(*named.values())) <= 4 * CLOSEST, {t: len(found) for t, found in named.items()}
    assert naming(missing) == {}
