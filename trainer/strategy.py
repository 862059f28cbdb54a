"""Choosing the tf.distribute strategy: one factory, clear errors, and a logged reason.

The cluster comes from ``TF_CONFIG``, as Vertex AI, a Kubernetes operator or a person sets it. Vertex AI
names worker pool 0 (one replica) ``chief``, pool 1 ``worker``, pool 2 ``ps`` and pool 3 ``evaluator``;
a cluster written by hand often has workers only. Chief and workers all train under
MultiWorkerMirroredStrategy; the chief (worker 0 when there is no chief) owns ``--job_dir``.
"""

import dataclasses
import glob
import json
import logging
import os
import posixpath
import socket
from typing import Callable, Mapping, Optional, Tuple

import tensorflow as tf

_LOG = logging.getLogger(__name__)
STRATEGIES = ("auto", "default", "mirrored", "multi_worker", "tpu")
TRAINING_JOBS = ("chief", "worker")     # The TF_CONFIG jobs whose tasks train (all-reduce) together.
# Where a TPU VM's chips show: PCI devices of Google's vendor id with a TPU device id (the table of
# jax/_src/hardware_utils.py: v2/v3, an unnamed one, v4, v5p, v5e, v6e), and /dev/accel* on v2-v4.
GOOGLE_PCI_VENDOR = "0x1ae0"
TPU_PCI_DEVICES = frozenset({"0x0027", "0x0056", "0x005e", "0x0062", "0x0063", "0x006f"})
TPU_NAME_VARIABLES = ("TPU_NAME", "KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS")   # What TPUClusterResolver reads.


class StrategyError(ValueError):
    """The requested strategy cannot run here; the message says why, in one line."""


def _is_chief(task_type: Optional[str], task_index: int, has_chief: bool) -> bool:
    """The chief is the ``chief`` task, or worker 0 when the cluster has no ``chief`` job (TF and Keras)."""
    if not task_type or task_type == "chief":
        return True
    return task_type == "worker" and task_index == 0 and not has_chief


@dataclasses.dataclass(frozen=True)
class Cluster:
    """The training cluster that TF_CONFIG describes; no TF_CONFIG is a cluster of no listed task."""
    chiefs: int = 0
    workers: int = 0
    task_type: Optional[str] = None
    task_index: int = 0

    @property
    def tasks(self) -> int:
        """Processes that train together: the chief and the workers."""
        return self.chiefs + self.workers

    @property
    def is_chief(self) -> bool:
        return _is_chief(self.task_type, self.task_index, self.chiefs > 0)

    def describe(self) -> str:
        """``2 workers``, ``1 chief and 1 worker``."""
        parts = [f"{count} {job}{'' if count == 1 else 's'}"
                 for job, count in (("chief", self.chiefs), ("worker", self.workers)) if count]
        return " and ".join(parts) or "no tasks"


