"""The pipeline on hostile inputs: Pillow's own test images and seeded mutations, end to end.

The corpus:
* ``Tests/images`` of Pillow's source distribution (the installed version), fetched at test time with
  ``pip download --no-binary :all: --no-deps pillow==VERSION`` and cached under ``build/test-cache/``
  (``FUZZ_PILLOW_IMAGES`` may point at an unpacked copy instead): about a thousand odd, broken and
  hostile images in every format Pillow reads;
* the seeded structure-aware mutations of tools/mutations.py (bit rot, truncation, bad CRCs, missing
  IEND, bad tables, ...) of PNG and JPEG images and masks.

Two runs of ``python -m beam_pipeline``, each under a time limit (a hang fails the test):
* classification: every file as an image;
* segmentation: every PNG as a mask (255 classes and the ignore label, so that every 8-bit value is a
  class), each beside a plain RGB image of the size its header states.

For each run the test asserts:
* the run ends (exit 0, within the limit), and every listing row ends written or in the rejects files
  with a reason (or as a duplicate of a written row), with manifest.json's counts reconciling;
* every written record, read back with tf.data and decoded by the trainer's own Decoder, gives pixels
  whose channel sums and sums of squares (recomputed here with numpy) equal the record's, and stats.json's
  mean and std are those of all the decoded pixels; for masks, the per-class pixel counts and the ignore
  count recomputed from the decoded mask equal the record's, and every sample point lies on its class.
"""

import csv
import json
import os
import struct
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from conftest import ROOT, dataset_dir
from tools.mutations import mutated_files
from trainer.data.artifacts import load_artifacts
from trainer.data.decode import Decoder

RUN_TIMEOUT_S = 1500            # a run that takes longer has hung
MAX_FILE_BYTES = 4_000_000      # Pillow's few larger test files add minutes and no new case
SEG_CLASSES = 255               # with ignore label 255, every 8-bit mask value is valid
CACHE = Path(ROOT) / "build" / "test-cache"


def pillow_test_images() -> Path:
    """Pillow's sdist Tests/images for the installed Pillow, downloaded once and cached."""
    if os.environ.get("FUZZ_PILLOW_IMAGES"):
        return Path(os.environ["FUZZ_PILLOW_IMAGES"])
    version = Image.__version__
    images = CACHE / f"pillow-{version}" / "Tests" / "images"
    if images.is_dir():
        return images
    download = CACHE / "sdist"
    download.mkdir(parents=True, exist_ok=True)
    completed = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-binary", ":all:",
                                "--no-deps", f"pillow=={version}", "-d", str(download)],
                               capture_output=True, text=True, timeout=600)
    archive = download / f"pillow-{version}.tar.gz"
    if completed.returncode != 0 or not archive.exists():
        message = f"cannot fetch Pillow's sdist with pip: {completed.stderr.strip()[-500:]}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    unpacked = CACHE / f"pillow-{version}.tmp"
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if m.isfile() and "/Tests/images/" in m.name]
        tar.extractall(unpacked, members=members, filter="data")
    (CACHE / f"pillow-{version}").mkdir(exist_ok=True)
    (unpacked / f"pillow-{version}" / "Tests").rename(CACHE / f"pillow-{version}" / "Tests")
    return images


@pytest.fixture(scope="module")
def fuzz_files(tmp_path_factory):
    """The corpus folder (Pillow's files and the mutations) and its files' paths relative to it."""
    root = tmp_path_factory.mktemp("fuzz")
    pillow = pillow_test_images()
    (root / "pillow").symlink_to(pillow.resolve(), target_is_directory=True)
    (root / "mutated").mkdir()
    for name, data in mutated_files(seed=0).items():
        (root / "mutated" / name).write_bytes(data)
    files = sorted(str(path.relative_to(root)) for folder in ("pillow", "mutated")
                   for path in (root / folder).rglob("*")
                   if path.is_file() and path.stat().st_size <= MAX_FILE_BYTES)
    assert len(files) > 1000
    return root, files


