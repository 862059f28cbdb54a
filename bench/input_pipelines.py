"""The three input pipelines the trainer's input benchmarks compare, each giving batches of float32
[B, H, W, 3] images and int32 [B, H, W] masks (built in a child process, input_child.py):

(a) ``generator``  a ``keras.utils.PyDataset`` (Keras 3's ``Sequence``) that reads the raw image and mask
    files with Pillow and numpy, with the default ``workers=1``, iterated the way ``model.fit`` iterates it
    with the TensorFlow backend (Keras's ``PyDatasetAdapter.get_tf_dataset()``:
    ``tf.data.Dataset.from_generator`` over ``__getitem__``, prefetched); ``on_epoch_end`` reshuffles, as
    ``fit`` calls it between epochs.
(b) ``raw_tfdata`` tf.data over the same raw files: shuffled file paths -> ``tf.io.read_file`` ->
    ``decode_image`` / ``decode_png`` -> random crop -> augmentation,
    ``map(num_parallel_calls=AUTOTUNE, deterministic=False)`` -> batch -> prefetch(AUTOTUNE).
(c) ``trainer``    the dataset the trainer trains on, built by ``trainer.train.split_dataset`` for one input
    pipeline from a ``TrainConfig`` (so ``trainer.data.make_dataset`` with the trainer's own defaults): the
    pipeline's shards, interleaved, a bounded shuffle of the records, decoding, class-uniform crops
    normalised as the tf.Transform output does, augmentation, batch and prefetch; nothing cached. It also
    says whether the trainer decoded directly (the values checked against the tf.Transform graph on one
    record) or through the graph.

Every pipeline does the same work per example: decode the image (to RGB) and the mask, take a crop patch
(padded when the image is smaller), flip both left-right with probability 1/2, normalise the image by the
train split's per-channel mean and standard deviation (from stats.json; the trainer's tf.Transform graph uses
the same figures), jitter brightness and contrast as the trainer does. All three normalise after cropping
(the trainer only when it decodes directly; through the tf.Transform graph it normalises the whole image).
The raw baselines read the files as they are: the two palette masks and the 16-bit mask of the sample corpus
give other values than the pipeline's conversion, at the same cost.

A spec (a JSON-ready dict) says what to build: ``kind``, ``batch_size``, ``crop`` [H, W], ``mean``, ``std``
and either ``pairs`` [[image, mask], ...] (a, b) or ``shards`` (the pipeline's output folder; c).
"""

from __future__ import annotations

import logging
from typing import Iterator, Optional

KINDS = ("generator", "raw_tfdata", "trainer")
KIND_TITLES = {
    "generator": "(a) keras PyDataset, raw files (Pillow)",
    "raw_tfdata": "(b) tf.data, raw files",
    "trainer": "(c) trainer: shards + tf.Transform",
}


def _augment_numpy(rng, image, mask, crop, mean, std):
    """The generator's per-example work after decoding: crop, flip, normalise, brightness and contrast."""
    import numpy as np
    crop_h, crop_w = crop
    height, width = mask.shape
    if height < crop_h or width < crop_w:     # pad to the crop: image with 0, mask with the ignore label
        pad_h, pad_w = max(crop_h - height, 0), max(crop_w - width, 0)
        image = np.pad(image, ((0, pad_h), (0, pad_w), (0, 0)))
        mask = np.pad(mask, ((0, pad_h), (0, pad_w)), constant_values=255)
        height, width = mask.shape
    top = int(rng.integers(0, height - crop_h + 1))
    left = int(rng.integers(0, width - crop_w + 1))
    image = image[top:top + crop_h, left:left + crop_w]
    mask = mask[top:top + crop_h, left:left + crop_w]
    if rng.random() < 0.5:
        image, mask = image[:, ::-1], mask[:, ::-1]
    image = (image.astype(np.float32) - mean) / std
    image += np.float32(rng.uniform(-0.2, 0.2))
    channel_mean = image.mean(axis=(0, 1), keepdims=True)
    image = (image - channel_mean) * np.float32(rng.uniform(0.8, 1.2)) + channel_mean
    return image, mask.astype(np.int32)


