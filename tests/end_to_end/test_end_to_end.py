"""End to end: the command line on the seeded sample corpus, read back with tf.data.

Expected counts and reasons are fixed here from the sample corpus's design
(see tools/sample_corpus/), not computed by the pipeline.
"""

import hashlib
import io
import json
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from conftest import NUM_CLASSES, ROOT, dataset_dir, manifest_of, run_cli

VALID_PAIRS = 240
MANIFEST_ROWS = 252
BROKEN = {  # stem -> reason
    "broken_truncated": "truncated",
    "broken_notimage": "undecodable",
    "broken_gif": "format_not_allowed",
    "broken_bomb": "too_many_pixels",
    "broken_sizemismatch": "size_mismatch",
    "broken_badlabel": "mask_value_out_of_range",
    "broken_rgbmask": "mask_not_single_channel",
    "broken_emptymask": "empty_file",
    "broken_missingmask": "missing_file",
    "escape": "path_outside_root",
}
FEATURES = {
    "image/encoded": tf.io.FixedLenFeature([], tf.string),
    "image/format": tf.io.FixedLenFeature([], tf.string),
    "image/height": tf.io.FixedLenFeature([], tf.int64),
    "image/width": tf.io.FixedLenFeature([], tf.int64),
    "image/source_id": tf.io.FixedLenFeature([], tf.string),
    "image/segmentation/class/encoded": tf.io.FixedLenFeature([], tf.string),
    "image/segmentation/class/pixel_count": tf.io.FixedLenFeature([NUM_CLASSES], tf.int64),
    "image/repeat/copy": tf.io.FixedLenFeature([], tf.int64),
}


def stem_of(path):
    return path.rsplit("/", 1)[-1].rsplit(".", 1)[0]


def read_rejects(out):
    rows = []
    for path in sorted((dataset_dir(out) / "rejects").glob("*.jsonl")):
        rows += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return rows


def read_shards(out, manifest):
    """{(source_id, copy): parsed example} over every shard of every split, via tf.data."""
    examples = {}
    for split, entry in manifest["splits"].items():
        files = [str(out / shard["path"]) for shard in entry["shards"]]
        dataset = tf.data.TFRecordDataset(files).map(lambda r: tf.io.parse_single_example(r, FEATURES))
        for parsed in dataset:
            record = {k: v.numpy() for k, v in parsed.items()}
            record["split"] = split
            key = record["image/source_id"].decode(), int(record["image/repeat/copy"])
            assert key not in examples, f"{key} written twice"
            examples[key] = record
    return examples


@pytest.fixture(scope="module")
def seg(segmentation_run):
    out, completed = segmentation_run
    manifest = json.loads((out / "manifest.json").read_text())
    return out, manifest, completed


def test_counts_reconcile_exactly(seg):
    _, manifest, _ = seg
    counts = manifest["counts"]
    assert counts["discovered"] == MANIFEST_ROWS
    assert counts["written"] == VALID_PAIRS
    assert counts["duplicates"] == 2
    assert counts["filtered_out"]["total"] == 0
    assert counts["rejected"]["by_reason"] == {reason: 1 for reason in BROKEN.values()}
    assert (counts["written"] + counts["duplicates"] + counts["rejected"]["total"]
            + counts["filtered_out"]["total"]) == counts["discovered"]
    assert sum(e["num_images"] for e in manifest["splits"].values()) == VALID_PAIRS


def test_every_broken_input_rejected_with_its_reason(seg):
    out, _, _ = seg
    rows = read_rejects(out)
    rejected = {stem_of(row["image"]): row["reason"] for row in rows if row["status"] == "rejected"}
    assert rejected == BROKEN
    assert all(row["detail"] for row in rows)
    duplicates = [row for row in rows if row["status"] == "duplicate"]
    assert len(duplicates) == 2
    assert any(stem_of(row["image"]) == "dup_copy" or "dup_copy" in row["detail"] for row in duplicates)


