"""COCO-format annotation files (``--layout coco``, ``coco_panoptic``; ``--input instances_val2017.json``): which
files a dataset ships and what their names say, the classes their categories give, and one image's records joined
into a pair whose mask is drawn (core/masks/drawn.py). Pure; the files are streamed by io/coco.py and grouped by image
in the pipeline (stages/annotations.py). docs/layouts-coco.md gives the trees and the rules.

* **Files.** ``instances_<set>.json`` and ``stuff_<set>.json`` (polygons and RLE), ``panoptic_<set>.json`` (a PNG
  per image, its segments in ``segments_info``). The set (``val2017``) names the images' folder and, without its
  year, the split: ``instances_train2017.json`` is ``train``, ``val2017`` is ``val`` (``--split_names`` renames).
* **Values drawn.** A drawn mask holds category ids: 0 where nothing is annotated in an instances file (the
  background), the category of each annotation, and ``void`` (255, or 65535 when a category id is above 254: a
  16-bit mask) for crowds (``--coco_crowd ignore``, the default), a panoptic PNG's unlabeled segment (id 0), and a
  stuff file's unannotated pixels.
* **Classes.** A value map built from the file's categories, in id order: background (class 0) then the
  categories for instances; the categories alone for stuff and panoptic; ``void`` to the ignore label. The
  standard COCO categories give exactly the shipped maps ``coco`` and ``coco_panoptic`` (core/masks/shipped/).
* **Every record accounted for.** An image with no annotation is filtered out (``no_annotations``: no pixel of it
  is labelled by the file); annotations of an image id the file's images do not list are one rejected input
  (``orphan_annotation``); an image listed twice, or one without its file name or size, is rejected
  (``annotation_invalid``).
"""

import dataclasses
import json
import posixpath
import re
import zlib
from typing import Iterable, List, Optional, Sequence, Tuple, Union

from beam_pipeline.core import paths, reasons
from beam_pipeline.core.records import FILTERED, REJECTED, Outcome, PairRef

INSTANCES, STUFF, PANOPTIC = "instances", "stuff", "panoptic"
PREFIXES = {"instances_": INSTANCES, "stuff_": STUFF, "panoptic_": PANOPTIC}
CROWD_IGNORE, CROWD_CLASS = "ignore", "class"       # --coco_crowd
BACKGROUND = 0                                        # instances: the value of a pixel no annotation covers
VOID_8, VOID_16 = 255, 65535                          # the void value of 8-bit and 16-bit drawn masks
MAX_CATEGORY_ID = VOID_16 - 1
MAX_CLASSES = 255                                     # class ids 0..254 (the ignore label 255 is no class)
IMAGE, ANNOTATION = "image", "annotation"             # the two kinds of record grouped by image
PENDING = None                                        # --plan: an annotation counted, not yet read
VOID_NAMES = {INSTANCES: "crowd", STUFF: "unlabeled", PANOPTIC: "void"}
COCO_KEYS = ("info", "licenses", "images", "annotations", "categories")
_YEAR = re.compile(r"^(.*?)(\d{4})?$")


class CocoError(ValueError):
    """An annotation file that cannot be read as COCO; the message is one line naming it and the fix."""


@dataclasses.dataclass(frozen=True)
class AnnotationFile:
    """One annotation file and where its images (and panoptic PNGs) are, relative to the dataset's folder."""
    path: str                 # annotations/instances_val2017.json
    images: str               # val2017
    split: str                # val
    masks: str = ""           # panoptic: annotations/panoptic_val2017


@dataclasses.dataclass(frozen=True)
class Annotations:
    """The annotation files of a run and how their masks are drawn (resolved at launch: launcher/coco.py)."""
    kind: str                                   # INSTANCES | STUFF | PANOPTIC
    files: Tuple[AnnotationFile, ...]
    crowd: str = CROWD_IGNORE
    void: int = VOID_8


# --------------------------------------------------------------------------
# Files and their names
# --------------------------------------------------------------------------
def kind_of(name: str) -> Optional[str]:
    """INSTANCES, STUFF or PANOPTIC from an annotation file's name; None for another file."""
    base = posixpath.basename(name)
    for prefix, kind in PREFIXES.items():
        if base.startswith(prefix) and base.endswith(".json"):
            return kind
    return None


def set_name(name: str) -> str:
    """``val2017`` of ``annotations/instances_val2017.json``: the name of its images' folder."""
    stem = posixpath.splitext(posixpath.basename(name))[0]
    kind = kind_of(name)
    return stem[len(next(p for p, k in PREFIXES.items() if k == kind)):] if kind else stem


