"""Choosing the tf.distribute strategy: one factory, clear errors, and a logged reason.

The decisions (which cluster, which strategy, which TPU address) are pure functions in
:mod:`trainer.training.cluster`; this module builds the strategy they name and answers who writes ``--job_dir``.
"""

import logging
import os
import posixpath
import socket
from typing import Callable, Optional, Tuple

import tensorflow as tf

from trainer.training.cluster import (STRATEGIES, TPU_NAME_VARIABLES, StrategyError, is_chief_task, local_tpu_chips,
                             pick_strategy, tf_config_cluster, tpu_address)

_LOG = logging.getLogger(__name__)


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
    return is_chief_task(resolver.task_type, resolver.task_id, "chief" in resolver.cluster_spec().jobs)


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
    if address == "local" and not local_tpu_chips():
        # Checked before TF is asked: PyPI's tensorflow (no TPU kernels) would blame the build, tensorflow-tpu
        # would fail in libtpu; either way the cause is that this machine has no TPU chip.
        raise StrategyError("--strategy tpu: no TPU was found: --tpu local means this machine's TPU chips, and it "
                            "has none (no Google TPU among its PCI devices, no /dev/accel*)")
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
                "ConfigureDistributedTPU; a TPU VM needs a TPU build of TensorFlow, see docs/training.md")
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