def cluster_from_tf_config(text: Optional[str]) -> Cluster:
    """The cluster of a TF_CONFIG value; StrategyError for one this trainer cannot run in.

    Refused, each with one line: text that is not a JSON object, parameter servers (this trainer has no
    ParameterServerStrategy path), more than one chief, a task type other than chief and worker (an
    evaluator would train alone), and a task that is not in the cluster it names.
    """
    if not text or not text.strip():
        return Cluster()
    try:
        config = json.loads(text)
    except json.JSONDecodeError:
        raise StrategyError("TF_CONFIG is not valid JSON") from None
    cluster = config.get("cluster") if isinstance(config, dict) else None
    if not isinstance(cluster, dict):
        raise StrategyError("TF_CONFIG has no \"cluster\" object")
    if cluster.get("ps"):
        raise StrategyError("TF_CONFIG lists parameter servers (ps): this trainer trains with MultiWorkerMirrored "
                            "over the chief and workers only; remove the parameter-server pool")
    unknown = sorted(job for job, tasks in cluster.items() if job not in TRAINING_JOBS and job != "ps" and tasks)
    if unknown:
        raise StrategyError(f"TF_CONFIG lists job(s) {', '.join(unknown)}: this trainer knows chief and worker only")
    counts = {job: len(cluster.get(job) or []) for job in TRAINING_JOBS}
    if counts["chief"] > 1:
        raise StrategyError(f"TF_CONFIG lists {counts['chief']} chief tasks; a cluster has at most one")
    task = config.get("task") or {}
    task_type, task_index = task.get("type"), task.get("index", 0)
    if task_type is None:
        if sum(counts.values()) > 1:
            raise StrategyError("TF_CONFIG lists a cluster of several tasks but no \"task\": which one is this?")
    elif task_type not in TRAINING_JOBS:
        raise StrategyError(f"TF_CONFIG task type {task_type!r}: this trainer runs chief and worker tasks only "
                            "(validation runs inside fit; there is no side-car evaluator)")
    elif not isinstance(task_index, int) or not 0 <= task_index < counts[task_type]:
        raise StrategyError(f"TF_CONFIG task {task_type}:{task_index} is not in its cluster "
                            f"({counts[task_type]} {task_type} task(s))")
    return Cluster(chiefs=counts["chief"], workers=counts["worker"], task_type=task_type,
                   task_index=task_index if task_type else 0)


def tf_config_cluster() -> Cluster:
    """The cluster of this process's TF_CONFIG."""
    return cluster_from_tf_config(os.environ.get("TF_CONFIG"))


def pick_strategy(name: str, cluster: Cluster, gpus: int) -> Tuple[str, str]:
    """The strategy (``default``, ``mirrored`` or ``multi_worker``) for ``--strategy name`` and why.

    Pure: ``auto`` here is what it means once no TPU answered. A cluster of several tasks trains under
    MultiWorkerMirrored; asking for a single-machine strategy there is refused, since every task would
    train alone and write the same ``--job_dir``.
    """
    if name not in STRATEGIES or name == "tpu":
        raise StrategyError(f"--strategy {name!r}: choose one of {', '.join(s for s in STRATEGIES if s != 'tpu')}")
    if name == "multi_worker":
        if cluster.tasks < 1:
            raise StrategyError("--strategy multi_worker needs TF_CONFIG with a cluster of workers")
        return "multi_worker", f"{cluster.describe()} in TF_CONFIG (asked for)"
    if name in ("default", "mirrored") and cluster.tasks > 1:
        raise StrategyError(f"--strategy {name}: TF_CONFIG lists {cluster.describe()}, which would each train "
                            "alone and write the same --job_dir; use --strategy auto or multi_worker")
    if name == "mirrored":
        return "mirrored", "MirroredStrategy over local devices (asked for)"
    if name == "default":
        return "default", "default strategy (asked for)"
    if cluster.tasks > 1:
        return "multi_worker", f"auto: TF_CONFIG lists {cluster.describe()}"
    if gpus > 1:
        return "mirrored", f"auto: {gpus} GPUs"
    return "default", f"auto: {gpus} GPU(s), no TPU, one worker: default strategy"


def local_tpu_chips(pci_devices: str = "/sys/bus/pci/devices", dev: str = "/dev") -> int:
    """TPU chips attached to this machine (a TPU VM): TPU PCI devices, else ``/dev/accel*`` files."""
    chips = 0
    for vendor_path in glob.glob(os.path.join(pci_devices, "*", "vendor")):
        try:
            with open(vendor_path) as vendor, open(os.path.join(os.path.dirname(vendor_path), "device")) as device:
                if vendor.read().strip() == GOOGLE_PCI_VENDOR and device.read().strip() in TPU_PCI_DEVICES:
                    chips += 1
        except OSError:
            continue
    return chips or len(glob.glob(os.path.join(dev, "accel[0-9]*")))


def tpu_address(tpu: Optional[str], environ: Mapping[str, str], local_chips: int) -> Optional[str]:
    """Which TPU ``auto`` (and ``tpu`` without ``--tpu``) tries: ``--tpu``, then TPU_NAME, then this VM's chips.

    ``""`` lets TPUClusterResolver read TPU_NAME (or GKE's endpoints) itself; ``local`` is a TPU VM's own
    chips; None: there is no TPU to try.
    """
    if tpu:
        return tpu
    if any(environ.get(variable) for variable in TPU_NAME_VARIABLES):
        return ""
    return "local" if local_chips else None


