"""Beam counters that several composites share."""

from typing import Optional

from apache_beam.metrics import Metrics
from apache_beam.metrics.metric import MetricsFilter

SHUFFLE = ("Shuffle", "value_bytes")


def shuffled(data: bytes) -> bytes:
    """Count ``data`` as a value about to cross a shuffle; returns it unchanged."""
    Metrics.counter(*SHUFFLE).inc(len(data))
    return data


def counter_total(result, namespace: str, name: str) -> Optional[int]:
    """A counter's total from a finished run, or None when the runner reports no metrics."""
    try:
        counters = result.metrics().query(MetricsFilter().with_namespace(namespace).with_name(name))["counters"]
    except NotImplementedError:
        return None
    if not counters:
        return None
    return sum(c.committed if c.committed is not None else c.attempted for c in counters)
