"""Public datasets as they ship (``--layout``): where each one keeps its images, masks and split files, read with no
listing of the user's (docs/layouts.md). Pure: declarations and the rules they give; the folders are read by
io/layouts.py.

A layout is a small declaration, one of three families:

* **split files** (VOC, Oxford-IIIT Pet): text files list an image's stem per line; the file's name is the split;
  the image and the mask paths are templates of the stem;
* **folders** (Cityscapes, ADE20K, a labelme2voc export without split files): the images matched by globs, each
  image's mask at a path a rule gives, the split from the path (or by hash, as for any folder);
* **annotations** (COCO instances and stuff, COCO panoptic): masks drawn from an annotation file, streamed and
  grouped by image in the pipeline (core/coco.py, io/coco.py, stages/annotations.py; docs/layouts-coco.md).

A layout's masks may be *drawn* rather than read (``drawing``: core/masks/drawn.py): COCO's polygons and RLE, a
panoptic PNG's segments through the annotation file's ``segments_info``, SA-1B's per-image JSON files. SA-1B keeps
each image's annotations in a file beside it, so it is paired like a folder layout (``sa_<n>.jpg`` with
``sa_<n>.json``) and only its masks are drawn.

Each names the shipped map its masks need (core/masks/shipped/), and maps the dataset's split names to this
project's (Pet's ``trainval`` is ``train``); ``--label_map``, ``--color_map`` and ``--split_names`` override them.
:func:`detect` recognises a layout from the names found at the top of the input folder (``--layout auto``).
"""

import dataclasses
import posixpath
import re
from typing import Dict, Iterable, Optional, Sequence, Tuple

SPLIT_FILES, FOLDERS, ANNOTATIONS = "split_files", "folders", "annotations"
AUTO, NONE = "auto", "none"


@dataclasses.dataclass(frozen=True)
class Layout:
    """One public dataset's tree: where its images, masks and splits are (module docstring)."""
    name: str
    title: str
    family: str
    tree: str                                     # the folder tree it expects (docs, errors)
    markers: Tuple[str, ...]                      # paths under the input folder that must all exist (auto)
    image_template: str = ""                      # split files: the image of a stem, relative to the input
    mask_template: str = ""                       # split files: its mask
    split_files: Tuple[str, ...] = ()             # split files: globs of the files; a file's stem is its split
    images: Tuple[str, ...] = ()                  # folders: globs of the images
    mask_rule: Tuple[str, str] = ("", "")         # folders: (regex over an image path, replacement): its mask
    masks: str = ""                               # folders: glob(s, joined by |) of the masks, to find orphans
    split_from_path: str = ""                     # folders: regex whose group 1 is an image path's split
    split_names: Tuple[Tuple[str, str], ...] = ()  # the dataset's split names -> this project's
    map_option: str = ""                          # --label_map or --color_map, when its masks need a map
    map_name: str = ""                            # ... the shipped map
    reduce_zero_label: bool = False
    class_names_file: str = ""                    # a file of class names, one a line (labelme2voc)
    annotation_globs: Tuple[str, ...] = ()        # annotations: globs of its annotation files, the first that matches
    drawing: str = ""                             # how its masks are drawn (core/masks/drawn.py); "": read as files

    def split_name(self, split: str) -> str:
        return dict(self.split_names).get(split, split)

    def mask_of(self, image_rel: str) -> str:
        """Folders: the mask path of an image path (both relative to the input folder)."""
        pattern, replacement = self.mask_rule
        return re.sub(pattern, replacement, image_rel)

    def split_of(self, image_rel: str) -> Optional[str]:
        """Folders: the split an image's path gives, under this project's name; None when the layout has none
        (the split then comes from --split: by hash by default)."""
        if not self.split_from_path:
            return None
        found = re.search(self.split_from_path, image_rel)
        return self.split_name(found.group(1)) if found else None


