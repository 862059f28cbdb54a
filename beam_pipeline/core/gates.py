"""The gates a run passes before anything is written: the reject rate, and counts that add up.

Nearly every input rejected is the usual sign of a wrong option (``--mask_template``,
``--num_classes``) or a broken mount, not of a bad corpus: publishing that empty or thin dataset
would replace a good one. Inputs that went missing between discovery and validation are a bug,
never bad input: a run whose counts do not add up is refused before it writes a shard (and, should
they still not add up at the end, before it publishes: core/manifest.py). Pure: counts in, an
optional Refusal out.
"""

from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from beam_pipeline.core import reasons as codes
from beam_pipeline.core.masks.values import listed_in
from beam_pipeline.core.records import FILTERED, REJECTED, Outcome, Refusal

DEFAULT_MAX_REJECT_FRACTION = 0.1
TOP_REASONS = 3
TOP_VALUES = 3                  # offending values named per reason
VALUE_REASONS = (codes.MASK_VALUE_UNMAPPED, codes.MASK_VALUE_OUT_OF_RANGE, codes.MASK_COLOR_UNKNOWN)
# What fixes each reason, for the refusal's message (a value or colour is named where the fix needs one).
FIXES = {
    codes.MASK_VALUE_UNMAPPED: "add a row for it to the --label_map ({value},ignore, or its class), or --unmapped "
                               "ignore",
    codes.MASK_VALUE_OUT_OF_RANGE: "check --num_classes and --ignore_label, or read the masks through a --label_map "
                                   "(a row {value},ignore or {value},<class>)",
    codes.MASK_COLOR_UNKNOWN: "add a row for it to the --color_map (r,g,b,class, or ignore), or --unmapped ignore",
    codes.MASK_NOT_SINGLE_CHANNEL: "colour-coded masks are read through a --color_map",
    codes.ORPHAN_IMAGE: "check --mask_template (or the layout: --layout)",
    codes.ORPHAN_MASK: "check --mask_template and --image_glob",
    codes.MISSING_FILE: "check the listing's paths and the mount",
    codes.FORMAT_NOT_ALLOWED: "allow the format with --image_formats or --mask_formats",
    codes.TOO_MANY_PIXELS: "raise --max_pixels",
    codes.FILE_TOO_LARGE: "raise --max_file_bytes",
    codes.UNKNOWN_LABEL: "check --class_names, or give a --label_map",
}
GATE = "max_reject_fraction"
COUNTS_GATE = "counts"          # the counts do not reconcile: a bug (launcher: RunFailed, exit 1)


def offending_values(outcome: Outcome) -> Iterator[Tuple[Tuple[str, str], Tuple[int, int]]]:
    """``((reason, value), (pixels, 1))`` of each mask value or colour a rejection names (core/masks/values.py
    writes them into its detail, the most pixels first)."""
    if outcome.status == REJECTED and outcome.reason in VALUE_REASONS:
        for value, pixels in listed_in(outcome.detail):
            yield (outcome.reason, value), (pixels, 1)


def summed(pairs: Iterable[Tuple[int, int]]) -> Tuple[int, int]:
    """(pixels, masks) added up: the combiner of :func:`offending_values`."""
    pixels = masks = 0
    for p, m in pairs:
        pixels, masks = pixels + p, masks + m
    return pixels, masks


def top_values(totals: Iterable[Tuple[Tuple[str, str], Tuple[int, int]]],
               limit: int = TOP_VALUES) -> Dict[str, List[Tuple[str, int, int]]]:
    """{reason: [(value, pixels, masks), ...]} the most pixels first, ``limit`` per reason."""
    by_reason: Dict[str, List[Tuple[str, int, int]]] = {}
    for (reason, value), (pixels, masks) in totals:
        by_reason.setdefault(reason, []).append((value, pixels, masks))
    return {reason: sorted(rows, key=lambda row: (-row[1], -row[2], row[0]))[:limit]
            for reason, rows in sorted(by_reason.items())}


def reason_text(reason: str, n: int, values: Sequence[Tuple[str, int, int]] = ()) -> str:
    """``mask_value_unmapped 26 (value 255: 1,024 px in 26 masks; fix: ...)``."""
    named = "; ".join(f"{'colour' if value.startswith('(') else 'value'} {value}"
                      + (f": {pixels:,} px in " if pixels else " in ") + f"{masks:,} mask(s)" for value, pixels, masks in values)
    fix = FIXES.get(reason, "").format(value=values[0][0] if values else "V")
    inside = "; ".join(part for part in (named, f"fix: {fix}" if fix else "") if part)
    return f"{reason} {n:,}" + (f" ({inside})" if inside else "")


def reject_fraction(counts: Dict[Tuple[str, str], int], discovered: int) -> Tuple[int, int]:
    """(rejected, considered): inputs rejected, of those the user's selection kept."""
    filtered = sum(n for (status, _), n in counts.items() if status == FILTERED)
    rejected = sum(n for (status, _), n in counts.items() if status == REJECTED)
    return rejected, discovered - filtered


