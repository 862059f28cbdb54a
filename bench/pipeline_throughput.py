"""Pipeline throughput in two configurations, measured against a plain 2-process loop in the same run.

What is measured
    * The pipeline: ``python -m beam_pipeline --input MANIFEST --output DIR
      --num_classes 8`` run as a subprocess, exactly as a user runs it, in two
      configurations (``--configs``):

      ``base``  ``--no_stats --balance none``: read, validate and write the
                TFRecord shards, nothing else (the workload of the original
                throughput issue);
      ``full``  the defaults: the same plus the tf.Transform statistics
                (transform/, stats.json) and repeat-factor class balancing of
                the train split (repeat copies of images with rare classes).

      Its wall time therefore includes interpreter start-up, imports, pipeline
      construction and teardown. Every run writes into a fresh output folder.
    * The loop: the minimal work of validating a segmentation corpus, written
      directly with Pillow and numpy (independent of ``beam_pipeline.core``):
      read both files, check the format by content, decode both fully, check
      that the sizes are equal and every mask value is < num_classes or == 255,
      and compute the class histogram with ``np.bincount``. Three checks that
      cost next to nothing (the pixel limit before decoding, a single-channel
      mask, rows leaving the manifest's folder) make it accept exactly the
      pairs the pipeline accepts; the report compares the counts. It runs in a
      ``multiprocessing.Pool(2)`` (the platform's default start method, fork on
      Linux) over the manifest rows; its time includes reading the manifest,
      starting the pool and joining it.

    The pipeline does more than the loop by design (SHA-256 of both files,
    reading them again to write TFRecord shards, and in ``full`` the
    statistics and balancing), so the targets are ratios below 1.

    Throughput is counted in input pairs (manifest rows) for both sides and
    both configurations. With balancing, ``full`` writes more records than it
    accepts pairs (the repeat copies); the report shows ``counts.records_written``
    from each run's manifest.json next to the pairs.

    Both sides run on the same seeded corpus (``tools.sample_corpus``),
    at several corpus sizes (``--sizes``, multiples of ``--pairs``),
    interleaved (loop 1x, base 1x, full 1x, loop 3x, base 3x, full 3x, ...;
    the order within a size is reversed on every other repeat) so that slow
    phases of a shared machine hit every side alike. With ``--repeats R`` the
    median of each is used.

Why ratios
    The machine is shared and noisy, so absolute pairs/s mean little from one
    run to the next. A ratio of two figures taken side by side in one run
    cancels most of that noise: the whole-run ratio (pipeline pairs/s / loop
    pairs/s), the marginal ratio (loop seconds per extra pair / pipeline
    seconds per extra pair, from the smallest and largest size: it leaves out
    every fixed cost), and the peak-RSS ratio of the pipeline at two sizes
    (``--rss_sizes``, for the ``--rss_config`` configuration; flat memory
    means the pipeline streams its input).

    The pipeline's fixed cost is the intercept of its time against corpus size:
    ``t_small - n_small * marginal_seconds_per_pair``.

What statistics and balancing add
    ``full`` minus ``base``, from the same corpora in the same run: the added
    fixed cost (difference of the intercepts), the added marginal cost per
    pair (difference of the seconds per extra pair, also as a per cent of
    ``base``'s), and the added wall time at each size.

Targets
    base: whole-run ratio at the smallest size >= 0.5 (start-up included),
    marginal ratio >= 0.7, peak RSS largest/smallest ``--rss_sizes`` <= 1.2
    (judged on ``--rss_config``). full: marginal ratio >= 0.7, and the fixed
    cost that statistics and balancing add (full intercept - base intercept)
    < 25 s; the full pipeline's total fixed cost is printed next to it.

Memory
    Each pipeline subprocess is reaped with ``os.wait4``, whose ``ru_maxrss`` is
    the peak RSS of that one process (Linux reports the larger of the process
    and its reaped descendants, never their sum). To catch memory that this
    misses, a sampler thread walks ``/proc`` during the run and records the
    number of descendant processes and the summed RSS of the process tree; the
    report says whether any child process was seen. The same samples give the
    number of cores the pipeline used over time.

Noise
    For every run the CPU time used meanwhile by other processes on the machine
    (from /proc/stat, less the measured processes' own) is reported, so a run
    disturbed by a neighbour can be recognised; the report warns above
    ``NOISY_CORES``.

Corpora are generated once under ``--workdir`` (one folder per pairs, scale
and version of the generator: the folder name ends with the first 8 hex digits
of the SHA-256 of ``tools/sample_corpus.py``) and reused; folders left
by another version of the generator are deleted. Generating corpora, warming
the page cache and deleting outputs are not timed.
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

import numpy as np
from PIL import Image

import common
from common import (MB, NOISY_CORES, NUM_CLASSES, ROOT, Corpus, ensure_corpora, generator_version, log,
                    machine_busy_seconds, other_cores, positive, process_tree, warm_page_cache)

IGNORE_LABEL = 255
MAX_PIXELS = 64_000_000  # the pipeline's default --max_pixels, so the decompression bomb is refused alike
LOOP_PROCESSES = 2
LOOP_CHUNKSIZE = 8
SAMPLE_SECONDS = 0.25
TIMELINE_BINS = 10

TARGET_WHOLE_RATIO = 0.5   # pipeline pairs/s / loop pairs/s at the smallest size, start-up included
TARGET_MARGINAL_RATIO = 0.7
TARGET_RSS_RATIO = 1.2     # peak RSS at the largest --rss_sizes / at the smallest
TARGET_ADDED_FIXED_COST_S = 25.0  # full intercept - base intercept: what statistics and balancing add

# Pipeline configurations: name -> extra command-line flags. Order matters: "full" is compared with "base".
CONFIGS: dict[str, tuple[str, ...]] = {
    "base": ("--no_stats", "--balance", "none"),  # read, validate, shard
    "full": (),                                   # defaults: tf.Transform statistics + repeat-factor balancing
}
CONFIG_DESCRIPTIONS = {
    "base": "read, validate, shard",
    "full": "defaults: tf.Transform statistics + repeat-factor balancing",
}
_OPERATORS: dict[str, Callable[[float, float], bool]] = {">=": operator.ge, "<=": operator.le, "<": operator.lt}

_DECODE_ERRORS = (OSError, ValueError, SyntaxError, EOFError, struct.error, zlib.error, IndexError,
                  Image.DecompressionBombError)
_IMAGE_FORMATS = ("JPEG", "PNG")
_MASK_MODES = ("L", "P", "I;16", "I;16B", "I;16L", "I")
_READING_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) INFO .*: Reading ")


# --------------------------------------------------------------------------
# Corpora
# --------------------------------------------------------------------------
# --------------------------------------------------------------------------
# The plain loop
# --------------------------------------------------------------------------
def read_manifest(manifest: Path) -> list[tuple[str, str]]:
    """(image path, mask path) of every row, resolved against the manifest's folder."""
    root = manifest.parent
    with manifest.open(newline="", encoding="utf-8") as handle:
        return [(os.path.normpath(root / row["image"]), os.path.normpath(root / row["mask"]))
                for row in csv.DictReader(handle)]


