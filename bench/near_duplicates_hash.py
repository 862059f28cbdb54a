"""Which perceptual hash, and which radius: planted copies against distinct real photographs (docs/leakage.md).

Run ``python bench/near_duplicates_hash.py [--bases 200] [--distinct 1000] [--workers 2] [--json FILE]``.

Copies. ``--bases`` scenes of tools/photo_scenes.py (480x360 street-like collages of scikit-image's photographs,
every other one saved as JPEG q90, the others PNG) and as many photo crops of tools/photo_corpus.py (lens blur and
sensor noise, like camera photos), each given one copy of every kind of tools/planted_copies.py (``jpeg`` re-encode
at quality 60-90, ``resize`` to 50-90 %, ``crop`` keeping 95-99.5 % of the pixels, ``bright`` +-3-10 %, ``format``
PNG <-> JPEG): the distance between a base's hash and its copy's, by kind.

Distinct images. ``--distinct`` more scenes (other indices: each a different layout, but every one built from the
same eight photographs' textures with a "sky" band above and a "road" band below, so harder to tell apart than
unrelated photographs) and scikit-image's other photographs (tools/planted_copies.DISTINCT_PHOTOS): the distance of
every pair of them. Any such pair within the radius is a false near duplicate.

Hashes compared: the shipped one (core/leakage/phash.py: SimHash of the 6x6 lowest DCT frequencies, 256 bits) and a
256-bit difference hash (a 17x16 grey thumbnail, one bit per horizontal neighbour pair), the usual choice. Every
hash is taken, as the pipeline takes it, from the decoded file's pixels. For each hash: the copies' distances by
kind (median, 95th percentile, max), the distinct pairs' smallest distances, and at each radius the share of copies
found and the distinct pairs paired.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import io
import json
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from beam_pipeline.core.leakage import phash  # noqa: E402
from tools.photo_corpus import make_photo  # noqa: E402
from tools.photo_scenes import make_scene  # noqa: E402
from tools.planted_copies import DISTINCT_PHOTOS, KINDS, _photo, planted_copy  # noqa: E402

RADII = (6, 8, 10, 12, 14, 16, 18, 20, 24)
BASE_SCENES = 50_000          # scene indices of the bases (tools/planted_copies.SCENE_OFFSET)
DISTINCT_SCENES = 200_000     # scene indices of the distinct scenes: none is a base


def difference_hash(image: Image.Image) -> bytes:
    """256-bit difference hash: a 17x16 grey thumbnail, 1 where a pixel is brighter than its right neighbour."""
    grey = np.asarray(image.convert("L").resize((17, 16), Image.Resampling.BOX), dtype=np.int16)
    return np.packbits((grey[:, 1:] > grey[:, :-1]).ravel()).tobytes()


HASHES = {phash.NAME: phash.perceptual_hash, "dhash-256": difference_hash}


def _encode(pixels: np.ndarray, fmt: str) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format=fmt, **({"quality": 90} if fmt == "JPEG" else {}))
    return buffer.getvalue()


def _hashes(data: bytes) -> dict:
    image = Image.open(io.BytesIO(data))
    image = image.convert("RGB") if image.mode not in ("RGB", "L") else image
    return {name: f(image) for name, f in HASHES.items()}


def copies_of(family: str, index: int) -> list:
    """[(kind, {hash: distance})] of the base ``index`` of ``family`` (scene | photo) and its five copies."""
    if family == "scene":
        image, mask = make_scene(BASE_SCENES + index, 0)
    else:
        image = make_photo(10_000 + index, 0)
        mask = np.zeros(image.shape[:2], np.uint8)
    fmt = "JPEG" if index % 2 == 0 else "PNG"
    data = _encode(image, fmt)
    decoded = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
    base = _hashes(data)
    rng = np.random.default_rng([index, 43, 0 if family == "scene" else 1])
    out = []
    for kind in KINDS:
        copy, _, _ = planted_copy(decoded, mask, fmt, kind, rng)
        hashed = _hashes(copy)
        out.append((kind, {name: phash.distance(base[name], hashed[name]) for name in HASHES}))
    return out


def distinct_hashes(index: int) -> dict:
    if index < 0:
        return _hashes(_encode(_photo(DISTINCT_PHOTOS[-index - 1]), "PNG"))
    image, _ = make_scene(DISTINCT_SCENES + index, 0)
    return _hashes(_encode(image, "JPEG" if index % 2 == 0 else "PNG"))


def all_pair_distances(hashes: Sequence[bytes]) -> np.ndarray:
    words = phash.as_words(hashes) if len(hashes[0]) == phash.BYTES else None
    out = []
    for i in range(len(hashes) - 1):
        out.append(phash.distances(words[i][None, :], words[i + 1:]))
    return np.concatenate(out)


def measure(bases: int, distinct: int, workers: int) -> dict:
    with concurrent.futures.ProcessPoolExecutor(max_workers=workers) as pool:
        tasks = [("scene", i) for i in range(bases)] + [("photo", i) for i in range(bases)]
        copies = list(pool.map(copies_of, *zip(*tasks), chunksize=4))
        indices = list(range(distinct)) + [-(i + 1) for i in range(len(DISTINCT_PHOTOS))]
        others = list(pool.map(distinct_hashes, indices, chunksize=8))
    result = {"bases": bases, "distinct_images": len(others), "distinct_pairs": len(others) * (len(others) - 1) // 2,
              "hashes": {}}
    for name in HASHES:
        by_kind = {kind: [] for kind in KINDS}
        by_family = {"scene": [], "photo": []}
        for (family, _), rows in zip(tasks, copies):
            for kind, d in rows:
                by_kind[kind].append(d[name])
                by_family[family].append(d[name])
        every = np.array([d for values in by_kind.values() for d in values])
        pairs = all_pair_distances([h[name] for h in others])
        result["hashes"][name] = {
            "copies": {kind: _quantiles(values) for kind, values in by_kind.items()},
            "distinct": {"min": int(pairs.min()), "q0.01%": float(np.percentile(pairs, 0.01)),
                         "q0.1%": float(np.percentile(pairs, 0.1)), "median": float(np.median(pairs))},
            "radii": {r: {"found": float((every <= r).mean()),
                          "found_scenes": float((np.array(by_family["scene"]) <= r).mean()),
                          "found_photos": float((np.array(by_family["photo"]) <= r).mean()),
                          "found_crops": float((np.array(by_kind["crop"]) <= r).mean()),
                          "false_pairs": int((pairs <= r).sum())} for r in RADII}}
    return result


def _quantiles(values) -> dict:
    values = np.array(values)
    return {"median": float(np.median(values)), "p95": float(np.percentile(values, 95)), "max": int(values.max())}


def render(result: dict) -> list:
    lines = [f"{result['bases']} scenes and {result['bases']} photo crops, each with one copy of every kind "
             f"({len(KINDS) * 2 * result['bases']} copies); {result['distinct_images']} distinct images "
             f"({result['distinct_pairs']:,} pairs)"]
    for name, figures in result["hashes"].items():
        lines.append(f"== {name}")
        lines.append("   copies, distance median / p95 / max: " + "; ".join(
            f"{kind} {q['median']:.0f} / {q['p95']:.0f} / {q['max']}" for kind, q in figures["copies"].items()))
        d = figures["distinct"]
        lines.append(f"   distinct pairs: min {d['min']}, 0.01 % quantile {d['q0.01%']:.0f}, "
                     f"0.1 % quantile {d['q0.1%']:.0f}, median {d['median']:.0f}")
        for r, f in figures["radii"].items():
            lines.append(f"   radius {r:2d}: copies found {100 * f['found']:5.1f} % (scenes {100 * f['found_scenes']:.1f}, "
                         f"photos {100 * f['found_photos']:.1f}, crops {100 * f['found_crops']:.1f}); "
                         f"distinct pairs paired {f['false_pairs']}")
    return lines


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python bench/near_duplicates_hash.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bases", type=int, default=200)
    parser.add_argument("--distinct", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    result = measure(args.bases, args.distinct, args.workers)
    print("\n".join(render(result)))
    print(f"({time.perf_counter() - started:.0f} s)")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
