"""The lost-outcome case of issue 20, run again and again: every run must reconcile or be refused by a gate.

A listing of ``--rows`` rows (default 3,000,000, Parquet) of which ``--selected`` (default 701) pass
``--filter "source == 'real'"`` and the rest are filtered out; in half the runs the selected rows name
pairs that exist (distinct copies of the photo corpus), in the other half files that do not exist.
Before the fix (Beam's data plane on the DirectRunner's side threw away what the runner wrote into a
bundle's input while its timer thread flushed it: launcher/runners.py, send_bundles_by_size) 15 of 21
such runs lost between 32,364 and 978,684 of the filtered-out rows' counts. Each run here is a
``python -m beam_pipeline`` process; its result is one of

* ``reconciled``: published, and manifest.json's counts add up to the discovered inputs (the
  pipeline refuses to publish counts that do not: core/manifest.py);
* ``refused``: stopped by the reject gate (exit 2), as the runs whose selected files are missing are;
* ``LOST`` (a failure of this benchmark): exit 1 naming counts that do not reconcile, or any other end.

    python bench/reconcile_loop.py --runs 20
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

from common import ROOT, cpu_seconds, log, machine_busy_seconds, other_cores

sys.path.insert(0, str(ROOT))
import scale  # noqa: E402
from tools import corpus_copies  # noqa: E402


def missing_listing(copies: Path, rows: int, selected: int) -> Path:
    """``rows`` rows whose ``selected`` rows pass the filter but name files that do not exist."""
    path = copies.parent / f"filtered_{rows}_{selected}_missing.parquet"
    if not path.exists():
        pairs = [(f"images/missing/{i:06d}.png", f"masks/missing/{i:06d}.png") for i in range(selected)]
        temporary = path.with_name(f"tmp-{path.name}")
        corpus_copies.write_listing(str(temporary), pairs, rows - selected)
        temporary.rename(path)
    return path


def run_once(listing: Path, output: Path, log_path: Path) -> dict:
    busy, cpu = machine_busy_seconds(), cpu_seconds()
    started = time.perf_counter()
    with log_path.open("w") as handle:
        code = subprocess.call([sys.executable, "-m", "beam_pipeline", "--input", str(listing), "--output",
                                str(output), "--num_classes", "8", "--filter", corpus_copies.FILTER, "--overwrite"],
                               cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT)
    seconds = time.perf_counter() - started
    text = log_path.read_text(errors="replace")
    if code == 0:
        counts = json.loads((output / "manifest.json").read_text())["counts"]
        accounted = (counts["filtered_out"]["total"] + counts["rejected"]["total"] + counts["duplicates"]
                     + counts["written"])
        result = "reconciled" if accounted == counts["discovered"] else "LOST"
    elif code == 2 and "--max_reject_fraction" in text:
        result = "refused"
    else:
        result = "LOST"
    error = next((line for line in text.splitlines() if line.startswith("error: ")), "")
    return {"result": result, "exit": code, "seconds": round(seconds, 1), "error": error,
            "other_cores": round(other_cores(busy, cpu_seconds() - cpu, seconds), 2), "log": str(log_path)}


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, default=ROOT / "build" / "bench")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--rows", type=int, default=3_000_000)
    parser.add_argument("--selected", type=int, default=701)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    workdir = args.workdir.resolve()
    copies = scale.pair_copies(workdir, args.selected)
    listings = {"existing": scale.filtered_listing(copies, args.rows, args.selected, "parquet"),
                "missing": missing_listing(copies, args.rows, args.selected)}
    runs = []
    for index in range(args.runs):
        kind = ("existing", "missing")[index % 2]
        log(f"run {index + 1} of {args.runs}: {args.rows:,} rows, the {args.selected} selected naming {kind} files")
        run = run_once(listings[kind], workdir / "scale" / "reconcile_out",
                       workdir / "scale" / f"reconcile_{index}.log")
        runs.append(dict(run, kind=kind))
        log(f"  {run['result']} in {run['seconds']} s {run['error'][:200]}")
    print(f"{'run':>4} {'selected files':>14} {'result':>11} {'s':>7} {'other cores':>11}")
    for index, run in enumerate(runs, 1):
        print(f"{index:>4} {run['kind']:>14} {run['result']:>11} {run['seconds']:>7} {run['other_cores']:>11}")
    lost = [run for run in runs if run["result"] == "LOST"]
    print(f"{len(runs) - len(lost)} of {len(runs)} runs reconciled or were refused by a gate; {len(lost)} lost counts")
    if args.json:
        args.json.write_text(json.dumps(runs, indent=1))
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
