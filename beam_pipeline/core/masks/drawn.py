"""Masks drawn from annotations: COCO's polygons and RLE, a panoptic PNG's segments, SA-1B's per-image RLE masks.

A pair of a COCO or SA-1B layout carries its ``drawing`` (core/coco.py builds it from the annotation file; SA-1B's
names its JSON file): :func:`drawn_mask` turns it, with the mask file's bytes where there is one (the panoptic PNG,
the SA-1B JSON), into the PNG of category ids that validation checks through the layout's value map and the writer
converts: a mask drawn is then an ordinary mask file's bytes. pycocotools draws every polygon and RLE (as
``COCO.annToMask`` does); nothing here rasterises.

Rules (docs/layouts-coco.md):

* **Overlap.** Annotations are painted in decreasing area (pycocotools' ``area`` of each one's RLE: the pixels it
  covers), ties in increasing annotation id, so where two overlap the smaller one, usually in front, keeps its
  pixels, and among equal areas the higher id. Crowds take part in the same order.
* **Values.** The category id of each annotation; a crowd (``iscrowd`` 1) is ``void`` with ``--coco_crowd ignore``
  (the default) and its category with ``class``; pixels no annotation covers are the drawing's ``background`` (0
  for instances, ``void`` for stuff). Panoptic: each pixel's segment id ``R + 256 G + 256^2 B`` becomes its
  segment's category (crowds as above), id 0 (unlabeled) ``void``. SA-1B: 1 (foreground) or the annotation's
  ``category_id`` when it has one, on a background of 0.
* **Bits.** 8-bit masks while every value fits (``void`` 255), 16-bit ones when a category id is above 254
  (``void`` 65535): value maps read both.

An annotation that cannot be drawn (a malformed polygon or RLE, an RLE of another size or whose runs do not cover
the image, a category id the mask cannot hold, a panoptic segment id ``segments_info`` does not list) rejects the
pair as ``annotation_invalid``, naming it. The drawing's digest, with :data:`RULES` and pycocotools' version, is the
mask's pre-key in the verdict cache (:func:`pre_key`): an unchanged re-run draws nothing.

Why masks are drawn where their bytes are read (validation; the writer only without validation's spill; ``--plan``)
rather than into PNG files under the output's cache folder at discovery, which later stages would read as ordinary
files: those files would be a second copy of every mask on the output's store (a PUT each on an object store), and
the cache's collection after a commit keeps only the committing run's verdicts, so keeping exactly the masks the
published version needs would take a list per version and a join at every commit; ``--plan`` writes nothing. Here
only annotations (metadata, compressed) cross the shuffles, never pixels, and a pair whose record was spilled leaves
them behind (stages/pairs.spilled_ref). docs/layouts-coco.md gives the whole argument.
"""

import hashlib
import importlib.metadata
import json
import zlib
from typing import List, Tuple, Union

import numpy as np
from pycocotools import mask as coco_mask

from beam_pipeline.core import coco, pixels, reasons
from beam_pipeline.core.masks.mapped import decode_source
from beam_pipeline.core.masks.maps import COLORS, MaskMap
from beam_pipeline.core.reasons import Rejection

RULES = 1                    # raised with any change here that can change a drawn mask
SA1B = "sa1b"
FOREGROUND = 1               # SA-1B: an annotation without a category
SA1B_DRAWING = coco.packed_drawing({"kind": SA1B})
SPILLED = b"spilled"         # a pair's drawing once validation spilled its record (stages/pairs.spilled_ref)
_READ_AS_COLOURS = MaskMap(COLORS, source="a panoptic PNG")
_PYCOCOTOOLS = importlib.metadata.version("pycocotools")
_COCO_ERRORS = (TypeError, ValueError, KeyError, IndexError, OverflowError, AttributeError)


def drawing_kind(drawing: bytes) -> str:
    return coco.unpacked_drawing(drawing)["kind"]


def needs_file(drawing: bytes) -> bool:
    """Whether the pair's mask file is read to draw it (a panoptic PNG, an SA-1B JSON)."""
    return drawing_kind(drawing) in (coco.PANOPTIC, SA1B)


def pre_key(drawing: bytes) -> str:
    """What the drawn mask depends on beyond a mask file's version: the rules, pycocotools, the drawing."""
    text = zlib.decompress(drawing)                  # the canonical JSON: zlib's bytes may differ between its versions
    return f"drawn{RULES}:pycocotools-{_PYCOCOTOOLS}:{hashlib.sha256(text).hexdigest()[:32]}"


