"""The gates a run passes before anything is written: the reject rate, and counts that add up.

Nearly every input rejected is the usual sign of a wrong option (``--mask_template``,
``--num_classes``) or a broken mount, not of a bad corpus: publishing that empty or thin dataset
would replace a good one. Inputs that went missing between discovery and validation are a bug,
never bad input: a run whose counts do not add up is refused before it writes a shard (and, should
they still not add up at the end, before it publishes: core/manifest.py). Pure: counts in, an
optional Refusal out.
"""

from typing import Dict, Iterable, Optional, Tuple

from beam_pipeline.core.records import FILTERED, REJECTED, Refusal

DEFAULT_MAX_REJECT_FRACTION = 0.1
TOP_REASONS = 3
GATE = "max_reject_fraction"
COUNTS_GATE = "counts"          # the counts do not reconcile: a bug (launcher: RunFailed, exit 1)


def reject_fraction(counts: Dict[Tuple[str, str], int], discovered: int) -> Tuple[int, int]:
    """(rejected, considered): inputs rejected, of those the user's selection kept."""
    filtered = sum(n for (status, _), n in counts.items() if status == FILTERED)
    rejected = sum(n for (status, _), n in counts.items() if status == REJECTED)
    return rejected, discovered - filtered


def reject_refusal(counts: Iterable[Tuple[Tuple[str, str], int]], discovered: int,
                   max_fraction: float) -> Optional[Refusal]:
    """A Refusal naming the top reasons when more than ``max_fraction`` of the selected inputs were rejected.

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
    top = ", ".join(f"{reason} {n:,}" for n, reason in reasons[:TOP_REASONS])
    more = f" and {len(reasons) - TOP_REASONS} more reason(s)" if len(reasons) > TOP_REASONS else ""
    return Refusal(GATE, (
        f"{rejected:,} of {considered:,} selected inputs ({rejected / considered:.1%}) were rejected, more than "
        f"--max_reject_fraction {max_fraction:g} allows; top reasons: {top}{more}. Nothing was written or "
        "published. A wrong --mask_template, --num_classes or --ignore_label, or a broken mount, looks like "
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
