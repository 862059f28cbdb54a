"""Pipeline throughput against two plain 2-process loops, on real-looking images, in one run (``make bench``).

What is measured
    * The pipeline (pipeline_runs.py): ``python -m beam_pipeline --input LISTING --output DIR
      --num_classes 8`` run as a subprocess, exactly as a user runs it, in two configurations (``--configs``):

      ``base``  ``--no_stats --balance none``: read, validate and write the TFRecord shards;
      ``full``  the defaults: the same plus the tf.Transform statistics (transform/, stats.json) and
                repeat-factor class balancing of the train split.

      Its wall time includes interpreter start-up, imports, pipeline construction and teardown.
    * The two loops of loops.py doing the minimal work of validating the corpus in a
      ``multiprocessing.Pool(2)``: ``pillow`` decodes with Pillow, ``fast`` with the pipeline's fastest
      decoders. The pipeline does more than the loops by design (SHA-256 of both files, a chunk/CRC check of
      every PNG, channel sums, crop sample points, reading the files again to write TFRecord shards, and in
      ``full`` the statistics and balancing).
    * With ``--rss_sizes`` (unless ``--skip_rss``), in the same sitting, the peak RSS of ``--rss_config`` at
      those sizes: pipeline_memory.py's figures, from the timed runs where they cover a size and from
      pipeline-only runs where not.

The corpus (``--corpus``): ``photo_png`` (default), ``photo_jpeg`` or ``sample``, see pipeline_runs.py.

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
    reported, with a warning above ``NOISY_CORES``. ``--json`` keeps every run; run_breakdown.py reads it.

Targets (issue 10; judged on ``full``, the pipeline users run)
    marginal ratio vs the Pillow loop >= 1.2; vs the fast loop >= 0.85; fixed cost <= 12 s; statistics
    and balancing add < 10 % per pair over base; peak RSS 4x/1x <= 1.2. On the ``sample`` corpus the
    same figures are printed for comparison with older runs.

Bounds
    Generating corpora, warming the page cache and deleting outputs are not timed. The smallest run that
    takes every path: ``--pairs 10 --sizes 1,2 --rss_sizes 1,3 --repeats 2`` (12 pipeline runs, about
    15 s of fixed cost each for ``full``).

    python bench/pipeline_throughput.py --pairs 1000 --sizes 2,4 --rss_sizes 1,4 --json build/bench/run.json
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Optional, Sequence

import pipeline_memory
from common import ROOT, Corpus, log, positive
from harness import (Sitting, collect, fit, fmt, fmt_spread, interleaved, median_of, new_parser, noise_lines,
                     ratio, render_targets, sizes, target, write_json)
from loops import LOOPS, LoopRun, run_loop
from pipeline_runs import (CONFIG_DESCRIPTIONS, CONFIGS, CORPORA, CORPUS_HELP, WORKDIR_HELP, PipeRuns, prepare_corpora,
                           run_logged)

TARGET_PILLOW_RATIO = 1.2    # full: marginal ratio against the Pillow loop
TARGET_FAST_RATIO = 0.85     # full: marginal ratio against the fast-decoder loop
TARGET_FIXED_COST_S = 12.0   # full: fixed cost (intercept)
TARGET_ADDED_PCT = 10.0      # statistics and balancing: added seconds per pair, per cent of base's

LoopRuns = dict[str, dict[int, list[LoopRun]]]       # loop -> scale -> runs (one per repeat)


# --------------------------------------------------------------------------
# Runs
# --------------------------------------------------------------------------
def plan_runs(sizes: Sequence[int], configs: Sequence[str], rss_config: str, rss_sizes: Sequence[int],
              repeats: int) -> list[tuple[int, str, int]]:
    """(repeat, "loop:<name>" or a configuration, scale) in interleaved order, reversed within a size every
    other repeat. Sizes of ``rss_sizes`` that no timed run of ``rss_config`` covers get pipeline-only runs."""
    kinds = tuple(f"loop:{loop}" for loop in LOOPS) + tuple(configs)
    rss_only = pipeline_memory.extra_sizes(sizes, configs, rss_config, rss_sizes)
    plan = []
    for repeat in range(repeats):
        plan += [(repeat, kind, scale) for scale in sizes for kind in interleaved(kinds, repeat)]
        plan += [(repeat, rss_config, scale) for scale in rss_only]
    return plan


def run_plan(plan: Sequence[tuple[int, str, int]], corpora: dict[int, Corpus],
             workdir: Path) -> tuple[LoopRuns, PipeRuns]:
    """Run every planned measurement in order; returns the runs by loop or configuration and scale."""
    loops: LoopRuns = {}
    pipes: PipeRuns = {}
    for repeat, kind, scale in plan:
        corpus = corpora[scale]
        if not kind.startswith("loop:"):
            run_logged(corpus, kind, workdir, repeat, pipes)
            continue
        loop = kind.split(":", 1)[1]
        loop_run = run_loop(corpus, loop)
        loops.setdefault(loop, {}).setdefault(scale, []).append(loop_run)
        log(f"loop {loop:<8} {scale}x  {corpus.rows} pairs  {loop_run.seconds:.1f} s  "
            f"cores {loop_run.cores:.2f}  other load {loop_run.other_cores:.2f}")
    return loops, pipes


# --------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------
def repetition_figures(corpora: dict[int, Corpus], sizes: Sequence[int], configs: Sequence[str], loops: LoopRuns,
                       pipes: PipeRuns, repeat: int) -> dict:
    """Every ratio of one repetition, from that repetition's runs only."""
    small, large = corpora[sizes[0]], corpora[sizes[-1]]
    figures: dict = {"loops": {}, "configs": {}}
    for loop in LOOPS:
        runs = (loops[loop][sizes[0]][repeat], loops[loop][sizes[-1]][repeat])
        per_pair, fixed = fit((small.rows, runs[0].seconds), (large.rows, runs[1].seconds))
        figures["loops"][loop] = {"s_per_pair": per_pair, "fixed_cost_s": fixed, "small_s": runs[0].seconds}
    for config in configs:
        runs = (pipes[config][sizes[0]][repeat], pipes[config][sizes[-1]][repeat])
        per_pair, fixed = fit((small.rows, runs[0].seconds), (large.rows, runs[1].seconds))
        figure = {"s_per_pair": per_pair, "fixed_cost_s": fixed if per_pair > 0 else None}
        for loop, loop_figure in figures["loops"].items():
            figure[f"marginal_vs_{loop}"] = ratio(loop_figure["s_per_pair"], per_pair)
            figure[f"whole_vs_{loop}"] = ratio(loop_figure["small_s"], runs[0].seconds)
        figures["configs"][config] = figure
    if {"base", "full"} <= set(configs):
        base, full = figures["configs"]["base"], figures["configs"]["full"]
        added = full["s_per_pair"] - base["s_per_pair"]
        figures["added"] = {"s_per_pair": added, "pct_of_base": 100 * added / base["s_per_pair"]
                            if base["s_per_pair"] > 0 else None,
                            "fixed_cost_s": None if None in (full["fixed_cost_s"], base["fixed_cost_s"])
                            else full["fixed_cost_s"] - base["fixed_cost_s"]}
    return figures


