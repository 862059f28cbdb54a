"""Scale (issue 20): a listing of millions of rows that selects about a thousand pairs, and a corpus of
100,000 real-looking pairs, each at two sizes or more so that growth shows.

What is measured
    * The listing case (``--listing_rows``, default 1,000,000 and 10,000,000 rows): ``--listing_pairs``
      real pairs (default 1,000) and filler rows naming files that do not exist, which
      ``--filter "source == 'real'"`` leaves out, in one Parquet listing (``--listing_format``). The
      full pipeline (statistics and balancing) runs with ``--direct_num_workers 1`` and ``2``: wall
      time, discovery rows/s (the discovered inputs over the ``listing`` phase, from the progress
      lines), and the peak RSS of every process (the launcher, which runs the DirectRunner's engine,
      and each SDK worker), sampled from /proc. Discovery speed-up = rows/s with 2 workers / with 1.
    * The pairs case (``--pairs``, default 2,000, 4,000 and 100,000): distinct copies of the photo
      corpus's pairs (tools/corpus_copies.py: one PNG ``tEXt`` chunk, or with ``--image_format jpeg``
      one JPEG ``COM`` segment, per copy; new bytes, the same pixels), the full pipeline with the
      default workers: wall time, peak RSS of every process, and
      the marginal wall time per pair: between the two smallest sizes (the 2,000-pair run's marginal
      time) and between the second and the largest (at scale). Ratios: largest / smallest peak RSS
      per role; per-pair time at scale / at 2,000 pairs.
    * The trainer's time to its first step on the outputs of the smallest and the largest pairs
      runs, verification on: from spawn to its "first step done" line; ratio largest / smallest.
    * With ``--flink_listing_rows R`` and ``--flink_pairs N``: the listing case of R rows and the pairs
      case of N pairs on a local Flink cluster of two TaskManagers of one slot each (tools/flink), so
      that every shuffle's records cross between TaskManager processes; each output must be the
      DirectRunner's dataset byte for byte (tools/compare_outputs.py). Wall time and the TaskManagers'
      and SDK workers' peak RSS are printed.

    Every run reconciles or it fails (the pipeline refuses to publish counts that do not add up). The
    page cache is dropped before each run when this process may (root), so the 100k-pair run, whose
    input is larger than memory, is not compared with a smaller one read from memory; say
    ``--keep_page_cache`` to skip it. ``--repeats`` interleaves the runs of each case; figures are the
    median (min..max) over the repeats. Outputs are deleted after each run (a 100k-pair run writes
    about 22 GB of shards; its copies take as much).

    python bench/scale.py --json build/bench/scale.json
    python bench/scale.py --listing_rows 100000,300000 --pairs 500,1000,4000 --repeats 1   # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

import common
from common import MB, ROOT, ProcessPeaks, ensure_photo_corpus, log, machine_busy_seconds, other_cores, spread

sys.path.insert(0, str(ROOT))
from tools import corpus_copies  # noqa: E402

NUM_CLASSES = 8
LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) INFO beam_pipeline\.progress: (\w+) +(.*)$")
FIRST_STEP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) INFO trainer\.data\.verification: first step done")
TRAINER_ARGS = ["--epochs", "1", "--steps_per_epoch", "1", "--validation_steps", "1", "--global_batch_size", "2",
                "--crop", "64,64", "--depth", "2", "--width", "8", "--shuffle_buffer", "4",
                "--bn_recalibration_batches", "0"]


def sizes(text: str) -> list[int]:
    values = sorted({int(part) for part in text.split(",") if part.strip()})
    if not values or values[0] < 1:
        raise argparse.ArgumentTypeError(f"expected sizes such as 2000,100000, got {text!r}")
    return values


def drop_page_cache(enabled: bool) -> bool:
    if not enabled:
        return False
    try:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def _stamp(day_time: str, millis: str) -> float:
    return time.mktime(time.strptime(day_time, "%Y-%m-%d %H:%M:%S")) + int(millis) / 1000


def listing_seconds(log_text: str) -> Optional[float]:
    """From the first ``listing`` progress line to the first line of a later phase."""
    start = None
    for line in log_text.splitlines():
        match = LINE.match(line)
        if not match:
            continue
        when = _stamp(match.group(1), match.group(2))
        if match.group(3) == "listing" and start is None:
            start = when
        elif start is not None and match.group(3) not in ("starting", "listing"):
            return when - start
    return None


def run_measured(command: list[str], log_path: Path, cache: bool) -> dict:
    """One subprocess: wall time, peak RSS per role, CPU of others meanwhile; raises when it fails."""
    dropped = drop_page_cache(cache)
    busy_before, cpu_before = machine_busy_seconds(), common.cpu_seconds()
    with log_path.open("w") as handle:
        spawned, started = time.time(), time.perf_counter()
        process = subprocess.Popen(command, cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT)
        peaks = ProcessPeaks(process.pid)
        peaks.start()
        code = process.wait()
        seconds = time.perf_counter() - started
        peaks.stop()
    if code != 0:
        raise RuntimeError(f"exit {code}: {' '.join(command)}; see {log_path}")
    roles = peaks.by_role()
    return {"seconds": seconds, "spawned": spawned, "page_cache_dropped": dropped,
            "launcher_mb": max(roles.get("launcher", [0])) / MB,
            "sdk_worker_mb": [peak / MB for peak in roles.get("sdk_worker", [])],
            "other_cores": other_cores(busy_before, common.cpu_seconds() - cpu_before, seconds),
            "log": str(log_path)}


def pipeline(listing: Path, output: Path, log_path: Path, cache: bool, extra: Sequence[str] = ()) -> dict:
    shutil.rmtree(output, ignore_errors=True)
    command = [sys.executable, "-m", "beam_pipeline", "--input", str(listing), "--output", str(output),
               "--num_classes", str(NUM_CLASSES), "--overwrite", *extra]
    result = run_measured(command, log_path, cache)
    manifest = json.loads((output / "manifest.json").read_text())
    result.update(counts=manifest["counts"], listing_seconds=listing_seconds(log_path.read_text()))
    return result


def first_step_seconds(data: Path, job_dir: Path, log_path: Path, cache: bool) -> dict:
    shutil.rmtree(job_dir, ignore_errors=True)
    result = run_measured([sys.executable, "-m", "trainer", "--data", str(data), "--job_dir", str(job_dir),
                           *TRAINER_ARGS], log_path, cache)
    for line in log_path.read_text().splitlines():
        match = FIRST_STEP.match(line)
        if match:
            result["first_step_seconds"] = _stamp(match.group(1), match.group(2)) - result["spawned"]
            break
    shutil.rmtree(job_dir, ignore_errors=True)
    return result


# --------------------------------------------------------------------------
# The corpora
# --------------------------------------------------------------------------
def pair_copies(workdir: Path, pairs: int, image_format: str = "png") -> Path:
    """At least ``pairs`` distinct copies of the photo corpus's pairs (its PNG or its JPEG images), written
    once; their listing."""
    photo, _ = ensure_photo_corpus(workdir, min(pairs, 2000))
    prefix = "copies" if image_format == "png" else f"copies_{image_format}"
    folder = workdir / "scale" / f"{prefix}_g{common.photo_generator_version()}"
    listing = folder / "listing.csv"
    if not listing.exists() or common.count_rows(listing) < pairs:
        log(f"writing {pairs:,} copies of the photo corpus's pairs -> {folder}")
        shutil.rmtree(folder, ignore_errors=True)
        rows = corpus_copies.write_copies(str(photo / common.PHOTO_FORMATS[image_format]), str(folder), pairs)
        corpus_copies.write_listing(str(listing), rows, 0)
    return listing


def first_rows(listing: Path, rows: int) -> Path:
    """A listing of the first ``rows`` rows of ``listing``, beside it."""
    path = listing.with_name(f"listing_{rows}.csv")
    if not path.exists():
        with listing.open(encoding="utf-8") as handle:
            lines = [next(handle) for _ in range(rows + 1)]
        path.write_text("".join(lines), encoding="utf-8")
    return path


def filtered_listing(copies: Path, rows: int, real: int, kind: str) -> Path:
    """``rows`` rows of which ``real`` name copies (source ``real``) and the rest missing files."""
    folder = copies.parent
    path = folder / f"filtered_{rows}_{real}.{kind}"
    if not path.exists():
        log(f"writing a listing of {rows:,} rows ({real:,} selected) -> {path}")
        with copies.open(encoding="utf-8") as handle:
            next(handle)
            pairs = [tuple(next(handle).strip().split(",")[:2]) for _ in range(real)]
        temporary = path.with_name(f"tmp-{path.name}")
        corpus_copies.write_listing(str(temporary), pairs, rows - real)
        temporary.rename(path)
    return path


# --------------------------------------------------------------------------
# The cases
# --------------------------------------------------------------------------
def listing_case(args, copies: Path) -> dict:
    results: dict = {}
    for repeat in range(args.repeats):
        for rows in args.listing_rows:
            listing = filtered_listing(copies, rows, args.listing_pairs, args.listing_format)
            for workers in ((1, 2) if repeat % 2 == 0 else (2, 1)):
                tag = f"listing_{rows}_w{workers}_r{repeat}"
                log(f"listing case: {rows:,} rows, --direct_num_workers {workers} (repeat {repeat + 1})")
                run = pipeline(listing, args.workdir / "scale" / "out", args.workdir / "scale" / f"{tag}.log",
                               not args.keep_page_cache,
                               ["--filter", corpus_copies.FILTER, "--direct_num_workers", str(workers)])
                run["rows_per_second"] = run["counts"]["discovered"] / run["listing_seconds"]
                results.setdefault(str(rows), {}).setdefault(str(workers), []).append(run)
    shutil.rmtree(args.workdir / "scale" / "out", ignore_errors=True)
    return results


def pairs_case(args, copies: Path) -> dict:
    results: dict = {}
    for repeat in range(args.repeats):
        order = args.pairs if repeat % 2 == 0 else list(reversed(args.pairs))
        for pairs in order:
            out = args.workdir / "scale" / f"out_{pairs}"
            log(f"pairs case: {pairs:,} pairs (repeat {repeat + 1})")
            run = pipeline(first_rows(copies, pairs), out, args.workdir / "scale" / f"pairs_{pairs}_r{repeat}.log",
                           not args.keep_page_cache, args.pipeline_args.split())
            if not args.skip_trainer and pairs in (args.pairs[0], args.pairs[-1]):
                log(f"trainer on the {pairs:,}-pair dataset")
                run["trainer"] = first_step_seconds(out, args.workdir / "scale" / "job",
                                                    args.workdir / "scale" / f"trainer_{pairs}_r{repeat}.log",
                                                    not args.keep_page_cache)
            shutil.rmtree(out, ignore_errors=True)
            results.setdefault(str(pairs), []).append(run)
    return results


# --------------------------------------------------------------------------
# The report
# --------------------------------------------------------------------------
def _worker_mb(run: dict) -> float:
    return max(run["sdk_worker_mb"], default=0.0)


def flink_case(args, copies: Path) -> dict:
    """The listing and pairs cases on a two-TaskManager Flink cluster, each against the DirectRunner's run."""
    from tools import compare_outputs
    from tools.flink import cluster
    cases = []
    if args.flink_listing_rows:
        listing = filtered_listing(copies, args.flink_listing_rows, args.listing_pairs, args.listing_format)
        cases.append((f"listing_{args.flink_listing_rows}", listing, ["--filter", corpus_copies.FILTER]))
    if args.flink_pairs:
        cases.append((f"pairs_{args.flink_pairs}", first_rows(copies, args.flink_pairs), []))
    results = {}
    work = args.workdir / "scale" / "flink"
    shutil.rmtree(work, ignore_errors=True)
    jar = cluster.job_server_jar()
    with cluster.FlinkCluster(str(work), slots=1, taskmanagers=2) as flink, \
            cluster.WorkerPool(str(work / "log" / "worker_pool.log")) as pool:
        flags = cluster.pipeline_flags(flink, pool, jar)
        for name, listing, extra in cases:
            direct_out, flink_out = args.workdir / "scale" / f"{name}_direct", args.workdir / "scale" / f"{name}_flink"
            log(f"Flink case {name}: the DirectRunner's run, then the same on Flink")
            direct = pipeline(listing, direct_out, args.workdir / "scale" / f"{name}_direct.log", False, extra)
            on_flink = pipeline(listing, flink_out, args.workdir / "scale" / f"{name}_flink.log", False,
                                [*extra, *flags])
            on_flink["taskmanager_mb"] = _peaks_of(flink.taskmanagers)
            on_flink["pool_mb"] = _peaks_of([pool.process])
            on_flink["differences"] = compare_outputs.differences(direct_out, flink_out)
            results[name] = {"direct": direct, "flink": on_flink}
            shutil.rmtree(direct_out, ignore_errors=True)
            shutil.rmtree(flink_out, ignore_errors=True)
    return results


