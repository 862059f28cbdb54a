"""Where a DirectRunner run's wall time goes, step by step: every fused stage the runner executes, timed.

    python bench/step_times.py --json build/bench/steps_a.json -- --input LISTING --output OUT --num_classes 8
    python bench/step_times.py --compare build/bench/steps_a.json build/bench/steps_b.json [--depth 2]

The first form runs ``python -m beam_pipeline`` with the given arguments in this process, with Beam's
``FnApiRunner._execute_bundle`` wrapped to record each bundle's stage, start and wall time (the launcher blocks
on each bundle, so the stages' times add up to the runner's share of the run; the SDK workers' work is inside
them). It prints the stages that took longest, then the time per step: a stage is named by the top-level
transform of its first part (``--depth 2``: and the one below it, e.g. ``GroupNearDuplicates/FindComponents``),
with the number of stages. The second form prints two such files side by side: which steps one run has that the
other has not, and how many stages and seconds each adds. It is how the per-step costs in docs/benchmarks.md
("Splits you can trust") were found: a stage has a fixed cost on the runner (scheduling a bundle, building its
operations in a worker), so a step made of many small stages costs more than its elements say. One run is
noisy (validation alone moves by seconds between runs): compare steps, not totals, and repeat.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]          # this checkout's pipeline, as bench/near_duplicates_cost.py runs it

_PART = re.compile(r"[()+]+")
_PREFIX = re.compile(r"^(ref_AppliedPTransform_|ref_PCollection_)")


def step_of(stage: str, depth: int) -> str:
    """The step a fused stage belongs to: the top-level transform (and ``depth - 1`` levels below) of its first
    part that names a transform."""
    for part in (p for p in _PART.split(stage) if p):
        name = _PREFIX.sub("", part)
        if name.startswith("PCollection_"):
            continue
        levels = re.split(r"[/-]", name)
        return "/".join(levels[:depth])
    return stage[:40]


def record(argv: Sequence[str]) -> Tuple[int, List[Tuple[str, float, float]]]:
    """Run the pipeline with ``argv`` here; (its exit code, [(stage, start, seconds), ...])."""
    from apache_beam.runners.portability.fn_api_runner import fn_runner
    original = fn_runner.FnApiRunner._execute_bundle
    log: List[Tuple[str, float, float]] = []
    began = time.monotonic()

    def timed(self, context, bundle_context_manager, bundle_input):
        start = time.monotonic()
        try:
            return original(self, context, bundle_context_manager, bundle_input)
        finally:
            log.append((bundle_context_manager.stage.name, start - began, time.monotonic() - start))

    fn_runner.FnApiRunner._execute_bundle = timed
    from beam_pipeline.__main__ import main
    try:
        code = main(list(argv))
    finally:
        fn_runner.FnApiRunner._execute_bundle = original
    return code, log


def by_step(log, depth: int) -> Dict[str, Tuple[int, float]]:
    steps: Dict[str, List[float]] = collections.defaultdict(list)
    for stage, _, seconds in log:
        steps[step_of(stage, depth)].append(seconds)
    return {step: (len(times), sum(times)) for step, times in steps.items()}


def show(log, depth: int, top: int) -> None:
    print(f"{len(log)} stages, {sum(s for _, _, s in log):.2f} s in all")
    print(f"the {top} longest stages (start, seconds, step):")
    for stage, start, seconds in sorted(log, key=lambda row: -row[2])[:top]:
        print(f"  {start:7.2f} {seconds:6.2f}  {step_of(stage, 3)}")
    print("per step (stages, seconds):")
    for step, (count, seconds) in sorted(by_step(log, depth).items(), key=lambda item: -item[1][1]):
        print(f"  {count:4d} {seconds:7.2f}  {step}")


def compare(first: Path, second: Path, depth: int) -> None:
    a, b = (by_step(json.loads(path.read_text())["stages"], depth) for path in (first, second))
    print(f"{'step':60s} {'stages':>13s} {'seconds':>15s}")
    for step in sorted(set(a) | set(b), key=lambda s: -(b.get(s, (0, 0))[1] - a.get(s, (0, 0))[1])):
        (ca, sa), (cb, sb) = a.get(step, (0, 0.0)), b.get(step, (0, 0.0))
        print(f"{step[:60]:60s} {ca:5d} -> {cb:5d} {sa:6.2f} -> {sb:6.2f}")
    print(f"{'all':60s} {sum(c for c, _ in a.values()):5d} -> {sum(c for c, _ in b.values()):5d} "
          f"{sum(s for _, s in a.values()):6.2f} -> {sum(s for _, s in b.values()):6.2f}")


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    pipeline_args = argv[argv.index("--") + 1:] if "--" in argv else []
    own = argv[:argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(prog="python bench/step_times.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", type=Path, default=None, help="write the stages here")
    parser.add_argument("--compare", type=Path, nargs=2, default=None, metavar=("A", "B"),
                        help="print two --json files side by side instead of running")
    parser.add_argument("--depth", type=int, default=2, help="levels of a transform's name that name its step")
    parser.add_argument("--top", type=int, default=15, help="the longest stages shown")
    args = parser.parse_args(own)
    if args.compare:
        compare(*args.compare, args.depth)
        return 0
    if not pipeline_args:
        parser.error("give the pipeline's arguments after --")
    code, log = record(pipeline_args)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"argv": pipeline_args, "exit": code, "stages": log}))
    show(log, args.depth, args.top)
    return code


if __name__ == "__main__":
    sys.exit(main())
