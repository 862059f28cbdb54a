"""``python -m trainer.evaluate``: run the exported serving model over a split and write the figures.

The command: its options (every one explained in ``--help``) and its one-line result; the run itself is
trainer/evaluation/evaluate.py. TensorFlow is imported only after :func:`trainer.console.configure`.
"""

import argparse
import sys

from trainer import console
from trainer.evaluation.evaluate import EvaluateConfig, evaluate


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m trainer.evaluate",
        description="Evaluate an exported serving model (python -m trainer's export/ folder) on every image of a "
                    "split of the pipeline's output, at full resolution, through its serving_default signature; "
                    "print a table per class (rarest first) and write the figures as JSON.")
    add = parser.add_argument
    add("--model", required=True, help="The exported SavedModel folder (JOB_DIR/export).")
    add("--data", required=True, help="The pipeline's output folder (manifest.json, shards, transform/).")
    add("--split", default="test", help="Split to evaluate (default test).")
    add("--output", default=None, help="Write the figures here as JSON (e.g. eval.json); by default only printed.")
    add("--batch_size", type=int, default=8, help="Images sent to the model per call (default 8).")
    add("--max_examples", type=int, default=None, help="Evaluate only the first N images of the split.")
    add("--progress_seconds", type=float, default=10.0, help="Seconds between progress lines (default 10).")
    console.add_log_level_arguments(parser)
    return parser


def parse_config(argv=None) -> EvaluateConfig:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.batch_size < 1 or (args.max_examples is not None and args.max_examples < 1):
        parser.error("--batch_size and --max_examples must be >= 1")
    return EvaluateConfig(**vars(args))


def main(argv=None) -> int:
    config = parse_config(argv)
    console.configure(config.log_level)         # before TensorFlow is imported
    from trainer.data.artifacts import ArtifactError
    from trainer.evaluation.metrics import format_classification_table, format_segmentation_table
    try:
        result = evaluate(config)
    except (ArtifactError, ValueError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    table = format_segmentation_table(result) if result["task"] == "segmentation" else \
        format_classification_table(result)
    print(table)
    failed = f", {len(result['failed'])} refused by the model" if result["failed"] else ""
    written = f"; wrote {config.output}" if config.output else ""
    print(f"evaluated {result['images']} images of {config.split} in {result['seconds']:.1f} s "
          f"({result['images_per_second']} images/s){failed}{written}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
