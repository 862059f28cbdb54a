"""Readers of a version made of many runs (issue 27): the trainer's first step and verify, segmented against compacted.

On distinct copies of the photo corpus's pairs (tools/corpus_copies.py), a version of ``--pairs`` pairs is built in
``--segments`` runs into one output (``--compact never``): the first run takes the first 1/segments of the listing,
each later run the listing so far plus the next part, minus every ``--delete_every``-th pair of the previous part
(each re-run deletes records from the shards before it). The same final listing is then run into a second output
with ``--compact all``: a version of the same records in full shards. Both are built once and kept.

Then, the two taking turns over ``--repeats``, with the page cache dropped before each run (when this process may:
root): ``python -m trainer`` runs one tiny step (the time from spawning it to its "first step done" line, as
bench/trainer_start.py measures it) and ``python -m beam_pipeline.verify`` checks every file (its wall time).
The figures: medians (min..max), and segmented / compacted within each repeat (target <= 1.0, no slower).

    python bench/version_readers.py --pairs 2000 --segments 10 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Optional, Sequence

from common import ROOT, log, positive, spread
from scale import NUM_CLASSES, first_rows, first_step_seconds, pair_copies, run_measured


def build(args, copies: Path) -> tuple[Path, Path]:
    work = args.workdir / "version_readers" / f"p{args.pairs}_s{args.segments}_d{args.delete_every}"
    segmented, compacted = work / "segmented", work / "compacted"
    source = first_rows(copies, args.pairs)       # its rows name files relative to its folder: listings go beside it
    lines = source.read_text(encoding="utf-8").splitlines(keepends=True)
    header, rows = lines[0], lines[1:]
    part = len(rows) // args.segments
    if not (segmented / "manifest.json").exists() or not (compacted / "manifest.json").exists():
        work.mkdir(parents=True, exist_ok=True)
        kept: list[str] = []
        for segment in range(args.segments):
            if segment:                                           # delete some of the previous part's pairs
                previous = rows[(segment - 1) * part:segment * part]
                gone = set(previous[args.delete_every - 1::args.delete_every])
                kept = [row for row in kept if row not in gone]
            end = len(rows) if segment == args.segments - 1 else (segment + 1) * part
            kept += rows[segment * part:end]
            listing = source.with_name(f"readers_{work.name}_{segment}.csv")
            listing.write_text(header + "".join(kept), encoding="utf-8")
            log(f"segment {segment + 1} of {args.segments}: {len(kept):,} pairs -> {segmented}")
            pipeline(listing, segmented, work / f"segment_{segment}.log", "--compact", "never")
        log(f"the same {len(kept):,} pairs, compacted -> {compacted}")
        pipeline(listing, compacted, work / "compacted.log", "--compact", "all", "--no_cache")
    return segmented, compacted


def pipeline(listing: Path, output: Path, log_path: Path, *extra: str) -> None:
    with log_path.open("w") as handle:
        subprocess.run([sys.executable, "-m", "beam_pipeline", "--input", str(listing), "--output", str(output),
                        "--num_classes", str(NUM_CLASSES), "--overwrite", *extra],
                       cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT, check=True)


def describe(output: Path) -> str:
    manifest = json.loads((output / "manifest.json").read_text())
    shards = [shard for split in manifest["splits"].values() for shard in split["shards"]]
    deleted = sum(len(shard.get("deleted") or ()) for shard in shards)
    runs = {shard["path"].split("/")[1] for shard in shards if shard["path"].startswith("runs/")}
    return f"{len(shards)} shards from {len(runs)} run(s), {deleted} deleted records"


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, default=ROOT / "build" / "bench")
    parser.add_argument("--pairs", type=positive, default=2000)
    parser.add_argument("--segments", type=positive, default=10, help="runs the version is made of (default 10)")
    parser.add_argument("--delete_every", type=positive, default=10,
                        help="each re-run deletes every n-th pair of the previous run's part (default 10)")
    parser.add_argument("--repeats", type=positive, default=3)
    parser.add_argument("--keep_page_cache", action="store_true", help="do not drop the page cache before runs")
    args = parser.parse_args(argv)
    args.workdir = args.workdir.resolve()
    segmented, compacted = build(args, pair_copies(args.workdir, args.pairs))
    work = segmented.parent
    drop = not args.keep_page_cache
    figures: dict[str, dict[str, list[float]]] = {"segmented": {"first": [], "verify": []},
                                                  "compacted": {"first": [], "verify": []}}
    for repeat in range(args.repeats):
        order = ("segmented", "compacted") if repeat % 2 == 0 else ("compacted", "segmented")
        for name in order:
            output = segmented if name == "segmented" else compacted
            log(f"repeat {repeat + 1}: the trainer and verify on the {name} version")
            run = first_step_seconds(output, work / "job", work / f"trainer_{name}_r{repeat}.log", drop)
            figures[name]["first"].append(run["first_step_seconds"])
            run = run_measured([sys.executable, "-m", "beam_pipeline.verify", str(output)],
                               work / f"verify_{name}_r{repeat}.log", drop)
            figures[name]["verify"].append(run["seconds"])
    print(f"{args.pairs:,} photo-copy pairs; segmented: {describe(segmented)}; compacted: {describe(compacted)}; "
          f"{args.repeats} repeat(s), median (min..max):")
    for key, label in (("first", "trainer, spawn to first step"), ("verify", "verify, every file")):
        ratios = [s / c for s, c in zip(figures["segmented"][key], figures["compacted"][key])]
        print(f"  {label:<30} segmented {spread(figures['segmented'][key], '{:.1f}')} s, "
              f"compacted {spread(figures['compacted'][key], '{:.1f}')} s, ratio {spread(ratios)} (target <= 1.0)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
