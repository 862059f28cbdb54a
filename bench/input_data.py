"""The data the trainer's input benchmarks read (input_throughput.py, input_memory.py): a cached sample corpus
and the pipeline's shards of it, with what the raw-file baselines need from them.

Corpora come from ``tools.sample_corpus`` (``pairs`` valid pairs per scale unit, 480x360 to 640x480, about
60 % JPEG and 40 % PNG images) and are turned into shards by the real pipeline (``python -m beam_pipeline
--input .../manifest.csv --output ... --task segmentation --num_classes 8 --target_shard_bytes ...``, its
defaults otherwise: tf.Transform statistics and repeat-factor balancing). Both are cached under the work
folder: corpora in ``corpus_<pairs>pairs_x<scale>_g<generator>`` (the same folders as the other benchmarks
of the sample corpus; ``<generator>`` is the first 8 hex digits of a SHA-256 over the sources of
``tools/sample_corpus/``), shards in ``shards_<pairs>pairs_x<scale>_g<generator>_p<pipeline>_t<target
bytes>`` (``<pipeline>`` hashes the sources of ``beam_pipeline/``). Cached folders of other versions are
deleted. Building them is not timed.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

from common import (MB, NUM_CLASSES, ROOT, corpus_dir, generate_corpus, generator_version, log, positive,
                    remove_stale_corpora, warm_page_cache)

PIPELINE_SOURCES = ROOT / "beam_pipeline"                        # their hash keys the cached shards


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


def _run_pipeline_into(final: Path, manifest: Path, shard_bytes: int, what: str, log_path: Path) -> None:
    """Run the pipeline writing into ``final``.tmp, renamed into place only when it succeeded."""
    tmp = final.with_name(final.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "beam_pipeline", "--input", str(manifest), "--output", str(tmp),
               "--task", "segmentation", "--num_classes", str(NUM_CLASSES), "--target_shard_bytes", str(shard_bytes)]
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
        _run_pipeline_into(shards, manifest, shard_bytes, f"running the pipeline on the x{scale} corpus",
                           workdir / "logs" / f"pipeline_x{scale}.log")
    return Dataset(scale, manifest, shards)


@dataclasses.dataclass(frozen=True)
class Prepared:
    """The datasets of one benchmark run, by scale, and what building them took."""
    datasets: dict[int, Dataset]
    seconds: float
    generator: str     # corpus generator version
    pipeline: str      # pipeline version

    def versions(self) -> str:
        return f"corpus generator {self.generator}, pipeline {self.pipeline}"


def prepare(workdir: Path, pairs: int, scales: Sequence[int], shard_bytes: int) -> Prepared:
    """Every scale's dataset, built when missing (stale versions deleted) and read once into the page cache
    (not timed)."""
    started = time.perf_counter()
    workdir.mkdir(parents=True, exist_ok=True)
    generator, pipeline = generator_version(), pipeline_version()
    remove_stale(workdir, generator, pipeline)
    datasets = {scale: ensure_dataset(workdir, pairs, scale, shard_bytes, generator, pipeline) for scale in scales}
    seconds = time.perf_counter() - started
    for dataset in datasets.values():
        warm_page_cache(dataset.manifest.parent)
        warm_page_cache(dataset.shards)
    return Prepared(datasets, seconds, generator, pipeline)


def published_dir(dataset: Dataset) -> Path:
    """The version folder the output's manifest.json names (runs/<run_id>/): shards, stats.json, rejects/."""
    manifest = json.loads((dataset.shards / "manifest.json").read_text())
    return dataset.shards / manifest["data_dir"]


def train_records(dataset: Dataset) -> int:
    """Records of the train split in the shards (repeat copies included)."""
    manifest = json.loads((dataset.shards / "manifest.json").read_text())
    return manifest["splits"]["train"]["num_examples"]


def stats_mean_std(dataset: Dataset) -> tuple[list[float], list[float]]:
    """The train split's per-channel image mean and standard deviation (stats.json)."""
    stats = json.loads((published_dir(dataset) / "stats.json").read_text())
    return stats["image_mean"], stats["image_std"]


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


def child_spec(dataset: Dataset, batch_size: int, crop: Sequence[int]) -> dict:
    """What every input pipeline child is given (input_pipelines.py): batch, crop and the train split's
    normalisation; callers add the kind, the data and the batches to pull."""
    mean, std = stats_mean_std(dataset)
    return {"batch_size": batch_size, "crop": list(crop), "mean": mean, "std": std}


# --------------------------------------------------------------------------
# Options shared by the input benchmarks
# --------------------------------------------------------------------------
def _crop(text: str) -> tuple[int, int]:
    parts = text.split(",")
    if len(parts) != 2 or not all(part.strip().isdigit() and int(part) > 0 for part in parts):
        raise argparse.ArgumentTypeError(f"expected H,W such as 256,256, got {text!r}")
    return int(parts[0]), int(parts[1])


def add_data_options(parser: argparse.ArgumentParser) -> None:
    """--pairs, --batch_size, --crop, --target_shard_bytes and --workdir."""
    parser.add_argument("--pairs", type=positive, default=500,
                        help="valid segmentation pairs in the 1x corpus (80 %% train; images 480x360 to 640x480)")
    parser.add_argument("--batch_size", type=positive, default=16, help="examples per batch, for every pipeline")
    parser.add_argument("--crop", type=_crop, default="256,256", help="patch height,width, for every pipeline")
    parser.add_argument("--target_shard_bytes", type=positive, default=16 * MB,
                        help="the pipeline's --target_shard_bytes: smaller than its 128 MiB default so that the "
                             "1x train split has several shards for the trainer's interleave, as a real corpus has")
    parser.add_argument("--workdir", type=Path, default=ROOT / "build" / "bench",
                        help="cached corpora and pipeline outputs (other versions are deleted) and child logs")
