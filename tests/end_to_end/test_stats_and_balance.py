"""Statistics with tf.Transform and class-balanced shards, checked on real outputs.

Expected statistics are fixed below; they were counted with plain numpy and
Pillow over the sample corpus's train masks (seed 0), and the same count is
repeated here independently of the pipeline's code.
"""

import csv
import hashlib
import json
import math

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_transform as tft
from PIL import Image

from conftest import NUM_CLASSES, dataset_dir, run_cli
from trainer.data.decode import decode_image

RAREST = 7
EXPECTED_TRAIN = {
    "num_images": 192,
    "image_pixels": 38993664,
    "class_pixels": [13769545, 11427466, 9559743, 1858498, 1387368, 634269, 192730, 1989],
    "class_images": [192, 159, 155, 111, 96, 81, 35, 5],
    "ignore_pixels": 162056,
    "channel_sum": [3998575539, 4531232573, 4821071204],
    "channel_sum_squares": [476103036215, 625816391455, 771155703918],
}
POINT_FEATURES = {
    "image/segmentation/class/encoded": tf.io.FixedLenFeature([], tf.string),
    "image/segmentation/class/pixel_count": tf.io.FixedLenFeature([NUM_CLASSES], tf.int64),
    "image/segmentation/class/sample_points/class": tf.io.VarLenFeature(tf.int64),
    "image/segmentation/class/sample_points/yx": tf.io.VarLenFeature(tf.int64),
    "image/source_id": tf.io.FixedLenFeature([], tf.string),
    "image/repeat/copy": tf.io.FixedLenFeature([], tf.int64),
}


def numpy_train_counts(corpus_dir):
    """Class and channel totals of the valid, distinct train pairs, with numpy and Pillow only."""
    root = corpus_dir / "segmentation"
    seen = set()
    totals = {"num_images": 0, "image_pixels": 0, "class_pixels": np.zeros(NUM_CLASSES, np.int64),
              "class_images": np.zeros(NUM_CLASSES, np.int64), "ignore_pixels": 0,
              "channel_sum": np.zeros(3, np.int64), "channel_sum_squares": np.zeros(3, np.int64)}
    for row in csv.DictReader(open(root / "manifest.csv")):
        image_path, mask_path = root / row["image"], root / row["mask"]
        if row["split"] != "train" or row["image"].startswith("..") or not image_path.exists() \
                or not mask_path.exists() or not row["image"].startswith("images/img_") \
                and not row["image"].split("/")[1].split("_")[0] in ("gray", "rgba", "palette", "mask16", "dup"):
            continue
        content = hashlib.sha256(image_path.read_bytes() + mask_path.read_bytes()).hexdigest()
        if content in seen:
            continue
        seen.add(content)
        mask = np.asarray(Image.open(mask_path)).astype(np.int64)
        rgb = np.asarray(Image.open(image_path).convert("RGB")).reshape(-1, 3).astype(np.int64)
        counts = np.bincount(mask.ravel(), minlength=256)
        totals["num_images"] += 1
        totals["image_pixels"] += mask.size
        totals["class_pixels"] += counts[:NUM_CLASSES]
        totals["class_images"] += counts[:NUM_CLASSES] > 0
        totals["ignore_pixels"] += int(counts[255])
        totals["channel_sum"] += rgb.sum(axis=0)
        totals["channel_sum_squares"] += (rgb * rgb).sum(axis=0)
    return {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in totals.items()}


@pytest.fixture(scope="module")
def seg(segmentation_run):
    out, _ = segmentation_run
    return out, json.loads((out / "manifest.json").read_text()), json.loads((dataset_dir(out) / "stats.json").read_text())


def train_records(out, manifest):
    files = [str(out / s["path"]) for s in manifest["splits"]["train"]["shards"]]
    records = []
    for path in files:
        for raw in tf.data.TFRecordDataset(path):
            parsed = tf.io.parse_single_example(raw, POINT_FEATURES)
            records.append({
                "shard": path,
                "source_id": parsed["image/source_id"].numpy().decode(),
                "copy": int(parsed["image/repeat/copy"]),
                "pixel_count": parsed["image/segmentation/class/pixel_count"].numpy(),
                "mask": parsed["image/segmentation/class/encoded"].numpy(),
                "point_classes": tf.sparse.to_dense(parsed["image/segmentation/class/sample_points/class"]).numpy(),
                "point_yx": tf.sparse.to_dense(parsed["image/segmentation/class/sample_points/yx"]).numpy(),
            })
    return records


