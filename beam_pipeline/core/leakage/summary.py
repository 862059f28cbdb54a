"""What a run says about its near duplicates: tallies gathered from every pair (mergeable, in any order), and the
``leakage`` section of manifest.json, the summary's line and the warnings built from them."""

import dataclasses
from typing import Dict, List, Optional, Tuple

import numpy as np

from beam_pipeline.core.leakage import phash
from beam_pipeline.core.leakage.groups import GROUP, REPORT

CLOSEST = 12                  # the closest cross-split pairs kept for the report (thumbnails side by side)
MAX_CAPPED = 10               # capped band runs named in the manifest
SIZE_BINS = (2, 3, 5, 9, 17, 33, 65, 129, 257, 1025)   # component sizes: 2, 3-4, 5-8, ... images


@dataclasses.dataclass
class Tally:
    """Counts over pairs and units, merged across workers (``merge``): all plain ints and small lists."""
    pairs: int = 0                                   # near-duplicate pairs (different pairs within the radius)
    distances: Dict[int, int] = dataclasses.field(default_factory=dict)
    cross_before: int = 0                            # pairs whose two images were in two splits before grouping
    cross_after: int = 0                             # ... and after
    same_unit: int = 0                               # pairs inside one split group
    closest: List[tuple] = dataclasses.field(default_factory=list)   # (distance, a, b, split a, b, after a, b, keys)
    moved: int = 0                                   # pairs whose split grouping changed
    units: Dict[str, int] = dataclasses.field(default_factory=dict)  # split units per final split
    spanning: int = 0                                # split groups the listing put in more than one split
    spanning_examples: List[str] = dataclasses.field(default_factory=list)
    component_sizes: Dict[int, int] = dataclasses.field(default_factory=dict)   # size bin -> components
    largest: int = 0
    capped: List[Tuple[int, int]] = dataclasses.field(default_factory=list)     # (run length, band)
    compared: int = 0                                # distances computed in the band buckets
    finished_in_one_worker: int = 0                  # units whose components the rounds did not finish

    def merge(self, other: "Tally") -> "Tally":
        self.pairs += other.pairs
        for table, more in ((self.distances, other.distances), (self.units, other.units),
                            (self.component_sizes, other.component_sizes)):
            for key, n in more.items():
                table[key] = table.get(key, 0) + n
        self.cross_before += other.cross_before
        self.cross_after += other.cross_after
        self.same_unit += other.same_unit
        self.closest = sorted(self.closest + other.closest)[:CLOSEST]
        self.moved += other.moved
        self.spanning += other.spanning
        self.spanning_examples = sorted(self.spanning_examples + other.spanning_examples)[:5]
        self.largest = max(self.largest, other.largest)
        self.capped = sorted(self.capped + other.capped, reverse=True)[:MAX_CAPPED]
        self.compared += other.compared
        self.finished_in_one_worker += other.finished_in_one_worker
        return self


def size_bin(images: int) -> int:
    """The lower bound of the SIZE_BINS bin of a component of ``images`` images."""
    chosen = SIZE_BINS[0]
    for lower in SIZE_BINS:
        if images >= lower:
            chosen = lower
    return chosen


def pair_tally(distance: int, units: Tuple[int, int], before: Tuple[str, str], after: Tuple[str, str],
               names: Tuple[str, str], keys: Tuple[str, str]) -> Tally:
    """The tally of one near-duplicate pair."""
    crossed = before[0] != before[1]
    tally = Tally(pairs=1, distances={distance: 1}, cross_before=int(crossed), cross_after=int(after[0] != after[1]),
                  same_unit=int(units[0] == units[1]))
    if crossed:
        tally.closest = [(distance, names[0], names[1], before[0], before[1], after[0], after[1], keys[0], keys[1])]
    return tally


def closest_entry(row: tuple) -> dict:
    distance, a, b, split_a, split_b, after_a, after_b, key_a, key_b = row
    return {"a": a, "b": b, "distance": distance, "splits_before": [split_a, split_b],
            "splits_after": [after_a, after_b], "keys": [key_a, key_b]}


def section(tally: Tally, *, policy: str, radius: int, bands: dict, split_group: str, moves_splits: bool,
            pairs_file: str, index: dict, note: Optional[str] = None, rounds: int = 0) -> dict:
    """manifest.json's ``leakage``: the hash and radius, the components and their sizes, the cross-split pairs
    before and after grouping, the split units per split, the files."""
    components = sum(tally.component_sizes.values())
    return {
        "policy": policy,
        "applied": "grouped into one split" if moves_splits else ("reported" if policy != "off" else "off"),
        "split_group": split_group or None,
        "hash": {"name": phash.NAME, "bits": phash.BITS, "radius": radius, **bands},
        "pairs": tally.pairs,
        "pairs_within_a_split_group": tally.same_unit,
        "distance_histogram": [tally.distances.get(d, 0) for d in range(radius + 1)],
        "components": {"count": components, "largest": tally.largest,
                       "sizes": {_bin_name(lower): tally.component_sizes[lower]
                                 for lower in sorted(tally.component_sizes)}},
        "cross_split_pairs": {"before": tally.cross_before, "after": tally.cross_after},
        "moved_pairs": tally.moved,
        "groups_per_split": dict(sorted(tally.units.items())),
        "groups_in_two_splits": tally.spanning,
        "groups_in_two_splits_examples": tally.spanning_examples,
        "closest_cross_split": [closest_entry(row) for row in tally.closest],
        "capped_runs": [{"band": band, "hashes": length} for length, band in tally.capped],
        "distances_computed": tally.compared,
        "rounds": rounds,
        "finished_in_one_worker": tally.finished_in_one_worker,
        "pairs_file": pairs_file,
        "index": index,
        "note": note,
    }


