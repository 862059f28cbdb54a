"""Whether a runner's workers can see this machine's files.

A local path given to a job whose workers run elsewhere (Dataflow, a Flink or
Spark cluster on another host, SDK workers in Docker containers) fails late
and obscurely: a worker finds no input, or writes its output into its own
container, which then disappears. :func:`unreachable_local_paths` finds such
paths before the job is submitted, so the run stops with one clear line.
:func:`artifact_staging_problem` does the same for the files a Flink job
stages for its workers (its options and packages).
"""

import dataclasses
import json
from typing import Dict, List, Optional

from beam_pipeline.core.paths import split_scheme

# The Flink runner's own names for a cluster it starts inside the job server.
LOCAL_FLINK_MASTERS = frozenset({"[local]", "[auto]"})
LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "0.0.0.0"})
# What TensorFlow 2.21's own file layer (tf.io.gfile, which tf.Transform writes through) can write:
# local paths and gs://. It has no s3:// (tensorflow-io 0.37.1, the only build on the registry, does
# not load with TF 2.21), nor Beam's azfs://.
TENSORFLOW_SCHEMES = frozenset({"", "gs://"})
# Runners whose SDK workers run in this process or in processes on this machine.
IN_PROCESS_RUNNERS = frozenset({"directrunner", "direct", "fnapirunner", "bundlebasedirectrunner",
                                "swallowingdirectrunner", "interactiverunner", "prismrunner"})


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where the SDK workers of a run are: ``remote`` means they cannot read local files."""
    remote: bool
    reason: str


def _host(address: Optional[str]) -> str:
    """The host part of ``host:port``, ``[ipv6]:port`` or ``http://host:port/...``."""
    text = split_scheme(address or "")[1].split("/", 1)[0]
    if text.startswith("["):
        return text[1:].split("]", 1)[0]
    return text.rsplit(":", 1)[0] if text.count(":") == 1 else text


def external_pool_address(environment_config: Optional[str],
                          external_service_address: Optional[str] = None) -> Optional[str]:
    """The worker pool an EXTERNAL environment names, as Beam reads it (environments.ExternalEnvironment):
    ``--environment_config`` as ``host:port`` or as JSON ``{"url": ...}``, else
    ``--environment_options external_service_address=host:port``."""
    text = (environment_config or "").strip()
    if text.startswith("{"):
        try:
            url = json.loads(text).get("url")
        except (ValueError, AttributeError):
            return None
        return url if isinstance(url, str) else None
    return text or external_service_address or None


def placement(runner: Optional[str], *, flink_master: Optional[str] = None,
              spark_master_url: Optional[str] = None, job_endpoint: Optional[str] = None,
              environment_type: Optional[str] = None, environment_config: Optional[str] = None,
              external_service_address: Optional[str] = None) -> Placement:
    """Where the workers of ``runner`` run, from the pipeline options that decide it.

    For EXTERNAL, the worker pool's address (:func:`external_pool_address`) is as each TaskManager or
    job server sees it: ``localhost:50000`` is a pool beside each of them, ``otherhost:50000`` is another
    machine, whose workers cannot see this machine's files.
    """
    name = (runner or "DirectRunner").rsplit(".", 1)[-1].lower()
    environment = (environment_type or "").upper()
    if name in IN_PROCESS_RUNNERS:
        return Placement(False, "the workers run on this machine")
    if name in ("dataflowrunner", "dataflow", "testdataflowrunner"):
        return Placement(True, "Dataflow workers run in Google Cloud")
    if name in ("flinkrunner", "flink"):
        master = flink_master or "[auto]"
        if master not in LOCAL_FLINK_MASTERS and _host(master) not in LOCAL_HOSTS:
            return Placement(True, f"the Flink master {master} is another machine")
        embedded = master in LOCAL_FLINK_MASTERS
        environment = environment or ("LOOPBACK" if embedded else "DOCKER")
    elif name in ("sparkrunner", "spark"):
        master = spark_master_url or "local[4]"
        if not master.startswith("local") and _host(master) not in LOCAL_HOSTS:
            return Placement(True, f"the Spark master {master} is another machine")
        environment = environment or ("LOOPBACK" if master.startswith("local") else "DOCKER")
    elif name in ("portablerunner", "portable"):
        if job_endpoint and _host(job_endpoint) not in LOCAL_HOSTS and job_endpoint != "embed":
            return Placement(True, f"the job endpoint {job_endpoint} is another machine")
        environment = environment or "DOCKER"
    else:
        return Placement(False, f"{runner} is not known to run elsewhere")
    if environment == "DOCKER":
        return Placement(True, "the SDK workers run in Docker containers (--environment_type DOCKER, "
                               "the default for this runner), which do not see this machine's files")
    pool = external_pool_address(environment_config, external_service_address)
    if environment == "EXTERNAL" and pool and _host(pool) not in LOCAL_HOSTS:
        return Placement(True, f"the SDK workers run in the EXTERNAL worker pool at {pool}, another machine")
    return Placement(False, f"the SDK workers run on this machine ({environment})")


