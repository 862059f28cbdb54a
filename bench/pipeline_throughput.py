"""Pipeline throughput against two plain 2-process loops, on real-looking images, in one run.

What is measured
    * The pipeline: ``python -m beam_pipeline --input LISTING --output DIR --num_classes 8`` run as a
      subprocess, exactly as a user runs it, in two configurations (``--configs``):

      ``base``  ``--no_stats --balance none``: read, validate and write the TFRecord shards;
      ``full``  the defaults: the same plus the tf.Transform statistics (transform/, stats.json) and
                repeat-factor class balancing of the train split.

      Its wall time includes interpreter start-up, imports, pipeline construction and teardown. Every
      run writes into a fresh output folder.
    * Two loops doing the minimal work of validating a segmentation corpus, written directly here
      (independent of ``beam_pipeline.core``), each in a ``multiprocessing.Pool(2)`` over the listing's
      rows (time from reading the listing to joining the pool): read both files, check the format by
      content and the pixel limit, decode both fully, check that the sizes are equal and every mask
      value is < num_classes or == 255, and count the class histogram with ``np.bincount``.

      ``pillow``  decodes everything with Pillow (what the pipeline did before it had fast decoders);
      ``fast``    decodes with the fastest decoders the pipeline uses: libspng (imagecodecs) for 8-bit
                  RGB PNG, libpng (imagecodecs) for 8-bit grey masks, libjpeg-turbo (simplejpeg, accurate
                  IDCT) for 3-component JPEG; Pillow for anything else (palette masks).

    The pipeline does more than the loops by design (SHA-256 of both files, a chunk/CRC check of every
    PNG, channel sums, crop sample points, reading the files again to write TFRecord shards, and in
    ``full`` the statistics and balancing).

The corpus (``--corpus``)
    ``photo_png`` (default) and ``photo_jpeg``: tools/photo_corpus.py, 480x360 crops of scikit-image's
    photographs with lens blur and sensor noise, about 215 KB as PNG (30 KB as JPEG q90), and
    VOC-like masks (every 5th a palette PNG); they decode like camera photos, where flat synthetic
    images decode about twice as fast and make every ratio lie. One corpus of ``--pairs`` x the largest
    size is generated once under ``--workdir`` (about 0.2 s of CPU per pair; pair i is the same
    whatever the size) and listings of its first N rows make the smaller sizes. ``sample``: the
    synthetic sample corpus (tools/sample_corpus/) with its broken inputs, as before.

Repetitions and ratios
    The runs are interleaved (loop pillow 1x, loop fast 1x, base 1x, full 1x, the same at 3x, ...; the
    order within a size is reversed on every other repeat) so that slow phases of a shared machine hit
    every side alike. Each figure is computed within one repetition, from that repetition's runs, and
    reported as the median over ``--repeats`` repetitions with its spread (min..max):

    * marginal ratio = loop s per extra pair / pipeline s per extra pair, from the smallest and the
      largest size (every fixed cost left out), against each loop;
    * the pipeline's fixed cost: the intercept of its time against the number of pairs;
    * what statistics and balancing add: full - base, per extra pair (also as a per cent of base's) and
      fixed;
    * whole-run ratio at the smallest size (start-up included);
    * peak RSS of ``--rss_config`` at the largest / the smallest of ``--rss_sizes`` (median per size).

    The machine is shared: a ratio of two figures taken side by side cancels most of the noise that
    makes a single time meaningless. For every run the CPU used meanwhile by other processes is
    reported, with a warning above ``NOISY_CORES``.

Targets (issue 10; judged on ``full``, the pipeline users run)
    marginal ratio vs the Pillow loop >= 1.2; vs the fast loop >= 0.85; fixed cost <= 12 s; statistics
    and balancing add < 10 % per pair over base; peak RSS 4x/1x <= 1.2. On the ``sample`` corpus the
    same figures are printed for comparison with older runs.

Memory
    Each pipeline subprocess is reaped with ``os.wait4``, whose ``ru_maxrss`` is the peak RSS of that
    one process; a sampler thread also walks ``/proc`` during the run and records the summed RSS of the
    process tree (the SDK workers included) and the cores used over time.

Generating corpora, warming the page cache and deleting outputs are not timed.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import io
import json
import multiprocessing
import operator
import os
import re
import shutil
import statistics
import struct
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path
from typing import Callable, Iterable, Optional, Sequence

import imagecodecs
import numpy as np
import simplejpeg
from PIL import Image

import common
from common import (MB, NOISY_CORES, NUM_CLASSES, ROOT, Corpus, count_rows, ensure_corpora, ensure_photo_corpus,
                    generator_version, log, machine_busy_seconds, other_cores, photo_generator_version,
                    photo_listing, positive, process_tree, spread, warm_page_cache)

IGNORE_LABEL = 255
MAX_PIXELS = 64_000_000  # the pipeline's default --max_pixels, so a decompression bomb is refused alike
LOOP_PROCESSES = 2
LOOP_CHUNKSIZE = 8
SAMPLE_SECONDS = 0.25
TIMELINE_BINS = 10

TARGET_PILLOW_RATIO = 1.2    # full: marginal ratio against the Pillow loop
TARGET_FAST_RATIO = 0.85     # full: marginal ratio against the fast-decoder loop
TARGET_FIXED_COST_S = 12.0   # full: fixed cost (intercept)
TARGET_ADDED_PCT = 10.0      # statistics and balancing: added seconds per pair, per cent of base's
TARGET_RSS_RATIO = 1.2       # peak RSS at the largest --rss_sizes / at the smallest

# Pipeline configurations: name -> extra command-line flags. Order matters: "full" is compared with "base".
CONFIGS: dict[str, tuple[str, ...]] = {
    "base": ("--no_stats", "--balance", "none"),  # read, validate, shard
    "full": (),                                   # defaults: tf.Transform statistics + repeat-factor balancing
}
CONFIG_DESCRIPTIONS = {
    "base": "read, validate, shard",
    "full": "defaults: tf.Transform statistics + repeat-factor balancing",
}
LOOPS = ("pillow", "fast")
CORPORA = ("photo_png", "photo_jpeg", "sample")
_OPERATORS: dict[str, Callable[[float, float], bool]] = {">=": operator.ge, "<=": operator.le, "<": operator.lt}

_DECODE_ERRORS = (OSError, ValueError, SyntaxError, EOFError, struct.error, zlib.error, IndexError, RuntimeError,
                  Image.DecompressionBombError)
_IMAGE_FORMATS = ("JPEG", "PNG")
_MASK_MODES = ("L", "P", "I;16", "I;16B", "I;16L", "I")
_PNG = b"\x89PNG\r\n\x1a\n"
_JPEG = b"\xff\xd8\xff"
_READING_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) INFO .*: Reading ")


# --------------------------------------------------------------------------
# Corpora
# --------------------------------------------------------------------------
def prepare_corpora(corpus: str, workdir: Path, pairs: int, scales: Sequence[int]) -> tuple[dict[int, Corpus],
                                                                                          float, str]:
    """The corpus at every scale, generated when missing; also the seconds spent and the generator version."""
    if corpus == "sample":
        version = generator_version()
        corpora, seconds = ensure_corpora(workdir, pairs, scales, version)
        return corpora, seconds, version
    folder, seconds = ensure_photo_corpus(workdir, pairs * max(scales))
    image_format = corpus.split("_", 1)[1]
    corpora = {}
    for scale in scales:
        listing = photo_listing(folder, image_format, pairs * scale)
        corpora[scale] = Corpus(scale, listing, count_rows(listing))
    return corpora, seconds, photo_generator_version()


# --------------------------------------------------------------------------
# The loops
# --------------------------------------------------------------------------
def read_manifest(manifest: Path) -> list[tuple[str, str]]:
    """(image path, mask path) of every row, resolved against the listing's folder."""
    root = manifest.parent
    with manifest.open(newline="", encoding="utf-8") as handle:
        return [(os.path.normpath(root / row["image"]), os.path.normpath(root / row["mask"]))
                for row in csv.DictReader(handle)]


