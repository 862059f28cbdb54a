"""Unit tests: Example/TFRecord encoding (read back by TensorFlow), shard packing, manifest counts."""

import pytest
import tensorflow as tf

from beam_pipeline.core import example, features
from beam_pipeline.core.manifest import CountsDoNotReconcile, build_manifest, count_outcomes
from beam_pipeline.core.records import PairRef, ValidPair
from beam_pipeline.core.repeat_weights import weight_units
from beam_pipeline.core.sharding import num_shards_for, pack_buckets, shard_file_name


def test_encoded_example_parses_with_tensorflow():
    data = example.encode_example({
        "b": example.bytes_feature([b"\x00\xffraw", "text"]),
        "i": example.int64_feature([0, 1, -5, 2**40]),
        "f": example.float_feature([0.5, -2.0]),
        "empty": example.int64_feature([]),
    })
    parsed = tf.train.Example.FromString(data)
    fmap = parsed.features.feature
    assert list(fmap["b"].bytes_list.value) == [b"\x00\xffraw", b"text"]
    assert list(fmap["i"].int64_list.value) == [0, 1, -5, 2**40]
    assert list(fmap["f"].float_list.value) == [0.5, -2.0]
    assert list(fmap["empty"].int64_list.value) == []
    # Keys are written sorted, so the bytes do not depend on dict order.
    assert data == example.encode_example({
        "f": example.float_feature([0.5, -2.0]), "empty": example.int64_feature([]),
        "i": example.int64_feature([0, 1, -5, 2**40]), "b": example.bytes_feature([b"\x00\xffraw", "text"])})


@pytest.mark.parametrize("values", [list(range(300)), [0, 127, 128, 16383, 16384, 2**35, 2**62, 5] * 3,
                                    [1, 2, 3, -1, 4, 5, 6, 7, 8]])
def test_long_int64_lists_parse_with_tensorflow(values):
    data = example.encode_example({"v": example.int64_feature(values)})
    assert list(tf.train.Example.FromString(data).features.feature["v"].int64_list.value) == values


def test_framed_records_read_by_tf_data(tmp_path):
    records = [b"first", b"", b"x" * 100_000]
    path = tmp_path / "r.tfrecord"
    path.write_bytes(b"".join(example.frame_record(r) for r in records))
    read = [t.numpy() for t in tf.data.TFRecordDataset(str(path))]
    assert read == records


def test_pair_example_features():
    pair = ValidPair(ref=PairRef(key="k", source_id="images/a.jpg", image="/x/images/a.jpg", mask="/x/m.png"),
                     height=3, width=4, image_format="jpeg", image_sha256="ab", image_stored_bytes=3,
                     image_converted=False, mask_sha256="cd", mask_stored_bytes=2, class_pixels=(7, 0, 5),
                     ignore_pixels=0)
    parsed = tf.io.parse_single_example(example.pair_example(pair, b"img", b"mk"), {
        features.IMAGE_ENCODED: tf.io.FixedLenFeature([], tf.string),
        features.MASK_ENCODED: tf.io.FixedLenFeature([], tf.string),
        features.IMAGE_HEIGHT: tf.io.FixedLenFeature([], tf.int64),
        features.IMAGE_WIDTH: tf.io.FixedLenFeature([], tf.int64),
        features.CLASS_PIXELS: tf.io.FixedLenFeature([3], tf.int64),
        features.IMAGE_SOURCE_ID: tf.io.FixedLenFeature([], tf.string),
    })
    assert parsed[features.IMAGE_ENCODED].numpy() == b"img"
    assert parsed[features.MASK_ENCODED].numpy() == b"mk"
    assert (parsed[features.IMAGE_HEIGHT].numpy(), parsed[features.IMAGE_WIDTH].numpy()) == (3, 4)
    assert parsed[features.CLASS_PIXELS].numpy().tolist() == [7, 0, 5]
    assert parsed[features.IMAGE_SOURCE_ID].numpy() == b"images/a.jpg"


@pytest.mark.parametrize("total,target,expected", [
    (0, 100, 1), (50, 100, 1), (100, 100, 1), (140, 100, 1), (160, 100, 2), (1000, 100, 10), (1040, 100, 10),
    (1049, 100, 11)])  # 1049: 11 shards of 95.4 (-4.6 %) beat 10 of 104.9 (+4.9 %)
def test_num_shards_for(total, target, expected):
    assert num_shards_for(total, target) == expected


def test_pack_buckets_hand_worked():
    # LPT: 9 -> s0, 7 -> s1, 6 -> s2, 5 -> s2 (6), 4 -> s1 (7), 2 -> s0 (9): loads 11, 11, 11.
    buckets = [(0, 5), (1, 9), (2, 2), (3, 7), (4, 6), (5, 4)]
    assignment = pack_buckets(buckets, 3)
    assert assignment == {1: 0, 3: 1, 4: 2, 0: 2, 5: 1, 2: 0}
    loads = [sum(size for bucket, size in buckets if assignment[bucket] == s) for s in range(3)]
    assert loads == [11, 11, 11]


def test_shard_file_name():
    assert shard_file_name("train", 3, 12) == "train-00003-of-00012.tfrecord"


def _manifest(discovered):
    shards = [{"group": "train", "split": "train", "index": 0, "originals": 5, "stratum": -1, "repeat_weight": 5 * weight_units(1.0), "num_shards": 1, "path": "train-00000-of-00001.tfrecord",
               "records": 5, "bytes": 10, "sha256": "x", "class_images": (5, 2), "class_pixels": (40, 3),
               "ignore_pixels": 1}]
    counts = count_outcomes([(("rejected", "truncated"), 2), (("filtered", "sample_fraction"), 3),
                             (("duplicate", "duplicate"), 1)])
    return build_manifest(task="segmentation", num_classes=2, ignore_label=255, class_names=(), shards=shards,
                          outcome_counts=counts, discovered=discovered, options={}, versions={},
                          rejects_files=[])


def test_manifest_counts_reconcile():
    counts = _manifest(11)["counts"]
    assert counts == {"discovered": 11, "filtered_out": {"total": 3, "by_reason": {"sample_fraction": 3}},
                      "rejected": {"total": 2, "by_reason": {"truncated": 2}}, "duplicates": 1, "written": 5,
                      "records_written": 5}
    with pytest.raises(CountsDoNotReconcile):
        _manifest(12)
