"""The trainer's input pipeline on shards made by the real pipeline."""

import hashlib
import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from conftest import NUM_CLASSES
from trainer.data.artifacts import ArtifactError, load_artifacts
from trainer.data.verification import verify_all
import trainer.data.input
import trainer.data.decode
from trainer.data.input import InputConfig, make_dataset, shard_for_pipeline
from trainer.data.decode import Decoder

IGNORE = 255


@pytest.fixture(scope="module")
def artifacts(segmentation_run):
    out, _ = segmentation_run
    return load_artifacts(str(out))


def test_every_published_file_is_verified_against_the_manifest(artifacts, tmp_path):
    listed = artifacts.manifest["files"]
    assert {shard["path"] for entry in artifacts.manifest["splits"].values() for shard in entry["shards"]} <= set(listed)
    assert verify_all(artifacts) == sum(os.path.getsize(artifacts.path_of(p)) for p in listed)
    copy = tmp_path / "copy"
    shutil.copytree(artifacts.root, copy)
    shard = copy / artifacts.split("val")["shards"][0]["path"]     # relative to the output folder (format 3)
    data = bytearray(shard.read_bytes())
    data[100] ^= 0xFF
    shard.write_bytes(bytes(data))
    with pytest.raises(ArtifactError, match="SHA-256"):
        verify_all(load_artifacts(str(copy)))
    with pytest.raises(ArtifactError, match="no manifest.json"):
        load_artifacts(str(tmp_path))


@pytest.mark.parametrize("augment", [False, True])
def test_training_batches_shapes_dtypes_and_ranges(artifacts, augment):
    config = InputConfig(batch_size=4, crop=(64, 96), shuffle_buffer=16, augment=augment)
    dataset = make_dataset(artifacts, "train", config, training=True)
    assert dataset.element_spec[0].shape.as_list() == [None, 64, 96, 3]
    mean, std = np.array(artifacts.stats["image_mean"]), np.array(artifacts.stats["image_std"])
    low, high = (0 - mean) / std, (255 - mean) / std       # pixel values 0 and 255, normalised
    for images, masks in dataset.take(5):
        assert images.shape == (4, 64, 96, 3) and images.dtype == tf.float32
        assert masks.shape == (4, 64, 96) and masks.dtype == tf.int32
        images, masks = images.numpy(), masks.numpy()
        assert np.isfinite(images).all()
        if not augment:
            assert (images >= low - 1e-4).all() and (images <= high + 1e-4).all()
        assert set(np.unique(masks).tolist()) <= set(range(NUM_CLASSES)) | {IGNORE}


def test_evaluation_reads_every_example_once_in_order(artifacts):
    config = InputConfig(batch_size=5, crop=(360, 480), augment=False)
    batches = list(make_dataset(artifacts, "val", config, training=False))
    assert sum(len(images) for images, _ in batches) == artifacts.split("val")["num_examples"]
    again = list(make_dataset(artifacts, "val", config, training=False))
    assert all(np.array_equal(a[1], b[1]) for a, b in zip(batches, again))


@pytest.mark.parametrize("files,pipelines,expected", [
    (("a", "b", "c", "d", "e"), 2, [(("a", "c", "e"), 1), (("b", "d"), 1)]),   # disjoint files
    (("a", "b"), 2, [(("a",), 1), (("b",), 1)]),
    (("a",), 2, [(("a",), 2), (("a",), 2)]),                                    # too few files: records dealt out
    (("a", "b"), 1, [(("a", "b"), 1)]),
])
def test_each_input_pipeline_gets_its_own_files_or_records(files, pipelines, expected):
    parts = [shard_for_pipeline(files, pipelines, index) for index in range(pipelines)]
    assert [(part.files, part.record_shards) for part in parts] == expected
    assert [part.pipeline_id for part in parts] == list(range(pipelines))


def test_two_pipelines_share_out_the_records_of_a_single_shard(artifacts):
    assert len(artifacts.shard_paths("val")) == 1
    config = InputConfig(batch_size=1, crop=(360, 480), augment=False)

    def digests(shard):
        return [hashlib.sha256(image.numpy().tobytes()).hexdigest()
                for image, _ in make_dataset(artifacts, "val", config, training=False, shard=shard)]

    everything = digests(None)
    assert len(set(everything)) == len(everything) == artifacts.split("val")["num_examples"]
    parts = [digests(shard_for_pipeline(artifacts.shard_paths("val"), 2, index)) for index in range(2)]
    assert not set(parts[0]) & set(parts[1])
    assert sorted(parts[0] + parts[1]) == sorted(everything)
    assert parts[0] == everything[0::2]