def summarise(corpora: dict[int, Corpus], sizes: Sequence[int], configs: Sequence[str], rss_config: str,
              rss_sizes: Sequence[int], repeats: int, loops: LoopRuns, pipes: PipeRuns) -> dict:
    """Every figure of the report: per repetition, and as median (min..max) over the repetitions."""
    per_repeat = [repetition_figures(corpora, sizes, configs, loops, pipes, r) for r in range(repeats)]
    summary: dict = {"repetitions": per_repeat, "loops": {}, "configs": {}, "added": None, "rss": None}
    for loop in LOOPS:
        summary["loops"][loop] = {"s_per_pair": collect(per_repeat, "loops", loop, "s_per_pair"),
                                  "fixed_cost_s": collect(per_repeat, "loops", loop, "fixed_cost_s")}
    for config in configs:
        summary["configs"][config] = {key: collect(per_repeat, "configs", config, key)
                                      for key in per_repeat[0]["configs"][config]}
    if "added" in per_repeat[0]:
        summary["added"] = {key: collect(per_repeat, "added", key) for key in per_repeat[0]["added"]}
    if len(rss_sizes) >= 2:
        summary["rss"] = pipeline_memory.summarise(rss_config, pipes[rss_config], rss_sizes)
    summary["targets"] = judge_targets(summary, rss_config)
    return summary


