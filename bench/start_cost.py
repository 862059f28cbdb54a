"""A run's fixed cost on the DirectRunner's three engines, and where small corpora should run (issue 44).

What is measured
    ``python -m beam_pipeline`` as a user runs it (pipeline_runs.py: a subprocess, spawn to reaping), the
    defaults (statistics and repeat-factor balancing), with each engine of the DirectRunner (``--modes``):

    ``processes``  ``--direct_running_mode multi_processing --direct_num_workers CORES``: one SDK worker
                   process per core (the default for corpora above the launcher's threshold);
    ``threads``    ``--direct_running_mode multi_threading --direct_num_workers CORES``: workers as threads
                   of the launcher, sharing one GIL;
    ``in_process`` ``--direct_running_mode in_memory --direct_num_workers 1``: the runner executes every
                   bundle itself, without a worker or its gRPC channels;
    ``auto``       no engine option: what the launcher chooses (launcher/runners.py).

    on the photo corpus (``--corpus photo_png``: 480x360 photo crops that decode like camera photos) at each
    of ``--sizes`` pairs, and with ``--readme`` also on README's first run (the sample segmentation corpus's
    252 rows, ``--task segmentation --num_classes 8 --ignore_label 255``).

Figures (median (min..max) over ``--repeats`` interleaved repetitions; each within one repetition)
    * wall seconds per engine and size;
    * per engine, the fixed cost (the intercept of wall time against pairs) and the seconds per extra pair,
      from the smallest and the largest size;
    * the break-even corpus size between ``in_process`` and ``processes``: the fixed cost in-process saves,
      divided by what it loses per pair. Below it a corpus runs faster in the launcher's own process;
    * the phases of every engine's run at the smallest size (run_breakdown.py: spawn to the "Reading" line,
      building the pipeline, the progress phases, exit).

    python bench/start_cost.py --sizes 250,2000 --repeats 3 --readme
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Optional, Sequence

import harness
from common import ROOT, Corpus, count_rows, log, spread
from pipeline_runs import CORPORA, CORPUS_HELP, PipelineRun, prepare_corpora, run_pipeline
from run_breakdown import PHASES, phase_seconds

CORES = str(os.cpu_count() or 1)
MODES: dict[str, tuple[str, ...]] = {
    "processes": ("--direct_running_mode", "multi_processing", "--direct_num_workers", CORES),
    "threads": ("--direct_running_mode", "multi_threading", "--direct_num_workers", CORES),
    "in_process": ("--direct_running_mode", "in_memory", "--direct_num_workers", "1"),
    "auto": (),
}
README_FLAGS = ("--task", "segmentation", "--ignore_label", "255")


def _modes(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in MODES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown mode(s) {', '.join(unknown)}; choose from {', '.join(MODES)}")
    return names


def readme_corpus(workdir: Path) -> Corpus:
    """The sample corpus README's first run reads (tools/sample_corpus), generated once under ``workdir``."""
    import subprocess
    import sys
    folder = workdir / "readme_sample"
    listing = folder / "segmentation" / "manifest.csv"
    if not listing.exists():
        subprocess.run([sys.executable, "-m", "tools.sample_corpus", str(folder), "--overwrite"], cwd=ROOT,
                       check=True, stdout=subprocess.DEVNULL)
    return Corpus(0, listing, count_rows(listing))


def one_run(corpus: Corpus, mode: str, workdir: Path, repeat: int, extra: Sequence[str] = ()) -> PipelineRun:
    tag = f"{mode}_{corpus.rows}" + ("_readme" if extra else "")
    run = run_pipeline(corpus, "full", workdir / "out" / tag, workdir / "logs" / f"start_{tag}_r{repeat}.log",
                       (*MODES[mode], *extra))
    log(f"{mode:<10} {corpus.rows:>5} pairs{' (README)' if extra else ''}  {run.seconds:.1f} s  "
        f"cores {run.cores:.2f}  other load {run.other_cores:.2f}")
    return run


