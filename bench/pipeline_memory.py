"""The pipeline's peak memory at two or more corpus sizes: does it stream (flat RSS) or hold the corpus?

What is measured
    ``python -m beam_pipeline`` in one configuration (``--config``: ``base`` = ``--no_stats --balance none``,
    ``full`` = the defaults) on the same corpus at each of ``--sizes`` (multiples of ``--pairs``), each run a
    subprocess into a fresh output (pipeline_runs.py). Per run: the peak RSS of the runner process
    (``ru_maxrss`` from ``os.wait4``) and the largest sampled sum of RSS over its process tree (/proc every
    0.25 s; the SDK workers included).

Repetitions and figures
    The sizes run interleaved (smallest to largest, reversed on every other repetition) for ``--repeats``
    repetitions. Printed: the median peak per size, the ratio largest / smallest of those medians (issue 10's
    target: <= 1.2, judged on it), and the same ratio within each repetition as median (min..max); the CPU
    other processes used meanwhile (noise) and the most child processes seen.

    pipeline_throughput.py prints the same figures for its own runs (``--rss_sizes``), measured in the same
    sitting as its throughput; this script measures memory alone.

Bounds
    The smallest run: ``--pairs 10 --sizes 1,2 --repeats 1 --config base`` (two pipeline runs; ``--corpus
    sample`` needs ``--pairs 100``, see pipeline_runs.py). The photo corpus costs about 0.2 s of CPU per pair
    once (cached under ``--workdir``); a ``full`` run has about 15 s of fixed cost.

    python bench/pipeline_memory.py --pairs 1000 --sizes 1,4 --config full
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional, Sequence

from common import ROOT, Corpus, positive
from harness import (Sitting, fmt, interleaved, median_of, new_parser, noise_lines, ratio, render_targets, sizes,
                     spread_figure, target, within_repetitions, write_json)
from pipeline_runs import (CONFIGS, CORPORA, CORPUS_HELP, WORKDIR_HELP, PipeRuns, PipelineRun, prepare_corpora,
                           run_logged)

TARGET_RSS_RATIO = 1.2       # peak RSS at the largest size / at the smallest


def extra_sizes(timed_sizes: Sequence[int], timed_configs: Sequence[str], config: str,
                rss_sizes: Sequence[int]) -> list[int]:
    """The sizes of ``rss_sizes`` that no timed run of ``config`` covers: they need pipeline-only runs."""
    return [s for s in rss_sizes if s not in timed_sizes or config not in timed_configs]


def summarise(config: str, runs: dict[int, list[PipelineRun]], rss_sizes: Sequence[int]) -> dict:
    """Peak RSS of one configuration at each of ``rss_sizes`` (medians), the largest/smallest ratio of the
    medians, and that ratio within each repetition (runs of one repetition share an index)."""
    rss = {str(s): median_of(runs[s], "peak_rss_mb") for s in rss_sizes}
    tree = {str(s): median_of(runs[s], "tree_peak_rss_mb") for s in rss_sizes}
    small, large = runs[rss_sizes[0]], runs[rss_sizes[-1]]
    return {"config": config, "sizes": list(rss_sizes), "rss_mb": rss, "tree_rss_mb": tree,
            "ratio": ratio(rss[str(rss_sizes[-1])], rss[str(rss_sizes[0])]),
            "tree_ratio": ratio(tree[str(rss_sizes[-1])], tree[str(rss_sizes[0])]),
            "ratio_by_repetition": spread_figure([ratio(b.peak_rss_mb, a.peak_rss_mb) for a, b in zip(small, large)]),
            "tree_ratio_by_repetition": spread_figure([ratio(b.tree_peak_rss_mb, a.tree_peak_rss_mb)
                                                       for a, b in zip(small, large)]),
            "max_child_processes": max(run.max_descendants for s in rss_sizes for run in runs[s])}


def render(rss: dict) -> list[str]:
    sizes_text = ", ".join(f"{s}x {rss['rss_mb'][str(s)]:.0f} MB" for s in rss["sizes"])
    tree = ", ".join(f"{s}x {rss['tree_rss_mb'][str(s)]:.0f} MB" for s in rss["sizes"])
    return [f"peak RSS ({rss['config']}): runner process {sizes_text}, ratio {fmt(rss['ratio'])}"
            + within_repetitions(rss["ratio_by_repetition"]),
            f"  sampled process-tree RSS (SDK workers included): {tree}, ratio {fmt(rss['tree_ratio'])}"
            + within_repetitions(rss["tree_ratio_by_repetition"])]


def judge(rss: Optional[dict], config: str) -> dict:
    """Issue 10's memory target, on the ratio of the medians per size; n/a when memory was not measured."""
    figure = None if rss is None or rss["ratio"] is None else spread_figure([rss["ratio"]])
    return target(f"{config}: peak RSS largest/smallest size", figure, "<=", TARGET_RSS_RATIO,
                  "skipped" if rss is None else "medians per size")


