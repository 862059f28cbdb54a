"""The annotation layouts at launch (``--layout coco``, ``coco_panoptic``, or an annotation file as ``--input``):
which files, where their images and panoptic PNGs are, and the classes their categories give (docs/layouts-coco.md).

Looked at once, on the launcher: the annotation files (a folder's ``annotations/instances_*.json``, else its
``stuff_*.json``; ``panoptic_*.json``; or the one file given), each file's images folder (``<set>/``, else
``images/<set>/``, ``images/``, the file's own folder) and panoptic PNG folder (``annotations/panoptic_<set>/``,
else ``panoptic_<set>/``), and each file's categories, read from its tail (io/coco.py) and the same in every file.
The categories give the value map (core/coco.py): the shipped ``coco`` or ``coco_panoptic`` map when they are
COCO's own, else the map built from them, with the file's class names. A ``--label_map`` of the user's replaces it.
Every mistake is one line naming the file and the fix (CorpusOptionsError).
"""

import dataclasses
import logging
import os
import posixpath
from typing import Optional, Sequence

from beam_pipeline.core import coco, paths
from beam_pipeline.core.coco import AnnotationFile, Annotations, CocoError
from beam_pipeline.core.layouts import LAYOUTS, Layout
from beam_pipeline.core.masks import maps as lm
from beam_pipeline.io import coco as io_coco, files
from beam_pipeline.launcher.config import NUM_CLASSES_REQUIRED, CorpusConfig
from beam_pipeline.launcher.maps import with_map
from beam_pipeline.launcher.options import CorpusOptionsError
from beam_pipeline.stages.specs import LISTING

_LOG = logging.getLogger("beam_pipeline.coco")
ANNOTATIONS_FOLDER = "annotations"


def is_file_input(config: CorpusConfig) -> bool:
    """``--input`` names a file (an annotation file, or a listing named .json), not a folder."""
    return config.input.lower().endswith(".json") and not os.path.isdir(config.input)      # URLs: no folders


def from_file(config: CorpusConfig) -> CorpusConfig:
    """``--input .../annotations/instances_val2017.json``: the layout of that one file, its folder the dataset's (the
    folder above ``annotations/``); a .json that is no COCO file is a JSON-lines listing, as before."""
    path = config.input
    if not files.exists(path):
        raise CorpusOptionsError(f"--input {path} does not exist: give a COCO annotation file (instances_*.json, "
                                 "stuff_*.json, panoptic_*.json), its dataset's folder, or a listing file")
    if io_coco.sniff(path) is None:
        if config.layout in ("coco", "coco_panoptic"):
            raise CorpusOptionsError(f"--layout {config.layout}: {path} is not a COCO annotation file (a JSON object "
                                     'of "images", "annotations" and "categories"); docs/layouts-coco.md')
        if not config.num_classes and not config.maps.any:
            raise CorpusOptionsError(NUM_CLASSES_REQUIRED)
        return dataclasses.replace(config, input_format=LISTING, layout="")   # a JSON-lines listing named .json
    folder, name = paths.dirname(path), posixpath.basename(path)
    root = paths.dirname(folder) if posixpath.basename(folder.rstrip("/")) == ANNOTATIONS_FOLDER else folder
    relative = paths.relative_to(root, path) or name
    kind = coco.kind_of(name) or (coco.PANOPTIC if config.layout == "coco_panoptic" else coco.INSTANCES)
    layout = LAYOUTS["coco_panoptic" if kind == coco.PANOPTIC else "coco"]
    return annotated(dataclasses.replace(config, input=root, layout=layout.name), layout, root, (relative,))


def from_folder(config: CorpusConfig, layout: Layout, root: str) -> CorpusConfig:
    """A dataset's folder: its annotation files of ``layout``'s globs (docs/layouts-coco.md gives the trees)."""
    found = io_coco.annotation_files(root, layout.annotation_globs)
    if not found:
        raise CorpusOptionsError(f"--layout {layout.name}: {root} has no {' or '.join(layout.annotation_globs)}; "
                                 f"{layout.title} is read from a folder like this: "
                                 + layout.tree.replace("\n", " | "))
    return annotated(config, layout, root, tuple(found))