def run_pipeline(*args):
    try:
        completed = subprocess.run([sys.executable, "-m", "beam_pipeline", *map(str, args),
                                    "--direct_running_mode", "multi_processing",
                                    "--max_reject_fraction", "1"],          # a corpus of broken files on purpose
                                   cwd=ROOT, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the pipeline did not finish within {RUN_TIMEOUT_S} s on the fuzz corpus (a hang)")
    assert completed.returncode == 0, completed.stderr[-5000:]
    assert "ERROR" not in completed.stderr, completed.stderr[-5000:]      # broken inputs are rejections, not errors


def write_listing(path: Path, header, rows):
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)


def png_size(path: Path):
    """(width, height) from a PNG's IHDR read with struct, or None."""
    head = path.read_bytes()[:24]
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        return None
    return struct.unpack(">II", head[16:24])


@pytest.fixture(scope="module")
def classification(fuzz_files, tmp_path_factory):
    root, files = fuzz_files
    listing = root / "classification.csv"
    write_listing(listing, ["image", "label", "split"], [[f, str(i % 2), "train"] for i, f in enumerate(files)])
    out = tmp_path_factory.mktemp("fuzz_cls")
    run_pipeline("--input", listing, "--output", out, "--task", "classification", "--num_classes", 2,
                 "--balance", "none")
    return out


@pytest.fixture(scope="module")
def segmentation(fuzz_files, tmp_path_factory):
    """Every PNG as a mask, with an RGB image of the size its IHDR states (1x1 when that is absurd)."""
    root, files = fuzz_files
    (root / "seg_images").mkdir()
    rows = []
    for i, mask in enumerate(files):
        size = png_size(root / mask)
        if size is None:
            continue
        width, height = size if 0 < size[0] * size[1] <= 4_000_000 else (1, 1)
        ramp = (np.arange(width * height * 3, dtype=np.uint32) % 251).astype(np.uint8).reshape(height, width, 3)
        image = f"seg_images/{i:05d}.png"
        Image.fromarray(ramp).save(root / image)
        rows.append([image, mask, "train"])
    listing = root / "segmentation.csv"
    write_listing(listing, ["image", "mask", "split"], rows)
    out = tmp_path_factory.mktemp("fuzz_seg")
    run_pipeline("--input", listing, "--output", out, "--num_classes", SEG_CLASSES, "--ignore_label", 255,
                 "--balance", "none")
    return out, [row[0] for row in rows]


def read_records(out: Path):
    """(parsed features, trainer-decoded dict) of every written record, through tf.data and the trainer's Decoder."""
    artifacts = load_artifacts(str(out))
    files = artifacts.shard_paths("train")
    first = next(iter(tf.data.TFRecordDataset(files[:1])))
    decoder = Decoder(artifacts, probe=first)
    assert decoder.direct                     # the graph and the direct decode agree (both use one IDCT)
    spec = {"image/source_id": tf.io.FixedLenFeature([], tf.string),
            "image/height": tf.io.FixedLenFeature([], tf.int64),
            "image/width": tf.io.FixedLenFeature([], tf.int64),
            "image/stats/channel_sum": tf.io.FixedLenFeature([3], tf.int64),
            "image/stats/channel_sum_squares": tf.io.FixedLenFeature([3], tf.int64)}
    if artifacts.task == "segmentation":
        spec["image/segmentation/class/pixel_count"] = tf.io.FixedLenFeature([SEG_CLASSES], tf.int64)
        spec["image/segmentation/ignore/pixel_count"] = tf.io.FixedLenFeature([], tf.int64)
    dataset = tf.data.TFRecordDataset(files).map(lambda r: (tf.io.parse_single_example(r, spec), decoder(r)))
    return [({k: v.numpy() for k, v in parsed.items()}, {k: v.numpy() for k, v in decoded.items()})
            for parsed, decoded in dataset]


def assert_every_row_accounted(out: Path, root: Path, images, records):
    """Every listed image is in one written record or in the rejects files with a reason, and the counts
    reconcile. Returns the reject rows by file name (the mask's for segmentation)."""
    counts = json.loads((out / "manifest.json").read_text())["counts"]
    assert counts["discovered"] == len(images)
    assert counts["discovered"] == counts["written"] + counts["rejected"]["total"] + counts["duplicates"] \
        + counts["filtered_out"]["total"]
    rejected = [json.loads(line) for path in sorted((dataset_dir(out) / "rejects").glob("*")) for line in path.read_text().splitlines()]
    for row in rejected:
        assert row["status"] in ("rejected", "duplicate") and row["reason"] and row["detail"], row
    written = [parsed["image/source_id"].decode() for parsed, _ in records]
    assert len(written) == counts["written"]
    assert sorted(written + [os.path.relpath(row["image"], root) for row in rejected]) == sorted(images)
    return {Path(row["mask"] or row["image"]).name: row for row in rejected}


