"""One input pipeline timed in its own child process: the parent's ``spawn`` and the child's ``run``.

Each pipeline (input_pipelines.py) runs in a fresh interpreter, so no thread pools or caches are shared
between them. The child pulls ``warmup_batches`` batches (thread pools started, tf.data autotuning and shuffle
buffers filled), then times ``batches`` more, checking each batch's dtypes and batch size, and prints one
``RESULT {json}`` line: examples, seconds, its own CPU seconds (all its threads), the cores other processes
used meanwhile (/proc/stat), its RSS before and after building the dataset and after the warm-up. The
parent reaps it with ``os.wait4``: ``ru_maxrss`` is that child's peak RSS (TensorFlow's threads included;
the children start no processes).

The spec is input_pipelines.py's, plus ``warmup_batches`` and ``batches``. The parent runs this file as
``python bench/input_child.py SPEC_JSON``; it is not a benchmark of its own.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

from common import MB, ROOT, machine_busy_seconds, other_cores

RESULT_PREFIX = "RESULT "


# --------------------------------------------------------------------------
# The child (TensorFlow is imported only here)
# --------------------------------------------------------------------------
def rss_mb() -> float:
    """This process's resident set size now, in MiB (/proc/self/status)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def time_batches(iterator, warmup: int, batches: int, batch_size: int) -> dict:
    """Pull ``warmup`` batches, then time ``batches`` more; checks every batch's shapes and dtypes."""
    import numpy as np

    def pull():
        images, masks = next(iterator)
        images, masks = np.asarray(images), np.asarray(masks)
        if images.shape[0] != batch_size or images.dtype != np.float32 or masks.dtype != np.int32:
            raise AssertionError(f"unexpected batch: images {images.shape} {images.dtype}, "
                                 f"masks {masks.shape} {masks.dtype}")
        return images.shape, masks.shape

    started = time.perf_counter()
    for _ in range(warmup):
        pull()
    warmup_seconds = time.perf_counter() - started
    rss_before = rss_mb()
    busy_before, cpu_before, started = machine_busy_seconds(), time.process_time(), time.perf_counter()
    for _ in range(batches):
        shapes = pull()
    seconds = time.perf_counter() - started
    cpu = time.process_time() - cpu_before
    other = other_cores(busy_before, cpu, seconds)
    examples = batches * batch_size
    return {"examples": examples, "seconds": seconds, "cpu_seconds": cpu, "other_cores": other,
            "warmup_seconds": warmup_seconds, "rss_after_warmup_mb": rss_before,
            "image_shape": list(shapes[0]), "mask_shape": list(shapes[1])}


def run(spec: dict) -> dict:
    """Build one pipeline and time it."""
    rss_start = rss_mb()
    import tensorflow as tf

    from input_pipelines import batches
    tf.random.set_seed(0)
    iterator, decoding = batches(spec)
    rss_built = rss_mb()
    result = time_batches(iterator, spec["warmup_batches"], spec["batches"], spec["batch_size"])
    return result | {"kind": spec["kind"], "rss_interpreter_mb": rss_start, "rss_built_mb": rss_built,
                     "decoding": decoding}


# --------------------------------------------------------------------------
# The parent
# --------------------------------------------------------------------------
@dataclasses.dataclass
class Run:
    kind: str
    scale: int
    repeat: int
    examples: int
    seconds: float
    cpu_seconds: float
    other_cores: float
    peak_rss_mb: float      # ru_maxrss of the child (os.wait4)
    rss_built_mb: float     # the child's RSS once the dataset was built, before iterating
    warmup_seconds: float
    image_shape: list
    mask_shape: list
    decoding: Optional[str]  # what the trainer logged about decoding: directly, or through the graph and why

    @property
    def examples_per_s(self) -> float:
        return self.examples / self.seconds

    @property
    def cpu_ms_per_example(self) -> float:
        return 1e3 * self.cpu_seconds / self.examples

    @property
    def cores(self) -> float:
        return self.cpu_seconds / self.seconds


def spawn(spec: dict, log_path: Path, scale: int, repeat: int) -> Run:
    """Run one child process and reap it with os.wait4 (its own peak RSS)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    command = [sys.executable, str(Path(__file__).resolve()), json.dumps(spec)]
    with log_path.open("w") as log_file:
        proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=log_file, env=env, text=True)
        output = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, so that Popen does not wait again
    lines = [line for line in output.splitlines() if line.startswith(RESULT_PREFIX)]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"{spec['kind']} child exited {proc.returncode}; see {log_path}")
    result = json.loads(lines[-1][len(RESULT_PREFIX):])
    return Run(kind=spec["kind"], scale=scale, repeat=repeat, examples=result["examples"],
               seconds=result["seconds"], cpu_seconds=result["cpu_seconds"], other_cores=result["other_cores"],
               peak_rss_mb=usage.ru_maxrss * 1024 / MB, rss_built_mb=result["rss_built_mb"],
               warmup_seconds=result["warmup_seconds"], image_shape=result["image_shape"],
               mask_shape=result["mask_shape"], decoding=result["decoding"])


if __name__ == "__main__":
    print(RESULT_PREFIX + json.dumps(run(json.loads(sys.argv[1]))), flush=True)
