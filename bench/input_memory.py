"""The trainer's input pipeline memory over one full epoch at 1x and at more data: does it stream?

What is measured
    The dataset the trainer trains on (input_pipelines.py (c): shards, interleave, shuffle, decode, crop,
    augment, batch; training mode, no cache) iterates one full epoch (train records // batch size steps)
    over the 1x data and over ``--scale`` times more (a corpus that many times larger, through the pipeline
    into that many more shards; input_data.py), each in its own child process reaped with ``os.wait4``
    (input_child.py): its ``ru_maxrss`` is that child's peak RSS (TensorFlow's threads included). Printed:
    both peaks, their ratio (flat memory means the pipeline streams; issue 4's target: <= 1.2) and the RSS
    each child had before iterating (interpreter, TensorFlow and the dataset's construction).

Repetitions
    With ``--repeats`` above 1 the two sizes run interleaved (order reversed every other repetition); the
    ratio is that of the median peaks per size, and within each repetition as median (min..max).
    input_throughput.py runs this measurement once in its own sitting (``--rss_scale``); this script
    measures memory alone.

Bounds
    The smallest run: ``--pairs 100 --scale 2 --batch_size 2 --crop 32,32`` (two children, plus the pipeline
    on each corpus the first time; below about 90 pairs the sample corpus's broken inputs are more than the
    pipeline's ``--max_reject_fraction`` allows). Building the cached data is not timed.

    python bench/input_memory.py --pairs 500 --scale 4
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Optional, Sequence

from common import log, positive
from harness import (Sitting, fmt, interleaved, median_of, new_parser, ratio, render_targets, spread_figure,
                     target, within_repetitions, write_json)
from input_child import Run, spawn
from input_data import Dataset, add_data_options, child_spec, prepare, train_records

TARGET_RSS_RATIO = 1.2       # trainer peak RSS, one epoch at the larger size / at 1x


def run_epochs(datasets: Sequence[Dataset], spec: dict, repeats: int, logs: Path) -> list[Run]:
    """One full epoch of the trainer's pipeline over each dataset (smallest first), in its own child, once
    per repetition, interleaved; ``spec`` is input_data.child_spec's."""
    epochs: list[Run] = []
    for repeat in range(repeats):
        for dataset in interleaved(list(datasets), repeat):
            steps = train_records(dataset) // spec["batch_size"]
            one = spec | {"kind": "epoch", "shards": str(dataset.shards), "warmup_batches": 0, "batches": steps}
            run = spawn(one, logs / f"input_epoch_x{dataset.scale}_r{repeat}.log", dataset.scale, repeat)
            epochs.append(run)
            log(f"epoch x{dataset.scale:<3} {run.examples} examples ({steps} steps)  {run.examples_per_s:7.1f} "
                f"examples/s  peak RSS {run.peak_rss_mb:.0f} MB")
    return epochs


def summarise(epochs: Sequence[Run]) -> dict:
    """Median peak RSS per size, their ratio (largest / smallest size), and that ratio within each repetition."""
    by_scale: dict[int, list[Run]] = {}
    for run in epochs:
        by_scale.setdefault(run.scale, []).append(run)
    small, large = by_scale[min(by_scale)], by_scale[max(by_scale)]
    return {"sizes": sorted(by_scale),
            "peak_rss_mb": {str(s): median_of(runs, "peak_rss_mb") for s, runs in sorted(by_scale.items())},
            "rss_ratio": ratio(median_of(large, "peak_rss_mb"), median_of(small, "peak_rss_mb")),
            "ratio_by_repetition": spread_figure([ratio(b.peak_rss_mb, a.peak_rss_mb) for a, b in zip(small, large)]),
            "epochs": [dataclasses.asdict(run) | {"examples_per_s": run.examples_per_s} for run in epochs]}


def judge(summary: Optional[dict]) -> dict:
    """Issue 4's memory target on the ratio of the median peaks per size; n/a when memory was not measured."""
    if summary is None:
        return target("trainer peak RSS (one epoch)", None, "<=", TARGET_RSS_RATIO, "skipped")
    figure = None if summary["rss_ratio"] is None else spread_figure([summary["rss_ratio"]])
    return target(f"trainer peak RSS {summary['sizes'][-1]}x / 1x (one epoch)", figure, "<=", TARGET_RSS_RATIO)


def render(epochs: Sequence[Run], summary: dict, batch_size: int) -> list[str]:
    lines = ["== trainer pipeline memory: one full epoch, training mode, no cache =="]
    for run in sorted(epochs, key=lambda one: (one.scale, one.repeat)):
        lines.append(f"{str(run.scale) + 'x':<4}{run.examples:>7} examples ({run.examples // batch_size} steps)"
                     f"{run.examples_per_s:>9.1f} examples/s   peak RSS {run.peak_rss_mb:6.0f} MB   "
                     f"(RSS before iterating {run.rss_built_mb:.0f} MB)")
    lines.append(f"peak RSS ratio {fmt(summary['rss_ratio'])}{within_repetitions(summary['ratio_by_repetition'])}")
    return lines


def build_parser() -> argparse.ArgumentParser:
    parser = new_parser(
        "bench/input_memory.py",
        "Peak RSS of the trainer's input pipeline over one full epoch at 1x and at --scale times "
        "more data, each in its own child process (see the module docstring).")
    add_data_options(parser)
    parser.add_argument("--scale", type=positive, default=4,
                        help="the larger data, as a multiple of --pairs (its own corpus and pipeline run); "
                             "must be above 1")
    parser.add_argument("--repeats", type=positive, default=1,
                        help="epochs at each size, interleaved; the peaks per size are the medians over them")
    parser.add_argument("--json", type=Path, default=None, metavar="OUT", help="also write every figure as JSON")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    if args.scale < 2:
        build_parser().error("--scale must be above 1 (the ratio compares two sizes)")
    sitting = Sitting()
    args.workdir = args.workdir.resolve()
    prepared = prepare(args.workdir, args.pairs, [1, args.scale], args.target_shard_bytes)
    base, large = prepared.datasets[1], prepared.datasets[args.scale]
    epochs = run_epochs([base, large], child_spec(base, args.batch_size, args.crop), args.repeats,
                        args.workdir / "logs")
    summary = summarise(epochs)
    targets = [judge(summary)]
    print("\n".join(render(epochs, summary, args.batch_size) + [""] + render_targets(targets)))
    print(sitting.finish("building cached data", prepared.seconds, prepared.versions()))
    write_json(args.json, {"options": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
                           "summary": summary, "targets": targets, **sitting.timing})
    return 0


if __name__ == "__main__":
    sys.exit(main())
