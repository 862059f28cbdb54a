"""The trainer's input pipeline against two raw-file baselines, on the same data in the same run (issue 4;
``make bench-input``).

What is measured
    Training batches per second, counted in examples, of three input pipelines over the train split of one
    segmentation corpus (input_pipelines.py): (a) ``generator``, a Keras ``PyDataset`` reading the raw
    files with Pillow, iterated as ``model.fit`` does; (b) ``raw_tfdata``, tf.data over the same raw files;
    (c) ``trainer``, the dataset the trainer trains on (the pipeline's shards through
    ``trainer.train.split_dataset``). Each does the same work per example (decode, ``--crop`` patch, flip,
    normalise, brightness and contrast, batches of ``--batch_size``). The baselines read the distinct valid
    train pairs of the corpus (manifest rows of split ``train`` that the pipeline did not reject), the
    trainer the train shards (the same images, plus the repeat copies of class balancing).

    Each pipeline runs in its own child process (input_child.py). After ``--warmup_batches`` batches,
    ``--batches`` batches are timed. The children run one after the other, in the order (a) (b) (c),
    reversed on every other repeat (``--repeats``). Before the first run every corpus file and shard is read
    once, so no side pays for a cold disk. Then, in the same sitting unless ``--skip_rss``, the trainer's
    peak RSS over one full epoch at 1x and at ``--rss_scale`` x: input_memory.py's measurement, once.

Why ratios
    The machine is shared and noisy, so absolute examples/s vary from run to run; ratios of figures taken
    side by side in one run cancel most of that. Each ratio is computed within one repetition and printed
    as the median (min..max) over the repetitions. Each run also reports its CPU time per example (a cost
    that depends less on the neighbours' load than the rate does; the report gives its ratios too) and the
    cores that other processes used meanwhile (from /proc/stat). On a quiet machine the rate ratio is about
    the CPU-cost ratio times the ratio of cores used: the generator uses one core, tf.data all. Under load, a
    pipeline with more runnable threads gets a larger share of the CPU than the generator's single thread,
    which favours (b) and (c) over (a); the report warns above ``NOISY_CORES``.

Targets (issue 4)
    trainer examples/s >= 3x the generator's and >= 1.5x raw-file tf.data's; peak RSS at ``--rss_scale``x /
    1x <= 1.2.

Data and bounds
    A cached sample corpus and the pipeline's shards of it (input_data.py); building them is not timed. The
    smallest run that takes every path: ``--pairs 100 --batch_size 2 --crop 32,32 --warmup_batches 1
    --batches 1 --repeats 2 --rss_scale 2`` (8 children, each importing TensorFlow; fewer pairs and the
    sample corpus's broken inputs are more than the pipeline's ``--max_reject_fraction`` allows).

    python bench/input_throughput.py --pairs 500 --repeats 3
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
from pathlib import Path
from typing import Optional, Sequence

import input_memory
from common import log, positive
from harness import (Sitting, collect, fmt_spread, interleaved, new_parser, noise_lines, render_targets, target,
                     write_json)
from input_child import Run, spawn
from input_data import Dataset, add_data_options, child_spec, prepare, raw_train_pairs, train_records
from input_pipelines import KIND_TITLES, KINDS

TARGET_VS_GENERATOR = 3.0    # trainer examples/s / generator examples/s
TARGET_VS_RAW_TFDATA = 1.5   # trainer examples/s / raw-file tf.data examples/s
# name -> (numerator kind, denominator kind, figure): the ratios computed within each repetition
RATIOS = {"trainer_vs_generator": ("trainer", "generator", "examples_per_s"),
          "trainer_vs_raw_tfdata": ("trainer", "raw_tfdata", "examples_per_s"),
          "raw_tfdata_vs_generator": ("raw_tfdata", "generator", "examples_per_s"),
          "cpu_generator_vs_trainer": ("generator", "trainer", "cpu_ms_per_example"),
          "cpu_raw_tfdata_vs_trainer": ("raw_tfdata", "trainer", "cpu_ms_per_example")}


def run_timed(args: argparse.Namespace, spec: dict, base: Dataset) -> list[Run]:
    """Every pipeline once per repetition, interleaved, each in its own child."""
    pairs = [list(pair) for pair in raw_train_pairs(base)]
    spec = spec | {"warmup_batches": args.warmup_batches, "batches": args.batches}
    specs = {"generator": spec | {"kind": "generator", "pairs": pairs},
             "raw_tfdata": spec | {"kind": "raw_tfdata", "pairs": pairs},
             "trainer": spec | {"kind": "trainer", "shards": str(base.shards)}}
    timed: list[Run] = []
    for repeat in range(args.repeats):
        for kind in interleaved(KINDS, repeat):
            run = spawn(specs[kind], args.workdir / "logs" / f"input_{kind}_r{repeat}.log", base.scale, repeat)
            timed.append(run)
            log(f"{kind:<10} {run.examples} examples  {run.examples_per_s:7.1f} examples/s  "
                f"{run.cpu_ms_per_example:5.2f} CPU ms/example  cores {run.cores:.2f}  "
                f"other load {run.other_cores:.2f}  peak RSS {run.peak_rss_mb:.0f} MB")
    return timed


def summarise(timed: Sequence[Run], repeats: int) -> dict:
    """Medians of each pipeline's runs, and every ratio within each repetition as a spread figure."""
    table = {}
    for kind in KINDS:
        mine = [run for run in timed if run.kind == kind]
        table[kind] = {"runs": len(mine), "image_shape": mine[-1].image_shape, "mask_shape": mine[-1].mask_shape,
                       "decoding": sorted({str(run.decoding) for run in mine})}
        for field in ("examples_per_s", "cpu_ms_per_example", "cores", "other_cores", "peak_rss_mb"):
            table[kind][field] = statistics.median(getattr(run, field) for run in mine)
    per_repeat = []
    for repeat in range(repeats):
        runs = {run.kind: run for run in timed if run.repeat == repeat}
        per_repeat.append({name: getattr(runs[top], field) / getattr(runs[bottom], field)
                           for name, (top, bottom, field) in RATIOS.items()})
    ratios = {name: collect(per_repeat, name) for name in RATIOS}
    return {"table": table, "repetitions": per_repeat, "ratios": ratios,
            "targets": [target("trainer / generator examples/s", ratios["trainer_vs_generator"], ">=",
                               TARGET_VS_GENERATOR),
                        target("trainer / raw-file tf.data examples/s", ratios["trainer_vs_raw_tfdata"], ">=",
                               TARGET_VS_RAW_TFDATA)]}


