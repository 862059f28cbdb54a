"""The trainer's time to its first step on a small and a large dataset, verification on (issue 20).

Datasets of ``--pairs`` (default 2,000 and 100,000) distinct copies of the photo corpus's pairs
(tools/corpus_copies.py) are built once with the full pipeline into the work folder and kept (a
100,000-pair dataset is about 23 GB of shards). Then ``python -m trainer`` runs one tiny step on each,
the sizes interleaved over ``--repeats``, with the page cache dropped before each run (when this
process may: root): the time from spawning the trainer to its "first step done" line, median
(min..max), and the ratio of the largest to the smallest within each repeat (target <= 1.5).

    python bench/trainer_start.py --pairs 2000,100000 --repeats 3
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Optional, Sequence

from common import ROOT, log, positive, spread
from scale import NUM_CLASSES, first_rows, first_step_seconds, pair_copies, sizes


def dataset(args, copies: Path, pairs: int) -> Path:
    out = args.workdir / "trainer_start" / f"out_{pairs}"
    if not (out / "manifest.json").exists():
        log(f"building the {pairs:,}-pair dataset -> {out}")
        out.parent.mkdir(parents=True, exist_ok=True)
        with (out.parent / f"pipeline_{pairs}.log").open("w") as handle:
            subprocess.run([sys.executable, "-m", "beam_pipeline", "--input", str(first_rows(copies, pairs)),
                            "--output", str(out), "--num_classes", str(NUM_CLASSES), "--overwrite", "--no_cache"],
                           cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT, check=True)
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, default=ROOT / "build" / "bench")
    parser.add_argument("--pairs", type=sizes, default=[2000, 100_000])
    parser.add_argument("--repeats", type=positive, default=3)
    parser.add_argument("--keep_page_cache", action="store_true", help="do not drop the page cache before runs")
    args = parser.parse_args(argv)
    args.workdir = args.workdir.resolve()
    copies = pair_copies(args.workdir, max(args.pairs))
    outputs = {pairs: dataset(args, copies, pairs) for pairs in args.pairs}
    work = args.workdir / "trainer_start"
    firsts: dict[int, list[float]] = {pairs: [] for pairs in args.pairs}
    for repeat in range(args.repeats):
        for pairs in (args.pairs if repeat % 2 == 0 else list(reversed(args.pairs))):
            log(f"trainer on the {pairs:,}-pair dataset (repeat {repeat + 1})")
            run = first_step_seconds(outputs[pairs], work / "job", work / f"trainer_{pairs}_r{repeat}.log",
                                     not args.keep_page_cache)
            firsts[pairs].append(run["first_step_seconds"])
    small, large = args.pairs[0], args.pairs[-1]
    lines = ["the trainer's time to its first step, verification on, median (min..max):"]
    lines += [f"  {pairs:>9,} pairs: {spread(values, '{:.1f}')} s" for pairs, values in firsts.items()]
    lines.append(f"  {large:,} / {small:,}: {spread([b / a for a, b in zip(firsts[small], firsts[large])])} "
                 f"(target <= 1.5)")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
