"""The split a pair ends in once near-duplicate components are known, decided after validation.

Selection gives each pair the split of its unit (its ``--split_group``, or its key). With ``--near_duplicates
group`` and fraction splits, a component of several units goes to the split of a stable hash of the component:
the smallest unit id in it (``groups.component_key``), hashed like any key by core/selection.py, so that the split
shares follow the fractions. A unit alone, or a run whose splits come from the listing (a split column, folders)
or from ``report``, keeps its split. Nothing here depends on the order pairs arrive in.
"""

import dataclasses
from typing import Optional, Tuple

from beam_pipeline.core.hashing import stable_hash
from beam_pipeline.core.leakage.groups import GROUP, component_key
from beam_pipeline.core.selection import SplitSpec, assign_split, named

IMAGE_SALT = "leakage-image"


def image_id(key: str) -> int:
    """A pair's 63-bit id in the near-duplicate graph (its key's stable hash)."""
    return stable_hash(IMAGE_SALT, key) >> 1


@dataclasses.dataclass(frozen=True)
class Policy:
    """What GroupNearDuplicates does with the components it finds."""
    policy: str = GROUP                     # --near_duplicates as applied (groups.resolved_policy)
    split: Optional[SplitSpec] = None       # where the splits came from; only fraction splits are regrouped
    names: Tuple[Tuple[str, str], ...] = ()  # --split_names

    @property
    def moves_splits(self) -> bool:
        """Whether components are put into one split: ``group`` over fraction splits."""
        return self.policy == GROUP and self.split is not None and self.split.mode == "hash"

    def component_split(self, component: int) -> str:
        """The split of a component of several units."""
        return named(assign_split(self.split, component_key(component), {}, ""), self.names)

    def final_split(self, split: str, component: Optional[int]) -> str:
        """The split a pair of ``split`` ends in, its unit in ``component`` (None: alone)."""
        if component is None or not self.moves_splits:
            return split
        return self.component_split(component)