def judge_targets(summary: dict, rss_config: str) -> list[dict]:
    """Issue 10's targets, judged on the medians of the configurations that were run."""
    targets = []
    full = summary["configs"].get("full")
    if full:
        targets += [target("full: marginal ratio vs Pillow loop", full["marginal_vs_pillow"], ">=",
                           TARGET_PILLOW_RATIO),
                    target("full: marginal ratio vs fast-decoder loop", full["marginal_vs_fast"], ">=",
                           TARGET_FAST_RATIO),
                    target("full: fixed cost (s)", full["fixed_cost_s"], "<=", TARGET_FIXED_COST_S)]
    if summary["added"]:
        targets.append(target("stats+balancing added per pair (% of base)", summary["added"]["pct_of_base"],
                              "<", TARGET_ADDED_PCT))
    return targets + [pipeline_memory.judge(summary["rss"], rss_config)]


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
        marginal = fmt_spread(figures[f"marginal_vs_{loop}"])
        lines.append(f"  marginal ratio vs {loop} loop:{'':<{8 - len(loop)}}{marginal}"
                     f"   whole-run ratio at the smallest size: {fmt_spread(figures[f'whole_vs_{loop}'])}")
    lines.append(f"  per extra pair: {fmt_spread(figures['s_per_pair'], '.2f', ' ms', 1e3)}; fixed cost: "
                 f"{fmt_spread(figures['fixed_cost_s'], '.1f', ' s')}")
    return lines


def render_added(added: dict) -> list[str]:
    return ["== what statistics and balancing add (full - base) ==",
            f"  per extra pair: {fmt_spread(added['s_per_pair'], '+.2f', ' ms', 1e3)} = "
            f"{fmt_spread(added['pct_of_base'], '+.0f', ' %')} of base; fixed cost "
            f"{fmt_spread(added['fixed_cost_s'], '+.1f', ' s')}"]


def render_diagnostics(loops: LoopRuns, pipes: PipeRuns) -> list[str]:
    """Cores used, the pipeline's wall-time split, noise, per-run core timelines and agreement of counts."""
    lines = ["diagnostics (medians): cores used (CPU s / wall s); the pipeline's wall time split into start-up "
             "(spawn to run() starting), job, and exit (after manifest.json)"]
    for name, by_scale in pipes.items():
        for scale, runs in sorted(by_scale.items()):
            lines.append(f"  {str(scale) + 'x':<4}{name:<5} cores {median_of(runs, 'cores'):.2f}; start-up "
                         f"{fmt(median_of(runs, 'startup_seconds'), '.1f', ' s')}, job "
                         f"{fmt(median_of(runs, 'job_seconds'), '.1f', ' s')}, exit "
                         f"{fmt(median_of(runs, 'exit_seconds'), '.1f', ' s')}; "
                         f"CPU {median_of(runs, 'cpu_seconds'):.1f} s")
    for loop, by_scale in loops.items():
        for scale, runs in sorted(by_scale.items()):
            lines.append(f"  {str(scale) + 'x':<4}loop {loop:<7} cores {median_of(runs, 'cores'):.2f}; "
                         f"CPU {median_of(runs, 'cpu_seconds'):.1f} s")
    lines += noise_lines([run.other_cores for by_scale in list(loops.values()) + list(pipes.values())
                          for runs in by_scale.values() for run in runs])
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


def render_report(corpus: str, corpora: dict[int, Corpus], sizes: Sequence[int], configs: Sequence[str],
                  summary: dict, loops: LoopRuns, pipes: PipeRuns) -> str:
    repeats = len(summary["repetitions"])
    lines = [f"corpus {corpus}; {repeats} interleaved repetition(s); figures: median (min..max) over them", ""]
    lines += render_sizes(corpora, sizes, configs, loops, pipes) + [""]
    for loop in LOOPS:
        figures = summary["loops"][loop]
        lines.append(f"loop {loop}: per extra pair {fmt_spread(figures['s_per_pair'], '.2f', ' ms', 1e3)}"
                     f", fixed cost {fmt_spread(figures['fixed_cost_s'], '.1f', ' s')}")
    lines.append("")
    for name in configs:
        lines += render_config(name, summary["configs"][name]) + [""]
    if summary["added"]:
        lines += render_added(summary["added"]) + [""]
    if summary["rss"]:
        lines += pipeline_memory.render(summary["rss"]) + [""]
    lines += render_diagnostics(loops, pipes) + [""]
    lines += render_targets(summary["targets"])
    return "\n".join(lines)


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------
def _configs(text: str) -> list[str]:
    requested = {part.strip() for part in text.split(",") if part.strip()}
    if not requested or not requested <= CONFIGS.keys():
        raise argparse.ArgumentTypeError(f"expected a comma-separated subset of {','.join(CONFIGS)}, got {text!r}")
    return [name for name in CONFIGS if name in requested]  # always base before full


