"""Splits you can trust (docs/leakage.md), at launch: the options of ``--help``, their checks, and the spec of
GroupNearDuplicates and ProfileVersion, given the output's published version (the parent)."""

from typing import Callable, List, Optional, Tuple

from beam_pipeline.core import layout
from beam_pipeline.core.leakage import drift
from beam_pipeline.core.leakage.components import ONE_WORKER_PAIRS
from beam_pipeline.core.leakage.groups import COLUMN, OFF, POLICIES, SplitGroupSpec, parse_split_group, resolved_policy
from beam_pipeline.core.leakage.index import parent_index
from beam_pipeline.core.leakage.phash import BITS, DEFAULT_RADIUS
from beam_pipeline.core.leakage.splits import Policy
from beam_pipeline.core.selection import SplitSpec
from beam_pipeline.stages.leakage.components import ROUNDS
from beam_pipeline.stages.specs import DriftSpec, LeakageSpec

MAX_RADIUS = 32               # 33 bands of 7-8 bits: beyond, every bucket would hold most hashes


def add_leakage_arguments(parser) -> None:
    group = parser.add_argument_group("splits you can trust: split groups, near duplicates, drift (docs/leakage.md)")
    group.add_argument(
        "--split_group", default=None,
        help="Keep each group of pairs in one split: column:NAME (a listing column, e.g. a camera or a drive), folder "
             "or folder:N (the image's folder, or its Nth parent), or regex:PATTERN over the image's path relative to "
             "the input, whose first group names the group (CamVid's 0001TP_006690.png: "
             "regex:([^/]+)_[^_/]+\\.png$). Fraction splits then hash the group instead of the pair, so that no group "
             "spans two splits; with a split column, the groups the listing puts in two splits are counted in a "
             "warning. A pair the option gives no group is rejected (no_split_group).")
    group.add_argument(
        "--near_duplicates", default=None, choices=POLICIES,
        help="Images that are near copies of each other (a JPEG re-encode, a resize, a small crop, a brightness "
             "change, the next frame of a video), found by a perceptual hash of the pixels validation decodes. "
             "group (default on a new output): near-duplicate images, and with them their split groups, go into one "
             "split, chosen by a stable hash of their component, so that the test split does not measure memory; "
             "exact duplicates are still written once. report: keep the splits and warn with the cross-split pairs. "
             "off: compare nothing (the version is published as before this option existed). Not given on a "
             "re-run: the published version's choice, and report (its splits kept, said in one line) for a version "
             "published before near-duplicate grouping. Splits that come from the listing (a split column, "
             "folders) are never moved: their cross-split pairs are reported. manifest.json's leakage section, "
             "the version's leakage/pairs file and report.html list what was found.")
    group.add_argument(
        "--near_duplicates_radius", type=int, default=None,
        help=f"Two images are near duplicates when their {BITS}-bit hashes differ in at most this many bits "
             f"(default {DEFAULT_RADIUS}, chosen by measuring planted copies against distinct photographs: "
             f"docs/leakage.md). Smaller finds fewer copies; larger also pairs similar but distinct scenes and compares "
             f"more hashes. 0..{MAX_RADIUS}.")
    group.add_argument(
        "--near_duplicates_one_worker_pairs", type=int, default=ONE_WORKER_PAIRS,
        help=f"How the near-duplicate pairs are joined into components. An input of at most this many pairs "
             f"(counted at launch, no further than this) joins them by union-find, each bundle's pairs and then one "
             f"worker, in one step; its memory grows with the images that have a near duplicate, so a larger input, "
             f"or one that cannot be counted (a COCO layout), joins them by Hash-to-Min rounds across the workers "
             f"({ROUNDS} steps, each a shuffle: docs/leakage.md). Both give the same components. Default "
             f"{ONE_WORKER_PAIRS:,}; 0: always the rounds.")
    group.add_argument(
        "--drift_threshold", type=float, default=drift.DEFAULT_THRESHOLD,
        help="Each version compares itself with the one it replaces: each class's share of the pixels and of the "
             "images (the largest change, L-infinity), and the distributions of image sizes and brightness "
             "(Jensen-Shannon divergence, base 2, 0..1). What moved more than this gets a warning line and is marked "
             f"in report.html's drift table. Default {drift.DEFAULT_THRESHOLD:g} (docs/leakage.md, Drift).")


def checked(split_group: Optional[str], policy: Optional[str], radius: Optional[int],
            threshold: float, one_worker_pairs: int = ONE_WORKER_PAIRS) -> Tuple[Optional[SplitGroupSpec], int]:
    """The parsed --split_group and the radius; ValueError with one line."""
    if one_worker_pairs < 0:
        raise ValueError(f"--near_duplicates_one_worker_pairs must be 0 or more, got {one_worker_pairs}")
    group = parse_split_group(split_group) if split_group else None
    radius = DEFAULT_RADIUS if radius is None else radius
    if not 0 <= radius <= MAX_RADIUS:
        raise ValueError(f"--near_duplicates_radius must be between 0 and {MAX_RADIUS}, got {radius}")
    if policy == OFF and radius != DEFAULT_RADIUS:
        raise ValueError("--near_duplicates_radius has no effect with --near_duplicates off")
    if not threshold > 0:
        raise ValueError(f"--drift_threshold must be above 0, got {threshold}")
    return group, radius


def check_split_group_column(group: Optional[SplitGroupSpec], columns: Optional[List[str]]) -> Optional[str]:
    """Why --split_group column:NAME cannot work on this input (None: it can)."""
    if group is None or group.kind != COLUMN:
        return None
    if columns is None:
        return f"--split_group {group.text} needs a listing file input; use folder, folder:N or regex:PATTERN"
    if group.column not in columns:
        return f"--split_group: the listing has no column {group.column!r} (columns: {', '.join(columns)})"
    return None


def enabled(policy: Optional[str], group: Optional[SplitGroupSpec]) -> bool:
    """Whether this run compares hashes or checks split groups: --near_duplicates off without --split_group
    publishes exactly as before near duplicates existed."""
    return policy != OFF or group is not None


def leakage_spec(config, split: SplitSpec, previous: Optional[dict], data_dir: str,
                 rounds: Callable[..., int] = lambda config: ROUNDS) -> Optional[LeakageSpec]:
    """GroupNearDuplicates' spec for this run, or None when it does not run (``enabled``); ``rounds(config)``:
    FindComponents' rounds (0: union-find in one worker, launcher/runners.component_rounds, which counts the input:
    called only when grouping runs)."""
    policy, note = resolved_policy(config.near_duplicates, previous)
    if not enabled(policy, config.split_group):
        return None
    group_text = config.split_group.text if config.split_group else ""
    parent, rebuilt = parent_index(previous, config.near_duplicates_radius, group_text)
    return LeakageSpec(output=config.output, data_dir=data_dir, version=layout.version_entry(data_dir),
                       policy=Policy(policy, split, config.split_names), radius=config.near_duplicates_radius,
                       split_group=group_text, rounds=rounds(config), parent=parent if policy != OFF else None,
                       rebuilt=(rebuilt or None) if previous is not None else None, note=note)


def drift_spec(config, previous: Optional[dict]) -> DriftSpec:
    """ProfileVersion's spec: the parent's profile to compare with, and the threshold."""
    return DriftSpec(task=config.task, num_classes=config.num_classes, threshold=config.drift_threshold,
                     parent=(previous or {}).get("profile"), parent_run_id=(previous or {}).get("run_id"),
                     class_names=tuple(config.class_names))
