"""A run's progress from its counters: the phase, pairs done of those to do, rate, ETA and rejects.

The composites count their work in Beam counters. The ones named here are
what progress is computed from: on the DirectRunner from the workers' running
totals (beam_pipeline/stages/counters.py), and on other runners by a person reading
the runner's UI (:func:`watch_hint` names them). A counter is
``"Namespace:name"``, the transform's name as namespace.

In a batch run each phase ends before the next starts, because a shuffle
separates them: every input is listed and selected before the first pair is
validated, and every pair is validated, deduplicated and balanced before the
first shard is written.
"""

import dataclasses
from typing import List, Mapping, Optional, Tuple

DISCOVERED = ("ReadCorpus", "discovered")        # every input found: a pair, or one that cannot form a pair
SELECTED = ("SelectSubset", "selected")          # pairs kept by the selection, with a split: the pairs to check
VALID = ("ValidatePairs", "valid")               # pairs that passed every check
DUPLICATES = ("DeduplicatePairs", "duplicates")  # valid pairs whose content another pair already has
PAIRS_WRITTEN = ("WriteShards", "pairs_written")        # pairs written (their first copy)
RECORDS_WRITTEN = ("WriteShards", "records_written")    # records written, repeat copies included
REJECTED_PREFIX = "rejected_"                    # rejected_<reason> in ReadCorpus, SelectSubset, ValidatePairs, WriteShards
VALIDATE_NAMESPACE = "ValidatePairs"
WRITE_NAMESPACE = "WriteShards"

STARTING, LISTING, VALIDATING, ANALYSING, WRITING, FINISHING = (
    "starting", "listing", "validating", "analysing", "writing", "finishing")
PHASES = (STARTING, LISTING, VALIDATING, ANALYSING, WRITING, FINISHING)
MEASURED = (VALIDATING, WRITING)                 # the phases with a count of pairs to do


def key(counter: Tuple[str, str]) -> str:
    return f"{counter[0]}:{counter[1]}"


@dataclasses.dataclass(frozen=True)
class Progress:
    """Where a run is, from its counter totals."""
    phase: str
    discovered: int
    validated: int      # discovered inputs whose fate before writing is known: settled while listing, or checked
    to_write: int       # valid pairs that are not duplicates
    written: int        # pairs written, or rejected at write time
    rejected: int       # rejected so far, at every stage

    def figures(self, phase: str) -> Tuple[int, Optional[int]]:
        """(done, total) of ``phase``: pairs validated of those discovered, or pairs written of those to write."""
        if phase == VALIDATING:
            return self.validated, self.discovered
        if phase == WRITING:
            return self.written, self.to_write
        return self.discovered, None


def _total(counts: Mapping[str, int], namespace: str, prefix: str) -> int:
    head = f"{namespace}:{prefix}"
    return sum(value for name, value in counts.items() if name.startswith(head))


def progress_of(counts: Mapping[str, int]) -> Progress:
    """The phase and figures of a run whose counters add up to ``counts`` ({"Namespace:name": total})."""
    discovered = counts.get(key(DISCOVERED), 0)
    selected = counts.get(key(SELECTED), 0)
    checked = counts.get(key(VALID), 0) + _total(counts, VALIDATE_NAMESPACE, REJECTED_PREFIX)
    to_write = max(0, counts.get(key(VALID), 0) - counts.get(key(DUPLICATES), 0))
    written = counts.get(key(PAIRS_WRITTEN), 0) + _total(counts, WRITE_NAMESPACE, REJECTED_PREFIX)
    rejected = sum(value for name, value in counts.items() if name.split(":", 1)[-1].startswith(REJECTED_PREFIX))
    if checked == 0 or checked < selected:
        phase = VALIDATING if checked else (LISTING if discovered else STARTING)
    elif written == 0 and to_write > 0:
        phase = ANALYSING
    elif written < to_write:
        phase = WRITING
    else:
        phase = FINISHING
    validated = min(discovered, discovered - selected + checked)
    return Progress(phase, discovered, validated, to_write, min(written, to_write), rejected)


class PhaseClock:
    """Rate and ETA of the current phase, from (time, progress) observations; time in seconds."""

    def __init__(self):
        self._phase: Optional[str] = None
        self._start: Tuple[float, int] = (0.0, 0)

    def observe(self, now: float, progress: Progress) -> Tuple[Optional[float], Optional[float]]:
        """(pairs per second, seconds left) in the current phase; None while unknown."""
        done, total = progress.figures(progress.phase)
        if progress.phase != self._phase:
            self._phase, self._start = progress.phase, (now, done)
        started, done_at_start = self._start
        if total is None or now <= started or done <= done_at_start:
            return None, None
        rate = (done - done_at_start) / (now - started)
        return rate, max(0, total - done) / rate


