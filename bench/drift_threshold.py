"""What --drift_threshold should be: the drift table's values between versions of one source, and when a new
source comes in (docs/leakage.md, "Drift since the previous version").

Run ``python bench/drift_threshold.py [--pairs 200] [--workers 2]``.

Profiles are built as the pipeline builds them (core/leakage/drift.py: each class's images and pixels, image sizes,
mean luma), from street-like scenes of tools/photo_scenes.py (8 classes, 480x360) and photo crops of
tools/photo_corpus.py (the same photographs' textures, but 3-6 regions of k-means classes: another class mix), and
compared as a re-run compares a version with its parent:

* same source, +10 %: ``pairs`` scenes, then 10 % more scenes;
* same source, the other half: ``pairs`` scenes against ``pairs`` other scenes (no image in common: the sampling
  noise of a version of that size);
* a new source, +30 %: ``pairs`` scenes, then 30 % more photo crops;
* a darker camera, +30 %: ``pairs`` scenes, then 30 % more scenes at 70 % brightness;
* smaller images, +30 %: ``pairs`` scenes, then 30 % more scenes at half the width and height.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import sys
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from beam_pipeline.core.leakage import drift  # noqa: E402
from tools.photo_corpus import make_mask, make_photo  # noqa: E402
from tools.photo_scenes import NUM_CLASSES, make_scene  # noqa: E402


def profile_entry(kind: str, index: int) -> tuple:
    """(height, width, classes, class pixels, channel sums) of one image."""
    if kind == "photo":
        image = make_photo(index, 0)
        mask = make_mask(image, index, 0)                 # ids 0..7 and 255 on region borders
    else:
        image, mask = make_scene(index, 0)
    if kind == "dark":
        image = np.clip(np.rint(image * 0.7), 0, 255).astype(np.uint8)
    if kind == "small":
        size = (image.shape[1] // 2, image.shape[0] // 2)
        image = np.asarray(Image.fromarray(image).resize(size, Image.Resampling.BILINEAR))
        mask = np.asarray(Image.fromarray(mask).resize(size, Image.Resampling.NEAREST))
    counts = np.bincount(mask[mask < NUM_CLASSES].ravel(), minlength=NUM_CLASSES)
    sums = image.reshape(-1, 3).astype(np.int64).sum(axis=0)
    return image.shape[0], image.shape[1], np.flatnonzero(counts).tolist(), counts.tolist(), sums.tolist()


def profile(entries) -> dict:
    out = drift.empty_profile(NUM_CLASSES)
    for height, width, classes, pixels, sums in entries:
        drift.add_image(out, height, width, classes, pixels, sums)
    return drift.published(out, "segmentation")


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python bench/drift_threshold.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    n, more, extra = args.pairs, args.pairs // 10, 3 * args.pairs // 10
    jobs = {"scenes": [("scene", i) for i in range(2 * n)], "photos": [("photo", i) for i in range(extra)],
            "dark": [("dark", 10_000 + i) for i in range(extra)], "small": [("small", 20_000 + i) for i in range(extra)]}
    with concurrent.futures.ProcessPoolExecutor(max_workers=args.workers) as pool:
        made = {name: list(pool.map(profile_entry, *zip(*todo), chunksize=4)) for name, todo in jobs.items()}
    scenes = made["scenes"]
    base = profile(scenes[:n])
    cases = {"same source, +10 %": profile(scenes[:n + more]),
             "same source, the other half": profile(scenes[n:]),
             "a new source, +30 %": profile(scenes[:n] + made["photos"]),
             "a darker camera, +30 %": profile(scenes[:n] + made["dark"]),
             "smaller images, +30 %": profile(scenes[:n] + made["small"])}
    names = [str(c) for c in range(NUM_CLASSES)]
    header = None
    for case, now in cases.items():
        table = drift.compare(base, now, drift.DEFAULT_THRESHOLD, names)
        if header is None:
            header = [row["feature"] for row in table["rows"]]
            print(f"{n} scenes in the parent; values of the drift table (threshold {drift.DEFAULT_THRESHOLD:g}):")
            print(f"{'case':<30}" + "".join(f"{name:>24}" for name in header))
        print(f"{case:<30}" + "".join(f"{row['value']:>24.4f}" for row in table["rows"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
