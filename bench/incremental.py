"""Re-runs that cost what changed (issue 27; issue 21 before it): each kind of re-run against a full run.

On distinct copies of the photo corpus's pairs (tools/corpus_copies.py, real photos: new bytes, the same
pixels), at each of ``--sizes`` pairs, D is the listing without every ``--delta_every``-th row and Δ those rows
(5 % by default). The cases of each size, in a new order each repeat, with the page cache dropped before each
timed run (when this process may: root):

    full               the command on D + Δ into a fresh output (its cache is written as it goes)
    no_change          the same command again, --overwrite: nothing changed, so nothing is published (the launcher's
                       look, --skip_unchanged auto)
    no_change_run      the same, with --skip_unchanged never: the pipeline runs and keeps every record (what
                       no_change measured before --skip_unchanged)
    delta              an output built from D (not timed), then D + Δ with --overwrite: Δ is validated and written
    filter             the full run's output, then --sample_fraction 0.95 --overwrite: 5 % of the pairs deleted
    resumed            D + Δ into a fresh output, killed (SIGKILL to its process group) once its progress says
                       ``--kill_at`` of validation is done (not timed), then the same command: timed
    resumed_on_parent  the same, on an output that holds D's version: the re-run keeps D's records

Each figure is the median (min..max) over ``--repeats`` of the case's wall time over the same repeat's full run of
its size. The bytes the delta case wrote (lineage) are set against the full run's. With two sizes, a re-run's
marginal cost per unchanged pair ((t(N2) - t(N1)) / (N2 - N1), within each repeat) is set against a full run's
marginal cost per pair: where the ratios tend as the corpus grows. Every case that ends on D + Δ holds what the
full run holds (tools/compare_outputs.record_differences: the live records, stats.json, the counts).

    python bench/incremental.py --json build/bench/incremental.json
    python bench/incremental.py --sizes 2000 --repeats 1          # a quick look
    python bench/incremental.py --sizes 40000 --cases resumed     # one case (and its full run) at a larger size
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

CASES = ("full", "no_change", "no_change_run", "delta", "filter", "resumed", "resumed_on_parent")
TARGETS = {"no_change": 0.10, "no_change_run": 0.25, "delta": 0.30, "filter": 0.25, "resumed": 0.40, "resumed_on_parent": 0.40}
LABELS = {"no_change": "nothing changed", "no_change_run": "nothing changed, run all the same", "delta": "+5 % (D, then D + Δ)", "filter": "a filter removing 5 %",
          "resumed": "killed at 90 %, re-run (fresh)", "resumed_on_parent": "killed at 90 %, re-run (on D)"}
BYTES_TARGET = 0.08
MARGINAL_TARGET = 0.05
KILL_PROGRESS_EVERY = 0.5     # seconds between the killed run's progress lines
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
    run["published_nothing"] = "unchanged: nothing changed since this version" in log_path.read_text(errors="replace")
    return run


def untimed(listing: Path, output: Path, log_path: Path, *extra: str) -> None:
    with log_path.open("w") as handle:
        code = subprocess.call(command(listing, output, *extra), cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT)
    if code != 0:
        raise RuntimeError(f"exit {code}; see {log_path}")


def killed_at(listing: Path, output: Path, log_path: Path, fraction: float, *extra: str) -> float:
    """Start the command and SIGKILL its process group once its progress line says ``fraction`` of the
    pairs are validated; returns the fraction the last progress line said. The run prints a line every
    KILL_PROGRESS_EVERY seconds (``--progress_every``), so the kill lands within a few hundred pairs of
    ``fraction`` instead of up to a 5-second line's worth past it."""
    with log_path.open("w") as handle:
        process = subprocess.Popen(command(listing, output, *extra, "--progress_every", str(KILL_PROGRESS_EVERY)),
                                   cwd=ROOT, stdout=handle,
                                   stderr=subprocess.STDOUT, start_new_session=True)
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