def split_of(name: str) -> str:
    """The split an annotation file's name gives: its set without the year (``train2017`` is ``train``)."""
    found = _YEAR.match(set_name(name))
    return (found.group(1).rstrip("_-") or set_name(name)) if found else set_name(name)


# --------------------------------------------------------------------------
# Categories: the classes and the value map
# --------------------------------------------------------------------------
def checked_categories(categories, where: str) -> List[Tuple[int, str]]:
    """``(id, name)`` of every category, in id order; raises CocoError naming ``where`` and the fix."""
    if not isinstance(categories, list) or not categories:
        raise CocoError(f"{where} has no categories: a COCO annotation file lists them as "
                        '"categories": [{"id": 1, "name": "person"}, ...]')
    out, seen = [], set()
    for category in categories:
        ident = category.get("id") if isinstance(category, dict) else None
        name = category.get("name") if isinstance(category, dict) else None
        if isinstance(ident, bool) or not isinstance(ident, int) or not isinstance(name, str) or not name.strip():
            raise CocoError(f"{where}: category {str(category)[:80]} has no integer id and name")
        if not 1 <= ident <= MAX_CATEGORY_ID:
            raise CocoError(f"{where}: category {name!r} has id {ident}; drawn masks hold category ids 1.."
                            f"{MAX_CATEGORY_ID} (0 is the background, {VOID_16} void): renumber it")
        if ident in seen:
            raise CocoError(f"{where}: category id {ident} is listed twice")
        seen.add(ident)
        out.append((ident, name.strip()))
    return sorted(out)


def void_of(categories: Sequence[Tuple[int, str]]) -> int:
    """255 while every category id fits 8 bits beside it, else 65535 (16-bit masks)."""
    return VOID_8 if max(ident for ident, _ in categories) < VOID_8 else VOID_16


def class_names(kind: str, categories: Sequence[Tuple[int, str]]) -> Tuple[str, ...]:
    """The classes in id order: background first for instances, then the categories."""
    return (("background",) if kind == INSTANCES else ()) + tuple(name for _, name in categories)


def map_csv(kind: str, categories: Sequence[Tuple[int, str]], void: int, where: str) -> bytes:
    """The value map of drawn masks (core/masks/maps.py's CSV: value,class,name): each category id to its class,
    0 to background (instances), ``void`` to the ignore label. Raises CocoError when there are too many classes."""
    names = class_names(kind, categories)
    if len(names) > MAX_CLASSES:
        raise CocoError(f"{where} has {len(categories)} categories, {len(names)} classes: at most {MAX_CLASSES} fit "
                        "(class ids 0..254, 255 is the ignore label); merge categories with a --label_map of your own")
    offset = 1 if kind == INSTANCES else 0
    lines = [f"# {kind}: built from the categories of {where}", "value,class,name"]
    if kind == INSTANCES:
        lines.append(f"{BACKGROUND},0,background")
    lines += [f"{ident},{index + offset},{_csv_cell(name)}" for index, (ident, name) in enumerate(categories)]
    lines.append(f"{void},ignore,{VOID_NAMES[kind]}")
    return ("\n".join(lines) + "\n").encode("utf-8")


def _csv_cell(text: str) -> str:
    return '"' + text.replace('"', '""') + '"' if any(c in text for c in ',"\n') else text


# --------------------------------------------------------------------------
# One image's records, grouped by the pipeline, as a pair
# --------------------------------------------------------------------------
def image_record(item) -> Optional[Tuple[object, dict]]:
    """``(image id, the fields a pair needs)`` of an entry of ``images``; None without an id."""
    if not isinstance(item, dict) or "id" not in item:
        return None
    return _ident(item["id"]), {name: item[name] for name in ("file_name", "height", "width") if name in item}


def annotation_record(item, kind: str) -> Optional[Tuple[object, object]]:
    """``(image id, the fields drawing needs)`` of an entry of ``annotations``; None without an image id. Instances
    and stuff: ``[id, category_id, iscrowd, segmentation]``; panoptic: ``{file_name, segments_info}``."""
    if not isinstance(item, dict) or "image_id" not in item:
        return None
    if kind == PANOPTIC:
        return _ident(item["image_id"]), {"file_name": item.get("file_name"),
                                          "segments_info": item.get("segments_info")}
    return _ident(item["image_id"]), [item.get("id"), item.get("category_id"), item.get("iscrowd", 0),
                                      item.get("segmentation")]