def _decode(path: str, allowed: tuple[str, ...]) -> Image.Image:
    """Open ``path``, check its format by content and pixel count, and decode it fully."""
    with open(path, "rb") as handle:
        data = handle.read()
    if not data:
        raise ValueError("empty file")
    image = Image.open(io.BytesIO(data))
    if image.format not in allowed:
        raise ValueError(f"format {image.format}")
    if image.width * image.height > MAX_PIXELS:
        raise ValueError("too many pixels")
    image.load()
    return image


def check_pair(paths: tuple[str, str]) -> Optional[tuple[int, ...]]:
    """Loop worker: the class histogram (num_classes counts + ignore count), or None when invalid."""
    image_path, mask_path = paths
    try:
        image = _decode(image_path, _IMAGE_FORMATS)
        mask = _decode(mask_path, ("PNG",))
        if mask.mode not in _MASK_MODES or image.size != mask.size:
            return None
        counts = np.bincount(np.asarray(mask).ravel(), minlength=256)
    except _DECODE_ERRORS:
        return None
    if counts[NUM_CLASSES:IGNORE_LABEL].any() or counts[IGNORE_LABEL + 1:].any():
        return None
    return tuple(int(c) for c in counts[:NUM_CLASSES]) + (int(counts[IGNORE_LABEL]),)


