"""The runner of a run: its defaults and choice, the DirectRunner's engine built as this pipeline needs it,
and the checks that the runner's workers can reach the run's paths.

Every mistake found here stops the run with one clear line (CorpusOptionsError) before anything is
submitted; core/runners.py says, without Beam, where a runner's workers run.
"""

import dataclasses
import logging
import os
from typing import List, Optional

from apache_beam.io.filesystem import BeamIOError
from apache_beam.options.pipeline_options import (DirectOptions, FlinkRunnerOptions, GoogleCloudOptions,
                                                  JobServerOptions, PipelineOptions, PortableOptions,
                                                  SparkRunnerOptions, StandardOptions, WorkerOptions)

from beam_pipeline import console
from beam_pipeline.core import paths, runners
from beam_pipeline.io import folders, listing
from beam_pipeline.launcher import warm_workers
from beam_pipeline.launcher.config import CorpusConfig
from beam_pipeline.launcher.options import CorpusOptions, CorpusOptionsError
from beam_pipeline.stages.leakage.components import ROUNDS
from beam_pipeline.stages.specs import CLASS_FOLDERS, LISTING, STATISTICS_ROWS_STEP

_LOG = logging.getLogger(__name__)
STATISTICS_STEP = "ComputeStats"            # the pipeline's tf.Transform step: run by the launcher on the DirectRunner
LAUNCHER_ENVIRONMENT = "beam_pipeline_launcher"


class InputCount:
    """The input's pairs, counted once for every question the launcher asks of its size (the engine, the files
    shuffle's buckets, the components' rounds; :func:`expected_pairs`): a count made up to one limit answers any
    question up to it. The first count goes at least as far as ``at_least`` (the files shuffle's buckets need
    core/runners.SHUFFLE_COUNT_LIMIT), so that the questions after it do not count again."""

    def __init__(self, config: CorpusConfig, at_least: int = 0):
        self._config = config
        self._at_least = at_least
        self._limit: Optional[int] = None
        self._count: Optional[int] = None

    def at_most(self, limit: int) -> Optional[int]:
        """About how many pairs the input holds, counted no further than ``limit + 1`` (or as far as an earlier
        count went: a number above ``limit`` says "more"); None when unknown."""
        if self._limit is None or (limit > self._limit and self._count is not None and self._count > self._limit):
            self._limit = max(limit, self._at_least)
            self._count = expected_pairs(self._config, self._limit)
        return self._count

    def shuffle_buckets(self) -> int:
        """The files shuffle's buckets for this input (core/runners.shuffle_buckets)."""
        return runners.shuffle_buckets(self.at_most(runners.SHUFFLE_COUNT_LIMIT))


def apply_runner_defaults(argv: List[str], options: PipelineOptions, config: CorpusConfig,
                          counted: Optional[InputCount] = None) -> None:
    """On the DirectRunner, run a small corpus in this process and a larger one in a worker process per core.

    Worker processes cost seconds to start but each pair costs less, because the Python parts of
    validation and writing no longer share one GIL; below runners.SMALL_CORPUS_PAIRS the start costs
    more than it saves (measured: docs/benchmarks.md, "Where a run's engine runs"). The corpus is
    counted no further than that (:func:`expected_pairs`). The command line's --direct_running_mode and
    --direct_num_workers win; the choice is logged in one line.
    """
    if not is_direct(options):
        return
    direct = options.view_as(DirectOptions)
    given_workers = direct.direct_num_workers if _given(argv, "direct_num_workers") else None
    if _given(argv, "direct_running_mode"):
        if given_workers is None:
            direct.direct_num_workers = 1 if direct.direct_running_mode == "in_memory" else os.cpu_count() or 1
        return
    counted = counted or InputCount(config)
    engine = runners.direct_engine(None if given_workers else counted.at_most(runners.SMALL_CORPUS_PAIRS),
                                   os.cpu_count() or 1, given_workers,
                                   unit="images" if config.task == "classification" else "pairs")
    direct.direct_running_mode, direct.direct_num_workers = engine.running_mode, engine.num_workers
    _LOG.info("DirectRunner: %s", engine.reason)


def _given(argv: List[str], name: str) -> bool:
    return any(arg == f"--{name}" or arg.startswith(f"--{name}=") for arg in argv)


