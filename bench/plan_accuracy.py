"""How close ``--plan`` comes to the real run, at two corpus sizes, side by side.

For each size (``--sizes``, multiples of ``--pairs``; the corpora are the ones
bench/pipeline_throughput.py caches), this runs ``python -m beam_pipeline ...
--plan --plan_sample N`` and then the same command without ``--plan``, both as
subprocesses, and prints estimate, actual and estimate/actual for:

* written pairs, rejected pairs, train records (repeat copies included);
* shards per split and the mean train shard size, total shard bytes;
* metadata bytes through the shuffles (the run's ``Shuffle:value_bytes`` counter);
* memory: the estimate per core against the peak RSS of the largest SDK worker
  process, sampled from /proc during the run;
* compute: the estimated vCPU-hours against the CPU time of the whole process
  tree (which also holds the fixed start-up cost, so the 1x actual is high).

The machine is shared, so CPU times are noisy; the counts and bytes are not.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Optional

from beam_pipeline.core.plan import PIPELINE_OVERHEAD
from common import NUM_CLASSES, ROOT, ensure_corpora, generator_version, process_tree

SAMPLE_SECONDS = 0.2
_SHUFFLE_LINE = re.compile(r"^shuffle: ([\d.]+) MB")


class WorkerPeak(threading.Thread):
    """The largest RSS of any single descendant process (the SDK workers) of ``pid``, from /proc."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self._pid = pid
        self._done = threading.Event()
        self._page = os.sysconf("SC_PAGE_SIZE")
        self.peak_bytes = 0

    def run(self) -> None:
        while not self._done.is_set():
            for pid, (_, _, pages) in process_tree(self._pid).items():
                if pid != str(self._pid):
                    self.peak_bytes = max(self.peak_bytes, pages * self._page)
            self._done.wait(SAMPLE_SECONDS)

    def stop(self) -> None:
        self._done.set()
        self.join()


def _command(manifest: Path, output: Path, *extra: str) -> list:
    return [sys.executable, "-m", "beam_pipeline", "--input", str(manifest), "--output", str(output),
            "--num_classes", str(NUM_CLASSES), "--overwrite", *extra]


def run_plan(manifest: Path, output: Path, sample: int) -> dict:
    """The plan, computed in a subprocess exactly as the command line does, returned as a dict."""
    code = ("import json, sys; from beam_pipeline.launcher.pipeline import run; "
            "print(json.dumps(run(sys.argv[1:])['plan']))")
    command = [sys.executable, "-c", code, *_command(manifest, output, "--plan", "--plan_sample", str(sample))[3:]]
    completed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(completed.stdout.strip().splitlines()[-1])


def run_real(manifest: Path, output: Path, log_path: Path) -> dict:
    shutil.rmtree(output, ignore_errors=True)
    with log_path.open("w") as log:
        proc = subprocess.Popen(_command(manifest, output), cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        sampler = WorkerPeak(proc.pid)
        sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)
        sampler.stop()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"pipeline failed; see {log_path}")
    proc.returncode = 0
    manifest_json = json.loads((output / "manifest.json").read_text())
    shuffle_mb = next((float(m.group(1)) for line in log_path.read_text().splitlines()
                       for m in [_SHUFFLE_LINE.match(line)] if m), None)
    shutil.rmtree(output)
    return {"manifest": manifest_json, "cpu_seconds": usage.ru_utime + usage.ru_stime,
            "worker_peak_bytes": sampler.peak_bytes, "shuffle_bytes": None if shuffle_mb is None else shuffle_mb * 1e6}