def _inside(root: str, paths: tuple[str, str]) -> bool:
    """Both paths lie under ``root`` (the pipeline rejects rows that leave the manifest's folder)."""
    return all(path.startswith(root + os.sep) for path in paths)


@dataclasses.dataclass
class LoopRun:
    scale: int
    seconds: float
    cpu_seconds: float
    valid: int
    rejected: int
    other_cores: float  # CPU used by other processes on the machine meanwhile (noise), in cores

    @property
    def cores(self) -> float:
        return self.cpu_seconds / self.seconds


def run_loop(corpus: Corpus) -> LoopRun:
    """The minimal work over every manifest row in a Pool(2); timed from reading the manifest to join."""
    cpu_before, busy_before = common.cpu_seconds(), machine_busy_seconds()
    started = time.perf_counter()
    rows = read_manifest(corpus.manifest)
    root = os.path.normpath(corpus.manifest.parent)
    inside = [paths for paths in rows if _inside(root, paths)]
    histogram = np.zeros(NUM_CLASSES + 1, dtype=np.int64)  # summed like the pipeline's class statistics
    valid = 0
    with multiprocessing.Pool(LOOP_PROCESSES) as pool:
        for result in pool.imap_unordered(check_pair, inside, chunksize=LOOP_CHUNKSIZE):
            if result is not None:
                valid += 1
                histogram += result
        pool.close()
        pool.join()  # worker shutdown is part of the loop's time
    seconds = time.perf_counter() - started
    cpu = common.cpu_seconds() - cpu_before
    return LoopRun(corpus.scale, seconds, cpu, valid, len(rows) - valid, other_cores(busy_before, cpu, seconds))


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
LoopRuns = dict[int, list[LoopRun]]                  # scale -> runs
PipeRuns = dict[str, dict[int, list[PipelineRun]]]   # configuration -> scale -> runs


def plan_runs(sizes: Sequence[int], configs: Sequence[str], rss_config: str, rss_sizes: Sequence[int],
              repeats: int) -> list[tuple[int, str, int]]:
    """(repeat, "loop" or a configuration, scale) in interleaved order, reversed within a size every other
    repeat. Sizes of ``rss_sizes`` that no timed run of ``rss_config`` covers get pipeline-only runs."""
    kinds = ("loop", *configs)
    rss_only = [s for s in rss_sizes if s not in sizes or rss_config not in configs]
    plan = []
    for repeat in range(repeats):
        order = kinds if repeat % 2 == 0 else kinds[::-1]
        plan += [(repeat, kind, scale) for scale in sizes for kind in order]
        plan += [(repeat, rss_config, scale) for scale in rss_only]
    return plan


def run_plan(plan: Sequence[tuple[int, str, int]], corpora: dict[int, Corpus],
             workdir: Path) -> tuple[LoopRuns, PipeRuns]:
    """Run every planned measurement in order; returns the runs by scale (and configuration)."""
    loops: LoopRuns = {}
    pipes: PipeRuns = {}
    for repeat, kind, scale in plan:
        corpus = corpora[scale]
        if kind == "loop":
            loop_run = run_loop(corpus)
            loops.setdefault(scale, []).append(loop_run)
            log(f"loop          {scale}x  {corpus.rows} pairs  {loop_run.seconds:.1f} s  "
                f"cores {loop_run.cores:.2f}  other load {loop_run.other_cores:.2f}")
            continue
        pipe_run = run_pipeline(corpus, kind, workdir / "out" / f"{kind}_x{scale}",
                                workdir / "logs" / f"pipeline_{kind}_x{scale}_r{repeat}.log")
        pipes.setdefault(kind, {}).setdefault(scale, []).append(pipe_run)
        log(f"pipeline {kind:<4} {scale}x  {corpus.rows} pairs  {pipe_run.seconds:.1f} s  "
            f"cores {pipe_run.cores:.2f}  records {pipe_run.records_written}  "
            f"peak RSS {pipe_run.peak_rss_mb:.0f} MB  other load {pipe_run.other_cores:.2f}")
    return loops, pipes


