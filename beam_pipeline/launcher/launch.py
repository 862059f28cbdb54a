"""Launching a run: the work done on the launcher before the job starts.

Checking the command line (and, with launcher/runners.py, the options against the runner: worker
paths, temp location), resolving the input (the listing's columns, the class folders, where splits
come from), checking the output folder, and where the run's shuffles and temporary files go. Every
mistake found here stops the run with one clear line (CorpusOptionsError) before anything is
submitted.
"""

import dataclasses
import importlib.metadata
import os
import platform
import posixpath
from typing import List, Optional, Tuple

from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import GoogleCloudOptions, PipelineOptions

from beam_pipeline.core import layout, paths
from beam_pipeline.core.pairing import class_folder_classes
from beam_pipeline.core.runners import SHUFFLE_COUNT_LIMIT
from beam_pipeline.core.selection import SplitSpec, parse_split
from beam_pipeline.io import folders, listing, stores
from beam_pipeline.launcher.config import CorpusConfig, check_classes, to_config
from beam_pipeline.launcher import runners
from beam_pipeline.launcher.leakage import check_split_group_column
from beam_pipeline.launcher.layouts import layout_split, resolve_layout
from beam_pipeline.launcher.maps import load_maps
from beam_pipeline.launcher.options import CorpusOptions, CorpusOptionsError, LaunchOptions, check_known_options
from beam_pipeline.stages.specs import CLASS_FOLDERS, LAYOUT, LISTING, ShuffleSpec

DEFAULT_HASH_SPLIT = "train=0.8,val=0.1,test=0.1"
VERSIONED_PACKAGES = ("apache-beam", "pillow", "numpy", "pyarrow", "protobuf", "tensorflow-transform",
                      "tensorflow", "tfx-bsl", "imagecodecs", "simplejpeg")


@dataclasses.dataclass(frozen=True)
class Launch:
    """A checked command line: what to run, and how."""
    options: PipelineOptions
    config: CorpusConfig
    split: SplitSpec                   # where splits come from, decided from the input
    plan_sample: Optional[int]         # --plan: the pairs to measure; None for a real run


def resolve(argv: List[str]) -> Launch:
    """Check the command line and look at the input once; raises CorpusOptionsError.

    Beam's filesystems get the options first: outside a pipeline they have none, and the S3
    filesystem refuses to start without them (GCS takes its settings from the environment).
    """
    options = LaunchOptions(argv)
    check_known_options(argv, options)
    FileSystems.set_options(options)
    config = to_config(options)
    runners.check_worker_paths(options, config)
    config = runners.absolute_local_paths(config, options)
    config = resolve_layout(config)
    config = load_maps(config)
    config, split = resolve_inputs(config)
    corpus = options.view_as(CorpusOptions)
    if corpus.plan and corpus.plan_sample < 1:
        raise CorpusOptionsError(f"--plan_sample must be at least 1, got {corpus.plan_sample}")
    return Launch(options, config, split, corpus.plan_sample if corpus.plan else None)


# --------------------------------------------------------------------------
# The input
# --------------------------------------------------------------------------
def _listing_split_spec(config: CorpusConfig) -> Tuple[CorpusConfig, SplitSpec]:
    """Check the listing's columns against the task, --filter and --split."""
    try:
        columns = listing.read_columns(config.input)
    except (OSError, ValueError) as error:
        raise CorpusOptionsError(f"cannot read listing {config.input}: {error}") from None
    second = "mask" if config.task == "segmentation" else "label"
    for required in ("image", second):
        if required not in columns:
            raise CorpusOptionsError(
                f"listing {config.input} has no {required!r} column (columns: {', '.join(columns)})")
    _check_filter_columns(config, columns)
    _check_split_group(config, columns)
    if config.split is not None:
        if config.split.mode == "column" and config.split.column_name not in columns:
            raise CorpusOptionsError(f"--split: the listing has no column {config.split.column_name!r}")
        if config.split.mode == "folder":
            raise CorpusOptionsError("--split folder is for folder inputs; use column or fractions")
        return config, config.split
    return config, (SplitSpec("column") if "split" in columns else parse_split(DEFAULT_HASH_SPLIT))


def _check_filter_columns(config: CorpusConfig, columns: List[str]) -> None:
    if config.filter is None:
        return
    known = set(columns) | {"image", "mask", "label"}
    unknown = [name for name in config.filter.columns if name not in known]
    if unknown:
        raise CorpusOptionsError(
            f"--filter uses unknown column(s) {', '.join(unknown)}; columns: {', '.join(sorted(known))}")


def _check_split_group(config: CorpusConfig, columns: Optional[List[str]]) -> None:
    problem = check_split_group_column(config.split_group, columns)
    if problem:
        raise CorpusOptionsError(problem)


def _folder_split_spec(config: CorpusConfig) -> Tuple[CorpusConfig, SplitSpec]:
    root = config.input_root
    if not folders.folder_exists(root):
        raise CorpusOptionsError(f"--input folder does not exist: {root}")
    _check_filter_columns(config, ["folder"])
    _check_split_group(config, None)
    spec = config.split or parse_split(DEFAULT_HASH_SPLIT)
    if spec.mode == "column":
        raise CorpusOptionsError("--split column needs a listing file input; use folder or fractions")
    if config.input_format == CLASS_FOLDERS:
        if spec.mode == "folder":
            raise CorpusOptionsError("--split folder is not available for class folders (the folder is the class)")
        if config.label_map is None:         # a label map names the classes, and groups the folders
            config = _class_folder_classes(config, root)
    return config, spec