def drawn_mask(drawing: bytes, source: bytes, limits: pixels.Limits) -> Union[bytes, Rejection]:
    """The PNG of category ids a drawing gives (module docstring); ``source``: the mask file's bytes, or b""."""
    spec = coco.unpacked_drawing(drawing)
    kind = spec["kind"]
    if kind == coco.PANOPTIC:
        values = draw_panoptic(spec, source, limits)
    elif kind == SA1B:
        values = draw_sa1b(source, limits)
    else:
        values = draw_annotations(spec, limits)
    return values if isinstance(values, Rejection) else pixels.encode_png(values)


# --------------------------------------------------------------------------
# Instances and stuff: polygons and RLE
# --------------------------------------------------------------------------
def draw_annotations(spec: dict, limits: pixels.Limits) -> Union[np.ndarray, Rejection]:
    height, width, void = spec["height"], spec["width"], spec["void"]
    if height * width > limits.max_pixels:
        return Rejection(reasons.TOO_MANY_PIXELS, f"mask is drawn at {width}x{height}, more than --max_pixels "
                                                  f"{limits.max_pixels}")
    painted = []
    for ident, category, crowd, segmentation in spec["annotations"]:
        value = _value(category, crowd, spec["crowd"], void)
        rle = value if isinstance(value, Rejection) else rle_of(segmentation, height, width)
        if isinstance(rle, Rejection):
            return Rejection(reasons.ANNOTATION_INVALID, f"annotation {ident}: {rle.detail}")
        painted.append((ident, value, rle))
    return paint(height, width, spec["background"], void, painted)


def _value(category, crowd, crowd_rule: str, void: int) -> Union[int, Rejection]:
    if crowd == 1 and crowd_rule == coco.CROWD_IGNORE:
        return void
    if isinstance(category, bool) or not isinstance(category, int) or not 1 <= category < void:
        return Rejection(reasons.ANNOTATION_INVALID, f"category id {category!r} is none of the file's categories "
                                                     f"(1..{void - 1})")
    return category


def rle_of(segmentation, height: int, width: int) -> Union[dict, Rejection]:
    """One annotation's RLE, as ``COCO.annToRLE`` makes it: polygons merged, an uncompressed RLE compressed."""
    try:
        if isinstance(segmentation, list):
            if not segmentation or not all(isinstance(p, list) and len(p) >= 6 and len(p) % 2 == 0
                                           for p in segmentation):
                return Rejection(reasons.ANNOTATION_INVALID, "a polygon is a list of at least 3 x, y pairs")
            return coco_mask.merge(coco_mask.frPyObjects(segmentation, height, width))
        if not isinstance(segmentation, dict) or "counts" not in segmentation:
            return Rejection(reasons.ANNOTATION_INVALID, "segmentation is neither polygons nor an RLE")
        size = segmentation.get("size")
        if list(size or ()) != [height, width]:
            return Rejection(reasons.ANNOTATION_INVALID, f"an RLE of size {size} for an image of {[height, width]}")
        counts = segmentation["counts"]
        covered = _uncompressed_total(counts) if isinstance(counts, list) else compressed_total(counts)
        if isinstance(covered, str):
            return Rejection(reasons.ANNOTATION_INVALID, f"an RLE with {covered}")
        if covered != height * width:
            return Rejection(reasons.ANNOTATION_INVALID, f"an RLE whose runs cover {covered} of the image's "
                                                         f"{height * width} pixels")
        if isinstance(counts, list):
            return coco_mask.frPyObjects(segmentation, height, width)
        return {"size": [height, width], "counts": counts.encode("ascii") if isinstance(counts, str) else counts}
    except _COCO_ERRORS as error:
        return Rejection(reasons.ANNOTATION_INVALID, f"pycocotools cannot read its segmentation ({error})")


def _uncompressed_total(counts: list):
    if not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counts):
        return "negative or non-integer runs"
    return sum(counts)


def compressed_total(counts) -> Union[int, str]:
    """The pixels a compressed RLE's runs cover (pycocotools' ``rleFrString``, vectorised): pycocotools decodes a
    string whose runs fall short of the image without complaint, leaving the rest of the mask undefined."""
    data = np.frombuffer(counts.encode("ascii") if isinstance(counts, str) else bytes(counts), np.uint8)
    data = data.astype(np.int64) - 48
    if data.size == 0:
        return 0
    if (data < 0).any() or (data > 63).any() or data[-1] & 0x20:
        return "a malformed compressed string"
    ends = np.flatnonzero((data & 0x20) == 0)
    starts = np.concatenate(([0], ends[:-1] + 1))
    lengths = ends - starts + 1
    if lengths.max() > 12:
        return "a malformed compressed string"
    position = np.arange(data.size) - np.repeat(starts, lengths)
    runs = np.add.reduceat((data & 0x1F) << (5 * position), starts)
    runs = np.where(data[ends] & 0x10, runs - (np.int64(1) << (5 * lengths)), runs)
    runs[1::2] = np.cumsum(runs[1::2])                # run m > 2 is stored as its difference to run m - 2
    runs[2::2] = np.cumsum(runs[2::2])
    if (runs < 0).any():
        return "negative runs"
    return int(runs.sum())


