"""What the measurement scripts share once their runs are done: the interleaved order of repeated runs,
figures as median (min..max) over repetitions, ratios and two-point fits, targets and their verdicts, the
sitting's wall time and load, and the --json file.

A figure (``spread_figure``) is a dict ``{"median", "min", "max", "n"}`` over the repetitions, each value
computed within one repetition from that repetition's runs only; the report prints it as
``median (min..max)`` and the --json file keeps it whole. The cached corpora, /proc sampling and noise
measurement are in ``common.py``.
"""

from __future__ import annotations

import argparse
import json
import operator
import os
import statistics
import time
from pathlib import Path
from typing import Callable, Iterable, Optional, Sequence, TypeVar

from common import NOISY_CORES, spread

OPERATORS: dict[str, Callable[[float, float], bool]] = {">=": operator.ge, "<=": operator.le, "<": operator.lt}
Kind = TypeVar("Kind")


# --------------------------------------------------------------------------
# Order of the runs
# --------------------------------------------------------------------------
def interleaved(kinds: Sequence[Kind], repeat: int) -> Sequence[Kind]:
    """The order of ``kinds`` in repetition ``repeat`` (from 0): as given, reversed every other repetition,
    so that a slow phase of a shared machine hits every side alike."""
    return kinds if repeat % 2 == 0 else kinds[::-1]


# --------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------
def median_of(runs: Iterable, field: str) -> Optional[float]:
    """Median of one attribute over runs, leaving out runs where it is unknown (None when all are)."""
    known = [value for value in (getattr(run, field) for run in runs) if value is not None]
    return statistics.median(known) if known else None


def spread_figure(values: Sequence[Optional[float]]) -> dict:
    """Median, min and max of the known values (None when there are none), and how many there are."""
    known = sorted(v for v in values if v is not None)
    if not known:
        return {"median": None, "min": None, "max": None, "n": 0}
    return {"median": statistics.median(known), "min": known[0], "max": known[-1], "n": len(known)}


def collect(per_repeat: Sequence[dict], *keys: str) -> dict:
    """The spread figure of one value found under ``keys`` in every repetition's figures."""
    values = []
    for figures in per_repeat:
        value = figures
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        values.append(value)
    return spread_figure(values)


def ratio(numerator: Optional[float], denominator: Optional[float]) -> Optional[float]:
    """numerator / denominator, None when either is unknown or the denominator is not positive."""
    if numerator is None or denominator is None or denominator <= 0:
        return None
    return numerator / denominator


def fit(small: tuple[int, float], large: tuple[int, float]) -> tuple[float, float]:
    """(seconds per extra pair, intercept) of the line through two (pairs, seconds) points."""
    per_pair = (large[1] - small[1]) / (large[0] - small[0])
    return per_pair, small[1] - small[0] * per_pair


# --------------------------------------------------------------------------
# Text
# --------------------------------------------------------------------------
def fmt(value: Optional[float], spec: str = ".2f", unit: str = "") -> str:
    return "n/a" if value is None else format(value, spec) + unit


def fmt_spread(figure: dict, spec: str = ".2f", unit: str = "", scale: float = 1.0) -> str:
    """A spread figure as ``median unit (min..max)``, or ``(1 repetition)`` when there was one."""
    if figure["median"] is None:
        return "n/a"
    form = "{median}" + unit + (" (1 repetition)" if figure["n"] == 1 else " ({min}..{max})")
    # the median of (min, median, max) is the figure's median, so common.spread prints the figure
    return spread([figure[k] * scale for k in ("min", "median", "max")], "{:" + spec + "}", form)


def within_repetitions(figure: dict) -> str:
    """`` (within each repetition median (min..max))`` after a figure of the medians, when there were two
    repetitions or more; nothing otherwise."""
    return f" (within each repetition {fmt_spread(figure)})" if figure["n"] > 1 else ""


def noise_lines(other_cores: Sequence[float]) -> list[str]:
    """The CPU other processes used during the runs, with a warning above ``NOISY_CORES``."""
    lines = [f"  CPU used by other processes meanwhile (noise), cores: median {statistics.median(other_cores):.2f}, "
             f"max {max(other_cores):.2f}"]
    if max(other_cores) > NOISY_CORES:
        lines.append(f"  WARNING: other processes used more than {NOISY_CORES} cores during some runs; the figures "
                     "need a quiet machine (and --repeats 3 or more)")
    return lines


# --------------------------------------------------------------------------
# Targets
# --------------------------------------------------------------------------
def target(name: str, figure: Optional[dict], op: str, limit: float, note: str = "") -> dict:
    """One target judged on a figure's median: PASS, FAIL, or n/a when the figure is unknown."""
    value = None if figure is None else figure["median"]
    verdict = "n/a" if value is None else ("PASS" if OPERATORS[op](value, limit) else "FAIL")
    return {"name": name, "value": value, "spread": figure, "op": op, "target": limit, "verdict": verdict,
            "note": note}


def render_targets(targets: Sequence[dict]) -> list[str]:
    lines = ["targets (medians over the repetitions):"]
    for one in targets:
        note = f"  ({one['note']})" if one["note"] else ""
        lines.append(f"  {one['name']:<46}{fmt(one['value']):>7}  {one['op']:<2} "
                     f"{one['target']:.2f}  {one['verdict']}{note}")
    return lines


# --------------------------------------------------------------------------
# The sitting
# --------------------------------------------------------------------------
class Sitting:
    """One benchmark command's wall time and the machine's load average before and after it."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.load_before = os.getloadavg()
        self.timing: dict = {}

    def finish(self, prepared: str, prepare_seconds: float, versions: str) -> str:
        """The closing line of the report; also fills ``timing`` for the --json file."""
        total = time.perf_counter() - self.started
        load_after = os.getloadavg()
        self.timing = {"benchmark_seconds": total, "load_average": {"before": self.load_before, "after": load_after},
                       "cpus": os.cpu_count()}
        return (f"\nbenchmark wall time {total:.0f} s ({prepared} {prepare_seconds:.0f} s); load average before "
                f"{self.load_before[0]:.2f}, after {load_after[0]:.2f}; {os.cpu_count()} CPUs; {versions}")


def write_json(path: Optional[Path], record: dict) -> None:
    """Write ``record`` to the --json file, when one was asked for."""
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2))


# --------------------------------------------------------------------------
# Options
# --------------------------------------------------------------------------
def new_parser(prog: str, description: str) -> argparse.ArgumentParser:
    """A measurement script's parser: its --help shows every option's default."""
    return argparse.ArgumentParser(prog=prog, description=description,
                                   formatter_class=argparse.ArgumentDefaultsHelpFormatter)


def sizes(text: str) -> list[int]:
    """Comma-separated integers >= 1, sorted and without repeats (corpus sizes as multiples of --pairs)."""
    try:
        values = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or values[0] < 1:
        raise argparse.ArgumentTypeError(f"sizes must be integers >= 1, got {text!r}")
    return values