def test_shards_hold_source_bytes_and_mask_pixels(seg, corpus_dir):
    out, manifest, _ = seg
    examples = read_shards(out, manifest)
    assert len({source_id for source_id, _ in examples}) == VALID_PAIRS
    assert len(examples) == manifest["counts"]["records_written"]
    root = corpus_dir / "segmentation"
    manifest_rows = {}
    for line in (root / "manifest.csv").read_text().splitlines()[1:]:
        image, mask, *_ = line.split(",")
        manifest_rows.setdefault(image, mask)
    converted, grey_jpegs = set(), set()
    for (source_id, _), record in examples.items():
        source = (root / source_id).read_bytes()
        source_image = Image.open(io.BytesIO(source))
        if source_image.mode == "RGB" or (source_image.mode == "L" and source_image.format == "JPEG"):
            assert record["image/encoded"] == source, source_id       # a grey JPEG too: stored as it is
            if source_image.mode == "L":
                grey_jpegs.add(source_id)
                decoded = tf.io.decode_jpeg(source, channels=3, dct_method="INTEGER_ACCURATE").numpy()
                assert np.array_equal(decoded, np.asarray(source_image.convert("RGB"))), source_id
        else:
            converted.add(source_id)
            assert record["image/format"] == b"png"
            stored = np.asarray(Image.open(io.BytesIO(record["image/encoded"])))
            assert np.array_equal(stored, np.asarray(source_image.convert("RGB"))), source_id
        mask_image = Image.open(root / manifest_rows[source_id])
        expected = np.asarray(mask_image).astype(np.int64)
        stored_mask = tf.io.decode_png(record["image/segmentation/class/encoded"], channels=1).numpy()[..., 0]
        assert np.array_equal(stored_mask, expected), source_id
        assert (record["image/height"], record["image/width"]) == expected.shape
        counts = np.bincount(expected.ravel(), minlength=256)[:NUM_CLASSES]
        assert record["image/segmentation/class/pixel_count"].tolist() == counts.tolist()
    assert len(converted) == 2 and len(grey_jpegs) == 2   # two RGBA PNGs converted; two grey JPEGs kept


def test_shard_digests_sizes_and_split_column(seg, corpus_dir):
    out, manifest, _ = seg
    for split, entry in manifest["splits"].items():
        sizes = []
        for shard in entry["shards"]:
            data = (out / shard["path"]).read_bytes()
            assert hashlib.sha256(data).hexdigest() == shard["sha256"]
            assert len(data) == shard["bytes"]
            sizes.append(len(data))
        if len(sizes) > 1:
            assert max(sizes) <= 1.1 * min(sizes), (split, sizes)
    assert len(manifest["splits"]["train"]["shards"]) >= 5
    assert set(manifest["splits"]) == {"train", "val", "test"}
    assert sorted(p.name for p in out.iterdir()) == ["cache", "manifest.json", "runs"]     # no lock, no working files
    assert [p.name for p in (out / "runs").iterdir()] == [manifest["run_id"]]


def test_second_run_gives_byte_identical_shards(seg, corpus_dir, tmp_path):
    out, manifest, _ = seg
    run_cli("--input", corpus_dir / "segmentation" / "manifest.csv", "--output", tmp_path,
            "--num_classes", NUM_CLASSES, "--target_shard_bytes", 4_000_000)
    assert manifest_of(tmp_path)["splits"] == manifest_of(out)["splits"]     # shard paths within their versions
    for entry in manifest_of(out)["splits"].values():
        for shard in entry["shards"]:
            assert (dataset_dir(tmp_path) / shard["path"]).read_bytes() == (dataset_dir(out) / shard["path"]).read_bytes()


def test_summary_printed(seg):
    _, _, completed = seg
    assert "=== beam_pipeline summary ===" in completed.stdout
    assert "written: 240" in completed.stdout
    assert "mask_value_out_of_range" in completed.stdout


