"""The limit that remains for folder inputs (issue 20): one flat folder is one match, on one worker.

A glob with a wildcard folder (``images/*/*.png``) is matched one subfolder at a time, on every
worker (io/folders.py). A folder holding every file directly (``images/*``) is one
``FileSystems.match``: Beam returns its result as one list, held by the worker that matches it. This
script measures what that list costs: for each ``--files`` count, empty files in one local folder,
a fresh process that imports the pipeline's I/O and matches the glob, and the same process without the
match; the growth of peak RSS per file, median (min..max) over ``--repeats``, interleaved.

    python bench/folder_listing.py --files 100000,400000
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Optional, Sequence

from common import ROOT, log, positive, spread

PROBE = r"""
import resource, sys
from beam_pipeline.io.folders import match_files
count = sum(1 for _ in match_files(sys.argv[1])) if sys.argv[2] == "match" else 0
print(count, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""


def flat_folder(workdir: Path, files: int) -> Path:
    folder = workdir / "folder_listing" / f"flat_{files}" / "images"
    marker = folder.parent / "complete"
    if not marker.exists():
        log(f"writing {files:,} empty files into {folder}")
        folder.mkdir(parents=True, exist_ok=True)
        for index in range(files):
            (folder / f"img_{index:09d}.png").touch()
        marker.touch()
    return folder


def probe(pattern: str, mode: str) -> tuple[int, int]:
    done = subprocess.run([sys.executable, "-c", PROBE, pattern, mode], cwd=ROOT, capture_output=True, text=True,
                          check=True)
    count, peak = done.stdout.split()
    return int(count), int(peak)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, default=ROOT / "build" / "bench")
    parser.add_argument("--files", default="100000,400000", help="files in the flat folder, comma-separated")
    parser.add_argument("--repeats", type=positive, default=3)
    args = parser.parse_args(argv)
    lines = ["one FileSystems.match of a flat local folder: peak RSS growth, median (min..max):"]
    for files in sorted(int(text) for text in args.files.split(",")):
        pattern = str(flat_folder(args.workdir.resolve(), files) / "*")
        per_file, peaks = [], []
        for repeat in range(args.repeats):
            runs = {}
            for mode in (("match", "none") if repeat % 2 == 0 else ("none", "match")):
                runs[mode] = probe(pattern, mode)
            assert runs["match"][0] == files, runs
            per_file.append((runs["match"][1] - runs["none"][1]) / files)
            peaks.append(runs["match"][1] / 2**20)
        lines.append(f"  {files:,} files: {spread(per_file, '{:.0f}')} bytes per file; "
                     f"the matching process's peak {spread(peaks, '{:.0f}')} MiB")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