# --------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------
def median_of(runs: Iterable, field: str) -> Optional[float]:
    """Median of one field over runs, leaving out runs where it is unknown (None when all are)."""
    values = [getattr(run, field) for run in runs]
    known = [value for value in values if value is not None]
    return statistics.median(known) if known else None


def _ratio(numerator: Optional[float], denominator: Optional[float]) -> Optional[float]:
    if numerator is None or denominator is None or denominator <= 0:
        return None
    return numerator / denominator


def _difference(minuend: Optional[float], subtrahend: Optional[float]) -> Optional[float]:
    if minuend is None or subtrahend is None:
        return None
    return minuend - subtrahend


def _fit(small: tuple[int, float], large: tuple[int, float]) -> tuple[float, float]:
    """(seconds per extra pair, intercept) of the line through two (pairs, seconds) points."""
    per_pair = (large[1] - small[1]) / (large[0] - small[0])
    return per_pair, small[1] - small[0] * per_pair


def _size_row(corpus: Corpus, loops: list[LoopRun], pipes: list[PipelineRun]) -> dict:
    """Medians of one configuration at one size, next to the loop's."""
    n = corpus.rows
    loop_s, pipe_s = median_of(loops, "seconds"), median_of(pipes, "seconds")
    return {"scale": corpus.scale, "pairs": n, "loop_s": loop_s, "loop_pairs_per_s": n / loop_s,
            "pipeline_s": pipe_s, "pipeline_pairs_per_s": n / pipe_s, "ratio": loop_s / pipe_s,
            "records_written": median_of(pipes, "records_written"),
            "loop_cores": median_of(loops, "cores"), "pipeline_cores": median_of(pipes, "cores"),
            "loop_other_cores": median_of(loops, "other_cores"),
            "pipeline_other_cores": median_of(pipes, "other_cores"),
            "pipeline_startup_s": median_of(pipes, "startup_seconds"),
            "pipeline_job_s": median_of(pipes, "job_seconds"),
            "pipeline_exit_s": median_of(pipes, "exit_seconds")}


def summarise_config(corpora: dict[int, Corpus], sizes: Sequence[int], loops: LoopRuns,
                     pipes: dict[int, list[PipelineRun]]) -> dict:
    """One configuration: medians per size, marginal ratio and fixed costs (intercepts)."""
    rows = [_size_row(corpora[scale], loops[scale], pipes[scale]) for scale in sizes]
    summary: dict = {"sizes": rows, "marginal_ratio": None, "pipeline_s_per_pair": None,
                     "pipeline_fixed_cost_s": None, "loop_s_per_pair": None, "loop_fixed_cost_s": None,
                     "max_child_processes": max(run.max_descendants for runs in pipes.values() for run in runs)}
    if len(rows) < 2:
        return summary
    small, large = rows[0], rows[-1]
    pipe_per_pair, pipe_fixed = _fit((small["pairs"], small["pipeline_s"]), (large["pairs"], large["pipeline_s"]))
    loop_per_pair, loop_fixed = _fit((small["pairs"], small["loop_s"]), (large["pairs"], large["loop_s"]))
    summary.update(marginal_ratio=_ratio(loop_per_pair, pipe_per_pair), pipeline_s_per_pair=pipe_per_pair,
                   loop_s_per_pair=loop_per_pair, loop_fixed_cost_s=loop_fixed)
    if pipe_per_pair > 0:  # otherwise noise swamped the difference and an intercept means nothing
        summary["pipeline_fixed_cost_s"] = pipe_fixed
    return summary