def test_summary_counts_images_and_records_apart(segmentation_repeat_run):
    """Class 0 is in every one of the 240 written pairs; the train split's repeat copies make 281 records."""
    _, completed = segmentation_repeat_run
    lines = completed.stdout.splitlines()
    header = next(line for line in lines if line.lstrip().startswith("class "))
    assert header.split()[:3] == ["class", "images", "records"]
    class_0 = next(line for line in lines if line.split()[:2] == ["0", "0"])
    assert class_0.split()[2:4] == ["240", "281"]
    class_7 = next(line for line in lines if line.split()[:2] == ["7", "7"])
    assert class_7.split()[2:4] == ["6", "22"]


def test_paired_folders_report_orphans(corpus_dir, tmp_path):
    run_cli("--input", corpus_dir / "segmentation", "--mask_template", "masks/{stem}.png",
            "--image_glob", "images/*", "--output", tmp_path, "--num_classes", NUM_CLASSES)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    counts = manifest["counts"]
    assert counts["written"] == VALID_PAIRS
    assert counts["duplicates"] == 1          # dup_copy; the listed-twice row exists only in the manifest
    by_reason = counts["rejected"]["by_reason"]
    assert by_reason["orphan_image"] == 2     # orphan_image, broken_missingmask
    assert by_reason["orphan_mask"] == 2      # orphan_mask, escape (its image lives outside images/)
    rows = read_rejects(tmp_path)
    orphans = sorted(stem_of(row["image"] or row["mask"]) for row in rows if row["reason"].startswith("orphan"))
    assert orphans == ["broken_missingmask", "escape", "orphan_image", "orphan_mask"]


def test_filter_sampling_and_max_examples(corpus_dir, tmp_path):
    run_cli("--input", corpus_dir / "segmentation" / "manifest.csv", "--output", tmp_path,
            "--num_classes", NUM_CLASSES, "--filter", "source == 'camA' and capture_year >= 2020",
            "--max_examples", 20)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    counts = manifest["counts"]
    filtered = counts["filtered_out"]["by_reason"]
    assert counts["discovered"] == MANIFEST_ROWS
    assert set(filtered) <= {"filter_expression", "max_examples"}
    assert filtered["filter_expression"] > 100
    kept_for_validation = MANIFEST_ROWS - counts["filtered_out"]["total"] - counts["rejected"]["by_reason"].get(
        "path_outside_root", 0)
    assert kept_for_validation <= 20
    examples = read_shards(tmp_path, manifest)
    rows = {line.split(",")[0]: line.split(",") for line in
            (corpus_dir / "segmentation" / "manifest.csv").read_text().splitlines()[1:]}
    for source_id, _ in examples:
        _, _, source, year, _ = rows[source_id]
        assert source == "camA" and int(year) >= 2020


@pytest.mark.parametrize("args,message", [
    (["--num_classes", "8"], "--input is required"),
    (["--input", "/nonexistent/manifest.csv", "--output", "/tmp/x", "--num_classes", "8"], "does not exist"),
    (["--input", "IN", "--output", "OUT", "--num_classes", "300"], "between 1 and 255"),
    (["--input", "IN", "--output", "OUT", "--num_classes", "8", "--filter", "os.system('x')"], "--filter"),
    (["--input", "IN", "--output", "OUT", "--num_classes", "8", "--filter", "camera == 'x'"], "unknown column"),
    (["--input", "IN", "--output", "OUT", "--num_classes", "8", "--split", "train=0.5"], "--split"),
    (["--input", "IN", "--output", "OUT", "--num_classes", "8", "--runner", "DataflowRunner"],
     "--temp_location is required with DataflowRunner"),
    (["--input", "IN", "--output", "OUT", "--num_classes", "8", "--runner", "DataflowRunner",
      "--temp_location", "gs://b/tmp"], "cannot reach the local path(s) --input="),
    (["--input", "IN", "--output", "OUT", "--num_classes", "8", "--runner", "FlinkRunner",
      "--flink_master", "flink.example.com:8081", "--temp_location", "/tmp/t"], "--temp_location=/tmp/t"),
    (["--input", "IN", "--output", "OUT"], "--num_classes is required, except for one folder per class (the "
                                           "folders are counted) and with a map that names the classes"),
    # The sample corpus's 8 class folders count themselves; a --num_classes or --class_names that differs stops.
    (["--input", "FOLDERS", "--output", "OUT", "--task", "classification", "--num_classes", "7"],
     "has 8 class folders (apple_pie, caesar_salad, chocolate_cake, french_fries, guacamole, pizza, ramen, sushi); "
     "leave --num_classes out to use the number of class folders"),
    (["--input", "FOLDERS", "--output", "OUT", "--task", "classification", "--class_names", "pizza,sushi"],
     "--class_names lists 2 names but "),
])
def test_bad_options_give_one_clear_line(corpus_dir, tmp_path, args, message):
    args = [str(corpus_dir / "segmentation" / "manifest.csv") if a == "IN" else
            str(corpus_dir / "classification" / "images") if a == "FOLDERS" else
            str(tmp_path / "o") if a == "OUT" else a for a in args]
    completed = run_cli(*args, check=False)
    assert completed.returncode == 2
    assert message in completed.stderr
    assert "Traceback" not in completed.stderr
    assert len(completed.stderr.strip().splitlines()) == 1