# What the job server jar of tools/flink (and its runner-lib jar for a cluster's lib/) can read
# --artifacts_dir from besides a local path: their META-INF/services FileSystemRegistrar lists Beam's
# ClassLoader, Local and GCS filesystems, and no S3 or HDFS one.
ARTIFACT_SCHEMES = ("gs://",)


def _is_flink(runner: Optional[str]) -> bool:
    return (runner or "").rsplit(".", 1)[-1].lower() in ("flinkrunner", "flink")


def artifact_staging_problem(runner: Optional[str], *, flink_master: Optional[str] = None,
                             submit_uber_jar: bool = False, artifacts_dir: Optional[str] = None,
                             allow_local_paths: bool = False) -> Optional[str]:
    """Why the TaskManagers could not fetch this run's staged artifacts, or None.

    FlinkRunner starts a job server on this machine, which stages the job's artifacts (its pipeline
    options, the --setup_file package) in --artifacts_dir, by default a temporary folder here. Each
    TaskManager serves them to its SDK workers (Docker containers, EXTERNAL pools) from its own artifact
    retrieval service, which reads that folder: a TaskManager on another machine finds nothing
    (apache/beam#24367, #32743), whatever the environment type. So this depends on where the Flink
    master (and its TaskManagers) is, not on the environment. --flink_submit_uber_jar packs the
    artifacts into the jar submitted to the cluster instead.
    """
    if not _is_flink(runner) or submit_uber_jar:
        return None
    master = flink_master or "[auto]"
    if master in LOCAL_FLINK_MASTERS or _host(master) in LOCAL_HOSTS:
        return None
    if not artifacts_dir:
        return (f"the Flink master {master} is another machine, whose TaskManagers cannot read the job "
                "server's local temporary folder: give --artifacts_dir gs://BUCKET/beam-artifacts (or "
                "--flink_submit_uber_jar)")
    scheme = split_scheme(artifacts_dir)[0]
    if not scheme or scheme == "file://":
        if allow_local_paths:
            return None
        return (f"--artifacts_dir {artifacts_dir} is a local path, which the TaskManagers of {master} cannot "
                "read: use gs://BUCKET/beam-artifacts, or --allow_local_paths when every TaskManager mounts "
                "it at the same place")
    if scheme not in ARTIFACT_SCHEMES:
        return (f"--artifacts_dir {artifacts_dir}: the job server jar of tools/flink reads only "
                f"{', '.join(ARTIFACT_SCHEMES)} besides local paths (it carries no {scheme} filesystem); "
                "use gs://, or --flink_submit_uber_jar")
    return None


def unreachable_local_paths(where: Placement, named_paths: Dict[str, Optional[str]]) -> List[str]:
    """The ``--option=path`` entries that are local paths although the workers are remote."""
    if not where.remote:
        return []
    return [f"--{option}={path}" for option, path in named_paths.items()
            if path and not split_scheme(path)[0]]


def tensorflow_can_write(path: Optional[str]) -> bool:
    """Whether TensorFlow's file layer can write ``path`` (None: nothing to write)."""
    return path is None or split_scheme(path)[0] in TENSORFLOW_SCHEMES


