"""Pipeline throughput, measured against a plain 2-process loop in the same run.

What is measured
    * The pipeline: ``python -m beam_pipeline --input MANIFEST --output DIR
      --num_classes 8`` run as a subprocess, exactly as a user runs it. Its wall
      time therefore includes interpreter start-up, imports, pipeline
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
    reading them again to write TFRecord shards), so the targets are ratios
    below 1.

    Both run on the same seeded corpus (``beam_pipeline.sample_corpus``), at
    several corpus sizes (``--sizes``, multiples of ``--pairs``), interleaved
    (loop 1x, pipeline 1x, loop 3x, pipeline 3x, ...; the order within a size
    flips on every other repeat) so that slow phases of a shared machine hit
    both sides alike. With ``--repeats R`` the median of each is used.

Why ratios
    The machine is shared and noisy, so absolute pairs/s mean little from one
    run to the next. A ratio of two figures taken side by side in one run
    cancels most of that noise: the whole-run ratio (pipeline pairs/s / loop
    pairs/s), the marginal ratio (loop seconds per extra pair / pipeline
    seconds per extra pair, from the smallest and largest size: it leaves out
    every fixed cost), and the peak-RSS ratio of the pipeline at two sizes
    (``--rss_sizes``; flat memory means the pipeline streams its input).

    The pipeline's fixed cost is the intercept of its time against corpus size:
    ``t_small - n_small * marginal_seconds_per_pair``.

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

Corpora are generated once under ``--workdir`` (one folder per pairs and scale)
and reused; generating them, warming the page cache and deleting outputs are
not timed.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import csv
import dataclasses
import io
import json
import multiprocessing
import os
import re
import resource
import shutil
import statistics
import struct
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path
from typing import Iterable, Optional, Sequence

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
NUM_CLASSES = 8
IGNORE_LABEL = 255
MAX_PIXELS = 64_000_000  # the pipeline's default --max_pixels, so the decompression bomb is refused alike
LOOP_PROCESSES = 2
LOOP_CHUNKSIZE = 8
GENERATOR_CLASS_IMAGES = 8  # the classification part of the sample corpus is not used; keep it tiny
SAMPLE_SECONDS = 0.25
NOISY_CORES = 0.25  # other processes' CPU use during a run above which the report warns
TIMELINE_BINS = 10
MB = 1024 * 1024

TARGET_WHOLE_RATIO = 0.5   # pipeline pairs/s / loop pairs/s at the smallest size, start-up included
TARGET_MARGINAL_RATIO = 0.7
TARGET_RSS_RATIO = 1.2     # peak RSS at the largest --rss_sizes / at the smallest

_DECODE_ERRORS = (OSError, ValueError, SyntaxError, EOFError, struct.error, zlib.error, IndexError,
                  Image.DecompressionBombError)
_IMAGE_FORMATS = ("JPEG", "PNG")
_MASK_MODES = ("L", "P", "I;16", "I;16B", "I;16L", "I")
_READING_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) INFO .*: Reading ")


# --------------------------------------------------------------------------
# Corpora
# --------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Corpus:
    scale: int
    manifest: Path
    rows: int  # manifest rows = pairs attempted by both sides (valid and broken)


def corpus_dir(workdir: Path, pairs: int, scale: int) -> Path:
    return workdir / f"corpus_{pairs}pairs_x{scale}"


def _generate_command(out: Path, pairs: int, scale: int) -> list[str]:
    return [sys.executable, "-m", "beam_pipeline.sample_corpus", str(out), "--num_pairs", str(pairs),
            "--scale", str(scale), "--num_class_images", str(GENERATOR_CLASS_IMAGES), "--overwrite"]


def _generate(workdir: Path, pairs: int, scale: int) -> None:
    """Write one corpus into a temporary folder, renamed into place only when complete."""
    final = corpus_dir(workdir, pairs, scale)
    tmp = final.with_name(final.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.parent.mkdir(parents=True, exist_ok=True)
    log(f"generating corpus {pairs} pairs x{scale} -> {final}")
    command = _generate_command(tmp, pairs, scale)
    completed = subprocess.run(command, cwd=ROOT, stdout=subprocess.DEVNULL, check=False)
    if completed.returncode != 0:
        raise RuntimeError(f"corpus generation failed (exit {completed.returncode}): {' '.join(command)}")
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)


def ensure_corpora(workdir: Path, pairs: int, scales: Sequence[int]) -> tuple[dict[int, Corpus], float]:
    """Generate the missing corpora, two at a time; returns them by scale and the seconds spent."""
    started = time.perf_counter()
    missing = [s for s in sorted(scales, reverse=True)
               if not (corpus_dir(workdir, pairs, s) / "segmentation" / "manifest.csv").exists()]
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as executor:
        for future in [executor.submit(_generate, workdir, pairs, scale) for scale in missing]:
            future.result()
    corpora = {}
    for scale in scales:
        manifest = corpus_dir(workdir, pairs, scale) / "segmentation" / "manifest.csv"
        corpora[scale] = Corpus(scale, manifest, len(read_manifest(manifest)))
    return corpora, time.perf_counter() - started


def warm_page_cache(corpus: Corpus) -> None:
    """Read every file once so that neither side pays for a cold disk (not timed)."""
    for path in corpus.manifest.parent.rglob("*"):
        if path.is_file():
            path.read_bytes()


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


def machine_busy_seconds() -> float:
    """CPU seconds all processes have used since boot, from the first line of /proc/stat."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(value) for value in fields)
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def other_cores(busy_before: float, own_cpu_seconds: float, seconds: float) -> float:
    """Cores used by processes other than the measured ones during ``seconds``."""
    return max(0.0, (machine_busy_seconds() - busy_before - own_cpu_seconds) / seconds)


