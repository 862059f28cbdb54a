"""The annotation-file benchmark's data (bench/coco_memory.py): COCO instances datasets whose annotation file is
built to a size by repeating the photo corpus's real annotations.

The pool: ``--photos`` photographs of tools/photo_corpus.py as JPEG q90 (``<workdir>/coco/pool/train2017/``) and
each one's annotations (tools/coco_corpus.py): every region of the photo as polygons, as a compressed RLE and as a
crowd (an uncompressed RLE, as COCO stores crowds), three annotations a region, 9 to 18 an image (COCO's crowded
images carry more). A file of N MiB lists images until it holds N MiB: image i names photo ``i mod pool`` under its
own id, with the photo's annotations, their categories shifted by the copy number so that no two images have the same
mask (none is a duplicate). It is written a record at a time, images, then annotations, then the categories
(``category_<id>``, 80 of them), COCO's key order, to ``<workdir>/coco/<N>mib/annotations/instances_train2017.json``
beside a link to the pool's images, and kept (its stamp names the generator's version).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path

from PIL import Image

from common import MB, ROOT, log

sys.path.insert(0, str(ROOT))
from tools import coco_corpus, photo_corpus  # noqa: E402

CATEGORIES = 80


def generator_version() -> str:
    sources = [Path(__file__), ROOT / "tools" / "coco_corpus.py", ROOT / "tools" / "photo_corpus.py"]
    return hashlib.sha256(b"".join(path.read_bytes() for path in sources)).hexdigest()[:12]


def _annotations(photo: int) -> list[str]:
    """The photo's annotations as JSON text without their closing ``, "image_id": ...}`` (:func:`_annotation`)."""
    _, regions = coco_corpus.photo_and_regions(photo)
    out = []
    for value in coco_corpus.region_values(regions):
        binary = regions == value
        for crowd, encode in ((0, coco_corpus.polygons), (0, coco_corpus.compressed_rle),
                              (1, coco_corpus.uncompressed_rle)):
            out.append(json.dumps({"segmentation": encode(binary), "area": float(binary.sum()), "iscrowd": crowd})[:-1])
    return out


def _annotation(opening: str, image_id: int, category_id: int, ident: int) -> str:
    return (f'{opening}, "image_id": {image_id}, "bbox": [0.0, 0.0, 1.0, 1.0], "category_id": {category_id}, '
            f'"id": {ident}}}')


def ensure_pool(workdir: Path, photos: int) -> tuple[Path, list[list[str]]]:
    """The pool's image folder and each photo's annotations (:func:`_annotations`; generated once, then cached)."""
    pool = workdir / "coco" / f"pool_{photos}_{generator_version()}"
    cache = pool / "templates.json"
    if cache.exists():
        return pool / "train2017", json.loads(cache.read_text())
    started = time.perf_counter()
    (pool / "train2017").mkdir(parents=True, exist_ok=True)
    templates = []
    for index in range(photos):
        photo, _ = coco_corpus.photo_and_regions(index)
        Image.fromarray(photo).save(pool / "train2017" / f"photo_{index:05d}.jpg", quality=90)
        templates.append(_annotations(index))
    cache.write_text(json.dumps(templates))
    log(f"coco pool: {photos} photographs and their annotations in {time.perf_counter() - started:.0f} s")
    return pool / "train2017", templates


def ensure_dataset(workdir: Path, photos: int, mib: int) -> Path:
    """The dataset folder whose annotation file holds at least ``mib`` MiB (module docstring)."""
    images, templates = ensure_pool(workdir, photos)
    root = workdir / "coco" / f"{mib}mib_{photos}_{generator_version()}"
    path = root / "annotations" / "instances_train2017.json"
    if (root / "stamp.json").exists():
        return root
    (root / "annotations").mkdir(parents=True, exist_ok=True)
    if not (root / "train2017").exists():
        os.symlink(images, root / "train2017")
    started = time.perf_counter()
    image_text = ('{{"license": 1, "file_name": "photo_{photo:05d}.jpg", "coco_url": "http://example.org/{id}.jpg", '
                  '"height": {height}, "width": {width}, "date_captured": "2026-12-05 00:00:00", "id": {id}}}')
    sizes = [sum(len(t) for t in one) + len(image_text) + 40 for one in templates]
    count, total = 0, 0
    while total < mib * MB:
        total += sizes[count % photos]
        count += 1
    with path.open("w") as out:
        out.write('{"info": {"description": "bench/coco_data.py"}, "licenses": [{"id": 1, "name": "test"}], '
                  '"images": [')
        for i in range(count):
            out.write((", " if i else "") + image_text.format(photo=i % photos, id=i + 1, height=photo_corpus.HEIGHT,
                                                             width=photo_corpus.WIDTH))
        out.write('], "annotations": [')
        ident = 0
        for i in range(count):
            for k, template in enumerate(templates[i % photos]):
                ident += 1
                category = (k * 7 + i // photos) % CATEGORIES + 1
                out.write((", " if ident > 1 else "") + _annotation(template, i + 1, category, ident))
        categories = [{"supercategory": "thing", "id": c, "name": f"category_{c}"} for c in range(1, CATEGORIES + 1)]
        out.write('], "categories": ' + json.dumps(categories) + "}")
    stamp = {"images": count, "annotations": ident, "bytes": path.stat().st_size}
    (root / "stamp.json").write_text(json.dumps(stamp))
    log(f"coco {mib} MiB: {count} images, {ident} annotations, {stamp['bytes'] / MB:.0f} MiB in "
        f"{time.perf_counter() - started:.0f} s")
    return root


def stamp(root: Path) -> dict:
    return json.loads((root / "stamp.json").read_text())
