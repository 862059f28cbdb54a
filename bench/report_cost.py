"""CPU and wall time of the report (report.html) on a published output, two checkouts interleaved.

Each repetition runs one fresh Python process per checkout, in turn (A, B, A, B, ...), with the
checkout's root first on ``sys.path``. Inside, Beam, numpy and Pillow are imported first (the launcher
holds them already), then the report is made as ``commit.py`` makes it, timed in parts:

* ``gather``: reading the shards and the gallery's thumbnails (``read.gather``);
* ``mpl``: importing the chart modules (matplotlib's before the charts were drawn by report/svg.py);
* ``render``: charts, gallery encoding and the HTML (``render.render_html``);
* ``total``: all of the above;
* ``render_report``: in another process, the whole as ``commit.py`` calls it (``render_report``), which
  may overlap parts (e.g. the matplotlib import with the shard reads).

Prints, per part, the median (min..max) of each checkout's CPU seconds (``time.process_time``) and
wall seconds, and B / A ratios of the medians.

    python bench/report_cost.py OUTPUT_DIR --a BASELINE_CHECKOUT --b . --repeat 7

``--a`` defaults to the checkout this script is in, ``--b`` to the current folder.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from common import ROOT, spread

SPREAD_FORM = "{median:>6} ({min}..{max})"  # the median right-aligned in 6 characters, as the table prints it

_CHILD = r"""
import json, sys, time
import apache_beam, numpy, PIL.Image  # held by the launcher already
from apache_beam.io.filesystems import FileSystems
from beam_pipeline.report import read
from beam_pipeline.report.data import ReportLimits
out = sys.argv[1]
manifest = read.read_json(out + "/manifest.json")
folder = out                        # the manifest's paths resolve below the output folder (core/layout.py)
stats = read.read_stats(folder, manifest)
from tfx_bsl.coders import example_coder  # imported by the statistics step before the report
clock = {"cpu": time.process_time, "wall": time.perf_counter}
times = {}
def mark(name, start):
    times[name] = {k: clock[k]() - start[k] for k in clock}
    return {k: clock[k]() for k in clock}
t0 = start = {k: clock[k]() for k in clock}
if sys.argv[2] == "whole":
    from beam_pipeline.report import render_report
    page = render_report(manifest, folder, ReportLimits(), stats)
    mark("render_report", t0)
    print(json.dumps(times))
    sys.exit(0)
report = read.gather(manifest, folder, ReportLimits(), stats)
start = mark("gather", start)
from beam_pipeline.report import charts, render
start = mark("mpl", start)
page = render.render_html(report, ReportLimits()).encode("utf-8")
mark("render", start)
mark("total", t0)
times["bytes"] = len(page)
print(json.dumps(times))
"""


def run(checkout: Path, output: str, mode: str) -> dict:
    done = subprocess.run([sys.executable, "-c", _CHILD, output, mode], cwd=checkout, capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("output_dir")
    p.add_argument("--a", default=str(ROOT),
                   help="checkout A, the baseline (default: the checkout this script is in, %(default)s)")
    p.add_argument("--b", default=".", help="checkout B")
    p.add_argument("--repeat", type=int, default=7)
    args = p.parse_args()
    runs = {"A": [], "B": []}
    for i in range(args.repeat):
        for name in ("A", "B") if i % 2 == 0 else ("B", "A"):
            checkout = Path(getattr(args, name.lower())).resolve()
            runs[name].append({**run(checkout, args.output_dir, "parts"), **run(checkout, args.output_dir, "whole")})
            print(f"rep {i} {name}: total cpu {runs[name][-1]['total']['cpu']:.3f} s", file=sys.stderr)
    print(f"A = {args.a}, B = {args.b}, {args.repeat} interleaved runs each; seconds, median (min..max)")
    for part in ("gather", "mpl", "render", "total", "render_report"):
        for kind in ("cpu", "wall"):
            a = [r[part][kind] for r in runs["A"]]
            b = [r[part][kind] for r in runs["B"]]
            ratio = statistics.median(b) / statistics.median(a) if statistics.median(a) else float("nan")
            print(f"{part:7s} {kind:4s}  A {spread(a, '{:.3f}', SPREAD_FORM)}   B {spread(b, '{:.3f}', SPREAD_FORM)}   "
                  f"B/A {ratio:.2f}")
    print(f"page bytes: A {runs['A'][0]['bytes']:,}  B {runs['B'][0]['bytes']:,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