def reject_refusal(counts: Iterable[Tuple[Tuple[str, str], int]], discovered: int,
                   max_fraction: float, values: Dict[str, List[Tuple[str, int, int]]] = None) -> Optional[Refusal]:
    """A Refusal naming the top reasons, the values each rejected most often (``values``: :func:`top_values`) and
    the option that fixes it, when more than ``max_fraction`` of the selected inputs were rejected.

    ``counts``: ``((status, reason), n)`` of the inputs filtered out and rejected before writing.
    """
    table: Dict[Tuple[str, str], int] = {}
    for key, n in counts:
        table[key] = table.get(key, 0) + n
    rejected, considered = reject_fraction(table, discovered)
    if considered <= 0 or rejected <= max_fraction * considered:
        return None
    reasons = sorted(((n, reason) for (status, reason), n in table.items() if status == REJECTED),
                     key=lambda item: (-item[0], item[1]))
    top = ", ".join(reason_text(reason, n, (values or {}).get(reason, ())) for n, reason in reasons[:TOP_REASONS])
    more = f" and {len(reasons) - TOP_REASONS} more reason(s)" if len(reasons) > TOP_REASONS else ""
    return Refusal(GATE, (
        f"{rejected:,} of {considered:,} selected inputs ({rejected / considered:.1%}) were rejected, more than "
        f"--max_reject_fraction {max_fraction:g} allows; top reasons: {top}{more}. Nothing was written or "
        "published. A wrong --mask_template, --num_classes, --ignore_label or map, or a broken mount, looks like "
        "this; if the corpus really is this bad, raise --max_reject_fraction (1 turns the gate off)"))


def count_refusal(counts: Iterable[Tuple[Tuple[str, str], int]], discovered: int, valid: int) -> Optional[Refusal]:
    """A Refusal when the inputs filtered out, rejected before writing and found valid are not every
    discovered input. ``counts``: ``((status, reason), n)`` of the inputs filtered out or rejected."""
    filtered = sum(n for (status, _), n in counts if status == FILTERED)
    rejected = sum(n for (status, _), n in counts if status == REJECTED)
    accounted = filtered + rejected + valid
    if accounted == discovered:
        return None
    return Refusal(COUNTS_GATE, (
        f"the counts do not reconcile before writing (at CheckCounts): {discovered:,} inputs discovered, but "
        f"{filtered:,} filtered out, {rejected:,} rejected and {valid:,} valid make {accounted:,}; "
        f"{discovered - accounted:+,} between discovery and validation. Nothing was written or published. "
        "This is a bug, not bad input: please report it with the run's log"))


NO_TRAIN_GATE = "no_train"
TRAIN = "train"


def split_signal(split: str, class_pixels: Sequence[int], label: int) -> Tuple[str, Tuple[int, int]]:
    """(split, (1, whether the pair holds any class: a class pixel, or a label)): the no-train gate's input."""
    return split, (1, int(sum(class_pixels) > 0 or (not class_pixels and label >= 0)))


def train_refusal(splits: Iterable[Tuple[str, Tuple[int, int]]], allow: bool) -> Optional[Refusal]:
    """A Refusal when the version would have no train split, or a train split none of whose pairs holds a class
    (every pixel ignored), unless ``allow`` (--allow_no_train). ``splits``: (split, (pairs, pairs holding a class))
    of the unique valid pairs."""
    table = dict(splits)
    if allow:
        return None
    pairs, holding = table.get(TRAIN, (0, 0))
    found = ", ".join(f"{name} {n:,}" for name, (n, _) in sorted(table.items())) or "none: no valid pair"
    if not pairs:
        largest = max(sorted(table), key=lambda name: table[name][0]) if table else ""
        hint = (f"name the split to train on with --split_names (e.g. {largest}=train)" if table
                else "fix what rejected them (the counts above)")
        return Refusal(NO_TRAIN_GATE, f"the version would have no train split (splits: {found}), and nothing could "
                                      f"train on it: {hint}, or publish it anyway with --allow_no_train. Nothing "
                                      "was written or published")
    if not holding:
        return Refusal(NO_TRAIN_GATE, f"no pair of the train split holds a pixel of any class ({pairs:,} pairs, every "
                                      "pixel the ignore label): check --ignore_label and the map (--label_map), or "
                                      "publish it anyway with --allow_no_train. Nothing was written or published")
    return None


# The refusal a run reports when several gates refuse: a bug first, then the inputs' own faults before what
# follows from them (all inputs rejected also leaves no train split). Beam gives the refusals in no fixed order.
GATE_ORDER = (COUNTS_GATE, GATE, "max_growth", NO_TRAIN_GATE)


def first_refusal(refusals: Sequence[Refusal]) -> Refusal:
    """The refusal to report of ``refusals`` (not empty), the same on every runner: by GATE_ORDER, then message."""
    return min(refusals, key=lambda refusal: (GATE_ORDER.index(refusal.gate) if refusal.gate in GATE_ORDER
                                              else len(GATE_ORDER), refusal.gate, refusal.message))
