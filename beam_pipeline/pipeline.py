"""build_pipeline: the wiring, one labelled step per concern, and run()."""

import dataclasses
import importlib.metadata
import json
import logging
import os
import platform
import posixpath
import time
from typing import List, Optional, Tuple

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import (DirectOptions, FlinkRunnerOptions, GoogleCloudOptions,
                                                  PipelineOptions, PortableOptions, SparkRunnerOptions,
                                                  StandardOptions)

from beam_pipeline import io_utils, manifest_input
from beam_pipeline.metrics import SHUFFLE, counter_total, shuffled
from beam_pipeline.balance_split import BalanceTrainSplit
from beam_pipeline.core import paths, runners
from beam_pipeline.core.records import pack, unpack
from beam_pipeline.core.selection import SplitSpec, parse_split
from beam_pipeline.options import CorpusConfig, CorpusOptions, CorpusOptionsError, to_config
from beam_pipeline.publish import MANIFEST_NAME, PublishOutputs
from beam_pipeline.read import CLASS_FOLDER_GLOB, ReadCorpus, relative_matches
from beam_pipeline.select import SelectSubset
from beam_pipeline.validate import DeduplicatePairs, ValidatePairs
from beam_pipeline.write import BalanceGrowthError, WriteShards, staging_dir

DEFAULT_HASH_SPLIT = "train=0.8,val=0.1,test=0.1"
VERSIONED_PACKAGES = ("apache-beam", "pillow", "numpy", "pyarrow", "protobuf", "tensorflow-transform",
                      "tensorflow", "tfx-bsl")

_LOG = logging.getLogger(__name__)


def build_pipeline(p: beam.Pipeline, config: CorpusConfig, split_spec: SplitSpec, options: dict,
                   versions: dict, temp_dir: str):
    """Add every step to ``p``; returns the PCollection holding the manifest path."""
    refs, unpaired = p | "ReadCorpus" >> ReadCorpus(config)
    # PairRef | rejected Outcome (bad rows, orphans, paths outside the root)
    discovered = ((refs | "CountPairs" >> beam.combiners.Count.Globally(),
                   unpaired | "CountUnpaired" >> beam.combiners.Count.Globally())
                  | "MergeDiscoveryCounts" >> beam.Flatten()
                  | "CountDiscovered" >> beam.CombineGlobally(sum))
    # int: every discovered input
    selected, dropped = refs | "SelectSubset" >> SelectSubset(config, split_spec)
    # PairRef with split | filtered Outcome
    spread = (selected
              | "PackRefs" >> beam.Map(_pack_without_metadata)
              | "SpreadOverWorkers" >> beam.Reshuffle()
              | "UnpackRefs" >> beam.Map(unpack))
    # PairRef, redistributed so that validation runs on every worker
    valid, invalid = spread | "ValidatePairs" >> ValidatePairs(config)
    # ValidPair | rejected Outcome
    unique, duplicates = valid | "DeduplicatePairs" >> DeduplicatePairs()
    # ValidPair (one per content) | duplicate Outcome
    if config.compute_stats:
        from beam_pipeline.stats import ComputeStats  # TensorFlow is imported only when it is needed.
        stats, transform_written = unique | "ComputeStats" >> ComputeStats(config, temp_dir)
        # stats dict (train split, from tf.Transform) | paths of the written transform output
    else:
        stats = p | "NoStats" >> beam.Create([{}])
        transform_written = p | "NoTransformOutput" >> beam.Create([])
    balanced, growth = unique | "BalanceTrainSplit" >> BalanceTrainSplit(config, stats)
    # ValidPair (train: repeat copies or strata) | float growth of the train split
    shards, changed, class_index = balanced | "WriteShards" >> WriteShards(config, growth)
    # ShardInfo | rejected Outcome (changed since validation) | class-index JSON line
    outcomes = ((unpaired, dropped, invalid, duplicates, changed)
                | "MergeOutcomes" >> beam.Flatten())
    # Outcome: everything discovered and not written
    real_stats = stats | "DropEmptyStats" >> beam.Filter(bool)
    return ((shards, outcomes, discovered, real_stats, class_index, transform_written)
            | "PublishOutputs" >> PublishOutputs(config, options, versions))


def _pack_without_metadata(ref) -> bytes:
    return shuffled(pack(ref.without_metadata()))


def package_versions() -> dict:
    versions = {"python": platform.python_version()}
    for name in VERSIONED_PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


