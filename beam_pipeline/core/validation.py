"""Checking a whole pair from its file bytes: the pure heart of ValidatePairs."""

import dataclasses
from typing import Optional, Tuple, Union

from beam_pipeline.core import checks, masks
from beam_pipeline.core.points import flatten_points, sample_points
from beam_pipeline.core.checks import Limits, Rejection
from beam_pipeline.core.hashing import sha256_hex
from beam_pipeline.core.records import PairRef, ValidPair


@dataclasses.dataclass(frozen=True)
class Checked:
    """A valid pair, with the bytes its record stores when validation has them at hand."""
    pair: ValidPair
    image: bytes                 # the image as stored: its file's bytes, or validation's conversion
    mask: Optional[bytes]        # the mask as stored (b"" for classification); None when only the writer
                                 # converts it (a mask read through a map: core/mapped_masks.py)


def validate_segmentation(ref: PairRef, image_bytes: bytes, mask_bytes: bytes, limits: Limits,
                          points_per_class: int = 8) -> Union[ValidPair, Rejection]:
    """Check a pair; a valid one keeps its summaries and up to ``points_per_class`` points per class."""
    checked = checked_segmentation(ref, image_bytes, mask_bytes, limits, points_per_class)
    return checked if isinstance(checked, Rejection) else checked.pair


def validate_classification(ref: PairRef, image_bytes: bytes, limits: Limits,
                            class_names: Tuple[str, ...]) -> Union[ValidPair, Rejection]:
    checked = checked_classification(ref, image_bytes, limits, class_names)
    return checked if isinstance(checked, Rejection) else checked.pair


def checked_segmentation(ref: PairRef, image_bytes: bytes, mask_bytes: bytes, limits: Limits,
                         points_per_class: int = 8) -> Union[Checked, Rejection]:
    """:func:`validate_segmentation`, with the stored bytes."""
    image = checks.check_image(image_bytes, limits)
    if isinstance(image, Rejection):
        return image
    mask = masks.check_mask(mask_bytes, limits)
    if isinstance(mask, Rejection):
        return mask
    mismatch = checks.check_same_size(image, mask)
    if mismatch:
        return mismatch
    point_classes, point_yx = flatten_points(
        sample_points(mask.values, ref.key, limits.num_classes, points_per_class, mask.class_pixels),
        limits.num_classes)
    pair = ValidPair(
        ref=ref, height=image.height, width=image.width, image_format=image.stored_format,
        image_sha256=sha256_hex(image_bytes),
        image_stored_bytes=len(image.stored) if image.stored is not None else len(image_bytes),
        image_converted=image.stored is not None,
        mask_sha256=sha256_hex(mask_bytes),
        mask_stored_bytes=len(mask.stored) if mask.stored is not None else mask.stored_estimate or len(mask_bytes),
        mask_converted=mask.stored is not None or mask.converted,
        class_pixels=mask.class_pixels, ignore_pixels=mask.ignore_pixels, source_pixels=mask.source_pixels,
        channel_sum=image.channel_sum, channel_sum_squares=image.channel_sum_squares,
        point_classes=point_classes, point_yx=point_yx)
    stored_mask = mask.stored if mask.stored is not None else (None if mask.converted else mask_bytes)
    return Checked(pair, image.stored if image.stored is not None else image_bytes, stored_mask)


def checked_classification(ref: PairRef, image_bytes: bytes, limits: Limits,
                           class_names: Tuple[str, ...]) -> Union[Checked, Rejection]:
    """:func:`validate_classification`, with the stored bytes."""
    label = checks.parse_label(ref.label, class_names, limits.num_classes, limits.label_map)
    if isinstance(label, Rejection):
        return label
    image = checks.check_image(image_bytes, limits)
    if isinstance(image, Rejection):
        return image
    pair = ValidPair(
        ref=ref, height=image.height, width=image.width, image_format=image.stored_format,
        image_sha256=sha256_hex(image_bytes),
        image_stored_bytes=len(image.stored) if image.stored is not None else len(image_bytes),
        image_converted=image.stored is not None, label=label,
        channel_sum=image.channel_sum, channel_sum_squares=image.channel_sum_squares)
    return Checked(pair, image.stored if image.stored is not None else image_bytes, b"")


