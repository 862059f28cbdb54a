"""Public datasets' folders, laid out as they ship, made of real photographs (issue 42's test corpora).

Each pair's *true* mask is a class-id mask of a real photograph (tools/photo_corpus.py: its regions, a class
each, 255 on region borders). It is then stored as the dataset stores its masks, with tables of this module's
own taken from the published definitions (tests/published.py), never the product's maps:

* ``voc``: ``JPEGImages/``, palette PNGs in ``SegmentationClass/`` (class ids 0..20, 255 void), and
  ``ImageSets/Segmentation/{train,val,trainval}.txt``;
* ``voc_labelme``: a labelme2voc export: ``SegmentationClassPNG/`` palette PNGs, ``SegmentationClass/*.npy`` (not
  read), ``class_names.txt``, no split files;
* ``pet``: ``images/``, trimaps in ``annotations/trimaps/`` (1 pet, 2 background, 3 border) and
  ``annotations/{trainval,test,list}.txt`` with Pet's header comments;
* ``cityscapes``: ``leftImg8bit/<split>/<city>/`` and ``gtFine/<split>/<city>/*_gtFine_labelIds.png``;
* ``ade20k``: ``images/{training,validation}/`` and ``annotations/`` (0 other, class k stored as k + 1).

``write_layout(kind, out, pairs)`` returns ``{image path relative to out: (true mask, split as published)}``;
``stored_masks(out)`` reads a published output's masks back with tf.data (also for tests/coco_corpora.py's runs).
"""

import io
import json
from pathlib import Path
from typing import Dict, Tuple

import numpy as np
from PIL import Image

from published import CITYSCAPES_LABELS, PET_TRIMAP, VOC_CLASSES
from tools.photo_corpus import PhotoOptions, make_mask, make_photo, voc_palette

IGNORE = 255
CLASSES = {"voc": 21, "voc_labelme": 4, "pet": 2, "cityscapes": 19, "ade20k": 150}
LABELME_NAMES = ("_background_", "cat", "dog", "person")


def true_pair(kind: str, index: int) -> Tuple[np.ndarray, np.ndarray]:
    """(photo, class ids and 255); a dataset of few classes takes the regions' classes modulo their number."""
    count = CLASSES[kind]
    options = PhotoOptions(num_classes=max(count, 8))
    photo = make_photo(index, seed=42, options=options)
    mask = make_mask(photo, index, seed=42, options=options)
    return photo, np.where(mask == IGNORE, IGNORE, mask % count).astype(np.uint8)


def _png(image: Image.Image) -> bytes:
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def _palette_png(values: np.ndarray) -> bytes:
    image = Image.frombytes("P", (values.shape[1], values.shape[0]), values.astype(np.uint8).tobytes())
    image.putpalette(voc_palette())
    return _png(image)


def _jpeg(photo: np.ndarray, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(photo).save(path, quality=90)


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _lines(path: Path, lines) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{line}\n" for line in lines))


def _cityscapes_ids(mask: np.ndarray) -> np.ndarray:
    table = np.zeros(256, np.uint8)
    for label in CITYSCAPES_LABELS:
        if 0 <= label.trainId < 255 and label.id >= 0 and not table[label.trainId]:
            table[label.trainId] = label.id
    void = next(label.id for label in CITYSCAPES_LABELS if label.name == "unlabeled")
    return np.where(mask == IGNORE, void, table[mask]).astype(np.uint8)


def write_layout(kind: str, out: Path, pairs: int) -> Dict[str, Tuple[np.ndarray, str]]:
    out = Path(out)
    truth: Dict[str, Tuple[np.ndarray, str]] = {}
    splits: Dict[str, list] = {}
    for index in range(pairs):
        photo, mask = true_pair(kind, index)
        split = ("train", "val")[index % 3 == 2]
        if kind in ("voc", "voc_labelme"):
            stem = f"2007_{index:06d}"
            image = f"JPEGImages/{stem}.jpg"
            if kind == "voc":
                _write(out / f"SegmentationClass/{stem}.png", _palette_png(mask))
            else:
                _write(out / f"SegmentationClassPNG/{stem}.png", _palette_png(mask))
                (out / "SegmentationClass").mkdir(parents=True, exist_ok=True)
                np.save(out / f"SegmentationClass/{stem}.npy", mask.astype(np.int32))     # labelme2voc's own
                split = ""
        elif kind == "pet":
            stem = f"{('Abyssinian', 'Bengal', 'beagle')[index % 3]}_{100 + index}"
            image = f"images/{stem}.jpg"
            trimap = {value: code for code, value in ((1, 1), (2, 0), (3, IGNORE))}
            stored = np.vectorize(trimap.get, otypes=[np.uint8])(mask)
            _write(out / f"annotations/trimaps/{stem}.png", _png(Image.fromarray(stored)))
            split = ("trainval", "test")[index % 3 == 2]
        elif kind == "cityscapes":
            city = ("aachen", "bremen")[index % 2]
            stem = f"{city}_{index:06d}_000019"
            split = ("train", "val")[index % 3 == 2]
            image = f"leftImg8bit/{split}/{city}/{stem}_leftImg8bit.png"
            _write(out / f"gtFine/{split}/{city}/{stem}_gtFine_labelIds.png",
                   _png(Image.fromarray(_cityscapes_ids(mask))))
            _write(out / image, _png(Image.fromarray(photo)))
        else:
            split = ("training", "validation")[index % 3 == 2]
            stem = f"ADE_{split[:5] if split == 'training' else 'val'}_{index + 1:08d}"
            image = f"images/{split}/{stem}.jpg"
            stored = np.where(mask == IGNORE, 0, mask.astype(np.int32) + 1).astype(np.uint8)
            _write(out / f"annotations/{split}/{stem}.png", _png(Image.fromarray(stored)))
        if kind != "cityscapes":
            _jpeg(photo, out / image)
        truth[image] = (mask, split)
        splits.setdefault(split, []).append(stem)
    if kind == "voc":
        for split, stems in splits.items():
            _lines(out / f"ImageSets/Segmentation/{split}.txt", stems)
        _lines(out / "ImageSets/Segmentation/trainval.txt", splits["train"] + splits["val"])
    elif kind == "voc_labelme":
        _lines(out / "class_names.txt", ("__ignore__",) + LABELME_NAMES)
    elif kind == "pet":
        header = ["#Image CLASS-ID SPECIES BREED ID", "#All images with 1 species are cats..."]
        for split, stems in splits.items():
            _lines(out / f"annotations/{split}.txt", [f"{stem} {i % 37 + 1} 1 {i % 12 + 1}" for i, stem in
                                                       enumerate(stems)])
        _lines(out / "annotations/list.txt", header + [f"{s} 1 1 1" for stems in splits.values() for s in stems])
    assert set(PET_TRIMAP) == {1, 2, 3} and len(VOC_CLASSES) == 21
    return truth


def stored_masks(out: Path) -> Dict[str, Tuple[np.ndarray, str]]:
    """{source id: (stored mask, split)} of every record the published version holds, read with tf.data."""
    import tensorflow as tf
    manifest = json.loads((Path(out) / "manifest.json").read_text())
    found = {}
    for split, entry in manifest["splits"].items():
        for shard in entry["shards"]:
            for record in tf.data.TFRecordDataset(str(Path(out) / shard["path"])):
                example = tf.train.Example.FromString(record.numpy()).features.feature
                source = example["image/source_id"].bytes_list.value[0].decode()
                mask = example["image/segmentation/class/encoded"].bytes_list.value[0]
                found[source] = (np.asarray(Image.open(io.BytesIO(mask))), split)
    return found
