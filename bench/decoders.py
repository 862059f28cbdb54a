"""Decoder speed per file on the real-looking photo corpus: what core/decode.py chose, and why.

For each kind of file (480x360 RGB PNG of ~215 KB, the same photo as JPEG q90, 8-bit grey mask PNG,
palette mask PNG) every available decoder decodes the same ``--files`` files; the CPU time per file
(``time.process_time``, one core) is taken in ``--rounds`` rounds whose decoder order is shuffled
(seeded) each round, and printed as the median (min..max) over the rounds, with the ratio to Pillow
computed within each round. Decoders: Pillow (open + load, what validation used before), TensorFlow's
ops (what the trainer uses; JPEG with the accurate and the default fast IDCT), imagecodecs' libspng
and libpng, simplejpeg (libjpeg-turbo), and, when installed, pyspng and OpenCV (not requirements of
this project: pyspng checks no CRC, OpenCV is slower than TensorFlow on PNG). Every decoder's pixels
are checked against Pillow's on every file before timing (palette masks: indices; a decoder that
gives colours instead is reported as such and not timed; one whose pixels differ, such as TensorFlow's
fast IDCT, is timed and marked).

    python bench/decoders.py [--files 60] [--rounds 9] [--workdir build/bench]
"""

from __future__ import annotations

import argparse
import importlib
import io
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from common import ROOT, ensure_photo_corpus, log, positive

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def _optional(name: str):
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def decoders() -> dict[str, dict[str, Callable[[bytes], np.ndarray]]]:
    """{kind: {decoder name: bytes -> array}} for every installed decoder."""
    import imagecodecs
    import simplejpeg
    import tensorflow as tf
    from PIL import Image

    def pillow(data):
        image = Image.open(io.BytesIO(data))
        image.load()
        return np.asarray(image)

    rgb_png = {"Pillow open+load": pillow,
               "tf.io.decode_png": lambda d: tf.io.decode_png(d, channels=3).numpy(),
               "imagecodecs.spng_decode (libspng)": imagecodecs.spng_decode,
               "imagecodecs.png_decode (libpng)": imagecodecs.png_decode}
    jpeg = {"Pillow open+load": pillow,
            "tf.io.decode_jpeg INTEGER_ACCURATE": lambda d: tf.io.decode_jpeg(
                d, channels=3, dct_method="INTEGER_ACCURATE").numpy(),
            "tf.io.decode_jpeg default (fast IDCT)": lambda d: tf.io.decode_jpeg(d, channels=3).numpy(),
            "simplejpeg accurate, strict": lambda d: simplejpeg.decode_jpeg(
                d, colorspace="RGB", fastdct=False, fastupsample=False, strict=True)}
    grey = {"Pillow open+load": pillow,
            "tf.io.decode_png channels=1": lambda d: tf.io.decode_png(d, channels=1).numpy()[..., 0],
            "imagecodecs.png_decode (libpng)": imagecodecs.png_decode,
            "imagecodecs.spng_decode (libspng)": imagecodecs.spng_decode}
    palette = {"Pillow open+load": pillow,
               "tf.io.decode_png channels=1": lambda d: tf.io.decode_png(d, channels=1).numpy()[..., 0],
               "imagecodecs.png_decode (libpng)": imagecodecs.png_decode}
    pyspng = _optional("pyspng")
    if pyspng is not None:
        rgb_png["pyspng (no CRC checks)"] = pyspng.load
        grey["pyspng (no CRC checks)"] = pyspng.load
    cv2 = _optional("cv2")
    if cv2 is not None:
        def cv2_rgb(data):
            return cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR_RGB | cv2.IMREAD_IGNORE_ORIENTATION)
        rgb_png["OpenCV imdecode"] = cv2_rgb
        jpeg["OpenCV imdecode"] = cv2_rgb
        grey["OpenCV imdecode"] = lambda d: cv2.imdecode(np.frombuffer(d, np.uint8), cv2.IMREAD_UNCHANGED)
    return {"RGB PNG 480x360": rgb_png, "JPEG q90 480x360": jpeg, "grey mask PNG": grey,
            "palette mask PNG": palette}


