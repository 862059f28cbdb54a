"""One mask: decoded, checked and stored, as class ids or through a map (docs/validation.md, Label maps).

A mask's stored values are class ids (``plain``), or become class ids through a map (``mapped``: ``--label_map``,
``--color_map``, ``--reduce_zero_label``). The map files are parsed by ``maps`` (with the maps shipped in
``shipped/``); ``values`` and ``colors`` hold one table per map, which summarises a mask for validation and
converts every pixel for the writer; ``report`` sets the values found beside their classes, with the warnings.
Below them, core/pixels.py (the file limits, opening, the fast path's checks); above them, core/validation.py
(the pair). :func:`check_mask` and :func:`stored_mask` choose between the two.
"""

from typing import Optional, Union

from beam_pipeline.core.masks.mapped import check_mapped_mask, stored_mapped_mask
from beam_pipeline.core.masks.maps import MaskMap
from beam_pipeline.core.masks.plain import MaskCheck, check_plain_mask, stored_plain_mask
from beam_pipeline.core.pixels import Limits
from beam_pipeline.core.reasons import Rejection

__all__ = ["MaskCheck", "check_mask", "stored_mask"]


def check_mask(data: bytes, limits: Limits, mask_map: Optional[MaskMap] = None) -> Union[MaskCheck, Rejection]:
    """A valid mask's size, class histogram and values (its classes through ``mask_map`` when there is one), or why
    it is rejected."""
    if mask_map is not None:
        return check_mapped_mask(data, limits, mask_map)
    return check_plain_mask(data, limits)


def stored_mask(data: bytes, limits: Optional[Limits] = None, mask_map: Optional[MaskMap] = None) -> Union[bytes,
                                                                                                           Rejection]:
    """The bytes :func:`check_mask` stores for a mask that is converted (an 8-bit grey PNG of class ids), without
    its checks: every pixel through ``mask_map`` when there is one (it needs ``limits`` then)."""
    if mask_map is not None:
        return stored_mapped_mask(data, limits, mask_map)
    return stored_plain_mask(data)