def test_statistics_are_exact(seg, corpus_dir):
    _, manifest, stats = seg
    independent = numpy_train_counts(corpus_dir)
    assert independent == EXPECTED_TRAIN
    for key in ("num_images", "image_pixels", "class_pixels", "class_images", "ignore_pixels"):
        assert stats[key] == EXPECTED_TRAIN[key], key
    pixels = EXPECTED_TRAIN["image_pixels"]
    means = [s / pixels for s in EXPECTED_TRAIN["channel_sum"]]
    stds = [math.sqrt(q / pixels - m * m) for q, m in zip(EXPECTED_TRAIN["channel_sum_squares"], means)]
    assert stats["image_mean"] == pytest.approx(means, rel=1e-12)
    assert stats["image_std"] == pytest.approx(stds, rel=1e-9)
    assert stats["ignore_share"] == pytest.approx(162056 / 38993664)
    assert manifest["statistics"]["class_weights"] == stats["class_weights"]


def test_class_weights_exclude_ignore_and_follow_the_definitions(seg):
    _, _, stats = seg
    pixels, images = np.array(EXPECTED_TRAIN["class_pixels"]), stats["class_image_pixels"]
    freq = pixels / np.array(images)
    assert stats["class_weights"]["median_freq"] == pytest.approx((np.median(freq) / freq).tolist())
    share = pixels / pixels.sum()
    raw = 1 / np.sqrt(share)
    assert stats["class_weights"]["inv_sqrt"] == pytest.approx((raw / (raw * share).sum()).tolist())
    assert len(stats["class_weights"]["median_freq"]) == NUM_CLASSES      # no entry for the ignore label
    assert np.argmax(stats["class_weights"]["median_freq"]) == RAREST


def test_transform_output_applies_inside_tf_data(seg):
    out, manifest, stats = seg
    assert manifest["transform_dir"] == manifest["data_dir"] + "/transform"
    transform = tft.TFTransformOutput(str(out / manifest["transform_dir"]))
    raw_spec = transform.raw_feature_spec()
    assert "image/encoded" in raw_spec and "image/segmentation/class/encoded" in raw_spec
    layer = transform.transform_features_layer()
    files = [str(out / s["path"]) for s in manifest["splits"]["val"]["shards"]]

    def apply(serialized):
        return layer(tf.io.parse_example(serialized, raw_spec))

    dataset = tf.data.TFRecordDataset(files).batch(1).map(apply)
    raw = tf.data.TFRecordDataset(files).map(lambda r: tf.io.parse_single_example(r, raw_spec))
    mean, std = np.array(stats["image_mean"]), np.array(stats["image_std"])
    checked = 0
    for transformed, original in zip(dataset, raw):
        shape = transformed["image_shape"][0].numpy()
        image = tf.reshape(transformed["image"][0], shape).numpy()
        decoded = decode_image(original["image/encoded"]).numpy().astype(np.float64)     # the trainer's decode
        assert image.dtype == np.float32 and tuple(shape) == decoded.shape
        assert np.allclose(image, (decoded - mean) / std, atol=1e-4)
        mask = tf.cast(transformed["mask"][0], tf.int32).numpy().reshape(shape[:2])
        expected = tf.io.decode_png(original["image/segmentation/class/encoded"]).numpy()[..., 0]
        assert np.array_equal(mask, expected)
        assert transformed["stats/class_pixels"][0].numpy().tolist() == EXPECTED_TRAIN["class_pixels"]
        checked += 1
    assert checked == manifest["splits"]["val"]["num_examples"] > 0


def test_the_trainer_decodes_the_pixels_the_statistics_summed(seg):
    """Every train record, JPEG and PNG alike, decodes with the trainer's decoder to pixels whose sums are the
    record's (and so stats.json's) channel sums; the fast IDCT of tf.io.decode_image does not."""
    out, manifest, _ = seg
    spec = {"image/encoded": tf.io.FixedLenFeature([], tf.string),
            "image/stats/channel_sum": tf.io.FixedLenFeature([3], tf.int64),
            "image/stats/channel_sum_squares": tf.io.FixedLenFeature([3], tf.int64),
            "image/format": tf.io.FixedLenFeature([], tf.string)}
    files = [str(out / s["path"]) for s in manifest["splits"]["train"]["shards"]]
    formats, fast_idct_differs = set(), 0
    for raw in tf.data.TFRecordDataset(files):
        parsed = tf.io.parse_single_example(raw, spec)
        pixels = decode_image(parsed["image/encoded"]).numpy().reshape(-1, 3).astype(np.int64)
        assert pixels.sum(axis=0).tolist() == parsed["image/stats/channel_sum"].numpy().tolist()
        assert (pixels * pixels).sum(axis=0).tolist() == parsed["image/stats/channel_sum_squares"].numpy().tolist()
        formats.add(parsed["image/format"].numpy().decode())
        if parsed["image/format"].numpy() == b"jpeg":
            fast = tf.io.decode_image(parsed["image/encoded"], channels=3).numpy().reshape(-1, 3).astype(np.int64)
            fast_idct_differs += fast.sum(axis=0).tolist() != pixels.sum(axis=0).tolist()
    assert formats == {"jpeg", "png"}
    assert fast_idct_differs > 0