def summarise_added(base: dict, full: dict) -> dict:
    """What statistics and balancing add: full minus base, per size and for the fitted lines."""
    per_pair = _difference(full["pipeline_s_per_pair"], base["pipeline_s_per_pair"])
    share = _ratio(per_pair, base["pipeline_s_per_pair"])
    return {
        "fixed_cost_s": _difference(full["pipeline_fixed_cost_s"], base["pipeline_fixed_cost_s"]),
        "base_fixed_cost_s": base["pipeline_fixed_cost_s"], "full_fixed_cost_s": full["pipeline_fixed_cost_s"],
        "s_per_pair": per_pair, "pct_of_base_s_per_pair": None if share is None else 100 * share,
        "base_s_per_pair": base["pipeline_s_per_pair"], "full_s_per_pair": full["pipeline_s_per_pair"],
        "sizes": [{"scale": b["scale"], "pairs": b["pairs"], "seconds": f["pipeline_s"] - b["pipeline_s"],
                   "pct_of_base": 100 * (f["pipeline_s"] / b["pipeline_s"] - 1),
                   "base_records_written": b["records_written"], "full_records_written": f["records_written"]}
                  for b, f in zip(base["sizes"], full["sizes"])],
    }


def summarise_rss(config: str, pipes: dict[int, list[PipelineRun]], rss_sizes: Sequence[int]) -> dict:
    """Peak RSS of one configuration at each of ``rss_sizes`` and the largest/smallest ratio."""
    rss = {str(s): median_of(pipes[s], "peak_rss_mb") for s in rss_sizes}
    ratio = _ratio(rss[str(rss_sizes[-1])], rss[str(rss_sizes[0])]) if len(rss_sizes) >= 2 else None
    return {"config": config, "sizes": list(rss_sizes), "rss_mb": rss,
            "tree_rss_mb": {str(s): median_of(pipes[s], "tree_peak_rss_mb") for s in rss_sizes},
            "ratio": ratio, "max_child_processes": max(run.max_descendants for s in rss_sizes for run in pipes[s])}


def _fmt(value: Optional[float], spec: str = ".2f", unit: str = "") -> str:
    return "n/a" if value is None else format(value, spec) + unit


def _target(name: str, value: Optional[float], op: str, limit: float, note: str = "") -> dict:
    verdict = "n/a" if value is None else ("PASS" if _OPERATORS[op](value, limit) else "FAIL")
    return {"name": name, "value": value, "op": op, "target": limit, "verdict": verdict, "note": note}


def judge_targets(configs: dict[str, dict], added: Optional[dict], rss: Optional[dict], rss_config: str,
                  sizes: Sequence[int]) -> list[dict]:
    """The targets of the configurations that were run (n/a where a figure could not be measured)."""
    targets = []
    if "base" in configs:
        base = configs["base"]
        targets += [_target(f"base: whole-run ratio at {sizes[0]}x", base["sizes"][0]["ratio"], ">=",
                            TARGET_WHOLE_RATIO, "start-up included"),
                    _target("base: marginal ratio", base["marginal_ratio"], ">=", TARGET_MARGINAL_RATIO)]
    if rss is None:
        targets.append(_target(f"{rss_config}: peak RSS ratio", None, "<=", TARGET_RSS_RATIO, "skipped"))
    else:
        targets.append(_target(f"{rss_config}: peak RSS {rss['sizes'][-1]}x/{rss['sizes'][0]}x", rss["ratio"],
                               "<=", TARGET_RSS_RATIO))
    if "full" in configs:
        full_fixed = configs["full"]["pipeline_fixed_cost_s"]
        note = ("needs --configs base,full" if added is None else
                f"full pipeline's total fixed cost {_fmt(full_fixed, '.1f')} s")
        targets += [_target("full: marginal ratio", configs["full"]["marginal_ratio"], ">=", TARGET_MARGINAL_RATIO),
                    _target("full: fixed cost added by stats+balancing (s)",
                            None if added is None else added["fixed_cost_s"], "<", TARGET_ADDED_FIXED_COST_S, note)]
    return targets


def summarise(corpora: dict[int, Corpus], sizes: Sequence[int], configs: Sequence[str], rss_config: str,
              rss_sizes: Sequence[int], loops: LoopRuns, pipes: PipeRuns) -> dict:
    """Every figure of the report and the targets, as one JSON-ready dict."""
    per_config = {name: summarise_config(corpora, sizes, loops, pipes[name]) for name in configs}
    added = summarise_added(per_config["base"], per_config["full"]) if {"base", "full"} <= set(configs) else None
    rss = summarise_rss(rss_config, pipes[rss_config], rss_sizes) if rss_sizes else None
    return {"configs": per_config, "added": added, "rss": rss,
            "targets": judge_targets(per_config, added, rss, rss_config, sizes)}


