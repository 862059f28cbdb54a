"""COCO annotation files of 100 MiB and 1 GiB (issue 42, item 2): is the pipeline's memory flat in the annotation
file's size, and what do drawing masks and reading the categories at launch cost?

What is measured
    * Pipeline runs: ``python -m beam_pipeline --input DATASET --layout coco --output OUT --overwrite`` (with
      ``--no_stats --balance none`` in ``--config base``, the default; ``full`` adds statistics and balancing) on a
      dataset of each of ``--sizes`` MiB (bench/coco_data.py: the photo corpus's real annotations repeated), as a
      user runs it (the DirectRunner's default engine). Per run: wall time, CPU, pairs written, the peak RSS of
      every process of its tree sampled from /proc every 0.25 s (the launcher, which runs the DirectRunner's
      engine, and each SDK worker) and the launcher's ``ru_maxrss`` (os.wait4).
    * Categories at launch: io/coco.read_categories on each size's file (its tail, one ranged read; median of 5
      calls), and io/coco.streamed_categories, what a file whose categories are not last costs (streamed whole).
    * Drawing per pair: core/masks/drawn.drawn_mask on the drawings of the first ``--draw_pairs`` images of the
      smallest file (core/coco.instances_drawing, as the pipeline builds them), 3 rounds: ms per pair, beside
      the runs' CPU per pair.

Repetitions and figures
    The sizes run interleaved (smallest first, reversed every other repetition) ``--repeats`` times; every figure
    is the median (min..max) over the repetitions, printed side by side per size. Targets: every process under
    2 GB at every size (the largest of any process, median over the repetitions), and the largest process's peak
    at the largest size / at the smallest <= 1.2 (the ratio of the medians; within each repetition too).

    python bench/coco_memory.py --sizes 100,1024 --repeats 3 --json build/bench/coco_memory.json
    python bench/coco_memory.py --sizes 10,40 --repeats 1 --photos 20          # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

import common
from coco_data import ensure_dataset, generator_version, stamp
from common import MB, ROOT, ProcessPeaks, log, machine_busy_seconds, other_cores, positive
from harness import (Sitting, fmt_spread, interleaved, new_parser, noise_lines, ratio, render_targets, sizes,
                     spread_figure, target, within_repetitions, write_json)

sys.path.insert(0, str(ROOT))
from beam_pipeline.core import coco  # noqa: E402
from beam_pipeline.core.masks import drawn  # noqa: E402
from beam_pipeline.core.pixels import Limits  # noqa: E402
from beam_pipeline.io import coco as io_coco  # noqa: E402

CONFIGS = {"base": ("--no_stats", "--balance", "none"), "full": ()}
LIMIT_MB = 2048          # every process under 2 GB
TARGET_RATIO = 1.2       # the largest process's peak, largest size / smallest


def run_pipeline(root: Path, output: Path, config: str, log_path: Path) -> dict:
    shutil.rmtree(output, ignore_errors=True)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "beam_pipeline", "--input", str(root), "--layout", "coco", "--output",
               str(output), "--overwrite", *CONFIGS[config]]
    cpu_before, busy_before = common.cpu_seconds(), machine_busy_seconds()
    with log_path.open("w") as handle:
        started = time.perf_counter()
        process = subprocess.Popen(command, cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT)
        peaks = ProcessPeaks(process.pid)
        peaks.start()
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - started
        peaks.stop()
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(f"exit {process.returncode}: {' '.join(command)}; see {log_path}")
    manifest = json.loads((output / "manifest.json").read_text())
    shutil.rmtree(output)
    roles = peaks.by_role()
    workers = roles.get("sdk_worker", [])
    every = [peak for one in roles.values() for peak in one]
    return {"seconds": seconds, "cpu_seconds": usage.ru_utime + usage.ru_stime,
            "written": manifest["counts"]["written"], "launcher_maxrss_mb": usage.ru_maxrss * 1024 / MB,
            "launcher_mb": max(roles.get("launcher", [0])) / MB, "largest_worker_mb": max(workers, default=0) / MB,
            "sdk_workers": len(workers), "largest_process_mb": max(every, default=0) / MB,
            "other_cores": other_cores(busy_before, common.cpu_seconds() - cpu_before, seconds), "log": str(log_path)}


def categories_cost(path: Path) -> dict:
    tail = []
    for _ in range(5):
        started = time.perf_counter()
        io_coco.read_categories(str(path))
        tail.append(time.perf_counter() - started)
    started = time.perf_counter()
    io_coco.streamed_categories(str(path))
    return {"tail_ms": spread_figure([t * 1000 for t in tail]), "streamed_s": time.perf_counter() - started}


def drawings(path: Path, pairs: int) -> list[bytes]:
    """The drawings of the file's first ``pairs`` images, as ReadAnnotations builds them (images come first)."""
    images = {}
    for image_id, (_, fields) in io_coco.records(str(path), io_coco.IMAGES, coco.INSTANCES):
        if len(images) == pairs:
            break
        images[image_id] = fields
    found: dict = {image_id: [] for image_id in images}
    for image_id, (_, fields) in io_coco.records(str(path), io_coco.ANNOTATIONS, coco.INSTANCES):
        if image_id not in found:
            break
        found[image_id].append(fields)
    rules = coco.Annotations(coco.INSTANCES, ())
    return [coco.instances_drawing(images[i], found[i], rules) for i in images]