def one_size(args, size: int, repeat: int) -> dict:
    work = args.workdir / "incremental"
    copies = pair_copies(args.workdir, max(args.sizes))
    both, base, _ = listings(copies, size, args.delta_every)
    drop = not args.keep_page_cache
    reference = work / f"full_{size}_r{repeat}"
    results = {}
    cases = args.cases
    order = cases if repeat % 2 == 0 else ("full", *reversed(cases[1:]))
    for case in order:
        out = work / f"{case}_{size}_r{repeat}"
        shutil.rmtree(out, ignore_errors=True)
        log(f"repeat {repeat + 1}, {size:,} pairs: {case}")
        if case == "full":
            shutil.rmtree(reference, ignore_errors=True)
            results[case] = timed(both, reference, work / f"{case}_{size}_r{repeat}.log", drop)
            continue
        if case in ("no_change", "no_change_run", "filter"):
            # the full run's output and its cache, as hard links: each file keeps its version (size, mtime, inode), as
            # the output itself would; a copy moves every version and the re-run's parent check hashes every file
            shutil.copytree(reference, out, symlinks=True, copy_function=os.link)
            extra = {"filter": ("--sample_fraction", "0.95"), "no_change_run": ("--skip_unchanged", "never")}.get(
                case, ())
            run = timed(both, out, work / f"{case}_{size}_r{repeat}.log", drop, "--overwrite", *extra)
        elif case == "delta":
            untimed(base, out, work / f"{case}_base_{size}_r{repeat}.log")
            run = timed(both, out, work / f"{case}_{size}_r{repeat}.log", drop, "--overwrite")
        else:
            extra = ()
            if case == "resumed_on_parent":
                untimed(base, out, work / f"{case}_base_{size}_r{repeat}.log")
                extra = ("--overwrite",)
            run = {"killed_at": killed_at(both, out, work / f"{case}_killed_{size}_r{repeat}.log", args.kill_at,
                                          *extra)}
            run.update(timed(both, out, work / f"{case}_{size}_r{repeat}.log", drop, *extra))
        run["differences"] = [] if case == "filter" else compare_outputs.record_differences(reference, out)
        results[case] = run
        shutil.rmtree(out, ignore_errors=True)
    results["full"]["differences"] = []
    shutil.rmtree(reference, ignore_errors=True)
    return results


def report(repeats: list[dict], sizes: list[int], every: int, cases: Sequence[str] = CASES) -> list[str]:
    lines = []
    for size in sizes:
        runs = [r[size] for r in repeats]
        lines += [f"{size:,} pairs of photo copies (Δ = every {every}th row), {len(runs)} repeat(s), median (min..max):",
                  f"  full run                          {spread([r['full']['seconds'] for r in runs], '{:.1f}')} s"]
        for case in cases[1:]:
            ratios = [r[case]["seconds"] / r["full"]["seconds"] for r in runs]
            lines.append(f"  {LABELS[case]:<33} {spread([r[case]['seconds'] for r in runs], '{:.1f}')} s, "
                         f"{spread(ratios)} of the full run (target <= {TARGETS[case]:.2f})")
        checks = [(r[case]["lineage"]["parent_check"], r[case]["seconds"], r["full"]["seconds"])
                  for r in runs for case in cases[1:] if (r[case]["lineage"].get("parent_check") or {}).get("files")]
        if checks:
            lines.append(f"  the parent check of the re-runs   {spread([c['seconds'] for c, _, _ in checks], '{:.2f}')} s, "
                         f"{spread([c['seconds'] / full for c, _, full in checks], '{:.4f}')} of the full run; "
                         f"{max(c['files'] for c, _, _ in checks)} files looked at, up to "
                         f"{max(c['hashed'] for c, _, _ in checks)} hashed")
        if "delta" in cases:
            written = [r["delta"]["lineage"]["bytes_written"] / r["full"]["lineage"]["bytes_written"] for r in runs]
            lines.append(f"  bytes written by +5 %             {spread(written, '{:.3f}')} of the full run's "
                         f"(target <= {BYTES_TARGET:.2f})")
        for case in cases:
            for index, run in enumerate(runs):
                extra = f", killed at {run[case]['killed_at']:.0%}" if "killed_at" in run[case] else ""
                same = "" if case in ("full", "filter") else (
                    ", holds the full run's records" if not run[case]["differences"]
                    else f", DIFFERENT: {run[case]['differences']}")
                lineage = {k: v for k, v in run[case]["lineage"].items() if k in ("validated", "from_cache",
                                                                                   "records", "bytes_written")}
                nothing = ", published nothing" if run[case].get("published_nothing") else ""
                lines.append(f"    {case} r{index + 1}: {run[case]['seconds']:.1f} s, {lineage}{extra}{same}{nothing}")
    if len(sizes) >= 2:
        small, large = sizes[0], sizes[-1]
        lines.append(f"marginal cost per pair between {small:,} and {large:,} pairs, within each repeat:")
        full = [(r[large]["full"]["seconds"] - r[small]["full"]["seconds"]) / (large - small) for r in repeats]
        lines.append(f"  full run                          {spread([1000 * f for f in full], '{:.2f}')} ms a pair")
        for case in cases[1:]:
            marginal = [(r[large][case]["seconds"] - r[small][case]["seconds"]) / (large - small) for r in repeats]
            ratios = [m / f for m, f in zip(marginal, full)]
            target = f" (target <= {MARGINAL_TARGET:.2f})" if case == "no_change" else ""
            lines.append(f"  {LABELS[case]:<33} {spread([1000 * m for m in marginal], '{:.2f}')} ms a pair, "
                         f"{spread(ratios)} of the full run's{target}")
    noisy = max(run["other_cores"] for r in repeats for size in sizes for run in r[size].values())
    lines.append(f"other processes used up to {noisy:.2f} cores during these runs")
    return lines


