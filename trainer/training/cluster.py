"""Where this process trains: the cluster from ``TF_CONFIG`` and the TPU chips of this machine.

Pure decisions, without TensorFlow: :mod:`trainer.training.strategy` builds the strategy they name. Vertex AI
names worker pool 0 (one replica) ``chief``, pool 1 ``worker``, pool 2 ``ps`` and pool 3 ``evaluator``;
a cluster written by hand often has workers only. Chief and workers all train under
MultiWorkerMirroredStrategy; the chief (worker 0 when there is no chief) owns ``--job_dir``.
"""

import dataclasses
import glob
import json
import os
from typing import Mapping, Optional, Tuple

STRATEGIES = ("auto", "default", "mirrored", "multi_worker", "tpu")
TRAINING_JOBS = ("chief", "worker")     # The TF_CONFIG jobs whose tasks train (all-reduce) together.
# Where a TPU VM's chips show: PCI devices of Google's vendor id with a TPU device id (the table of
# jax/_src/hardware_utils.py: v2/v3, an unnamed one, v4, v5p, v5e, v6e), and /dev/accel* on v2-v4.
GOOGLE_PCI_VENDOR = "0x1ae0"
TPU_PCI_DEVICES = frozenset({"0x0027", "0x0056", "0x005e", "0x0062", "0x0063", "0x006f"})
TPU_NAME_VARIABLES = ("TPU_NAME", "KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS")   # What TPUClusterResolver reads.


class StrategyError(ValueError):
    """The requested strategy cannot run here; the message says why, in one line."""


def is_chief_task(task_type: Optional[str], task_index: int, has_chief: bool) -> bool:
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
        return is_chief_task(self.task_type, self.task_index, self.chiefs > 0)

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