def duration(seconds: Optional[float]) -> str:
    """``1:02:03`` or ``2:03``; ``?`` when unknown."""
    if seconds is None:
        return "?"
    whole = int(round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def progress_line(phase: str, progress: Progress, rate: Optional[float] = None,
                  eta: Optional[float] = None, share: bool = True, unit: str = "pairs") -> str:
    """One plain line for ``phase``, e.g. ``validating  1,234/5,000 pairs  24.7%  52.3 pairs/s  ETA 1:12  rejected 12``
    (without the percentage when ``share`` is false: a bar shows it; ``unit``: core/tasks.py's units)."""
    done, total = progress.figures(phase)
    rejected = f"rejected {progress.rejected:,}"
    if phase == STARTING:
        return f"{phase:<10}  the runner and its workers"
    if phase == LISTING:
        return f"{phase:<10}  {done:,} inputs found  {rejected}"
    if phase == ANALYSING:
        return f"{phase:<10}  duplicates, statistics, balancing, shard sizes  {rejected}"
    if phase == FINISHING:
        return f"{phase:<10}  publishing the outputs  {rejected}"
    line = f"{phase:<10}  {done:,}/{total:,} {unit}"
    if share:
        line += f"  {100.0 * done / total:5.1f}%" if total else "      -"
    if rate is not None:
        line += f"  {rate:,.1f} {unit}/s"
    if done < total and eta is not None:
        line += f"  ETA {duration(eta)}"
    return f"{line}  {rejected}"


def phase_summary(phase: str, progress: Progress, seconds: Optional[float], share: bool = True,
                  unit: str = "pairs") -> str:
    """The line that closes a measured phase, with its mean rate over ``seconds``."""
    done, _ = progress.figures(phase)
    rate = done / seconds if seconds else None
    line = progress_line(phase, progress, rate, share=share, unit=unit)
    return line + (f"  in {duration(seconds)}" if seconds is not None else "")


# --------------------------------------------------------------------------
# Remote runners: where to watch
# --------------------------------------------------------------------------
WATCHED_COUNTERS = (
    (key(DISCOVERED), "inputs found"),
    (key(SELECTED), "pairs to validate"),
    (key(VALID), "pairs that passed"),
    (f"{VALIDATE_NAMESPACE}:{REJECTED_PREFIX}<reason>", "rejects by reason"),
    (key(DUPLICATES), "duplicates"),
    (key(PAIRS_WRITTEN), "pairs written"),
    (key(RECORDS_WRITTEN), "records written, repeat copies included"),
)


@dataclasses.dataclass(frozen=True)
class RunnerPlace:
    """What the options say about where a job runs; fields are None when not given."""
    runner: str
    job_id: Optional[str] = None
    project: Optional[str] = None
    region: Optional[str] = None
    flink_master: Optional[str] = None
    spark_master_url: Optional[str] = None
    job_endpoint: Optional[str] = None


def _http(address: str) -> str:
    return address if address.startswith(("http://", "https://")) else f"http://{address}"


def watch_url(place: RunnerPlace) -> str:
    """Where a person follows the job: the runner's UI, or what to open to find it."""
    runner = place.runner.lower().removesuffix("runner")
    if runner == "dataflow":
        region = place.region or "REGION"
        job = place.job_id or "JOB_ID"
        project = place.project or "PROJECT"
        return f"the Dataflow console, https://console.cloud.google.com/dataflow/jobs/{region}/{job}?project={project}"
    if runner == "flink":
        master = place.flink_master or "[auto]"
        if master.startswith("["):
            return (f"no web UI: --flink_master={master} runs an embedded Flink cluster inside the job server "
                    "(give a cluster's address to watch it, e.g. the one tools/flink/cluster.py prints)")
        return f"the Flink web UI, {_http(master)} (Jobs > Running Jobs)"
    if runner == "spark":
        master = place.spark_master_url or "local[4]"
        if master.startswith("local"):
            return "the Spark UI of the job server's driver, http://localhost:4040"
        host = master.split("://", 1)[-1].rsplit(":", 1)[0]
        return f"the Spark master's web UI, http://{host}:8080"
    if place.job_endpoint:
        return f"the UI of the runner behind the job service at {place.job_endpoint}"
    return f"the {place.runner} UI"


def watch_hint(place: RunnerPlace) -> List[str]:
    """The lines a remote run logs when it is submitted: where to watch, and which counters."""
    lines = [f"{place.runner} runs the job; progress is not reported here. Watch it in {watch_url(place)}.",
             "Counters to watch (namespace:name):"]
    lines += [f"  {name:<34} {meaning}" for name, meaning in WATCHED_COUNTERS]
    return lines
