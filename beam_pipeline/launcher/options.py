"""Every command-line option of the pipeline, in one PipelineOptions subclass.

Being a ``PipelineOptions`` subclass, the options show in ``--help`` and travel
with the job to Flink and Dataflow workers. config.py checks them and turns
them into the frozen CorpusConfig and the per-stage specs.
"""

import argparse
import difflib
from typing import List, Tuple

from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions, _BeamArgumentParser

from beam_pipeline import console
from beam_pipeline.core.gates import DEFAULT_MAX_REJECT_FRACTION
from beam_pipeline.core.layouts import AUTO, LAYOUTS, NONE
from beam_pipeline.core.masks.maps import shipped_help
from beam_pipeline.launcher.leakage import add_leakage_arguments
from beam_pipeline.launcher.rerun.options import add_rerun_arguments

DEFAULT_TARGET_SHARD_BYTES = 128 * 1024 * 1024
LAYOUT_NAMES = {name for name in LAYOUTS if name != "voc_labelme"}    # --layout voc reads labelme2voc exports too


class CorpusOptionsError(ValueError):
    """A bad option value; reported as one line, without a traceback."""


def csv_list(text: str) -> Tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


class LaunchOptions(PipelineOptions):
    """The command line's options, each view made once.

    Beam asks the pipeline's options for a ``TypeOptions`` view twice for every transform it applies, and
    ``PipelineOptions.view_as`` parses the whole command line again for each: about 0.5 s of a small run's
    construction (docs/benchmarks.md, Fast start). A view holds no values of its own (it reads and writes the
    options' shared ``_all_options``), so one view per class is the same as a new one each time. Copies and pickles
    (``Pipeline`` deep-copies its options) leave the views behind and make their own.
    """

    def view_as(self, cls):
        views = self.__dict__.setdefault("_views", {})
        view = views.get(cls)
        if view is None:
            view = views[cls] = super().view_as(cls)
        return view

    def __getstate__(self):
        state = dict(super().__getstate__())
        state.pop("_views", None)
        return state