def _manifest_split_spec(config: CorpusConfig) -> Tuple[CorpusConfig, SplitSpec]:
    """Check the manifest's columns against the task, --filter and --split."""
    try:
        columns = manifest_input.read_columns(config.input)
    except (OSError, ValueError) as error:
        raise CorpusOptionsError(f"cannot read manifest {config.input}: {error}") from None
    second = "mask" if config.task == "segmentation" else "label"
    for required in ("image", second):
        if required not in columns:
            raise CorpusOptionsError(
                f"manifest {config.input} has no {required!r} column (columns: {', '.join(columns)})")
    _check_filter_columns(config, columns)
    if config.split is not None:
        if config.split.mode == "column" and config.split.column_name not in columns:
            raise CorpusOptionsError(f"--split: the manifest has no column {config.split.column_name!r}")
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


def _folder_split_spec(config: CorpusConfig) -> Tuple[CorpusConfig, SplitSpec]:
    root = config.input_root
    if not FileSystems.exists(root):
        raise CorpusOptionsError(f"--input folder does not exist: {root}")
    _check_filter_columns(config, ["folder"])
    spec = config.split or parse_split(DEFAULT_HASH_SPLIT)
    if spec.mode == "column":
        raise CorpusOptionsError("--split column needs a manifest input; use folder or fractions")
    if config.input_format == "class_folders":
        if spec.mode == "folder":
            raise CorpusOptionsError("--split folder is not available for class folders (the folder is the class)")
        if not config.class_names:
            names = sorted({posixpath.dirname(relative)
                            for relative in relative_matches(root, CLASS_FOLDER_GLOB)} - {""})
            if len(names) != config.num_classes:
                raise CorpusOptionsError(
                    f"found {len(names)} class folders in {root} but --num_classes is {config.num_classes}; "
                    "give --class_names to choose the classes")
            config = dataclasses.replace(config, class_names=tuple(names))
    return config, spec


def resolve_inputs(config: CorpusConfig) -> Tuple[CorpusConfig, SplitSpec]:
    """Look at the input once, before the job starts, so mistakes give one clear error."""
    if config.input_format == "manifest":
        if not FileSystems.exists(config.input):
            raise CorpusOptionsError(f"--input manifest does not exist: {config.input}")
        return _manifest_split_spec(config)
    return _folder_split_spec(config)


def prepare_output(config: CorpusConfig) -> None:
    """Refuse to mix runs in one --output unless --overwrite; clear what an earlier run left."""
    output = config.output
    manifest = paths.join(output, MANIFEST_NAME)
    if FileSystems.exists(manifest):
        if not config.overwrite:
            raise CorpusOptionsError(f"{output} already holds a manifest.json; use --overwrite to replace it")
        stale = [path for path, _ in io_utils.match_files(paths.join(output, "*.tfrecord"))]
        stale += [path for path, _ in io_utils.match_files(paths.join(output, "rejects/*"))]
        FileSystems.delete(stale + [manifest])
    if FileSystems.exists(staging_dir(output)):
        FileSystems.delete([staging_dir(output)])


def _direct_runner_defaults(argv: List[str], options: PipelineOptions) -> None:
    """On the DirectRunner use every core: one SDK worker process per core.

    Measured on 2 cores (bench/pipeline_throughput.py): worker processes cost
    about 2 s more to start than threads, but each extra pair costs 2.1 ms
    instead of 3.8 ms, because the Python parts of validation and writing no
    longer share one GIL. Large corpora are what this pipeline is for.
    """
    if not _is_direct(options):
        return
    direct = options.view_as(DirectOptions)
    if not any(arg.startswith("--direct_num_workers") for arg in argv):
        direct.direct_num_workers = os.cpu_count() or 1
    if not any(arg.startswith("--direct_running_mode") for arg in argv):
        direct.direct_running_mode = "multi_processing"


def _is_direct(options: PipelineOptions) -> bool:
    return options.view_as(StandardOptions).runner in (None, "DirectRunner", "direct")


def _absolute_local_paths(config: CorpusConfig, options: PipelineOptions) -> CorpusConfig:
    """On another runner, relative local --input/--output become absolute.

    The workers of another runner need not share the launcher's working directory (a Flink
    TaskManager's SDK workers run where their worker pool was started), and a relative path there
    would name other files. URLs (gs://, s3://) and absolute paths are left as they are.
    """
    if _is_direct(options):
        return config

    def absolute(path: str) -> str:
        return path if paths.is_absolute(path) else os.path.abspath(path)
    return dataclasses.replace(config, input=absolute(config.input), output=absolute(config.output))


