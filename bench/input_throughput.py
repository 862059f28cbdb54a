"""The trainer's input pipeline against two raw-file baselines, on the same data in the same run (issue 4).

What is measured
    Training batches per second, counted in examples, of three input
    pipelines over the train split of one segmentation corpus:

    (a) ``generator``  a ``keras.utils.PyDataset`` (Keras 3's ``Sequence``)
        that reads the raw image and mask files with Pillow and numpy, with the
        default ``workers=1``, iterated the way ``model.fit`` iterates it with
        the TensorFlow backend (Keras's ``PyDatasetAdapter.get_tf_dataset()``:
        ``tf.data.Dataset.from_generator`` over ``__getitem__``, prefetched);
        ``on_epoch_end`` reshuffles, as ``fit`` calls it between epochs.
    (b) ``raw_tfdata`` tf.data over the same raw files: shuffled file paths ->
        ``tf.io.read_file`` -> ``decode_image`` / ``decode_png`` -> random crop
        -> augmentation, ``map(num_parallel_calls=AUTOTUNE, deterministic=False)``
        -> batch -> prefetch(AUTOTUNE).
    (c) ``trainer``    the dataset the trainer trains on, built by
        ``trainer.training.train.split_dataset`` for one input pipeline from a
        ``TrainConfig`` (so ``trainer.data.input.make_dataset`` with the trainer's own
        defaults): the pipeline's shards, interleaved, a bounded shuffle of
        the records, decoding, class-uniform crops normalised as the
        tf.Transform output does, augmentation, batch and prefetch; nothing
        cached. The report says whether the trainer decoded directly (the
        values checked against the tf.Transform graph on one record) or
        through the graph.

    Every pipeline does the same work per example: decode the image (to RGB)
    and the mask, take a ``--crop`` patch (padded when the image is smaller),
    flip both left-right with probability 1/2, normalise the image by the
    train split's per-channel mean and standard deviation (from stats.json;
    the trainer's tf.Transform graph uses the same figures), jitter brightness
    and contrast as the trainer does, and give float32 [B, H, W, 3] images and
    int32 [B, H, W] masks in batches of ``--batch_size``. All three normalise
    after cropping (the trainer only when it decodes directly; through the
    tf.Transform graph it normalises the whole image). The baselines read the
    distinct valid train pairs of the
    corpus (manifest rows of split ``train`` that the pipeline did not reject),
    the trainer the train shards (the same images, plus the repeat copies of
    class balancing). The raw baselines read the files as they are: the two
    palette masks and the 16-bit mask of the sample corpus give other values
    than the pipeline's conversion, at the same cost.

    Each pipeline runs in its own child process (a fresh interpreter: no
    thread pools or caches shared between them). After ``--warmup_batches``
    batches (thread pools started, tf.data autotuning and shuffle buffers
    filled), ``--batches`` batches are timed. The children run one after the
    other, in the order (a) (b) (c), reversed on every other repeat
    (``--repeats``); the medians are reported. Before the first run every
    corpus file and shard is read once, so no side pays for a cold disk.

Why ratios
    The machine is shared and noisy, so absolute examples/s vary from run to
    run; ratios of figures taken side by side in one run cancel most of that.
    Each run also reports its CPU time per example (a cost that depends less
    on the neighbours' load than the rate does; the report gives its ratios
    too) and the cores that other processes used meanwhile (from
    /proc/stat). On a quiet machine the rate ratio is about the CPU-cost ratio
    times the ratio of cores used: the generator uses one core, tf.data all. Under load, a pipeline with
    more runnable threads gets a larger share of the CPU than the generator's
    single thread, which favours (b) and (c) over (a); the report warns above
    ``NOISY_CORES``.

Memory
    The trainer's pipeline iterates one full epoch (train records //
    batch size steps, training mode, no cache) over the 1x data and over
    ``--rss_scale`` times more (a corpus that many times larger, with that many
    more shards), each in its own child process reaped with ``os.wait4``: its
    ``ru_maxrss`` is that child's peak RSS (Tensorflow's threads included; the
    children start no processes). The report gives both peaks, their ratio
    (flat memory means the pipeline streams) and the RSS each child had
    before iterating (interpreter, TensorFlow and the dataset's construction).

Targets (issue 4)
    trainer examples/s >= 3x the generator's and >= 1.5x raw-file tf.data's;
    peak RSS at ``--rss_scale``x / 1x <= 1.2.

Data
    Corpora come from ``tools.sample_corpus`` (``--pairs`` valid pairs
    per scale unit, 480x360 to 640x480, about 60 % JPEG and 40 % PNG images)
    and are turned into shards by the real pipeline (``python -m beam_pipeline
    --input .../manifest.csv --output ... --task segmentation --num_classes 8
    --target_shard_bytes ...``, its defaults otherwise: tf.Transform statistics
    and repeat-factor balancing). Both are cached under ``--workdir``: corpora
    in ``corpus_<pairs>pairs_x<scale>_g<generator>`` (the same folders as
    ``bench/pipeline_throughput.py``; ``<generator>`` is the first 8 hex
    digits of a SHA-256 over the sources of ``tools/sample_corpus/``), shards in
    ``shards_<pairs>pairs_x<scale>_g<generator>_p<pipeline>_t<target bytes>``
    (``<pipeline>`` hashes the sources of ``beam_pipeline/``). Cached folders
    of other versions are deleted. Building them is not timed.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import hashlib
import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Optional, Sequence

# The corpus cache, logging and noise measurement are shared with the other benchmarks (build/bench).
from common import (MB, NOISY_CORES, NUM_CLASSES, ROOT, corpus_dir, generate_corpus, generator_version, log,
                    machine_busy_seconds, other_cores, positive, remove_stale_corpora, warm_page_cache)

PIPELINE_SOURCES = ROOT / "beam_pipeline"                        # their hash keys the cached shards
RESULT_PREFIX = "RESULT "

TARGET_VS_GENERATOR = 3.0    # trainer examples/s / generator examples/s
TARGET_VS_RAW_TFDATA = 1.5   # trainer examples/s / raw-file tf.data examples/s
TARGET_RSS_RATIO = 1.2       # trainer peak RSS, one epoch at --rss_scale x / at 1x

KINDS = ("generator", "raw_tfdata", "trainer")
KIND_TITLES = {
    "generator": "(a) keras PyDataset, raw files (Pillow)",
    "raw_tfdata": "(b) tf.data, raw files",
    "trainer": "(c) trainer: shards + tf.Transform",
}


# --------------------------------------------------------------------------
# Cached corpora and shards
# --------------------------------------------------------------------------
def pipeline_version() -> str:
    """First 8 hex digits of a SHA-256 over the pipeline's sources (path and content, in path order)."""
    digest = hashlib.sha256()
    for path in sorted(PIPELINE_SOURCES.rglob("*.py")):
        digest.update(str(path.relative_to(PIPELINE_SOURCES)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:8]


@dataclasses.dataclass(frozen=True)
class Dataset:
    """One scale of the benchmark's data: the raw corpus and the pipeline's output for it."""
    scale: int
    manifest: Path   # the corpus's segmentation/manifest.csv
    shards: Path     # the pipeline's --output folder


def shards_dir(workdir: Path, pairs: int, scale: int, generator: str, pipeline: str, shard_bytes: int) -> Path:
    return workdir / f"shards_{pairs}pairs_x{scale}_g{generator}_p{pipeline}_t{shard_bytes}"


def remove_stale(workdir: Path, generator: str, pipeline: str) -> None:
    """Delete cached corpora and shards of other generator or pipeline versions."""
    remove_stale_corpora(workdir, generator)
    for path in sorted(workdir.glob("shards_*pairs_x*")):
        if path.is_dir() and f"_g{generator}_p{pipeline}_" not in path.name:
            log(f"deleting stale shards {path}")
            shutil.rmtree(path)


def _run_into(final: Path, command_for: Callable[[Path], list[str]], what: str, log_path: Path) -> None:
    """Run ``command_for(tmp)`` writing into ``final``.tmp, renamed into place only when it succeeded."""
    tmp = final.with_name(final.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    command = command_for(tmp)
    log(f"{what} -> {final}")
    with log_path.open("w") as log_file:
        completed = subprocess.run(command, cwd=ROOT, stdout=log_file, stderr=subprocess.STDOUT, check=False)
    if completed.returncode != 0:
        raise RuntimeError(f"{what} failed (exit {completed.returncode}); see {log_path}\n  {' '.join(command)}")
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)


def ensure_dataset(workdir: Path, pairs: int, scale: int, shard_bytes: int, generator: str,
                   pipeline: str) -> Dataset:
    """Generate the corpus and run the pipeline on it, unless cached."""
    corpus = corpus_dir(workdir, pairs, scale, generator)
    manifest = corpus / "segmentation" / "manifest.csv"
    if not manifest.exists():
        generate_corpus(workdir, pairs, scale, generator)
    shards = shards_dir(workdir, pairs, scale, generator, pipeline, shard_bytes)
    if not (shards / "manifest.json").exists():   # the pipeline writes manifest.json last
        _run_into(shards, lambda out: [sys.executable, "-m", "beam_pipeline", "--input", str(manifest),
                                       "--output", str(out), "--task", "segmentation",
                                       "--num_classes", str(NUM_CLASSES), "--target_shard_bytes", str(shard_bytes)],
                  f"running the pipeline on the x{scale} corpus", workdir / "logs" / f"pipeline_x{scale}.log")
    return Dataset(scale, manifest, shards)


def raw_train_pairs(dataset: Dataset) -> list[tuple[str, str]]:
    """(image, mask) paths of the distinct train rows of the manifest that the pipeline did not reject."""
    rejected = set()
    for path in sorted((published_dir(dataset) / "rejects").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            if record["status"] == "rejected":
                rejected.add(record["key"])
    root = dataset.manifest.parent
    pairs: dict[str, tuple[str, str]] = {}
    with dataset.manifest.open(newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            key = f"{row['image']}|{row['mask']}"
            if row["split"] == "train" and key not in rejected:
                pairs[key] = (os.path.normpath(root / row["image"]), os.path.normpath(root / row["mask"]))
    return list(pairs.values())


# --------------------------------------------------------------------------
# Child processes: one pipeline each (TensorFlow is imported only here)
# --------------------------------------------------------------------------
def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _time_batches(iterator, warmup: int, batches: int, batch_size: int) -> dict:
    """Pull ``warmup`` batches, then time ``batches`` more; checks every batch's shapes and dtypes."""
    import numpy as np

    def pull():
        images, masks = next(iterator)
        images, masks = np.asarray(images), np.asarray(masks)
        if images.shape[0] != batch_size or images.dtype != np.float32 or masks.dtype != np.int32:
            raise AssertionError(f"unexpected batch: images {images.shape} {images.dtype}, "
                                 f"masks {masks.shape} {masks.dtype}")
        return images.shape, masks.shape

    started = time.perf_counter()
    for _ in range(warmup):
        pull()
    warmup_seconds = time.perf_counter() - started
    rss_before = _rss_mb()
    busy_before, cpu_before, started = machine_busy_seconds(), time.process_time(), time.perf_counter()
    for _ in range(batches):
        shapes = pull()
    seconds = time.perf_counter() - started
    cpu = time.process_time() - cpu_before
    other = other_cores(busy_before, cpu, seconds)
    examples = batches * batch_size
    return {"examples": examples, "seconds": seconds, "cpu_seconds": cpu, "other_cores": other,
            "warmup_seconds": warmup_seconds, "rss_after_warmup_mb": rss_before,
            "image_shape": list(shapes[0]), "mask_shape": list(shapes[1])}


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


def _generator_iterator(spec: dict):
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


def _raw_tfdata_dataset(spec: dict):
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


def _trainer_dataset(spec: dict):
    """(c): the dataset the trainer builds for training, for one input pipeline; and how it decodes."""
    import tensorflow as tf
    from trainer.data.artifacts import load_artifacts
    from trainer.training.config import TrainConfig
    from trainer.training.train import split_dataset
    config = TrainConfig(data=spec["shards"], job_dir="unused", global_batch_size=spec["batch_size"],
                         crop=tuple(spec["crop"]), cache="none")
    messages, logger = _Messages(), logging.getLogger("trainer.data.input")
    logger.addHandler(messages)
    logger.setLevel(logging.INFO)
    dataset, _ = split_dataset(load_artifacts(spec["shards"]), config, "train", True, tf.distribute.InputContext())
    logger.removeHandler(messages)
    said = [message for message in messages.messages if "decoding" in message]
    if not said:   # a trainer without direct decoding says nothing, and decodes through the graph
        return dataset, "nothing logged (a trainer without direct decoding decodes through the tf.Transform graph)"
    return dataset, said[0]


def run_child(spec: dict) -> dict:
    """Build one pipeline and time it (``spec["kind"]``), or iterate one epoch (``"epoch"``)."""
    rss_start = _rss_mb()
    import tensorflow as tf
    tf.random.set_seed(0)
    kind = spec["kind"]
    decoding = None
    if kind == "generator":
        iterator = _generator_iterator(spec)
    elif kind == "raw_tfdata":
        iterator = iter(_raw_tfdata_dataset(spec))
    else:  # "trainer" or "epoch"
        dataset, decoding = _trainer_dataset(spec)
        iterator = iter(dataset)
    rss_built = _rss_mb()
    result = _time_batches(iterator, spec["warmup_batches"], spec["batches"], spec["batch_size"])
    return result | {"kind": kind, "rss_interpreter_mb": rss_start, "rss_built_mb": rss_built,
                     "decoding": decoding}


# --------------------------------------------------------------------------
# Parent: run the children
# --------------------------------------------------------------------------
@dataclasses.dataclass
class Run:
    kind: str
    scale: int
    repeat: int
    examples: int
    seconds: float
    cpu_seconds: float
    other_cores: float
    peak_rss_mb: float      # ru_maxrss of the child (os.wait4)
    rss_built_mb: float     # the child's RSS once the dataset was built, before iterating
    warmup_seconds: float
    image_shape: list
    mask_shape: list
    decoding: Optional[str]  # what the trainer logged about decoding: directly, or through the graph and why

    @property
    def examples_per_s(self) -> float:
        return self.examples / self.seconds

    @property
    def cpu_ms_per_example(self) -> float:
        return 1e3 * self.cpu_seconds / self.examples

    @property
    def cores(self) -> float:
        return self.cpu_seconds / self.seconds


def spawn(spec: dict, log_path: Path, scale: int, repeat: int) -> Run:
    """Run one child process and reap it with os.wait4 (its own peak RSS)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    command = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)]
    with log_path.open("w") as log_file:
        proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=log_file, env=env, text=True)
        output = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, so that Popen does not wait again
    lines = [line for line in output.splitlines() if line.startswith(RESULT_PREFIX)]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"{spec['kind']} child exited {proc.returncode}; see {log_path}")
    result = json.loads(lines[-1][len(RESULT_PREFIX):])
    return Run(kind=spec["kind"], scale=scale, repeat=repeat, examples=result["examples"],
               seconds=result["seconds"], cpu_seconds=result["cpu_seconds"], other_cores=result["other_cores"],
               peak_rss_mb=usage.ru_maxrss * 1024 / MB, rss_built_mb=result["rss_built_mb"],
               warmup_seconds=result["warmup_seconds"], image_shape=result["image_shape"],
               mask_shape=result["mask_shape"], decoding=result["decoding"])


def published_dir(dataset: Dataset) -> Path:
    """The version folder the output's manifest.json names (runs/<run_id>/): shards, stats.json, rejects/."""
    manifest = json.loads((dataset.shards / "manifest.json").read_text())
    return dataset.shards / manifest["data_dir"]


def train_records(dataset: Dataset) -> int:
    manifest = json.loads((dataset.shards / "manifest.json").read_text())
    return manifest["splits"]["train"]["num_examples"]


def stats_mean_std(dataset: Dataset) -> tuple[list[float], list[float]]:
    stats = json.loads((published_dir(dataset) / "stats.json").read_text())
    return stats["image_mean"], stats["image_std"]


def run_all(args: argparse.Namespace, base: Dataset, large: Optional[Dataset]) -> tuple[list[Run], list[Run]]:
    """The timed runs (interleaved, medians later) and the two full-epoch memory runs."""
    mean, std = stats_mean_std(base)
    common = {"batch_size": args.batch_size, "crop": list(args.crop), "mean": mean, "std": std,
              "warmup_batches": args.warmup_batches, "batches": args.batches}
    pairs = [list(pair) for pair in raw_train_pairs(base)]
    specs = {"generator": common | {"kind": "generator", "pairs": pairs},
             "raw_tfdata": common | {"kind": "raw_tfdata", "pairs": pairs},
             "trainer": common | {"kind": "trainer", "shards": str(base.shards)}}
    logs = args.workdir / "logs"
    timed: list[Run] = []
    for repeat in range(args.repeats):
        for kind in (KINDS if repeat % 2 == 0 else KINDS[::-1]):
            run = spawn(specs[kind], logs / f"input_{kind}_r{repeat}.log", base.scale, repeat)
            timed.append(run)
            log(f"{kind:<10} {run.examples} examples  {run.examples_per_s:7.1f} examples/s  "
                f"{run.cpu_ms_per_example:5.2f} CPU ms/example  cores {run.cores:.2f}  "
                f"other load {run.other_cores:.2f}  peak RSS {run.peak_rss_mb:.0f} MB")
    epochs: list[Run] = []
    for dataset in [base] + ([large] if large else []):
        steps = train_records(dataset) // args.batch_size
        spec = common | {"kind": "epoch", "shards": str(dataset.shards), "warmup_batches": 0, "batches": steps}
        run = spawn(spec, logs / f"input_epoch_x{dataset.scale}.log", dataset.scale, 0)
        epochs.append(run)
        log(f"epoch x{dataset.scale:<3} {run.examples} examples ({steps} steps)  {run.examples_per_s:7.1f} "
            f"examples/s  peak RSS {run.peak_rss_mb:.0f} MB")
    return timed, epochs


# --------------------------------------------------------------------------
# Figures and report
# --------------------------------------------------------------------------
def median_by_kind(runs: Sequence[Run]) -> dict[str, dict]:
    """Medians of each pipeline's runs."""
    table = {}
    for kind in KINDS:
        mine = [run for run in runs if run.kind == kind]
        table[kind] = {
            "runs": len(mine),
            "examples_per_s": statistics.median(run.examples_per_s for run in mine),
            "cpu_ms_per_example": statistics.median(run.cpu_ms_per_example for run in mine),
            "cores": statistics.median(run.cores for run in mine),
            "other_cores": statistics.median(run.other_cores for run in mine),
            "peak_rss_mb": statistics.median(run.peak_rss_mb for run in mine),
            "image_shape": mine[-1].image_shape, "mask_shape": mine[-1].mask_shape,
            "decoding": sorted({str(run.decoding) for run in mine}),
        }
    return table


def _verdict(value: Optional[float], op: str, limit: float) -> str:
    if value is None:
        return "n/a"
    return "PASS" if (value >= limit if op == ">=" else value <= limit) else "MISS"


def summarise(timed: Sequence[Run], epochs: Sequence[Run]) -> dict:
    table = median_by_kind(timed)
    trainer = table["trainer"]["examples_per_s"]
    ratios = {"trainer_vs_generator": trainer / table["generator"]["examples_per_s"],
              "trainer_vs_raw_tfdata": trainer / table["raw_tfdata"]["examples_per_s"],
              "raw_tfdata_vs_generator": table["raw_tfdata"]["examples_per_s"] / table["generator"]["examples_per_s"],
              "cpu_generator_vs_trainer": table["generator"]["cpu_ms_per_example"]
              / table["trainer"]["cpu_ms_per_example"],
              "cpu_raw_tfdata_vs_trainer": table["raw_tfdata"]["cpu_ms_per_example"]
              / table["trainer"]["cpu_ms_per_example"]}
    rss_ratio = epochs[-1].peak_rss_mb / epochs[0].peak_rss_mb if len(epochs) == 2 else None
    targets = [
        {"name": "trainer / generator examples/s", "value": ratios["trainer_vs_generator"], "op": ">=",
         "target": TARGET_VS_GENERATOR},
        {"name": "trainer / raw-file tf.data examples/s", "value": ratios["trainer_vs_raw_tfdata"], "op": ">=",
         "target": TARGET_VS_RAW_TFDATA},
        {"name": (f"trainer peak RSS {epochs[-1].scale}x / 1x (one epoch)" if rss_ratio else "trainer peak RSS"),
         "value": rss_ratio, "op": "<=", "target": TARGET_RSS_RATIO},
    ]
    for target in targets:
        target["verdict"] = _verdict(target["value"], target["op"], target["target"])
    return {"table": table, "ratios": ratios, "rss_ratio": rss_ratio, "targets": targets,
            "epochs": [dataclasses.asdict(run) | {"examples_per_s": run.examples_per_s} for run in epochs]}


def _fmt(value: Optional[float], spec: str = ".2f") -> str:
    return "n/a" if value is None else format(value, spec)


def render(summary: dict, args: argparse.Namespace, base: Dataset, pairs: int, records: int,
           epochs: Sequence[Run]) -> str:
    table = summary["table"]
    lines = [f"== input throughput: batch {args.batch_size}, crop {args.crop[0]}x{args.crop[1]}, "
             f"{args.batches} batches ({args.batches * args.batch_size} examples) timed after "
             f"{args.warmup_batches} warm-up batches, median of {args.repeats} ==",
             f"   data: train split of the {base.scale}x corpus: {pairs} raw pairs (a, b); "
             f"{records} shard records with repeat copies (c)",
             f"{'pipeline':<42}{'examples/s':>11}{'CPU ms/ex':>11}{'cores':>7}{'other load':>12}{'peak RSS':>10}"]
    for kind in KINDS:
        row = table[kind]
        lines.append(f"{KIND_TITLES[kind]:<42}{row['examples_per_s']:>11.1f}{row['cpu_ms_per_example']:>11.2f}"
                     f"{row['cores']:>7.2f}{row['other_cores']:>12.2f}{row['peak_rss_mb']:>7.0f} MB")
    ratios = summary["ratios"]
    lines += [f"ratios: trainer / generator {ratios['trainer_vs_generator']:.2f}, "
              f"trainer / raw tf.data {ratios['trainer_vs_raw_tfdata']:.2f} "
              f"(raw tf.data / generator {ratios['raw_tfdata_vs_generator']:.2f})",
              f"CPU per example: generator / trainer {ratios['cpu_generator_vs_trainer']:.2f}, "
              f"raw tf.data / trainer {ratios['cpu_raw_tfdata_vs_trainer']:.2f} (above 1: the trainer costs less)",
              f"trainer decoding: {', '.join(table['trainer']['decoding'])}",
              "   CPU ms/ex: CPU time of the child process per example (all its threads); cores: CPU s / wall s; "
              "other load: cores used meanwhile by other processes"]
    noisy = max(row["other_cores"] for row in table.values())
    if noisy > NOISY_CORES:
        lines.append(f"   WARNING: other processes used {noisy:.2f} cores (median) during a timed run; the rates "
                     "and ratios are less reliable (more --repeats helps)")
    lines += ["", "== trainer pipeline memory: one full epoch, training mode, no cache =="]
    for run in epochs:
        lines.append(f"{str(run.scale) + 'x':<4}{run.examples:>7} examples ({run.examples // args.batch_size} steps)"
                     f"{run.examples_per_s:>9.1f} examples/s   peak RSS {run.peak_rss_mb:6.0f} MB   "
                     f"(RSS before iterating {run.rss_built_mb:.0f} MB)")
    lines.append(f"peak RSS ratio {_fmt(summary['rss_ratio'])}")
    lines += ["", "targets:"]
    for target in summary["targets"]:
        lines.append(f"  {target['name']:<44}{_fmt(target['value']):>7}  {target['op']} {target['target']:.2f}  "
                     f"{target['verdict']}")
    return "\n".join(lines)


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------
def _crop(text: str) -> tuple[int, int]:
    parts = text.split(",")
    if len(parts) != 2 or not all(part.strip().isdigit() and int(part) > 0 for part in parts):
        raise argparse.ArgumentTypeError(f"expected H,W such as 256,256, got {text!r}")
    return int(parts[0]), int(parts[1])


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bench/input_throughput.py",
        description="Examples/s of the trainer's input pipeline (shards + tf.Transform) next to a Keras "
                    "PyDataset generator and tf.data over the raw files, on the same data in the same run, "
                    "and the trainer pipeline's peak RSS over one epoch at 1x and more data (see the module "
                    "docstring).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--pairs", type=positive, default=500,
                        help="valid segmentation pairs in the 1x corpus (80 %% train; images 480x360 to 640x480)")
    parser.add_argument("--batch_size", type=positive, default=16, help="examples per batch, for all three")
    parser.add_argument("--crop", type=_crop, default="256,256", help="patch height,width, for all three")
    parser.add_argument("--warmup_batches", type=positive, default=10,
                        help="batches pulled before timing starts (thread pools, autotuning, shuffle buffers)")
    parser.add_argument("--batches", type=positive, default=60, help="batches timed per run")
    parser.add_argument("--repeats", type=positive, default=3,
                        help="timed runs of each pipeline, interleaved (order reversed every other repeat); "
                             "the medians are reported")
    parser.add_argument("--rss_scale", type=positive, default=4,
                        help="the larger data for the memory comparison, as a multiple of --pairs (its own "
                             "corpus and pipeline run)")
    parser.add_argument("--skip_rss", action="store_true", help="skip the full-epoch memory runs")
    parser.add_argument("--target_shard_bytes", type=positive, default=16 * MB,
                        help="the pipeline's --target_shard_bytes: smaller than its 128 MiB default so that the "
                             "1x train split has several shards for the trainer's interleave, as a real corpus has")
    parser.add_argument("--workdir", type=Path, default=ROOT / "build" / "bench",
                        help="cached corpora and pipeline outputs (other versions are deleted) and child logs")
    parser.add_argument("--json", type=Path, default=None, metavar="OUT", help="also write every figure as JSON")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)   # internal: run one measurement
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    if args.child is not None:
        print(RESULT_PREFIX + json.dumps(run_child(json.loads(args.child))), flush=True)
        return 0
    started = time.perf_counter()
    load_before = os.getloadavg()
    args.workdir = args.workdir.resolve()
    args.workdir.mkdir(parents=True, exist_ok=True)
    generator, pipeline = generator_version(), pipeline_version()
    remove_stale(args.workdir, generator, pipeline)
    base = ensure_dataset(args.workdir, args.pairs, 1, args.target_shard_bytes, generator, pipeline)
    large = None
    if not args.skip_rss and args.rss_scale > 1:
        large = ensure_dataset(args.workdir, args.pairs, args.rss_scale, args.target_shard_bytes, generator, pipeline)
    prepare_seconds = time.perf_counter() - started
    for dataset in [base] + ([large] if large else []):
        warm_page_cache(dataset.manifest.parent)
        warm_page_cache(dataset.shards)
    timed, epochs = run_all(args, base, large)
    summary = summarise(timed, epochs)
    pairs, records = len(raw_train_pairs(base)), train_records(base)
    print(render(summary, args, base, pairs, records, epochs))
    total = time.perf_counter() - started
    load_after = os.getloadavg()
    print(f"\nbenchmark wall time {total:.0f} s (building cached data {prepare_seconds:.0f} s); load average "
          f"before {load_before[0]:.2f}, after {load_after[0]:.2f}; {os.cpu_count()} CPUs; corpus generator "
          f"{generator}, pipeline {pipeline}")
    if args.json:
        record = {"options": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()
                              if k != "child"},
                  "summary": summary, "runs": [dataclasses.asdict(run) for run in timed],
                  "benchmark_seconds": total, "load_average": {"before": load_before, "after": load_after}}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(record, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