def generator_batches(spec: dict) -> Iterator:
    """(a): a keras.utils.PyDataset over the raw files, as model.fit iterates it with the TF backend."""
    import keras
    import numpy as np
    from keras.src.trainers.data_adapters.py_dataset_adapter import PyDatasetAdapter
    from PIL import Image

    mean = np.asarray(spec["mean"], np.float32)
    std = np.asarray(spec["std"], np.float32)

    class RawFiles(keras.utils.PyDataset):
        """Batches of (image, mask) crops read from image and mask files; workers etc. left at the defaults."""

        def __init__(self, pairs, batch_size, crop, seed, **kwargs):
            super().__init__(**kwargs)
            self.pairs, self.batch_size, self.crop = pairs, batch_size, crop
            self.rng = np.random.default_rng(seed)
            self.order = self.rng.permutation(len(pairs))

        def __len__(self):
            return len(self.pairs) // self.batch_size

        def __getitem__(self, index):
            images, masks = [], []
            for i in self.order[index * self.batch_size:(index + 1) * self.batch_size]:
                image_path, mask_path = self.pairs[i]
                with Image.open(image_path) as image_file:
                    image = np.asarray(image_file.convert("RGB"))
                with Image.open(mask_path) as mask_file:
                    mask = np.asarray(mask_file)
                image, mask = _augment_numpy(self.rng, image, mask, self.crop, mean, std)
                images.append(image)
                masks.append(mask)
            return np.stack(images), np.stack(masks)

        def on_epoch_end(self):
            self.order = self.rng.permutation(len(self.pairs))

    sequence = RawFiles(spec["pairs"], spec["batch_size"], tuple(spec["crop"]), seed=0)
    adapter = PyDatasetAdapter(sequence, shuffle=True)
    dataset = adapter.get_tf_dataset()
    while True:                  # epochs, as model.fit runs them: a new iterator, then on_epoch_end
        adapter.on_epoch_begin()
        yield from dataset
        adapter.on_epoch_end()


def raw_tfdata_dataset(spec: dict):
    """(b): tf.data over the raw files, decoded and cropped in parallel."""
    import tensorflow as tf
    crop_h, crop_w = spec["crop"]
    mean = tf.constant(spec["mean"], tf.float32)
    std = tf.constant(spec["std"], tf.float32)

    def load(image_path, mask_path):
        image = tf.io.decode_image(tf.io.read_file(image_path), channels=3, expand_animations=False)
        mask = tf.io.decode_png(tf.io.read_file(mask_path), channels=1)[..., 0]
        height = tf.maximum(tf.shape(mask)[0], crop_h)
        width = tf.maximum(tf.shape(mask)[1], crop_w)
        image = tf.image.pad_to_bounding_box(image, 0, 0, height, width)   # no-ops unless smaller than the crop
        mask = tf.image.pad_to_bounding_box(mask[..., tf.newaxis] - 255, 0, 0, height, width)[..., 0] + 255
        top = tf.random.uniform([], 0, height - crop_h + 1, tf.int32)
        left = tf.random.uniform([], 0, width - crop_w + 1, tf.int32)
        image = tf.slice(image, [top, left, 0], [crop_h, crop_w, 3])
        mask = tf.slice(mask, [top, left], [crop_h, crop_w])
        flip = tf.random.uniform([]) < 0.5
        image = tf.cond(flip, lambda: tf.reverse(image, [1]), lambda: image)
        mask = tf.cond(flip, lambda: tf.reverse(mask, [1]), lambda: mask)
        image = (tf.cast(image, tf.float32) - mean) / std
        image = image + tf.random.uniform([], -0.2, 0.2)
        channel_mean = tf.reduce_mean(image, axis=[0, 1], keepdims=True)
        image = (image - channel_mean) * tf.random.uniform([], 0.8, 1.2) + channel_mean
        return image, tf.cast(mask, tf.int32)

    images, masks = zip(*spec["pairs"])
    dataset = tf.data.Dataset.from_tensor_slices((list(images), list(masks)))
    dataset = dataset.shuffle(len(images), reshuffle_each_iteration=True).repeat()
    dataset = dataset.map(load, num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)
    return dataset.batch(spec["batch_size"], drop_remainder=True).prefetch(tf.data.AUTOTUNE)


class _Messages(logging.Handler):
    """Collects the messages logged while the trainer builds its dataset."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def trainer_dataset(spec: dict):
    """(c): the dataset the trainer builds for training, for one input pipeline; and how it decodes."""
    import tensorflow as tf
    from trainer.data.artifacts import load_artifacts
    from trainer.training.config import TrainConfig
    from trainer.training.train import split_dataset
    config = TrainConfig(data=spec["shards"], job_dir="unused", global_batch_size=spec["batch_size"],
                         crop=tuple(spec["crop"]), cache="none")
    # the package's logger: the decoding message comes from trainer/data/decode.py, whose logger is below it
    messages, logger = _Messages(), logging.getLogger("trainer")
    logger.addHandler(messages)
    logger.setLevel(logging.INFO)
    dataset, _ = split_dataset(load_artifacts(spec["shards"]), config, "train", True, tf.distribute.InputContext())
    logger.removeHandler(messages)
    said = [message for message in messages.messages if "decoding" in message]
    if not said:   # a trainer without direct decoding says nothing, and decodes through the graph
        return dataset, "nothing logged (a trainer without direct decoding decodes through the tf.Transform graph)"
    return dataset, said[0]


def batches(spec: dict) -> tuple[Iterator, Optional[str]]:
    """An endless iterator of (images, masks) batches of ``spec["kind"]`` (a name of KINDS), and what the
    trainer said about decoding (None for the raw-file pipelines)."""
    if spec["kind"] == "generator":
        return generator_batches(spec), None
    if spec["kind"] == "raw_tfdata":
        return iter(raw_tfdata_dataset(spec)), None
    dataset, decoding = trainer_dataset(spec)
    return iter(dataset), decoding
