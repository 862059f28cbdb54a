"""Where a pipeline_throughput run's time went: CPU per extra pair and the wall time of each phase.

Reads the ``--json`` file of ``bench/pipeline_throughput.py`` (run it first; the pipeline logs that file
names are overwritten by the next benchmark run) and prints, per repetition and then as the median
(min..max) over the repetitions:

* **CPU view**: CPU seconds of every run (the pipeline's whole process tree, SDK workers included, from
  ``os.wait4``; the loops' pool) per extra pair between the smallest and the largest timed size, the CPU
  intercept (fixed CPU), the loop / pipeline ratio of CPU per extra pair, and what statistics and
  balancing add (full - base). On a shared machine CPU time moves much less than wall time, which other
  processes' load stretches; it says nothing about how many cores a run keeps busy, which the wall-clock
  figures of pipeline_throughput include.
* **Phases**: each pipeline run's wall time split at its progress lines (``starting``, ``listing``,
  ``validating``, ``analysing``, ``writing``, ``finishing``; ``build`` runs from the "Reading" line,
  logged before the pipeline is built, to the first progress line; ``startup`` from the spawn to that
  line; ``exit`` after manifest.json was written), for each configuration and timed size. The phase
  lines are polled (about every 0.5 s), so each phase is known to about half a second.

    python bench/pipeline_throughput.py --json build/bench/run.json
    python bench/run_breakdown.py build/bench/run.json
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections import defaultdict
from pathlib import Path
from typing import Optional, Sequence

from common import spread

_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) INFO beam_pipeline\.(?:pipeline|progress): (\w+)")
PHASES = ("startup", "build", "starting", "listing", "validating", "analysing", "writing", "finishing", "exit")
LOOPS = ("pillow", "fast")


def _stamp(day_time: str, millis: str) -> float:
    return time.mktime(time.strptime(day_time, "%Y-%m-%d %H:%M:%S")) + int(millis) / 1000


def phase_seconds(run: dict) -> Optional[dict[str, float]]:
    """Wall seconds per phase of one pipeline run (its log's first line of each phase); None without a log."""
    log = Path(run["log"])
    if not log.exists() or run.get("startup_seconds") is None:
        return None
    first: dict[str, float] = {}
    for line in log.read_text(errors="replace").splitlines():
        match = _LINE.match(line)
        if match:
            word = match.group(3)
            first.setdefault("build" if word == "Reading" else word, _stamp(match.group(1), match.group(2)))
    if "build" not in first:
        return None
    spawned = first["build"] - run["startup_seconds"]
    ended = spawned + run["seconds"]
    marks = [("startup", spawned)] + [(name, first[name]) for name in PHASES[1:-1] if name in first]
    marks.append(("exit", ended - run["exit_seconds"]))
    bounds = [at for _, at in marks[1:]] + [ended]
    return {name: end - start for (name, start), end in zip(marks, bounds)}


def by_scale(runs: list[dict], key: str) -> dict[tuple[str, int], list[dict]]:
    """(loop or configuration, scale) -> runs in repetition order."""
    grouped: dict[tuple[str, int], list[dict]] = defaultdict(list)
    for run in runs:
        grouped[(run[key], run["scale"])].append(run)
    return grouped


def cpu_view(record: dict) -> list[str]:
    pairs, sizes = record["pairs"], record["sizes"]
    small, large = min(sizes), max(sizes)
    extra = (large - small) * pairs
    runs = {**by_scale(record["loop_runs"], "loop"), **by_scale(record["pipeline_runs"], "config")}
    lines = [f"CPU view: CPU seconds of each run, {small * pairs} -> {large * pairs} pairs; median (min..max) over "
             "repetitions"]
    per_pair: dict[str, list[float]] = {}
    for name in (*LOOPS, *record["configs"]):
        lows, highs = runs.get((name, small), []), runs.get((name, large), [])
        if not lows or not highs:
            continue
        slopes = [(high["cpu_seconds"] - low["cpu_seconds"]) / extra for low, high in zip(lows, highs)]
        fixed = [low["cpu_seconds"] - slope * small * pairs for low, slope in zip(lows, slopes)]
        per_pair[name] = slopes
        lines.append(f"  {name:<7} CPU per extra pair {spread([s * 1000 for s in slopes])} ms   "
                     f"fixed CPU {spread(fixed, '{:.1f}')} s")
    for config in record["configs"]:
        for loop in LOOPS:
            if config in per_pair and loop in per_pair:
                ratios = [a / b for a, b in zip(per_pair[loop], per_pair[config])]
                lines.append(f"  {config}: CPU marginal ratio vs {loop} loop {spread(ratios)}")
    if "base" in per_pair and "full" in per_pair:
        added = [(f - b) * 1000 for f, b in zip(per_pair["full"], per_pair["base"])]
        share = [(f - b) / b * 100 for f, b in zip(per_pair["full"], per_pair["base"])]
        lines.append(f"  statistics + balancing (full - base): {spread(added)} ms CPU per extra pair = "
                     f"{spread(share, '{:+.0f}')} % of base")
    return lines


def phase_view(record: dict) -> list[str]:
    lines = []
    for (config, scale), runs in sorted(by_scale(record["pipeline_runs"], "config").items()):
        splits = [split for split in map(phase_seconds, runs) if split]
        if not splits:
            continue
        lines.append(f"phases, {config} at {scale}x ({runs[0]['records_written']} records): wall seconds, "
                     f"median (min..max) over {len(splits)} run(s)")
        for phase in PHASES:
            lines.append(f"  {phase:<11} {spread([split.get(phase, 0.0) for split in splits])}")
    return lines


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("json", type=Path, help="the --json output of bench/pipeline_throughput.py")
    args = parser.parse_args(argv)
    record = json.loads(args.json.read_text())
    print("\n".join(cpu_view(record) + [""] + phase_view(record)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
