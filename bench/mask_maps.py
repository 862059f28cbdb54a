"""What reading masks through a map costs, on the real-looking photo corpus (issue 26's cost target).

Each pair of the photo corpus (480x360 JPEG photographs, masks of 3-6 classes with ignore borders) has
its mask stored again in four encodings, and validated through the matching map:

* label ids, 8-bit grey PNG (``--label_map cityscapes``: class c stored as the label id of trainId c);
* colours, RGB PNG (``--color_map camvid``: class c in a colour of SegNet class c, ignore as Void);
* 16-bit ids, 16-bit grey PNG (a value map of 17 ids);
* class k stored as k + 1, 8-bit grey PNG (``--reduce_zero_label``).

For every pair the CPU time of the whole validation (``pairs.check``: what ValidatePairs runs per pair)
is taken, and the conversion inside it, timed piece by piece on the decoded mask (:func:`measure`). The
share is conversion / validation. The writer's conversion (every pixel to its class id, before the PNG
encode) is timed too. Baseline: the corpus's own masks (class ids) validated without a map. ``--images``
chooses the corpus's JPEG or PNG photographs (CamVid and Cityscapes store PNG images, ADE20K JPEG). Cases
and pairs are interleaved in each of ``--rounds`` rounds; each figure is the median (min..max) over rounds.

    python bench/mask_maps.py [--pairs 200] [--rounds 5] [--images jpeg|png] [--workdir build/bench]
"""

from __future__ import annotations

import argparse
import io
import random
import time
from pathlib import Path

import numpy as np
from PIL import Image

from common import ROOT, ensure_photo_corpus, log, positive, spread


def _png(array: np.ndarray) -> bytes:
    out = io.BytesIO()
    Image.fromarray(array).save(out, format="PNG")
    return out.getvalue()


def _palette_png(mask: np.ndarray, colours: np.ndarray) -> bytes:
    """The mask's class ids as palette indices, with the colour of each class in the palette."""
    image = Image.frombytes("P", (mask.shape[1], mask.shape[0]), mask.tobytes())
    image.putpalette(colours.ravel().tolist())
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def cases(masks: list[np.ndarray]):
    """{case: ((limits, mask map), [mask bytes])} for the four encodings, and the baseline without a map."""
    from beam_pipeline.core.masks import maps as lm
    from beam_pipeline.core.pixels import Limits

    def load(name: str) -> lm.MaskMap:
        spec = lm.SHIPPED[name]
        kind = lm.COLORS if spec.option == "--color_map" else lm.VALUES
        rows = lm.parse_rows(lm.shipped_bytes(name), kind, name)
        return lm.mask_map(kind, lm.resolve_classes(rows, spec.class_names, len(spec.class_names), name), rows,
                           reduce_zero_label=False, unmapped=lm.REJECT, source=name, sha256="")

    cityscapes, camvid = load("cityscapes"), load("camvid")
    label_ids = np.zeros(256, np.uint8)
    for value, cls in cityscapes.entries:
        if cls >= 0 and label_ids[cls] == 0:
            label_ids[cls] = value                  # the first label id of each trainId; ignore stays 0 (unlabeled)
    colours = np.zeros((256, 3), np.uint8)
    for packed, cls in camvid.entries:
        if cls >= 0 and not colours[cls].any():
            colours[cls] = ((packed >> 16) & 255, (packed >> 8) & 255, packed & 255)
    rows = [lm.MapRow(0, 1000 + 61 * c, str(c)) for c in range(8)] + [lm.MapRow(0, 65535, "ignore")]
    ids16 = lm.mask_map(lm.VALUES, lm.resolve_classes(rows, (), 8, "ids"), rows, reduce_zero_label=False,
                        unmapped=lm.REJECT, source="ids", sha256="")
    sixteen = np.full(256, 65535, np.uint16)
    sixteen[:8] = 1000 + 61 * np.arange(8)
    reduce = lm.MaskMap(lm.IDENTITY, reduce_zero_label=True, source="--reduce_zero_label")
    plus_one = np.arange(1, 257, dtype=np.uint16).astype(np.uint8)
    plus_one[255] = 0
    return {
        "baseline: class ids, no map": ((Limits(num_classes=8), None), [_png(m) for m in masks]),
        "label ids (cityscapes), grey PNG": ((Limits(num_classes=19), cityscapes),
                                             [_png(label_ids[m]) for m in masks]),
        "colours (camvid), RGB PNG": ((Limits(num_classes=11), camvid), [_png(colours[m]) for m in masks]),
        "colours (camvid), palette PNG": ((Limits(num_classes=11), camvid),
                                          [_palette_png(m, colours) for m in masks]),
        "16-bit ids, 16-bit PNG": ((Limits(num_classes=8), ids16), [_png(sixteen[m]) for m in masks]),
        "--reduce_zero_label, grey PNG": ((Limits(num_classes=8), reduce), [_png(plus_one[m]) for m in masks]),
    }


def _fastest(work, times: int = 3) -> float:
    """The least CPU time of ``times`` runs of ``work`` (the points are compared as the fastest of three each)."""
    best = float("inf")
    for _ in range(times):
        started = time.process_time()
        work()
        best = min(best, time.process_time() - started)
    return best


