"""What one pair costs at least: the pipeline's own per-pair functions against the two loops, in one process.

``pipeline_throughput.py`` measures whole runs; this one takes Beam, tf.Transform and the start-up out and
times, in CPU seconds on one core, only the work each side does per pair, on the same photo pairs:

* ``pillow loop`` and ``fast loop``: the loop bodies that pipeline_throughput.py runs (loops.check_pair: read
  both files, decode, size check, class histogram), so both benchmarks time the same loops;
* ``pipeline check``: ``beam_pipeline.stages.pairs.check`` (what ValidatePairs runs per pair: read, sniff and
  pixel limit, PNG chunk/CRC guard, decode, channel sums, mask histogram, sample points, SHA-256 of both
  files), and ``pipeline check + record``: the same plus the ValidPair's pickle round trip (the shuffle's
  packing) and ``beam_pipeline.stages.pairs.record`` (what WriteShards runs per record: read again and verify the
  digests, the serialized tf.train.Example). No Beam: this is a floor for the pipeline's CPU per pair.

The sides run interleaved (a seeded shuffle of their order in every round, ``--rounds`` rounds over the
same ``--pairs`` pairs, page cache warm) and every figure is the median (min..max) over the rounds, the
ratios computed within each round. The last lines turn the floor into the best marginal ratio the
pipeline could reach against each loop if Beam cost nothing and both cores were busy all the time (the
loops run 2 processes on 2 cores): loop CPU per pair / pipeline CPU per pair.

    python bench/per_pair_floor.py [--corpus photo_png|photo_jpeg] [--pairs 300] [--rounds 5]
"""

from __future__ import annotations

import argparse
import csv
import pickle
import random
import time
from pathlib import Path
from typing import Callable

from beam_pipeline.core.pixels import Limits
from beam_pipeline.core.records import PairRef
from beam_pipeline.stages import pairs
from beam_pipeline.stages.specs import CheckSpec

from common import NUM_CLASSES, ROOT, ensure_photo_corpus, log, photo_listing, positive, spread, warm_page_cache
from loops import IGNORE_LABEL, MAX_PIXELS, check_pair
from pipeline_throughput import TARGET_FAST_RATIO, TARGET_PILLOW_RATIO

SPEC = CheckSpec(task="segmentation", limits=Limits(num_classes=NUM_CLASSES, ignore_label=IGNORE_LABEL,
                                                     max_pixels=MAX_PIXELS))
TARGETS = {"pillow loop": TARGET_PILLOW_RATIO, "fast loop": TARGET_FAST_RATIO}


def refs_of(listing: Path) -> list[PairRef]:
    root = listing.parent
    with listing.open(newline="", encoding="utf-8") as handle:
        return [PairRef(key=row["image"], source_id=row["image"], image=str(root / row["image"]),
                        mask=str(root / row["mask"]), split="train") for row in csv.DictReader(handle)]


def _pipeline_check(ref: PairRef) -> None:
    pairs.check(ref, SPEC)


def _pipeline_check_and_record(ref: PairRef) -> None:
    valid, _ = pairs.check(ref, SPEC)
    pairs.record(pickle.loads(pickle.dumps(valid)), SPEC)


def sides(refs: list[PairRef]) -> dict[str, Callable[[], None]]:
    paths = [(ref.image, ref.mask) for ref in refs]
    return {
        "pillow loop": lambda: [check_pair("pillow", p) for p in paths],
        "fast loop": lambda: [check_pair("fast", p) for p in paths],
        "pipeline check": lambda: [_pipeline_check(ref) for ref in refs],
        "pipeline check + record": lambda: [_pipeline_check_and_record(ref) for ref in refs],
    }


def cpu_ms_per_pair(run: Callable[[], None], count: int) -> float:
    started = time.process_time()
    run()
    return (time.process_time() - started) / count * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", choices=("photo_png", "photo_jpeg"), default="photo_png",
                        help="the photo corpus's pairs with PNG (~215 KB) or JPEG q90 images")
    parser.add_argument("--pairs", type=positive, default=300, help="photo pairs timed per side and round")
    parser.add_argument("--rounds", type=positive, default=5, help="interleaved rounds")
    parser.add_argument("--workdir", type=Path, default=ROOT / "build" / "bench", help="where the corpus is cached")
    args = parser.parse_args()
    folder, _ = ensure_photo_corpus(args.workdir.resolve(), args.pairs)
    listing = photo_listing(folder, args.corpus.split("_")[1], args.pairs)
    warm_page_cache(folder)
    refs = refs_of(listing)
    runs = sides(refs)
    for run in runs.values():          # imports, caches and the decoders' first calls are not timed
        run()
    times: dict[str, list[float]] = {name: [] for name in runs}
    order = list(runs)
    shuffler = random.Random(0)
    for round_index in range(args.rounds):
        shuffler.shuffle(order)
        for name in order:
            times[name].append(cpu_ms_per_pair(runs[name], len(refs)))
        log(f"round {round_index + 1}/{args.rounds}: " + ", ".join(f"{n} {times[n][-1]:.2f}" for n in runs))
    print(f"CPU ms per pair on one core, {len(refs)} {args.corpus} pairs, median (min..max) of {args.rounds} "
          "interleaved rounds:")
    for name in runs:
        print(f"  {name:26s} {spread(times[name])}")
    full = times["pipeline check + record"]
    print("Best marginal ratio the pipeline could reach (no Beam cost, both cores busy), "
          "loop CPU / pipeline CPU per pair, within each round:")
    for loop, target in TARGETS.items():
        ratios = [loop_ms / pipe_ms for loop_ms, pipe_ms in zip(times[loop], full)]
        print(f"  vs {loop:12s} {spread(ratios)}   (issue 10's target: >= {target})")
    extra = [pipe_ms - fast_ms for pipe_ms, fast_ms in zip(full, times["fast loop"])]
    print(f"  the pipeline's per-pair work beyond the fast loop's: {spread(extra)} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
