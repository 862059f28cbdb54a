"""Reason codes for inputs that are rejected or filtered out, and a rejection as a value.

Each code is stable: it is written to the rejects files, to ``manifest.json``
and to a Beam counter named ``rejected_<code>`` / ``filtered_<code>``. A check never
raises on bad data: it returns a :class:`Rejection` with a code and a detail.
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class Rejection:
    """Why an input is rejected: a reason code below and a detail that names the offending value."""
    reason: str
    detail: str


# Rejected: the input is bad.
MISSING_FILE = "missing_file"            # The file does not exist.
UNREADABLE = "unreadable"                # The file exists but reading it failed.
EMPTY_FILE = "empty_file"                # The file has zero bytes.
FILE_TOO_LARGE = "file_too_large"        # More bytes than --max_file_bytes.
UNDECODABLE = "undecodable"              # Not an image, or a corrupt one.
TRUNCATED = "truncated"                  # The image data ends early.
FORMAT_NOT_ALLOWED = "format_not_allowed"  # Decodable, but its format (by content) is not allowed.
TOO_MANY_PIXELS = "too_many_pixels"      # Width x height above --max_pixels (decompression bombs).
UNSUPPORTED_MODE = "unsupported_mode"    # A pixel mode that cannot be turned into RGB, or that a map cannot read.
MASK_NOT_SINGLE_CHANNEL = "mask_not_single_channel"
MASK_VALUE_OUT_OF_RANGE = "mask_value_out_of_range"  # Not a class id or the ignore label; negative; above 65535.
MASK_VALUE_UNMAPPED = "mask_value_unmapped"    # A mask value that --label_map does not list.
MASK_COLOR_UNKNOWN = "mask_color_unknown"      # A mask colour that --color_map does not list (never rounded).
MASK_ALPHA_PARTIAL = "mask_alpha_partial"      # An RGBA colour mask with alpha other than 0 or 255.
SIZE_MISMATCH = "size_mismatch"          # Image and mask differ in height or width.
UNKNOWN_LABEL = "unknown_label"          # Classification label not among the classes.
ORPHAN_IMAGE = "orphan_image"            # Paired folders: an image without a mask.
ORPHAN_MASK = "orphan_mask"              # Paired folders: a mask without an image.
PATH_OUTSIDE_ROOT = "path_outside_root"  # A listing path escapes the listing's folder.
BAD_LISTING_ROW = "bad_manifest_row"     # A listing row without the required values (a stable code).
FILTER_ERROR = "filter_error"            # --filter could not be evaluated on this row.
CHANGED_SINCE_VALIDATION = "changed_since_validation"  # Bytes at write time differ from validation.
PARENT_SHARD_MISSING = "parent_shard_missing"  # Its record was in a damaged parent shard, and its files are gone too.
ORPHAN_ANNOTATION = "orphan_annotation"  # Annotations of an image id the annotation file's images do not list.
ANNOTATION_INVALID = "annotation_invalid"  # An annotation its mask cannot be drawn from (core/masks/drawn.py).
NO_SPLIT_GROUP = "no_split_group"        # --split_group gives the pair no group (an empty column, no regex match).

REJECT_REASONS = (
    MISSING_FILE, UNREADABLE, EMPTY_FILE, FILE_TOO_LARGE, UNDECODABLE, TRUNCATED,
    FORMAT_NOT_ALLOWED, TOO_MANY_PIXELS, UNSUPPORTED_MODE, MASK_NOT_SINGLE_CHANNEL,
    MASK_VALUE_OUT_OF_RANGE, MASK_VALUE_UNMAPPED, MASK_COLOR_UNKNOWN, MASK_ALPHA_PARTIAL, SIZE_MISMATCH,
    UNKNOWN_LABEL, ORPHAN_IMAGE, ORPHAN_MASK,
    PATH_OUTSIDE_ROOT, BAD_LISTING_ROW, FILTER_ERROR, CHANGED_SINCE_VALIDATION, PARENT_SHARD_MISSING,
    ORPHAN_ANNOTATION, ANNOTATION_INVALID,
    NO_SPLIT_GROUP,
)
SOURCE_GONE = (MISSING_FILE, UNREADABLE, EMPTY_FILE)    # a pair's files can no longer give its record

# Not a rejection: a valid pair whose content was already written under another key.
DUPLICATE = "duplicate"

# Filtered out by the user's own selection (not an error).
FILTERED_BY_EXPRESSION = "filter_expression"
FILTERED_BY_INCLUDE = "include_glob"
FILTERED_BY_EXCLUDE = "exclude_glob"
FILTERED_BY_SAMPLING = "sample_fraction"
FILTERED_BY_MAX_EXAMPLES = "max_examples"
FILTERED_BY_LABEL_MAP = "label_map_ignore"   # Classification: --label_map sends the label to ignore.
FILTERED_NO_ANNOTATIONS = "no_annotations"   # An annotation file lists the image but no annotation of it.