def drawing_cost(path: Path, pairs: int) -> dict:
    made = drawings(path, pairs)
    limits = Limits(num_classes=81)
    rounds = []
    for _ in range(3):
        started = time.process_time()
        for one in made:
            drawn.drawn_mask(one, b"", limits)
        rounds.append((time.process_time() - started) / len(made) * 1000)
    annotations = sum(len(coco.unpacked_drawing(one)["annotations"]) for one in made) / len(made)
    return {"pairs": len(made), "annotations_per_pair": annotations, "cpu_ms_per_pair": spread_figure(rounds)}


def summarise(runs: dict[int, list[dict]], sizes_mib: Sequence[int]) -> dict:
    per_size = {}
    for mib in sizes_mib:
        one = runs[mib]
        per_size[str(mib)] = {key: spread_figure([run[key] for run in one]) for key in (
            "seconds", "launcher_mb", "launcher_maxrss_mb", "largest_worker_mb", "largest_process_mb")}
        per_size[str(mib)]["cpu_ms_per_pair"] = spread_figure([run["cpu_seconds"] / run["written"] * 1000
                                                               for run in one])
        per_size[str(mib)]["written"] = one[0]["written"]
    small, large = str(sizes_mib[0]), str(sizes_mib[-1])
    medians = ratio(per_size[large]["largest_process_mb"]["median"], per_size[small]["largest_process_mb"]["median"])
    within = spread_figure([ratio(b["largest_process_mb"], a["largest_process_mb"])
                            for a, b in zip(runs[sizes_mib[0]], runs[sizes_mib[-1]])])
    return {"per_size": per_size, "ratio": medians, "ratio_by_repetition": within}


def render(summary: dict, datasets: dict, categories: dict, drawing: dict) -> list[str]:
    rows = [("annotation file", lambda m: f"{datasets[m]['bytes'] / MB:,.0f} MiB"),
            ("images / annotations", lambda m: f"{datasets[m]['images']:,} / {datasets[m]['annotations']:,}"),
            ("pairs written", lambda m: f"{summary['per_size'][str(m)]['written']:,}"),
            ("wall time, s", lambda m: fmt_spread(summary["per_size"][str(m)]["seconds"], ".0f")),
            ("CPU per pair, ms (whole run)",
             lambda m: fmt_spread(summary["per_size"][str(m)]["cpu_ms_per_pair"], ".1f")),
            ("launcher peak RSS, MB", lambda m: fmt_spread(summary["per_size"][str(m)]["launcher_mb"], ".0f")),
            ("largest SDK worker peak RSS, MB", lambda m: fmt_spread(summary["per_size"][str(m)]["largest_worker_mb"],
                                                                     ".0f")),
            ("largest process peak RSS, MB", lambda m: fmt_spread(summary["per_size"][str(m)]["largest_process_mb"],
                                                                  ".0f")),
            ("categories from the tail, ms", lambda m: fmt_spread(categories[m]["tail_ms"], ".2f")),
            ("categories streamed (not last), s", lambda m: f"{categories[m]['streamed_s']:.1f}")]
    sizes_mib = sorted(datasets)
    lines = [f"{'':<36}" + "".join(f"{f'{m} MiB':>26}" for m in sizes_mib)]
    lines += [f"{name:<36}" + "".join(f"{value(m):>26}" for m in sizes_mib) for name, value in rows]
    lines.append(f"largest process, {sizes_mib[-1]} MiB / {sizes_mib[0]} MiB: {summary['ratio']:.2f}"
                 + within_repetitions(summary["ratio_by_repetition"]))
    lines.append(f"drawing a mask (drawn_mask: polygons and RLE drawn, PNG encoded): "
                 f"{fmt_spread(drawing['cpu_ms_per_pair'], '.2f')} ms CPU per pair over {drawing['pairs']} pairs of "
                 f"{drawing['annotations_per_pair']:.1f} annotations, 480x360")
    return lines


