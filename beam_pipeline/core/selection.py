"""Choosing the subset: sampling and split assignment, by stable hash of the key."""

import dataclasses
from typing import Mapping, Optional, Tuple

from beam_pipeline.core.hashing import unit_interval

SAMPLE_SALT = "sample"
SPLIT_SALT = "split"


def keep_in_sample(key: str, fraction: float) -> bool:
    """Deterministic Bernoulli sampling: the same key is always in or out."""
    return fraction >= 1.0 or unit_interval(SAMPLE_SALT, key) < fraction


@dataclasses.dataclass(frozen=True)
class SplitSpec:
    """Where an example's split comes from.

    ``mode`` is ``column`` (a metadata column, ``column_name``), ``folder``
    (the image's parent folder) or ``hash`` (``fractions`` by stable hash).
    """
    mode: str
    column_name: str = "split"
    fractions: Tuple[Tuple[str, float], ...] = ()


def parse_split(text: str) -> SplitSpec:
    """Parse ``--split``: ``column``, ``column:NAME``, ``folder`` or ``train=0.8,val=0.1,test=0.1``."""
    text = text.strip()
    if text == "column":
        return SplitSpec("column")
    if text.startswith("column:") and text[len("column:"):]:
        return SplitSpec("column", column_name=text[len("column:"):])
    if text == "folder":
        return SplitSpec("folder")
    fractions = []
    for part in text.split(","):
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep or not name:
            raise ValueError(f"--split: expected column, column:NAME, folder or name=fraction,..., got {text!r}")
        try:
            fraction = float(value)
        except ValueError:
            raise ValueError(f"--split: fraction of {name!r} is not a number: {value!r}") from None
        if fraction < 0:
            raise ValueError(f"--split: fraction of {name!r} is negative")
        fractions.append((name, fraction))
    names = [name for name, _ in fractions]
    if len(set(names)) != len(names):
        raise ValueError(f"--split: a split is named twice in {text!r}")
    total = sum(f for _, f in fractions)
    if abs(total - 1.0) > 1e-6:
        raise ValueError(f"--split: fractions add up to {total:g}, not 1")
    return SplitSpec("hash", fractions=tuple(fractions))


def assign_split(spec: SplitSpec, key: str, metadata: Mapping[str, object], folder: str) -> Optional[str]:
    """The split of one example, or None when its split column is empty."""
    if spec.mode == "column":
        value = metadata.get(spec.column_name)
        return str(value).strip() or None if value is not None else None
    if spec.mode == "folder":
        return folder or None
    point = unit_interval(SPLIT_SALT, key)
    cumulative = 0.0
    for name, fraction in spec.fractions:
        cumulative += fraction
        if point < cumulative:
            return name
    return spec.fractions[-1][0]