def expected_pairs(config: CorpusConfig, limit: int) -> Optional[int]:
    """About how many pairs the input holds, counted no further than ``limit + 1``; None when unknown.

    A listing's rows, else the files below the input folder (two per pair for images with masks, one
    for class folders). Rows and files that will be rejected or filtered out count too: this only tells
    a small corpus from a large one. A COCO layout's count is unknown here (its images are named by its
    annotation file, which a launcher should not read twice).
    """
    if config.annotations is not None:   # COCO's pairs are the images of its annotation file: not counted here
        return None
    try:
        if config.input_format == LISTING:
            return listing.count_rows(config.input, limit)
        per_pair = 1 if config.input_format == CLASS_FOLDERS else 2
        return folders.count_files(config.input_root, per_pair * limit) // per_pair
    except (BeamIOError, OSError, ValueError) as error:
        _LOG.debug("could not count the input's pairs: %s", error)
        return None


def component_rounds(config: CorpusConfig, counted: Optional[InputCount] = None) -> int:
    """FindComponents' rounds for this input: 0 (its near-duplicate pairs joined by union-find in one worker) when it
    is counted at most --near_duplicates_one_worker_pairs pairs, else the Hash-to-Min rounds (stages/leakage/
    components.py). Outputs are the same either way; the count stops at the limit."""
    limit = config.near_duplicates_one_worker_pairs
    pairs = (counted or InputCount(config)).at_most(limit) if limit else None
    return 0 if pairs is not None and pairs <= limit else ROUNDS


def apply_worker_log_options(argv: List[str], options: PipelineOptions) -> None:
    """Set Beam's SDK harness log options from --log_level, unless the command line sets them itself.

    They travel with the job, so remote workers log (and send) only what --log_level shows;
    the DirectRunner's workers get them when the runner is given the pipeline options
    (console.worker_log_options says which).
    """
    worker = options.view_as(WorkerOptions)
    for name, value in console.worker_log_options(options.view_as(CorpusOptions).log_level).items():
        if not _given(argv, name):
            setattr(worker, name, value)


def is_direct(options: PipelineOptions) -> bool:
    return options.view_as(StandardOptions).runner in (None, "DirectRunner", "direct")


def runner_name(options: PipelineOptions) -> str:
    return options.view_as(StandardOptions).runner or "DirectRunner"


def runner(options: PipelineOptions):
    """The DirectRunner's batch engine, used directly for the default runner; None lets Beam choose.

    Beam's DirectRunner first tries to download and start the Prism runner, which
    fails without internet access; FnApiRunner is what it then falls back to. It is
    built as the DirectRunner builds it, with the pipeline options in its provision
    info: without them every SDK worker process starts with empty options, and
    options such as the S3 endpoint and credentials never reach the workers' filesystems.
    """
    if not is_direct(options):
        return None
    from apache_beam.portability.api import beam_provision_api_pb2
    from apache_beam.runners.portability.fn_api_runner import FnApiRunner, fn_runner
    from apache_beam.runners.portability.portable_runner import JobServiceHandle
    send_bundles_by_size()
    side_inputs_read_per_bundle()
    encoded = JobServiceHandle.encode_pipeline_options(options.get_all_options())

    class Runner(FnApiRunner):
        """FnApiRunner, whose SDK worker processes are the launcher's waiting ones while a WarmPool is open, and
        which runs the statistics' steps in the launcher's process."""

        def run_via_runner_api(self, pipeline_proto, options=None):
            if os.environ.get(warm_workers.POOL_ENV):
                warm_workers.with_client_command(pipeline_proto)
            moved = statistics_in_the_launcher(pipeline_proto)
            if moved:
                _LOG.debug("DirectRunner: %d transforms of %s run in the launcher's process", moved, STATISTICS_STEP)
            return super().run_via_runner_api(pipeline_proto, options)

    return Runner(provision_info=fn_runner.ExtendedProvisionInfo(
        beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded)))


