"""``python -m tools.sample_corpus OUT [--seed 0] [--num_pairs 240] [--num_class_images 400]
[--scale 1] [--overwrite]``: the command line of the sample corpus generator (writes the corpus,
prints a summary; exit 2 on bad arguments or an existing corpus without ``--overwrite``).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import Any

from tools.sample_corpus.corpus import write_corpus
from tools.sample_corpus.spec import CLASS_NAMES, MIN_NUM_PAIRS, RAREST_CLASS, UNUSUAL_PAIRS


def format_summary(summary: dict[str, Any], seconds: float) -> str:
    seg, cls = summary["segmentation"], summary["classification"]
    return "\n".join(
        [
            f"Wrote sample corpus to {summary['out_dir']} in {seconds:.1f}s "
            f"({summary['files']} files, {summary['bytes'] / 1e6:.1f} MB)",
            f"  segmentation:   {seg['valid_pairs']} valid pairs ({seg['unusual_pairs']} unusual), "
            f"{seg['rarest_class_images']} with class {RAREST_CLASS} ({CLASS_NAMES[RAREST_CLASS]}), "
            f"{len(seg['broken_stems'])} broken/odd entries, {seg['manifest_rows']} manifest rows, "
            f"{seg['files']} files, {seg['bytes'] / 1e6:.1f} MB -> {seg['dir']}",
            f"  classification: {cls['valid_images']} valid images in {len(cls['per_class'])} classes "
            f"(largest {max(cls['per_class'].values())}, smallest {min(cls['per_class'].values())}), "
            f"{cls['broken_images']} broken, {cls['files']} files, {cls['bytes'] / 1e6:.1f} MB -> {cls['dir']}",
        ]
    )


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tools.sample_corpus",
        description=(
            "Deterministically write a synthetic image corpus: OUT/segmentation (images, masks, manifest.csv, "
            "with deliberately broken inputs) and OUT/classification (Food-101-like class folders, manifest.csv). "
            "Same arguments give byte-identical files."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("out", metavar="OUT", help="output directory (created if missing)")
    parser.add_argument("--seed", type=int, default=0, help="seed for numpy.random.default_rng; everything derives from it")
    parser.add_argument(
        "--num_pairs", type=_positive_int, default=240,
        help=(
            f"distinct valid segmentation image/mask pairs per scale unit, including the {len(UNUSUAL_PAIRS)} "
            f"unusual-format pairs (num_pairs * scale >= {MIN_NUM_PAIRS})"
        ),
    )
    parser.add_argument("--num_class_images", type=_positive_int, default=400, help="valid classification images per scale unit")
    parser.add_argument(
        "--scale", type=_positive_int, default=1,
        help=(
            "multiply num_pairs and num_class_images, e.g. 3 for a 3x benchmark corpus; the extra items are new "
            "distinct images, broken inputs are still written once"
        ),
    )
    parser.add_argument(
        "--overwrite", action="store_true",
        help="delete existing OUT/segmentation, OUT/classification and OUT/outside first instead of failing",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    start = time.perf_counter()
    try:
        summary = write_corpus(args.out, args.seed, args.num_pairs, args.num_class_images, args.scale, overwrite=args.overwrite)
    except (ValueError, FileExistsError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(format_summary(summary, time.perf_counter() - start))
    return 0


if __name__ == "__main__":
    sys.exit(main())