def test_class_folders_count_themselves_and_the_console_counts_images(classification_run):
    """The Food-101 layout without --num_classes (conftest.classification_run): 8 class folders, 403 images."""
    out, completed = classification_run
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["num_classes"] == 8
    assert manifest["class_names"] == ["apple_pie", "caesar_salad", "chocolate_cake", "french_fries", "guacamole",
                                       "pizza", "ramen", "sushi"]
    assert "validation: 403 images validated, 0 from the verdict cache" in completed.stdout
    assert "pairs" not in completed.stdout + completed.stderr
    assert re.search(r"validating +403/403 images", completed.stderr)
    assert re.search(r"writing +401/401 images", completed.stderr)


def test_help_explains_every_option():
    completed = run_cli("--help")
    for option in ("--input", "--output", "--task", "--num_classes", "--ignore_label", "--mask_template",
                   "--filter", "--include", "--exclude", "--sample_fraction", "--max_examples", "--split",
                   "--max_pixels", "--target_shard_bytes", "--allow_outside_root", "--runner"):
        assert option in completed.stdout


def test_existing_output_needs_overwrite(seg, corpus_dir):
    out, _, _ = seg
    completed = run_cli("--input", corpus_dir / "segmentation" / "manifest.csv", "--output", out,
                        "--num_classes", NUM_CLASSES, check=False)
    assert completed.returncode == 2
    assert "--overwrite" in completed.stderr


def test_a_selection_that_keeps_nothing_publishes_a_dataset_of_no_shard(corpus_dir, tmp_path):
    """Every row filtered out but the one outside the root (rejected): refused, since no train split would be
    published; with --allow_no_train the counts add up, the report and the summary say there is no shard, and
    verify passes."""
    args = ["--input", corpus_dir / "segmentation" / "manifest.csv", "--output", tmp_path, "--num_classes", NUM_CLASSES,
            "--filter", "source == 'nowhere'", "--max_reject_fraction", 1]
    refused = run_cli(*args, check=False)                    # nothing could train on it (issue 42)
    assert refused.returncode == 2 and "the version would have no train split (splits: none: no valid pair)" in \
        refused.stderr and not (tmp_path / "manifest.json").exists()
    completed = run_cli(*args, "--allow_no_train")
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["counts"]["written"] == 0 and manifest["splits"] == {}
    assert manifest["counts"]["discovered"] == 252 and manifest["counts"]["filtered_out"]["total"] == 251
    assert "splits (records in shards): none: no pair was written" in completed.stdout
    assert "No shard was written." in (dataset_dir(tmp_path) / "report.html").read_text()
    assert subprocess.run([sys.executable, "-m", "beam_pipeline.verify", str(tmp_path)], cwd=ROOT,
                          capture_output=True, timeout=300).returncode == 0
