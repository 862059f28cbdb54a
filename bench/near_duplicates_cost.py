"""What near-duplicate grouping costs a full run, and a +5 % re-run, on real-looking photographs
(docs/leakage.md, docs/benchmarks.md).

Run ``python bench/near_duplicates_cost.py [--baseline DIR] [--pairs 1000] [--repeats 3] [--rerun]``, where DIR holds
the code before near-duplicate grouping (``git archive dfc2e00 | tar -x -C DIR``): its pipeline is "before".
Without ``--baseline`` there is no "before": grouping is measured against ``off`` on this checkout alone, the
same code and the same hash, so that nothing else that changed since dfc2e00 counts for or against it.

The corpus: the first ``--pairs`` JPEG pairs of tools/photo_corpus.py (cached under ``--workdir``). Three kinds of
full run, interleaved (reversed every other repetition), each ``python -m beam_pipeline --input LISTING --output
OUT --num_classes 8 --overwrite`` into a fresh output:

* ``before``: the code before (DIR), its defaults;
* ``group``: this checkout, its defaults (the hash taken in validation, ``--near_duplicates group``);
* ``off``: this checkout with ``--near_duplicates off`` (the hash is still taken: it is part of validation).

With ``--rerun``, also a +5 % re-run of each kind (``rerun_before``, ``rerun_group``, ``rerun_off``): a run on the
first 95 % of the listing (not timed), then the whole listing into the same output (timed: the re-run validates the
new 5 %, and ``group`` compares only their hashes with the parent's index). Figures: the wall time from spawn to
reaping, median (min..max) over the repetitions, and each kind's ratio to the reference (``before``, or ``off``
without a baseline) taken within each repetition; the same for the CPU time of the run and its worker processes
(``RUSAGE_CHILDREN``), which another session's load moves less than wall time. The re-run's extra for grouping is
(``rerun_group`` - the reference's re-run) / the reference's full run, within each repetition.
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

from common import ensure_photo_corpus, log, photo_listing, run_measured  # noqa: E402
from harness import fmt_spread, interleaved, spread_figure, write_json  # noqa: E402

FULL = ("before", "group", "off")
RERUN = ("rerun_before", "rerun_group", "rerun_off")


def pipeline(root: Path, listing: Path, output: Path, extra: Sequence[str], log_path: Path) -> dict:
    command = [sys.executable, "-m", "beam_pipeline", "--input", str(listing), "--output", str(output),
               "--num_classes", "8", "--overwrite", *extra]
    return run_measured(command, root, log_path, dict(os.environ, PYTHONPATH=str(root)))


def one(kind: str, baseline: Optional[Path], listings: dict, workdir: Path, repeat: int) -> dict:
    output = workdir / "out" / kind
    shutil.rmtree(output, ignore_errors=True)
    root = baseline if kind.endswith("before") else ROOT
    extra = ["--near_duplicates", "off"] if kind.endswith("off") else []
    logs = workdir / "logs"
    if kind.startswith("rerun"):
        pipeline(root, listings["parent"], output, extra, logs / f"{kind}_parent_r{repeat}.log")
    result = pipeline(root, listings["full"], output, extra, logs / f"{kind}_r{repeat}.log")
    shutil.rmtree(output, ignore_errors=True)
    return result


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python bench/near_duplicates_cost.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", type=Path, default=None,
                        help="a checkout of the code before grouping (dfc2e00), run as `before`; without it, "
                             "grouping is measured against `off` on this checkout")
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rerun", action="store_true", help="also a +5 %% re-run of each kind")
    parser.add_argument("--workdir", type=Path, default=ROOT / "build" / "bench")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--no_off", action="store_true",
                        help="leave out the `off` runs (the hash without grouping): a third less time at a "
                             "large size, where the targets need only `before` and `group`; needs --baseline")
    args = parser.parse_args(argv)
    if args.baseline is None and args.no_off:
        parser.error("--no_off needs --baseline: without it `off` is the reference")
    reference = "before" if args.baseline is not None else "off"
    workdir = args.workdir.resolve()
    (workdir / "logs").mkdir(parents=True, exist_ok=True)
    folder, _ = ensure_photo_corpus(workdir, args.pairs)
    listings = {"full": photo_listing(folder, "jpeg", args.pairs),
                "parent": photo_listing(folder, "jpeg", args.pairs * 95 // 100)}
    wanted = [k for k in FULL + (RERUN if args.rerun else ())
              if not (args.no_off and k.endswith("off")) and not (args.baseline is None and k.endswith("before"))]
    kinds = tuple(wanted)
    runs = {kind: [] for kind in kinds}
    for repeat in range(args.repeats):
        for kind in interleaved(kinds, repeat):
            result = one(kind, args.baseline.resolve() if args.baseline else None, listings, workdir, repeat)
            runs[kind].append(result)
            log(f"{kind:<13} {result['seconds']:.1f} s  CPU {result['cpu_seconds']:.1f} s  "
                f"other load {result['other_cores']:.2f}")
    lines = [f"{args.pairs} JPEG pairs of tools/photo_corpus.py, {args.repeats} repetitions:"]
    for field in ("seconds", "cpu_seconds"):
        lines.append(f" {'wall time' if field == 'seconds' else 'CPU time of the run and its workers'}, s:")
        for kind in kinds:
            base = f"rerun_{reference}" if kind.startswith("rerun") else reference
            ratios = [run[field] / before[field] for run, before in zip(runs[kind], runs[base])]
            lines.append(f"  {kind:<13} {fmt_spread(spread_figure([r[field] for r in runs[kind]]), '.1f'):>22}   "
                         f"/ {base}: {fmt_spread(spread_figure(ratios))}")
        if args.rerun:
            extra = [(g[field] - b[field]) / full[field]
                     for g, b, full in zip(runs["rerun_group"], runs[f"rerun_{reference}"], runs[reference])]
            lines.append(f"  the re-run's extra for grouping / a full run ({reference}): "
                         f"{fmt_spread(spread_figure(extra))}")
    noise = [r["other_cores"] for done in runs.values() for r in done]
    lines.append(f"  CPU used by other processes meanwhile, cores: median {sorted(noise)[len(noise) // 2]:.2f}, "
                 f"max {max(noise):.2f}")
    print("\n".join(lines))
    write_json(args.json, {"pairs": args.pairs, "reference": reference, "runs": runs, "report": lines})
    return 0


if __name__ == "__main__":
    sys.exit(main())