def _cpu_seconds() -> float:
    """CPU time of this process plus its reaped children so far."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


def run_loop(corpus: Corpus) -> LoopRun:
    """The minimal work over every manifest row in a Pool(2); timed from reading the manifest to join."""
    cpu_before, busy_before = _cpu_seconds(), machine_busy_seconds()
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
    cpu = _cpu_seconds() - cpu_before
    return LoopRun(corpus.scale, seconds, cpu, valid, len(rows) - valid, other_cores(busy_before, cpu, seconds))


# --------------------------------------------------------------------------
# The pipeline, as a subprocess
# --------------------------------------------------------------------------
def _read_stat(pid: str) -> Optional[tuple[int, float, int]]:
    """(parent pid, CPU ticks, RSS pages) of a process from /proc, or None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[1]), float(fields[11]) + float(fields[12]), int(fields[21])


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
        stats = {pid: stat for pid in os.listdir("/proc") if pid.isdigit()
                 for stat in [_read_stat(pid)] if stat is not None}
        tree = {str(self._pid)}
        grew = True
        while grew:
            children = {pid for pid, (ppid, _, _) in stats.items() if str(ppid) in tree} - tree
            tree |= children
            grew = bool(children)
        members = [stats[pid] for pid in tree if pid in stats]
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
    def job_seconds(self) -> Optional[float]:
        """From run() starting the job to manifest.json being written."""
        if self.startup_seconds is None:
            return None
        return self.seconds - self.startup_seconds - self.exit_seconds


def pipeline_command(corpus: Corpus, output: Path) -> list[str]:
    return [sys.executable, "-m", "beam_pipeline", "--input", str(corpus.manifest), "--output", str(output),
            "--num_classes", str(NUM_CLASSES), "--overwrite"]


def _job_start_time(log_path: Path) -> Optional[float]:
    """Wall-clock time of run()'s "Reading <input>" log line (logged as the job starts), if found."""
    for line in log_path.read_text(errors="replace").splitlines():
        match = _READING_LINE.match(line)
        if match:
            stamp, millis = match.groups()
            return time.mktime(time.strptime(stamp, "%Y-%m-%d %H:%M:%S")) + int(millis) / 1000
    return None