# --------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------
def _config_title(name: str) -> str:
    flags = " ".join(CONFIGS[name]) or "no extra flags"
    return f"== {name}: {flags} ({CONFIG_DESCRIPTIONS[name]}) =="


def render_config(name: str, summary: dict) -> list[str]:
    """Table of one configuration against the loop, its marginal ratio and fixed cost."""
    lines = [_config_title(name),
             f"{'corpus':<7}{'pairs':>7}{'loop_s':>9}{'loop_pairs/s':>14}{'pipeline_s':>12}"
             f"{'pipeline_pairs/s':>18}{'ratio':>7}{'records':>9}"]
    for row in summary["sizes"]:
        lines.append(f"{str(row['scale']) + 'x':<7}{row['pairs']:>7}{row['loop_s']:>9.1f}"
                     f"{row['loop_pairs_per_s']:>14.1f}{row['pipeline_s']:>12.1f}"
                     f"{row['pipeline_pairs_per_s']:>18.1f}{row['ratio']:>7.2f}{row['records_written']:>9.0f}")
    lines.append(f"marginal ratio (loop s/pair \u00f7 pipeline s/pair): {_fmt(summary['marginal_ratio'])}   "
                 f"pipeline fixed cost: {_fmt(summary['pipeline_fixed_cost_s'], '.1f', ' s')}")
    if summary["pipeline_s_per_pair"] is not None:
        lines.append(f"  per extra pair: loop {summary['loop_s_per_pair'] * 1e3:.2f} ms, pipeline "
                     f"{summary['pipeline_s_per_pair'] * 1e3:.2f} ms; loop fixed cost "
                     f"{summary['loop_fixed_cost_s']:.1f} s")
    lines.append("  pairs/s count input pairs (manifest rows); records = counts.records_written of manifest.json")
    return lines


def _milli(seconds: Optional[float]) -> Optional[float]:
    return None if seconds is None else seconds * 1e3


def render_added(added: dict) -> list[str]:
    """What statistics and balancing add (full - base)."""
    per_pair = added["s_per_pair"]
    lines = ["== what statistics and balancing add (full - base) ==",
             f"fixed cost: {_fmt(added['fixed_cost_s'], '+.1f', ' s')} (base "
             f"{_fmt(added['base_fixed_cost_s'], '.1f', ' s')}, full {_fmt(added['full_fixed_cost_s'], '.1f', ' s')})",
             f"marginal cost per pair: {_fmt(_milli(per_pair), '+.2f', ' ms')} "
             f"({_fmt(added['pct_of_base_s_per_pair'], '+.0f', ' %')} of base; base "
             f"{_fmt(_milli(added['base_s_per_pair']), '.2f', ' ms')}, full "
             f"{_fmt(_milli(added['full_s_per_pair']), '.2f', ' ms')})"]
    for size in added["sizes"]:
        copies = size["full_records_written"] - size["base_records_written"]
        lines.append(f"  {str(size['scale']) + 'x':<4} wall time {size['seconds']:+.1f} s "
                     f"({size['pct_of_base']:+.0f} %); records written: base {size['base_records_written']:.0f}, full "
                     f"{size['full_records_written']:.0f} ({copies:+.0f} repeat copies)")
    return lines


def render_rss(rss: dict) -> list[str]:
    """Peak RSS of the --rss_config configuration at each size."""
    sizes = ", ".join(f"{s}x {rss['rss_mb'][str(s)]:.0f} MB" for s in rss["sizes"])
    tree = ", ".join(f"{s}x {rss['tree_rss_mb'][str(s)]:.0f} MB" for s in rss["sizes"])
    children = rss["max_child_processes"]
    return [f"peak RSS ({rss['config']}): {sizes}, ratio {_fmt(rss['ratio'])}",
            f"  sampled process-tree RSS: {tree}; child processes seen: {children}"
            + (" (ru_maxrss misses their sum: use the tree figure)" if children else
               " (single process: ru_maxrss is complete)")]


