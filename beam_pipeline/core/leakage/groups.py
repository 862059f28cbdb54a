"""Split groups and near-duplicate policy: which pairs must share a split, and which split a component goes to.

``--split_group`` names the group of a pair: a listing column (``column:NAME``), the image's folder or its Nth
parent (``folder``, ``folder:N``), or the first group of a regular expression over the image's path relative to
the input (``regex:PATTERN``). Fraction splits then hash the group instead of the pair's key, so that no group
spans two splits. ``--near_duplicates group`` goes one step further: near-duplicate images join their groups (or
their pairs, without ``--split_group``) into components, and a component of more than one unit goes to the split
of a stable hash of the component. A unit alone keeps the split its own hash gives: the split it had before.
"""

import dataclasses
import posixpath
import re
from typing import Optional, Tuple

from beam_pipeline.core.hashing import stable_hash
from beam_pipeline.core.records import PairRef

GROUP, REPORT, OFF = "group", "report", "off"          # --near_duplicates
POLICIES = (GROUP, REPORT, OFF)
COLUMN, FOLDER, REGEX = "column", "folder", "regex"
UNIT_SALT = "leakage-unit"
COMPONENT_PREFIX = "component:"     # the key a component's split is hashed from (core/selection.assign_split)


@dataclasses.dataclass(frozen=True)
class SplitGroupSpec:
    """Where a pair's split group comes from (``--split_group``)."""
    kind: str                 # COLUMN | FOLDER | REGEX
    column: str = ""          # COLUMN: the listing column
    depth: int = 1            # FOLDER: 1 is the image's folder, 2 its parent, ...
    pattern: str = ""         # REGEX: over the image's path relative to the input; its first group names the group

    @property
    def text(self) -> str:
        """The option as given back: ``column:camera``, ``folder:2``, ``regex:...``."""
        if self.kind == COLUMN:
            return f"column:{self.column}"
        if self.kind == FOLDER:
            return "folder" if self.depth == 1 else f"folder:{self.depth}"
        return f"regex:{self.pattern}"


def parse_split_group(text: str) -> SplitGroupSpec:
    """``column:NAME``, ``folder``, ``folder:N`` or ``regex:PATTERN``; ValueError with one line otherwise."""
    kind, _, value = text.strip().partition(":")
    if kind == COLUMN and value:
        return SplitGroupSpec(COLUMN, column=value)
    if kind == FOLDER and not value:
        return SplitGroupSpec(FOLDER)
    if kind == FOLDER and value.isdigit() and int(value) >= 1:
        return SplitGroupSpec(FOLDER, depth=int(value))
    if kind == REGEX and value:
        try:
            compiled = re.compile(value)
        except re.error as error:
            raise ValueError(f"--split_group regex:{value}: not a regular expression ({error})") from None
        if compiled.groups < 1:
            raise ValueError(f"--split_group regex:{value}: the pattern needs a group, (...), that names the group")
        return SplitGroupSpec(REGEX, pattern=value)
    raise ValueError(f"--split_group: expected column:NAME, folder, folder:N (N >= 1) or regex:PATTERN, got {text!r}")


def group_of(spec: SplitGroupSpec, ref: PairRef) -> Optional[str]:
    """The split group of ``ref``, or None when it has none (an empty column, a path the pattern does not match)."""
    if spec.kind == COLUMN:
        value = ref.meta().get(spec.column)
        text = "" if value is None else str(value).strip()
        return text or None
    path = ref.source_id or ""
    if spec.kind == FOLDER:
        folder = posixpath.dirname(path)
        for _ in range(spec.depth - 1):
            folder = posixpath.dirname(folder)
        return folder or "."
    match = re.search(spec.pattern, path)
    return match.group(1) if match and match.group(1) else None


def split_unit(ref: PairRef) -> str:
    """What a pair's split is hashed from: its split group, else its key."""
    return ref.group or ref.key


def unit_id(ref: PairRef) -> int:
    """A 64-bit id of the pair's split unit (a group, or the pair alone): the node of the near-duplicate graph."""
    return stable_hash(UNIT_SALT, ("g:" + ref.group) if ref.group else ("k:" + ref.key)) >> 1


def component_key(component: int) -> str:
    """The key a component of several units is given its split by (stable: the component's smallest unit id)."""
    return f"{COMPONENT_PREFIX}{component:016x}"


def parse_policy(text: Optional[str]) -> Optional[str]:
    """``--near_duplicates``: None (not given) or one of POLICIES."""
    if text is None or text in POLICIES:
        return text
    raise ValueError(f"--near_duplicates: expected one of {', '.join(POLICIES)}, got {text!r}")


def resolved_policy(given: Optional[str], parent: Optional[dict]) -> Tuple[str, Optional[str]]:
    """(the policy this run applies, a line saying why when it is not what the user might expect).

    Not given: the parent version's policy (its manifest's ``leakage``), so that a re-run never moves a split it did
    not ask to move; ``report`` on an output published before near-duplicate grouping existed, which keeps its
    splits, and says so; ``group`` on a new output."""
    if given is not None:
        return given, None
    if parent is None:
        return GROUP, None
    recorded = (parent.get("leakage") or {}).get("policy") or (parent.get("options") or {}).get("near_duplicates")
    if recorded in POLICIES:
        return recorded, None
    return REPORT, ("near-duplicates: the published version was split before near-duplicate grouping existed, so "
                    "its splits are kept (--near_duplicates report); give --near_duplicates group to group them, "
                    "which moves the pairs of near-duplicate components into one split")