def _read(path: str) -> bytes:
    with open(path, "rb") as handle:
        data = handle.read()
    if not data:
        raise ValueError("empty file")
    return data


def _pillow(data: bytes, allowed: tuple[str, ...]) -> Image.Image:
    """Open, check the format by content and the pixel count, and decode fully with Pillow."""
    image = Image.open(io.BytesIO(data))
    if image.format not in allowed:
        raise ValueError(f"format {image.format}")
    if image.width * image.height > MAX_PIXELS:
        raise ValueError("too many pixels")
    image.load()
    return image


def _pillow_pair(image_path: str, mask_path: str) -> tuple[tuple[int, int], np.ndarray]:
    image = _pillow(_read(image_path), _IMAGE_FORMATS)
    mask = _pillow(_read(mask_path), ("PNG",))
    if mask.mode not in _MASK_MODES:
        raise ValueError(f"mask mode {mask.mode}")
    return (image.height, image.width), np.asarray(mask)


def _png_header(data: bytes) -> tuple[int, int, int, int]:
    """(width, height, bit depth, colour type) from the IHDR, with the pixel limit."""
    width, height, depth, colour = struct.unpack(">IIBB", data[16:26])
    if width * height > MAX_PIXELS:
        raise ValueError("too many pixels")
    return width, height, depth, colour


def _fast_image(data: bytes) -> tuple[int, int]:
    """(height, width) of an image decoded fully by the fastest decoder for its kind."""
    if data[:8] == _PNG:
        if _png_header(data)[2:] == (8, 2):
            return imagecodecs.spng_decode(data).shape[:2]
    elif data[:3] == _JPEG:
        height, width, colourspace, _ = simplejpeg.decode_jpeg_header(data)
        if height * width > MAX_PIXELS:
            raise ValueError("too many pixels")
        if colourspace in ("YCbCr", "RGB"):
            return simplejpeg.decode_jpeg(data, colorspace="RGB", fastdct=False, fastupsample=False).shape[:2]
    image = _pillow(data, _IMAGE_FORMATS)
    return image.height, image.width


def _fast_pair(image_path: str, mask_path: str) -> tuple[tuple[int, int], np.ndarray]:
    size = _fast_image(_read(image_path))
    data = _read(mask_path)
    if data[:8] == _PNG and _png_header(data)[2:] == (8, 0):
        values = imagecodecs.png_decode(data)
        if values.ndim != 2:
            raise ValueError("mask is not single-channel")
        return size, values
    mask = _pillow(data, ("PNG",))
    if mask.mode not in _MASK_MODES:
        raise ValueError(f"mask mode {mask.mode}")
    return size, np.asarray(mask)