def measure(limits_and_map, image: bytes, mask: bytes, key: str, folder: Path) -> tuple[float, float, float]:
    """(validation, the conversion inside it, the writer's conversion) in CPU seconds for one pair.

    Validation is ``pairs.check`` on the pair's files (what ValidatePairs runs per pair: read both files, decode,
    check, summarise, sample points, SHA-256). The conversion is timed piece by piece on the decoded mask: the
    source histogram (16-bit masks; 8-bit ones come with their decode) or Pillow's colour count, the summary
    through the map's table, and the view with the sample points through it less the same points on the
    converted array (each the fastest of three, a fresh view each time). The writer's is ``stored_mapped_mask`` less its decode and its PNG encode (no clipping:
the noise of the differences averages out over the pairs).
    """
    from beam_pipeline.core import pixels
    from beam_pipeline.core.masks import colors as mask_colors, mapped as mapped_masks, values as mask_values
    from beam_pipeline.core.points import sample_points
    from beam_pipeline.core.records import PairRef
    from beam_pipeline.stages import pairs
    from beam_pipeline.stages.specs import CheckSpec

    clock = time.process_time
    (folder / "image.jpg").write_bytes(image)
    (folder / "mask.png").write_bytes(mask)
    ref = PairRef(key, key, str(folder / "image.jpg"), str(folder / "mask.png"))
    limits, mapped = limits_and_map
    started = clock()
    pairs.check(ref, CheckSpec("segmentation", limits, mask_map=mapped))
    validation = clock() - started
    if mapped is None:
        return validation, 0.0, 0.0
    n, ignore = limits.num_classes, limits.ignore_label
    decoded = mapped_masks.decode_source(mask, limits, mapped)
    started = clock()
    if decoded.index_colors is not None:
        used = np.flatnonzero(decoded.counts).tolist()
        summary = mask_colors.summarise_colors([(int(decoded.counts[i]), decoded.index_colors[i]) for i in used],
                                               mapped, n, ignore)

        def new_view():
            return mapped_masks.IndexView(decoded.values, mask_colors.index_classes(decoded.index_colors, used,
                                                                                    mapped, ignore))
    elif decoded.image is not None:
        summary = mask_colors.summarise_colors(mask_colors.count_colors(decoded.image), mapped, n, ignore)

        def new_view():
            return mask_colors.MappedColors(decoded.image, summary, mapped, ignore, decoded.rgb)
    else:
        histogram = mask_values.source_histogram(decoded.values, decoded.counts, mapped)
        summary = mask_values.summarise_values(histogram, mapped, n, ignore)

        def new_view():
            return mapped_masks.MappedValues(decoded.values, summary, mapped, n, ignore)
    summarised = clock() - started
    through_view = _fastest(lambda: sample_points(new_view(), key, n, 8, summary.class_pixels))
    started = clock()
    mapped_masks.decode_source(mask, limits, mapped)
    decode_time = clock() - started
    started = clock()
    stored = mapped_masks.stored_mapped_mask(mask, limits, mapped)
    store_time = clock() - started
    converted = np.asarray(Image.open(io.BytesIO(stored)))
    started = clock()
    pixels.encode_png(converted)
    writer = store_time - decode_time - (clock() - started)
    on_array = _fastest(lambda: sample_points(converted, key, n, 8, summary.class_pixels))
    return validation, summarised + through_view - on_array, writer


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=positive, default=200)
    parser.add_argument("--rounds", type=positive, default=5)
    parser.add_argument("--workdir", type=Path, default=ROOT / "build" / "bench")
    parser.add_argument("--images", choices=("jpeg", "png"), default="jpeg")
    args = parser.parse_args()
    folder, _ = ensure_photo_corpus(args.workdir, args.pairs)
    images = [(folder / ("jpeg" if args.images == "jpeg" else "images") / f"{i:06d}.{'jpg' if args.images == 'jpeg' else 'png'}").read_bytes()
              for i in range(args.pairs)]
    masks = [np.asarray(Image.open(folder / "masks" / f"{i:06d}.png")) for i in range(args.pairs)]
    table = cases(masks)
    rng = random.Random(26)
    scratch = args.workdir / "mask_maps"
    scratch.mkdir(parents=True, exist_ok=True)
    results = {name: {"validation": [], "conversion": [], "writer": [], "share": []} for name in table}
    for round_number in range(args.rounds):
        order = [(name, i) for name in table for i in range(args.pairs)]
        rng.shuffle(order)
        sums = {name: [0.0, 0.0, 0.0] for name in table}
        for name, i in order:
            limits, encoded = table[name]
            figures = measure(limits, images[i], encoded[i], f"pair-{i}", scratch)
            sums[name] = [a + b for a, b in zip(sums[name], figures)]
        for name, (validation, conversion, writer) in sums.items():
            results[name]["validation"].append(1e3 * validation / args.pairs)
            results[name]["conversion"].append(1e3 * conversion / args.pairs)
            results[name]["writer"].append(1e3 * writer / args.pairs)
            results[name]["share"].append(100 * conversion / validation)
        log(f"round {round_number + 1} of {args.rounds} done")
    baseline = results["baseline: class ids, no map"]["validation"]
    print(f"{args.pairs} photo pairs (480x360 {args.images.upper()} + mask), {args.rounds} interleaved rounds; CPU ms per pair, "
          "median (min..max) over rounds")
    print(f"{'case':<36} {'validation':>18} {'x baseline':>18} {'conversion':>18} {'share %':>18} "
          f"{'writer conversion':>18}")
    for name, figures in results.items():
        ratio = [v / b for v, b in zip(figures["validation"], baseline)]
        print(f"{name:<36} {spread(figures['validation']):>18} {spread(ratio):>18} "
              f"{spread(figures['conversion'], '{:.3f}'):>18} {spread(figures['share'], '{:.1f}'):>18} "
              f"{spread(figures['writer'], '{:.3f}'):>18}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