class CorpusOptions(PipelineOptions):
    """Options of ``python -m beam_pipeline``."""

    @classmethod
    def _add_argparse_args(cls, parser):
        group = parser.add_argument_group("corpus")
        group.add_argument(
            "--input", default=None,
            help="What to read. A listing file (.csv, .jsonl or .parquet; a 'manifest' of the raw corpus) with "
                 "columns image and mask (segmentation) or image and label (classification) plus any metadata "
                 "columns; a COCO annotation file (instances_*.json, stuff_*.json, panoptic_*.json: read as --layout "
                 "coco or coco_panoptic, its images beside it as COCO ships them; a .json that is not one is a "
                 "JSON-lines listing); or a "
                 "folder: with --mask_template it holds paired image/mask folders, and for "
                 "classification without one it holds one sub-folder per class. Local, gs:// or s3://.")
        group.add_argument(
            "--output", default=None,
            help="Folder of the dataset. Each run writes a new version into runs/<run_id>/ (shards, transform/, "
                 "stats.json, rejects/, class_index/, report.html, stats/) and then publishes it by writing "
                 "manifest.json, the only file readers open first. One run at a time: a second run on the same "
                 "folder stops at once, naming the first. Local, gs:// or s3://.")
        group.add_argument(
            "--task", default="segmentation", choices=("segmentation", "classification"),
            help="segmentation: image + per-pixel mask; classification: image + class label.")
        group.add_argument(
            "--num_classes", type=int, default=None,
            help="Classes, at most 255 (class ids 0..num_classes-1). A map gives it; class folders count themselves.")
        group.add_argument(
            "--ignore_label", type=int, default=255,
            help="Mask value that marks pixels to ignore (0..255), or -1 for none. Default 255.")
        group.add_argument(
            "--class_names", default=None,
            help="Comma-separated class names, in id order. Classification labels may use these names. "
                 "For one folder per class: the folder names, sorted, by default; given, the folders' names.")
        group.add_argument(
            "--input_format", default="auto", choices=("auto", "listing", "manifest", "paired", "class_folders"),
            help="How to read --input. auto: a listing file by file suffix (manifest is another name for "
                 "listing), paired folders when --mask_template is given, class folders for classification.")
        group.add_argument(
            "--layout", default="auto", choices=(AUTO, NONE) + tuple(sorted(LAYOUT_NAMES)),
            help="A public dataset's folder as it ships, read with its own split files and pairing and no listing "
                 "(docs/layouts.md, which gives each tree): voc (PASCAL VOC 2012, and labelme2voc exports), pet "
                 "(Oxford-IIIT Pet trimaps), cityscapes, ade20k (ADEChallengeData2016), coco (annotations/"
                 "instances_*.json, else stuff_*.json: polygons and RLE drawn with pycocotools, the classes from "
                 "the file's categories), coco_panoptic (panoptic_*.json and its PNGs), sa1b (SA-1B: sa_<n>.json "
                 "beside each sa_<n>.jpg; masks drawn foreground 1, background 0). Each applies its shipped map (the "
                 "COCO ones: the map of the file's categories) unless --label_map or --color_map is given. auto "
                 "(default): a segmentation --input folder without --mask_template is recognised by its folders, "
                 "and the first line says which layout was chosen; none: never.")
        group.add_argument(
            "--coco_crowd", default="ignore", choices=("ignore", "class"),
            help="COCO layouts: how a crowd region (iscrowd 1, a panoptic crowd segment) is drawn. ignore (default): "
                 "the ignore label, as COCO's evaluation treats crowds; class: its category. Overlapping annotations "
                 "are drawn in decreasing area (the smaller in front), ties by annotation id (docs/layouts-coco.md).")
        group.add_argument(
            "--split_names", default=None,
            help="Rename the input's splits, as NAME=NEW pairs: trainval=train,minival=val. The split named train is "
                 "the one statistics, balancing and the trainer use; a layout renames its own (Pet: trainval=train, "
                 "ADE20K: training=train,validation=val), which these override.")
        group.add_argument(
            "--allow_no_train", action="store_true", default=False,
            help="Publish a version with no train split, or whose train split holds no pixel (no image) of any "
                 "class. By default such a run is refused in one line that names the splits found, since nothing "
                 "could train on it.")
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
            help="Listing file input: accept paths that leave the listing's folder (.. or absolute paths "
                 "elsewhere). By default such rows are rejected as path_outside_root.")
        group.add_argument(
            "--filter", dest="filter_expression", default=None,
            help="Keep only rows for which this expression over listing columns is true, e.g. "
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
            help="Where splits come from: column (the listing's split column), column:NAME, folder "
                 "(the image's parent folder), or fractions by stable hash such as train=0.8,val=0.1,test=0.1. "
                 "auto: the split column when the listing has one, else train=0.8,val=0.1,test=0.1.")
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
            "--balance", default="training", choices=("training", "none", "repeat_factor", "strata"),
            help="Image-level class balancing of the train split (val and test are never resampled). training "
                 "(default): the shards hold each image once, and the trainer repeats an image r times per epoch, "
                 "r = max(1, sqrt(t / f)) for its rarest class of presence f (LVIS repeat factors; the summary says "
                 "how many records an epoch gets). repeat_factor: those r copies are written into the shards, for "
                 "readers other than this trainer; it rewrites the train split on every run. strata: train shards "
                 "grouped by each image's rarest class, with sampling weights in manifest.json for "
                 "tf.data.Dataset.sample_from_datasets; also rewritten on every run. none: write as found.")
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
            help="Replace the dataset published in --output. The previous version stays complete and readable "
                 "until this run has succeeded and its manifest.json replaces the old one; a failed or killed run "
                 "leaves it as it was. Without it, an --output that already holds a manifest.json is an error.")
        group.add_argument(
            "--keep_versions", type=int, default=1,
            help="After publishing, keep this many earlier versions (runs/<run_id>/) for trainers still reading "
                 "them; older ones are deleted. Default 1.")
        group.add_argument(
            "--max_reject_fraction", type=float, default=DEFAULT_MAX_REJECT_FRACTION,
            help="Refuse to write or publish anything when more than this fraction of the selected inputs (those "
                 "the filters kept) is rejected; the message names the top reasons. Nearly everything rejected "
                 "is the usual sign of a wrong --mask_template or --num_classes, or a broken mount. "
                 f"Default {DEFAULT_MAX_REJECT_FRACTION:g}; 1 turns the gate off.")
        group.add_argument(
            "--shuffle", default="auto", choices=("auto", "beam", "files"),
            help="How the pairs' records cross the pipeline's shuffles. files: through files (in the run's "
                 "version folder's .tmp/ for a local --output, else in this machine's temporary folder, or "
                 "under --temp_location on a runner whose workers run elsewhere), so that only their paths "
                 "pass through the runner: the DirectRunner holds everything that crosses a shuffle in "
                 "memory, and with files its memory stays flat however many pairs there are. beam: Beam's "
                 "own shuffles, right where the runner keeps shuffled data on disk (Dataflow, Flink). auto "
                 "(default): files on the DirectRunner, beam on any other runner. The outputs are the same.")
        maps = parser.add_argument_group("mask and label maps (docs/validation.md, Label maps)")
        maps.add_argument(
            "--label_map", default=None,
            help="How stored values become classes: a CSV file with the header value,class (and an optional "
                 "name column naming the value), or a JSON object {\"value\": class}; local, gs:// or s3://. "
                 "Segmentation: value is a mask value 0..65535 (grey, palette index, 16-bit, TIFF). "
                 "Classification: value is a label as the listing or the class folder's name gives it. class is a "
                 "class id, a class name (--class_names) or ignore: the ignore label (classification: the image "
                 "is left out and counted as filtered out, label_map_ignore). A value the map does not list is "
                 "rejected (mask_value_unmapped, or unknown_label), naming it, unless --unmapped ignore. Maps "
                 "shipped with the package, named instead of a file, which also give --num_classes and "
                 f"--class_names: {shipped_help('--label_map')}.")
        maps.add_argument(
            "--color_map", default=None,
            help="Colour-coded masks: a CSV file with the header r,g,b,class (and an optional name column). It "
                 "reads RGB masks; RGBA masks, where alpha 0 is the ignore label, alpha 255 the colour, and any "
                 "other alpha is rejected (mask_alpha_partial); palette masks through their palette (the palette "
                 "is the colour code); 8-bit grey masks as the colour (v,v,v). Colours match exactly and are never "
                 "rounded to the nearest one: a colour the map does not list is rejected (mask_color_unknown) with "
                 "the colours and their pixel counts, unless --unmapped ignore. class as for --label_map. Shipped: "
                 f"{shipped_help('--color_map')}.")
        maps.add_argument(
            "--reduce_zero_label", action="store_true", default=False,
            help="Masks that store class k as k + 1 with 0 for 'other' (ADE20K, LoveDA): 0 becomes the ignore "
                 "label, the ignore label's own value stays ignore, and every other value v becomes v - 1. It "
                 "applies first: a --label_map then maps the reduced values.")
        maps.add_argument(
            "--unmapped", default="reject", choices=("reject", "ignore"),
            help="A mask value or colour, or a label, that the map does not list: reject the pair (default), or "
                 "make it the ignore label (classification: leave the image out, counted as filtered out).")
        maps.add_argument(
            "--mask_formats", default="png",
            help="Allowed mask formats, detected from content: png (default), or png,tiff for 8- and 16-bit "
                 "single-channel TIFF masks (remote sensing, medical). Masks are stored as 8-bit PNG of class ids.")
        add_rerun_arguments(parser)
        add_leakage_arguments(parser)
        output = parser.add_argument_group("console")
        console.add_log_level_arguments(output)
        output.add_argument(
            "--progress_every", type=float, default=5.0,
            help="DirectRunner: seconds between progress lines when stderr is not a terminal (a log file, CI); "
                 "on a terminal a live bar is drawn instead. Default 5 (at least 0.1).")


