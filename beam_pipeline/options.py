"""Every command-line option of the pipeline, in one PipelineOptions subclass.

Being a ``PipelineOptions`` subclass, the options show in ``--help`` and travel
with the job to Flink and Dataflow workers. :func:`to_config` checks them and
turns them into the frozen :class:`CorpusConfig` that the composites use.
"""

import argparse
import dataclasses
from typing import Optional, Tuple

from apache_beam.options.pipeline_options import PipelineOptions

from beam_pipeline.core import paths
from beam_pipeline.core.checks import Limits
from beam_pipeline.core.filter_expr import FilterExpression, parse_filter
from beam_pipeline.core.selection import SplitSpec, parse_split

MANIFEST_SUFFIXES = (".csv", ".jsonl", ".json", ".parquet")
DEFAULT_TARGET_SHARD_BYTES = 128 * 1024 * 1024


class CorpusOptionsError(ValueError):
    """A bad option value; reported as one line, without a traceback."""


def _csv_list(text: str) -> Tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


class CorpusOptions(PipelineOptions):
    """Options of ``python -m beam_pipeline``."""

    @classmethod
    def _add_argparse_args(cls, parser):
        group = parser.add_argument_group("corpus")
        group.add_argument(
            "--input", default=None,
            help="What to read. A manifest file (.csv, .jsonl or .parquet) with columns image and mask "
                 "(segmentation) or image and label (classification) plus any metadata columns; or a "
                 "folder: with --mask_template it holds paired image/mask folders, and for "
                 "classification without one it holds one sub-folder per class. Local, gs:// or s3://.")
        group.add_argument(
            "--output", default=None,
            help="Folder for the shards, rejects/ and manifest.json (written last).")
        group.add_argument(
            "--task", default="segmentation", choices=("segmentation", "classification"),
            help="segmentation: image + per-pixel mask; classification: image + class label.")
        group.add_argument(
            "--num_classes", type=int, default=None,
            help="Number of classes; valid mask values and label ids are 0..num_classes-1 (at most 255).")
        group.add_argument(
            "--ignore_label", type=int, default=255,
            help="Mask value that marks pixels to ignore (0..255), or -1 for none. Default 255.")
        group.add_argument(
            "--class_names", default=None,
            help="Comma-separated class names, in id order. Classification labels may use these names. "
                 "For one-folder-per-class input the default is the sorted folder names.")
        group.add_argument(
            "--input_format", default="auto", choices=("auto", "manifest", "paired", "class_folders"),
            help="How to read --input. auto: a manifest by file suffix, paired folders when "
                 "--mask_template is given, class folders for classification.")
        group.add_argument(
            "--image_glob", default="images/*",
            help="Paired folders: comma-separated globs of images, relative to --input "
                 "(default images/*). Example: train/*.png,val/*.png.")
        group.add_argument(
            "--mask_template", default=None,
            help="Paired folders: where an image's mask is, relative to --input, with fields {stem}, "
                 "{name}, {ext}, {parent}, {reldir} and {relstem} of the image path. Examples: "
                 "masks/{stem}.png, {parent}annot/{stem}.png. Images and masks are joined on this path.")
        group.add_argument(
            "--allow_outside_root", action="store_true", default=False,
            help="Manifest input: accept paths that leave the manifest's folder (.. or absolute paths "
                 "elsewhere). By default such rows are rejected as path_outside_root.")
        group.add_argument(
            "--filter", dest="filter_expression", default=None,
            help="Keep only rows for which this expression over manifest columns is true, e.g. "
                 "\"source == 'camA' and capture_year >= 2020\". Allowed: and, or, not, == != < <= > >= "
                 "in, not in, column names and literals. Parsed safely, never evaluated as Python.")
        group.add_argument(
            "--include", action="append", default=None,
            help="Keep only images whose path relative to the input root matches this glob. Repeatable.")
        group.add_argument(
            "--exclude", action="append", default=None,
            help="Drop images whose path relative to the input root matches this glob. Repeatable.")
        group.add_argument(
            "--sample_fraction", type=float, default=1.0,
            help="Keep this fraction of pairs, chosen by a stable hash of the key (same pairs every run).")
        group.add_argument(
            "--max_examples", type=int, default=None,
            help="Validate at most this many pairs (those with the smallest stable hash), for quick trials.")
        group.add_argument(
            "--split", default="auto",
            help="Where splits come from: column (the manifest's split column), column:NAME, folder "
                 "(the image's parent folder), or fractions by stable hash such as train=0.8,val=0.1,test=0.1. "
                 "auto: the split column when the manifest has one, else train=0.8,val=0.1,test=0.1.")
        group.add_argument(
            "--max_pixels", type=int, default=64_000_000,
            help="Reject images and masks with more pixels (width x height) than this, checked from the "
                 "header before decoding, so decompression bombs cost no memory. Default 64,000,000.")
        group.add_argument(
            "--max_file_bytes", type=int, default=256 * 1024 * 1024,
            help="Reject files larger than this many bytes without reading them. Default 256 MiB.")
        group.add_argument(
            "--image_formats", default="jpeg,png",
            help="Allowed image formats, detected from content, not from the file name. Default jpeg,png.")
        group.add_argument(
            "--target_shard_bytes", type=int, default=DEFAULT_TARGET_SHARD_BYTES,
            help="Target size of each TFRecord shard in bytes (default 128 MiB). Shards of a split are "
                 "within a few per cent of each other.")
        group.add_argument(
            "--sample_points_per_class", type=int, default=8,
            help="Segmentation: store up to this many (y, x) points of each class present in an example, "
                 "chosen by stable hash, so the trainer can centre crops on a chosen class. Default 8.")
        group.add_argument(
            "--no_stats", dest="compute_stats", action="store_false", default=True,
            help="Skip the tf.Transform statistics (transform/, stats.json) and therefore balancing.")
        group.add_argument(
            "--balance", default="repeat_factor", choices=("none", "repeat_factor", "strata"),
            help="Image-level class balancing of the train split (val and test are never resampled). "
                 "repeat_factor: LVIS repeat-factor sampling, writing r copies of an image whose rarest "
                 "class has presence f (r = max(1, sqrt(t / f))), spread over different shards. strata: no "
                 "copies; train shards are grouped by each image's rarest class and manifest.json gets "
                 "sampling weights for tf.data.Dataset.sample_from_datasets. none: write as found.")
        group.add_argument(
            "--balance_threshold", type=float, default=0.5,
            help="The repeat-factor threshold t: classes present in fewer than a fraction t of the train "
                 "images are repeated. Default 0.5.")
        group.add_argument(
            "--max_growth", type=float, default=2.0,
            help="Refuse to run when repeat-factor balancing would grow the train split by more than "
                 "this factor. Default 2.0.")
        group.add_argument(
            "--plan", action="store_true", default=False,
            help="Dry run: list the input and apply the selection (exact counts), then do the per-pair "
                 "work on a stable-hash sample of --plan_sample pairs on this machine, and print estimates "
                 "for the full run: pairs, bytes, rejects, shards and their sizes, shuffle bytes, worker "
                 "memory per core and vCPU-hours. Nothing is written and no runner is started.")
        group.add_argument(
            "--plan_sample", type=int, default=1000,
            help="How many selected pairs --plan measures (default 1000).")
        group.add_argument(
            "--allow_local_paths", action="store_true", default=False,
            help="Accept local paths for --input, --output and --temp_location although the runner's "
                 "workers run elsewhere (Dataflow, a Flink or Spark master on another host, SDK workers in "
                 "Docker). Only right when every worker mounts the same filesystem at the same path.")
        group.add_argument(
            "--overwrite", action="store_true", default=False,
            help="Replace the outputs of an earlier run in --output. Without it, an --output that "
                 "already holds a manifest.json is an error.")