@pytest.fixture(scope="module")
def repeat(segmentation_repeat_run):
    out, _ = segmentation_repeat_run
    return out, json.loads((out / "manifest.json").read_text())


def test_repeat_factor_balance_from_the_shards(repeat):
    out, manifest = repeat
    records = train_records(out, manifest)
    originals = [r for r in records if r["copy"] == 0]
    assert len(originals) == EXPECTED_TRAIN["num_images"]
    share_before = sum(r["pixel_count"][RAREST] > 0 for r in originals) / len(originals)
    share_after = sum(r["pixel_count"][RAREST] > 0 for r in records) / len(records)
    growth = len(records) / len(originals)
    assert share_after >= 3 * share_before, (share_before, share_after)
    assert growth <= 2.0
    assert manifest["balance"]["growth"] == pytest.approx(growth)
    assert manifest["balance"]["before"]["class_images"] == EXPECTED_TRAIN["class_images"]
    # Copies of one image land on different shards.
    shards_of = {}
    for r in records:
        shards_of.setdefault(r["source_id"], []).append(r["shard"])
    num_shards = len(manifest["splits"]["train"]["shards"])
    repeated = [s for s in shards_of.values() if len(s) > 1]
    assert repeated
    for shards in repeated:
        assert len(set(shards)) == min(len(shards), num_shards)