VOC_TREE = """VOC2012/                      (VOCdevkit/VOC2012, or any folder holding these)
  JPEGImages/<stem>.jpg
  SegmentationClass/<stem>.png  palette PNG: class ids 0..20, 255 on object borders (ignored)
  ImageSets/Segmentation/train.txt, val.txt (, test.txt)   one <stem> a line"""
LABELME_TREE = """labelme2voc output/
  JPEGImages/<stem>.jpg
  SegmentationClassPNG/<stem>.png   palette PNG of class ids (SegmentationClass/<stem>.npy is not read)
  class_names.txt                   __ignore__, _background_, then the classes, one a line"""
PET_TREE = """oxford-iiit-pet/
  images/<stem>.jpg
  annotations/trimaps/<stem>.png   1 pet, 2 background, 3 border (ignored)
  annotations/trainval.txt, test.txt   "<stem> <class id> <species> <breed id>" a line"""
CITYSCAPES_TREE = """cityscapes/
  leftImg8bit/{train,val,test}/<city>/<city>_<seq>_<frame>_leftImg8bit.png
  gtFine/{train,val,test}/<city>/<city>_<seq>_<frame>_gtFine_labelIds.png   label ids 0..33"""
ADE20K_TREE = """ADEChallengeData2016/
  images/{training,validation}/ADE_<split>_<n>.jpg
  annotations/{training,validation}/ADE_<split>_<n>.png   0 other (ignored), 1..150 the classes"""

COCO_TREE = """coco/
  annotations/instances_{train,val}2017.json   (or stuff_{train,val}2017.json when there are no instances files)
  {train,val}2017/<file_name>                  (or images/{train,val}2017/)"""
COCO_PANOPTIC_TREE = """coco/
  annotations/panoptic_{train,val}2017.json
  annotations/panoptic_{train,val}2017/<name>.png   (or panoptic_{train,val}2017/ beside annotations/)
  {train,val}2017/<file_name>                       (or images/{train,val}2017/)"""
SA1B_TREE = """sa1b/
  sa_<n>.jpg and sa_<n>.json   (or one folder per tar: sa_000000/sa_<n>.jpg, ...)"""

LAYOUTS: Dict[str, Layout] = {layout.name: layout for layout in (
    Layout("voc", "PASCAL VOC 2012 segmentation", SPLIT_FILES, VOC_TREE,
           markers=("JPEGImages", "SegmentationClass", "ImageSets/Segmentation"),
           image_template="JPEGImages/{stem}.jpg", mask_template="SegmentationClass/{stem}.png",
           split_files=("ImageSets/Segmentation/*.txt",), map_option="--label_map", map_name="voc"),
    Layout("voc_labelme", "a labelme2voc export (VOC folders, no split files)", FOLDERS, LABELME_TREE,
           markers=("JPEGImages", "SegmentationClassPNG"), images=("JPEGImages/*.jpg",),
           mask_rule=(r"^JPEGImages/(.*)\.jpg$", r"SegmentationClassPNG/\1.png"), masks="SegmentationClassPNG/*.png",
           class_names_file="class_names.txt"),
    Layout("pet", "Oxford-IIIT Pet, trimaps", SPLIT_FILES, PET_TREE,
           markers=("images", "annotations/trimaps"),
           image_template="images/{stem}.jpg", mask_template="annotations/trimaps/{stem}.png",
           split_files=("annotations/trainval.txt", "annotations/test.txt"), split_names=(("trainval", "train"),),
           map_option="--label_map", map_name="pet"),
    Layout("cityscapes", "Cityscapes fine annotations", FOLDERS, CITYSCAPES_TREE,
           markers=("leftImg8bit", "gtFine"), images=("leftImg8bit/*/*/*_leftImg8bit.png",),
           mask_rule=(r"^leftImg8bit/(.*)_leftImg8bit\.png$", r"gtFine/\1_gtFine_labelIds.png"),
           masks="gtFine/*/*/*_gtFine_labelIds.png", split_from_path=r"^leftImg8bit/([^/]+)/",
           map_option="--label_map", map_name="cityscapes"),
    Layout("ade20k", "ADE20K scene parsing (ADEChallengeData2016)", FOLDERS, ADE20K_TREE,
           markers=("images/training", "annotations/training"), images=("images/*/*.jpg",),
           mask_rule=(r"^images/(.*)\.jpg$", r"annotations/\1.png"), masks="annotations/*/*.png",
           split_from_path=r"^images/([^/]+)/", split_names=(("training", "train"), ("validation", "val")),
           map_option="--label_map", map_name="ade20k"),
    Layout("coco", "COCO instances or stuff (annotation JSON)", ANNOTATIONS, COCO_TREE,
           markers=("annotations/instances_*.json",),
           annotation_globs=("annotations/instances_*.json", "annotations/stuff_*.json"),
           map_option="--label_map", map_name="coco", drawing="coco"),
    Layout("coco_panoptic", "COCO panoptic (annotation JSON and PNGs)", ANNOTATIONS, COCO_PANOPTIC_TREE,
           markers=("annotations/panoptic_*.json",), annotation_globs=("annotations/panoptic_*.json",),
           map_option="--label_map", map_name="coco_panoptic", drawing="coco_panoptic"),
    Layout("sa1b", "SA-1B (per-image JSON of RLE masks)", FOLDERS, SA1B_TREE,
           markers=("sa_*.json|*/sa_*.json",), images=("sa_*.jpg", "*/sa_*.jpg"),
           mask_rule=(r"^(.*?)sa_([^/]*)\.jpg$", r"\1sa_\2.json"), masks="sa_*.json|*/sa_*.json",
           map_option="--label_map", map_name="sa1b", drawing="sa1b"),
)}


