"""Corpora of real photographs whose masks are stored the way public datasets store theirs (issue 26's cases).

Each pair's *true* mask is a class-id mask of a real photograph (tools/photo_corpus.py: the photo's
regions, a class each, the ignore label 255 on region borders). It is then stored in one encoding,
with tables of this module's own (the published ones of tests/published.py), never the product's:

* ``cityscapes``: label ids of Cityscapes' ``*_gtFine_labelIds.png`` (a trainId's label id; ignore as
  one of the ids whose trainId is 255, varying over the mask);
* ``camvid``: CamVid's RGB colours (a class's colours drawn in turn; Void for ignore); every third mask an
  RGBA PNG whose ignored pixels are transparent over random colours, every fourth a palette PNG;
* ``ade``: class k stored as k + 1 and 0 for "other" (ADE20K, LoveDA);
* ``binary``: two classes and no ignore, foreground stored as 255;
* ``ids16``: 16-bit ids above 255 (two per class) through a map of this module's, half as 16-bit PNG and
  half as 16-bit TIFF (deflate), with the map file ``map.csv``.

``write_corpus(kind, out, pairs)`` writes ``images/*.jpg``, ``masks/*``, ``listing.csv`` and returns the
true masks by source id. ``broken`` adds one mask that no map covers (an unlisted value or colour).
"""

import csv
import io
from pathlib import Path
from typing import Dict, Tuple

import numpy as np
import tifffile
from PIL import Image

from published import CAMVID_LABEL_COLORS, CAMVID_SEGNET_GROUPS, CITYSCAPES_LABELS
from tools.photo_corpus import PhotoOptions, make_mask, make_photo

IGNORE = 255
NUM_CLASSES = {"cityscapes": 19, "camvid": 11, "ade": 10, "binary": 2, "ids16": 12}
UNLISTED_VALUE = 4242                    # in the broken ids16 mask
UNLISTED_COLOR = (1, 2, 3)               # in the broken camvid mask


def true_mask(kind: str, index: int) -> Tuple[np.ndarray, np.ndarray]:
    """(photo, class ids and 255) of pair ``index``; binary masks have no ignore pixels."""
    options = PhotoOptions(num_classes=8 if kind == "binary" else NUM_CLASSES[kind])
    photo = make_photo(index, seed=26, options=options)
    mask = make_mask(photo, index, seed=26, options=options)
    if kind == "binary":                  # the regions of odd class are the foreground
        mask = np.where(mask == IGNORE, 0, mask % 2).astype(np.uint8)
    return photo, mask