def engine_figures(runs: dict, modes: Sequence[str], sizes: Sequence[int], repeats: int) -> list[str]:
    small, large = min(sizes), max(sizes)
    lines = [f"wall seconds, spawn to exit; median (min..max) over {repeats} repetitions"]
    for mode in modes:
        cells = "   ".join(f"{size} pairs {spread([r.seconds for r in runs[mode][size]], '{:.1f}')}" for size in sizes)
        lines.append(f"  {mode:<10} {cells}")
    fits: dict[str, list[tuple[float, float]]] = {}
    if large > small:
        lines.append(f"fixed cost and seconds per extra pair, {small} -> {large} pairs")
        for mode in modes:
            fits[mode] = [tuple(reversed(harness.fit((small, low.seconds), (large, high.seconds))))
                          for low, high in zip(runs[mode][small], runs[mode][large])]   # (fixed, per pair)
            lines.append(f"  {mode:<10} fixed {spread([f for f, _ in fits[mode]], '{:.1f}')} s   "
                         f"per pair {spread([s * 1000 for _, s in fits[mode]], '{:.1f}')} ms")
    if "in_process" in fits and "processes" in fits:
        even = [(fp - fi) / (si - sp) if si > sp else None
                for (fi, si), (fp, sp) in zip(fits["in_process"], fits["processes"])]
        known = [value for value in even if value is not None]
        lines.append(f"break-even, in_process against processes: {spread(known, '{:.0f}')} pairs"
                     if known else "break-even: in_process was never slower per pair")
    return lines


def phase_lines(runs: Sequence[PipelineRun], title: str) -> list[str]:
    splits = [split for split in (phase_seconds(run.as_json()) for run in runs) if split]
    if not splits:
        return []
    return [f"phases, {title}: wall seconds, median (min..max) over {len(splits)} run(s)"] + [
        f"  {phase:<11} {spread([split.get(phase, 0.0) for split in splits])}" for phase in PHASES]


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = harness.new_parser("start_cost.py", __doc__)
    parser.add_argument("--corpus", choices=CORPORA, default="photo_png", help=CORPUS_HELP)
    parser.add_argument("--sizes", type=harness.sizes, default="250,2000", help="corpus sizes in pairs")
    parser.add_argument("--modes", type=_modes, default="processes,threads,in_process,auto",
                        help=f"engines to compare, of {', '.join(MODES)}")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved repetitions")
    parser.add_argument("--readme", action="store_true", help="also time README's first run with every engine")
    parser.add_argument("--workdir", type=Path, default=ROOT / "build" / "bench", help="corpora, outputs, logs")
    parser.add_argument("--json", type=Path, default=None, metavar="OUT", help="keep every run in this JSON file")
    args = parser.parse_args(argv)
    sizes = sorted(args.sizes)
    corpora_by_scale, generate_seconds, version = prepare_corpora(args.corpus, args.workdir, 1, sizes)
    corpora = {size: corpora_by_scale[size] for size in sizes}
    readme = readme_corpus(args.workdir) if args.readme else None
    sitting = harness.Sitting()
    runs: dict = {mode: {size: [] for size in sizes} for mode in args.modes}
    readme_runs: dict = {mode: [] for mode in args.modes}
    for repeat in range(args.repeats):
        for mode in harness.interleaved(args.modes, repeat):
            for size in sizes:
                runs[mode][size].append(one_run(corpora[size], mode, args.workdir, repeat))
            if readme:
                readme_runs[mode].append(one_run(readme, mode, args.workdir, repeat, README_FLAGS))
    lines = [f"{args.corpus}, sizes {', '.join(map(str, sizes))}; {CORES} cores"]
    lines += engine_figures(runs, args.modes, sizes, args.repeats)
    if readme:
        lines.append(f"README's first run ({readme.rows} rows), wall seconds spawn to exit")
        lines += [f"  {mode:<10} {spread([r.seconds for r in readme_runs[mode]], '{:.1f}')}" for mode in args.modes]
        for mode in args.modes:
            lines += phase_lines(readme_runs[mode], f"README's first run, {mode}")
    for mode in args.modes:
        lines += phase_lines(runs[mode][sizes[0]], f"{mode} at {sizes[0]} pairs")
    lines.append(sitting.finish("corpus generation", generate_seconds, f"corpus generator version {version}"))
    print("\n".join(lines))
    harness.write_json(args.json, {
        "sizes": sizes, "modes": args.modes, "lines": lines,
        "timing": sitting.timing, "runs": {mode: {str(size): [run.as_json() for run in by_size[size]] for size in sizes}
                 for mode, by_size in runs.items()},
        "readme_runs": {mode: [run.as_json() for run in done] for mode, done in readme_runs.items()}})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
