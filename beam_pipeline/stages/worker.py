"""What this package does to the Beam SDK worker processes its DoFns run in: a quick exit, one report per error,
Beam's signatures read once (signatures.py), a state sampler that stops promptly (sampling.py).

A worker that imported TensorFlow (the statistics' stages, where the runner's workers run them) spends seconds
of CPU at exit tearing down modules and thread pools, after every bundle has been answered; the runner waits for
it. Like the command line (``beam_pipeline.__main__.exit_now``), an SDK worker whose harness returned normally
leaves with ``os._exit(0)`` instead. A worker that dies of an uncaught exception exits as before, with
its traceback and exit status.

When a bundle fails, Beam's harness prints its traceback on the worker's stderr (which is the launcher's
console on the DirectRunner), then sends the same traceback as the bundle's error, which run() raises:
the launcher reports it once, as one line when the user can act on it (a full disk). The printed copy is
left out unless the worker logs at debug level (``-v``).

Nothing happens in any other process (the launcher, tests, notebooks).
"""

import atexit
import logging
import os
import sys

SDK_WORKER_MAIN = "apache_beam.runners.worker.sdk_worker_main"
_registered = False


WARM_WORKER_MAIN = "beam_pipeline.launcher.warm_workers"     # an SDK worker started before the run (launcher)


def in_sdk_worker() -> bool:
    """True in a process started as ``python -m apache_beam.runners.worker.sdk_worker_main``, or as one of the
    launcher's waiting worker processes."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return spec is not None and spec.name in (SDK_WORKER_MAIN, WARM_WORKER_MAIN)


def prepare_sdk_worker() -> None:
    """In an SDK worker process (once per process): skip the interpreter's teardown at exit, and print a
    failed bundle's traceback only at debug level."""
    global _registered
    if _registered or not in_sdk_worker():
        return
    _registered = True
    atexit.register(_exit_now)
    sys.stderr = HarnessTracebacksLeftOut(sys.stderr)
    from beam_pipeline.stages.sampling import prompt_state_sampler
    from beam_pipeline.stages.signatures import cache_signatures
    cache_signatures()                  # the bundle processors still to be built ask Beam fewer questions
    prompt_state_sampler()              # and their bundles end without waiting up to 200 ms for the sampler


HARNESS_FILE = "apache_beam/runners/worker/sdk_worker.py"
HARNESS_FUNCTION = "_execute"          # where the harness prints a failed bundle's traceback
TRACEBACK_HEAD = "Traceback (most recent call last):"


class HarnessTracebacksLeftOut:
    """A stderr that leaves out what the SDK harness prints of a failed bundle, unless logging is at debug."""

    def __init__(self, stream):
        self._stream = stream
        self._left_out = False          # the text just left out; print() then writes its line end apart

    def write(self, text):
        if text.startswith(TRACEBACK_HEAD) and _printed_by_harness() and \
                not logging.getLogger().isEnabledFor(logging.DEBUG):
            self._left_out = True
            return len(text)
        if self._left_out and text == "\n":
            self._left_out = False
            return len(text)
        self._left_out = False
        return self._stream.write(text)

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _printed_by_harness() -> bool:
    caller = sys._getframe(2).f_code    # noqa: SLF001 - write() <- print() (C, no frame) <- its caller
    return caller.co_name == HARNESS_FUNCTION and caller.co_filename.replace(os.sep, "/").endswith(HARNESS_FILE)


def _exit_now() -> None:
    if getattr(sys, "last_value", None) is not None:     # the harness failed: keep Python's exit status
        return
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
