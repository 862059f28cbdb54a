"""FnApiRunner vs Prism side by side: wall time and peak RSS of the main process and the whole tree.

Usage: python bench/prism_compare.py --prism BIN --sizes x1,x4 --repeats 2 [--extra "--no_stats --balance none"]
Runs `python -m beam_pipeline` as a subprocess and samples /proc every 50 ms for its descendants.
Exploration tool for the Prism question (branch prism); not part of the benchmark suite.
"""
import argparse
import glob
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The corpora bench/pipeline_throughput.py caches (2,000 pairs at x1, x4, ...).
CORPUS = os.path.join(ROOT, "build", "bench", "corpus_2000pairs_{}_*", "segmentation", "manifest.csv")


def _children():
    kids = {}
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(stat) as handle:
                text = handle.read()
        except OSError:
            continue
        pid = int(text.split(" ", 1)[0])
        ppid = int(text.rsplit(")", 1)[1].split()[1])
        kids.setdefault(ppid, []).append(pid)
    return kids


def _rss_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _name(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            cmd = handle.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "?"
    if "prism" in cmd.split(" ", 1)[0]:
        return "prism"
    if "sdk_worker" in cmd or "SdkHarness" in cmd:
        return "sdk_worker"
    return "other"


def _cpu_ticks(pid):
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime + stime
    except (OSError, IndexError, ValueError):
        return None


def measure(cmd, env):
    started = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    peak_tree = peak_main = 0
    peak_by = {}
    ticks = {}
    out = []
    reader = threading.Thread(target=lambda: out.append(proc.stdout.read()))
    reader.start()
    while proc.poll() is None:
        kids = _children()
        tree, stack = [], [proc.pid]
        while stack:
            pid = stack.pop()
            tree.append(pid)
            stack.extend(kids.get(pid, []))
        sizes = {pid: _rss_kb(pid) for pid in tree}
        for pid in tree:
            used = _cpu_ticks(pid)
            if used is not None:
                ticks[pid] = used
        peak_tree = max(peak_tree, sum(sizes.values()))
        peak_main = max(peak_main, sizes.get(proc.pid, 0))
        for pid, size in sizes.items():
            if pid != proc.pid:
                key = _name(pid)
                peak_by[key] = max(peak_by.get(key, 0), size)
        time.sleep(0.05)
    elapsed = time.monotonic() - started
    reader.join()
    if proc.returncode:
        sys.stderr.write(out[0].decode(errors="replace")[-5000:])
        raise SystemExit(f"failed: {cmd}")
    return {"seconds": round(elapsed, 2), "main_mb": round(peak_main / 1024), "tree_mb": round(peak_tree / 1024),
            "cpu_s": round(sum(ticks.values()) / os.sysconf("SC_CLK_TCK"), 1),
            "child_peak_mb": {k: round(v / 1024) for k, v in peak_by.items()}}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--prism", required=True)
    parser.add_argument("--sizes", default="x1,x4")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--extra", default="--no_stats --balance none")
    parser.add_argument("--runners", default="fnapi,prism")
    parser.add_argument("--prism_args", default="")
    parser.add_argument("--keep", default="", help="keep outputs under this folder")
    args = parser.parse_args()
    runner_args = {"fnapi": [], "fnapi_threads": ["--direct_running_mode", "multi_threading"],
                   "prism": ["--runner=PrismRunner", f"--prism_location={args.prism}"]
                   + shlex.split(args.prism_args)}
    env = dict(os.environ)
    results = []
    for repeat in range(args.repeats):
        for size in args.sizes.split(","):
            manifest = glob.glob(CORPUS.format(size))[0]
            order = args.runners.split(",")
            if repeat % 2:
                order.reverse()
            for runner in order:
                out = (os.path.join(args.keep, f"{runner}_{size}") if args.keep
                       else tempfile.mkdtemp(prefix=f"prism_cmp_{runner}_{size}_"))
                cmd = [sys.executable, "-m", "beam_pipeline", "--input", manifest, "--output", out,
                       "--num_classes", "8", "--overwrite"] + shlex.split(args.extra) + runner_args[runner]
                row = dict(runner=runner, size=size, repeat=repeat, **measure(cmd, env))
                with open(os.path.join(out, "manifest.json")) as handle:
                    row["counts"] = json.load(handle).get("counts")
                print(json.dumps(row), flush=True)
                results.append(row)
                if not args.keep:
                    shutil.rmtree(out, ignore_errors=True)
    return results


if __name__ == "__main__":
    main()