def _peaks_of(processes) -> list[float]:
    """The peak RSS (VmHWM) of running processes and their descendants, in MB."""
    found = []
    for process in processes:
        for pid in common.process_tree(process.pid):
            try:
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            found += [int(line.split()[1]) / 1024 for line in status.splitlines() if line.startswith("VmHWM:")]
    return sorted(found, reverse=True)


def report_flink(results: dict) -> list[str]:
    lines = ["on a Flink cluster of two TaskManagers (one slot each) against the DirectRunner:"]
    for name, runs in results.items():
        flink = runs["flink"]
        verdict = "byte-identical" if not flink["differences"] else f"DIFFERENT: {flink['differences'][:3]}"
        lines.append(f"  {name}: DirectRunner {runs['direct']['seconds']:.1f} s, Flink {flink['seconds']:.1f} s, "
                     f"{verdict}; TaskManagers' peak RSS {', '.join(f'{mb:.0f}' for mb in flink['taskmanager_mb'])} MB")
    return lines


def report_listing(results: dict) -> list[str]:
    lines = ["listing case (full pipeline, --filter leaves all but the selected rows out):",
             f"  {'rows':>12} {'workers':>7} {'wall s':>16} {'discovery rows/s':>22} {'launcher MB':>16} "
             f"{'worker MB (max)':>16}"]
    for rows, by_workers in results.items():
        for workers, runs in sorted(by_workers.items()):
            lines.append(f"  {int(rows):>12,} {workers:>7} {spread([r['seconds'] for r in runs], '{:.1f}'):>16} "
                         f"{spread([r['rows_per_second'] for r in runs], '{:,.0f}'):>22} "
                         f"{spread([r['launcher_mb'] for r in runs], '{:.0f}'):>16} "
                         f"{spread([_worker_mb(r) for r in runs], '{:.0f}'):>16}")
        if {"1", "2"} <= set(by_workers):
            speedups = [two["rows_per_second"] / one["rows_per_second"]
                        for one, two in zip(by_workers["1"], by_workers["2"])]
            lines.append(f"  {'':>12} discovery speed-up, 2 workers / 1: {spread(speedups)} (target >= 1.6)")
    peak = max(max(r["launcher_mb"], _worker_mb(r)) for w in results.values() for runs in w.values() for r in runs)
    lines.append(f"  largest peak RSS of any process: {peak:.0f} MB (target < 2048)")
    return lines


