"""COCO as a mask source (issue 42, item 2): ``--layout coco``, ``coco_panoptic`` (recognised by ``auto``) and ``sa1b``
alone, and a COCO annotation file as ``--input``, on datasets of real photographs laid out as they ship
(tests/coco_corpora.py).

Each run's shards are read back with tf.data. The expected masks are composed here: instances with pycocotools'
``COCO.annToMask`` of every annotation, painted in decreasing area (its pixels), ties by annotation id, crowds
ignored (or their category with ``--coco_crowd class``); panoptic from the true regions the PNGs were written from;
SA-1B from pycocotools' ``decode`` of each RLE, any annotated pixel foreground. Splits come from the annotation
files' names, class names from their categories (tests/published.py); the counts account for the image without
annotation and the orphan annotation; an unchanged re-run reuses every verdict.
"""

import json

import numpy as np
import pytest
from PIL import Image
from pycocotools import mask as coco_mask
from pycocotools.coco import COCO

from coco_corpora import (BORDER, ORPHAN_IMAGE_ID, photo_and_regions, write_instances, write_panoptic, write_sa1b)
from conftest import dataset_dir, run_cli
from layout_corpora import stored_masks
from published import COCO_PANOPTIC_CATEGORIES, COCO_THING_CATEGORIES

INSTANCES = 10
THING_IDS = sorted(c["id"] for c in COCO_THING_CATEGORIES)
FAST = ("--no_stats", "--balance", "none")


@pytest.fixture(scope="module")
def instances(tmp_path_factory):
    root = tmp_path_factory.mktemp("coco")
    written = write_instances(root / "coco", INSTANCES)
    runs = {crowd: run_cli("--input", root / "coco", "--output", root / f"out_{crowd}", "--layout", "coco",
                           *(("--coco_crowd", "class") if crowd == "class" else ()))
            for crowd in ("ignore", "class")}
    again = run_cli("--input", root / "coco", "--output", root / "out_ignore", "--layout", "coco", "--overwrite")
    return root, written, runs, again


def _expected_instances(root, crowd: str) -> dict:
    """{image path: class ids} composed from COCO.annToMask (module docstring)."""
    expected = {}
    for split in ("train", "val"):
        coco = COCO(str(root / "coco" / "annotations" / f"instances_{split}2017.json"))
        for image_id, image in coco.imgs.items():
            annotations = coco.loadAnns(coco.getAnnIds(imgIds=[image_id]))
            if not annotations:
                continue
            masks = [(coco.annToMask(a), a) for a in annotations]
            mask = np.zeros((image["height"], image["width"]), np.uint8)
            for binary, annotation in sorted(masks, key=lambda item: (-int(item[0].sum()), item[1]["id"])):
                ignored = annotation["iscrowd"] == 1 and crowd == "ignore"
                mask[binary == 1] = BORDER if ignored else 1 + THING_IDS.index(annotation["category_id"])
            expected[f"{split}2017/{image['file_name']}"] = mask
    return expected


@pytest.mark.parametrize("crowd", ["ignore", "class"])
def test_instances_masks_are_annToMask_painted_largest_first(instances, crowd):
    root, written, runs, _ = instances
    stored = stored_masks(root / f"out_{crowd}")
    expected = _expected_instances(root, crowd)
    assert sorted(stored) == sorted(expected) == sorted(written)
    for source, (mask, _) in stored.items():
        assert mask.shape == expected[source].shape and np.array_equal(mask, expected[source]), source
    crowds = sum(int((mask == BORDER).sum()) for mask, _ in stored.values())
    assert (crowds > 0) == (crowd == "ignore")