def _crop_share(records, rng, size, class_uniform, draws=8):
    rare = total = 0
    for r in records:
        mask = tf.io.decode_png(r["mask"]).numpy()[..., 0]
        height, width = mask.shape
        classes, yx = r["point_classes"], r["point_yx"].reshape(-1, 2)
        for _ in range(draws):
            if class_uniform:
                chosen = rng.choice(np.unique(classes))
                y, x = yx[rng.choice(np.flatnonzero(classes == chosen))]
                top = int(np.clip(y - size // 2, 0, height - size))
                left = int(np.clip(x - size // 2, 0, width - size))
            else:
                top, left = rng.integers(0, height - size + 1), rng.integers(0, width - size + 1)
            crop = mask[top:top + size, left:left + size]
            rare += int((crop == RAREST).sum())
            total += crop.size
    return rare / total


def test_training_balance_reports_the_lvis_repeat_factors_the_trainer_applies(seg, segmentation_run):
    """The default (--balance training): each train image written once; the manifest and the summary give the
    records an epoch gets, Σ r over the train images with r = max(1, sqrt(t / f_c)) of its rarest class."""
    out, manifest, _ = seg
    records = train_records(out, manifest)
    assert [r["copy"] for r in records] == [0] * EXPECTED_TRAIN["num_images"] == [0] * len(records)
    present = [np.flatnonzero(r["pixel_count"] > 0) for r in records]
    share = np.bincount(np.concatenate(present), minlength=NUM_CLASSES) / len(records)
    factor = np.maximum(1.0, np.sqrt(0.5 / np.where(share > 0, share, np.inf)))
    per_image = np.asarray([factor[classes].max() for classes in present])
    balance = manifest["balance"]
    assert balance["method"] == "training" and balance["after"]["records_per_epoch"] == pytest.approx(per_image.sum())
    weighted = [sum(r for r, classes in zip(per_image, present) if c in classes) for c in range(NUM_CLASSES)]
    assert balance["after"]["class_image_share"] == pytest.approx(list(np.asarray(weighted) / per_image.sum()))
    line = next(l for l in segmentation_run[1].stdout.splitlines() if l.startswith("balance: training"))
    assert f"about {per_image.sum():,.0f} records per epoch from {len(records):,} train images" in line


def test_class_uniform_crops_raise_the_rarest_pixel_share(seg):
    out, manifest, _ = seg
    records = [r for r in train_records(out, manifest) if r["copy"] == 0]
    for r in records:
        present = {c for c in range(NUM_CLASSES) if r["pixel_count"][c] > 0}
        assert set(r["point_classes"].tolist()) == present
    mask = tf.io.decode_png(records[0]["mask"]).numpy()[..., 0]
    for c, (y, x) in zip(records[0]["point_classes"], records[0]["point_yx"].reshape(-1, 2)):
        assert mask[y, x] == c
    uniform = _crop_share(records, np.random.default_rng(1), 64, class_uniform=False)
    centred = _crop_share(records, np.random.default_rng(1), 64, class_uniform=True)
    assert centred >= 3 * uniform, (uniform, centred)


def test_growth_above_max_growth_is_refused(corpus_dir, tmp_path):
    completed = run_cli("--input", corpus_dir / "segmentation" / "manifest.csv", "--output", tmp_path,
                        "--num_classes", NUM_CLASSES, "--max_growth", "1.05", "--balance", "repeat_factor", check=False)
    assert completed.returncode == 2
    last = completed.stderr.strip().splitlines()[-1]
    assert last.startswith("error: repeat-factor balancing would grow the train split 1.2")
    assert "--max_growth 1.05" in last
    assert not list(tmp_path.rglob("*.tfrecord")) and not (tmp_path / "manifest.json").exists()


def test_strata_group_train_shards_with_weights(segmentation_strata_run):
    out = segmentation_strata_run
    manifest = json.loads((out / "manifest.json").read_text())
    train = manifest["splits"]["train"]
    assert train["num_examples"] == train["num_images"] == EXPECTED_TRAIN["num_images"]
    strata = train["strata"]
    assert sum(s["weight"] for s in strata) == pytest.approx(1.0)
    factors = manifest["balance"]["class_repeat_factors"]
    for stratum in strata:
        for path in stratum["shards"]:
            for raw in tf.data.TFRecordDataset(str(out / path)):
                counts = tf.io.parse_single_example(raw, POINT_FEATURES)["image/segmentation/class/pixel_count"]
                present = [c for c in range(NUM_CLASSES) if counts[c] > 0]
                assert min(present, key=lambda c: (-factors[c], c)) == stratum["class"]
    rare = [s for s in strata if s["class"] == RAREST][0]
    assert rare["weight"] > rare["num_examples"] / train["num_examples"]


def test_each_large_shard_mixes_classes_like_its_split(tmp_path):
    from tools.sample_corpus.corpus import write_corpus
    write_corpus(str(tmp_path / "corpus"), seed=3, num_pairs=240, num_class_images=8, scale=5)
    out = tmp_path / "out"
    run_cli("--input", tmp_path / "corpus" / "segmentation" / "manifest.csv", "--output", out,
            "--num_classes", NUM_CLASSES, "--target_shard_bytes", 70_000_000, "--balance", "repeat_factor")
    manifest = json.loads((out / "manifest.json").read_text())
    presence = {}
    for shard in manifest["splits"]["train"]["shards"]:
        counts = np.zeros(NUM_CLASSES)
        for raw in tf.data.TFRecordDataset(str(out / shard["path"])):
            pixels = tf.io.parse_single_example(raw, POINT_FEATURES)["image/segmentation/class/pixel_count"]
            counts += pixels.numpy() > 0
        assert counts.tolist() == shard["class_images"]
        presence[shard["path"]] = (counts, shard["records"])
    large = {path: counts for path, (counts, records) in presence.items() if records >= 500}
    assert len(large) >= 2, {path: records for path, (_, records) in presence.items()}
    split = sum(counts for counts, _ in presence.values())
    split_distribution = split / split.sum()
    for path, counts in large.items():
        distance = 0.5 * np.abs(counts / counts.sum() - split_distribution).sum()
        assert distance <= 0.1, (path, distance)


def test_classification_label_statistics(corpus_dir, tmp_path):
    run_cli("--input", corpus_dir / "classification" / "images", "--output", tmp_path, "--task", "classification",
            "--num_classes", NUM_CLASSES, "--balance", "none")
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    stats = json.loads((dataset_dir(tmp_path) / "stats.json").read_text())
    labels = np.zeros(NUM_CLASSES, np.int64)
    spec = {"image/class/label": tf.io.FixedLenFeature([], tf.int64)}
    for shard in manifest["splits"]["train"]["shards"]:
        for raw in tf.data.TFRecordDataset(str(tmp_path / shard["path"])):
            labels[int(tf.io.parse_single_example(raw, spec)["image/class/label"])] += 1
    assert stats["label_counts"] == labels.tolist()
    assert stats["num_images"] == labels.sum() == manifest["splits"]["train"]["num_images"]
    assert stats["class_names"] == sorted(stats["class_names"])
    share = labels / labels.sum()
    raw = 1 / np.sqrt(share)
    assert stats["class_weights"]["inv_sqrt"] == pytest.approx((raw / (raw * share).sum()).tolist())