def _class_folder_classes(config: CorpusConfig, root: str) -> CorpusConfig:
    """The classes are the class folders: counted when --num_classes is not given, checked when it is."""
    given = config.num_classes or None              # 0: no --num_classes (to_config)
    try:
        names = class_folder_classes(folders.class_folder_names(root), root, given, config.class_names)
    except ValueError as error:
        raise CorpusOptionsError(str(error)) from None
    check_classes(len(names), config.limits.ignore_label, names)
    return dataclasses.replace(config, class_names=names,
                               limits=dataclasses.replace(config.limits, num_classes=len(names)))


def resolve_inputs(config: CorpusConfig) -> Tuple[CorpusConfig, SplitSpec]:
    """Look at the input once, before the job starts, so mistakes give one clear error."""
    if config.input_format == LAYOUT:
        _check_filter_columns(config, ["folder", "split"])
        _check_split_group(config, None)
        return config, layout_split(config) or parse_split(DEFAULT_HASH_SPLIT)
    if config.input_format == LISTING:
        if not FileSystems.exists(config.input):
            raise CorpusOptionsError(f"--input listing does not exist: {config.input}")
        return _listing_split_spec(config)
    return _folder_split_spec(config)


# --------------------------------------------------------------------------
# The output
# --------------------------------------------------------------------------
def check_output(config: CorpusConfig) -> None:
    """Refuse an --output that is a file, or that holds a dataset without --overwrite, before anything runs.

    Nothing is changed here: the output is only written under its lock, into a new version
    folder, and replaced at the commit (beam_pipeline/launcher/commit.py).
    """
    output = config.output
    if not paths.split_scheme(output)[0]:
        existing = output
        while existing and not os.path.exists(existing):
            existing = os.path.dirname(existing.rstrip("/"))
        if existing and not os.path.isdir(existing):
            where = "" if existing == output else f": {existing} is a file"
            raise CorpusOptionsError(f"--output {output} is not a folder{where or ' (it is a file)'}")
    elif FileSystems.exists(output):
        raise CorpusOptionsError(f"--output {output} is an object (a file), not a folder")
    if FileSystems.exists(paths.join(output, layout.DATASET_MANIFEST)) and not config.overwrite:
        raise CorpusOptionsError(f"{output} already holds a manifest.json; use --overwrite to replace it")


def uses_files_shuffle(options: PipelineOptions, config: CorpusConfig) -> bool:
    """Whether records cross the shuffles through files (--shuffle files, or auto on the DirectRunner)."""
    return config.shuffle == "files" or (config.shuffle == "auto" and runners.is_direct(options))


def input_count(options: PipelineOptions, config: CorpusConfig) -> runners.InputCount:
    """The input's count for this run's questions of its size: made as far as the files shuffle's buckets need
    when the run uses them (core/runners.SHUFFLE_COUNT_LIMIT), else as far as the first question asks."""
    return runners.InputCount(config, at_least=SHUFFLE_COUNT_LIMIT if uses_files_shuffle(options, config) else 0)


def shuffle_spec(options: PipelineOptions, config: CorpusConfig, data_dir: str,
                 counted: runners.InputCount) -> Tuple[ShuffleSpec, Optional[str]]:
    """How records cross the shuffles (--shuffle; through files, in as many buckets as the input's count asks),
    and a folder this run made for them that the launcher removes after the run (None when there is none to
    remove: the version folder's own .tmp/ is removed with it)."""
    if not uses_files_shuffle(options, config):
        return ShuffleSpec(), None
    buckets = counted.shuffle_buckets()
    if not paths.split_scheme(data_dir)[0]:
        return ShuffleSpec(folder=paths.join(layout.temp_dir(data_dir), "shuffle"), buckets=buckets), None
    temp = options.view_as(GoogleCloudOptions).temp_location
    if not runners.is_direct(options) and temp:
        return ShuffleSpec(folder=paths.join(temp, "shuffle", posixpath.basename(data_dir)), buckets=buckets), None
    import tempfile
    made = tempfile.mkdtemp(prefix="beam_pipeline_shuffle_")
    return ShuffleSpec(folder=made, buckets=buckets), made


def store_of(config: CorpusConfig, options):
    """The output's store (io/stores), or CorpusOptionsError."""
    try:
        return stores.store_for(config.output, options)
    except ValueError as error:
        raise CorpusOptionsError(str(error)) from None


def temp_dir(options: PipelineOptions, data_dir: str) -> str:
    """Where tf.Transform keeps temporary files: --temp_location, else the run's version folder's .tmp/."""
    temp = options.view_as(GoogleCloudOptions).temp_location
    return paths.join(temp, "tft") if temp else layout.temp_dir(data_dir)


def package_versions() -> dict:
    """The Python and package versions manifest.json records (its ``versions``; docs/dependencies.md)."""
    versions = {"python": platform.python_version()}
    for name in VERSIONED_PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions
