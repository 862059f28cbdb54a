"""What the DirectRunner's progress reporting costs: the pipeline with and without it, side by side.

What is measured
    * Whole runs: ``python -m beam_pipeline`` on the seeded sample corpus, as a user runs it (stderr
      to a log file, so progress is plain lines every ``--progress_every`` seconds), with progress on
      (the default ``--log_level info``) and off (``--log_level warning``: no lines, no running totals
      in the workers, no files, no reader thread). Everything else is equal. Each run's wall time
      (spawn to exit), its CPU time (the launcher and its reaped SDK worker processes, from
      ``os.wait4``) and run()'s own ``time:`` from the summary are taken; the two sides run
      interleaved (on, off, off, on, ...) ``--repeats`` times, and the report gives the median of
      each and the median of the per-round ratios with their range.
    * One increment: ``counters.counter(...).inc()`` with running totals on, against Beam's
      ``Metrics.counter(...).inc()`` alone, in this process, outside a bundle (where Beam's part is
      cheapest, so the added share is an upper bound). The pipeline makes about five such increments
      per pair (discovered, selected, valid or rejected, pairs and records written).

Why ratios
    The machine is shared and noisy; a ratio of two figures taken side by side in one run cancels
    most of that noise. A ratio of 1.00 within its range means the reporting costs nothing measurable.

Run: ``python bench/progress_overhead.py [--pairs 500 --scale 2 --repeats 3 --config base]``.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
import timeit
from pathlib import Path
from typing import Optional, Sequence

from common import NUM_CLASSES, ROOT, ensure_corpora, generator_version, log, positive, spread, warm_page_cache

CONFIGS = {
    "base": ("--no_stats", "--balance", "none"),  # read, validate, shard: where per-pair costs show most
    "full": (),                                   # defaults: tf.Transform statistics and balancing too
}
SIDES = {"on": ("--log_level", "info"), "off": ("--log_level", "warning")}
INCREMENTS_PER_PAIR = 5
SPREAD_FORM = "{median} (range {min}-{max}, n={n})"  # how the report prints a median and its range


def run_once(manifest: Path, output: Path, config: str, side: str, log_path: Path,
             progress_every: float) -> dict:
    shutil.rmtree(output, ignore_errors=True)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "beam_pipeline", "--input", str(manifest), "--output", str(output),
               "--num_classes", str(NUM_CLASSES), "--overwrite", "--progress_every", str(progress_every),
               *CONFIGS[config], *SIDES[side]]
    with log_path.open("w") as log_file:
        started = time.perf_counter()
        process = subprocess.Popen(command, cwd=ROOT, stdout=log_file, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(f"pipeline exited {process.returncode}; see {log_path}")
    text = log_path.read_text(errors="replace")
    summary = re.search(r"^time: ([0-9.]+) s", text, re.MULTILINE)
    lines = len(re.findall(r"beam_pipeline\.progress: ", text))
    shutil.rmtree(output, ignore_errors=True)
    return {"wall": seconds, "cpu": usage.ru_utime + usage.ru_stime,
            "run": float(summary.group(1)) if summary else float("nan"), "progress_lines": lines}


def increment_cost(number: int = 200_000) -> tuple[float, float]:
    """(seconds per Beam counter increment, seconds per counters.counter increment with totals on)."""
    import tempfile

    from apache_beam.metrics import Metrics

    from beam_pipeline.stages import counters
    beam_counter = Metrics.counter("Bench", "beam")
    ours = counters.counter("Bench", "ours")
    folder = tempfile.mkdtemp(prefix="bench_progress_")
    os.environ[counters.ENV] = folder
    try:
        beam_times = []
        our_times = []
        for _ in range(5):     # interleaved
            beam_times.append(timeit.timeit(beam_counter.inc, number=number) / number)
            our_times.append(timeit.timeit(ours.inc, number=number) / number)
    finally:
        os.environ.pop(counters.ENV, None)
        shutil.rmtree(folder, ignore_errors=True)
    return statistics.median(beam_times), statistics.median(our_times)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/progress_overhead.py", description=__doc__.split("\n", 1)[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--pairs", type=positive, default=500, help="valid pairs in the 1x corpus")
    parser.add_argument("--scale", type=positive, default=2, help="corpus size, as a multiple of --pairs")
    parser.add_argument("--repeats", type=positive, default=3, help="rounds of (on, off), interleaved")
    parser.add_argument("--config", choices=tuple(CONFIGS), default="base",
                        help="base: --no_stats --balance none; full: the defaults")
    parser.add_argument("--progress_every", type=float, default=5.0, help="seconds between progress lines")
    parser.add_argument("--workdir", type=Path, default=ROOT / "build" / "bench", help="cached corpora, logs")
    args = parser.parse_args(argv)
    workdir = args.workdir.resolve()
    corpora, _ = ensure_corpora(workdir, args.pairs, [args.scale], generator_version())
    corpus = corpora[args.scale]
    warm_page_cache(corpus.manifest.parent)
    runs: dict[str, list[dict]] = {"on": [], "off": []}
    for round_ in range(args.repeats):
        for side in (("on", "off") if round_ % 2 == 0 else ("off", "on")):
            log(f"round {round_ + 1}/{args.repeats}: progress {side}")
            runs[side].append(run_once(corpus.manifest, workdir / "progress_out", args.config, side,
                                       workdir / "logs" / f"progress_{side}_{round_}.log", args.progress_every))
    print(f"corpus: {corpus.rows} listing rows ({corpus.manifest}); config {args.config}; "
          f"{args.repeats} interleaved rounds; {os.cpu_count()} CPUs")
    for measure, what in (("wall", "wall seconds, spawn to exit"), ("run", "run()'s time: from the summary"),
                          ("cpu", "CPU seconds, launcher + SDK workers")):
        ratios = [on[measure] / off[measure] for on, off in zip(runs["on"], runs["off"])]
        print(f"{what:<40} on {spread([r[measure] for r in runs['on']], '{:.3f}', SPREAD_FORM)}")
        print(f"{'':<40} off {spread([r[measure] for r in runs['off']], '{:.3f}', SPREAD_FORM)}")
        print(f"{'':<40} on/off {spread(ratios, '{:.3f}', SPREAD_FORM)}")
    print(f"progress lines per run: on {[r['progress_lines'] for r in runs['on']]}, "
          f"off {[r['progress_lines'] for r in runs['off']]}")
    beam_seconds, our_seconds = increment_cost()
    off_seconds = statistics.median(r["run"] for r in runs["off"])
    added = INCREMENTS_PER_PAIR * max(0.0, our_seconds - beam_seconds)
    print(f"one increment: Beam counter {beam_seconds * 1e6:.2f} us, counters.counter {our_seconds * 1e6:.2f} us "
          f"(ratio {our_seconds / beam_seconds:.2f}); {INCREMENTS_PER_PAIR} per pair add {added * 1e6:.1f} us, "
          f"{100 * added * corpus.rows / off_seconds:.3f}% of run()'s {off_seconds:.1f} s for {corpus.rows} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
