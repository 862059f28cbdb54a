"""What reading a pair's files costs the kernel: pairs.read_file against the same loop with a 4 MiB first read.

Until commit 16c08bb, ``pairs.read_file`` asked for 4 MiB at a time, whatever the file's size. Python
then allocates a 4 MiB buffer per read and gives most of it back, and the allocator faulted fresh pages
in on every file. The writer, and validation, read every selected file that way. Now the first read asks
for the size the writer knows from validation (plus one byte), or 256 KiB when the size is not known,
and later reads double.

Each round reads ``--files`` pairs of the photo copies (about 230 KB a pair, tools/corpus_copies.py) on
two threads, as the writer does, with the page cache dropped first (as root). The three ways are in a new
order each round, each on pairs of its own:

    before     the loop of commit 16c08bb: 4 MiB reads
    now        pairs.read_file without a size (validation's first read)
    open       ``open(path, "rb").read()``, a buffer sized from fstat: the floor, for local files only and
               with no size limit

Printed: kernel CPU seconds, minor page faults and MB/s per way, median (min..max) over ``--repeats``,
and the kernel-time ratio of ``now`` and ``open`` to ``before`` within each round.

    python bench/read_file.py --repeats 5
"""

from __future__ import annotations

import argparse
import concurrent.futures
import csv
import json
import resource
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

from common import ROOT, log, positive, spread
from scale import drop_page_cache, pair_copies

sys.path.insert(0, str(ROOT))
from beam_pipeline.stages import pairs  # noqa: E402

WAYS = ("before", "now", "open")


def read_before(path: str, max_bytes: int) -> bytes:
    """pairs.read_file's loop as it was: every read asks for up to 4 MiB (a size hint of 4 MiB less one byte
    makes the first read, and every later one, ask for _CHUNK)."""
    return pairs.read_file(path, max_bytes, "image", pairs._CHUNK - 1)


def read_now(path: str, max_bytes: int) -> bytes:
    return pairs.read_file(path, max_bytes, "image")


def read_open(path: str, max_bytes: int) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()          # sized from fstat, with no limit


READERS = {"before": read_before, "now": read_now, "open": read_open}


def one_round(way: str, files: Sequence[str], drop: bool) -> dict:
    dropped = drop_page_cache(drop)
    reader = READERS[way]
    before, started = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        total = sum(len(data) for data in pool.map(lambda path: reader(path, 64 << 20), files))
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_SELF)
    return {"way": way, "bytes": total, "seconds": seconds, "mb_per_s": total / seconds / 1e6,
            "sys_seconds": after.ru_stime - before.ru_stime, "user_seconds": after.ru_utime - before.ru_utime,
            "minor_faults": after.ru_minflt - before.ru_minflt, "page_cache_dropped": dropped}


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, default=ROOT / "build" / "bench",
                        help="where the photo copies are made or found (default: build/bench)")
    parser.add_argument("--files", type=positive, default=3000, help="pairs read per way and round (default 3000)")
    parser.add_argument("--repeats", type=positive, default=5, help="rounds, each way once per round (default 5)")
    parser.add_argument("--keep_page_cache", action="store_true",
                        help="do not drop the page cache before each read (it is dropped by default, as root)")
    parser.add_argument("--json", type=Path, help="also write every measurement here")
    args = parser.parse_args(argv)
    listing = pair_copies(args.workdir, args.files * len(WAYS) * args.repeats)
    copies = listing.parent
    with listing.open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    needed = args.files * len(WAYS) * args.repeats
    if len(rows) < needed:
        raise SystemExit(f"error: {copies} has {len(rows):,} pairs; {needed:,} are needed")
    results = {way: [] for way in WAYS}
    ratios = {"now": [], "open": []}
    block = 0
    for repeat in range(args.repeats):
        order = WAYS[repeat % 3:] + WAYS[:repeat % 3]
        sys_of = {}
        for way in order:
            chunk = rows[block * args.files:(block + 1) * args.files]
            block += 1
            files = [str(copies / row[column]) for row in chunk for column in ("image", "mask")]
            log(f"round {repeat + 1}: {way}")
            result = one_round(way, files, not args.keep_page_cache)
            results[way].append(result)
            sys_of[way] = result["sys_seconds"]
        for way in ratios:
            ratios[way].append(sys_of[way] / sys_of["before"])
    print(f"reading {args.files:,} pairs ({2 * args.files:,} files) on 2 threads, {args.repeats} rounds:")
    print(f"  {'way':8} {'kernel s':>18} {'minor faults':>24} {'MB/s':>18}")
    for way in WAYS:
        runs = results[way]
        print(f"  {way:8} {spread([r['sys_seconds'] for r in runs]):>18} "
              f"{spread([r['minor_faults'] for r in runs], '{:,.0f}'):>24} "
              f"{spread([r['mb_per_s'] for r in runs], '{:.0f}'):>18}")
    print(f"  kernel time, now / before: {spread(ratios['now'])}; open / before: {spread(ratios['open'])}")
    if args.json:
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "results": results,
                                         "ratios": ratios}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