@dataclasses.dataclass(frozen=True)
class CorpusConfig:
    """The checked options, as used by the composites. Picklable."""
    input: str
    output: str
    task: str
    input_format: str                       # manifest | paired | class_folders
    limits: Limits
    class_names: Tuple[str, ...]
    image_globs: Tuple[str, ...]
    mask_template: Optional[str]
    allow_outside_root: bool
    filter: Optional[FilterExpression]
    include: Tuple[str, ...]
    exclude: Tuple[str, ...]
    sample_fraction: float
    max_examples: Optional[int]
    split: Optional[SplitSpec]              # None: decided from the manifest's columns ("auto").
    max_file_bytes: int
    target_shard_bytes: int
    overwrite: bool
    sample_points_per_class: int = 8
    compute_stats: bool = True
    balance: str = "repeat_factor"
    balance_threshold: float = 0.5
    max_growth: float = 2.0
    allow_local_paths: bool = False

    @property
    def num_classes(self) -> int:
        return self.limits.num_classes

    @property
    def input_root(self) -> str:
        """The folder that relative paths and globs are taken against."""
        if self.input_format == "manifest":
            return paths.dirname(self.input)
        return self.input.rstrip("/")

    def as_dict(self) -> dict:
        out = dataclasses.asdict(self)
        out["filter"] = self.filter.text if self.filter else None
        return out


def _fail(message: str):
    raise CorpusOptionsError(message)


def _detect_input_format(opts: CorpusOptions) -> str:
    if opts.input_format != "auto":
        return opts.input_format
    if opts.input.lower().endswith(MANIFEST_SUFFIXES):
        return "manifest"
    if opts.mask_template:
        return "paired"
    if opts.task == "classification":
        return "class_folders"
    _fail("--input is a folder: give --mask_template for paired image/mask folders, "
          "or a manifest file (.csv, .jsonl, .parquet)")