class MultiWorkerStrategy(tf.distribute.MultiWorkerMirroredStrategy):
    """MultiWorkerMirroredStrategy whose ``reduce`` accepts what Keras 3's ``fit`` passes it.

    Keras 3 (3.15) calls ``strategy.reduce`` in two ways that MirroredStrategy tolerates and
    MultiWorkerMirroredStrategy does not (keras-team/keras#20585, tensorflow/tensorflow#72388):

    - on the whole first batch, a nest such as ``(images, masks)`` of PerReplica values, to build the
      model symbolically; the collective ``reduce`` takes one value only, so TF tries to convert the
      tuple to a tensor: "Attempt to convert a value (PerReplica...) with an unsupported type";
    - with ``axis=0`` on each scalar metric and loss after every step ("Invalid reduction dimension 0
      for input with 0 dimensions").

    Here a nest is reduced value by value, and a scalar is reduced across replicas only: a loss or
    metric is averaged over the replicas, as Keras does under MirroredStrategy. Everything else is
    unchanged.
    """

    def reduce(self, reduce_op, value, axis):
        def one(component):
            rank = self.experimental_local_results(component)[0].shape.rank
            return super(MultiWorkerStrategy, self).reduce(reduce_op, component, None if rank == 0 else axis)
        return tf.nest.map_structure(one, value)


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """True unless this process is a task other than the chief of a multi-worker cluster.

    The chief is the ``chief`` task, or worker 0 when the cluster has no ``chief`` job (TF and Keras
    convention); only it writes the job's shared outputs.
    """
    resolver = strategy.cluster_resolver if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) else None
    if resolver is None or not resolver.task_type:
        return True
    return _is_chief(resolver.task_type, resolver.task_id, "chief" in resolver.cluster_spec().jobs)


def worker_dir(job_dir: str, strategy: tf.distribute.Strategy) -> str:
    """Where this process writes: ``job_dir`` on the chief, ``job_dir/workertemp_<id>`` on the other workers.

    All workers take part in checkpointing and export (they may run collective ops), so each needs a
    folder of its own; only the chief's is the job's output.
    """
    if is_chief(strategy):
        return job_dir
    return posixpath.join(job_dir, f"workertemp_{strategy.cluster_resolver.task_id}")


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    """Fail fast for ``grpc://host:port`` addresses (comma-separated, as in GKE's TPU endpoints) whose port does
    not answer: TF would wait for minutes. Names and ``local`` are left to TPUClusterResolver."""
    for endpoint in address.split(","):
        endpoint = endpoint.strip()
        if not endpoint.startswith("grpc://"):
            continue
        host, _, port = endpoint[len("grpc://"):].rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=timeout):
                pass
        except (OSError, ValueError) as error:
            raise StrategyError(f"--strategy tpu: no TPU reachable at {address} ({error})") from None


def _tpu_errors() -> tuple:
    """What resolving and initialising a TPU raises when there is none: TF's errors, the metadata server's
    (OSError, for a TPU name off Google Cloud), a missing googleapiclient, and the TPU API's HttpError."""
    errors = (ValueError, RuntimeError, OSError, ImportError, tf.errors.OpError)
    try:
        from googleapiclient.errors import Error as ApiError
    except ImportError:
        return errors
    return errors + (ApiError,)


def _tpu_where(address: str) -> str:
    return address or next((os.environ[v] for v in TPU_NAME_VARIABLES if os.environ.get(v)), "TPU_NAME")