def test_instances_splits_classes_and_counts_come_from_the_files(instances):
    root, written, runs, _ = instances
    stored = stored_masks(root / "out_ignore")
    assert {source: split for source, (_, split) in stored.items()} == written
    manifest = json.loads((root / "out_ignore" / "manifest.json").read_text())
    assert manifest["class_names"] == ["background"] + [c["name"] for c in sorted(COCO_THING_CATEGORIES,
                                                                                   key=lambda c: c["id"])]
    counts = manifest["counts"]
    assert counts["discovered"] == INSTANCES + 2
    assert counts["filtered_out"]["by_reason"] == {"no_annotations": 1}
    assert counts["rejected"]["by_reason"] == {"orphan_annotation": 1}
    assert counts["written"] == INSTANCES
    rejects = [json.loads(line) for path in (dataset_dir(root / "out_ignore") / "rejects").glob("*.jsonl")
               for line in path.read_text().splitlines()]
    assert [r["reason"] for r in rejects] == ["orphan_annotation"] and str(ORPHAN_IMAGE_ID) in rejects[0]["detail"]


def test_an_unchanged_rerun_draws_and_validates_nothing(instances):
    root, _, _, again = instances
    manifest = json.loads((root / "out_ignore" / "manifest.json").read_text())
    assert manifest["lineage"]["validated"] == 0 and manifest["lineage"]["from_cache"] == INSTANCES, manifest["lineage"]
    assert "0 pairs validated" in again.stdout


@pytest.fixture(scope="module")
def panoptic(tmp_path_factory):
    root = tmp_path_factory.mktemp("panoptic")
    truth = write_panoptic(root / "coco", 6)
    return root, truth, run_cli("--input", root / "coco", "--output", root / "out", "--split_names", "val=test", *FAST)


def test_panoptic_is_recognised_and_its_masks_are_the_segments_categories_in_renamed_splits(panoptic):
    root, truth, completed = panoptic
    first = completed.stderr.strip().splitlines()[0]
    assert "(layout coco_panoptic: " in first, first
    stored = stored_masks(root / "out")
    assert sorted(stored) == sorted(truth)
    for source, (mask, split) in stored.items():
        assert np.array_equal(mask, truth[source][0]), source
        assert split == {"val": "test"}.get(truth[source][1], truth[source][1])         # --split_names renames
    manifest = json.loads((root / "out" / "manifest.json").read_text())
    assert manifest["class_names"] == [c["name"] for c in sorted(COCO_PANOPTIC_CATEGORIES, key=lambda c: c["id"])]


def test_sa1b_masks_are_foreground_where_any_annotation_is(tmp_path):
    written = write_sa1b(tmp_path / "sa1b", 5)
    run_cli("--input", tmp_path / "sa1b", "--output", tmp_path / "out", "--layout", "sa1b", *FAST)
    stored = stored_masks(tmp_path / "out")
    assert sorted(stored) == sorted(written)
    for source, (mask, _) in stored.items():
        record = json.loads((tmp_path / "sa1b" / source).with_suffix(".json").read_text())
        union = np.zeros(mask.shape, bool)
        for annotation in record["annotations"]:
            union |= coco_mask.decode(annotation["segmentation"]).astype(bool)
        assert np.array_equal(mask, union.astype(np.uint8)), source
    assert json.loads((tmp_path / "out" / "manifest.json").read_text())["class_names"] == ["background", "foreground"]


def test_a_coco_file_as_input_is_read_with_its_own_categories_16_bit_ids_too(tmp_path):
    categories = [{"id": 7, "name": "kettle"}, {"id": 300, "name": "teapot"}, {"id": 1000, "name": "mug"}]
    write_instances(tmp_path / "kitchen", 3, categories=categories, bad_inputs=False)
    completed = run_cli("--input", tmp_path / "kitchen" / "annotations" / "instances_train2017.json",
                        "--output", tmp_path / "out", *FAST)
    assert "(layout coco: " in completed.stderr.strip().splitlines()[0]
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["class_names"] == ["background", "kettle", "teapot", "mug"]
    stored = stored_masks(tmp_path / "out")
    coco = COCO(str(tmp_path / "kitchen" / "annotations" / "instances_train2017.json"))
    classes = {7: 1, 300: 2, 1000: 3}
    assert set(stored) == {f"train2017/{image['file_name']}" for image in coco.imgs.values()}
    for image_id, image in coco.imgs.items():
        masks = [(coco.annToMask(a), a) for a in coco.loadAnns(coco.getAnnIds(imgIds=[image_id]))]
        expected = np.zeros((image["height"], image["width"]), np.uint8)
        for binary, annotation in sorted(masks, key=lambda item: (-int(item[0].sum()), item[1]["id"])):
            expected[binary == 1] = BORDER if annotation["iscrowd"] else classes[annotation["category_id"]]
        mask, split = stored[f"train2017/{image['file_name']}"]
        assert split == "train" and np.array_equal(mask, expected), image["file_name"]