def statistics_in_the_launcher(pipeline_proto) -> int:
    """The transforms of the statistics' step (``STATISTICS_STEP``) that would run in SDK worker processes get an
    environment of the launcher's own process instead (in place); returns how many.

    The launcher has imported tf.Transform and TensorFlow to build the pipeline; on worker processes, each worker
    imported them again for the statistics' bundles, 2.4 s of CPU and about 600 MB each, while three processes
    competed for two cores at the start of the run (docs/benchmarks.md, Fast start). Beam's engine runs the stages
    of an embedded environment in the process that runs the pipeline; it fuses only transforms of one environment
    together, and passes the elements between them as between any two stages. So the step's first part,
    ``STATISTICS_ROWS_STEP`` (the train pairs' rows, written to files), stays in the workers that make the pairs:
    only the files' paths pass to the launcher, not a row a pair. The other runners are not concerned: this is
    the DirectRunner's engine only.
    """
    from apache_beam.portability import python_urns
    components = pipeline_proto.components
    stays = f"{STATISTICS_STEP}/{STATISTICS_ROWS_STEP}/"
    moved = [transform for transform in components.transforms.values()
             if transform.unique_name.startswith(STATISTICS_STEP + "/") and not transform.unique_name.startswith(stays)
             and transform.environment_id
             and components.environments[transform.environment_id].urn == python_urns.SUBPROCESS_SDK]
    if moved:
        launcher = components.environments[LAUNCHER_ENVIRONMENT]
        launcher.urn = python_urns.EMBEDDED_PYTHON
        worker = components.environments[moved[0].environment_id]
        launcher.capabilities[:] = worker.capabilities
        launcher.dependencies.extend(worker.dependencies)
        for transform in moved:
            transform.environment_id = LAUNCHER_ENVIRONMENT
    return len(moved)


def validation_threads(options: PipelineOptions) -> int:
    """Threads that read and check pairs side by side (stages/validate.py): one per core where the DirectRunner
    runs the whole job in this process with one worker (``in_memory``, a small corpus), which alone would leave
    the other cores idle while it decodes; 1 wherever the engine's own workers (processes, threads, another
    runner's) already use the cores. Decoding and hashing release the GIL (docs/benchmarks.md, "Validation on
    every core of an in-process run")."""
    if not is_direct(options):
        return 1
    direct = options.view_as(DirectOptions)
    if direct.direct_running_mode != "in_memory" or (direct.direct_num_workers or 1) > 1:
        return 1
    return os.cpu_count() or 1


def warm_pool(options: PipelineOptions):
    """The DirectRunner's SDK worker processes, started now to import while the pipeline is built
    (launcher/warm_workers.py); None where the run starts no worker process here."""
    if not is_direct(options):
        return None
    direct = options.view_as(DirectOptions)
    if direct.direct_running_mode != "multi_processing":
        return None
    try:
        return warm_workers.WarmPool(direct.direct_num_workers or os.cpu_count() or 1)
    except OSError as error:                 # no socket or process for it: the engine starts its workers, as Beam does
        _LOG.debug("DirectRunner: no worker process started before the pipeline is built: %s", error)
        return None


def send_bundles_by_size() -> None:
    """Make the DirectRunner's engine flush the data it sends a worker from the writing thread only.

    FnApiRunner builds its data servicer with ``worker_handlers.DATA_BUFFER_TIME_LIMIT_MS`` (1000 in
    Beam 2.70), so every stream it writes a bundle's input into is a
    ``TimeBasedBufferingClosableOutputStream`` whose thread flushes it every second. That flush hands
    the buffer on and then empties it under a lock that ``write()`` never takes: a chunk the runner
    writes meanwhile is thrown away, and the worker finishes the bundle without it and without an error
    (apache_beam/runners/worker/data_plane.py). It struck when writing one bundle's input took over a
    second: 3M filtered-out listing rows lost 32,364 to 978,684 of their counts in 15 of 21 runs
    (docs/scale.md). With 0 the streams are flushed by size, in the writing thread; the embedded
    (multi_threading) workers read the same constant.
    """
    from apache_beam.runners.portability.fn_api_runner import worker_handlers
    if not hasattr(worker_handlers, "DATA_BUFFER_TIME_LIMIT_MS"):   # a Beam without it: nothing to mend here
        _LOG.warning("Beam's FnApiRunner has no DATA_BUFFER_TIME_LIMIT_MS any more: check send_bundles_by_size")
        return
    worker_handlers.DATA_BUFFER_TIME_LIMIT_MS = 0


