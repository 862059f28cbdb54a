"""The near-duplicate grouping step at scale: FindNearPairs (bands of the hash) and FindComponents (Hash-to-Min) on
synthetic 256-bit hashes with planted near pairs, on the DirectRunner as the pipeline runs it (one SDK worker process
per core) (docs/leakage.md, docs/benchmarks.md).

Run ``python bench/near_duplicates.py [--sizes 10000,100000,1000000] [--repeats 3] [--radius 14]
[--shuffle files|beam] [--json FILE]``.

Each run is a child process (``--child N``) that builds and runs one pipeline: the hashes are made by the workers,
in chunks of 10,000 from a seeded generator (no process ever holds them all), and go through the two composites
exactly as GroupNearDuplicates wires them (the index files are written to a temporary folder), the band rows
crossing their shuffle as ``--shuffle`` says: ``files`` (the pipeline's default on the DirectRunner) or ``beam``. The hashes: uniform
random, except that 1 % of them are near copies of another hash (0 to ``radius`` bits flipped), 0.5 % are
chains of ten (each within 4 bits of the one before: a video's frames), and 0.1 % are one identical still frame
per chunk of 10,000 (a parked car's camera). The child checks that every planted pair was found, and the parent
that the pairs found are exactly those a brute force over the planted rows finds.

Figures, each the median (min..max) over the repetitions: the pipeline's wall time (from ``run()`` to the end;
interpreter start and imports are left out) and its time per hash; the ratio of time per hash between the largest and
the smallest size, taken within each repetition; the peak RSS of every process of the child's tree (the launcher and
each SDK worker), sampled from /proc every 0.25 s. Targets (issue 43): time per hash grows <= 1.5x from 10^5 to 10^6,
every process < 2 GB. The sizes run interleaved (reversed every other repetition) so that a slow phase of a shared
machine hits each alike.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path[:0] = [str(ROOT), str(BENCH)]

from common import MB, ProcessPeaks, cpu_seconds, log, machine_busy_seconds, other_cores  # noqa: E402
from harness import fmt_spread, interleaved, new_parser, spread_figure, write_json  # noqa: E402

CHUNK = 10_000
NEAR, CHAIN, BLANK = 0.01, 0.005, 0.001      # shares of the hashes planted as near copies, chains, blank frames
CHAIN_LENGTH, CHAIN_STEP = 10, 4


# --------------------------------------------------------------------------
# The child: one pipeline run
# --------------------------------------------------------------------------
def chunk_hashes(chunk: int, size: int, radius: int, seed: int):
    """(image ids, hashes as (n, 32) uint8, planted pairs as (i, j) image-id pairs) of one chunk."""
    rng = np.random.default_rng([seed, chunk])
    bits = rng.integers(0, 2, (size, 256), dtype=np.uint8)
    planted = []
    near, chains, blank = int(size * NEAR), int(size * CHAIN) // CHAIN_LENGTH, int(size * BLANK)
    at = 0
    for _ in range(near):                                   # a near copy of the hash before it
        bits[at + 1] = bits[at]
        bits[at + 1, rng.choice(256, int(rng.integers(0, radius + 1)), replace=False)] ^= 1
        planted.append((at, at + 1))
        at += 2
    for _ in range(chains):                                 # a video: each frame near the one before
        for k in range(1, CHAIN_LENGTH):
            bits[at + k] = bits[at + k - 1]
            bits[at + k, rng.choice(256, CHAIN_STEP, replace=False)] ^= 1
            planted.append((at + k - 1, at + k))
        at += CHAIN_LENGTH
    bits[at:at + blank] = rng.integers(0, 2, 256, dtype=np.uint8)    # one still frame of this chunk, many times
    planted += [(at + k - 1, at + k) for k in range(1, blank)]
    ids = np.arange(chunk * size, (chunk + 1) * size, dtype=np.uint64) * np.uint64(2654435761) + np.uint64(1)
    hashes = np.packbits(bits, axis=1)
    return ids, hashes, [(int(ids[i]), int(ids[j])) for i, j in planted]


def expected_pairs(hashes: int, radius: int, seed: int) -> int:
    """Every pair within the radius, counted by brute force over the planted rows of each chunk (the other hashes
    are uniform: a pair of them, or with a planted one, lies within the radius with a chance below 10^-40)."""
    chunks, size = max(1, hashes // CHUNK), min(hashes, CHUNK)
    planted_rows = 2 * int(size * NEAR) + CHAIN_LENGTH * (int(size * CHAIN) // CHAIN_LENGTH) + int(size * BLANK)
    total = 0
    for chunk in range(chunks):
        _, rows, _ = chunk_hashes(chunk, size, radius, seed)
        bits = np.unpackbits(rows[:planted_rows], axis=1)
        for i in range(len(bits) - 1):
            total += int(((bits[i + 1:] != bits[i]).sum(axis=1) <= radius).sum())
    return total


def run_child(hashes: int, radius: int, seed: int, workers: int, shuffle: str) -> dict:
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    from beam_pipeline.stages.leakage.components import FindComponents
    from beam_pipeline.stages.leakage.find import FindNearPairs
    from beam_pipeline.stages.specs import ShuffleSpec

    chunks = max(1, hashes // CHUNK)
    size = min(hashes, CHUNK)

    def nodes(chunk):
        ids, rows, _ = chunk_hashes(chunk, size, radius, seed)
        for image, row in zip(ids.tolist(), rows):
            yield image, image, row.tobytes()               # (image id, unit id, hash): each image its own unit

    def planted(chunk):
        return chunk_hashes(chunk, size, radius, seed)[2]

    def missing(found, expected):
        found = set(found)
        return [pair for pair in expected if tuple(sorted(pair)) not in found]

    folder = tempfile.mkdtemp(prefix="near_dup_bench_")
    options = PipelineOptions([f"--direct_num_workers={workers}", "--direct_running_mode=multi_processing"])
    started = time.perf_counter()
    try:
        with beam.Pipeline(options=options) as pipeline:
            chunk_ids = pipeline | "Chunks" >> beam.Create(range(chunks)) | "Spread" >> beam.Reshuffle()
            spec = ShuffleSpec(folder=os.path.join(folder, "shuffle")) if shuffle == "files" else ShuffleSpec()
            pairs, _, _ = (chunk_ids | "Hashes" >> beam.FlatMap(nodes)
                           | "FindNearPairs" >> FindNearPairs(radius, folder, "bench", shuffle=spec))
            labels, _ = (pairs | "Edges" >> beam.Map(lambda p: (p[2], p[3])) | "FindComponents" >> FindComponents())
            found = (pairs | "ImagePairs" >> beam.Map(lambda p: (min(p[0], p[1]), max(p[0], p[1])))
                     | "EachPairOnce" >> beam.Distinct())      # a pair sharing bands of two buckets comes twice
            expected = chunk_ids | "Planted" >> beam.FlatMap(planted)
            counts = {"pairs": found, "labelled_units": labels,
                      "components": labels | "Components" >> beam.Map(lambda l: l[1]) | beam.Distinct()}
            for name, collection in counts.items():
                (collection | f"Count[{name}]" >> beam.combiners.Count.Globally()
                 | f"Write[{name}]" >> beam.Map(_write_count, os.path.join(folder, name)))
            (expected | "PlantedCount" >> beam.combiners.Count.Globally()
             | "WritePlanted" >> beam.Map(_write_count, os.path.join(folder, "planted")))
            (found | "AllFound" >> beam.combiners.ToList()
             | "Missing" >> beam.Map(missing, beam.pvalue.AsList(expected))
             | "MissingCount" >> beam.Map(len) | "WriteMissing" >> beam.Map(_write_count, os.path.join(folder, "missing")))
        seconds = time.perf_counter() - started
        result = {name: int(Path(folder, name).read_text()) for name in
                  ("pairs", "labelled_units", "components", "planted", "missing")}
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return {"hashes": chunks * size, "seconds": seconds, **result}


def _write_count(count: int, path: str) -> None:
    Path(path).write_text(str(count))


# --------------------------------------------------------------------------
# The parent: repeated child runs, measured
# --------------------------------------------------------------------------
def measure(hashes: int, radius: int, seed: int, workers: int, shuffle: str, logs: Path) -> dict:
    command = [sys.executable, str(Path(__file__)), "--child", str(hashes), "--radius", str(radius),
               "--seed", str(seed), "--workers", str(workers), "--shuffle", shuffle]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(BENCH), os.environ.get("PYTHONPATH", "")]))
    log_path = logs / f"near_duplicates_{shuffle}_{hashes}_s{seed}.log"
    busy_before, cpu_before, wall = machine_busy_seconds(), cpu_seconds(), time.perf_counter()
    with log_path.open("w") as log_file:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log_file, env=env, cwd=ROOT)
        peaks = ProcessPeaks(proc.pid)
        peaks.start()
        stdout, _ = proc.communicate()
        peaks.stop()
    wall = time.perf_counter() - wall
    if proc.returncode != 0:
        raise RuntimeError(f"child exited {proc.returncode}; see {log_path}")
    result = json.loads(stdout.decode().strip().splitlines()[-1])
    roles = peaks.by_role()
    result["peak_rss_mb"] = {role: [round(p / MB) for p in values] for role, values in roles.items()}
    result["max_process_mb"] = max(p for values in result["peak_rss_mb"].values() for p in values)
    result["other_cores"] = other_cores(busy_before, cpu_seconds() - cpu_before, wall)   # the noise
    result["child_wall_seconds"] = wall
    result["expected_pairs"] = expected_pairs(hashes, radius, seed)
    return result


def report(runs: dict, sizes: Sequence[int]) -> list:
    lines = [f"{'hashes':>10}  {'seconds':>22}  {'us per hash':>22}  {'largest process MB':>22}  "
             f"pairs found (planted, missed)"]
    for n in sizes:
        done = runs[n]
        seconds = spread_figure([r["seconds"] for r in done])
        per = spread_figure([1e6 * r["seconds"] / r["hashes"] for r in done])
        rss = spread_figure([r["max_process_mb"] for r in done])
        last = done[-1]
        lines.append(f"{n:>10,}  {fmt_spread(seconds, '.1f'):>22}  {fmt_spread(per, '.1f'):>22}  "
                     f"{fmt_spread(rss, '.0f'):>22}  {last['pairs']:,} ({last['planted']:,}, {last['missing']})")
        lines.append(f"{'':>10}  every process's peak RSS, MB, last run: {last['peak_rss_mb']}")
    small, large = sizes[-2] if len(sizes) > 1 else sizes[0], sizes[-1]
    ratios = [(runs[large][i]["seconds"] / runs[large][i]["hashes"]) / (runs[small][i]["seconds"] / runs[small][i]["hashes"])
              for i in range(min(len(runs[small]), len(runs[large])))]
    figure = spread_figure(ratios)
    if len(sizes) >= 3:                  # without the fixed cost: the extra time per extra hash, upper vs lower step
        a, b, c = sizes[-3:]
        marginal = [((runs[c][i]["seconds"] - runs[b][i]["seconds"]) / (c - b))
                    / ((runs[b][i]["seconds"] - runs[a][i]["seconds"]) / (b - a))
                    for i in range(min(len(runs[a]), len(runs[b]), len(runs[c])))]
        lines.append(f"extra time per extra hash, {b:,}..{c:,} / {a:,}..{b:,}: "
                     f"{fmt_spread(spread_figure(marginal))} within each repetition (the fixed cost left out)")
    noise = [r["other_cores"] for done in runs.values() for r in done]
    lines.append(f"CPU used by other processes meanwhile, cores: median {statistics.median(noise):.2f}, "
                 f"max {max(noise):.2f}")
    wrong = [(n, r["pairs"], r["expected_pairs"]) for n in sizes for r in runs[n] if r["pairs"] != r["expected_pairs"]]
    lines.append("every run found exactly the pairs within the radius (brute force over the planted rows)" if not wrong
                 else f"WRONG: runs whose pairs differ from the brute force (hashes, found, expected): {wrong}")
    worst = max(r["max_process_mb"] for done in runs.values() for r in done)
    lines.append(f"time per hash, {large:,} / {small:,}: {fmt_spread(figure)} within each repetition  "
                 f"(target <= 1.5: {'PASS' if figure['median'] <= 1.5 else 'FAIL'})")
    lines.append(f"largest process over every run: {worst} MB  (target < 2048: {'PASS' if worst < 2048 else 'FAIL'})")
    return lines


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = new_parser("python bench/near_duplicates.py", __doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000,1000000", help="numbers of hashes, comma-separated; the ratio is of the two largest, and with three sizes or more the fixed cost is also left out")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--radius", type=int, default=14)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="SDK worker processes")
    parser.add_argument("--shuffle", default="files", choices=("files", "beam"),
                        help="how the band rows cross the shuffle (the pipeline's --shuffle): files, the "
                             "pipeline's default on the DirectRunner, or beam (the DirectRunner then holds them)")
    parser.add_argument("--logs", type=Path, default=Path(tempfile.gettempdir()) / "near_duplicates_bench")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--child", type=int, default=None, help=argparse_hidden())
    parser.add_argument("--seed", type=int, default=0, help=argparse_hidden())
    args = parser.parse_args(argv)
    if args.child is not None:
        print(json.dumps(run_child(args.child, args.radius, args.seed, args.workers, args.shuffle)))
        return 0
    sizes = sorted({int(s) for s in args.sizes.split(",")})
    args.logs.mkdir(parents=True, exist_ok=True)
    runs = {n: [] for n in sizes}
    for repeat in range(args.repeats):
        for n in interleaved(sizes, repeat):
            result = measure(n, args.radius, repeat, args.workers, args.shuffle, args.logs)
            runs[n].append(result)
            log(f"{n:,} hashes: {result['seconds']:.1f} s, {1e6 * result['seconds'] / n:.1f} us per hash, "
                f"largest process {result['max_process_mb']} MB, pairs {result['pairs']:,} "
                f"(expected {result['expected_pairs']:,}; planted {result['planted']:,}, missed {result['missing']}), "
                f"components {result['components']:,}")
    lines = report(runs, sizes)
    print("\n".join(lines))
    write_json(args.json, {"sizes": sizes, "shuffle": args.shuffle, "radius": args.radius, "runs": {str(n): r for n, r in runs.items()}, "report": lines,
                           "median_seconds": {str(n): statistics.median(r["seconds"] for r in runs[n]) for n in sizes}})
    return 0


def argparse_hidden() -> str:
    import argparse
    return argparse.SUPPRESS


if __name__ == "__main__":
    sys.exit(main())