def compare(plan: dict, real: dict) -> list:
    """(figure, estimate, actual) rows."""
    manifest = real["manifest"]
    counts, splits = manifest["counts"], manifest["splits"]
    rows = [("written pairs", plan["written"], counts["written"]),
            ("rejected pairs", sum(plan["rejected"].values()), counts["rejected"]["total"])]
    train = splits.get("train", {"num_examples": 0, "shards": [], "num_bytes": 0})
    rows.append(("train records", plan["splits"].get("train", {}).get("records", 0), train["num_examples"]))
    for split in sorted(set(plan["splits"]) | set(splits)):
        rows.append((f"{split} shards", plan["splits"].get(split, {}).get("shards", 0),
                     len(splits.get(split, {}).get("shards", []))))
    mean_train = train["num_bytes"] / len(train["shards"]) if train["shards"] else 0
    rows += [("train shard MB", plan["splits"].get("train", {}).get("shard_bytes", 0) / 1e6, mean_train / 1e6),
             ("shard MB, total", plan["output_bytes"] / 1e6, sum(s["num_bytes"] for s in splits.values()) / 1e6),
             ("shuffle MB", plan["shuffle_bytes"] / 1e6,
              None if real["shuffle_bytes"] is None else real["shuffle_bytes"] / 1e6),
             ("worker MB per core", plan["worker_memory_per_core_bytes"] / 1e6, real["worker_peak_bytes"] / 1e6),
             ("CPU seconds", plan["vcpu_hours"] * 3600, real["cpu_seconds"])]
    return rows


def _cell(value: Optional[float]) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.0f}" if abs(value) >= 100 or float(value).is_integer() else f"{value:,.2f}"


def render(results: dict) -> str:
    sizes = sorted(results)
    header = f"{'figure':<22}" + "".join(f"{f'{s}x estimate':>14}{f'{s}x actual':>12}{'est/act':>9}" for s in sizes)
    lines = [header, "-" * len(header)]
    by_figure = {}
    for size in sizes:
        for figure, estimate, actual in results[size]["rows"]:
            by_figure.setdefault(figure, {})[size] = (estimate, actual)
    for figure, cells in by_figure.items():
        line = f"{figure:<22}"
        for size in sizes:
            estimate, actual = cells.get(size, (None, None))
            ratio = estimate / actual if estimate is not None and actual else None
            line += f"{_cell(estimate):>14}{_cell(actual):>12}{_cell(ratio):>9}"
        lines.append(line)
    if len(sizes) >= 2:
        small, large = results[sizes[0]], results[sizes[-1]]
        extra_pairs = large["pairs"] - small["pairs"]
        extra_cpu = large["real_cpu_seconds"] - small["real_cpu_seconds"]
        lines.append(f"CPU per extra pair (no fixed costs): estimate {large['plan_cpu_per_pair'] * 1000:.2f} ms, "
                     f"actual {extra_cpu / extra_pairs * 1000:.2f} ms ({sizes[0]}x -> {sizes[-1]}x)")
    for size in sizes:
        lines.append(f"{size}x: {results[size]['pairs']:,} manifest rows; plan took "
                     f"{results[size]['plan_seconds']:.1f} s for {results[size]['sample']} sampled pairs, the run "
                     f"{results[size]['run_seconds']:.1f} s")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="bench/plan_accuracy.py", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--pairs", type=int, default=2000, help="valid pairs in the 1x corpus")
    parser.add_argument("--sizes", default="1,4", help="corpus sizes to compare, as multiples of --pairs")
    parser.add_argument("--plan_sample", type=int, default=1000, help="pairs --plan measures")
    parser.add_argument("--workdir", type=Path, default=ROOT / "build" / "bench",
                        help="cached corpora (shared with pipeline_throughput.py) and run outputs")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    corpora, _ = ensure_corpora(args.workdir.resolve(), args.pairs, sizes, generator_version())
    results = {}
    for size in sizes:
        corpus = corpora[size]
        output = args.workdir / f"plan_out_x{size}"
        started = time.perf_counter()
        plan = run_plan(corpus.manifest, output, args.plan_sample)
        plan_seconds = time.perf_counter() - started
        started = time.perf_counter()
        real = run_real(corpus.manifest, output, args.workdir / "logs" / f"plan_accuracy_x{size}.log")
        results[size] = {"rows": compare(plan, real), "pairs": corpus.rows, "sample": plan["sample_pairs"],
                         "plan_seconds": plan_seconds, "real_cpu_seconds": real["cpu_seconds"],
                         "plan_cpu_per_pair": plan["cpu_seconds_per_pair"] * PIPELINE_OVERHEAD, "run_seconds": time.perf_counter() - started}
    print(render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
