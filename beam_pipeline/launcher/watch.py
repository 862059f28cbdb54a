"""Watching a job from the launcher: on the DirectRunner a live bar or plain lines; elsewhere, where to watch.

The workers count with :mod:`beam_pipeline.stages.counters` (counters whose running
totals each worker process writes to the folder in ``BEAM_PIPELINE_PROGRESS_DIR``).
:func:`run_and_watch` names that folder, runs the job, and shows the summed
totals as a bar (a terminal) or lines every ``--progress_every`` seconds (a
log). The figures and lines come from core/progress.py. The final lines are
made from the job's own metrics once it ends, so they are exact.
"""

import logging
import os
import shutil
import sys
import tempfile
import threading
import time
from typing import Dict, Optional

from beam_pipeline import console
from beam_pipeline.core import progress as figures
from beam_pipeline.core.progress import MEASURED, PhaseClock, Progress, RunnerPlace
from beam_pipeline.core.tasks import units
from beam_pipeline.stages.counters import ENV, read_totals

_LOG = logging.getLogger("beam_pipeline.progress")       # the lines are "progress" in a log (docs/running.md)
POLL_SECONDS = 0.5          # the launcher reads the totals this often, or twice per --progress_every if shorter
MIN_INTERVAL = 0.1          # the shortest --progress_every


def job_counts(result) -> Optional[Dict[str, int]]:
    """Every user counter of a finished job, summed over steps; None when the runner reports no metrics."""
    try:
        counters = result.metrics().query()["counters"]
    except Exception:       # noqa: BLE001 - NotImplementedError, or the job service gone: the run is done anyway
        return None
    counts: Dict[str, int] = {}
    for found in counters:
        name = f"{found.key.metric.namespace}:{found.key.metric.name}"
        value = found.committed if found.committed is not None else found.attempted
        counts[name] = counts.get(name, 0) + (value or 0)
    return counts


class LinesDisplay:
    """Plain progress lines, for a log: one every ``interval`` seconds, and one as each phase ends."""

    def __init__(self, interval: float, unit: str = "pairs"):
        self.interval = interval
        self.unit = unit
        self._last = float("-inf")

    def show(self, now: float, progress: Progress, rate, eta, phase_changed: bool) -> None:
        if phase_changed or now - self._last >= self.interval:
            self._last = now
            _LOG.info("%s", figures.progress_line(progress.phase, progress, rate, eta, unit=self.unit))

    def close(self, phase: str, progress: Progress, seconds: Optional[float]) -> None:
        _LOG.info("%s", figures.phase_summary(phase, progress, seconds, unit=self.unit))

    def stop(self) -> None:
        pass


class BarDisplay:
    """A live bar on a terminal (rich): one per measured phase, a pulse for the others; log lines print above."""

    def __init__(self, unit: str = "pairs"):
        from rich.console import Console
        from rich.progress import BarColumn, Progress as RichProgress, TextColumn
        self._bar = RichProgress(TextColumn("{task.description:<10}"), BarColumn(bar_width=24),
                                 TextColumn("{task.fields[figures]}"), console=Console(file=sys.stderr),
                                 refresh_per_second=4, redirect_stderr=True, redirect_stdout=False)
        self._tasks: Dict[str, int] = {}
        self._unit = unit
        self._bar.start()

    def show(self, now: float, progress: Progress, rate, eta, phase_changed: bool) -> None:
        phase = progress.phase
        if phase_changed:
            self._drop_unmeasured(keep=phase)
        line = figures.progress_line(phase, progress, rate, eta, share=False, unit=self._unit)
        self._update(phase, progress, line)

    def close(self, phase: str, progress: Progress, seconds: Optional[float]) -> None:
        line = figures.phase_summary(phase, progress, seconds, share=False, unit=self._unit)
        self._update(phase, progress, line)

    def _update(self, phase: str, progress: Progress, line: str) -> None:
        done, total = progress.figures(phase)
        text = _without_phase(line, phase)
        if phase not in self._tasks:
            self._tasks[phase] = self._bar.add_task(phase, total=total, figures=text)
        self._bar.update(self._tasks[phase], completed=done if total else 0, total=total, figures=text)

    def _drop_unmeasured(self, keep: str) -> None:
        for phase in [p for p in self._tasks if p not in MEASURED and p != keep]:
            self._bar.remove_task(self._tasks.pop(phase))

    def stop(self) -> None:
        self._drop_unmeasured(keep="")
        self._bar.stop()


def _without_phase(line: str, phase: str) -> str:
    return line[len(phase):].strip() if line.startswith(phase) else line