_PAIR_DECODERS = {"pillow": _pillow_pair, "fast": _fast_pair}


def check_pair(loop: str, paths: tuple[str, str]) -> Optional[tuple[int, ...]]:
    """Loop worker: the class histogram (num_classes counts + ignore count), or None when invalid."""
    try:
        size, mask = _PAIR_DECODERS[loop](*paths)
        if size != mask.shape[:2]:
            return None
        counts = np.bincount(mask.ravel(), minlength=256)
    except _DECODE_ERRORS:
        return None
    if counts[NUM_CLASSES:IGNORE_LABEL].any() or counts[IGNORE_LABEL + 1:].any():
        return None
    return tuple(int(c) for c in counts[:NUM_CLASSES]) + (int(counts[IGNORE_LABEL]),)


def _check_pillow(paths):
    return check_pair("pillow", paths)


def _check_fast(paths):
    return check_pair("fast", paths)


_LOOP_WORKERS = {"pillow": _check_pillow, "fast": _check_fast}


def _inside(root: str, paths: tuple[str, str]) -> bool:
    """Both paths lie under ``root`` (the pipeline rejects rows that leave the listing's folder)."""
    return all(path.startswith(root + os.sep) for path in paths)


@dataclasses.dataclass
class LoopRun:
    loop: str           # a name of LOOPS
    scale: int
    seconds: float
    cpu_seconds: float
    valid: int
    rejected: int
    other_cores: float  # CPU used by other processes on the machine meanwhile (noise), in cores

    @property
    def cores(self) -> float:
        return self.cpu_seconds / self.seconds


def run_loop(corpus: Corpus, loop: str) -> LoopRun:
    """The minimal work over every listing row in a Pool(2); timed from reading the listing to join."""
    cpu_before, busy_before = common.cpu_seconds(), machine_busy_seconds()
    started = time.perf_counter()
    rows = read_manifest(corpus.manifest)
    root = os.path.normpath(corpus.manifest.parent)
    inside = [paths for paths in rows if _inside(root, paths)]
    histogram = np.zeros(NUM_CLASSES + 1, dtype=np.int64)  # summed like the pipeline's class statistics
    valid = 0
    with multiprocessing.Pool(LOOP_PROCESSES) as pool:
        for result in pool.imap_unordered(_LOOP_WORKERS[loop], inside, chunksize=LOOP_CHUNKSIZE):
            if result is not None:
                valid += 1
                histogram += result
        pool.close()
        pool.join()  # worker shutdown is part of the loop's time
    seconds = time.perf_counter() - started
    cpu = common.cpu_seconds() - cpu_before
    return LoopRun(loop, corpus.scale, seconds, cpu, valid, len(rows) - valid, other_cores(busy_before, cpu, seconds))


# --------------------------------------------------------------------------
# The pipeline, as a subprocess
# --------------------------------------------------------------------------
class TreeSampler(threading.Thread):
    """Samples CPU time and summed RSS of a process and all its descendants from /proc."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self._pid = pid
        self._stop_event = threading.Event()
        self._ticks = os.sysconf("SC_CLK_TCK")
        self._page = os.sysconf("SC_PAGE_SIZE")
        self.samples: list[tuple[float, float, int]] = []  # (monotonic s, CPU s, tree RSS bytes)
        self.max_descendants = 0

    def run(self) -> None:
        while not self._stop_event.is_set():
            self._sample()
            self._stop_event.wait(SAMPLE_SECONDS)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()

    def _sample(self) -> None:
        members = list(process_tree(self._pid).values())
        if not members:
            return
        self.max_descendants = max(self.max_descendants, len(members) - 1)
        cpu = sum(ticks for _, ticks, _ in members) / self._ticks
        rss = sum(pages for _, _, pages in members) * self._page
        self.samples.append((time.monotonic(), cpu, rss))

    def cores_timeline(self, bins: int = TIMELINE_BINS) -> list[float]:
        """Cores used in each of ``bins`` equal slices of the sampled run."""
        if len(self.samples) < 2:
            return []
        start, end = self.samples[0][0], self.samples[-1][0]
        width = (end - start) / bins
        edges = [start + i * width for i in range(bins + 1)]
        return [round((_cpu_at(self.samples, edges[i + 1]) - _cpu_at(self.samples, edges[i])) / width, 2)
                for i in range(bins)]


def _cpu_at(samples: list[tuple[float, float, int]], when: float) -> float:
    """CPU seconds at ``when``, interpolated linearly between samples."""
    times = [t for t, _, _ in samples]
    cpus = [c for _, c, _ in samples]
    return float(np.interp(when, times, cpus))


@dataclasses.dataclass
class PipelineRun:
    config: str               # a key of CONFIGS
    scale: int
    seconds: float
    cpu_seconds: float
    peak_rss_mb: float        # ru_maxrss of the pipeline process (os.wait4)
    tree_peak_rss_mb: float   # largest sampled sum of RSS over the process and its descendants
    max_descendants: int
    startup_seconds: Optional[float]  # spawn -> run() logs "Reading": interpreter, imports, option checks
    exit_seconds: float               # manifest.json written -> process reaped: teardown and exit
    other_cores: float                # CPU used by other processes on the machine meanwhile (noise)
    counts: dict
    cores_timeline: list[float]
    log: str

    @property
    def cores(self) -> float:
        return self.cpu_seconds / self.seconds

    @property
    def records_written(self) -> int:
        """Records in the shards (manifest.json counts.records_written): pairs written plus repeat copies."""
        return self.counts["records_written"]

    @property
    def job_seconds(self) -> Optional[float]:
        """From run() starting the job to manifest.json being written."""
        if self.startup_seconds is None:
            return None
        return self.seconds - self.startup_seconds - self.exit_seconds


def pipeline_command(corpus: Corpus, output: Path, config: str) -> list[str]:
    return [sys.executable, "-m", "beam_pipeline", "--input", str(corpus.manifest), "--output", str(output),
            "--num_classes", str(NUM_CLASSES), "--overwrite", *CONFIGS[config]]


def _job_start_time(log_path: Path) -> Optional[float]:
    """Wall-clock time of run()'s "Reading <input>" log line (logged as the job starts), if found."""
    for line in log_path.read_text(errors="replace").splitlines():
        match = _READING_LINE.match(line)
        if match:
            stamp, millis = match.groups()
            return time.mktime(time.strptime(stamp, "%Y-%m-%d %H:%M:%S")) + int(millis) / 1000
    return None


