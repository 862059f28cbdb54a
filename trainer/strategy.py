"""Choosing the tf.distribute strategy: one factory, clear errors, and a logged reason."""

import json
import logging
import os
import posixpath
import socket
from typing import Callable, Optional, Tuple

import tensorflow as tf

_LOG = logging.getLogger(__name__)
STRATEGIES = ("auto", "default", "mirrored", "multi_worker", "tpu")


class StrategyError(ValueError):
    """The requested strategy cannot run here; the message says why, in one line."""


def _tf_config_workers() -> int:
    try:
        config = json.loads(os.environ.get("TF_CONFIG", "{}") or "{}")
    except json.JSONDecodeError:
        raise StrategyError("TF_CONFIG is not valid JSON") from None
    return len(config.get("cluster", {}).get("worker", []))


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
    """True unless this process is a worker other than the chief of a multi-worker cluster.

    The chief is the ``chief`` task, or worker 0 when the cluster has no ``chief`` job (Keras and TF
    convention).
    """
    resolver = strategy.cluster_resolver if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) else None
    if resolver is None or not resolver.task_type:
        return True
    if resolver.task_type == "chief":
        return True
    return resolver.task_type == "worker" and resolver.task_id == 0 and "chief" not in resolver.cluster_spec().jobs


def worker_dir(job_dir: str, strategy: tf.distribute.Strategy) -> str:
    """Where this process writes: ``job_dir`` on the chief, ``job_dir/workertemp_<id>`` on the other workers.

    All workers take part in checkpointing and export (they may run collective ops), so each needs a
    folder of its own; only the chief's is the job's output.
    """
    if is_chief(strategy):
        return job_dir
    return posixpath.join(job_dir, f"workertemp_{strategy.cluster_resolver.task_id}")


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    """Fail fast for a ``grpc://host:port`` address whose port does not answer (TF would wait for minutes)."""
    if not address.startswith("grpc://"):
        return
    host, _, port = address[len("grpc://"):].rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return
    except (OSError, ValueError) as error:
        raise StrategyError(f"--strategy tpu: no TPU reachable at {address} ({error})") from None


def _connect_tpu(address: Optional[str]):
    """A TPUClusterResolver connected to ``address`` (or the local TPU), or StrategyError."""
    if address:
        _check_reachable(address)
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=address or "")
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except (ValueError, tf.errors.OpError, RuntimeError) as error:
        where = address or "local"
        raise StrategyError(f"--strategy tpu: no TPU reachable at {where} ({str(error).splitlines()[0]})") from None
    return resolver


def choose_strategy(name: str, tpu: Optional[str] = None,
                    connect_tpu: Callable = _connect_tpu) -> Tuple[tf.distribute.Strategy, str]:
    """The strategy for ``--strategy name`` and why it was chosen.

    ``auto`` tries, in order: a reachable TPU; MultiWorkerMirrored when
    TF_CONFIG lists several workers; Mirrored for more than one GPU; the
    default strategy.
    """
    if name not in STRATEGIES:
        raise StrategyError(f"--strategy {name!r}: choose one of {', '.join(STRATEGIES)}")
    if name == "tpu":
        resolver = connect_tpu(tpu)
        return tf.distribute.TPUStrategy(resolver), f"TPU at {tpu or 'local'} (asked for)"
    if name == "multi_worker":
        if _tf_config_workers() < 1:
            raise StrategyError("--strategy multi_worker needs TF_CONFIG with a cluster of workers")
        return MultiWorkerStrategy(), f"{_tf_config_workers()} workers in TF_CONFIG (asked for)"
    if name == "mirrored":
        return tf.distribute.MirroredStrategy(), "MirroredStrategy over local devices (asked for)"
    if name == "default":
        return tf.distribute.get_strategy(), "default strategy (asked for)"
    # auto
    if tpu or os.environ.get("TPU_NAME") or os.path.exists("/dev/accel0"):
        try:
            resolver = connect_tpu(tpu)
            return tf.distribute.TPUStrategy(resolver), "auto: a TPU is reachable"
        except StrategyError as error:
            _LOG.info("auto: no TPU (%s)", error)
    workers = _tf_config_workers()
    if workers > 1:
        return MultiWorkerStrategy(), f"auto: TF_CONFIG lists {workers} workers"
    gpus = tf.config.list_logical_devices("GPU")
    if len(gpus) > 1:
        return tf.distribute.MirroredStrategy(), f"auto: {len(gpus)} GPUs"
    return tf.distribute.get_strategy(), f"auto: {len(gpus)} GPU(s), no TPU, one worker: default strategy"


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