def annotated(config: CorpusConfig, layout: Layout, root: str, relatives: Sequence[str]) -> CorpusConfig:
    """``config`` with its annotation files, the drawing rules, and the classes of their categories."""
    kinds = {coco.kind_of(relative) or (coco.PANOPTIC if layout.name == "coco_panoptic" else coco.INSTANCES)
             for relative in relatives}
    if len(kinds) > 1:
        raise CorpusOptionsError(f"--input {root}: annotation files of kinds {sorted(kinds)} are drawn apart; read "
                                 "one kind per output")
    kind = kinds.pop()
    categories = _categories(root, relatives)
    files = tuple(_annotation_file(root, relative, kind) for relative in relatives)
    void = coco.void_of(categories)
    config = dataclasses.replace(config, annotations=Annotations(kind, files, config.coco_crowd, void))
    if config.maps.any:
        return config                                 # any map option of the user's reads the category ids drawn
    return _category_map(config, kind, categories, void, relatives[0])


def _categories(root: str, relatives: Sequence[str]):
    first = None
    for relative in relatives:
        path = paths.join(root, relative)
        try:
            found, how = io_coco.read_categories(path)
            categories = coco.checked_categories(found, path)
        except CocoError as error:
            raise CorpusOptionsError(str(error)) from None
        except OSError as error:
            raise CorpusOptionsError(f"cannot read the annotation file {path}: "
                                     f"{str(error).splitlines()[0] if str(error) else type(error).__name__}") from None
        _LOG.debug("%s: %d categories, read %s", path, len(categories), how)
        if first is not None and categories != first[1]:
            raise CorpusOptionsError(f"{path} and {first[0]} list other categories: every annotation file of a run "
                                     "gives the same classes (read them into separate outputs)")
        first = first or (path, categories)
    return first[1]


def _annotation_file(root: str, relative: str, kind: str) -> AnnotationFile:
    set_ = coco.set_name(relative)
    here = paths.dirname(relative)
    beside = () if posixpath.basename(here) == ANNOTATIONS_FOLDER else (here,)   # an export's images by its file
    candidates = (set_, paths.join("images", set_), "images") + beside
    images = io_coco.first_folder(root, candidates)
    if images is None:
        raise CorpusOptionsError(f"{paths.join(root, relative)}: no folder of its images; expected "
                                 f"{paths.join(root, set_)}/ (or images/{set_}/ there)")
    masks = ""
    if kind == coco.PANOPTIC:
        name = f"panoptic_{set_}"
        pngs = (paths.join(ANNOTATIONS_FOLDER, name), name, paths.join(here, name))
        masks = io_coco.first_folder(root, pngs)
        if masks is None:
            raise CorpusOptionsError(f"{paths.join(root, relative)}: no folder of its panoptic PNGs; expected "
                                     f"{paths.join(root, pngs[0])}/ (unzip panoptic_{set_}.zip there) or "
                                     f"{paths.join(root, pngs[1])}/")
    split = coco.split_of(relative) if coco.kind_of(relative) else ""
    return AnnotationFile(relative, images, split, masks)


def _category_map(config: CorpusConfig, kind: str, categories, void: int, relative: str) -> CorpusConfig:
    """The map of the categories: the shipped one when it is the same map (and the same classes), else the one
    built, named after the file."""
    where = paths.join(config.input, relative)
    try:
        built = coco.map_csv(kind, categories, void, relative)
    except CocoError as error:
        raise CorpusOptionsError(str(error).replace(relative, where, 1)) from None
    names = config.class_names or coco.class_names(kind, categories)
    mine = with_map(config, lm.VALUES, f"the categories of {where}", built, names)
    shipped = _shipped_equal(config, kind, mine)
    if shipped is not None:
        return dataclasses.replace(config, maps=dataclasses.replace(config.maps, label_map=shipped))
    return mine


def _shipped_equal(config: CorpusConfig, kind: str, mine: CorpusConfig) -> Optional[str]:
    name = {coco.INSTANCES: "coco", coco.PANOPTIC: "coco_panoptic"}.get(kind)
    if name is None:
        return None
    shipped = lm.SHIPPED[name]
    theirs = with_map(config, lm.VALUES, f"--label_map {name}", lm.shipped_bytes(name),
                      config.class_names or shipped.class_names)
    same = (mine.mask_map.entries, mine.mask_map.names, mine.class_names) == (
        theirs.mask_map.entries, theirs.mask_map.names, theirs.class_names)
    return name if same else None