def to_config(opts: PipelineOptions) -> CorpusConfig:
    """Check the options and build the config; raises CorpusOptionsError with one clear line."""
    o = opts.view_as(CorpusOptions)
    if not o.input:
        _fail("--input is required")
    if not o.output:
        _fail("--output is required")
    if o.num_classes is None:
        _fail("--num_classes is required")
    if not 1 <= o.num_classes <= 255:
        _fail(f"--num_classes must be between 1 and 255, got {o.num_classes}")
    ignore = None if o.ignore_label == -1 else o.ignore_label
    if ignore is not None and not 0 <= ignore <= 255:
        _fail(f"--ignore_label must be 0..255 or -1, got {o.ignore_label}")
    if ignore is not None and ignore < o.num_classes:
        _fail(f"--ignore_label {ignore} is also a class id (num_classes {o.num_classes})")
    input_format = _detect_input_format(o)
    if o.task == "segmentation" and input_format == "class_folders":
        _fail("--input_format class_folders is for --task classification")
    if input_format == "paired" and o.task == "classification":
        _fail("paired folders (--mask_template) are for --task segmentation")
    if input_format == "paired":
        if not o.mask_template:
            _fail("paired folders need --mask_template, e.g. masks/{stem}.png")
        try:
            paths.check_template(o.mask_template)
        except ValueError as error:
            _fail(f"--mask_template: {error}")
    class_names = _csv_list(o.class_names) if o.class_names else ()
    if class_names and len(class_names) != o.num_classes:
        _fail(f"--class_names lists {len(class_names)} names but --num_classes is {o.num_classes}")
    if not 0.0 < o.sample_fraction <= 1.0:
        _fail(f"--sample_fraction must be in (0, 1], got {o.sample_fraction}")
    if o.max_examples is not None and o.max_examples < 1:
        _fail(f"--max_examples must be at least 1, got {o.max_examples}")
    if o.target_shard_bytes < 1024:
        _fail(f"--target_shard_bytes must be at least 1024, got {o.target_shard_bytes}")
    if o.max_pixels < 1 or o.max_file_bytes < 1:
        _fail("--max_pixels and --max_file_bytes must be positive")
    if o.sample_points_per_class < 0:
        _fail("--sample_points_per_class must be 0 or more")
    if not 0.0 < o.balance_threshold <= 1.0:
        _fail(f"--balance_threshold must be in (0, 1], got {o.balance_threshold}")
    if o.max_growth < 1.0:
        _fail(f"--max_growth must be at least 1, got {o.max_growth}")
    formats = tuple(f.lower() for f in _csv_list(o.image_formats))
    if not formats:
        _fail("--image_formats is empty")
    try:
        expression = parse_filter(o.filter_expression) if o.filter_expression else None
        split = None if o.split == "auto" else parse_split(o.split)
    except ValueError as error:
        _fail(str(error))
    return CorpusConfig(
        input=o.input.rstrip("/") if input_format != "manifest" else o.input,
        output=o.output.rstrip("/"),
        task=o.task,
        input_format=input_format,
        limits=Limits(num_classes=o.num_classes, ignore_label=ignore, max_pixels=o.max_pixels,
                      image_formats=formats, channel_sums=o.compute_stats),
        class_names=class_names,
        image_globs=_csv_list(o.image_glob),
        mask_template=o.mask_template,
        allow_outside_root=o.allow_outside_root,
        filter=expression,
        include=tuple(o.include or ()),
        exclude=tuple(o.exclude or ()),
        sample_fraction=o.sample_fraction,
        max_examples=o.max_examples,
        split=split,
        max_file_bytes=o.max_file_bytes,
        target_shard_bytes=o.target_shard_bytes,
        overwrite=o.overwrite,
        sample_points_per_class=o.sample_points_per_class,
        compute_stats=o.compute_stats,
        balance=o.balance if o.compute_stats else "none",
        balance_threshold=o.balance_threshold,
        max_growth=o.max_growth,
        allow_local_paths=o.allow_local_paths,
    )


def help_parser() -> argparse.ArgumentParser:
    """The parser behind ``--help``: this tool's options and the common Beam ones."""
    from apache_beam.options.pipeline_options import (DirectOptions, FlinkRunnerOptions, GoogleCloudOptions,
                                                      PortableOptions, SetupOptions, StandardOptions,
                                                      WorkerOptions)
    parser = argparse.ArgumentParser(
        prog="python -m beam_pipeline",
        description="Read a raw image corpus, filter the subset, validate every pair, and write "
                    "sharded TFRecords, rejects and manifest.json. Any other Apache Beam pipeline "
                    "option (Flink, Dataflow, ...) is accepted and passed to the runner.")
    CorpusOptions._add_argparse_args(parser)
    for beam_options in (StandardOptions, DirectOptions, PortableOptions, FlinkRunnerOptions, GoogleCloudOptions,
                         WorkerOptions, SetupOptions):
        beam_options._add_argparse_args(parser.add_argument_group(f"Beam: {beam_options.__name__}"))
    return parser