def run_pipeline(corpus: Corpus, config: str, output: Path, log_path: Path) -> PipelineRun:
    """One pipeline subprocess in ``config`` into a fresh ``output``; wall time from spawn to reaping."""
    shutil.rmtree(output, ignore_errors=True)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    command = pipeline_command(corpus, output, config)
    bench_cpu_before, busy_before = common.cpu_seconds(), machine_busy_seconds()
    with log_path.open("w") as log_file:
        started, spawned_at = time.perf_counter(), time.time()
        proc = subprocess.Popen(command, cwd=ROOT, stdout=log_file, stderr=subprocess.STDOUT)
        sampler = TreeSampler(proc.pid)
        sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - started
        reaped_at = time.time()
        sampler.stop()
    cpu_seconds = usage.ru_utime + usage.ru_stime
    # common.cpu_seconds() now includes the reaped pipeline, so its delta is the pipeline plus the sampler.
    other = other_cores(busy_before, common.cpu_seconds() - bench_cpu_before, seconds)
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, so that Popen does not wait again
    if proc.returncode != 0:
        raise RuntimeError(f"pipeline exited {proc.returncode}; see {log_path}\n  {' '.join(command)}")
    manifest = json.loads((output / "manifest.json").read_text())
    manifest_written_at = (output / "manifest.json").stat().st_mtime
    shutil.rmtree(output)
    job_started_at = _job_start_time(log_path)
    return PipelineRun(
        config=config, scale=corpus.scale, seconds=seconds, cpu_seconds=cpu_seconds, other_cores=other,
        peak_rss_mb=usage.ru_maxrss * 1024 / MB,
        tree_peak_rss_mb=max((rss for _, _, rss in sampler.samples), default=0) / MB,
        max_descendants=sampler.max_descendants,
        startup_seconds=None if job_started_at is None else job_started_at - spawned_at,
        exit_seconds=reaped_at - manifest_written_at,
        counts=manifest["counts"], cores_timeline=sampler.cores_timeline(), log=str(log_path))


# --------------------------------------------------------------------------
# Orchestration
# --------------------------------------------------------------------------
LoopRuns = dict[str, dict[int, list[LoopRun]]]       # loop -> scale -> runs (one per repeat)
PipeRuns = dict[str, dict[int, list[PipelineRun]]]   # configuration -> scale -> runs (one per repeat)


def plan_runs(sizes: Sequence[int], configs: Sequence[str], rss_config: str, rss_sizes: Sequence[int],
              repeats: int) -> list[tuple[int, str, int]]:
    """(repeat, "loop:<name>" or a configuration, scale) in interleaved order, reversed within a size every
    other repeat. Sizes of ``rss_sizes`` that no timed run of ``rss_config`` covers get pipeline-only runs."""
    kinds = tuple(f"loop:{loop}" for loop in LOOPS) + tuple(configs)
    rss_only = [s for s in rss_sizes if s not in sizes or rss_config not in configs]
    plan = []
    for repeat in range(repeats):
        order = kinds if repeat % 2 == 0 else kinds[::-1]
        plan += [(repeat, kind, scale) for scale in sizes for kind in order]
        plan += [(repeat, rss_config, scale) for scale in rss_only]
    return plan


def run_plan(plan: Sequence[tuple[int, str, int]], corpora: dict[int, Corpus],
             workdir: Path) -> tuple[LoopRuns, PipeRuns]:
    """Run every planned measurement in order; returns the runs by loop or configuration and scale."""
    loops: LoopRuns = {}
    pipes: PipeRuns = {}
    for repeat, kind, scale in plan:
        corpus = corpora[scale]
        if kind.startswith("loop:"):
            loop = kind.split(":", 1)[1]
            loop_run = run_loop(corpus, loop)
            loops.setdefault(loop, {}).setdefault(scale, []).append(loop_run)
            log(f"loop {loop:<8} {scale}x  {corpus.rows} pairs  {loop_run.seconds:.1f} s  "
                f"cores {loop_run.cores:.2f}  other load {loop_run.other_cores:.2f}")
            continue
        pipe_run = run_pipeline(corpus, kind, workdir / "out" / f"{kind}_x{scale}",
                                workdir / "logs" / f"pipeline_{kind}_x{scale}_r{repeat}.log")
        pipes.setdefault(kind, {}).setdefault(scale, []).append(pipe_run)
        log(f"pipeline {kind:<4}  {scale}x  {corpus.rows} pairs  {pipe_run.seconds:.1f} s  "
            f"cores {pipe_run.cores:.2f}  records {pipe_run.records_written}  "
            f"peak RSS {pipe_run.peak_rss_mb:.0f} MB  other load {pipe_run.other_cores:.2f}")
    return loops, pipes


