"""Repeat factors summed exactly: the same totals however records are grouped into shards and runs."""

import math

WEIGHT_BITS = 64


def weight_units(factor: float) -> int:
    """A repeat factor as an exact integer in units of 2**-64 (exact for every factor >= 2**-12, and a factor is
    >= 1): sums of these are the same however the records are grouped into shards and runs, where float sums
    differ in their last bits with the grouping (a version's splits against a fresh run's)."""
    return int(math.ldexp(factor, WEIGHT_BITS))


def weight_of(units: int) -> float:
    """The float nearest an exact sum of :func:`weight_units` (int division rounds correctly)."""
    return units / (1 << WEIGHT_BITS)