def build_parser() -> argparse.ArgumentParser:
    parser = new_parser(
        "bench/pipeline_throughput.py",
        "Pipeline pairs/s in a base and a full configuration next to a 2-process Pillow loop and a "
        "2-process loop with the pipeline's fast decoders, on real-looking images, interleaved and "
        "repeated: marginal ratios, fixed cost, what statistics and balancing add, peak RSS "
        "(see the module docstring).")
    parser.add_argument("--corpus", choices=CORPORA, default="photo_png", help=CORPUS_HELP)
    parser.add_argument("--pairs", type=positive, default=2000, help="pairs in the 1x corpus")
    parser.add_argument("--workdir", type=Path, default=ROOT / "build" / "bench", help=WORKDIR_HELP)
    parser.add_argument("--configs", type=_configs, default="base,full",
                        help="pipeline configurations to time, comma-separated: base = --no_stats --balance none; "
                             "full = the defaults (tf.Transform statistics + repeat-factor balancing)")
    parser.add_argument("--repeats", type=positive, default=3,
                        help="interleaved repetitions; every figure is the median over them, with its spread")
    parser.add_argument("--sizes", type=sizes, default="1,3",
                        help="corpus sizes, as multiples of --pairs, timed for both loops and every configuration; "
                             "the marginal figures use the smallest and the largest")
    parser.add_argument("--rss_sizes", type=sizes, default="1,4",
                        help="corpus sizes at which the peak RSS of --rss_config is compared (largest / smallest); "
                             "sizes not timed for that configuration get pipeline-only runs")
    parser.add_argument("--rss_config", choices=tuple(CONFIGS), default="full",
                        help="the pipeline configuration whose peak RSS is measured at --rss_sizes")
    parser.add_argument("--skip_rss", action="store_true", help="skip the peak-RSS comparison and its extra runs")
    parser.add_argument("--json", type=Path, default=None, metavar="OUT",
                        help="also write every figure (each run, each repetition, the medians and targets) as JSON")
    return parser


def json_record(args: argparse.Namespace, rss_sizes: Sequence[int], version: str, corpora: dict[int, Corpus],
                summary: dict, loops: LoopRuns, pipes: PipeRuns) -> dict:
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
        "pipeline_runs": [r.as_json() for by_scale in pipes.values() for runs in by_scale.values() for r in runs],
    }


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    if len(args.sizes) < 2:
        build_parser().error("--sizes needs at least two sizes (the marginal figures need two points)")
    sitting = Sitting()
    rss_sizes = [] if args.skip_rss else args.rss_sizes
    workdir = args.workdir.resolve()
    corpora, generate_seconds, version = prepare_corpora(args.corpus, workdir, args.pairs,
                                                         sorted(set(args.sizes) | set(rss_sizes)))
    plan = plan_runs(args.sizes, args.configs, args.rss_config, rss_sizes, args.repeats)
    loops, pipes = run_plan(plan, corpora, workdir)
    summary = summarise(corpora, args.sizes, args.configs, args.rss_config, rss_sizes, args.repeats, loops, pipes)
    print(render_report(args.corpus, corpora, args.sizes, args.configs, summary, loops, pipes))
    print(sitting.finish("corpus generation", generate_seconds, f"corpus generator version {version}"))
    write_json(args.json, json_record(args, rss_sizes, version, corpora, summary, loops, pipes)
               | {"generate_seconds": generate_seconds, **sitting.timing})
    return 0


if __name__ == "__main__":
    sys.exit(main())
