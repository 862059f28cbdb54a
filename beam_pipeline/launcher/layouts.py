"""``--layout``: a public dataset's folder recognised and read as it ships, on the launcher, before the job
(docs/layouts.md; the declarations are core/layouts.py).

Looked at once: which layout the folder is (``auto``: by its folders; a named one: its folders must be there),
and what it implies unless the command says otherwise: the shipped map its masks need, its class names (a
labelme2voc export's ``class_names.txt``), where splits come from (its split files or its paths) and their names.
The annotation layouts (COCO; also a COCO file given as ``--input``) are resolved by launcher/coco.py.
Every mistake is one line naming the folder expected (CorpusOptionsError).
"""

import dataclasses
from typing import Optional, Tuple

from beam_pipeline.core import layouts
from beam_pipeline.core.selection import SplitSpec
from beam_pipeline.io import folders
from beam_pipeline.io import layouts as io_layouts
from beam_pipeline.launcher import coco
from beam_pipeline.launcher.config import CorpusConfig
from beam_pipeline.launcher.options import CorpusOptionsError
from beam_pipeline.stages.specs import LAYOUT

def _which(config: CorpusConfig) -> Tuple[layouts.Layout, str]:
    """(the layout, the folder it is in) of ``config.input``; raises CorpusOptionsError with one line."""
    root = config.input
    if not folders.folder_exists(root):
        raise CorpusOptionsError(f"--input folder does not exist: {root}")
    if config.layout == layouts.AUTO:
        found, where = io_layouts.detect(root)
        if found is None:
            raise CorpusOptionsError(
                f"--input {root} is a folder of no known layout (voc, pet, cityscapes, ade20k, coco, coco_panoptic, "
                "sa1b: docs/layouts.md and docs/layouts-coco.md give each tree): name one with --layout, give "
                "--mask_template for paired "
                "image/mask folders, or give a listing file (.csv, .jsonl, .parquet)")
        return found, where
    layout = layouts.LAYOUTS[config.layout]
    exists = io_layouts.exists_under(root)
    if layout.name == "voc" and not exists("ImageSets/Segmentation") and exists("SegmentationClassPNG"):
        layout = layouts.LAYOUTS["voc_labelme"]               # labelme2voc: the same folders, no split files
    missing = [marker for marker in layout.markers if not exists(marker)]
    if missing and layout.family != layouts.ANNOTATIONS:          # those name their files (launcher/coco.py)
        wanted = missing[0].replace("|", " or ") + ("" if "*" in missing[0] else "/")
        raise CorpusOptionsError(f"--layout {config.layout}: {root} has no {wanted}; {layout.title} is read "
                                 f"from a folder like this:\n{layout.tree}".replace("\n", " | "))
    return layout, root


def resolve_layout(config: CorpusConfig) -> CorpusConfig:
    """``config`` with its layout resolved and what it implies (unchanged for any other input)."""
    if config.input_format != LAYOUT:
        return config
    if coco.is_file_input(config):              # an annotation file (or a JSON-lines listing named .json)
        config = coco.from_file(config)
        if config.input_format != LAYOUT:
            return config
        layout, root = layouts.LAYOUTS[config.layout], config.input
    else:
        layout, root = _which(config)
        if layout.family == layouts.ANNOTATIONS:
            config = coco.from_folder(config, layout, root)
    if layout.family == layouts.ANNOTATIONS:    # its map and classes come from its categories
        split_names = tuple({**dict(layout.split_names), **dict(config.split_names)}.items())
        return dataclasses.replace(config, input=root, layout=layout.name, split_names=split_names)
    maps = config.maps
    if not maps.any and layout.map_name:                  # any map option of the user's replaces the layout's
        maps = dataclasses.replace(maps, **{"label_map" if layout.map_option == "--label_map" else "color_map":
                                            layout.map_name})
    names = config.class_names or io_layouts.class_names(root, layout)
    limits = config.limits
    if names and not config.num_classes and not layout.map_name:
        limits = dataclasses.replace(limits, num_classes=len(names))
    split_names = tuple({**dict(layout.split_names), **dict(config.split_names)}.items())
    return dataclasses.replace(config, input=root, layout=layout.name, maps=maps, class_names=names, limits=limits,
                               split_names=split_names)


def layout_split(config: CorpusConfig) -> Optional[SplitSpec]:
    """Where a layout's splits come from: its split files or paths (the ``split`` metadata), unless --split says
    otherwise; a layout with neither splits by hash (launch.DEFAULT_HASH_SPLIT)."""
    layout = layouts.LAYOUTS[config.layout]
    if config.split is not None:
        if config.split.mode == "column" and config.split.column_name != "split":
            raise CorpusOptionsError(f"--split column:{config.split.column_name}: a layout has only its split "
                                     "column (split)")
        return config.split
    if layout.family == layouts.SPLIT_FILES or layout.split_from_path:
        return SplitSpec("column")
    if config.annotations is not None and all(file.split for file in config.annotations.files):
        return SplitSpec("column")                 # the annotation files' names give them
    return None
