"""The shard writer's read-ahead (stages/write.py): how many records it reads, checks and encodes ahead of
the one it writes (READ_AHEAD), on how many threads (READ_THREADS).

The writer copies every pair's bytes from validation's spill (the pipeline with its verdict cache), or
reads its files again and checks them against validation's SHA-256, as it writes a shard. When
the bytes are in the page cache (a full run: validation has just read or spilled them) it is bound by its
CPU; when they are not (a run killed and resumed) it also waits on the disk. Each of ``--sources`` (spill,
files) with each ``--settings`` entry THREADSxRECORDS is one way; the first is the reference, and the ways
are interleaved in each repeat, in a new order each repeat.

Each way writes ``--pairs`` pairs of distinct photo copies (tools/corpus_copies.py: real photos and masks, a
fifth of the masks palette PNGs that validation converted to grey; from the files, the writer converts them
again) into
``--writers`` shards at once, one writer process each, as the DirectRunner's two SDK workers do:
``WriteShardFn.process`` itself, on the ValidPairs validation gave (validated once, not timed). ``cold``: the
page cache dropped before each timed write (root only); ``warm``: the files (or the spill) read once before. Printed: pairs
per second, median (min..max) over ``--repeats``, and each way's ratio to the first within each repeat.

    python bench/write_read_ahead.py --pairs 3000 --repeats 5 --settings 2x8        # the spill against the files
    python bench/write_read_ahead.py --pairs 3000 --repeats 5 --settings 2x8,8x32,16x64 --sources spill
"""

from __future__ import annotations

import argparse
import dataclasses
import multiprocessing
import shutil
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

from common import ROOT, log, positive, spread
from scale import drop_page_cache, pair_copies

sys.path.insert(0, str(ROOT))
from beam_pipeline.core.rerun import verdicts
from beam_pipeline.core.pixels import Limits  # noqa: E402
from beam_pipeline.core.records import PairRef, ValidPair  # noqa: E402
from beam_pipeline.core.validation import Checked  # noqa: E402
from beam_pipeline.io.cache import spill as spill_store
from beam_pipeline.stages import pairs as stage_pairs, write  # noqa: E402
from beam_pipeline.stages.specs import CheckSpec, WriteSpec  # noqa: E402

NUM_CLASSES = 8
CASES = ("cold", "warm")


def valid_pairs(listing: Path, count: int, spec: CheckSpec, spill: Path) -> list[ValidPair]:
    """The first ``count`` pairs of the copies' listing, validated as the pipeline validates them, their stored
    bytes spilled into the cache folder ``spill`` as ValidatePairs spills them, a part per verdict bucket."""
    folder = listing.parent
    with listing.open(encoding="utf-8") as handle:
        rows = [next(handle).strip().split(",")[:2] for _ in range(count + 1)][1:]
    found = []
    spills = {}
    for image, mask in rows:
        ref = PairRef(key=image, source_id=image, image=str(folder / image), mask=str(folder / mask), split="train")
        read = stage_pairs.read_files(ref, spec)
        checked = stage_pairs.checked_bytes(ref, spec, *read)
        if not isinstance(checked, Checked):
            raise RuntimeError(f"{image}: {checked}")
        pair = checked.pair
        bucket = verdicts.bucket_of(ref.key)
        spilled = spills.get(bucket) or spills.setdefault(
            bucket, spill_store.BucketSpill(str(spill), bucket, "20261204T000000Z-00000001"))
        pair = dataclasses.replace(pair, spill=spilled.append(pair, *stage_pairs.stored_files(checked, read[1], spec)))
        found.append(pair)
    for spilled in spills.values():
        spilled.seal()
    return found


def settings(text: str) -> list[tuple[int, int]]:
    """"2x8,8x32" -> [(2, 8), (8, 32)]: (threads, records read ahead) per way."""
    try:
        ways = [tuple(int(number) for number in part.split("x")) for part in text.split(",") if part.strip()]
    except ValueError:
        ways = []
    if not ways or any(len(way) != 2 or min(way) < 1 for way in ways):
        raise argparse.ArgumentTypeError(f"expected THREADSxRECORDS, comma-separated, such as 2x8,8x32; got {text!r}")
    return ways


def sources(text: str) -> list[str]:
    found = [part.strip() for part in text.split(",") if part.strip()]
    if not found or any(source not in ("spill", "files") for source in found) or len(set(found)) < len(found):
        raise argparse.ArgumentTypeError(f"expected spill, files or both, comma-separated; got {text!r}")
    return found


