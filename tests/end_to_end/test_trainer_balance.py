"""Class balancing at training time (trainer/data/balance.py) on the sample corpus's default output (--balance training):
the shards hold each image once and the trainer repeats each record per epoch by its LVIS repeat factor.

Expected values come from the records' own class pixel counts and the formula r_c = max(1, sqrt(t / f_c)) computed
here, never from the trainer's functions.
"""

import collections

import numpy as np
import pytest
import tensorflow as tf

from trainer.data.artifacts import load_artifacts
from trainer.data.balance import RepeatCounts, class_repeat_factors, repeat_counts
from trainer.training.config import TrainConfig
from trainer.data.input import InputConfig, live_records, make_dataset, shard_for_pipeline
from trainer.training.train import steps_for_one_pass

EPOCHS = 150
SPEC = {"image/source_id": tf.io.FixedLenFeature([], tf.string),
        "image/segmentation/class/pixel_count": tf.io.VarLenFeature(tf.int64)}


@pytest.fixture(scope="module")
def train(segmentation_run):
    artifacts = load_artifacts(str(segmentation_run[0]))
    shard = shard_for_pipeline(artifacts.shard_paths("train"), deleted=artifacts.deleted("train"))
    images = {}
    for record in live_records(shard, 8, deterministic=True):
        parsed = tf.io.parse_single_example(record, SPEC)
        counts = tf.sparse.to_dense(parsed["image/segmentation/class/pixel_count"]).numpy()
        images[parsed["image/source_id"].numpy().decode()] = tuple(np.flatnonzero(counts > 0))
    return artifacts, shard, images


def expected(images, threshold=0.5):
    """(r per image, the expected share of each class's images in an epoch), by the LVIS formula."""
    n = len(images)
    share = collections.Counter(c for classes in images.values() for c in classes)
    factor = {c: max(1.0, np.sqrt(threshold / (k / n))) for c, k in share.items()}
    r = {source: max(factor[c] for c in classes) for source, classes in images.items()}
    total = sum(r.values())
    classes = sorted(share)
    return r, {c: sum(r[s] for s, cl in images.items() if c in cl) / total for c in classes}


def test_epochs_hold_sum_r_records_and_the_classes_in_the_lvis_shares(train):
    artifacts, shard, images = train
    r, shares = expected(images)
    assert artifacts.manifest["balance"]["after"]["records_per_epoch"] == pytest.approx(sum(r.values()))
    counts = RepeatCounts(class_repeat_factors(artifacts.stats, 0.5), "segmentation", artifacts.num_classes, seed=7)
    per_epoch, per_class, seen = [], collections.Counter(), collections.Counter()
    for epoch in range(EPOCHS):
        records = repeat_counts(live_records(shard, 8, deterministic=True), counts, epoch)
        sources = [tf.io.parse_single_example(x, SPEC)["image/source_id"].numpy().decode() for x in records]
        per_epoch.append(len(sources))
        for source in sources:
            seen[source] += 1
            per_class.update(images[source])
    # Σ r records per epoch in expectation (stochastic rounding): within 1 % over the epochs
    assert np.mean(per_epoch) == pytest.approx(sum(r.values()), rel=0.01)
    assert min(per_epoch) < max(per_epoch)                        # drawn anew each epoch
    total = sum(per_epoch)
    for c, share in shares.items():                               # each class's share of the records sampled
        assert per_class[c] / total == pytest.approx(share, abs=0.01), c
    for source, factor in r.items():                              # and each image about r times an epoch
        assert seen[source] / EPOCHS == pytest.approx(factor, abs=0.25), source
    rarest = min(shares, key=lambda c: sum(c in cl for cl in images.values()))
    unbalanced = sum(rarest in cl for cl in images.values()) / len(images)   # its share read once per epoch
    assert per_class[rarest] / total > 1.5 * unbalanced


def test_the_draw_is_the_same_for_the_same_seed_and_epoch(train):
    artifacts, shard, _ = train
    factors = class_repeat_factors(artifacts.stats, 0.5)

    def draw(seed, epoch):
        counts = RepeatCounts(factors, "segmentation", artifacts.num_classes, seed)
        return [int(counts(x, epoch)) for x in live_records(shard, 8, deterministic=True)]
    assert draw(1, 3) == draw(1, 3)
    assert draw(1, 3) != draw(1, 4) and draw(1, 3) != draw(2, 3)


def test_training_batches_come_balanced_and_an_epoch_is_sum_r_records(train):
    artifacts, shard, images = train
    counts = RepeatCounts(class_repeat_factors(artifacts.stats, 0.5), "segmentation", artifacts.num_classes, seed=0)
    batches = make_dataset(artifacts, "train", InputConfig(batch_size=4, crop=(64, 64), shuffle_buffer=64),
                           training=True, shard=shard, counts=counts)
    image, mask = next(iter(batches))
    assert image.shape == (4, 64, 64, 3) and mask.shape == (4, 64, 64)
    r, _ = expected(images)
    config = TrainConfig(data=artifacts.root, job_dir="unused", global_batch_size=8)
    assert steps_for_one_pass(artifacts, 8, config) == int(np.ceil(sum(r.values()) / 8))