def _order(item: Tuple[object, int, dict]):
    ident = item[0]
    by_id = (0, ident, "") if isinstance(ident, (int, float)) else (1, 0, str(ident))     # numbers first, then text
    return (-int(coco_mask.area(item[2])),) + by_id


def paint(height: int, width: int, background: int, void: int,
          painted: List[Tuple[object, int, dict]]) -> np.ndarray:
    """``(annotation id, value, RLE)`` painted onto ``background`` in decreasing area, ties by id (module docstring)."""
    dtype = np.uint8 if max([void, background] + [value for _, value, _ in painted]) <= 255 else np.uint16
    mask = np.full((height, width), background, dtype)
    for _, value, rle in sorted(painted, key=_order):
        mask[coco_mask.decode(rle).astype(bool)] = value
    return mask


# --------------------------------------------------------------------------
# Panoptic PNGs and SA-1B's JSON files
# --------------------------------------------------------------------------
def draw_panoptic(spec: dict, png: bytes, limits: pixels.Limits) -> Union[np.ndarray, Rejection]:
    decoded = decode_source(png, limits, _READ_AS_COLOURS)
    if isinstance(decoded, Rejection):
        return decoded
    rgb = decoded.rgb if decoded.rgb is not None else np.asarray(decoded.image)
    if rgb.ndim != 3 or rgb.shape[2] != 3:
        return Rejection(reasons.ANNOTATION_INVALID, f"panoptic PNG is {decoded.image.mode}, not RGB (its RGB "
                                                     "holds each pixel's segment id)")
    rgb = rgb.astype(np.uint32)
    ids = rgb[:, :, 0] + 256 * rgb[:, :, 1] + 65536 * rgb[:, :, 2]
    known = {0: spec["void"]}
    for ident, category, crowd in spec["segments"]:
        value = _value(category, crowd, spec["crowd"], spec["void"])
        if isinstance(value, Rejection):
            return Rejection(reasons.ANNOTATION_INVALID, f"segment {ident}: {value.detail}")
        known[ident] = value
    present, inverse = np.unique(ids, return_inverse=True)
    unknown = [int(i) for i in present if int(i) not in known]
    if unknown:
        return Rejection(reasons.ANNOTATION_INVALID, f"panoptic PNG has segment ids {unknown[:8]} that its "
                                                     "segments_info does not list")
    dtype = np.uint8 if spec["void"] <= 255 else np.uint16
    return np.asarray([known[int(i)] for i in present], dtype)[inverse].reshape(ids.shape)


def draw_sa1b(source: bytes, limits: pixels.Limits) -> Union[np.ndarray, Rejection]:
    try:
        record = json.loads(source)
        image, annotations = record.get("image") or {}, record["annotations"]
    except (ValueError, KeyError, AttributeError, TypeError) as error:
        return Rejection(reasons.ANNOTATION_INVALID, f"mask file is not an SA-1B annotation file "
                                                     f"({{\"image\": ..., \"annotations\": [...]}}): {error}")
    height, width = image.get("height"), image.get("width")
    if not isinstance(height, int) or not isinstance(width, int) or height * width > limits.max_pixels:
        return Rejection(reasons.ANNOTATION_INVALID if not isinstance(height, int) or not isinstance(width, int)
                         else reasons.TOO_MANY_PIXELS, f"mask is drawn at {width}x{height} (its image's size), which "
                                                       f"must be within --max_pixels {limits.max_pixels}")
    painted = []
    for annotation in annotations:
        annotation = annotation if isinstance(annotation, dict) else {"segmentation": annotation}
        value = _value(annotation.get("category_id", FOREGROUND), 0, coco.CROWD_CLASS, coco.VOID_16 + 1)
        rle = value if isinstance(value, Rejection) else rle_of(annotation.get("segmentation"), height, width)
        if isinstance(rle, Rejection):
            return Rejection(reasons.ANNOTATION_INVALID, f"annotation {annotation.get('id')}: {rle.detail}")
        painted.append((annotation.get("id"), value, rle))
    return paint(height, width, 0, 0, painted)