@pytest.mark.parametrize("suffix", [".jsonl", ".json"])
def test_a_json_lines_listing_still_works_named_jsonl_or_json(tmp_path, suffix):
    rows = []
    for index in range(3):
        photo, regions = photo_and_regions(index)
        Image.fromarray(photo).save(tmp_path / f"{index}.png")
        Image.fromarray(np.where(regions == BORDER, 255, regions % 4).astype(np.uint8)).save(tmp_path / f"{index}m.png")
        rows.append(json.dumps({"image": f"{index}.png", "mask": f"{index}m.png", "split": "train"}))
    (tmp_path / f"listing{suffix}").write_text("\n".join(rows) + "\n")
    completed = run_cli("--input", tmp_path / f"listing{suffix}", "--output", tmp_path / "out", "--num_classes", 4,
                        *FAST)
    assert "(listing, segmentation)" in completed.stderr.strip().splitlines()[0]
    assert json.loads((tmp_path / "out" / "manifest.json").read_text())["counts"]["written"] == 3


@pytest.mark.parametrize("case", ["missing", "not_coco", "category_too_large", "no_images"])
def test_a_users_mistake_is_one_line_naming_the_file_and_the_fix(tmp_path, case):
    root = tmp_path / "coco"
    write_instances(root, 1, bad_inputs=False)
    annotations = root / "annotations" / "instances_train2017.json"
    given = annotations
    if case == "missing":
        given = root / "annotations" / "instances_test2017.json"
    elif case == "not_coco":
        annotations.write_text(json.dumps({"image": "a.jpg", "mask": "b.png"}) + "\n")
    elif case == "category_too_large":
        content = json.loads(annotations.read_text())
        content["categories"].append({"id": 70000, "name": "giant"})
        annotations.write_text(json.dumps(content))
    else:
        for image in (root / "train2017").iterdir():
            image.unlink()
        (root / "train2017").rmdir()
    completed = run_cli("--input", given, "--output", tmp_path / "out", "--layout", "coco", check=False)
    lines = completed.stderr.strip().splitlines()
    assert completed.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), completed.stderr
    assert "Traceback" not in completed.stderr
    assert {"missing": "instances_test2017.json does not exist", "not_coco": "is not a COCO annotation file",
            "category_too_large": "has id 70000", "no_images": "no folder of its images"}[case] in lines[0], lines[0]


def test_an_annotation_file_broken_midway_stops_the_run_in_one_line(tmp_path):
    write_instances(tmp_path / "coco", 3, bad_inputs=False)
    path = tmp_path / "coco" / "annotations" / "instances_train2017.json"
    data = bytearray(path.read_bytes())
    data[len(data) // 2:len(data) // 2 + 5] = b"#####"             # its start and its categories are whole
    path.write_bytes(bytes(data))
    completed = run_cli("--input", tmp_path / "coco", "--output", tmp_path / "out", "--layout", "coco", *FAST,
                        check=False)
    assert completed.returncode == 1 and "Traceback" not in completed.stderr, completed.stderr[-3000:]
    (line,) = [line for line in completed.stderr.splitlines() if line.startswith("error:")]
    assert f"cannot read the annotation file {path}: it is not valid JSON" in line and "download it again" in line
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_plan_draws_its_sample_and_counts_exactly(instances):
    root = instances[0]
    completed = run_cli("--input", root / "coco", "--output", root / "planned", "--layout", "coco", "--plan", *FAST)
    assert f"discovered inputs        {INSTANCES + 2} (exact)" in completed.stdout
    assert f"selected pairs           {INSTANCES} (exact)" in completed.stdout
    assert "mask values (--label_map coco;" in completed.stdout and "255 crowd" in completed.stdout
    assert not (root / "planned").exists()
