"""README's two first runs with this checkout and another, interleaved: what a fixed-cost change saves a user
(issue 44; docs/benchmarks.md, "Fast start").

Run ``python bench/readme_runs.py --baseline DIR [--repeats 5]``, where DIR holds the code before the change
(``git worktree add DIR COMMIT``, or ``git archive COMMIT | tar -x -C DIR``). The sample corpus is made once with
this checkout (``python -m tools.sample_corpus``) under ``--workdir``.

Each repetition runs, for each checkout in turn (the order reversed every other repetition), README's two
commands as ``make run`` does, each into a fresh output:

* ``segmentation``: ``--input SAMPLE/segmentation/manifest.csv --task segmentation --num_classes 8
  --ignore_label 255`` (252 pairs);
* ``classification``: ``--input SAMPLE/classification/images --task classification`` (403 images);
* with ``--listing PATH`` (repeatable), also ``--input PATH --num_classes 8`` for each: a segmentation listing
  of your own, e.g. a photo corpus of tools/photo_corpus.py above the launcher's in-process threshold (1,000
  pairs), where the run starts a worker process per core.

Figures: the wall time from spawn to reaping and the CPU time of the run and every process it started
(``RUSAGE_CHILDREN``, which another session's load moves less than wall time), median (min..max) over the
repetitions, and this checkout's ratio to the baseline taken within each repetition. The CPU used by other
processes meanwhile is printed, as the machine is shared.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path
from typing import Optional, Sequence

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path[:0] = [str(ROOT), str(BENCH)]

from common import log, readme_sample, run_measured  # noqa: E402
from harness import fmt_spread, interleaved, spread_figure, write_json  # noqa: E402

RUNS = {
    "segmentation": lambda sample: ["--input", str(sample / "segmentation" / "manifest.csv"), "--task", "segmentation",
                                    "--num_classes", "8", "--ignore_label", "255"],
    "classification": lambda sample: ["--input", str(sample / "classification" / "images"),
                                      "--task", "classification"],
}


def run_once(root: Path, args: Sequence[str], output: Path, log_path: Path) -> dict:
    shutil.rmtree(output, ignore_errors=True)
    command = [sys.executable, "-m", "beam_pipeline", *args, "--output", str(output), "--overwrite"]
    result = run_measured(command, root, log_path, dict(os.environ, PYTHONPATH=str(root)))
    shutil.rmtree(output, ignore_errors=True)
    return result


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python bench/readme_runs.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", type=Path, required=True, help="a checkout of the code before the change")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved repetitions")
    parser.add_argument("--workdir", type=Path, default=ROOT / "build" / "bench" / "readme_runs",
                        help="the sample corpus, outputs and logs")
    parser.add_argument("--json", type=Path, default=None, help="keep every run in this JSON file")
    parser.add_argument("--listing", type=Path, action="append", default=[],
                        help="also run on this segmentation listing (--num_classes 8); repeatable")
    parser.add_argument("--no_sample", action="store_true", help="only the --listing runs, not README's two")
    args = parser.parse_args(argv)
    workdir = args.workdir.resolve()
    (workdir / "logs").mkdir(parents=True, exist_ok=True)
    sample = readme_sample(workdir / "sample")
    checkouts = {"before": args.baseline.resolve(), "this": ROOT}
    kinds = {} if args.no_sample else dict(RUNS)
    for listing in args.listing:
        kinds[listing.stem] = lambda _, path=listing.resolve(): ["--input", str(path), "--num_classes", "8"]
    runs = {(name, kind): [] for name in kinds for kind in checkouts}
    for repeat in range(args.repeats):
        for kind in interleaved(tuple(checkouts), repeat):
            for name, options in kinds.items():
                result = run_once(checkouts[kind], options(sample), workdir / "out" / kind,
                                  workdir / "logs" / f"{kind}_{name}_r{repeat}.log")
                runs[(name, kind)].append(result)
                log(f"{kind:<7} {name:<15} {result['seconds']:.1f} s  CPU {result['cpu_seconds']:.1f} s  "
                    f"other load {result['other_cores']:.2f}")
    lines = [f"README's first runs, {args.repeats} interleaved repetitions; before = {checkouts['before']}:"]
    for name in kinds:
        for field, title in (("seconds", "wall s"), ("cpu_seconds", "CPU s")):
            values = {kind: [r[field] for r in runs[(name, kind)]] for kind in checkouts}
            ratios = [t / b for t, b in zip(values["this"], values["before"])]
            lines.append(f"  {name:<15} {title:<6} before {fmt_spread(spread_figure(values['before']), '.1f'):>20}"
                         f"   this {fmt_spread(spread_figure(values['this']), '.1f'):>20}"
                         f"   this / before {fmt_spread(spread_figure(ratios))}")
    noise = sorted(r["other_cores"] for done in runs.values() for r in done)
    lines.append(f"  CPU used by other processes meanwhile, cores: median {noise[len(noise) // 2]:.2f}, "
                 f"max {noise[-1]:.2f}")
    print("\n".join(lines))
    write_json(args.json, {"runs": {f"{name}/{kind}": done for (name, kind), done in runs.items()}, "report": lines})
    return 0


if __name__ == "__main__":
    sys.exit(main())
