"""What this package does to the Beam SDK worker processes its DoFns run in: a quick exit.

A worker that imported TensorFlow (the statistics' stages) spends seconds of CPU at exit tearing down
modules and thread pools, after every bundle has been answered; the runner waits for it. Like the
command line (``beam_pipeline.__main__.exit_now``), an SDK worker whose harness returned normally
leaves with ``os._exit(0)`` instead. A worker that dies of an uncaught exception exits as before, with
its traceback and exit status. Nothing happens in any other process (the launcher, tests, notebooks).
"""

import atexit
import logging
import os
import sys

SDK_WORKER_MAIN = "apache_beam.runners.worker.sdk_worker_main"
_registered = False


def in_sdk_worker() -> bool:
    """True in a process started as ``python -m apache_beam.runners.worker.sdk_worker_main``."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return spec is not None and spec.name == SDK_WORKER_MAIN


def exit_quickly_when_done() -> None:
    """In an SDK worker process, skip the interpreter's teardown at exit (once per process)."""
    global _registered
    if _registered or not in_sdk_worker():
        return
    _registered = True
    atexit.register(_exit_now)


def _exit_now() -> None:
    if getattr(sys, "last_value", None) is not None:     # the harness failed: keep Python's exit status
        return
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