def split_file_names(found: Iterable[str]) -> Tuple[str, ...]:
    """The split files to read of those ``found`` (paths relative to the input): a ``trainval`` file lists the
    union of ``train`` and ``val`` when both are there, so it is left out then; a ``list`` file (Pet's every
    image) is never a split."""
    found = sorted(found)
    stems = {posixpath.splitext(posixpath.basename(path))[0] for path in found}
    skip = {"list"} | ({"trainval"} if {"train", "val"} <= stems else set())
    return tuple(path for path in found if posixpath.splitext(posixpath.basename(path))[0] not in skip)


def stem_of_line(line: str) -> Optional[str]:
    """The image stem a split file's line names (its first word), or None for a blank or ``#`` comment line."""
    text = line.strip()
    if not text or text.startswith("#"):
        return None
    return text.split()[0]


def detect(exists) -> Optional[Layout]:
    """The layout whose markers all exist (``exists(relative path)``: a marker may be a glob, or globs joined by
    ``|`` of which one must match), the most specific first; None when none. COCO panoptic before instances: a
    folder with both is read as panoptic, whose masks cover every pixel (``--layout coco`` for the instances)."""
    for name in ("voc", "voc_labelme", "pet", "cityscapes", "ade20k", "coco_panoptic", "coco", "sa1b"):
        layout = LAYOUTS[name]
        if all(exists(marker) for marker in layout.markers):
            return layout
    return None


def parse_split_names(text: Optional[str]) -> Tuple[Tuple[str, str], ...]:
    """``--split_names trainval=train,minival=val``: (the input's name, the name to publish under)."""
    if not text:
        return ()
    pairs = []
    for part in text.split(","):
        source, sep, target = (piece.strip() for piece in part.partition("="))
        if not sep or not source or not target:
            raise ValueError(f"--split_names: expected NAME=NEW,..., e.g. trainval=train, got {part.strip()!r}")
        pairs.append((source, target))
    sources = [source for source, _ in pairs]
    if len(set(sources)) != len(sources):
        raise ValueError(f"--split_names names a split twice: {text!r}")
    return tuple(pairs)


def renamed(split: Optional[str], names: Sequence[Tuple[str, str]]) -> Optional[str]:
    return dict(names).get(split, split) if split is not None else None


def described(layout: Layout) -> str:
    """The first line's words for a layout chosen by ``auto``."""
    return f"layout {layout.name}: {layout.title}"
