"""--sampling strata: the trainer draws each stratum of the train split with the manifest's weight.

The crop (480 x 640) covers the largest sample-corpus image, so a drawn mask
holds every class of its image and the stratum (the image's rarest class by the
manifest's repeat factors, as the pipeline defines it) can be read back from it.
"""

import json

import numpy as np
import pytest
import tensorflow as tf

DRAWS = 480
IGNORE = 255


@pytest.fixture(scope="module")
def strata_run(segmentation_strata_run):
    return segmentation_strata_run


def test_strata_sampling_follows_the_manifest_weights(strata_run, tmp_path):
    from trainer.data.artifacts import load_artifacts
    from trainer.training.config import TrainConfig
    from trainer.training.train import split_dataset

    manifest = json.loads((strata_run / "manifest.json").read_text())
    factors = manifest["balance"]["class_repeat_factors"]
    weights = {s["class"]: s["weight"] for s in manifest["splits"]["train"]["strata"]}
    config = TrainConfig(data=str(strata_run), job_dir=str(tmp_path), sampling="strata", crop=(480, 640),
                         crop_sampling="uniform", global_batch_size=8, seed=1)
    dataset, _ = split_dataset(load_artifacts(str(strata_run)), config, "train", training=True,
                               context=tf.distribute.InputContext())
    drawn = {c: 0 for c in weights}
    for _, masks in dataset.take(DRAWS // 8):
        for mask in masks.numpy():
            present = [c for c in np.unique(mask) if c != IGNORE]
            drawn[min(present, key=lambda c: (-factors[c], c))] += 1
    assert sum(drawn.values()) == DRAWS
    for stratum, weight in weights.items():
        share = drawn[stratum] / DRAWS
        tolerance = 4 * (weight * (1 - weight) / DRAWS) ** 0.5 + 1e-9
        assert abs(share - weight) <= tolerance, (stratum, share, weight, drawn)
    # The rarest stratum is drawn far more often than its share of the images.
    rare = max(weights, key=lambda c: factors[c])
    images = {s["class"]: s["num_examples"] for s in manifest["splits"]["train"]["strata"]}
    assert drawn[rare] / DRAWS > 2 * images[rare] / sum(images.values())