def help_parser() -> argparse.ArgumentParser:
    """The parser behind ``--help``: this tool's options and the common Beam ones."""
    from apache_beam.options.pipeline_options import (DirectOptions, FlinkRunnerOptions, GoogleCloudOptions,
                                                      JobServerOptions, PortableOptions, SetupOptions,
                                                      StandardOptions, WorkerOptions)
    parser = argparse.ArgumentParser(
        prog="python -m beam_pipeline",
        description="Read a raw image corpus, filter the subset, validate every pair, and write "
                    "sharded TFRecords, rejects and manifest.json. Any other Apache Beam pipeline "
                    "option (Flink, Dataflow, ...) is accepted and passed to the runner.")
    CorpusOptions._add_argparse_args(parser)
    for beam_options in (StandardOptions, DirectOptions, PortableOptions, FlinkRunnerOptions, JobServerOptions,
                         GoogleCloudOptions, WorkerOptions, SetupOptions):
        beam_options._add_argparse_args(parser.add_argument_group(f"Beam: {beam_options.__name__}"))
    return parser


class _OptionsParser(_BeamArgumentParser):
    """Beam's own option parser (no abbreviations), whose errors become one line instead of an exit."""

    def error(self, message):
        raise CorpusOptionsError(message)


def check_known_options(argv: List[str], options: PipelineOptions) -> None:
    """Refuse options that no PipelineOptions class knows, with the nearest known name.

    Beam drops them with only a warning, so a misspelt ``--max_num_worker 64`` would run with the default.
    The runner's module is imported first, so options a runner defines in its own module are known.
    Portable runners (Flink, Spark, PortableRunner, Prism) are the exception: their job server adds its
    own options at submission (Flink's ``--checkpointing_interval``, ...), which Python cannot know here;
    unknown options are passed on to them, and Beam warns about those the job server does not know either.
    """
    from apache_beam.runners.portability.portable_runner import PortableRunner
    from apache_beam.runners.runner import create_runner

    name = options.view_as(StandardOptions).runner or "DirectRunner"
    try:
        runner_object = create_runner(name)
    except (ValueError, ImportError, AttributeError, TypeError) as error:
        raise CorpusOptionsError(f"--runner {name}: {error}") from None
    parser = _OptionsParser(prog="python -m beam_pipeline", allow_abbrev=False)
    for options_class in {str(cls): cls for cls in PipelineOptions.__subclasses__()}.values():
        options_class._add_argparse_args(parser)  # noqa: SLF001 - as PipelineOptions.get_all_options does
    _, unknown = parser.parse_known_args(argv)
    if not unknown or isinstance(runner_object, PortableRunner):
        return
    known = [option for action in parser._actions for option in action.option_strings]  # noqa: SLF001
    raise CorpusOptionsError(f"{_describe_unknown(unknown, known)}: {name} would run without them (Beam "
                             "ignores options it does not know, with only a warning); see --help")


def _describe_unknown(unknown: List[str], known: List[str]) -> str:
    """``unknown option --max_num_worker (did you mean --max_num_workers?)``; a value after it is its own."""
    options, stray = [], []
    for index, word in enumerate(unknown):
        if word.startswith("-"):
            name = word.split("=", 1)[0]
            nearest = difflib.get_close_matches(name, known, n=1)
            options.append(f"{name} (did you mean {nearest[0]}?)" if nearest else name)
        elif index == 0 or not unknown[index - 1].startswith("-") or "=" in unknown[index - 1]:
            stray.append(repr(word))
    parts = ([f"unknown option(s) {', '.join(options)}"] if options else []) + (
        [f"unexpected argument(s) {', '.join(stray)}"] if stray else [])
    return "; ".join(parts)
