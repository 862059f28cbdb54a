"""A re-run never builds on a damaged parent (issue 45, docs/recovery.md).

The parent, A: a run on the sample corpus's listing, then a re-run on it without every 9th row, so that A's kept
shards carry deleted records. Each test works on a copy of A made of hard links (the files' versions, as A
published them, stay the same: only what a test damages moves), damages files of A as a disk or a user would, and
re-runs on the same listing with --overwrite. The reference is a fresh run on that listing: a re-run must publish
the same live records (SHA-256 of each record, per split, read with tf.data), a version ``verify`` accepts, and no
traceback; or, with --on_damaged_parent fail or when a kept file goes missing during the run, refuse in one line
and publish nothing.
"""

import collections
import csv
import json
import os
import shutil
from pathlib import Path

import pytest
import tensorflow as tf

from beam_pipeline import phases
from beam_pipeline.verify import verify
from conftest import NUM_CLASSES, run_cli
from deltas import live_records
from test_reliability import finish, kill_group, start, wait_paused

OPTIONS = ["--num_classes", str(NUM_CLASSES), "--target_shard_bytes", "2000000"]
REMOVE_EVERY = 9


@pytest.fixture(scope="module")
def setting(corpus_dir, tmp_path_factory):
    """(corpus folder, listing of A, A's output, the fresh run's live records)."""
    root = tmp_path_factory.mktemp("damaged_parent")
    folder = root / "segmentation"
    shutil.copytree(corpus_dir / "segmentation", folder)
    with open(folder / "manifest.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    listing = folder / "a.csv"
    with open(listing, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(row for index, row in enumerate(rows) if index % REMOVE_EVERY != REMOVE_EVERY - 1)
    parent = root / "a"
    run_cli("--input", folder / "manifest.csv", "--output", parent, *OPTIONS)
    run_cli("--input", listing, "--output", parent, "--overwrite", *OPTIONS)
    fresh = root / "fresh"
    run_cli("--input", listing, "--output", fresh, *OPTIONS)
    return folder, listing, parent, live_records(fresh)


def linked_copy(parent: Path, to: Path) -> Path:
    """A copy of the output whose files are hard links: their versions are A's."""
    shutil.copytree(parent, to, copy_function=os.link)
    return to


def rewrite(path: Path, data: bytes) -> None:
    """New bytes at ``path``, in a new file (the link to A's file is broken, A keeps its bytes)."""
    path.unlink()
    path.write_bytes(data)


def flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    rewrite(path, bytes(data))


def truncate(path: Path) -> None:
    rewrite(path, path.read_bytes()[: path.stat().st_size // 2])


def source_ids(shard: Path) -> list:
    return [tf.train.Example.FromString(r.numpy()).features.feature["image/source_id"].bytes_list.value[0].decode()
            for r in tf.data.TFRecordDataset(str(shard))]


def shards_of(manifest: dict, split: str) -> list:
    return sorted(manifest["splits"][split]["shards"], key=lambda shard: shard["path"])


def test_every_kind_of_damage_to_shards_side_files_and_deletion_lists_is_rebuilt_from_the_sources(setting, tmp_path):
    folder, listing, parent, fresh = setting
    out = linked_copy(parent, tmp_path / "out")
    manifest = json.loads((out / "manifest.json").read_text())
    train = shards_of(manifest, "train")
    assert len(train) >= 11 and any(shard.get("deleted") for shard in train)       # A deleted records
    path = {shard["path"]: out / shard["path"] for shard in train}

    def side(index: int, kind: str) -> Path:
        return out / train[index][kind]

    flip(path[train[1]["path"]])                                       # a shard: a flipped byte, the same size
    truncate(path[train[2]["path"]])                                   # cut
    lost_shard = train[3]["path"]
    lost_source = source_ids(path[lost_shard])[0]                      # a pair of it whose source goes too
    lost_record = next(record.numpy() for record in tf.data.TFRecordDataset(str(path[lost_shard])))
    path[lost_shard].unlink()                                          # gone
    rewrite(path[train[4]["path"]], path[train[5]["path"]].read_bytes())   # replaced by another shard
    flip(side(5, "keys"))                                              # a keys file: flipped, cut, gone, replaced
    truncate(side(6, "keys"))
    side(7, "keys").unlink()
    rewrite(side(8, "keys"), side(9, "keys").read_bytes())
    flip(side(9, "class_index"))                                       # a class-index part: flipped, cut, gone
    truncate(side(10, "class_index"))
    side(0, "class_index").unlink()
    val, test = shards_of(manifest, "val")[0], shards_of(manifest, "test")[0]
    raw = json.loads((out / "manifest.json").read_text())              # deletion lists: one shortened, one out of range
    for entry in raw["splits"]["val"]["shards"] + raw["splits"]["test"]["shards"]:
        if entry["path"] == val["path"]:
            entry["deleted"] = entry.get("deleted", [])[1:] if entry.get("deleted") else [0]
        if entry["path"] == test["path"]:
            entry["deleted"] = [entry["records"] + 5]
    rewrite(out / "manifest.json", json.dumps(raw).encode())
    damaged = {shard["path"] for shard in train[:11]} | {val["path"], test["path"]}
    source = folder / lost_source
    kept_bytes = source.read_bytes()
    source.unlink()
    try:
        completed = run_cli("--input", listing, "--output", out, "--overwrite", *OPTIONS)
    finally:
        source.write_bytes(kept_bytes)
    text = completed.stdout + completed.stderr
    assert "Traceback" not in text
    new = json.loads((out / "manifest.json").read_text())
    lineage = new["lineage"]
    assert {d["shard"] for d in lineage["damaged_parent"]} == damaged
    assert sum(1 for line in completed.stdout.splitlines() if line.startswith("warning: the published version's shard"))
    expected = {split: collections.Counter(records) for split, records in fresh.items()}
    expected["train"][__import__("hashlib").sha256(lost_record).hexdigest()] -= 1
    assert live_records(out) == {split: +records for split, records in expected.items()}
    assert new["counts"]["rejected"]["by_reason"].get("parent_shard_missing") == 1
    rejects = [json.loads(line) for name in new["rejects"] for line in (out / name).read_text().splitlines()]
    (lost,) = [r for r in rejects if r["reason"] == "parent_shard_missing"]
    assert lost_shard in lost["detail"] and lost["image"].endswith(lost_source)
    assert lineage["records"]["lost"] >= 1 and lineage["records"]["rebuilt"] > 0
    assert lineage["parent_check"]["hashed"] == 3            # the same-size damages: a flipped shard, keys and index
    assert not {d["shard"] for d in lineage["damaged_parent"]} & {s["path"] for s in
                                                                   [*new["splits"]["train"]["shards"]]}
    assert verify(str(out)).ok


def test_with_on_damaged_parent_fail_the_run_stops_in_one_line_naming_the_file(setting, tmp_path):
    _, listing, parent, _ = setting
    out = linked_copy(parent, tmp_path / "out")
    before = (out / "manifest.json").read_bytes()
    gone = shards_of(json.loads(before), "train")[2]["path"]
    (out / gone).unlink()
    completed = run_cli("--input", listing, "--output", out, "--overwrite", "--on_damaged_parent", "fail", *OPTIONS,
                        check=False)
    assert completed.returncode == 1 and "Traceback" not in completed.stderr
    (line,) = [line for line in completed.stderr.splitlines() if line.startswith("error:")]
    assert f"{gone} is missing" in line and "--on_damaged_parent rebuild" in line
    assert (out / "manifest.json").read_bytes() == before


def test_a_kept_shard_that_goes_missing_during_the_run_stops_the_commit_in_one_line(setting, tmp_path):
    _, listing, parent, _ = setting
    out = linked_copy(parent, tmp_path / "out")
    before = (out / "manifest.json").read_bytes()
    run = start(["--input", listing, "--output", out, "--overwrite", *OPTIONS], tmp_path / "run.log",
                pause_at=phases.PUBLISH)
    wait_paused(run)
    gone = shards_of(json.loads(before), "val")[0]["path"]
    (out / gone).unlink()                                         # after the check at launch, before the commit
    run.pause_file.with_name(run.pause_file.name + ".go").touch()
    assert finish(run) == 1
    output = run.output()
    assert "Traceback" not in output
    (line,) = [line for line in output.splitlines() if line.startswith("error:")]
    assert f"cannot publish: {gone}" in line and "is missing" in line and "Nothing was published" in line
    assert (out / "manifest.json").read_bytes() == before


def test_a_parent_shard_deleted_between_a_killed_attempt_and_the_next_is_rebuilt(setting, tmp_path):
    _, listing, parent, fresh = setting
    out = linked_copy(parent, tmp_path / "out")
    args = ["--input", listing, "--output", out, "--overwrite", *OPTIONS]
    run = start(args, tmp_path / "first.log", pause_at=phases.STATISTICS)       # an unchanged re-run writes no shard
    wait_paused(run)
    assert kill_group(run) == []
    gone = shards_of(json.loads((out / "manifest.json").read_text()), "train")[4]["path"]
    (out / gone).unlink()
    completed = run_cli(*args)
    assert "Traceback" not in completed.stderr
    assert [d["shard"] for d in json.loads((out / "manifest.json").read_text())["lineage"]["damaged_parent"]] == [gone]
    assert live_records(out) == fresh
    assert verify(str(out)).ok