def run_sizes(corpora: dict[int, Corpus], config: str, repeats: int, workdir: Path) -> PipeRuns:
    """Every size of ``corpora`` once per repetition, interleaved."""
    runs: PipeRuns = {}
    for repeat in range(repeats):
        for scale in interleaved(sorted(corpora), repeat):
            run_logged(corpora[scale], config, workdir, repeat, runs)
    return runs


def build_parser() -> argparse.ArgumentParser:
    parser = new_parser(
        "bench/pipeline_memory.py",
        "Peak RSS of the pipeline (runner process and process tree) at two or more corpus sizes, "
        "interleaved and repeated, and its largest/smallest ratio (see the module docstring).")
    parser.add_argument("--corpus", choices=CORPORA, default="photo_png", help=CORPUS_HELP)
    parser.add_argument("--pairs", type=positive, default=2000, help="pairs in the 1x corpus")
    parser.add_argument("--sizes", type=sizes, default="1,4",
                        help="corpus sizes, as multiples of --pairs; the ratio is largest / smallest")
    parser.add_argument("--config", choices=tuple(CONFIGS), default="full",
                        help="the pipeline configuration: base = --no_stats --balance none; full = the defaults "
                             "(tf.Transform statistics + repeat-factor balancing)")
    parser.add_argument("--repeats", type=positive, default=3,
                        help="interleaved repetitions; the peaks per size are the medians over them")
    parser.add_argument("--workdir", type=Path, default=ROOT / "build" / "bench", help=WORKDIR_HELP)
    parser.add_argument("--json", type=Path, default=None, metavar="OUT",
                        help="also write every figure and every run as JSON")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    if len(args.sizes) < 2:
        build_parser().error("--sizes needs at least two sizes (the ratio is largest / smallest)")
    sitting = Sitting()
    workdir = args.workdir.resolve()
    corpora, generate_seconds, version = prepare_corpora(args.corpus, workdir, args.pairs, args.sizes)
    runs = run_sizes(corpora, args.config, args.repeats, workdir)
    summary = summarise(args.config, runs[args.config], args.sizes)
    targets = [judge(summary, args.config)]
    every_run = [run for by_scale in runs.values() for one in by_scale.values() for run in one]
    lines = [f"corpus {args.corpus}; {args.repeats} interleaved repetition(s); figures: median (min..max) over them",
             ""] + render(summary)
    lines += [f"  most child processes seen: {summary['max_child_processes']}"] + noise_lines(
        [run.other_cores for run in every_run]) + [""] + render_targets(targets)
    print("\n".join(lines))
    print(sitting.finish("corpus generation", generate_seconds, f"corpus generator version {version}"))
    write_json(args.json, {
        "corpus": args.corpus, "pairs": args.pairs, "repeats": args.repeats, "sizes": args.sizes,
        "config": args.config, "generator_version": version,
        "corpora": {str(s): {"listing": str(c.manifest), "rows": c.rows} for s, c in corpora.items()},
        "summary": summary, "targets": targets, "pipeline_runs": [run.as_json() for run in every_run],
        "generate_seconds": generate_seconds, **sitting.timing})
    return 0


if __name__ == "__main__":
    sys.exit(main())