class Monitor:
    """Reads the workers' totals while the job runs and shows them; closes each measured phase once."""

    def __init__(self, folder: str, display, poll_seconds: float = POLL_SECONDS):
        self._folder = folder
        self._display = display
        self._poll = poll_seconds
        self._clock = PhaseClock()
        self._started: Dict[str, float] = {}        # phase -> when it was first seen
        self._closed = set()
        self._last: Optional[Progress] = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ProgressMonitor", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._poll):
            try:
                self.observe(time.monotonic(), figures.progress_of(read_totals(self._folder)))
            except Exception:       # noqa: BLE001 - the job matters more than its progress line
                _LOG.debug("progress: cannot read the workers' totals", exc_info=True)

    def observe(self, now: float, progress: Progress) -> None:
        previous = self._last.phase if self._last is not None else None
        if previous is not None and figures.PHASES.index(progress.phase) < figures.PHASES.index(previous):
            return                  # the phases of a batch run only move forward
        changed = progress.phase != previous
        if changed:
            for phase in MEASURED:  # a measured phase the run has left gets its final line
                if figures.PHASES.index(phase) < figures.PHASES.index(progress.phase):
                    self._close(phase, progress, now)
            self._started.setdefault(progress.phase, now)
        rate, eta = self._clock.observe(now, progress)
        self._display.show(now, progress, rate, eta, changed)
        self._last = progress

    def _close(self, phase: str, progress: Progress, now: float) -> None:
        if phase in self._closed:
            return
        self._closed.add(phase)
        started = self._started.get(phase)
        self._display.close(phase, progress, None if started is None else now - started)

    def finish(self, counts: Optional[Dict[str, int]]) -> None:
        """Stop reading; close the measured phases from the job's exact counts (or the last totals read)."""
        self._stop_reading()
        final = figures.progress_of(counts) if counts is not None else self._last
        if final is not None:
            now = time.monotonic()
            for phase in MEASURED:
                if phase in self._started or final.figures(phase)[0] > 0:
                    self._close(phase, final, now)
        self._display.stop()

    def _stop_reading(self) -> None:
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join()

    def abort(self) -> None:
        """Stop reading and showing, without final lines: the job failed."""
        self._stop_reading()
        self._display.stop()


def _display(options):
    from beam_pipeline.launcher.options import CorpusOptions
    mode = console.progress_display()
    corpus = options.view_as(CorpusOptions)
    if mode == "off":
        return None
    if mode == "bar":
        return BarDisplay(units(corpus.task))
    return LinesDisplay(max(MIN_INTERVAL, corpus.progress_every), units(corpus.task))


def _runs_here(pipeline) -> bool:
    """The DirectRunner's engine: the job runs in this process and the worker processes it starts."""
    from apache_beam.runners.portability.fn_api_runner import FnApiRunner
    return isinstance(pipeline.runner, FnApiRunner) or type(pipeline.runner).__name__ in (
        "DirectRunner", "SwitchingDirectRunner", "BundleBasedDirectRunner")


def _workers_here(pipeline, options) -> bool:
    """The SDK workers are this process or its children: the DirectRunner, or any runner with LOOPBACK."""
    from apache_beam.options.pipeline_options import PortableOptions
    return _runs_here(pipeline) or (options.view_as(PortableOptions).environment_type or "").upper() == "LOOPBACK"


def run_and_watch(pipeline, options):
    """Run ``pipeline`` and wait for it, showing its progress; returns the PipelineResult.

    Where the workers run here, their totals make a bar or lines; where the runner
    is elsewhere, the log says where to watch, and the final counters are logged.
    """
    display = _display(options) if _workers_here(pipeline, options) else None
    folder = tempfile.mkdtemp(prefix="beam_pipeline_progress_") if display is not None else None
    previous = os.environ.get(ENV)
    monitor = None
    if folder is not None:
        os.environ[ENV] = folder
        interval = getattr(display, "interval", POLL_SECONDS)
        monitor = Monitor(folder, display, min(POLL_SECONDS, interval / 2))
        monitor.start()
    try:
        try:
            result = pipeline.run()
            if not _runs_here(pipeline):
                for line in figures.watch_hint(runner_place(options, result)):
                    _LOG.info("%s", line)
            result.wait_until_finish()
        except BaseException:
            if monitor is not None:
                monitor.abort()
            raise
        counts = job_counts(result)
        if monitor is not None:
            monitor.finish(counts)
        elif counts and not _runs_here(pipeline):
            from beam_pipeline.launcher.options import CorpusOptions
            final = figures.progress_of(counts)
            for phase in MEASURED:
                _LOG.info("%s", figures.progress_line(phase, final, unit=units(options.view_as(CorpusOptions).task)))
    finally:
        if folder is not None:
            _restore(previous)
            shutil.rmtree(folder, ignore_errors=True)
    return result


def _restore(previous: Optional[str]) -> None:
    if previous is None:
        os.environ.pop(ENV, None)
    else:
        os.environ[ENV] = previous


def runner_place(options, result=None) -> RunnerPlace:
    from apache_beam.options.pipeline_options import (FlinkRunnerOptions, GoogleCloudOptions, PortableOptions,
                                                      SparkRunnerOptions, StandardOptions)
    cloud = options.view_as(GoogleCloudOptions)
    job_id = None
    if result is not None and callable(getattr(result, "job_id", None)):
        try:
            job_id = result.job_id()
        except Exception:       # noqa: BLE001 - only a hint is lost
            job_id = None
    return RunnerPlace(runner=str(options.view_as(StandardOptions).runner), job_id=job_id, project=cloud.project,
                       region=cloud.region, flink_master=options.view_as(FlinkRunnerOptions).flink_master,
                       spark_master_url=options.view_as(SparkRunnerOptions).spark_master_url,
                       job_endpoint=options.view_as(PortableOptions).job_endpoint)