def _runner(options: PipelineOptions):
    """The DirectRunner's batch engine, used directly for the default runner.

    Beam's DirectRunner first tries to download and start the Prism runner, which
    fails without internet access; FnApiRunner is what it then falls back to.
    """
    if _is_direct(options):
        from apache_beam.runners.portability.fn_api_runner import FnApiRunner
        return FnApiRunner()
    return None


def _temp_dir(options: PipelineOptions, config: CorpusConfig) -> str:
    """Where tf.Transform keeps temporary files: --temp_location, else <output>/.tmp."""
    temp = options.view_as(GoogleCloudOptions).temp_location
    return paths.join(temp, "tft") if temp else paths.join(config.output, ".tmp")


def check_worker_paths(options: PipelineOptions, config: CorpusConfig) -> None:
    """Refuse local paths when the workers run elsewhere: they would fail late, or write nowhere."""
    standard = options.view_as(StandardOptions)
    portable = options.view_as(PortableOptions)
    cloud = options.view_as(GoogleCloudOptions)
    where = runners.placement(
        standard.runner, flink_master=options.view_as(FlinkRunnerOptions).flink_master,
        spark_master_url=options.view_as(SparkRunnerOptions).spark_master_url,
        job_endpoint=portable.job_endpoint, environment_type=portable.environment_type)
    if where.remote and not cloud.temp_location:
        raise CorpusOptionsError(
            f"--temp_location is required with {standard.runner}: {where.reason}, so Beam and tf.Transform "
            "need a temporary folder they can all reach, e.g. gs://BUCKET/tmp")
    if config.allow_local_paths:
        return
    named = {"input": config.input, "output": config.output, "temp_location": cloud.temp_location,
             "staging_location": cloud.staging_location}
    unreachable = runners.unreachable_local_paths(where, named)
    if unreachable:
        raise CorpusOptionsError(
            f"{standard.runner}: {where.reason}, so they cannot reach the local path(s) "
            f"{', '.join(unreachable)}; use gs:// or s3:// paths, or --allow_local_paths when every "
            "worker mounts this filesystem at the same place")


def _own_error(error: BaseException) -> Optional[str]:
    """The message of a BalanceGrowthError inside a runner's wrapped exception, if there is one."""
    marker = BalanceGrowthError.__name__ + ": "
    text = str(error)
    if marker not in text:
        return None
    return text.split(marker, 1)[1].split("\n", 1)[0].split(" [while running", 1)[0]


def run(argv: Optional[List[str]] = None) -> dict:
    """Run the whole job; returns the manifest plus ``elapsed_seconds``. Raises CorpusOptionsError.

    With --plan nothing runs: the result is ``{"plan": estimates}`` (see beam_pipeline/plan.py).
    """
    argv = list(argv or [])
    options = PipelineOptions(argv)
    config = to_config(options)
    check_worker_paths(options, config)
    config = _absolute_local_paths(config, options)
    config, split_spec = resolve_inputs(config)
    corpus_options = options.view_as(CorpusOptions)
    if corpus_options.plan:
        if corpus_options.plan_sample < 1:
            raise CorpusOptionsError(f"--plan_sample must be at least 1, got {corpus_options.plan_sample}")
        from beam_pipeline.plan import make_plan
        return {"plan": make_plan(config, split_spec, corpus_options.plan_sample)}
    prepare_output(config)
    _direct_runner_defaults(argv, options)
    run_options = dict(config.as_dict(), runner=options.view_as(StandardOptions).runner or "DirectRunner")
    started = time.monotonic()
    _LOG.info("Reading %s (%s, %s)", config.input, config.input_format, config.task)
    temp_dir = _temp_dir(options, config)
    try:
        p = beam.Pipeline(runner=_runner(options), options=options)
        build_pipeline(p, config, split_spec, run_options, package_versions(), temp_dir)
        result = p.run()
        result.wait_until_finish()
    except Exception as error:  # The runner wraps errors raised in DoFns; surface our own as one line.
        own = _own_error(error)
        if own is None:
            raise
        raise CorpusOptionsError(own) from None
    with FileSystems.open(paths.join(config.output, MANIFEST_NAME)) as handle:
        manifest = json.loads(handle.read())
    manifest["elapsed_seconds"] = time.monotonic() - started
    manifest["shuffle_value_bytes"] = counter_total(result, *SHUFFLE)
    return manifest