def _tiles(shape, count: int) -> np.ndarray:
    """An index 0..count-1 per pixel, constant on 40x40 tiles: spreads a class's source values over a mask."""
    rows, cols = np.indices(shape)
    return (rows // 40 + cols // 40) % count


def _cityscapes(mask: np.ndarray, index: int) -> bytes:
    train_to_id = {label.trainId: label.id for label in CITYSCAPES_LABELS if 0 <= label.trainId < 255 and label.id >= 0}
    void_ids = [label.id for label in CITYSCAPES_LABELS if label.trainId == 255 and label.id >= 0]
    table = np.zeros(256, np.uint8)
    for train_id, label_id in train_to_id.items():
        table[train_id] = label_id
    stored = table[mask]
    voids = np.asarray(void_ids, np.uint8)[(_tiles(mask.shape, len(void_ids)) + index) % len(void_ids)]
    stored = np.where(mask == IGNORE, voids, stored)
    return _png(Image.fromarray(stored.astype(np.uint8)))


def _camvid_colors(index: int) -> np.ndarray:
    """uint8[256, 3]: the colour each class is drawn in for pair ``index`` (a class's colours in turn)."""
    colors = np.zeros((256, 3), np.uint8)
    for c, (_, members) in enumerate(CAMVID_SEGNET_GROUPS):
        colors[c] = CAMVID_LABEL_COLORS[members[index % len(members)]]
    colors[IGNORE] = CAMVID_LABEL_COLORS["Void"]
    return colors


def _camvid(mask: np.ndarray, index: int, rng: np.random.Generator) -> bytes:
    rgb = _camvid_colors(index)[mask]
    if index % 3 == 2:                    # RGBA: ignored pixels transparent, over random colours
        alpha = np.where(mask == IGNORE, 0, 255).astype(np.uint8)
        noise = rng.integers(0, 256, size=rgb.shape, dtype=np.uint8)
        rgb = np.where((mask == IGNORE)[..., None], noise, rgb)
        return _png(Image.fromarray(np.dstack([rgb, alpha]), "RGBA"))
    if index % 4 == 3:                    # palette PNG: the palette is the colour code, in a shuffled order
        colors, inverse = np.unique(rgb.reshape(-1, 3), axis=0, return_inverse=True)
        order = rng.permutation(len(colors))
        indices = np.argsort(order)[inverse.ravel()].reshape(mask.shape).astype(np.uint8)
        image = Image.frombytes("P", (mask.shape[1], mask.shape[0]), indices.tobytes())
        image.putpalette(colors[order].ravel().tolist())
        return _png(image)
    return _png(Image.fromarray(rgb))


def ids16_map() -> Dict[int, object]:
    """The ids16 corpus's own map: two 16-bit ids per class, and two ids for ignore."""
    table: Dict[int, object] = {0: "ignore", 65535: "ignore"}
    for c in range(NUM_CLASSES["ids16"]):
        table[1000 + 61 * c] = c
        table[30000 + 7 * c] = c
    return table


def _ids16(mask: np.ndarray, index: int, folder: Path, stem: str) -> str:
    first = (1000 + 61 * mask.astype(np.int64))
    second = (30000 + 7 * mask.astype(np.int64))
    stored = np.where(_tiles(mask.shape, 2) == 0, first, second)
    stored = np.where(mask == IGNORE, np.where(_tiles(mask.shape, 2) == 0, 0, 65535), stored).astype(np.uint16)
    if index % 2:
        name = f"{stem}.tif"
        tifffile.imwrite(folder / name, stored, compression="zlib")
    else:
        name = f"{stem}.png"
        (folder / name).write_bytes(_png(Image.fromarray(stored)))
    return name


def _png(image: Image.Image) -> bytes:
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def write_corpus(kind: str, out: Path, pairs: int, broken: bool = False) -> Dict[str, np.ndarray]:
    """Write the corpus; returns ``{image path relative to out: true mask}`` of its good pairs."""
    out = Path(out)
    (out / "images").mkdir(parents=True, exist_ok=True)
    (out / "masks").mkdir(parents=True, exist_ok=True)
    truth, rows = {}, []
    for index in range(pairs + (1 if broken else 0)):
        photo, mask = true_mask(kind, index)
        stem = f"{kind}_{index:04d}"
        Image.fromarray(photo).save(out / "images" / f"{stem}.jpg", quality=90)
        rng = np.random.default_rng([26, index])
        if kind == "ids16":
            name = _ids16(mask, index, out / "masks", stem)
            if index == pairs:
                data = np.asarray(Image.open(out / "masks" / name)).copy()
                data[:4, :4] = UNLISTED_VALUE
                (out / "masks" / name).unlink()
                name = f"{stem}.png"
                (out / "masks" / name).write_bytes(_png(Image.fromarray(data)))
        else:
            data = {"cityscapes": lambda: _cityscapes(mask, index), "camvid": lambda: _camvid(mask, index, rng),
                    "ade": lambda: _png(Image.fromarray(np.where(mask == IGNORE, 0, mask + 1).astype(np.uint8))),
                    "binary": lambda: _png(Image.fromarray((mask * 255).astype(np.uint8)))}[kind]()
            if index == pairs and kind == "camvid":
                rgb = np.asarray(Image.open(io.BytesIO(data)).convert("RGB")).copy()
                rgb[:3, :5] = UNLISTED_COLOR
                data = _png(Image.fromarray(rgb))
            name = f"{stem}.png"
            (out / "masks" / name).write_bytes(data)
        rows.append((f"images/{stem}.jpg", f"masks/{name}"))
        if index < pairs:
            truth[f"images/{stem}.jpg"] = mask
    with (out / "listing.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["image", "mask"])
        writer.writerows(rows)
    if kind == "ids16":
        with (out / "map.csv").open("w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["value", "class"])
            writer.writerows(sorted(ids16_map().items()))
    return truth


FOOD_MAP = {"apple_pie": "dessert", "tiramisu": "dessert", "steak": "meat", "menu": "ignore"}


def write_class_folders(out: Path, per_class: int) -> Dict[str, str]:
    """Class folders of real photographs (Food-101's layout, ``images/<folder>/<id>.jpg``) and ``map.csv``, which
    groups the folders into two classes and leaves one out; returns ``{image path: its folder}``."""
    out = Path(out)
    folders = {}
    for number, folder in enumerate(FOOD_MAP):
        (out / "images" / folder).mkdir(parents=True, exist_ok=True)
        for index in range(per_class):
            photo = make_photo(100 * number + index, seed=29)
            name = f"images/{folder}/{index:03d}.jpg"
            Image.fromarray(photo).save(out / name, quality=90)
            folders[name] = folder
    with (out / "map.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["value", "class"])
        writer.writerows(FOOD_MAP.items())
    return folders
