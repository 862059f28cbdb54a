"""Incremental and resumed runs (issue 21): what the verdict cache (docs/cache.md) saves, against a full run.

On ``--pairs`` distinct copies of the photo corpus's pairs (tools/corpus_copies.py, real photos: new
bytes, the same pixels), D is the listing without every ``--delta_every``-th row and Δ those rows
(5 % by default). Four cases, each repeat in a new order, with the page cache dropped before each
timed run (when this process may: root):

    full       the command on D + Δ into a fresh output (its cache is written as it goes)
    no change  the same command again, --overwrite: every verdict comes from the cache
    + 5 %      an output built from D (not timed), then D + Δ with --overwrite: Δ is validated
    resumed    D + Δ into a fresh output, killed (SIGKILL to its process group) once its progress says
               ``--kill_at`` of validation is done (not timed), then the same command: timed

Each figure is the median (min..max) over ``--repeats`` of the case's wall time over the same repeat's
full run. Every run's output is compared with the full run's (tools/compare_outputs.py: shards,
stats.json, transform output, rejects, class index), and each run's lineage (manifest.json) is printed:
how many pairs were validated afresh and how many came from the cache.

    python bench/incremental.py --json build/bench/incremental.json
    python bench/incremental.py --pairs 2000 --repeats 1          # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

from common import ROOT, log, positive, spread
from scale import NUM_CLASSES, first_rows, pair_copies, run_measured

sys.path.insert(0, str(ROOT))
from tools import compare_outputs  # noqa: E402

CASES = ("full", "no_change", "delta", "resumed")
TARGETS = {"no_change": 0.25, "delta": 0.35, "resumed": 0.40}
VALIDATING = re.compile(r"beam_pipeline\.progress: validating +([\d,]+)/([\d,]+) pairs")


def listings(copies: Path, pairs: int, every: int) -> tuple[Path, Path, int]:
    """(D + Δ, D, size of Δ): the first ``pairs`` rows of the copies, and the same without every ``every``-th."""
    both = first_rows(copies, pairs)
    lines = both.read_text(encoding="utf-8").splitlines(keepends=True)
    header, rows = lines[0], lines[1:]
    base = [row for index, row in enumerate(rows) if index % every != every - 1]
    path = both.with_name(f"listing_{pairs}_without_every_{every}.csv")
    if not path.exists():
        path.write_text(header + "".join(base), encoding="utf-8")
    return both, path, len(rows) - len(base)


def command(listing: Path, output: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "beam_pipeline", "--input", str(listing), "--output", str(output),
            "--num_classes", str(NUM_CLASSES), *extra]


def lineage(output: Path) -> dict:
    return json.loads((output / "manifest.json").read_text())["lineage"]


def timed(listing: Path, output: Path, log_path: Path, drop: bool, *extra: str) -> dict:
    run = run_measured(command(listing, output, *extra), log_path, drop)
    run["lineage"] = {key: value for key, value in lineage(output).items() if key != "cache"}
    return run


def untimed(listing: Path, output: Path, log_path: Path, *extra: str) -> None:
    with log_path.open("w") as handle:
        code = subprocess.call(command(listing, output, *extra), cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT)
    if code != 0:
        raise RuntimeError(f"exit {code}; see {log_path}")


def killed_at(listing: Path, output: Path, log_path: Path, fraction: float) -> float:
    """Start the command and SIGKILL its process group once its progress line says ``fraction`` of the
    pairs are validated; returns the fraction the last progress line said."""
    with log_path.open("w") as handle:
        process = subprocess.Popen(command(listing, output), cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    try:
        while process.poll() is None:
            matches = VALIDATING.findall(log_path.read_text(errors="replace"))
            if matches:
                done, total = (int(value.replace(",", "")) for value in matches[-1])
                if done >= fraction * total:
                    return done / total
            time.sleep(0.2)
        raise RuntimeError(f"the run ended ({process.returncode}) before {fraction:.0%} of validation; "
                           f"see {log_path}")
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def one_repeat(args, both: Path, base: Path, repeat: int) -> dict:
    work = args.workdir / "incremental"
    drop = not args.keep_page_cache
    reference = work / f"full_r{repeat}"
    results = {}
    order = CASES if repeat % 2 == 0 else ("full", *reversed(CASES[1:]))
    for case in order:
        out = work / f"{case}_r{repeat}"
        shutil.rmtree(out, ignore_errors=True)
        log(f"repeat {repeat + 1}: {case}")
        if case == "full":
            results[case] = timed(both, out, work / f"{case}_r{repeat}.log", drop)
            results[case]["cache_bytes"] = sum(path.stat().st_size for path in (out / "cache").rglob("*")
                                               if path.is_file())
            continue
        if case == "no_change":
            shutil.copytree(reference, out, symlinks=True)     # the full run's output and its cache
            run = timed(both, out, work / f"{case}_r{repeat}.log", drop, "--overwrite")
        elif case == "delta":
            untimed(base, out, work / f"{case}_base_r{repeat}.log")
            run = timed(both, out, work / f"{case}_r{repeat}.log", drop, "--overwrite")
        else:
            run = {"killed_at": killed_at(both, out, work / f"{case}_killed_r{repeat}.log", args.kill_at)}
            run.update(timed(both, out, work / f"{case}_r{repeat}.log", drop))
        run["differences"] = compare_outputs.differences(reference, out)
        results[case] = run
        shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(reference, ignore_errors=True)
    return results


def report(repeats: list[dict], pairs: int, delta: int) -> list[str]:
    lines = [f"incremental runs on {pairs:,} pairs of photo copies (Δ = {delta:,} pairs), "
             f"{len(repeats)} repeat(s), median (min..max):",
             f"  full run                 {spread([r['full']['seconds'] for r in repeats], '{:.1f}')} s, "
             f"its verdict cache {spread([r['full']['cache_bytes'] / pairs for r in repeats], '{:.0f}')} bytes per pair"]
    for case, label in (("no_change", "nothing changed"), ("delta", f"+{delta:,} new pairs"),
                        ("resumed", "killed, then re-run")):
        ratios = [r[case]["seconds"] / r["full"]["seconds"] for r in repeats]
        lines.append(f"  {label:<24} {spread([r[case]['seconds'] for r in repeats], '{:.1f}')} s, "
                     f"{spread(ratios)} of the full run (target <= {TARGETS[case]:.2f})")
    for case in CASES:
        for index, run in enumerate(repeats):
            extra = f", killed at {run[case]['killed_at']:.0%} of validation" if "killed_at" in run[case] else ""
            same = "" if case == "full" else (", output equal to the full run's" if not run[case]["differences"]
                                               else f", DIFFERENT: {run[case]['differences'][:3]}")
            lines.append(f"    {case} r{index + 1}: {run[case]['seconds']:.1f} s, lineage {run[case]['lineage']}"
                         f"{extra}{same}")
    noisy = max(run["other_cores"] for r in repeats for run in r.values())
    lines.append(f"  other processes used up to {noisy:.2f} cores during these runs")
    return lines


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, default=ROOT / "build" / "bench")
    parser.add_argument("--pairs", type=positive, default=20_000, help="pairs of D + Δ (default 20,000)")
    parser.add_argument("--delta_every", type=positive, default=20,
                        help="every n-th row of the listing is Δ (default 20: 5 %%)")
    parser.add_argument("--kill_at", type=float, default=0.9,
                        help="the share of validation done when the resumed case's first run is killed")
    parser.add_argument("--repeats", type=positive, default=3)
    parser.add_argument("--keep_page_cache", action="store_true", help="do not drop the page cache before runs")
    parser.add_argument("--json", type=Path, default=None, help="write every run's figures here")
    args = parser.parse_args(argv)
    args.workdir = args.workdir.resolve()
    copies = pair_copies(args.workdir, args.pairs)
    both, base, delta = listings(copies, args.pairs, args.delta_every)
    (args.workdir / "incremental").mkdir(parents=True, exist_ok=True)
    repeats = [one_repeat(args, both, base, repeat) for repeat in range(args.repeats)]
    lines = report(repeats, args.pairs, delta)
    print("\n".join(lines))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"machine": {"cores": os.cpu_count()}, "pairs": args.pairs, "delta": delta,
                                         "repeats": repeats}, indent=1))
    differing = [case for r in repeats for case, run in r.items() if run.get("differences")]
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