def side_inputs_read_per_bundle() -> None:
    """Make the DirectRunner's in-process workers read a side input from the runner's state in each bundle that
    uses it, instead of keeping it in their state cache.

    FnApiRunner gives the workers it runs in this process (the in-process engine, its threads, and the
    statistics' steps of a run on worker processes) a state cache of ``worker_handlers.STATE_CACHE_SIZE_MB`` (100
    in Beam 2.70). The cache weighs each value it keeps with objsize, which first walks the globals of every loaded
    module (thousands once TensorFlow is imported) for each side input a bundle loads: a measurable part of a small
    run (docs/benchmarks.md, Fast start). This pipeline's side inputs are small (counts, the statistics,
    files' paths: the runner holds no record, docs/scale.md), so reading one again costs less than weighing it;
    a bundle still reads each of its side inputs once. SDK worker processes keep Beam's default.
    """
    from apache_beam.runners.portability.fn_api_runner import worker_handlers
    if not hasattr(worker_handlers, "STATE_CACHE_SIZE_MB"):         # a Beam without it: its own default stands
        _LOG.debug("Beam's FnApiRunner has no STATE_CACHE_SIZE_MB: its in-process state cache is left as it is")
        return
    worker_handlers.STATE_CACHE_SIZE_MB = 0


def absolute_local_paths(config: CorpusConfig, options: PipelineOptions) -> CorpusConfig:
    """On another runner, relative local --input/--output become absolute.

    The workers of another runner need not share the launcher's working directory (a Flink
    TaskManager's SDK workers run where their worker pool was started), and a relative path there
    would name other files. URLs (gs://, s3://) and absolute paths are left as they are.
    """
    if is_direct(options):
        return config

    def absolute(path: str) -> str:
        return path if paths.is_absolute(path) else os.path.abspath(path)
    return dataclasses.replace(config, input=absolute(config.input), output=absolute(config.output))


def check_worker_paths(options: PipelineOptions, config: CorpusConfig) -> None:
    """Refuse local paths when the workers run elsewhere: they would fail late, or write nowhere.

    Also refuse a remote Flink cluster whose TaskManagers could not fetch the job's staged artifacts.
    """
    standard = options.view_as(StandardOptions)
    portable = options.view_as(PortableOptions)
    cloud = options.view_as(GoogleCloudOptions)
    flink = options.view_as(FlinkRunnerOptions)
    where = runners.placement(
        standard.runner, flink_master=flink.flink_master,
        spark_master_url=options.view_as(SparkRunnerOptions).spark_master_url,
        job_endpoint=portable.job_endpoint, environment_type=portable.environment_type,
        environment_config=portable.environment_config,
        external_service_address=portable.lookup_environment_option("external_service_address"))
    if where.remote and not cloud.temp_location:
        raise CorpusOptionsError(
            f"--temp_location is required with {standard.runner}: {where.reason}, so Beam and tf.Transform "
            "need a temporary folder they can all reach, e.g. gs://BUCKET/tmp")
    problem = runners.transform_output_problem(where, config.output, cloud.temp_location, config.compute_stats,
                                               config.allow_local_paths)
    if problem:
        raise CorpusOptionsError(problem)
    named = {"input": config.input, "output": config.output, "temp_location": cloud.temp_location,
             "staging_location": cloud.staging_location}
    unreachable = [] if config.allow_local_paths else runners.unreachable_local_paths(where, named)
    if unreachable:
        raise CorpusOptionsError(
            f"{standard.runner}: {where.reason}, so they cannot reach the local path(s) "
            f"{', '.join(unreachable)}; use gs:// or s3:// paths, or --allow_local_paths when every "
            "worker mounts this filesystem at the same place")
    problem = runners.artifact_staging_problem(
        standard.runner, flink_master=flink.flink_master, submit_uber_jar=flink.flink_submit_uber_jar,
        artifacts_dir=options.view_as(JobServerOptions).artifacts_dir,
        allow_local_paths=config.allow_local_paths)
    if problem:
        raise CorpusOptionsError(f"{standard.runner}: {problem}")
