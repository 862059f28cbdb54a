"""COCO-format annotations of the photo corpus (tools/photo_corpus.py): each photograph's regions as COCO stores
segmentations, for the COCO test corpora (tests/coco_corpora.py) and the annotation-file benchmark
(bench/coco_memory.py). Not shipped; nothing in the product imports it.

* :func:`photo_and_regions`: a photograph and its regions (a class per region, 255 on the borders between them);
* :func:`polygons`: a region's outlines as COCO polygons (``[x1, y1, x2, y2, ...]``, 2 decimals);
* :func:`compressed_rle`, :func:`uncompressed_rle`: a region as COCO's RLE, the string form pycocotools writes and
  the list of runs COCO keeps for crowds.
"""

from typing import List, Tuple

import numpy as np
from pycocotools import mask as coco_mask
from skimage import measure

from tools.photo_corpus import PhotoOptions, make_mask, make_photo

BORDER = 255
SEED = 7


def photo_and_regions(index: int, seed: int = SEED) -> Tuple[np.ndarray, np.ndarray]:
    options = PhotoOptions(num_classes=8)
    photo = make_photo(index, seed=seed, options=options)
    return photo, make_mask(photo, index, seed=seed, options=options)


def region_values(regions: np.ndarray) -> List[int]:
    return sorted(set(np.unique(regions).tolist()) - {BORDER})


def polygons(binary: np.ndarray) -> List[List[float]]:
    """The outlines of a binary mask as COCO polygons (its holes are outlines too, as a contour tracer gives them)."""
    padded = np.pad(binary.astype(float), 1)
    out = []
    for contour in measure.find_contours(padded, 0.5):
        simple = measure.approximate_polygon(contour - 1, tolerance=1.0)
        if len(simple) >= 3:
            out.append([round(float(v), 2) for y, x in simple for v in (x, y)])
    return out


def compressed_rle(binary: np.ndarray) -> dict:
    rle = coco_mask.encode(np.asfortranarray(binary.astype(np.uint8)))
    return {"size": [int(s) for s in rle["size"]], "counts": rle["counts"].decode("ascii")}


def uncompressed_rle(binary: np.ndarray) -> dict:
    """Runs of 0s and 1s in column-major order, starting with 0s (COCO's ``iscrowd`` segmentations)."""
    flat = binary.ravel(order="F").astype(np.uint8)
    bounds = np.concatenate(([0], np.flatnonzero(np.diff(flat)) + 1, [flat.size]))
    runs = np.diff(bounds).tolist()
    return {"size": list(binary.shape), "counts": ([0] if flat[0] else []) + runs}


SEGMENTATIONS = (("polygons", polygons), ("rle", compressed_rle), ("uncompressed", uncompressed_rle))
