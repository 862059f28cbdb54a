"""Masks stored the way public datasets store them, through the maps (issue 26), on real photographs.

Each corpus (tests/mask_corpora.py) stores true class-id masks of real photographs in one encoding, with
the corpus's own tables; the pipeline reads them through a map and must store masks equal, pixel for
pixel, to the true masks; stats.json must hold their exact train totals; the broken masks must be
rejected naming what no map lists. The binary corpus run with the defaults must warn about class 1.
Every expected value comes from the corpus's true masks, never from the pipeline.
"""

import concurrent.futures
import json
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from conftest import dataset_dir, run_cli
from mask_corpora import FOOD_MAP, IGNORE, NUM_CLASSES, UNLISTED_COLOR, UNLISTED_VALUE, write_class_folders, write_corpus

PAIRS = 10
# (corpus kind, options); "binary-defaults" reads the binary corpus with no map at all. The runs whose statistics
# no test reads skip them (--no_stats).
RUNS = {
    "cityscapes": ("cityscapes", ["--label_map", "cityscapes"]),
    "camvid": ("camvid", ["--color_map", "camvid"]),
    "ade": ("ade", ["--num_classes", "10", "--reduce_zero_label"]),
    "binary": ("binary", ["--label_map", "binary255"]),
    "ids16": ("ids16", ["--num_classes", "12", "--label_map", "{root}/map.csv", "--mask_formats", "png,tiff"]),
    "binary-defaults": ("binary", ["--num_classes", "2", "--no_stats"]),
    "labels": ("labels", ["--task", "classification", "--label_map", "{root}/map.csv", "--no_stats"]),
}
PER_FOLDER = 3
BROKEN = {"camvid", "ids16"}      # corpora with one more mask that their map does not cover
FEATURES = {
    "image/source_id": tf.io.FixedLenFeature([], tf.string),
    "image/segmentation/class/encoded": tf.io.FixedLenFeature([], tf.string),
    "image/repeat/copy": tf.io.FixedLenFeature([], tf.int64),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """{run name: (output, true masks or folders, completed process)}: the runs, two at a time."""
    root = tmp_path_factory.mktemp("mask_maps")
    truths = {kind: write_corpus(kind, root / kind, PAIRS, broken=kind in BROKEN)
              for kind in {kind for kind, _ in RUNS.values()} if kind != "labels"}
    truths["labels"] = write_class_folders(root / "labels", PER_FOLDER)

    def run(name):
        kind, options = RUNS[name]
        out = root / f"out-{name}"
        args = [option.replace("{root}", str(root / kind)) for option in options]
        source = root / kind / ("images" if kind == "labels" else "listing.csv")
        completed = run_cli("--input", source, "--output", out, "--max_reject_fraction", "1", *args)
        return name, (out, truths[kind], completed)

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(run, RUNS))


def manifest_of(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


def stored_masks(out: Path):
    """{source_id: (split, stored mask)} of the original records (repeat copies are the same bytes)."""
    masks = {}
    for split, entry in manifest_of(out)["splits"].items():
        files = [str(out / shard["path"]) for shard in entry["shards"]]
        for record in tf.data.TFRecordDataset(files).map(lambda r: tf.io.parse_single_example(r, FEATURES)):
            if int(record["image/repeat/copy"]) == 0:
                mask = tf.io.decode_png(record["image/segmentation/class/encoded"], channels=1).numpy()[..., 0]
                masks[record["image/source_id"].numpy().decode()] = (split, mask)
    return masks


@pytest.mark.parametrize("name", ["cityscapes", "camvid", "ade", "binary", "ids16"])
def test_stored_masks_are_the_true_masks_pixel_for_pixel(runs, name):
    out, truth, _ = runs[name]
    masks = stored_masks(out)
    assert sorted(masks) == sorted(truth)
    for source_id, (_, mask) in masks.items():
        assert mask.dtype == np.uint8
        assert np.array_equal(mask, truth[source_id]), source_id


@pytest.mark.parametrize("name", ["cityscapes", "camvid", "ade", "binary", "ids16"])
def test_statistics_are_the_true_masks_train_totals(runs, name):
    out, truth, _ = runs[name]
    num_classes = NUM_CLASSES[RUNS[name][0]]
    train = [truth[source_id] for source_id, (split, _) in stored_masks(out).items() if split == "train"]
    expected = np.bincount(np.concatenate([m.ravel() for m in train]), minlength=256)
    stats = json.loads((dataset_dir(out) / "stats.json").read_text())
    assert stats["num_images"] == len(train)
    assert stats["class_pixels"] == expected[:num_classes].tolist()
    assert stats["ignore_pixels"] == int(expected[IGNORE])


def test_rejects_name_the_unlisted_value_and_colour(runs):
    for name, reason, named in (("ids16", "mask_value_unmapped", f"{UNLISTED_VALUE} (16 px)"),
                                ("camvid", "mask_color_unknown", "({},{},{}) (15 px)".format(*UNLISTED_COLOR))):
        out, _, _ = runs[name]
        manifest = manifest_of(out)
        assert manifest["counts"]["rejected"]["by_reason"] == {reason: 1}, name
        rows = [json.loads(line) for path in (dataset_dir(out) / "rejects").glob("*.jsonl")
                for line in path.read_text().splitlines()]
        assert [row["reason"] for row in rows] == [reason]
        assert named in rows[0]["detail"], rows[0]["detail"]


def test_the_summary_shows_the_values_found_and_their_classes(runs):
    out, _, completed = runs["ids16"]
    lines = completed.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("mask values ("))
    table = {line.split("->")[0].strip(): line.split("->")[1].split()[0] for line in lines[start + 1:]
             if "->" in line}
    assert table["1000"] == "0" and table["30000"] == "0" and table["1671"] == "11"
    assert table["0"] == "ignore" and table["65535"] == "ignore"
    assert not [line for line in lines if line.startswith("warning:")]