# --------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------
def median_of(runs: Iterable, field: str) -> Optional[float]:
    """Median of one field over runs, leaving out runs where it is unknown (None when all are)."""
    known = [value for value in (getattr(run, field) for run in runs) if value is not None]
    return statistics.median(known) if known else None


def spread_figure(values: Sequence[Optional[float]]) -> dict:
    """Median, min and max of the known values (None when there are none), and how many there are: a
    figure of the report and of the --json file, printed by _fmt_spread."""
    known = sorted(v for v in values if v is not None)
    if not known:
        return {"median": None, "min": None, "max": None, "n": 0}
    return {"median": statistics.median(known), "min": known[0], "max": known[-1], "n": len(known)}


def _ratio(numerator: Optional[float], denominator: Optional[float]) -> Optional[float]:
    if numerator is None or denominator is None or denominator <= 0:
        return None
    return numerator / denominator


def _fit(small: tuple[int, float], large: tuple[int, float]) -> tuple[float, float]:
    """(seconds per extra pair, intercept) of the line through two (pairs, seconds) points."""
    per_pair = (large[1] - small[1]) / (large[0] - small[0])
    return per_pair, small[1] - small[0] * per_pair


def repetition_figures(corpora: dict[int, Corpus], sizes: Sequence[int], configs: Sequence[str], loops: LoopRuns,
                       pipes: PipeRuns, repeat: int) -> dict:
    """Every ratio of one repetition, from that repetition's runs only."""
    small, large = corpora[sizes[0]], corpora[sizes[-1]]
    figures: dict = {"loops": {}, "configs": {}}
    for loop in LOOPS:
        runs = (loops[loop][sizes[0]][repeat], loops[loop][sizes[-1]][repeat])
        per_pair, fixed = _fit((small.rows, runs[0].seconds), (large.rows, runs[1].seconds))
        figures["loops"][loop] = {"s_per_pair": per_pair, "fixed_cost_s": fixed, "small_s": runs[0].seconds}
    for config in configs:
        runs = (pipes[config][sizes[0]][repeat], pipes[config][sizes[-1]][repeat])
        per_pair, fixed = _fit((small.rows, runs[0].seconds), (large.rows, runs[1].seconds))
        figure = {"s_per_pair": per_pair, "fixed_cost_s": fixed if per_pair > 0 else None}
        for loop, loop_figure in figures["loops"].items():
            figure[f"marginal_vs_{loop}"] = _ratio(loop_figure["s_per_pair"], per_pair)
            figure[f"whole_vs_{loop}"] = _ratio(loop_figure["small_s"], runs[0].seconds)
        figures["configs"][config] = figure
    if {"base", "full"} <= set(configs):
        base, full = figures["configs"]["base"], figures["configs"]["full"]
        added = full["s_per_pair"] - base["s_per_pair"]
        figures["added"] = {"s_per_pair": added, "pct_of_base": 100 * added / base["s_per_pair"]
                            if base["s_per_pair"] > 0 else None,
                            "fixed_cost_s": None if None in (full["fixed_cost_s"], base["fixed_cost_s"])
                            else full["fixed_cost_s"] - base["fixed_cost_s"]}
    return figures


def _collect(per_repeat: Sequence[dict], *keys: str) -> dict:
    values = []
    for figures in per_repeat:
        value = figures
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        values.append(value)
    return spread_figure(values)


def summarise_rss(config: str, pipes: dict[int, list[PipelineRun]], rss_sizes: Sequence[int]) -> dict:
    """Peak RSS of one configuration at each of ``rss_sizes`` (medians) and the largest/smallest ratio."""
    rss = {str(s): median_of(pipes[s], "peak_rss_mb") for s in rss_sizes}
    tree = {str(s): median_of(pipes[s], "tree_peak_rss_mb") for s in rss_sizes}
    return {"config": config, "sizes": list(rss_sizes), "rss_mb": rss, "tree_rss_mb": tree,
            "ratio": _ratio(rss[str(rss_sizes[-1])], rss[str(rss_sizes[0])]),
            "tree_ratio": _ratio(tree[str(rss_sizes[-1])], tree[str(rss_sizes[0])]),
            "max_child_processes": max(run.max_descendants for s in rss_sizes for run in pipes[s])}


