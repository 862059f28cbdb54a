"""report.html and the TFDV statistics, made from real pipeline outputs of the sample corpus.

Expected values come from manifest.json (written by the pipeline, not by the report), from
records read back with tf.data, or from the sample corpus's design (fixed here).
"""

import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from tensorflow_metadata.proto.v0 import statistics_pb2

from apache_beam.io.localfilesystem import LocalFileSystem

from beam_pipeline.report import ReportLimits, render_report, statistics_files, write_report, write_statistics
from conftest import NUM_CLASSES, ROOT, dataset_dir
from test_end_to_end import BROKEN, stem_of

CLS_REJECTED = {"broken_truncated": "truncated", "broken_notimage": "undecodable"}  # sample corpus design
MAX_REPORT_BYTES = 3_000_000


def load(out):
    """manifest.json and stats.json of the dataset whose version folder is ``out`` (OUTPUT/runs/<run_id>)."""
    manifest = json.loads((out.parent.parent / "manifest.json").read_text())
    stats = json.loads((out / "stats.json").read_text()) if (out / "stats.json").exists() else None
    return manifest, stats


@pytest.fixture(scope="module")
def seg_report(segmentation_run):
    out = dataset_dir(segmentation_run[0])
    manifest, _ = load(out)
    return out, manifest, render_report(manifest, str(out.parent.parent)).decode("utf-8")


def data_uris(page, kind):
    return re.findall(rf'src="(data:image/{kind}[^"]*)"', page)


def reject_example_paths(page):
    """Reject reason -> the image paths listed under it in the funnel table."""
    found = {}
    for reason, examples in re.findall(r'data-stage="rejected" data-reason="([^"]+)".*?<ul class="examples">(.*?)</ul>',
                                       page):
        found[reason] = re.findall(r"<li><code>([^<]+)</code>", examples)
    return found


def test_report_is_self_contained_and_bounded(seg_report):
    _, _, page = seg_report
    assert len(page.encode()) < MAX_REPORT_BYTES
    references = re.findall(r'(?:src|href)="([^"]*)"', page)
    assert references and all(ref.startswith(("data:", "#")) for ref in references), \
        [ref[:40] for ref in references if not ref.startswith(("data:", "#"))]
    assert "<script" not in page and "@import" not in page and "url(" not in page


def test_report_lists_every_reject_reason_with_its_input(seg_report):
    _, _, page = seg_report
    examples = reject_example_paths(page)
    assert set(examples) == set(BROKEN.values())
    for stem, reason in BROKEN.items():
        assert [stem_of(path) for path in examples[reason]] == [stem]


def test_gallery_shows_rarest_class_first_with_at_most_six_each(seg_report):
    _, manifest, page = seg_report
    headings = [int(c) for c in re.findall(r'data-gallery-class="(\d+)"', page)]
    before = manifest["balance"]["before"]["class_images"]
    presence = [before[c] + sum(manifest["splits"][s]["class_images"][c] for s in ("val", "test"))
                for c in range(NUM_CLASSES)]
    assert sorted(headings) == list(range(NUM_CLASSES))
    assert [presence[c] for c in headings] == sorted(presence)
    sections = re.split(r'data-gallery-class="\d+"', page.split('id="gallery"')[1])[1:]
    figures = [section.count("<figure>") for section in sections]
    assert all(1 <= n <= 6 for n in figures), figures
    assert page.count('class="legend"') == 1


def test_report_is_deterministic(seg_report):
    out, manifest, page = seg_report
    assert render_report(manifest, str(out.parent.parent)).decode("utf-8") == page


def test_caps_hold_the_gallery_and_the_shards_read(segmentation_run):
    out = dataset_dir(segmentation_run[0])
    manifest, _ = load(out)
    limits = ReportLimits(gallery_bytes=120_000, max_shards=1, thumbnail_px=128)
    page = render_report(manifest, str(out.parent.parent), limits).decode("utf-8")
    jpegs = data_uris(page, "jpeg")
    assert jpegs and sum(len(uri) for uri in jpegs) <= 120_000
    total = sum(len(entry["shards"]) for entry in manifest["splits"].values())
    assert f"images in 1 of {total} shards" in page


def read_statistics(path):
    records = [raw.numpy() for raw in tf.data.TFRecordDataset(str(path))]
    assert len(records) == 1
    return statistics_pb2.DatasetFeatureStatisticsList.FromString(records[0])


def feature(dataset, name):
    (found,) = [f for f in dataset.features if list(f.path.step) == [name]]
    return found


def custom(feature_stats, name):
    (found,) = [c for c in feature_stats.custom_stats if c.name == name]
    return found


def records_in(out, entry):
    return sum(1 for _ in tf.data.TFRecordDataset([str(out.parent.parent / s["path"]) for s in entry["shards"]]))


def test_segmentation_statistics_proto_counts_equal_the_manifest(segmentation_run, tmp_path):
    out = dataset_dir(segmentation_run[0])
    manifest, stats = load(out)
    written = write_statistics(manifest, str(tmp_path), stats)
    assert sorted(written) == sorted(str(tmp_path / "stats" / f"{s}.tfrecord") for s in ("train", "val", "test"))
    for split, entry in manifest["splits"].items():
        (dataset,) = read_statistics(tmp_path / "stats" / f"{split}.tfrecord").datasets
        assert dataset.name == split
        assert dataset.num_examples == entry["num_examples"] == records_in(out, entry)
        pixels = feature(dataset, "image/segmentation/class/pixel_count")
        assert pixels.type == statistics_pb2.FeatureNameStatistics.INT
        assert pixels.num_stats.common_stats.num_non_missing == entry["num_examples"]
        assert pixels.num_stats.common_stats.min_num_values == NUM_CLASSES
        buckets = custom(pixels, "class_pixels").rank_histogram.buckets
        assert [b.sample_count for b in buckets] == entry["class_pixels"]
        assert [b.sample_count for b in custom(pixels, "class_images").rank_histogram.buckets] == \
            entry["class_images"]
        copies = feature(dataset, "image/repeat/copy")
        assert custom(copies, "original_images").num == entry["num_images"]
    (train,) = read_statistics(tmp_path / "stats" / "train.tfrecord").datasets
    assert custom(feature(train, "image/encoded"), "mean_red").num == pytest.approx(stats["image_mean"][0])