def assert_pixels_are_the_statistics(records, stats):
    totals, squares, pixels = np.zeros(3, np.int64), np.zeros(3, np.int64), 0
    for parsed, decoded in records:
        image = decoded["image"]
        assert image.dtype == np.uint8 and image.shape == (parsed["image/height"], parsed["image/width"], 3)
        flat = image.reshape(-1, 3).astype(np.int64)
        source = parsed["image/source_id"].decode()
        assert flat.sum(axis=0).tolist() == parsed["image/stats/channel_sum"].tolist(), source
        assert (flat * flat).sum(axis=0).tolist() == parsed["image/stats/channel_sum_squares"].tolist(), source
        totals += flat.sum(axis=0)
        squares += (flat * flat).sum(axis=0)
        pixels += len(flat)
    assert stats["num_images"] == len(records) and stats["image_pixels"] == pixels
    mean = totals / pixels
    assert stats["image_mean"] == pytest.approx(mean.tolist(), rel=1e-9)
    assert stats["image_std"] == pytest.approx(np.sqrt(squares / pixels - mean * mean).tolist(), rel=1e-6)


def test_every_fuzzed_image_is_written_as_the_trainer_decodes_it_or_rejected(fuzz_files, classification):
    root, files = fuzz_files
    out = classification
    records = read_records(out)
    rejected = assert_every_row_accounted(out, root, files, records)
    assert len(records) > 100
    assert_pixels_are_the_statistics(records, json.loads((dataset_dir(out) / "stats.json").read_text()))
    assert {"undecodable", "truncated", "format_not_allowed", "too_many_pixels"} <= \
        {row["reason"] for row in rejected.values()}
    # PNG mutations that Pillow decodes but libpng refuses are rejected, never written as read.
    for name in ("rgb.no_iend.png", "rgb.idat_crc_wrong.png", "rgb.second_ihdr.png", "rgb-adam7.no_iend.png",
                 "rgb.unknown_critical_chunk.png", "palette-mask.transparency_longer_than_palette.png"):
        assert rejected[name]["reason"] == "undecodable", name


def test_every_fuzzed_mask_is_written_as_the_trainer_decodes_it_or_rejected(fuzz_files, segmentation):
    root, _ = fuzz_files
    out, images = segmentation
    records = read_records(out)
    rejected = assert_every_row_accounted(out, root, images, records)
    assert len(records) > 50          # most of Pillow's PNGs are RGB: mask_not_single_channel
    assert_pixels_are_the_statistics(records, json.loads((dataset_dir(out) / "stats.json").read_text()))
    class_totals = np.zeros(SEG_CLASSES, np.int64)
    for parsed, decoded in records:
        mask, source = decoded["mask"], parsed["image/source_id"].decode()
        assert mask.shape == decoded["image"].shape[:2], source
        counts = np.bincount(mask.ravel(), minlength=256)
        assert counts[:SEG_CLASSES].tolist() == parsed["image/segmentation/class/pixel_count"].tolist(), source
        assert int(counts[255]) == parsed["image/segmentation/ignore/pixel_count"], source
        classes, yx = decoded["point_classes"], decoded["point_yx"]
        assert set(classes.tolist()) == set(np.flatnonzero(counts[:SEG_CLASSES]).tolist()), source
        assert (mask[yx[:, 0], yx[:, 1]] == classes).all(), source
        class_totals += counts[:SEG_CLASSES]
    assert json.loads((dataset_dir(out) / "stats.json").read_text())["class_pixels"] == class_totals.tolist()
    for name in ("mask.no_iend.png", "mask.idat_crc_wrong.png", "mask.second_ihdr.png",
                 "mask.ihdr_height_plus_1.png", "palette-mask.no_palette.png"):
        assert rejected[name]["reason"] == "undecodable", name