def _write_one(args) -> None:
    """One writer process: one shard of the given pairs, with the way's read-ahead."""
    way, out, index, shards, chunk, spec = args
    write.READ_THREADS, write.READ_AHEAD = way
    writer = write.WriteShardFn(WriteSpec(data_dir=str(out), check=spec))
    for _ in writer.process((("train", index, shards), chunk)):
        pass


def timed_write(way: tuple[int, int], pairs: list[ValidPair], out: Path, writers: int, spec: CheckSpec, cold: bool) -> float:
    """Seconds for ``writers`` processes to write the pairs, one shard each."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    chunks = [pairs[index::writers] for index in range(writers)]
    if cold:
        drop_page_cache(True)
    elif pairs and pairs[0].spill:
        for path in {pair.spill[0] for pair in pairs}:
            Path(path).read_bytes()
    else:
        for pair in pairs:
            Path(pair.ref.image).read_bytes()
            Path(pair.ref.mask).read_bytes()
    context = multiprocessing.get_context("fork")
    started = time.perf_counter()
    with context.Pool(writers) as pool:
        pool.map(_write_one, [(way, out, index, writers, chunk, spec) for index, chunk in enumerate(chunks)])
    seconds = time.perf_counter() - started
    shutil.rmtree(out, ignore_errors=True)
    return seconds


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, default=ROOT / "build" / "bench")
    parser.add_argument("--pairs", type=positive, default=3000, help="pairs written by each way (default 3000)")
    parser.add_argument("--writers", type=positive, default=2,
                        help="writer processes at once, one shard each (default 2: the DirectRunner's workers)")
    parser.add_argument("--settings", type=settings, default=settings("2x8,8x32"),
                        help="the ways, THREADSxRECORDS, comma-separated; the first is the reference "
                             "(default 2x8,8x32: the writer's own 2x8 against 8 threads and 32 records)")
    parser.add_argument("--repeats", type=positive, default=5)
    parser.add_argument("--sources", type=sources, default=sources("spill,files"),
                        help="where the writer takes each pair's bytes, comma-separated, each source a way with "
                             "each setting: spill (validation's spill, the pipeline with its verdict cache), files "
                             "(the source files read again: --no_cache); default spill,files")
    args = parser.parse_args(argv)
    ways = [(source, *setting) for source in args.sources for setting in args.settings]
    if len(ways) < 2:
        parser.error("give two or more ways: two --settings, or two --sources")
    if not drop_page_cache(True):
        parser.error("the cold case drops the page cache: run as root")
    spec = CheckSpec("segmentation", Limits(num_classes=NUM_CLASSES))
    listing = pair_copies(args.workdir.resolve(), args.pairs)
    log(f"validating {args.pairs:,} pairs (not timed)")
    spill = args.workdir.resolve() / "write_read_ahead_spill"
    shutil.rmtree(spill, ignore_errors=True)
    spilled = valid_pairs(listing, args.pairs, spec, spill)
    found = {"spill": spilled, "files": [dataclasses.replace(pair, spill=()) for pair in spilled]}
    converted = sum(pair.mask_converted or pair.image_converted for pair in spilled)
    megabytes = sum(pair.estimated_record_bytes for pair in spilled) / 1e6
    out = args.workdir.resolve() / "write_read_ahead"
    seconds = {(case, way): [] for case in CASES for way in ways}
    for repeat in range(args.repeats):
        for case in CASES:
            for way in (ways if repeat % 2 == 0 else list(reversed(ways))):
                seconds[(case, way)].append(timed_write(way[1:], found[way[0]], out, args.writers, spec,
                                                        case == "cold"))
                log(f"repeat {repeat + 1} {case} {name(way)}: {seconds[(case, way)][-1]:.2f} s")
    print(f"{args.pairs:,} photo-copy pairs ({megabytes:,.0f} MB of records, {converted} with a converted file), "
          f"{args.writers} writer processes, {args.repeats} repeats, median (min..max):")
    for case in CASES:
        for way in ways:
            rates = [args.pairs / s for s in seconds[(case, way)]]
            ratios = [r / w for r, w in zip(seconds[(case, ways[0])], seconds[(case, way)])]
            versus = "" if way == ways[0] else f", {spread(ratios)} of the first's pairs per second"
            print(f"  {case:<5} {name(way):<38} {spread(rates, '{:.0f}')} pairs/s{versus}")
    shutil.rmtree(spill, ignore_errors=True)
    return 0


def name(way) -> str:
    return f"from the {way[0]}, {way[1]} threads, {way[2]} records ahead"


if __name__ == "__main__":
    sys.exit(main())
