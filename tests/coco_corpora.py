"""COCO-format datasets made of real photographs (issue 42, item 2), laid out as COCO, COCO panoptic and SA-1B ship.

Every image is a photograph of tools/photo_corpus.py; its regions (``make_mask``: a class per region, 255 on the
borders between them) become the annotations, written as the datasets write them (tools/coco_corpus.py: polygons,
RLE), with the published categories (tests/published.py), never the product's maps:

* ``write_instances``: ``annotations/instances_{train,val}2017.json`` and ``{train,val}2017/*.jpg``. Each region is
  an annotation, in turn as polygons (its contours), a compressed RLE and an uncompressed RLE; every image has a
  small rectangle in front of the regions (overlap) and every other image a crowd (uncompressed RLE, as COCO
  stores crowds). The train file also holds an image with no annotation and an annotation of an image id it does
  not list. The file's keys are in COCO's order, categories last. ``categories`` may be other than COCO's.
* ``write_panoptic``: ``annotations/panoptic_{train,val}2017.json``, a PNG per image in
  ``annotations/panoptic_{train,val}2017/`` (segment id ``R + 256 G + 256^2 B``, 0 on the borders), the images in
  ``{train,val}2017/``; one crowd segment in every other image. Returns the true class ids of each image.
* ``write_sa1b``: ``sa_<n>.jpg`` with ``sa_<n>.json`` (compressed RLE of each region, and of the union of two regions,
  overlapping as SA-1B's masks do), the last two in a tar's folder ``sa_000001/``.
"""

import io
import json
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import numpy as np
from PIL import Image

from published import COCO_PANOPTIC_CATEGORIES, COCO_THING_CATEGORIES
from tools.coco_corpus import (BORDER, SEGMENTATIONS, compressed_rle, photo_and_regions, polygons, region_values,
                               uncompressed_rle)

ORPHAN_IMAGE_ID = 999_999


def _jpeg(photo: np.ndarray, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(photo).save(path, quality=90)


def _info() -> dict:
    return {"description": "test corpus of real photographs", "version": "1.0", "year": 2026}


def _dump(path: Path, value: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value))          # json.dump keeps the keys' order: categories last, as COCO's


# --------------------------------------------------------------------------
# The layouts
# --------------------------------------------------------------------------
def _split(index: int) -> str:
    return "val" if index % 3 == 2 else "train"


