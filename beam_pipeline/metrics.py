"""What several composites share: the tag of their not-written outputs, and counters read after a run."""

from typing import Optional

from apache_beam.metrics.metric import MetricsFilter

REJECTED_TAG = "rejected"                # every composite's output of Outcomes (rejects, duplicates, filtered)
SHUFFLE = ("Shuffle", "value_bytes")     # bytes of packed records sent through shuffles (shuffle.py)


def counter_total(result, namespace: str, name: str) -> Optional[int]:
    """A counter's total from a finished run, or None when the runner reports no metrics."""
    try:
        counters = result.metrics().query(MetricsFilter().with_namespace(namespace).with_name(name))["counters"]
    except NotImplementedError:
        return None
    if not counters:
        return None
    return sum(c.committed if c.committed is not None else c.attempted for c in counters)