def save(args, repeats: list[dict]) -> None:
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"machine": {"cores": os.cpu_count()}, "sizes": args.sizes, "cases": args.cases,
                                         "repeats": [{str(k): v for k, v in r.items()} for r in repeats]}, indent=1))


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, default=ROOT / "build" / "bench")
    parser.add_argument("--sizes", default="10000,20000",
                        help="pairs of D + Δ, comma-separated (default 10000,20000: two sizes give the marginal costs)")
    parser.add_argument("--delta_every", type=positive, default=20,
                        help="every n-th row of the listing is Δ (default 20: 5 %%)")
    parser.add_argument("--kill_at", type=float, default=0.9,
                        help="the share of validation done when the resumed case's first run is killed")
    parser.add_argument("--cases", default=",".join(CASES[1:]),
                        help="the re-runs to time, comma-separated, each against the full run of its repeat, which "
                             f"always runs (default: all of {', '.join(CASES[1:])})")
    parser.add_argument("--repeats", type=positive, default=3)
    parser.add_argument("--keep_page_cache", action="store_true", help="do not drop the page cache before runs")
    parser.add_argument("--json", type=Path, default=None, help="write every run's figures here, after each size")
    args = parser.parse_args(argv)
    args.workdir = args.workdir.resolve()
    args.sizes = sorted(int(size) for size in args.sizes.split(","))
    chosen = {case.strip() for case in args.cases.split(",") if case.strip()}
    if not chosen or not chosen <= set(CASES[1:]):
        parser.error(f"--cases: choose among {', '.join(CASES[1:])}")
    args.cases = tuple(case for case in CASES if case == "full" or case in chosen)
    pair_copies(args.workdir, max(args.sizes))
    (args.workdir / "incremental").mkdir(parents=True, exist_ok=True)
    repeats = []
    for repeat in range(args.repeats):
        order = args.sizes if repeat % 2 == 0 else list(reversed(args.sizes))
        repeats.append({})
        for size in order:
            repeats[-1][size] = one_size(args, size, repeat)
            save(args, repeats)                       # what is done survives a stop
        if repeat + 1 < args.repeats:
            log("after repeat %d:\n%s" % (repeat + 1, "\n".join(report(repeats, args.sizes, args.delta_every,
                                                                          args.cases))))
    lines = report(repeats, args.sizes, args.delta_every, args.cases)
    print("\n".join(lines))
    differing = [case for r in repeats for runs in r.values() for case, run in runs.items() if run.get("differences")]
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