def build_parser() -> argparse.ArgumentParser:
    parser = new_parser("bench/coco_memory.py", "Peak RSS of every process of the pipeline on COCO annotation files "
                                                "of two sizes or more, and the cost of drawing and of categories.")
    parser.add_argument("--sizes", type=sizes, default="100,1024", help="annotation file sizes, MiB")
    parser.add_argument("--photos", type=positive, default=200, help="photographs in the pool the images name")
    parser.add_argument("--config", choices=tuple(CONFIGS), default="base",
                        help="base: --no_stats --balance none; full: the defaults (statistics, balancing)")
    parser.add_argument("--repeats", type=positive, default=3, help="interleaved repetitions")
    parser.add_argument("--draw_pairs", type=positive, default=300, help="pairs whose drawing is timed")
    parser.add_argument("--workdir", type=Path, default=ROOT / "build" / "bench",
                        help="cached pool and annotation files, outputs (deleted after each run), logs")
    parser.add_argument("--json", type=Path, default=None, metavar="OUT", help="also write every figure as JSON")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    if len(args.sizes) < 2:
        build_parser().error("--sizes needs two sizes or more (the ratio is largest / smallest)")
    sitting = Sitting()
    workdir = args.workdir.resolve()
    prepare_started = time.perf_counter()
    roots = {mib: ensure_dataset(workdir, args.photos, mib) for mib in args.sizes}
    prepare_seconds = time.perf_counter() - prepare_started
    datasets = {mib: stamp(root) for mib, root in roots.items()}
    files = {mib: root / "annotations" / "instances_train2017.json" for mib, root in roots.items()}
    for path in files.values():
        common.warm_page_cache(path.parent)
    categories = {mib: categories_cost(path) for mib, path in files.items()}
    drawing = drawing_cost(files[args.sizes[0]], args.draw_pairs)
    runs: dict[int, list[dict]] = {mib: [] for mib in args.sizes}
    for repeat in range(args.repeats):
        for mib in interleaved(args.sizes, repeat):
            run = run_pipeline(roots[mib], workdir / "out" / f"coco_{mib}", args.config,
                               workdir / "logs" / f"coco_{args.config}_{mib}mib_r{repeat}.log")
            runs[mib].append(run)
            log(f"coco {mib} MiB: {run['written']} pairs in {run['seconds']:.0f} s, largest process "
                f"{run['largest_process_mb']:.0f} MB (launcher {run['launcher_mb']:.0f}, {run['sdk_workers']} SDK "
                f"workers up to {run['largest_worker_mb']:.0f}), other load {run['other_cores']:.2f}")
    summary = summarise(runs, args.sizes)
    largest = max(figures["largest_process_mb"]["median"] for figures in summary["per_size"].values())
    targets = [target("every process, largest peak RSS MB (any size)", spread_figure([largest]), "<", LIMIT_MB,
                      "medians per size"),
               target("largest process, largest/smallest size", spread_figure([summary["ratio"]]), "<=",
                      TARGET_RATIO, "ratio of the medians")]
    lines = [f"config {args.config}; {args.repeats} interleaved repetition(s); figures: median (min..max)", ""]
    lines += render(summary, datasets, categories, drawing)
    lines += noise_lines([run["other_cores"] for one in runs.values() for run in one]) + [""]
    lines += render_targets(targets)
    print("\n".join(lines))
    print(sitting.finish("data generation", prepare_seconds, f"generator version {generator_version()}"))
    write_json(args.json, {"sizes": args.sizes, "config": args.config, "photos": args.photos, "datasets": datasets,
                           "categories": categories, "drawing": drawing, "summary": summary, "targets": targets,
                           "runs": {str(m): one for m, one in runs.items()}, **sitting.timing})
    return 0


if __name__ == "__main__":
    sys.exit(main())