def run_pipeline(corpus: Corpus, output: Path, log_path: Path) -> PipelineRun:
    """One pipeline subprocess into a fresh ``output``; wall time from spawn to reaping."""
    shutil.rmtree(output, ignore_errors=True)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    command = pipeline_command(corpus, output)
    bench_cpu_before, busy_before = _cpu_seconds(), machine_busy_seconds()
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
    # _cpu_seconds() now includes the reaped pipeline, so its delta is the pipeline plus the sampler.
    other = other_cores(busy_before, _cpu_seconds() - bench_cpu_before, seconds)
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, so that Popen does not wait again
    if proc.returncode != 0:
        raise RuntimeError(f"pipeline exited {proc.returncode}; see {log_path}\n  {' '.join(command)}")
    manifest = json.loads((output / "manifest.json").read_text())
    manifest_written_at = (output / "manifest.json").stat().st_mtime
    shutil.rmtree(output)
    job_started_at = _job_start_time(log_path)
    return PipelineRun(
        scale=corpus.scale, seconds=seconds, cpu_seconds=cpu_seconds, other_cores=other,
        peak_rss_mb=usage.ru_maxrss * 1024 / MB,
        tree_peak_rss_mb=max((rss for _, _, rss in sampler.samples), default=0) / MB,
        max_descendants=sampler.max_descendants,
        startup_seconds=None if job_started_at is None else job_started_at - spawned_at,
        exit_seconds=reaped_at - manifest_written_at,
        counts=manifest["counts"], cores_timeline=sampler.cores_timeline(), log=str(log_path))


# --------------------------------------------------------------------------
# Orchestration and figures
# --------------------------------------------------------------------------
def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def plan_runs(sizes: Sequence[int], rss_only: Sequence[int], repeats: int) -> list[tuple[int, str, int]]:
    """(repeat, "loop" | "pipeline", scale) in interleaved order; the pair order flips every repeat."""
    plan = []
    for repeat in range(repeats):
        pair = ("loop", "pipeline") if repeat % 2 == 0 else ("pipeline", "loop")
        plan += [(repeat, kind, scale) for scale in sizes for kind in pair]
        plan += [(repeat, "pipeline", scale) for scale in rss_only]
    return plan


def median_of(runs: Iterable, field: str) -> Optional[float]:
    """Median of one field over runs, leaving out runs where it is unknown (None when all are)."""
    values = [getattr(run, field) for run in runs]
    known = [value for value in values if value is not None]
    return statistics.median(known) if known else None


def _ratio(numerator: Optional[float], denominator: Optional[float]) -> Optional[float]:
    if numerator is None or denominator is None or denominator <= 0:
        return None
    return numerator / denominator