def test_classification_statistics_proto_holds_the_labels_in_the_shards(classification_run, tmp_path):
    out = dataset_dir(classification_run[0])
    manifest, stats = load(out)
    spec = {"image/class/label": tf.io.FixedLenFeature([], tf.int64)}
    for split, entry in manifest["splits"].items():
        content = statistics_files(manifest, stats)[f"stats/{split}.tfrecord"]
        path = tmp_path / f"{split}.tfrecord"
        path.write_bytes(content)
        (dataset,) = read_statistics(path).datasets
        labels = np.zeros(NUM_CLASSES, np.int64)
        for raw in tf.data.TFRecordDataset([str(out.parent.parent / s["path"]) for s in entry["shards"]]):
            labels[int(tf.io.parse_single_example(raw, spec)["image/class/label"])] += 1
        label = feature(dataset, "image/class/label").num_stats
        assert dataset.num_examples == entry["num_examples"] == labels.sum()
        assert [b.sample_count for b in label.histograms[0].buckets] == labels.tolist() == entry["class_images"]
        values = np.repeat(np.arange(NUM_CLASSES), labels)
        assert label.mean == pytest.approx(values.mean())
        assert label.std_dev == pytest.approx(values.std())
        assert (label.min, label.median, label.max) == (values.min(), np.sort(values)[(len(values) - 1) // 2],
                                                        values.max())
        names = [b.label for b in custom(feature(dataset, "image/class/label"), "label_counts").rank_histogram.buckets]
        assert names == manifest["class_names"]


def run_report_cli(*args):
    return subprocess.run([sys.executable, "-m", "beam_pipeline.report", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)


def test_cli_rewrites_the_report_and_statistics(classification_run, tmp_path):
    # On a copy: the session's runs are read only, and other test processes read this one meanwhile.
    shutil.copytree(classification_run[0], tmp_path / "out")
    out = dataset_dir(tmp_path / "out")
    manifest, stats = load(out)
    completed = run_report_cli(out.parent.parent)
    assert completed.returncode == 0, completed.stderr[-3000:]
    page = (out / "report.html").read_bytes()
    assert page == render_report(manifest, str(out.parent.parent))
    version = manifest["data_dir"]                  # the files table names paths relative to the output folder
    assert hashlib.sha256(page).hexdigest() == manifest["files"][f"{version}/report.html"]["sha256"]  # as published
    for relative, content in statistics_files(manifest, stats).items():
        assert (out / relative).read_bytes() == content
        assert hashlib.sha256(content).hexdigest() == manifest["files"][f"{version}/{relative}"]["sha256"]
    assert "FutureWarning" not in completed.stderr
    text = page.decode("utf-8")
    assert set(reject_example_paths(text)) == set(CLS_REJECTED.values())
    assert len(text.encode()) < MAX_REPORT_BYTES
    assert 'data-stratum="' in text


def test_cli_on_a_folder_without_manifest_says_so(tmp_path):
    completed = run_report_cli(tmp_path)
    assert completed.returncode == 2
    assert completed.stderr.strip().splitlines()[-1].startswith("error: ")
    assert "manifest.json" in completed.stderr


class _StreamOnly(io.RawIOBase):
    """A read stream that cannot seek or tell, as object-store downloads may be."""

    def __init__(self, handle):
        self._handle = handle

    def readable(self):
        return True

    def readinto(self, buffer):
        data = self._handle.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)

    def close(self):
        self._handle.close()
        super().close()


class ObjectStoreLikeFileSystem(LocalFileSystem):
    """``reporttest://`` paths over a local folder: a scheme of its own (like gs://) and unseekable reads."""
    root = ""

    @classmethod
    def scheme(cls):
        return "reporttest"

    def _local(self, path):
        assert path.startswith("reporttest://"), path
        return os.path.join(self.root, path[len("reporttest://"):])

    def exists(self, path):
        return super().exists(self._local(path))

    def open(self, path, *args, **kwargs):
        return _StreamOnly(super().open(self._local(path), *args, **kwargs))

    def create(self, path, *args, **kwargs):
        return super().create(self._local(path), *args, **kwargs)


def test_report_and_statistics_go_through_beam_filesystems(classification_run, tmp_path):
    out = dataset_dir(classification_run[0])
    manifest, stats = load(out)
    ObjectStoreLikeFileSystem.root = ""
    url = f"reporttest://{out.parent.parent}"          # the output folder: the manifest's paths are below it
    written = write_report(manifest, url, path=f"reporttest://{tmp_path}/report/report.html")
    assert written == f"reporttest://{tmp_path}/report/report.html"
    page = (tmp_path / "report" / "report.html").read_bytes()
    assert page == render_report(manifest, str(out.parent.parent))
    paths = write_statistics(manifest, f"reporttest://{tmp_path}/tfdv", stats)
    assert paths == [f"reporttest://{tmp_path}/tfdv/stats/{split}.tfrecord" for split in ("test", "train", "val")]
    assert (tmp_path / "tfdv" / "stats" / "train.tfrecord").read_bytes() == \
        statistics_files(manifest, stats)["stats/train.tfrecord"]