def write_instances(out: Path, images: int, categories: Sequence[dict] = COCO_THING_CATEGORIES,
                    set_names=("train2017", "val2017"), bad_inputs: bool = True) -> Dict[str, str]:
    """The instances layout (module docstring); ``{image path relative to out: split}`` of the annotated images."""
    ids = sorted(category["id"] for category in categories)
    files = {split: {"info": _info(), "licenses": [], "images": [], "annotations": [],
                     "categories": [dict(c) for c in categories]} for split in ("train", "val")}
    written, next_id = {}, 1
    for index in range(images):
        photo, regions = photo_and_regions(index)
        split = _split(index)
        set_name = set_names[split == "val"]
        name = f"{100000 + index:012d}.jpg"
        _jpeg(photo, out / set_name / name)
        height, width = regions.shape
        image_id = 1000 + index
        files[split]["images"].append({"license": 1, "file_name": name, "height": height, "width": width,
                                       "id": image_id})
        written[f"{set_name}/{name}"] = split
        annotations = []
        for k, value in enumerate(region_values(regions)):
            kind, encode = SEGMENTATIONS[(index + k) % 3]
            annotations.append((ids[(value * 7 + index) % len(ids)], 0, encode(regions == value)))
        front = np.zeros_like(regions, dtype=bool)
        front[height // 3:height // 3 + 40, width // 4:width // 4 + 60] = True
        annotations.append((ids[(index * 5 + 1) % len(ids)], 0, polygons(front)))
        if index % 2 == 0:
            crowd = np.zeros_like(front)
            crowd[height - 90:height - 20, 20:width // 2] = True
            annotations.append((ids[0], 1, uncompressed_rle(crowd)))
        for category, iscrowd, segmentation in annotations:
            files[split]["annotations"].append({"segmentation": segmentation, "area": 0.0, "iscrowd": iscrowd,
                                                "image_id": image_id, "bbox": [0, 0, 1, 1],
                                                "category_id": category, "id": next_id})
            next_id += 7
    if bad_inputs:
        photo, regions = photo_and_regions(images)
        _jpeg(photo, out / set_names[0] / "unannotated.jpg")
        files["train"]["images"].append({"license": 1, "file_name": "unannotated.jpg", "height": regions.shape[0],
                                         "width": regions.shape[1], "id": 5})
        files["train"]["annotations"].append({"segmentation": polygons(regions == regions[0, 0]), "area": 1.0,
                                              "iscrowd": 0, "image_id": ORPHAN_IMAGE_ID, "bbox": [0, 0, 1, 1],
                                              "category_id": ids[0], "id": next_id})
    for split, content in files.items():
        _dump(out / "annotations" / f"instances_{set_names[split == 'val']}.json", content)
    return written


def write_panoptic(out: Path, images: int) -> Dict[str, Tuple[np.ndarray, str]]:
    """The panoptic layout (module docstring); ``{image path relative to out: (true class ids, split)}``, the classes
    being the panoptic categories in id order and 255 the crowds and the unlabeled borders."""
    categories = sorted(COCO_PANOPTIC_CATEGORIES, key=lambda c: c["id"])
    things = [c for c in categories if c["isthing"] == 1]
    files = {split: {"info": _info(), "licenses": [], "images": [], "annotations": [],
                     "categories": [dict(c) for c in COCO_PANOPTIC_CATEGORIES]} for split in ("train", "val")}
    truth = {}
    for index in range(images):
        photo, regions = photo_and_regions(index)
        split = _split(index)
        set_name = f"{split}2017"
        stem = f"{200000 + index:012d}"
        _jpeg(photo, out / set_name / f"{stem}.jpg")
        ids = np.zeros(regions.shape, np.int64)
        classes = np.full(regions.shape, BORDER, np.uint8)
        segments = []
        for k, value in enumerate(region_values(regions)):
            segment = 70_001 + index * 1009 + k * 257 if k % 2 == 0 else 1 + index * 31 + k
            crowd = int(index % 2 == 0 and k == 1)
            category = (things[(index + k) % len(things)] if crowd
                        else categories[(value * 17 + index) % len(categories)])
            ids[regions == value] = segment
            if not crowd:
                classes[regions == value] = categories.index(category)
            segments.append({"id": segment, "category_id": category["id"], "iscrowd": crowd,
                             "area": int((regions == value).sum()), "bbox": [0, 0, 1, 1]})
        rgb = np.stack([ids % 256, ids // 256 % 256, ids // 65536], axis=-1).astype(np.uint8)
        png = io.BytesIO()
        Image.fromarray(rgb).save(png, format="PNG")
        (out / "annotations" / f"panoptic_{set_name}").mkdir(parents=True, exist_ok=True)
        (out / "annotations" / f"panoptic_{set_name}" / f"{stem}.png").write_bytes(png.getvalue())
        image_id = 2000 + index
        files[split]["images"].append({"file_name": f"{stem}.jpg", "height": regions.shape[0],
                                       "width": regions.shape[1], "id": image_id})
        files[split]["annotations"].append({"segments_info": segments, "file_name": f"{stem}.png",
                                            "image_id": image_id})
        truth[f"{set_name}/{stem}.jpg"] = (classes, split)
    for split, content in files.items():
        _dump(out / "annotations" / f"panoptic_{split}2017.json", content)
    return truth


def write_sa1b(out: Path, images: int) -> List[str]:
    """SA-1B's layout (module docstring); the image paths relative to ``out``."""
    written = []
    for index in range(images):
        photo, regions = photo_and_regions(index)
        folder = out / "sa_000001" if index >= images - 2 else out
        name = f"sa_{300 + index}"
        _jpeg(photo, folder / f"{name}.jpg")
        values = region_values(regions)
        masks = [regions == value for value in values[1:]] + [np.isin(regions, values[1:3])]
        annotations = [{"id": 400 * index + k, "segmentation": compressed_rle(binary), "area": int(binary.sum()),
                        "bbox": [0, 0, 1, 1], "predicted_iou": 0.9, "stability_score": 0.95,
                        "point_coords": [[1.0, 1.0]], "crop_box": [0, 0, regions.shape[1], regions.shape[0]]}
                       for k, binary in enumerate(masks)]
        record = {"image": {"image_id": 300 + index, "width": regions.shape[1], "height": regions.shape[0],
                            "file_name": f"{name}.jpg"}, "annotations": annotations}
        (folder / f"{name}.json").write_text(json.dumps(record))
        written.append(str((folder / f"{name}.jpg").relative_to(out)))
    return written