def summarise(corpora: dict[int, Corpus], sizes: Sequence[int], rss_sizes: Sequence[int],
              loops: dict[int, list[LoopRun]], pipes: dict[int, list[PipelineRun]]) -> dict:
    """Medians per size, the ratios and the targets, as one JSON-ready dict."""
    rows = []
    for scale in sizes:
        n = corpora[scale].rows
        loop_s, pipe_s = median_of(loops[scale], "seconds"), median_of(pipes[scale], "seconds")
        rows.append({"scale": scale, "pairs": n, "loop_s": loop_s, "loop_pairs_per_s": n / loop_s,
                     "pipeline_s": pipe_s, "pipeline_pairs_per_s": n / pipe_s, "ratio": loop_s / pipe_s,
                     "loop_cores": median_of(loops[scale], "cores"),
                     "pipeline_cores": median_of(pipes[scale], "cores"),
                     "loop_other_cores": median_of(loops[scale], "other_cores"),
                     "pipeline_other_cores": median_of(pipes[scale], "other_cores"),
                     "pipeline_startup_s": median_of(pipes[scale], "startup_seconds"),
                     "pipeline_job_s": median_of(pipes[scale], "job_seconds"),
                     "pipeline_exit_s": median_of(pipes[scale], "exit_seconds")})
    summary: dict = {"sizes": rows, "marginal_ratio": None, "pipeline_fixed_cost_s": None,
                     "loop_fixed_cost_s": None, "pipeline_s_per_pair": None, "loop_s_per_pair": None}
    if len(rows) >= 2:
        small, large = rows[0], rows[-1]
        extra = large["pairs"] - small["pairs"]
        pipe_per_pair = (large["pipeline_s"] - small["pipeline_s"]) / extra
        loop_per_pair = (large["loop_s"] - small["loop_s"]) / extra
        summary.update(marginal_ratio=_ratio(loop_per_pair, pipe_per_pair), pipeline_s_per_pair=pipe_per_pair,
                       loop_s_per_pair=loop_per_pair, loop_fixed_cost_s=small["loop_s"] - small["pairs"] * loop_per_pair)
        if pipe_per_pair > 0:  # otherwise noise swamped the difference and an intercept means nothing
            summary["pipeline_fixed_cost_s"] = small["pipeline_s"] - small["pairs"] * pipe_per_pair
    summary["rss_mb"] = {str(s): median_of(pipes[s], "peak_rss_mb") for s in rss_sizes}
    summary["tree_rss_mb"] = {str(s): median_of(pipes[s], "tree_peak_rss_mb") for s in rss_sizes}
    summary["rss_ratio"] = (_ratio(summary["rss_mb"][str(rss_sizes[-1])], summary["rss_mb"][str(rss_sizes[0])])
                            if len(rss_sizes) >= 2 else None)
    summary["max_child_processes"] = max(run.max_descendants for runs in pipes.values() for run in runs)
    summary["targets"] = [
        _target(f"whole-run ratio at {sizes[0]}x", rows[0]["ratio"], ">=", TARGET_WHOLE_RATIO),
        _target("marginal ratio", summary["marginal_ratio"], ">=", TARGET_MARGINAL_RATIO),
        _target(f"peak RSS {rss_sizes[-1]}x/{rss_sizes[0]}x" if rss_sizes else "peak RSS ratio",
                summary["rss_ratio"], "<=", TARGET_RSS_RATIO),
    ]
    return summary


def _target(name: str, value: Optional[float], op: str, limit: float) -> dict:
    if value is None:
        verdict = "n/a"
    else:
        verdict = "PASS" if (value >= limit if op == ">=" else value <= limit) else "FAIL"
    return {"name": name, "value": value, "op": op, "target": limit, "verdict": verdict}


def _fmt(value: Optional[float], spec: str = ".2f") -> str:
    return "n/a" if value is None else format(value, spec)