def render(summary: dict, args: argparse.Namespace, base: Dataset, pairs: int, records: int,
           timed: Sequence[Run]) -> list[str]:
    table, ratios = summary["table"], summary["ratios"]
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
    lines += [f"ratios (within each repetition): trainer / generator {fmt_spread(ratios['trainer_vs_generator'])}, "
              f"trainer / raw tf.data {fmt_spread(ratios['trainer_vs_raw_tfdata'])} "
              f"(raw tf.data / generator {fmt_spread(ratios['raw_tfdata_vs_generator'])})",
              f"CPU per example: generator / trainer {fmt_spread(ratios['cpu_generator_vs_trainer'])}, "
              f"raw tf.data / trainer {fmt_spread(ratios['cpu_raw_tfdata_vs_trainer'])} (above 1: the trainer "
              "costs less)",
              f"trainer decoding: {', '.join(table['trainer']['decoding'])}",
              "   CPU ms/ex: CPU time of the child process per example (all its threads); cores: CPU s / wall s; "
              "other load: cores used meanwhile by other processes"]
    return lines + noise_lines([run.other_cores for run in timed])


def build_parser() -> argparse.ArgumentParser:
    parser = new_parser(
        "bench/input_throughput.py",
        "Examples/s of the trainer's input pipeline (shards + tf.Transform) next to a Keras "
        "PyDataset generator and tf.data over the raw files, on the same data in the same run, "
        "and the trainer pipeline's peak RSS over one epoch at 1x and more data (see the module "
        "docstring).")
    add_data_options(parser)
    parser.add_argument("--warmup_batches", type=positive, default=10,
                        help="batches pulled before timing starts (thread pools, autotuning, shuffle buffers)")
    parser.add_argument("--batches", type=positive, default=60, help="batches timed per run")
    parser.add_argument("--repeats", type=positive, default=3,
                        help="timed runs of each pipeline, interleaved (order reversed every other repeat); "
                             "the medians are reported, and each ratio as median (min..max) over the repeats")
    parser.add_argument("--rss_scale", type=positive, default=4,
                        help="the larger data for the memory comparison, as a multiple of --pairs (its own "
                             "corpus and pipeline run); 1 skips the memory runs")
    parser.add_argument("--skip_rss", action="store_true", help="skip the full-epoch memory runs")
    parser.add_argument("--json", type=Path, default=None, metavar="OUT", help="also write every figure as JSON")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    sitting = Sitting()
    args.workdir = args.workdir.resolve()
    memory = not args.skip_rss and args.rss_scale > 1
    prepared = prepare(args.workdir, args.pairs, [1, args.rss_scale] if memory else [1], args.target_shard_bytes)
    base = prepared.datasets[1]
    spec = child_spec(base, args.batch_size, args.crop)
    timed = run_timed(args, spec, base)
    epochs = input_memory.run_epochs(list(prepared.datasets.values()), spec, 1, args.workdir / "logs") if memory else []
    summary = summarise(timed, args.repeats)
    summary["memory"] = input_memory.summarise(epochs) if memory else None
    summary["targets"].append(input_memory.judge(summary["memory"]))
    lines = render(summary, args, base, len(raw_train_pairs(base)), train_records(base), timed)
    if memory:
        lines += [""] + input_memory.render(epochs, summary["memory"], args.batch_size)
    print("\n".join(lines + [""] + render_targets(summary["targets"])))
    print(sitting.finish("building cached data", prepared.seconds, prepared.versions()))
    write_json(args.json, {"options": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
                           "summary": summary, "runs": [dataclasses.asdict(run) for run in timed], **sitting.timing})
    return 0


if __name__ == "__main__":
    sys.exit(main())
