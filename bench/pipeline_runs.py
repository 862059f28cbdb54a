"""The pipeline as the pipeline benchmarks run it: its corpora, its configurations, and one run of
``python -m beam_pipeline`` as a subprocess, exactly as a user runs it (pipeline_throughput.py,
pipeline_memory.py).

The corpus (``CORPORA``)
    ``photo_png`` and ``photo_jpeg``: tools/photo_corpus.py, 480x360 crops of scikit-image's photographs
    with lens blur and sensor noise, about 215 KB as PNG (30 KB as JPEG q90), and VOC-like masks (every 5th
    a palette PNG); they decode like camera photos, where flat synthetic images decode about twice as fast
    and make every ratio lie. One corpus of pairs x the largest size is generated once under the work
    folder (about 0.2 s of CPU per pair; pair i is the same whatever the size) and listings of its first N
    rows make the smaller sizes. ``sample``: the synthetic sample corpus (tools/sample_corpus/) with its
    broken inputs, written once whatever the size: below about 90 pairs they are more than the pipeline's
    ``--max_reject_fraction`` (0.1) allows, and the run is refused.

One run
    ``python -m beam_pipeline --input LISTING --output DIR --num_classes 8 --overwrite`` plus the flags of
    its configuration (``CONFIGS``), into a fresh output folder that is deleted afterwards. Its wall time,
    from spawn to reaping, includes interpreter start-up, imports, pipeline construction and teardown. The
    process is reaped with ``os.wait4``, whose ``ru_maxrss`` is the peak RSS of that one process; a sampler
    thread also walks ``/proc`` during the run and records the summed RSS of the process tree (the SDK
    workers included) and the cores used over time. The CPU other processes used meanwhile is the noise.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

import common
from common import (MB, NUM_CLASSES, ROOT, Corpus, TreeSampler, count_rows, ensure_corpora, ensure_photo_corpus,
                    generator_version, log, machine_busy_seconds, other_cores, photo_generator_version,
                    photo_listing, warm_page_cache)

# Pipeline configurations: name -> extra command-line flags. Order matters: "full" is compared with "base".
CONFIGS: dict[str, tuple[str, ...]] = {
    "base": ("--no_stats", "--balance", "none"),  # read, validate, shard
    "full": (),                                   # defaults: tf.Transform statistics + repeat-factor balancing
    # the defaults on one engine at every size: the default engine switches at 1,000 pairs (core/runners.py), so
    # between a smaller and a larger size its slope mixes the in-process engine's cost with the worker processes'
    "full_processes": ("--direct_running_mode", "multi_processing", "--direct_num_workers", "2"),
    "full_in_process": ("--direct_running_mode", "in_memory", "--direct_num_workers", "1"),
}
CONFIG_DESCRIPTIONS = {
    "base": "read, validate, shard",
    "full": "defaults: tf.Transform statistics + repeat-factor balancing",
    "full_processes": "the defaults, on two SDK worker processes at every size",
    "full_in_process": "the defaults, in the launcher's process (one worker, validation threads) at every size",
}
CORPORA = ("photo_png", "photo_jpeg", "sample")
CORPUS_HELP = ("photo_png / photo_jpeg: 480x360 photo crops (tools/photo_corpus.py) as PNG (~215 KB) or JPEG q90, "
               "with VOC-like masks; sample: the synthetic sample corpus with its broken inputs")
WORKDIR_HELP = ("folder for the cached corpora (those of other generator versions are deleted), pipeline outputs "
                "(deleted after each run) and pipeline logs")
_READING_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) INFO .*: Reading ")


def prepare_corpora(corpus: str, workdir: Path, pairs: int, scales: Sequence[int]) -> tuple[dict[int, Corpus],
                                                                                          float, str]:
    """The corpus at every scale, generated when missing and read once into the page cache (not timed);
    also the seconds spent generating and the generator version."""
    if corpus == "sample":
        version = generator_version()
        corpora, seconds = ensure_corpora(workdir, pairs, scales, version)
    else:
        folder, seconds = ensure_photo_corpus(workdir, pairs * max(scales))
        version = photo_generator_version()
        image_format = corpus.split("_", 1)[1]
        corpora = {}
        for scale in scales:
            listing = photo_listing(folder, image_format, pairs * scale)
            corpora[scale] = Corpus(scale, listing, count_rows(listing))
    for folder in {one.manifest.parent for one in corpora.values()}:
        warm_page_cache(folder)
    return corpora, seconds, version


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

    def as_json(self) -> dict:
        """Every field and derived figure, JSON-ready (what run_breakdown.py reads)."""
        return dataclasses.asdict(self) | {"cores": self.cores, "job_seconds": self.job_seconds,
                                           "records_written": self.records_written}


PipeRuns = dict[str, dict[int, list[PipelineRun]]]   # configuration -> scale -> runs (one per repeat)


def pipeline_command(corpus: Corpus, output: Path, config: str, extra: Sequence[str] = ()) -> list[str]:
    return [sys.executable, "-m", "beam_pipeline", "--input", str(corpus.manifest), "--output", str(output),
            "--num_classes", str(NUM_CLASSES), "--overwrite", *CONFIGS[config], *extra]


def job_start_time(log_path: Path) -> Optional[float]:
    """Wall-clock time of run()'s "Reading <input>" log line (logged as the job starts), if found."""
    for line in log_path.read_text(errors="replace").splitlines():
        match = _READING_LINE.match(line)
        if match:
            stamp, millis = match.groups()
            return time.mktime(time.strptime(stamp, "%Y-%m-%d %H:%M:%S")) + int(millis) / 1000
    return None


def run_pipeline(corpus: Corpus, config: str, output: Path, log_path: Path, extra: Sequence[str] = ()) -> PipelineRun:
    """One pipeline subprocess in ``config`` (plus the flags ``extra``) into a fresh ``output``; wall time from
    spawn to reaping."""
    shutil.rmtree(output, ignore_errors=True)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    command = pipeline_command(corpus, output, config, extra)
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
    job_started_at = job_start_time(log_path)
    return PipelineRun(
        config=config, scale=corpus.scale, seconds=seconds, cpu_seconds=cpu_seconds, other_cores=other,
        peak_rss_mb=usage.ru_maxrss * 1024 / MB, tree_peak_rss_mb=sampler.peak_rss() / MB,
        max_descendants=sampler.max_descendants,
        startup_seconds=None if job_started_at is None else job_started_at - spawned_at,
        exit_seconds=reaped_at - manifest_written_at,
        counts=manifest["counts"], cores_timeline=sampler.cores_timeline(), log=str(log_path))


def run_logged(corpus: Corpus, config: str, workdir: Path, repeat: int, runs: PipeRuns) -> PipelineRun:
    """One run of ``config`` on ``corpus`` (output and log under ``workdir``), added to ``runs`` and logged."""
    run = run_pipeline(corpus, config, workdir / "out" / f"{config}_x{corpus.scale}",
                       workdir / "logs" / f"pipeline_{config}_x{corpus.scale}_r{repeat}.log")
    runs.setdefault(config, {}).setdefault(corpus.scale, []).append(run)
    log(f"pipeline {config:<4}  {corpus.scale}x  {corpus.rows} pairs  {run.seconds:.1f} s  "
        f"cores {run.cores:.2f}  records {run.records_written}  "
        f"peak RSS {run.peak_rss_mb:.0f} MB  other load {run.other_cores:.2f}")
    return run