def render_report(summary: dict, loops: dict[int, list[LoopRun]], pipes: dict[int, list[PipelineRun]],
                  rss_sizes: Sequence[int]) -> str:
    lines = [f"{'corpus':<7}{'pairs':>7}{'loop_s':>9}{'loop_pairs/s':>14}{'pipeline_s':>12}"
             f"{'pipeline_pairs/s':>18}{'ratio':>7}"]
    for row in summary["sizes"]:
        lines.append(f"{str(row['scale']) + 'x':<7}{row['pairs']:>7}{row['loop_s']:>9.1f}"
                     f"{row['loop_pairs_per_s']:>14.1f}{row['pipeline_s']:>12.1f}"
                     f"{row['pipeline_pairs_per_s']:>18.1f}{row['ratio']:>7.2f}")
    lines.append(f"marginal ratio (loop s/pair \u00f7 pipeline s/pair): {_fmt(summary['marginal_ratio'])}   "
                 f"pipeline fixed cost: {_fmt(summary['pipeline_fixed_cost_s'], '.1f')}"
                 + (" s" if summary["pipeline_fixed_cost_s"] is not None else ""))
    if summary["pipeline_s_per_pair"] is not None:
        lines.append(f"  per extra pair: loop {summary['loop_s_per_pair'] * 1e3:.2f} ms, pipeline "
                     f"{summary['pipeline_s_per_pair'] * 1e3:.2f} ms; loop fixed cost "
                     f"{summary['loop_fixed_cost_s']:.1f} s")
    if rss_sizes:
        sizes = ", ".join(f"{s}x {summary['rss_mb'][str(s)]:.0f} MB" for s in rss_sizes)
        lines.append(f"peak RSS: {sizes}, ratio {_fmt(summary['rss_ratio'])}")
        tree = ", ".join(f"{s}x {summary['tree_rss_mb'][str(s)]:.0f} MB" for s in rss_sizes)
        children = summary["max_child_processes"]
        lines.append(f"  sampled process-tree RSS: {tree}; child processes seen: {children}"
                     + (" (ru_maxrss misses their sum: use the tree figure)" if children else
                        " (single process: ru_maxrss is complete)"))
    lines.append("")
    lines.append("diagnostics (medians): cores used (CPU s / wall s); pipeline wall time split into start-up "
                 "(spawn to run() starting: interpreter, imports, checks), job, and exit (after manifest.json)")
    for row in summary["sizes"]:
        lines.append(f"  {str(row['scale']) + 'x':<4} cores: loop {row['loop_cores']:.2f}, pipeline "
                     f"{row['pipeline_cores']:.2f}   pipeline: start-up {_fmt(row['pipeline_startup_s'], '.1f')} s, "
                     f"job {_fmt(row['pipeline_job_s'], '.1f')} s, exit {_fmt(row['pipeline_exit_s'], '.1f')} s")
    for row in summary["sizes"]:
        lines.append(f"  {str(row['scale']) + 'x':<4} CPU used by other processes meanwhile (noise): loop "
                     f"{row['loop_other_cores']:.2f} cores, pipeline {row['pipeline_other_cores']:.2f} cores")
    noisy = max(run.other_cores for runs in (*loops.values(), *pipes.values()) for run in runs)
    if noisy > NOISY_CORES:
        lines.append(f"  WARNING: other processes used up to {noisy:.2f} cores during a run; the ratios are "
                     "less reliable (use --repeats 3 or more)")
    for scale, runs in sorted(pipes.items()):
        timeline = " ".join(f"{c:.1f}" for c in runs[-1].cores_timeline)
        lines.append(f"  pipeline {scale}x cores used per tenth of the run: {timeline}")
    lines.append(_agreement(loops, pipes))
    lines.append("")
    lines.append("targets:")
    for target in summary["targets"]:
        lines.append(f"  {target['name']:<28}{_fmt(target['value']):>7}  {target['op']} "
                     f"{target['target']:.2f}  {target['verdict']}")
    return "\n".join(lines)


def _agreement(loops: dict[int, list[LoopRun]], pipes: dict[int, list[PipelineRun]]) -> str:
    """Both sides accepted the same pairs (pipeline written + duplicates == loop valid)."""
    parts = []
    for scale in sorted(loops):
        counts = pipes[scale][-1].counts
        accepted = counts["written"] + counts["duplicates"]
        loop = loops[scale][-1]
        same = "same" if accepted == loop.valid else "DIFFERENT"
        parts.append(f"{scale}x pipeline {accepted} valid / {counts['rejected']['total']} rejected, "
                     f"loop {loop.valid} / {loop.rejected} ({same})")
    return "  accepted pairs: " + "; ".join(parts)