def report_pairs(results: dict, pairs: Sequence[int]) -> list[str]:
    lines = ["pairs case (full pipeline, default workers):",
             f"  {'pairs':>8} {'wall s':>18} {'launcher MB':>16} {'worker MB (max)':>16} {'trainer 1st step s':>20}"]
    for size in pairs:
        runs = results[str(size)]
        trainer = [r["trainer"]["first_step_seconds"] for r in runs if "trainer" in r]
        lines.append(f"  {size:>8,} {spread([r['seconds'] for r in runs], '{:.1f}'):>18} "
                     f"{spread([r['launcher_mb'] for r in runs], '{:.0f}'):>16} "
                     f"{spread([_worker_mb(r) for r in runs], '{:.0f}'):>16} "
                     f"{spread(trainer, '{:.1f}') if trainer else '-':>20}")
    small, large = str(pairs[0]), str(pairs[-1])
    for role, pick in (("launcher", lambda r: r["launcher_mb"]), ("sdk worker", _worker_mb)):
        ratios = [pick(b) / pick(a) for a, b in zip(results[small], results[large])]
        lines.append(f"  peak RSS {role}, {int(large):,} / {int(small):,} pairs: {spread(ratios)} (target <= 1.2)")
    if len(pairs) >= 3:
        second = str(pairs[1])
        at_small = [(b["seconds"] - a["seconds"]) / (pairs[1] - pairs[0])
                    for a, b in zip(results[small], results[second])]
        at_scale = [(c["seconds"] - b["seconds"]) / (pairs[-1] - pairs[1])
                    for b, c in zip(results[second], results[large])]
        lines.append(f"  marginal s per pair: {spread([t * 1e3 for t in at_small], '{:.2f}')} ms at "
                     f"{pairs[0]:,}-{pairs[1]:,}, {spread([t * 1e3 for t in at_scale], '{:.2f}')} ms at "
                     f"{pairs[1]:,}-{pairs[-1]:,}; ratio {spread([b / a for a, b in zip(at_small, at_scale)])} "
                     "(target <= 1.2)")
    trained = [(a["trainer"]["first_step_seconds"], b["trainer"]["first_step_seconds"])
               for a, b in zip(results[small], results[large]) if "trainer" in a and "trainer" in b]
    if trained:
        lines.append(f"  trainer's time to its first step, {int(large):,} / {int(small):,} pairs: "
                     f"{spread([b / a for a, b in trained])} (target <= 1.5)")
    noisy = max(r["other_cores"] for runs in results.values() for r in runs)
    lines.append(f"  other processes used up to {noisy:.2f} cores during these runs")
    return lines


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, default=ROOT / "build" / "bench")
    parser.add_argument("--listing_rows", type=sizes, default=[1_000_000, 10_000_000])
    parser.add_argument("--listing_pairs", type=int, default=1000, help="selected rows of each listing")
    parser.add_argument("--listing_format", choices=("parquet", "csv"), default="parquet")
    parser.add_argument("--pairs", type=sizes, default=[2000, 4000, 100_000])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--image_format", choices=sorted(common.PHOTO_FORMATS), default="png",
                        help="copy the photo corpus's PNG images (about 220 KB a pair with its mask) or its JPEG "
                             "images (about 36 KB), for a disk too small for 100,000 PNG pairs and their shards")
    parser.add_argument("--pipeline_args", default="",
                        help="more options for every run of the pairs case, e.g. '--near_duplicates off'")
    parser.add_argument("--skip_listing", action="store_true")
    parser.add_argument("--skip_pairs", action="store_true")
    parser.add_argument("--skip_trainer", action="store_true")
    parser.add_argument("--keep_page_cache", action="store_true", help="do not drop the page cache before runs")
    parser.add_argument("--flink_listing_rows", type=int, default=0,
                        help="also run a listing of this many rows on a two-TaskManager Flink cluster "
                             "(needs java and mvn)")
    parser.add_argument("--flink_pairs", type=int, default=0, help="also run this many pairs on that cluster")
    parser.add_argument("--json", type=Path, default=None, help="write every run's figures here")
    args = parser.parse_args(argv)
    args.workdir = args.workdir.resolve()
    copies = pair_copies(args.workdir, max([args.listing_pairs, args.flink_pairs] +
                                           ([] if args.skip_pairs else args.pairs)), args.image_format)
    record: dict = {"machine": {"cores": os.cpu_count()}, "args": {k: str(v) for k, v in vars(args).items()}}
    lines = []
    if not args.skip_listing:
        record["listing"] = listing_case(args, copies)
        lines += report_listing(record["listing"])
    if not args.skip_pairs:
        record["pairs"] = pairs_case(args, copies)
        lines += report_pairs(record["pairs"], args.pairs)
    if args.flink_listing_rows or args.flink_pairs:
        record["flink"] = flink_case(args, copies)
        lines += report_flink(record["flink"])
    print("\n".join(lines))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(record, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