def _ident(value):
    """An id as JSON gave it, an integer when it is one (``5`` and ``5.0`` are the same image)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def pair_key(file: AnnotationFile, image_id) -> str:
    return f"{file.path}#{image_id}"


def annotated_pair(root: str, annotations: Annotations, file: AnnotationFile, image_id,
                   records: Iterable[Tuple[str, object]]) -> Union[PairRef, Outcome]:
    """One image's records (``(IMAGE, fields)`` and ``(ANNOTATION, fields)``) as a PairRef whose ``drawing`` draws
    its mask, or the Outcome that accounts for them (module docstring)."""
    images, found = [], []
    for tag, fields in records:
        (images if tag == IMAGE else found).append(fields)
    key = pair_key(file, image_id)
    where = f"{paths.join(root, file.path)}#{image_id}"
    if not images:
        ids = sorted(str(a[0]) if isinstance(a, list) else str(a.get("file_name")) if a else "?" for a in found)
        named = ", ".join(ids[:5]) + (", ..." if len(ids) > 5 else "")
        return Outcome(REJECTED, reasons.ORPHAN_ANNOTATION, f"{len(found)} annotation(s) ({named}) of image id "
                       f"{image_id}, which the images of {file.path} do not list", key=key, image=None, mask=where)
    image = images[0]
    name = image.get("file_name")
    image_rel = paths.join(file.images, name) if isinstance(name, str) and name else ""
    image_path = paths.join(root, image_rel) if image_rel else None
    problem = _image_problem(images, annotations.kind, found)
    if problem:
        return Outcome(REJECTED, reasons.ANNOTATION_INVALID, f"image id {image_id}: {problem}", key=key,
                       image=image_path, mask=where)
    if not found or (annotations.kind == PANOPTIC and found[0] is not PENDING and not found[0].get("segments_info")):
        return Outcome(FILTERED, reasons.FILTERED_NO_ANNOTATIONS, f"{file.path} has no annotation of image id "
                       f"{image_id}", key=key, image=image_path, mask=where)
    if any(one is PENDING for one in found):           # --plan: drawn for the sample only (io/coco.with_drawings)
        return PairRef(key=key, source_id=image_rel, image=image_path, mask=where, metadata=(("split", file.split),))
    if annotations.kind == PANOPTIC:
        mask = paths.join(paths.join(root, file.masks), found[0]["file_name"])
        drawing = panoptic_drawing(found[0]["segments_info"], annotations)
    else:
        mask = where
        drawing = instances_drawing(image, found, annotations)
    return PairRef(key=key, source_id=image_rel, image=image_path, mask=mask, metadata=(("split", file.split),),
                   drawing=drawing)


def _image_problem(images: List[dict], kind: str, found: List[object]) -> str:
    if len(images) > 1:
        return f"listed {len(images)} times in images"
    image = images[0]
    if not isinstance(image.get("file_name"), str) or not image["file_name"]:
        return "has no file_name"
    if kind != PANOPTIC and not all(isinstance(image.get(n), int) and image[n] > 0 for n in ("height", "width")):
        return "has no height and width (the size its mask is drawn at)"
    if kind == PANOPTIC and len(found) > 1:
        return f"has {len(found)} panoptic annotations (one PNG each); one is expected"
    if kind == PANOPTIC and found and found[0] is not PENDING and not isinstance(found[0].get("file_name"), str):
        return "its panoptic annotation has no file_name (its PNG)"
    return ""


def instances_drawing(image: dict, found: List[list], annotations: Annotations) -> bytes:
    """The drawing of an instances or stuff image (core/masks/drawn.py): its size, rules and annotations, in
    annotation id order (:func:`packed_drawing`)."""
    ordered = sorted(found, key=lambda a: (json.dumps(a[0]), json.dumps(a, sort_keys=True)))
    return packed_drawing({"kind": annotations.kind, "height": image["height"], "width": image["width"],
                      "background": BACKGROUND if annotations.kind == INSTANCES else annotations.void,
                      "void": annotations.void, "crowd": annotations.crowd, "annotations": ordered})


def panoptic_drawing(segments_info: list, annotations: Annotations) -> bytes:
    """The drawing of a panoptic image: its PNG's segments (id, category, crowd) and the rules."""
    segments = sorted(([s.get("id"), s.get("category_id"), s.get("iscrowd", 0)] for s in segments_info
                       if isinstance(s, dict)), key=json.dumps)
    return packed_drawing({"kind": PANOPTIC, "void": annotations.void, "crowd": annotations.crowd,
                           "segments": segments})


def packed_drawing(value: dict) -> bytes:
    """A drawing as a pair carries it across the pipeline's shuffles: canonical JSON (sorted keys, no spaces: its
    digest is the mask's pre-key in the verdict cache), compressed (polygons' text shrinks about 3 times)."""
    return zlib.compress(json.dumps(value, sort_keys=True, separators=(",", ":")).encode("utf-8"), 1)


def unpacked_drawing(drawing: bytes) -> dict:
    return json.loads(zlib.decompress(drawing))