def corpus_files(folder: Path, count: int) -> dict[str, list[bytes]]:
    """The first ``count`` files of each kind (palette masks are every 5th mask of the photo corpus)."""
    indices = range(count * 5)
    masks = [(folder / "masks" / f"{i:06d}.png").read_bytes() for i in indices]
    palette = [m for i, m in zip(indices, masks) if i % 5 == 4][:count]
    grey = [m for i, m in zip(indices, masks) if i % 5 != 4][:count]
    return {"RGB PNG 480x360": [(folder / "images" / f"{i:06d}.png").read_bytes() for i in range(count)],
            "JPEG q90 480x360": [(folder / "jpeg" / f"{i:06d}.jpg").read_bytes() for i in range(count)],
            "grey mask PNG": grey, "palette mask PNG": palette}


def agrees(decode, files, reference) -> Optional[str]:
    """None when ``decode`` gives Pillow's values on every file, else what differs."""
    for data, expected in zip(files, reference):
        try:
            got = np.asarray(decode(data))
        except Exception as error:  # noqa: BLE001 - report any decoder failure instead of timing it
            return f"fails: {error}"
        if got.ndim == 3 and got.shape[2] == 1:
            got = got[..., 0]
        if got.shape != expected.shape:
            return f"shape {got.shape} (colours, not indices)" if expected.ndim == 2 else f"shape {got.shape}"
        if not np.array_equal(got, expected):
            return f"pixels differ by up to {int(np.abs(got.astype(int) - expected).max())}"
    return None


def time_kind(named: dict, files: list[bytes], rounds: int, rng: random.Random) -> dict[str, list[float]]:
    """CPU ms per file of each decoder in each round (decoder order shuffled every round)."""
    times = {name: [] for name in named}
    for _ in range(rounds):
        order = list(named)
        rng.shuffle(order)
        for name in order:
            decode = named[name]
            started = time.process_time()
            for data in files:
                decode(data)
            times[name].append((time.process_time() - started) / len(files) * 1e3)
    return times


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="bench/decoders.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=positive, default=60, help="files of each kind")
    parser.add_argument("--rounds", type=positive, default=9, help="interleaved rounds per kind")
    parser.add_argument("--workdir", type=Path, default=ROOT / "build" / "bench",
                        help="where the photo corpus is cached (shared with pipeline_throughput.py)")
    args = parser.parse_args(argv)
    folder, _ = ensure_photo_corpus(args.workdir.resolve(), args.files * 5)
    files = corpus_files(folder, args.files)
    rng = random.Random(0)
    for kind, named in decoders().items():
        from PIL import Image
        reference = [np.asarray(Image.open(io.BytesIO(d))) for d in files[kind]]
        checked, notes = {}, {}
        for name, decode in named.items():
            problem = agrees(decode, files[kind], reference)
            if problem is None or problem.startswith("pixels differ"):
                checked[name] = decode
                notes[name] = f"  [not Pillow's pixels: {problem}]" if problem else ""
            else:
                print(f"  ({kind}: {name} not timed: {problem})")
        log(f"timing {kind}: {len(checked)} decoders, {len(files[kind])} files, {args.rounds} rounds")
        times = time_kind(checked, files[kind], args.rounds, rng)
        pillow = times["Pillow open+load"]
        size = sum(map(len, files[kind])) / len(files[kind]) / 1024
        print(f"\n{kind} (~{size:.0f} KB; CPU ms per file, median (min..max) of {args.rounds} rounds; x Pillow)")
        for name, values in sorted(times.items(), key=lambda item: statistics.median(item[1])):
            ratios = [v / p for v, p in zip(values, pillow)]
            print(f"  {name:<40} {statistics.median(values):6.2f} ({min(values):.2f}..{max(values):.2f})   "
                  f"x{statistics.median(ratios):.2f} ({min(ratios):.2f}..{max(ratios):.2f}){notes[name]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