def _scales(text: str) -> list[int]:
    try:
        values = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or values[0] < 1:
        raise argparse.ArgumentTypeError(f"sizes must be integers >= 1, got {text!r}")
    return values


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bench/pipeline_throughput.py",
        description="Pipeline pairs/s next to a plain 2-process Pillow+numpy loop on the same corpus, "
                    "in the same run, and the ratios between them (see the module docstring).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--pairs", type=_positive, default=2000,
                        help="valid segmentation pairs in the 1x corpus (images 480x360 to 640x480); about "
                             "12 broken inputs are added once per corpus")
    parser.add_argument("--workdir", type=Path, default=ROOT / "build" / "bench",
                        help="folder for the cached corpora (one per pairs and scale), pipeline outputs "
                             "(deleted after each run) and pipeline logs")
    parser.add_argument("--repeats", type=_positive, default=1,
                        help="run every measurement this many times, interleaved, and use the medians")
    parser.add_argument("--sizes", type=_scales, default=_scales("1,3"),
                        help="corpus sizes, as multiples of --pairs, timed for both the loop and the "
                             "pipeline; the marginal ratio uses the smallest and largest")
    parser.add_argument("--rss_sizes", type=_scales, default=_scales("1,4"),
                        help="corpus sizes at which the pipeline's peak RSS is compared (largest / "
                             "smallest); sizes not in --sizes get pipeline-only runs")
    parser.add_argument("--skip_rss", action="store_true",
                        help="skip the peak-RSS comparison and its extra pipeline runs")
    parser.add_argument("--json", type=Path, default=None, metavar="OUT",
                        help="also write every figure (each run, the medians, ratios and targets) as JSON")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    bench_started = time.perf_counter()
    load_before = os.getloadavg()
    rss_sizes = [] if args.skip_rss else args.rss_sizes
    rss_only = [s for s in rss_sizes if s not in args.sizes]
    workdir = args.workdir.resolve()
    corpora, generate_seconds = ensure_corpora(workdir, args.pairs, sorted(set(args.sizes) | set(rss_sizes)))
    for corpus in corpora.values():
        warm_page_cache(corpus)
    loops: dict[int, list[LoopRun]] = {s: [] for s in args.sizes}
    pipes: dict[int, list[PipelineRun]] = {s: [] for s in sorted(set(args.sizes) | set(rss_sizes))}
    for repeat, kind, scale in plan_runs(args.sizes, rss_only, args.repeats):
        corpus = corpora[scale]
        if kind == "loop":
            loop_run = run_loop(corpus)
            loops[scale].append(loop_run)
            log(f"loop     {scale}x  {corpus.rows} pairs  {loop_run.seconds:.1f} s  cores {loop_run.cores:.2f}  "
                f"other load {loop_run.other_cores:.2f}")
        else:
            pipe_run = run_pipeline(corpus, workdir / "out" / f"x{scale}",
                                    workdir / "logs" / f"pipeline_x{scale}_r{repeat}.log")
            pipes[scale].append(pipe_run)
            log(f"pipeline {scale}x  {corpus.rows} pairs  {pipe_run.seconds:.1f} s  cores {pipe_run.cores:.2f}  "
                f"peak RSS {pipe_run.peak_rss_mb:.0f} MB  other load {pipe_run.other_cores:.2f}")
    summary = summarise(corpora, args.sizes, rss_sizes, loops, pipes)
    print(render_report(summary, loops, pipes, rss_sizes))
    total = time.perf_counter() - bench_started
    print(f"\nbenchmark wall time {total:.0f} s (corpus generation {generate_seconds:.0f} s); "
          f"load average before {load_before[0]:.2f}, after {os.getloadavg()[0]:.2f}; {os.cpu_count()} CPUs")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({
            "pairs": args.pairs, "repeats": args.repeats, "sizes": args.sizes, "rss_sizes": rss_sizes,
            "corpora": {str(s): {"manifest": str(c.manifest), "rows": c.rows} for s, c in corpora.items()},
            "summary": summary,
            "loop_runs": [dataclasses.asdict(r) | {"cores": r.cores} for runs in loops.values() for r in runs],
            "pipeline_runs": [dataclasses.asdict(r) | {"cores": r.cores} for runs in pipes.values() for r in runs],
            "benchmark_seconds": total, "generate_seconds": generate_seconds,
            "load_average": {"before": load_before, "after": os.getloadavg()}, "cpus": os.cpu_count(),
        }, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