def summarise(corpora: dict[int, Corpus], sizes: Sequence[int], configs: Sequence[str], rss_config: str,
              rss_sizes: Sequence[int], repeats: int, loops: LoopRuns, pipes: PipeRuns) -> dict:
    """Every figure of the report: per repetition, and as median (min..max) over the repetitions."""
    per_repeat = [repetition_figures(corpora, sizes, configs, loops, pipes, r) for r in range(repeats)]
    summary: dict = {"repetitions": per_repeat, "loops": {}, "configs": {}, "added": None, "rss": None}
    for loop in LOOPS:
        summary["loops"][loop] = {"s_per_pair": _collect(per_repeat, "loops", loop, "s_per_pair"),
                                  "fixed_cost_s": _collect(per_repeat, "loops", loop, "fixed_cost_s")}
    for config in configs:
        summary["configs"][config] = {key: _collect(per_repeat, "configs", config, key)
                                      for key in per_repeat[0]["configs"][config]}
    if "added" in per_repeat[0]:
        summary["added"] = {key: _collect(per_repeat, "added", key) for key in per_repeat[0]["added"]}
    if len(rss_sizes) >= 2:
        summary["rss"] = summarise_rss(rss_config, pipes[rss_config], rss_sizes)
    summary["targets"] = judge_targets(summary, rss_config)
    return summary


def _fmt(value: Optional[float], spec: str = ".2f", unit: str = "") -> str:
    return "n/a" if value is None else format(value, spec) + unit


def _fmt_spread(figure: dict, spec: str = ".2f", unit: str = "", scale: float = 1.0) -> str:
    if figure["median"] is None:
        return "n/a"
    form = "{median}" + unit + (" (1 repetition)" if figure["n"] == 1 else " ({min}..{max})")
    # the median of (min, median, max) is the figure's median, so common.spread prints the figure
    return spread([figure[k] * scale for k in ("min", "median", "max")], "{:" + spec + "}", form)


def _target(name: str, figure: Optional[dict], op: str, limit: float, note: str = "") -> dict:
    value = None if figure is None else figure["median"]
    verdict = "n/a" if value is None else ("PASS" if _OPERATORS[op](value, limit) else "FAIL")
    return {"name": name, "value": value, "spread": figure, "op": op, "target": limit, "verdict": verdict,
            "note": note}


def judge_targets(summary: dict, rss_config: str) -> list[dict]:
    """Issue 10's targets, judged on the medians of the configurations that were run."""
    targets = []
    full = summary["configs"].get("full")
    if full:
        targets += [_target("full: marginal ratio vs Pillow loop", full["marginal_vs_pillow"], ">=",
                            TARGET_PILLOW_RATIO),
                    _target("full: marginal ratio vs fast-decoder loop", full["marginal_vs_fast"], ">=",
                            TARGET_FAST_RATIO),
                    _target("full: fixed cost (s)", full["fixed_cost_s"], "<=", TARGET_FIXED_COST_S)]
    if summary["added"]:
        targets.append(_target("stats+balancing added per pair (% of base)", summary["added"]["pct_of_base"],
                               "<", TARGET_ADDED_PCT))
    rss = summary["rss"]
    rss_figure = None if rss is None or rss["ratio"] is None else spread_figure([rss["ratio"]])
    targets.append(_target(f"{rss_config}: peak RSS largest/smallest size", rss_figure, "<=", TARGET_RSS_RATIO,
                           "skipped" if rss is None else "medians per size"))
    return targets


# --------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------
def render_sizes(corpora: dict[int, Corpus], sizes: Sequence[int], configs: Sequence[str], loops: LoopRuns,
                 pipes: PipeRuns) -> list[str]:
    """Median seconds and pairs/s of every loop and configuration at every size."""
    kinds = [(f"loop {loop}", loops[loop]) for loop in LOOPS] + [(config, pipes[config]) for config in configs]
    lines = [f"{'':<12}" + "".join(f"{str(s) + 'x (' + str(corpora[s].rows) + ')':>22}" for s in sizes)]
    for name, runs in kinds:
        cells = []
        for size in sizes:
            seconds = median_of(runs[size], "seconds")
            cells.append(f"{seconds:8.1f} s {corpora[size].rows / seconds:7.1f}/s")
        lines.append(f"{name:<12}" + "".join(f"{cell:>22}" for cell in cells))
    lines.append("  (median seconds and input pairs per second per size; the ratios below are computed within each "
                 "repetition)")
    return lines


def render_config(name: str, figures: dict) -> list[str]:
    flags = " ".join(CONFIGS[name]) or "no extra flags"
    lines = [f"== {name}: {flags} ({CONFIG_DESCRIPTIONS[name]}) =="]
    for loop in LOOPS:
        lines.append(f"  marginal ratio vs {loop} loop:{'':<{8 - len(loop)}}{_fmt_spread(figures[f'marginal_vs_{loop}'])}"
                     f"   whole-run ratio at the smallest size: {_fmt_spread(figures[f'whole_vs_{loop}'])}")
    lines.append(f"  per extra pair: {_fmt_spread(figures['s_per_pair'], '.2f', ' ms', 1e3)}; fixed cost: "
                 f"{_fmt_spread(figures['fixed_cost_s'], '.1f', ' s')}")
    return lines


def render_added(added: dict) -> list[str]:
    return ["== what statistics and balancing add (full - base) ==",
            f"  per extra pair: {_fmt_spread(added['s_per_pair'], '+.2f', ' ms', 1e3)} = "
            f"{_fmt_spread(added['pct_of_base'], '+.0f', ' %')} of base; fixed cost "
            f"{_fmt_spread(added['fixed_cost_s'], '+.1f', ' s')}"]


