"""Checking a whole pair from its file bytes: the pure heart of ValidatePairs, and the bytes its record stores.

The image is checked by core/images.py and the mask by core/masks/ (through the mask map when there is one),
both within the file limits of core/pixels.py; here the two are put together: the same size, the class
histogram, the crop sample points, the digests. A classification label is read as a class name, an id, or
through the label map. :func:`record_files` gives the bytes a valid pair's record stores, converted again
from its files' bytes the way validation converted them (decoding only: no checks, no sums).
"""

import dataclasses
from typing import Optional, Tuple, Union

from beam_pipeline.core import images, masks, reasons
from beam_pipeline.core.hashing import sha256_hex
from beam_pipeline.core.images import ImageCheck
from beam_pipeline.core.masks import MaskCheck
from beam_pipeline.core.masks.maps import LabelMap, MaskMap
from beam_pipeline.core.pixels import Limits
from beam_pipeline.core.points import flatten_points, sample_points
from beam_pipeline.core.reasons import Rejection
from beam_pipeline.core.records import PairRef, ValidPair


@dataclasses.dataclass(frozen=True)
class Checked:
    """A valid pair, with the bytes its record stores when validation has them at hand."""
    pair: ValidPair
    image: bytes                 # the image as stored: its file's bytes, or validation's conversion
    mask: Optional[bytes]        # the mask as stored (b"" for classification); None when only the writer
                                 # converts it (a mask read through a map: core/masks/mapped.py)


def validate_segmentation(ref: PairRef, image_bytes: bytes, mask_bytes: bytes, limits: Limits,
                          points_per_class: int = 8, mask_map: Optional[MaskMap] = None) -> Union[ValidPair, Rejection]:
    """Check a pair; a valid one keeps its summaries and up to ``points_per_class`` points per class."""
    checked = checked_segmentation(ref, image_bytes, mask_bytes, limits, points_per_class, mask_map)
    return checked if isinstance(checked, Rejection) else checked.pair


def validate_classification(ref: PairRef, image_bytes: bytes, limits: Limits, class_names: Tuple[str, ...],
                            label_map: Optional[LabelMap] = None) -> Union[ValidPair, Rejection]:
    checked = checked_classification(ref, image_bytes, limits, class_names, label_map)
    return checked if isinstance(checked, Rejection) else checked.pair


def checked_segmentation(ref: PairRef, image_bytes: bytes, mask_bytes: bytes, limits: Limits,
                         points_per_class: int = 8, mask_map: Optional[MaskMap] = None) -> Union[Checked, Rejection]:
    """:func:`validate_segmentation`, with the stored bytes."""
    image = images.check_image(image_bytes, limits)
    if isinstance(image, Rejection):
        return image
    mask = masks.check_mask(mask_bytes, limits, mask_map)
    if isinstance(mask, Rejection):
        return mask
    mismatch = check_same_size(image, mask)
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
        point_classes=point_classes, point_yx=point_yx, phash=image.phash)
    stored_mask = mask.stored if mask.stored is not None else (None if mask.converted else mask_bytes)
    return Checked(pair, image.stored if image.stored is not None else image_bytes, stored_mask)


def checked_classification(ref: PairRef, image_bytes: bytes, limits: Limits, class_names: Tuple[str, ...],
                           label_map: Optional[LabelMap] = None) -> Union[Checked, Rejection]:
    """:func:`validate_classification`, with the stored bytes."""
    label = parse_label(ref.label, class_names, limits.num_classes, label_map)
    if isinstance(label, Rejection):
        return label
    image = images.check_image(image_bytes, limits)
    if isinstance(image, Rejection):
        return image
    pair = ValidPair(
        ref=ref, height=image.height, width=image.width, image_format=image.stored_format,
        image_sha256=sha256_hex(image_bytes),
        image_stored_bytes=len(image.stored) if image.stored is not None else len(image_bytes),
        image_converted=image.stored is not None, label=label,
        channel_sum=image.channel_sum, channel_sum_squares=image.channel_sum_squares, phash=image.phash)
    return Checked(pair, image.stored if image.stored is not None else image_bytes, b"")


def check_same_size(image: ImageCheck, mask: MaskCheck) -> Optional[Rejection]:
    if (image.height, image.width) != (mask.height, mask.width):
        return Rejection(reasons.SIZE_MISMATCH,
                         f"image is {image.width}x{image.height}, mask is {mask.width}x{mask.height}")
    return None


def parse_label(label: Optional[str], class_names: Tuple[str, ...], num_classes: int,
                label_map: Optional[LabelMap] = None) -> Union[int, Rejection]:
    """A class id from a label given as a class name or as an integer id, or through ``label_map``."""
    text = "" if label is None else str(label).strip()
    if label_map is not None:
        cls = label_map.lookup(text)
        if cls is None or cls < 0:        # ignored labels are filtered out before (core/selection.py)
            return Rejection(reasons.UNKNOWN_LABEL, f"label {text!r} is not listed in {label_map.source}")
        return cls
    if text in class_names:
        return class_names.index(text)
    try:
        value = int(text)
    except ValueError:
        return Rejection(reasons.UNKNOWN_LABEL, f"label {text!r} is not a known class")
    if 0 <= value < num_classes:
        return value
    return Rejection(reasons.UNKNOWN_LABEL, f"label {value} is outside 0..{num_classes - 1}")


def record_files(pair: ValidPair, image: bytes, mask: bytes = b"", limits: Optional[Limits] = None,
                 mask_map: Optional[MaskMap] = None) -> Union[Tuple[bytes, bytes], Rejection]:
    """(image, mask) as the record of ``pair`` stores them, from its files' bytes: a file validation converted (to RGB
    PNG, or an 8-bit grey PNG of class ids, through ``mask_map`` when there is one) is converted again the same way
    (decoding only, no checks and no sums); the others are stored as read."""
    if pair.image_converted:
        image = images.stored_image(image)
    if pair.mask_converted:
        mask = masks.stored_mask(mask, limits, mask_map)
    for stored in (image, mask):
        if isinstance(stored, Rejection):
            return stored
    return image, mask