def _bin_name(lower: int) -> str:
    upper = next((b - 1 for b in SIZE_BINS if b > lower), None)
    if upper is None:
        return f"{lower}+"
    return str(lower) if upper == lower else f"{lower}-{upper}"


def summary_line(leakage: Optional[dict]) -> List[str]:
    """The summary's line (and the note of a kept split, when there is one)."""
    if not leakage:
        return []
    lines = [leakage["note"]] if leakage.get("note") else []
    radius = leakage["hash"]["radius"]
    components = leakage["components"]
    cross = leakage["cross_split_pairs"]
    # no "pair" in the line: a classification run counts images (core/tasks.units); the file is in the manifest
    text = (f"near-duplicates: {leakage['pairs']:,} within {radius} of {leakage['hash']['bits']} bits in "
            f"{components['count']:,} components (largest {components['largest']:,} images); "
            f"across splits {cross['before']:,} before grouping, {cross['after']:,} after")
    if leakage.get("moved_pairs"):
        text += f"; {leakage['moved_pairs']:,} moved to another split"
    lines.append(text + " (manifest.json: leakage)")
    return lines


def warnings(leakage: dict, split_mode: str) -> List[dict]:
    """``warning:`` lines: pairs left across splits (``report``, or splits the listing gives), split groups the
    listing puts in two splits, capped band runs."""
    found = []
    cross = leakage["cross_split_pairs"]["after"]
    if cross:
        why = ("--near_duplicates report keeps the splits" if leakage["policy"] == REPORT else
               f"the splits come from the listing ({split_mode}), which grouping never moves"
               if leakage["policy"] == GROUP else "")
        found.append({"leakage": "cross_split", "message": (
            f"{cross:,} near-duplicate pairs lie across splits ({why}): the test score may measure memory; "
            f"they are listed in {leakage['pairs_file']} and report.html")})
    if leakage.get("groups_in_two_splits"):
        examples = ", ".join(leakage.get("groups_in_two_splits_examples") or [])
        found.append({"leakage": "groups_in_two_splits", "message": (
            f"{leakage['groups_in_two_splits']:,} split groups (--split_group {leakage['split_group']}) lie in two "
            f"or more splits of the listing, e.g. {examples}")})
    if leakage.get("capped_runs"):
        largest = leakage["capped_runs"][0]
        found.append({"leakage": "capped", "message": (
            f"{len(leakage['capped_runs'])} runs of hashes sharing a band value were too long to compare pair by "
            f"pair (the longest {largest['hashes']:,}: blank or repeated frames?); each hash was compared with its "
            "nearest neighbours in hash order instead")})
    if leakage.get("finished_in_one_worker"):
        found.append({"leakage": "rounds", "message": (
            f"near-duplicate components of {leakage['finished_in_one_worker']:,} split units were still joining "
            f"after {leakage['rounds']} rounds (chains longer than a few thousand images) and were finished in one "
            "worker")})
    return found


def plan_estimate(hashes: List[bytes], selected: int, radius: int) -> Optional[dict]:
    """``--plan``'s near-duplicate estimate from the hashes of its sampled valid images: the pairs within the radius
    among them, and the share of all selected images with a near duplicate, under the model that any two images are
    near duplicates with the sample's pair rate ``p`` (the share is ``1 - (1 - p) ** (selected - 1)``)."""
    hashes = [h for h in hashes if len(h) == phash.BYTES]
    n = len(hashes)
    if n < 2:
        return None
    words = phash.as_words(hashes)
    close = 0
    with_duplicate = set()
    for i in range(n - 1):
        near = i + 1 + np.flatnonzero(phash.distances(words[i + 1:], words[i]) <= radius)
        close += len(near)
        if len(near):
            with_duplicate.update([i, *near.tolist()])
    rate = close / (n * (n - 1) / 2)
    return {"radius": radius, "sampled": n, "pairs_in_sample": close, "images_in_sample": len(with_duplicate),
            "share_estimate": 1 - (1 - rate) ** max(selected - 1, 0)}


def plan_line(estimate: Optional[dict]) -> List[str]:
    if not estimate:
        return []
    return [f"  near duplicates          {estimate['images_in_sample']:,} of the {estimate['sampled']:,} sampled images "
            f"have one ({estimate['pairs_in_sample']:,} matches within radius {estimate['radius']}); about "
            f"{100 * estimate['share_estimate']:.1f} % of the selected images have one (docs/leakage.md)"]