def render_rss(rss: dict) -> list[str]:
    sizes = ", ".join(f"{s}x {rss['rss_mb'][str(s)]:.0f} MB" for s in rss["sizes"])
    tree = ", ".join(f"{s}x {rss['tree_rss_mb'][str(s)]:.0f} MB" for s in rss["sizes"])
    return [f"peak RSS ({rss['config']}): runner process {sizes}, ratio {_fmt(rss['ratio'])}",
            f"  sampled process-tree RSS (SDK workers included): {tree}, ratio {_fmt(rss['tree_ratio'])}"]


def render_diagnostics(corpora: dict[int, Corpus], loops: LoopRuns, pipes: PipeRuns) -> list[str]:
    """Cores used, the pipeline's wall-time split, noise, per-run core timelines and agreement of counts."""
    lines = ["diagnostics (medians): cores used (CPU s / wall s); the pipeline's wall time split into start-up "
             "(spawn to run() starting), job, and exit (after manifest.json)"]
    for name, by_scale in pipes.items():
        for scale, runs in sorted(by_scale.items()):
            lines.append(f"  {str(scale) + 'x':<4}{name:<5} cores {median_of(runs, 'cores'):.2f}; start-up "
                         f"{_fmt(median_of(runs, 'startup_seconds'), '.1f', ' s')}, job "
                         f"{_fmt(median_of(runs, 'job_seconds'), '.1f', ' s')}, exit "
                         f"{_fmt(median_of(runs, 'exit_seconds'), '.1f', ' s')}; "
                         f"CPU {median_of(runs, 'cpu_seconds'):.1f} s")
    for loop, by_scale in loops.items():
        for scale, runs in sorted(by_scale.items()):
            lines.append(f"  {str(scale) + 'x':<4}loop {loop:<7} cores {median_of(runs, 'cores'):.2f}; "
                         f"CPU {median_of(runs, 'cpu_seconds'):.1f} s")
    all_runs = [run for by_scale in list(loops.values()) + list(pipes.values()) for runs in by_scale.values()
                for run in runs]
    lines.append(f"  CPU used by other processes meanwhile (noise), cores: median "
                 f"{statistics.median(r.other_cores for r in all_runs):.2f}, max {max(r.other_cores for r in all_runs):.2f}")
    if max(run.other_cores for run in all_runs) > NOISY_CORES:
        lines.append(f"  WARNING: other processes used more than {NOISY_CORES} cores during some runs; the figures "
                     "need a quiet machine (and --repeats 3 or more)")
    for name, by_scale in pipes.items():
        for scale, runs in sorted(by_scale.items()):
            timeline = " ".join(f"{c:.1f}" for c in runs[-1].cores_timeline)
            lines.append(f"  pipeline {name} {scale}x cores used per tenth of the run: {timeline}")
    for name, by_scale in pipes.items():
        parts = []
        for scale in sorted(set(by_scale) & set(loops[LOOPS[0]])):
            counts = by_scale[scale][-1].counts
            accepted = counts["written"] + counts["duplicates"]
            verdicts = {loop: loops[loop][scale][-1].valid for loop in LOOPS}
            same = "same" if set(verdicts.values()) == {accepted} else "DIFFERENT"
            parts.append(f"{scale}x pipeline {accepted} valid / {counts['rejected']['total']} rejected, loops "
                         + ", ".join(f"{loop} {valid}" for loop, valid in verdicts.items()) + f" ({same})")
        lines.append(f"  accepted pairs ({name}): " + "; ".join(parts))
    return lines


def render_targets(targets: Sequence[dict]) -> list[str]:
    lines = ["targets (medians over the repetitions):"]
    for target in targets:
        note = f"  ({target['note']})" if target["note"] else ""
        lines.append(f"  {target['name']:<46}{_fmt(target['value']):>7}  {target['op']:<2} "
                     f"{target['target']:.2f}  {target['verdict']}{note}")
    return lines


def render_report(corpus: str, corpora: dict[int, Corpus], sizes: Sequence[int], configs: Sequence[str],
                  summary: dict, loops: LoopRuns, pipes: PipeRuns) -> str:
    repeats = len(summary["repetitions"])
    lines = [f"corpus {corpus}; {repeats} interleaved repetition(s); figures: median (min..max) over them", ""]
    lines += render_sizes(corpora, sizes, configs, loops, pipes) + [""]
    for loop in LOOPS:
        lines.append(f"loop {loop}: per extra pair {_fmt_spread(summary['loops'][loop]['s_per_pair'], '.2f', ' ms', 1e3)}"
                     f", fixed cost {_fmt_spread(summary['loops'][loop]['fixed_cost_s'], '.1f', ' s')}")
    lines.append("")
    for name in configs:
        lines += render_config(name, summary["configs"][name]) + [""]
    if summary["added"]:
        lines += render_added(summary["added"]) + [""]
    if summary["rss"]:
        lines += render_rss(summary["rss"]) + [""]
    lines += render_diagnostics(corpora, loops, pipes) + [""]
    lines += render_targets(summary["targets"])
    return "\n".join(lines)


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------
def _scales(text: str) -> list[int]:
    try:
        values = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or values[0] < 1:
        raise argparse.ArgumentTypeError(f"sizes must be integers >= 1, got {text!r}")
    return values