def transform_output_problem(where: Placement, output: str, temp_location: Optional[str],
                             compute_stats: bool, allow_local_paths: bool) -> Optional[str]:
    """Why tf.Transform cannot write this run's outputs, or None.

    Where TensorFlow cannot write the output or temp location (s3://), tf.Transform writes on this
    machine's disk and the pipeline copies its output; every worker must then see that disk:
    workers on this machine, or a local --temp_location that --allow_local_paths says all mount.
    """
    if not compute_stats or (tensorflow_can_write(output) and tensorflow_can_write(temp_location)):
        return None
    if not where.remote or (allow_local_paths and temp_location and not split_scheme(temp_location)[0]):
        return None
    option, store = ("output", output) if not tensorflow_can_write(output) else ("temp_location", temp_location)
    return (f"--{option} {store} with statistics needs a filesystem TensorFlow can write (TensorFlow 2.21 has no "
            f"{split_scheme(store)[0]}; tensorflow-io 0.37.1 does not load with it), so tf.Transform writes on "
            f"this machine's disk and the pipeline copies its output, but {where.reason}; run on the "
            "DirectRunner or a Flink cluster on this machine, give --temp_location on a mount every worker "
            "shares with --allow_local_paths, write to gs://, or give --no_stats")


# --------------------------------------------------------------------------
# The files shuffle's buckets
# --------------------------------------------------------------------------
# The files shuffle (stages/shuffle.py) writes a file per bucket for each bundle, and a worker groups one bucket in
# memory. Each file costs the filesystem far more than its bytes: creating one took 0.3-0.7 ms of kernel time in a
# run's SDK workers, against 0.04 ms on a quiet disk (docs/benchmarks.md, "Fewer files for the files shuffle"). A
# corpus the launcher counted gets a bucket per SHUFFLE_BUCKET_PAIRS pairs (at least MIN_SHUFFLE_BUCKETS, for the
# workers to share); one counted above SHUFFLE_COUNT_LIMIT, or not counted, gets MAX_SHUFFLE_BUCKETS, which keeps a
# bucket small at any size. The buckets only say which worker groups which keys: the groups, and every output
# byte, are the same for any number of them.
SHUFFLE_BUCKET_PAIRS = 2000
MIN_SHUFFLE_BUCKETS = 4
MAX_SHUFFLE_BUCKETS = 256
SHUFFLE_COUNT_LIMIT = 50_000


def shuffle_buckets(expected_pairs: Optional[int], limit: int = SHUFFLE_COUNT_LIMIT) -> int:
    """The files shuffle's buckets for a corpus of about ``expected_pairs`` pairs (None: not counted), counted no
    further than ``limit``."""
    if expected_pairs is None or expected_pairs > limit:
        return MAX_SHUFFLE_BUCKETS
    wanted = -(-expected_pairs // SHUFFLE_BUCKET_PAIRS)
    return min(MAX_SHUFFLE_BUCKETS, max(MIN_SHUFFLE_BUCKETS, wanted))


# --------------------------------------------------------------------------
# The DirectRunner's engine
# --------------------------------------------------------------------------
# A corpus of at most this many pairs runs in the launcher's own process (Beam's in_memory engine); a larger
# one gets an SDK worker process per core. Worker processes cost seconds to start (each imports Beam's worker,
# TensorFlow and tf.Transform) and save milliseconds per pair (validation's Python no longer shares one
# GIL): the break-even measured on real photographs is in docs/benchmarks.md, "Where a run's engine runs".
SMALL_CORPUS_PAIRS = 1000


@dataclasses.dataclass(frozen=True)
class Engine:
    """The DirectRunner engine a run gets when its command line names none."""
    running_mode: str                 # Beam's --direct_running_mode
    num_workers: int                  # Beam's --direct_num_workers
    reason: str                       # why, for the launcher's log line


def direct_engine(expected_pairs: Optional[int], cores: int, given_workers: Optional[int] = None,
                  small: int = SMALL_CORPUS_PAIRS, unit: str = "pairs") -> Engine:
    """The engine for a corpus of about ``expected_pairs`` (None: unknown, or too costly to count).

    ``given_workers`` is the command line's --direct_num_workers: asking for workers asks for processes.
    ``unit`` names the inputs in the reason (``images`` for classification).
    """
    if given_workers is None and expected_pairs is not None and expected_pairs <= small:
        return Engine("in_memory", 1,
                      f"about {expected_pairs:,} {unit} (at most {small:,}), so the job runs in this process; "
                      f"above {small:,} it starts a worker process per core (--direct_running_mode multi_processing)")
    workers = given_workers or cores
    size = "a corpus of unknown size" if expected_pairs is None else f"more than {small:,} {unit}"
    return Engine("multi_processing", workers, f"{size}, so the job runs in {workers} worker process(es)")