def render_diagnostics(summary: dict, loops: LoopRuns, pipes: PipeRuns) -> list[str]:
    """Cores used, the pipeline's wall-time split, noise, per-run core timelines and agreement of counts."""
    lines = ["diagnostics (medians): cores used (CPU s / wall s); pipeline wall time split into start-up "
             "(spawn to run() starting: interpreter, imports, checks), job, and exit (after manifest.json)"]
    for name, config in summary["configs"].items():
        for row in config["sizes"]:
            lines.append(f"  {str(row['scale']) + 'x':<4}{name:<5} cores: loop {row['loop_cores']:.2f}, pipeline "
                         f"{row['pipeline_cores']:.2f}   pipeline: start-up "
                         f"{_fmt(row['pipeline_startup_s'], '.1f', ' s')}, "
                         f"job {_fmt(row['pipeline_job_s'], '.1f', ' s')}, "
                         f"exit {_fmt(row['pipeline_exit_s'], '.1f', ' s')}")
    for scale, runs in sorted(loops.items()):
        noise = [f"loop {median_of(runs, 'other_cores'):.2f}"]
        noise += [f"{name} {median_of(pipes[name][scale], 'other_cores'):.2f}"
                  for name in summary["configs"] if scale in pipes[name]]
        lines.append(f"  {str(scale) + 'x':<4}CPU used by other processes meanwhile (noise), cores: "
                     + ", ".join(noise))
    all_runs = [run for runs in loops.values() for run in runs]
    all_runs += [run for by_scale in pipes.values() for runs in by_scale.values() for run in runs]
    noisy = max(run.other_cores for run in all_runs)
    if noisy > NOISY_CORES:
        lines.append(f"  WARNING: other processes used up to {noisy:.2f} cores during a run; the ratios are "
                     "less reliable (use --repeats 3 or more)")
    for name, by_scale in pipes.items():
        for scale, runs in sorted(by_scale.items()):
            timeline = " ".join(f"{c:.1f}" for c in runs[-1].cores_timeline)
            lines.append(f"  pipeline {name} {scale}x cores used per tenth of the run: {timeline}")
    lines += [_agreement(name, loops, pipes[name]) for name in summary["configs"]]
    return lines


def _agreement(name: str, loops: LoopRuns, pipes: dict[int, list[PipelineRun]]) -> str:
    """Both sides accepted the same pairs (pipeline written + duplicates == loop valid)."""
    parts = []
    for scale in sorted(loops):
        counts = pipes[scale][-1].counts
        accepted = counts["written"] + counts["duplicates"]
        loop = loops[scale][-1]
        same = "same" if accepted == loop.valid else "DIFFERENT"
        parts.append(f"{scale}x pipeline {accepted} valid / {counts['rejected']['total']} rejected, "
                     f"loop {loop.valid} / {loop.rejected} ({same})")
    return f"  accepted pairs ({name}): " + "; ".join(parts)


def render_targets(targets: Sequence[dict]) -> list[str]:
    lines = ["targets:"]
    for target in targets:
        note = f"  ({target['note']})" if target["note"] else ""
        lines.append(f"  {target['name']:<48}{_fmt(target['value']):>7}  {target['op']:<2} "
                     f"{target['target']:.2f}  {target['verdict']}{note}")
    return lines


