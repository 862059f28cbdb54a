"""The stages' counters: progress counters in the workers, and counters read back after a run.

The launcher shows the progress counters' totals (beam_pipeline/launcher/watch.py).

From the workers to the launcher. The composites count their work with
:func:`counter`: a Beam counter (what every runner's UI shows) that also adds
to a running total kept in the worker process. On the DirectRunner the
workers are processes on this machine, started by the launcher, so they
inherit its environment: :func:`beam_pipeline.launcher.watch.run_and_watch` names a fresh folder in
``BEAM_PIPELINE_PROGRESS_DIR``, and each worker process writes its totals to
``<folder>/<pid>.json`` (a write to a temporary name and a rename, so a
reader never sees half a file) from a background thread every
FLUSH_SECONDS, and at the end of every bundle, before the runner learns the
bundle is done. The launcher sums the files once a second. Beam's own
metrics reach the launcher only when a bundle ends, and the DirectRunner
gives each worker a whole stage as one bundle, so they cannot show progress.
Without the variable (other runners, tests of single composites) the totals
are not kept.

After a run, :func:`counter_total` reads one counter's total from the job's own metrics (the bytes
the shuffles carried, ``SHUFFLE``).
"""

import json
import os
import threading
import time
from typing import Dict, Optional

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.metrics.metric import MetricsFilter


ENV = "BEAM_PIPELINE_PROGRESS_DIR"
SHUFFLE = ("Shuffle", "value_bytes")     # bytes of packed records sent through shuffles (shuffle.py)
FLUSH_SECONDS = 0.5         # a worker writes its totals this often when they changed (and at every bundle's end)



# --------------------------------------------------------------------------
# In the workers
# --------------------------------------------------------------------------
class _Totals:
    """This process's running totals, written to ``<folder>/<pid>.json``."""

    def __init__(self, folder: str):
        self.folder = folder
        self._counts: Dict[str, int] = {}
        self._lock = threading.Lock()
        self._dirty = False
        self._path = os.path.join(folder, f"{os.getpid()}.json")
        threading.Thread(target=self._flush_periodically, name="ProgressTotals", daemon=True).start()

    def add(self, name: str, value: int) -> None:
        with self._lock:
            self._counts[name] = self._counts.get(name, 0) + value
            self._dirty = True

    def flush(self) -> None:
        with self._lock:
            if not self._dirty:
                return
            data = json.dumps(self._counts)
            self._dirty = False
            temporary = f"{self._path}.{threading.get_ident()}.tmp"
            try:
                with open(temporary, "w", encoding="utf-8") as handle:
                    handle.write(data)
                os.replace(temporary, self._path)
            except OSError:             # the run is over and its folder gone: nobody reads any more
                pass

    def _flush_periodically(self) -> None:
        while os.environ.get(ENV) == self.folder:
            time.sleep(FLUSH_SECONDS)
            self.flush()


_TOTALS: Optional[_Totals] = None
_TOTALS_LOCK = threading.Lock()


def _totals() -> Optional[_Totals]:
    global _TOTALS
    folder = os.environ.get(ENV)
    if not folder:
        return None
    if _TOTALS is None or _TOTALS.folder != folder:
        with _TOTALS_LOCK:
            if _TOTALS is None or _TOTALS.folder != folder:
                _TOTALS = _Totals(folder)
    return _TOTALS


class ProgressCounter:
    """A Beam counter whose increments also reach the launcher's progress line on the DirectRunner."""

    def __init__(self, namespace: str, name: str):
        self._counter = Metrics.counter(namespace, name)
        self._name = f"{namespace}:{name}"

    def inc(self, n: int = 1) -> None:
        self._counter.inc(n)
        totals = _totals()
        if totals is not None:
            totals.add(self._name, n)


def counter(namespace: str, name: str) -> ProgressCounter:
    return ProgressCounter(namespace, name)


class CountingDoFn(beam.DoFn):
    """A DoFn that counts with :func:`counter`: its totals are written before its bundle is reported done,
    so that the launcher never sees one stage's counts without the previous stage's."""

    def finish_bundle(self):
        totals = _totals()
        if totals is not None:
            totals.flush()


def read_totals(folder: str) -> Dict[str, int]:
    """The sum of every worker's totals in ``folder``."""
    counts: Dict[str, int] = {}
    try:
        names = [name for name in os.listdir(folder) if name.endswith(".json")]
    except OSError:
        return counts
    for name in names:
        try:
            with open(os.path.join(folder, name), encoding="utf-8") as handle:
                worker = json.load(handle)
        except (OSError, ValueError):
            continue
        for key, value in worker.items():
            counts[key] = counts.get(key, 0) + value
    return counts


# --------------------------------------------------------------------------
# After the run
# --------------------------------------------------------------------------
def counter_total(result, namespace: str, name: str) -> Optional[int]:
    """A counter's total from a finished run, or None when the runner reports no metrics."""
    try:
        counters = result.metrics().query(MetricsFilter().with_namespace(namespace).with_name(name))["counters"]
    except NotImplementedError:
        return None
    if not counters:
        return None
    return sum(c.committed if c.committed is not None else c.attempted for c in counters)