def _connect_tpu(address: Optional[str]):
    """A TPUClusterResolver connected to ``address`` with its TPU system initialised, or StrategyError.

    ``address``: a grpc://host:port, a TPU name (resolved through the Cloud TPU API), ``local`` (this TPU
    VM's chips) or ``""`` (TPU_NAME).
    """
    address = address or ""
    _check_reachable(_tpu_where(address))             # "" is TPU_NAME's address, which may be grpc:// too.
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=address)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except _tpu_errors() as error:
        raise StrategyError(f"--strategy tpu: no TPU reachable at {_tpu_where(address)} ({_tpu_detail(error)})") from None
    return resolver


def _tpu_detail(error: Exception) -> str:
    """The first line of ``error``; for a TensorFlow build without TPU kernels (PyPI's ``tensorflow`` wheel),
    that fact instead of TF's page-long kernel listing."""
    text = str(error)
    if "No OpKernel was registered" in text and "ConfigureDistributedTPU" in text:
        return (f"TensorFlow {tf.__version__} here is built without TPU support: no kernel for "
                "ConfigureDistributedTPU; a TPU VM needs a TPU build of TensorFlow, see README")
    return (text.strip().splitlines() or [type(error).__name__])[0]


def _build(kind: str) -> tf.distribute.Strategy:
    if kind == "multi_worker":
        return MultiWorkerStrategy()
    if kind == "mirrored":
        return tf.distribute.MirroredStrategy()
    return tf.distribute.get_strategy()


def choose_strategy(name: str, tpu: Optional[str] = None,
                    connect_tpu: Callable = _connect_tpu) -> Tuple[tf.distribute.Strategy, str]:
    """The strategy for ``--strategy name`` and why it was chosen.

    ``auto`` tries, in order: a TPU (``--tpu``, TPU_NAME, or this TPU VM's chips) unless TF_CONFIG lists
    several tasks; MultiWorkerMirrored when TF_CONFIG lists several tasks (chief and workers);
    Mirrored for more than one GPU; the default strategy. ``connect_tpu(address)`` returns a connected
    TPUClusterResolver or raises StrategyError.
    """
    if name not in STRATEGIES:
        raise StrategyError(f"--strategy {name!r}: choose one of {', '.join(STRATEGIES)}")
    cluster = tf_config_cluster()
    if name == "tpu":
        if cluster.tasks > 1:
            raise StrategyError(f"--strategy tpu: TF_CONFIG lists {cluster.describe()}, which would each train "
                                "alone and write the same --job_dir; run one TPU task, or --strategy multi_worker")
        address = tpu_address(tpu, os.environ, local_tpu_chips())
        if address is None:
            raise StrategyError("--strategy tpu: no TPU here; give --tpu NAME or grpc://HOST:PORT, set TPU_NAME, "
                                "or run on a TPU VM")
        return tf.distribute.TPUStrategy(connect_tpu(address)), f"TPU at {_tpu_where(address)} (asked for)"
    if name == "auto" and cluster.tasks <= 1:
        address = tpu_address(tpu, os.environ, local_tpu_chips())
        if address is not None:
            try:
                resolver = connect_tpu(address)
                return tf.distribute.TPUStrategy(resolver), f"auto: a TPU is reachable at {_tpu_where(address)}"
            except StrategyError as error:
                _LOG.info("auto: no TPU (%s)", error)
    # Listing devices starts TF's runtime, after which MultiWorkerMirrored can no longer be set up.
    gpus = len(tf.config.list_logical_devices("GPU")) if name == "auto" and cluster.tasks <= 1 else 0
    kind, why = pick_strategy(name, cluster, gpus)
    return _build(kind), why


def mixed_precision_policy(setting: str, strategy: tf.distribute.Strategy) -> Optional[str]:
    """``auto``: mixed_bfloat16 on TPU, mixed_float16 on GPU, none on CPU."""
    if setting == "off":
        return None
    if setting in ("float16", "bfloat16"):
        return f"mixed_{setting}"
    if setting != "auto":
        raise StrategyError(f"--mixed_precision {setting!r}: choose auto, off, float16 or bfloat16")
    if isinstance(strategy, tf.distribute.TPUStrategy):
        return "mixed_bfloat16"
    if tf.config.list_logical_devices("GPU"):
        return "mixed_float16"
    return None