def _evaluation_batches(artifacts, crop):
    config = InputConfig(batch_size=4, crop=crop, augment=False)
    return [(images.numpy(), masks.numpy()) for images, masks in make_dataset(artifacts, "val", config, training=False)]


@pytest.mark.parametrize("crop", [(256, 320), (700, 700)])
def test_decoding_directly_gives_the_tf_transform_graphs_values(artifacts, monkeypatch, crop):
    first = next(iter(tf.data.TFRecordDataset(artifacts.shard_paths("val")).take(1)))
    assert Decoder(artifacts, probe=first).direct
    direct = _evaluation_batches(artifacts, crop)
    monkeypatch.setattr(trainer.data.input, "_first_record", lambda files: None)   # no probe: through the graph
    through_graph = _evaluation_batches(artifacts, crop)
    assert len(direct) == len(through_graph)
    for (images, masks), (graph_images, graph_masks) in zip(direct, through_graph):
        np.testing.assert_allclose(images, graph_images, rtol=0, atol=1e-5)
        np.testing.assert_array_equal(masks, graph_masks)


def test_a_graph_that_normalises_otherwise_is_used_as_it_is(artifacts, monkeypatch, caplog):
    def shifted(transformed):
        mean, std = graph_normalisation(transformed)
        return mean + 1.0, std

    graph_normalisation = trainer.data.decode.graph_normalisation
    first = next(iter(tf.data.TFRecordDataset(artifacts.shard_paths("val")).take(1)))
    monkeypatch.setattr(trainer.data.decode, "graph_normalisation", shifted)
    decoder = Decoder(artifacts, probe=first)
    assert not decoder.direct
    assert "decoding through the graph" in caplog.text
    image = decoder(first)["image"]
    assert image.dtype == tf.float32 and decoder.normalise(image) is image


def test_images_smaller_than_the_crop_are_padded_with_ignore(artifacts):
    config = InputConfig(batch_size=2, crop=(700, 700), augment=False)
    _, masks = next(iter(make_dataset(artifacts, "val", config, training=False)))
    assert masks.shape == (2, 700, 700)
    assert (masks.numpy()[:, 690:, :] == IGNORE).all()


def test_class_uniform_crops_find_the_rare_class_more_often(artifacts):
    """The training Parser's crops of every train image that holds the rarest class, many per image, seeded and
    eager so that the counts do not depend on the input pipeline's shuffling and thread order (the whole
    pipeline's share swung by 10x between runs: five images, a few crops). A class-uniform crop is centred on
    the rare class with probability 1/k (k: the classes stored in that image's points) and then holds it; a
    uniform crop holds it about as often as its area allows (0.1-0.3 % of these images)."""
    stats = json.loads(open(f"{artifacts.data_dir}/stats.json").read())
    rarest = int(np.argmin(stats["class_images"]))
    records = list(tf.data.TFRecordDataset(artifacts.shard_paths("train")))
    decoder = Decoder(artifacts, probe=records[0])
    examples = [example for example in map(decoder, records) if rarest in example["point_classes"].numpy()]
    assert len(examples) >= 3
    crops_per_image = 120

    def share(mode):
        tf.random.set_seed(7)
        config = InputConfig(crop=(48, 48), crop_sampling=mode, augment=False)
        parse = trainer.data.input.Parser(config, artifacts.task, artifacts.ignore_label, True, decoder.normalise)
        return np.mean([(parse(example)[1].numpy() == rarest).any()
                        for example in examples for _ in range(crops_per_image)])

    chosen = np.mean([1 / len(set(example["point_classes"].numpy())) for example in examples])
    class_uniform, uniform = share("class_uniform"), share("uniform")
    assert class_uniform >= 0.75 * chosen          # about 0.18 here; 600 crops give a standard error of 0.016
    assert class_uniform > 3 * uniform


def test_trainer_never_imports_apache_beam():
    import subprocess
    import sys
    code = ("import sys, trainer.data.artifacts, trainer.data.input, trainer.data.decode, trainer.export.signature, trainer.evaluate; "
            "assert not [m for m in sys.modules if m.startswith('apache_beam')], 'apache_beam imported'")
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-2000:]