def render_report(summary: dict, loops: LoopRuns, pipes: PipeRuns) -> str:
    lines: list[str] = []
    for name, config in summary["configs"].items():
        lines += render_config(name, config) + [""]
    if summary["added"] is not None:
        lines += render_added(summary["added"]) + [""]
    if summary["rss"] is not None:
        lines += render_rss(summary["rss"]) + [""]
    lines += render_diagnostics(summary, loops, pipes) + [""]
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
        description="Pipeline pairs/s, in a base and a full configuration, next to a plain 2-process "
                    "Pillow+numpy loop on the same corpus, in the same run, the ratios between them and what "
                    "statistics and balancing add (see the module docstring).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--pairs", type=positive, default=2000,
                        help="valid segmentation pairs in the 1x corpus (images 480x360 to 640x480); about "
                             "12 broken inputs are added once per corpus")
    parser.add_argument("--workdir", type=Path, default=ROOT / "build" / "bench",
                        help="folder for the cached corpora (one per pairs, scale and generator version; "
                             "those of other generator versions are deleted), pipeline outputs (deleted "
                             "after each run) and pipeline logs")
    parser.add_argument("--configs", type=_configs, default="base,full",
                        help="pipeline configurations to time, comma-separated: base = --no_stats --balance "
                             "none (read, validate, shard); full = the defaults (tf.Transform statistics + "
                             "repeat-factor balancing). With both, the report shows what full adds to base")
    parser.add_argument("--repeats", type=positive, default=1,
                        help="run every measurement this many times, interleaved, and use the medians")
    parser.add_argument("--sizes", type=_scales, default="1,3",
                        help="corpus sizes, as multiples of --pairs, timed for the loop and every "
                             "configuration; the marginal ratio uses the smallest and largest")
    parser.add_argument("--rss_sizes", type=_scales, default="1,4",
                        help="corpus sizes at which the peak RSS of --rss_config is compared (largest / "
                             "smallest); sizes not timed for that configuration get pipeline-only runs")
    parser.add_argument("--rss_config", choices=tuple(CONFIGS), default="base",
                        help="the pipeline configuration whose peak RSS is measured at --rss_sizes")
    parser.add_argument("--skip_rss", action="store_true",
                        help="skip the peak-RSS comparison and its extra pipeline runs")
    parser.add_argument("--json", type=Path, default=None, metavar="OUT",
                        help="also write every figure (each run, the medians, ratios, added costs and targets) "
                             "as JSON")
    return parser


def json_record(args: argparse.Namespace, rss_sizes: Sequence[int], version: str, corpora: dict[int, Corpus],
                summary: dict, loops: LoopRuns, pipes: PipeRuns, timing: dict) -> dict:
    """Everything measured, JSON-ready: options, corpora, the summary and every single run."""
    return {
        "pairs": args.pairs, "repeats": args.repeats, "sizes": args.sizes, "rss_sizes": list(rss_sizes),
        "configs": {name: {"flags": list(CONFIGS[name]), "description": CONFIG_DESCRIPTIONS[name]}
                    for name in args.configs},
        "rss_config": args.rss_config, "generator_version": version,
        "corpora": {str(s): {"manifest": str(c.manifest), "rows": c.rows} for s, c in corpora.items()},
        "summary": summary,
        "loop_runs": [dataclasses.asdict(r) | {"cores": r.cores} for runs in loops.values() for r in runs],
        "pipeline_runs": [dataclasses.asdict(r) | {"cores": r.cores, "job_seconds": r.job_seconds,
                                                   "records_written": r.records_written}
                          for by_scale in pipes.values() for runs in by_scale.values() for r in runs],
        **timing,
    }


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    bench_started = time.perf_counter()
    load_before = os.getloadavg()
    rss_sizes = [] if args.skip_rss else args.rss_sizes
    workdir = args.workdir.resolve()
    version = generator_version()
    corpora, generate_seconds = ensure_corpora(workdir, args.pairs, sorted(set(args.sizes) | set(rss_sizes)),
                                               version)
    for corpus in corpora.values():
        warm_page_cache(corpus.manifest.parent)
    plan = plan_runs(args.sizes, args.configs, args.rss_config, rss_sizes, args.repeats)
    loops, pipes = run_plan(plan, corpora, workdir)
    summary = summarise(corpora, args.sizes, args.configs, args.rss_config, rss_sizes, loops, pipes)
    print(render_report(summary, loops, pipes))
    total = time.perf_counter() - bench_started
    load_after = os.getloadavg()
    print(f"\nbenchmark wall time {total:.0f} s (corpus generation {generate_seconds:.0f} s); "
          f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f}; {os.cpu_count()} CPUs; "
          f"corpus generator version {version}")
    if args.json:
        timing = {"benchmark_seconds": total, "generate_seconds": generate_seconds,
                  "load_average": {"before": load_before, "after": load_after}, "cpus": os.cpu_count()}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(json_record(args, rss_sizes, version, corpora, summary, loops, pipes,
                                                    timing), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
