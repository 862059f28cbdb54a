"""Choosing the subset: the user's filters, sampling and split assignment, by stable hash of the key."""

import dataclasses
from typing import Mapping, Optional, Tuple

from beam_pipeline.core import reasons
from beam_pipeline.core.filter_expr import FilterEvalError, FilterExpression
from beam_pipeline.core.hashing import unit_interval
from beam_pipeline.core.leakage.groups import SplitGroupSpec, group_of
from beam_pipeline.core.masks.maps import IGNORE, IGNORE_UNMAPPED, LabelMap
from beam_pipeline.core.paths import matches_any
from beam_pipeline.core.records import FILTERED, REJECTED, Outcome, PairRef

TRAIN = "train"         # The split that statistics, balancing and the class index are computed on.
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


def excluded(ref: PairRef, include: Tuple[str, ...], exclude: Tuple[str, ...],
             expression: Optional[FilterExpression], sample_fraction: float,
             label_map: Optional[LabelMap] = None) -> Optional[Outcome]:
    """Why --include, --exclude, --filter, a --label_map's ignore or --sample_fraction leave ``ref`` out, or
    None when it stays."""
    if include and not matches_any(ref.source_id, include):
        return Outcome.for_ref(ref, FILTERED, reasons.FILTERED_BY_INCLUDE, "matches no --include glob")
    if exclude and matches_any(ref.source_id, exclude):
        return Outcome.for_ref(ref, FILTERED, reasons.FILTERED_BY_EXCLUDE, "matches an --exclude glob")
    if expression is not None:
        row = ref.meta()
        row.update(image=ref.source_id, mask=ref.mask, label=ref.label)
        try:
            keep = expression(row)
        except FilterEvalError as error:
            return Outcome.for_ref(ref, REJECTED, reasons.FILTER_ERROR, f"--filter on this row: {error}")
        if not keep:
            return Outcome.for_ref(ref, FILTERED, reasons.FILTERED_BY_EXPRESSION, "--filter is false")
    if label_map is not None:
        cls = label_map.lookup(ref.label)
        if cls == IGNORE or (cls is None and label_map.unmapped == IGNORE_UNMAPPED):
            why = "sends it to ignore" if cls == IGNORE else "does not list it (--unmapped ignore)"
            return Outcome.for_ref(ref, FILTERED, reasons.FILTERED_BY_LABEL_MAP,
                                   f"label {ref.label!r}: {label_map.source} {why}")
    if not keep_in_sample(ref.key, sample_fraction):
        return Outcome.for_ref(ref, FILTERED, reasons.FILTERED_BY_SAMPLING, "not in the --sample_fraction sample")
    return None


def with_split(ref: PairRef, spec: SplitSpec, names: Tuple[Tuple[str, str], ...] = (),
               group: Optional[SplitGroupSpec] = None) -> Tuple[Optional[PairRef], Optional[Outcome]]:
    """``ref`` with its split (and its split group, ``--split_group``: fraction splits hash the group, not the key)
    and without its metadata (only selection needs it), or a rejected Outcome; ``names`` renames splits
    (``--split_names``, a layout's own: Pet's ``trainval`` is ``train``)."""
    metadata = ref.meta()
    unit = group_of(group, ref) if group is not None else ""
    if unit is None:
        return None, Outcome.for_ref(ref, REJECTED, reasons.NO_SPLIT_GROUP, f"--split_group {group.text} gives no group")
    split = named(assign_split(spec, unit or ref.key, metadata, metadata.get("folder", "")), names)
    if split is None:
        return None, Outcome.for_ref(ref, REJECTED, reasons.BAD_LISTING_ROW,
                                     f"no split ({spec.mode} {spec.column_name})")
    return dataclasses.replace(ref, split=split, metadata=(), group=unit), None


def named(split: Optional[str], names: Tuple[Tuple[str, str], ...]) -> Optional[str]:
    """A split under the name it is published as (``--split_names``)."""
    return dict(names).get(split, split) if split is not None else None