def _configs(text: str) -> list[str]:
    requested = {part.strip() for part in text.split(",") if part.strip()}
    if not requested or not requested <= CONFIGS.keys():
        raise argparse.ArgumentTypeError(f"expected a comma-separated subset of {','.join(CONFIGS)}, got {text!r}")
    return [name for name in CONFIGS if name in requested]  # always base before full


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bench/pipeline_throughput.py",
        description="Pipeline pairs/s in a base and a full configuration next to a 2-process Pillow loop and a "
                    "2-process loop with the pipeline's fast decoders, on real-looking images, interleaved and "
                    "repeated: marginal ratios, fixed cost, what statistics and balancing add, peak RSS "
                    "(see the module docstring).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--corpus", choices=CORPORA, default="photo_png",
                        help="photo_png / photo_jpeg: 480x360 photo crops (tools/photo_corpus.py) as PNG (~215 KB) "
                             "or JPEG q90, with VOC-like masks; sample: the synthetic sample corpus with its broken "
                             "inputs")
    parser.add_argument("--pairs", type=positive, default=2000, help="pairs in the 1x corpus")
    parser.add_argument("--workdir", type=Path, default=ROOT / "build" / "bench",
                        help="folder for the cached corpora (those of other generator versions are deleted), "
                             "pipeline outputs (deleted after each run) and pipeline logs")
    parser.add_argument("--configs", type=_configs, default="base,full",
                        help="pipeline configurations to time, comma-separated: base = --no_stats --balance none; "
                             "full = the defaults (tf.Transform statistics + repeat-factor balancing)")
    parser.add_argument("--repeats", type=positive, default=3,
                        help="interleaved repetitions; every figure is the median over them, with its spread")
    parser.add_argument("--sizes", type=_scales, default="1,3",
                        help="corpus sizes, as multiples of --pairs, timed for both loops and every configuration; "
                             "the marginal figures use the smallest and the largest")
    parser.add_argument("--rss_sizes", type=_scales, default="1,4",
                        help="corpus sizes at which the peak RSS of --rss_config is compared (largest / smallest); "
                             "sizes not timed for that configuration get pipeline-only runs")
    parser.add_argument("--rss_config", choices=tuple(CONFIGS), default="full",
                        help="the pipeline configuration whose peak RSS is measured at --rss_sizes")
    parser.add_argument("--skip_rss", action="store_true", help="skip the peak-RSS comparison and its extra runs")
    parser.add_argument("--json", type=Path, default=None, metavar="OUT",
                        help="also write every figure (each run, each repetition, the medians and targets) as JSON")
    return parser


def json_record(args: argparse.Namespace, rss_sizes: Sequence[int], version: str, corpora: dict[int, Corpus],
                summary: dict, loops: LoopRuns, pipes: PipeRuns, timing: dict) -> dict:
    """Everything measured, JSON-ready: options, corpora, the summary and every single run."""
    return {
        "corpus": args.corpus, "pairs": args.pairs, "repeats": args.repeats, "sizes": args.sizes,
        "rss_sizes": list(rss_sizes), "rss_config": args.rss_config, "generator_version": version,
        "configs": {name: {"flags": list(CONFIGS[name]), "description": CONFIG_DESCRIPTIONS[name]}
                    for name in args.configs},
        "corpora": {str(s): {"listing": str(c.manifest), "rows": c.rows} for s, c in corpora.items()},
        "summary": summary,
        "loop_runs": [dataclasses.asdict(r) | {"cores": r.cores} for by_scale in loops.values()
                      for runs in by_scale.values() for r in runs],
        "pipeline_runs": [dataclasses.asdict(r) | {"cores": r.cores, "job_seconds": r.job_seconds,
                                                   "records_written": r.records_written}
                          for by_scale in pipes.values() for runs in by_scale.values() for r in runs],
        **timing,
    }


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    if len(args.sizes) < 2:
        build_parser().error("--sizes needs at least two sizes (the marginal figures need two points)")
    bench_started = time.perf_counter()
    load_before = os.getloadavg()
    rss_sizes = [] if args.skip_rss else args.rss_sizes
    workdir = args.workdir.resolve()
    corpora, generate_seconds, version = prepare_corpora(args.corpus, workdir, args.pairs,
                                                         sorted(set(args.sizes) | set(rss_sizes)))
    for folder in {corpus.manifest.parent for corpus in corpora.values()}:
        warm_page_cache(folder)
    plan = plan_runs(args.sizes, args.configs, args.rss_config, rss_sizes, args.repeats)
    loops, pipes = run_plan(plan, corpora, workdir)
    summary = summarise(corpora, args.sizes, args.configs, args.rss_config, rss_sizes, args.repeats, loops, pipes)
    print(render_report(args.corpus, corpora, args.sizes, args.configs, summary, loops, pipes))
    total = time.perf_counter() - bench_started
    load_after = os.getloadavg()
    print(f"\nbenchmark wall time {total:.0f} s (corpus generation {generate_seconds:.0f} s); load average before "
          f"{load_before[0]:.2f}, after {load_after[0]:.2f}; {os.cpu_count()} CPUs; corpus generator version {version}")
    if args.json:
        timing = {"benchmark_seconds": total, "generate_seconds": generate_seconds,
                  "load_average": {"before": load_before, "after": load_after}, "cpus": os.cpu_count()}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(json_record(args, rss_sizes, version, corpora, summary, loops, pipes,
                                                    timing), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