def test_binary_masks_with_the_defaults_warn_about_class_1(runs):
    out, _, completed = runs["binary-defaults"]
    assert completed.returncode == 0
    warnings = [line for line in completed.stdout.splitlines() if line.startswith("warning:")]
    assert any(line.startswith("warning: class 1 ") and "0/255 with --ignore_label 255" in line
               and "--label_map binary255" in line for line in warnings), warnings
    report = (dataset_dir(out) / "report.html").read_text()
    assert 'class="warning"' in report and "class 1 " in report


def test_a_map_with_the_binary_corpus_warns_of_nothing(runs):
    _, _, completed = runs["binary"]
    assert "warning:" not in completed.stdout


def test_a_label_map_groups_class_folders_and_leaves_one_out(runs):
    out, folders, _ = runs["labels"]
    manifest = manifest_of(out)
    assert manifest["class_names"] == ["dessert", "meat"] and manifest["num_classes"] == 2
    left_out = [name for name, cls in FOOD_MAP.items() if cls == "ignore"]
    assert manifest["counts"]["filtered_out"]["by_reason"] == {"label_map_ignore": PER_FOLDER * len(left_out)}
    assert manifest["counts"]["written"] == PER_FOLDER * (len(FOOD_MAP) - len(left_out))
    features = {"image/source_id": tf.io.FixedLenFeature([], tf.string),
                "image/class/label": tf.io.FixedLenFeature([], tf.int64)}
    labels = {}
    for entry in manifest["splits"].values():
        files = [str(out / shard["path"]) for shard in entry["shards"]]
        for record in tf.data.TFRecordDataset(files).map(lambda r: tf.io.parse_single_example(r, features)):
            labels[record["image/source_id"].numpy().decode()] = int(record["image/class/label"])
    expected = {name[len("images/"):]: ["dessert", "meat"].index(FOOD_MAP[folder])
                for name, folder in folders.items() if FOOD_MAP[folder] != "ignore"}
    assert labels == expected


def test_plan_shows_the_values_found_and_the_warnings_before_anything_runs(runs):
    root = runs["ids16"][0].parent
    commands = {"ids16": ["--input", root / "ids16" / "listing.csv", "--num_classes", "12", "--label_map",
                          root / "ids16" / "map.csv", "--mask_formats", "png,tiff"],
                "binary": ["--input", root / "binary" / "listing.csv", "--num_classes", "2"]}
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        plans = dict(zip(commands, pool.map(lambda args: run_cli(*args, "--output", root / "plan-out", "--plan"),
                                            commands.values())))
    ids16 = plans["ids16"].stdout
    assert "mask values (--label_map" in ids16 and "rejected mask_value_unmapped" in ids16
    assert any(line.split()[:4] == ["1000", "->", "0", "0"] for line in ids16.splitlines()), ids16
    assert not (root / "plan-out").exists()
    binary = [line for line in plans["binary"].stdout.splitlines() if line.startswith("warning:")]
    assert any(line.startswith("warning: class 1 (1) has no pixels in the train split") and
               line.endswith("(in the sample)") for line in binary), plans["binary"].stdout
