"""COCO as a mask source, without a pipeline: core/coco.py (names, categories, maps, one image's records as a pair),
core/masks/drawn.py (the overlap, crowd and bit-depth rules, on hand-made masks whose expected pixels are written
out here), io/coco.py (categories from a file's tail or streamed, a COCO file told from a listing), and the shipped
maps ``coco``, ``coco_panoptic`` and ``sa1b`` against the published definitions (tests/published.py)."""

import io
import json
import zlib

import numpy as np
import pytest
from PIL import Image
from pycocotools import mask as coco_mask

from beam_pipeline.core import coco, masks, reasons
from beam_pipeline.core.masks import drawn
from beam_pipeline.core.masks import maps as lm
from beam_pipeline.core.pixels import Limits
from beam_pipeline.core.records import FILTERED, REJECTED, Outcome, PairRef
from beam_pipeline.io import coco as io_coco
from published import COCO_PANOPTIC_CATEGORIES, COCO_THING_CATEGORIES

LIMITS = Limits(num_classes=4)


def shipped(name: str) -> lm.MaskMap:
    spec = lm.SHIPPED[name]
    rows = lm.parse_rows(lm.shipped_bytes(name), lm.VALUES, name)
    names = spec.class_names or lm.names_in_map(rows)
    return lm.mask_map(lm.VALUES, lm.resolve_classes(rows, names, len(names), name), rows, reduce_zero_label=False,
                       unmapped=lm.REJECT, source=name, sha256="0"), names


def built(kind: str, categories) -> lm.MaskMap:
    checked = coco.checked_categories(list(categories), "test.json")
    data = coco.map_csv(kind, checked, coco.void_of(checked), "test.json")
    rows = lm.parse_rows(data, lm.VALUES, "test.json")
    names = coco.class_names(kind, checked)
    return lm.mask_map(lm.VALUES, lm.resolve_classes(rows, names, len(names), "test.json"), rows,
                       reduce_zero_label=False, unmapped=lm.REJECT, source="test.json", sha256="0"), names


# --------------------------------------------------------------------------- the shipped maps
def test_the_coco_map_is_background_the_80_published_things_in_id_order_and_crowds_ignored():
    mapped, names = shipped("coco")
    things = sorted(COCO_THING_CATEGORIES, key=lambda c: c["id"])
    assert len(things) == 80
    assert dict(mapped.entries) == {0: 0, **{c["id"]: i + 1 for i, c in enumerate(things)}, 255: lm.IGNORE}
    assert list(names) == ["background"] + [c["name"] for c in things]


def test_the_coco_panoptic_map_is_the_133_published_categories_in_id_order_and_void_ignored():
    mapped, names = shipped("coco_panoptic")
    categories = sorted(COCO_PANOPTIC_CATEGORIES, key=lambda c: c["id"])
    assert len(categories) == 133
    assert dict(mapped.entries) == {**{c["id"]: i for i, c in enumerate(categories)}, 255: lm.IGNORE}
    assert list(names) == [c["name"] for c in categories]


@pytest.mark.parametrize("kind, name, categories", [
    (coco.INSTANCES, "coco", COCO_THING_CATEGORIES), (coco.PANOPTIC, "coco_panoptic", COCO_PANOPTIC_CATEGORIES)])
def test_the_map_built_from_the_published_categories_is_the_shipped_map(kind, name, categories):
    (mine, my_names), (theirs, their_names) = built(kind, reversed(categories)), shipped(name)
    assert (mine.entries, mine.names, my_names) == (theirs.entries, theirs.names, their_names)


def test_the_sa1b_map_is_background_and_foreground():
    mapped, names = shipped("sa1b")
    assert dict(mapped.entries) == {0: 0, 1: 1} and names == ("background", "foreground")


# --------------------------------------------------------------------------- names and categories
@pytest.mark.parametrize("name, kind, set_name, split", [
    ("annotations/instances_train2017.json", coco.INSTANCES, "train2017", "train"),
    ("annotations/instances_val2017.json", coco.INSTANCES, "val2017", "val"),
    ("stuff_val2017.json", coco.STUFF, "val2017", "val"),
    ("panoptic_train2017.json", coco.PANOPTIC, "train2017", "train"),
    ("instances_minival2014.json", coco.INSTANCES, "minival2014", "minival"),
    ("instances_default.json", coco.INSTANCES, "default", "default"),
    ("_annotations.coco.json", None, "_annotations.coco", "_annotations.coco"),
])
def test_a_files_name_gives_its_kind_images_folder_and_split(name, kind, set_name, split):
    assert (coco.kind_of(name), coco.set_name(name), coco.split_of(name)) == (kind, set_name, split)


@pytest.mark.parametrize("categories, message", [
    ([], "has no categories"),
    ([{"id": 0, "name": "zero"}], "has id 0"),
    ([{"id": 65535, "name": "void"}], "has id 65535"),
    ([{"id": 3, "name": "a"}, {"id": 3, "name": "b"}], "category id 3 is listed twice"),
    ([{"id": "3", "name": "a"}], "has no integer id and name"),
    ([{"id": 3}], "has no integer id and name"),
])
def test_bad_categories_are_one_line_naming_the_file(categories, message):
    with pytest.raises(coco.CocoError, match=message) as error:
        coco.checked_categories(categories, "annotations/x.json")
    assert "annotations/x.json" in str(error.value) and "\n" not in str(error.value)


def test_category_ids_above_254_make_void_65535_and_too_many_classes_are_refused():
    assert coco.void_of([(1, "a"), (254, "b")]) == 255
    assert coco.void_of([(1, "a"), (255, "b")]) == 65535
    with pytest.raises(coco.CocoError, match="255 categories, 256 classes"):
        coco.map_csv(coco.INSTANCES, [(i, f"c{i}") for i in range(1, 256)], 65535, "big.json")
    rows = lm.parse_rows(coco.map_csv(coco.STUFF, [(92, 'a, "b"'), (300, "c")], 65535, "s.json"), lm.VALUES, "s")
    assert [(r.source, r.cls, r.name) for r in rows] == [(92, "0", 'a, "b"'), (300, "1", "c"), (65535, "ignore",
                                                                                                 "unlabeled")]


# --------------------------------------------------------------------------- one image's records
FILE = coco.AnnotationFile("annotations/instances_train2017.json", "train2017", "train")
RULES = coco.Annotations(coco.INSTANCES, (FILE,))
SQUARE = [[0.0, 0.0, 2.0, 0.0, 2.0, 2.0, 0.0, 2.0]]


def test_an_images_records_make_its_pair_with_its_split_and_drawing():
    image = (coco.IMAGE, {"file_name": "a.jpg", "height": 4, "width": 4})
    pair = coco.annotated_pair("/d", RULES, FILE, 7, [(coco.ANNOTATION, [3, 1, 0, SQUARE]), image])
    assert isinstance(pair, PairRef)
    assert (pair.key, pair.source_id, pair.image, pair.metadata) == (
        "annotations/instances_train2017.json#7", "train2017/a.jpg", "/d/train2017/a.jpg", (("split", "train"),))
    assert coco.unpacked_drawing(pair.drawing) == {"kind": "instances", "height": 4, "width": 4, "background": 0,
                                                   "void": 255, "crowd": "ignore", "annotations": [[3, 1, 0, SQUARE]]}


@pytest.mark.parametrize("records, status, reason, detail", [
    ([(coco.ANNOTATION, [3, 1, 0, SQUARE])], REJECTED, reasons.ORPHAN_ANNOTATION, "which the images of"),
    ([(coco.IMAGE, {"file_name": "a.jpg", "height": 4, "width": 4})], FILTERED, reasons.FILTERED_NO_ANNOTATIONS,
     "has no annotation of image id 7"),
    ([(coco.IMAGE, {"file_name": "a.jpg", "height": 4, "width": 4})] * 2, REJECTED, reasons.ANNOTATION_INVALID,
     "listed 2 times"),
    ([(coco.IMAGE, {"file_name": "a.jpg"}), (coco.ANNOTATION, [3, 1, 0, SQUARE])], REJECTED,
     reasons.ANNOTATION_INVALID, "has no height and width"),
])
def test_records_that_make_no_pair_are_an_outcome_with_a_reason(records, status, reason, detail):
    outcome = coco.annotated_pair("/d", RULES, FILE, 7, records)
    assert isinstance(outcome, Outcome) and (outcome.status, outcome.reason) == (status, reason)
    assert detail in outcome.detail


# --------------------------------------------------------------------------- drawing
def draw(annotations, height=6, width=6, crowd=coco.CROWD_IGNORE, kind=coco.INSTANCES, void=255) -> np.ndarray:
    spec = {"kind": kind, "height": height, "width": width, "void": void, "crowd": crowd,
            "background": 0 if kind == coco.INSTANCES else void, "annotations": annotations}
    data = drawn.drawn_mask(coco.packed_drawing(spec), b"", LIMITS)
    return data if isinstance(data, reasons.Rejection) else np.asarray(Image.open(io.BytesIO(data)))


def box(x0, y0, x1, y1):
    """A polygon covering pixels x0..x1-1, y0..y1-1 (pycocotools fills a polygon's pixel centres)."""
    return [[x0, y0, x1, y0, x1, y1, x0, y1]]


def rle(binary: np.ndarray) -> dict:
    counts = coco_mask.encode(np.asfortranarray(binary.astype(np.uint8)))
    return {"size": list(binary.shape), "counts": counts["counts"].decode()}


def test_the_smaller_annotation_is_painted_in_front_and_equal_areas_go_by_id():
    big, small = box(0, 0, 4, 4), box(1, 1, 3, 3)
    expected = np.zeros((6, 6), np.uint8)
    expected[0:4, 0:4] = 3
    expected[1:3, 1:3] = 5
    assert np.array_equal(draw([[1, 5, 0, small], [2, 3, 0, big]]), expected)
    assert np.array_equal(draw([[9, 3, 0, big], [1, 5, 0, small]]), expected)          # order in the file is moot
    left, right = box(0, 0, 3, 2), box(1, 0, 4, 2)                                       # equal areas: higher id wins
    assert draw([[4, 7, 0, left], [8, 9, 0, right]])[0].tolist() == [7, 9, 9, 9, 0, 0]
    assert draw([[8, 7, 0, left], [4, 9, 0, right]])[0].tolist() == [7, 7, 7, 9, 0, 0]


def test_crowds_are_void_or_their_category_and_stuff_leaves_the_unannotated_void():
    crowd = {"size": [6, 6], "counts": [6, 6, 24]}                       # column 1 (column-major runs)
    assert draw([[1, 4, 1, crowd]])[:, 1].tolist() == [255] * 6
    assert draw([[1, 4, 1, crowd]], crowd=coco.CROWD_CLASS)[:, 1].tolist() == [4] * 6
    stuff = draw([[1, 92, 0, box(0, 0, 2, 6)]], kind=coco.STUFF)
    assert stuff[0].tolist() == [92, 92, 255, 255, 255, 255]


def test_polygons_compressed_and_uncompressed_rle_draw_the_same_region():
    binary = np.zeros((6, 6), bool)
    binary[2:5, 1:4] = True
    by_rle = draw([[1, 8, 0, rle(binary)]])
    by_runs = draw([[1, 8, 0, {"size": [6, 6], "counts": [8, 3, 3, 3, 3, 3, 13]}]])
    by_polygon = draw([[1, 8, 0, box(1, 2, 4, 5)]])
    assert np.array_equal(by_rle, np.where(binary, 8, 0)) and np.array_equal(by_runs, by_rle)
    assert np.array_equal(by_polygon, by_rle)


def test_a_category_id_above_254_draws_a_16_bit_mask_a_value_map_reads():
    data = drawn.drawn_mask(coco.packed_drawing({"kind": coco.INSTANCES, "height": 2, "width": 3, "void": 65535,
                                            "crowd": "ignore", "background": 0,
                                            "annotations": [[1, 300, 0, box(0, 0, 2, 2)], [2, 7, 1, box(2, 0, 3, 2)]]}),
                            b"", LIMITS)
    image = Image.open(io.BytesIO(data))
    assert image.mode.startswith("I;16") and np.asarray(image).tolist() == [[300, 300, 65535]] * 2
    value_map = lm.mask_map(lm.VALUES, [(0, 0), (7, 1), (300, 2), (65535, lm.IGNORE)], [], reduce_zero_label=False,
                            unmapped=lm.REJECT, source="test", sha256="0")
    checked = masks.check_mask(data, Limits(num_classes=3), value_map)
    assert checked.class_pixels == (0, 0, 4) and checked.ignore_pixels == 2


@pytest.mark.parametrize("segmentation, detail", [
    ([[1.0, 2.0]], "a polygon is a list of at least 3"),
    ({"size": [5, 6], "counts": [36]}, "an RLE of size [5, 6]"),
    ({"size": [6, 6], "counts": [10, 5]}, "runs cover 15 of the image's 36 pixels"),
    ({"size": [6, 6], "counts": "0"}, "runs cover 0 of"),
    ({"size": [6, 6], "counts": "\x7f!"}, "malformed"),
    ("nonsense", "neither polygons nor an RLE"),
])
def test_an_annotation_that_cannot_be_drawn_rejects_the_pair_naming_it(segmentation, detail):
    rejected = draw([[42, 3, 0, segmentation]])
    assert isinstance(rejected, reasons.Rejection) and rejected.reason == reasons.ANNOTATION_INVALID
    assert rejected.detail.startswith("annotation 42: ") and detail in rejected.detail, rejected.detail
    unknown = draw([[43, 900, 0, box(0, 0, 2, 2)]])
    assert unknown.reason == reasons.ANNOTATION_INVALID and "category id 900" in unknown.detail


def test_the_compressed_runs_are_counted_as_pycocotools_decodes_them():
    rng = np.random.default_rng(3)
    for _ in range(50):
        height, width = rng.integers(1, 40, 2)
        binary = rng.random((height, width)) < rng.random()
        assert drawn.compressed_total(rle(binary)["counts"]) == height * width


def panoptic_png(ids: np.ndarray) -> bytes:
    rgb = np.stack([ids % 256, ids // 256 % 256, ids // 65536], axis=-1).astype(np.uint8)
    out = io.BytesIO()
    Image.fromarray(rgb).save(out, format="PNG")
    return out.getvalue()


def test_a_panoptic_pngs_segments_become_their_categories_and_unlabeled_void():
    ids = np.array([[0, 70000, 70000], [5, 5, 0]])
    segments = [[70000, 184, 0], [5, 1, 1]]
    spec = {"kind": coco.PANOPTIC, "void": 255, "crowd": coco.CROWD_IGNORE, "segments": segments}
    assert np.asarray(Image.open(io.BytesIO(drawn.drawn_mask(coco.packed_drawing(spec), panoptic_png(ids), LIMITS)))
                      ).tolist() == [[255, 184, 184], [255, 255, 255]]
    spec["crowd"] = coco.CROWD_CLASS
    assert np.asarray(Image.open(io.BytesIO(drawn.drawn_mask(coco.packed_drawing(spec), panoptic_png(ids), LIMITS)))
                      ).tolist() == [[255, 184, 184], [1, 1, 255]]
    unlisted = drawn.drawn_mask(coco.packed_drawing(spec), panoptic_png(ids + (ids == 5) * 2), LIMITS)
    assert unlisted.reason == reasons.ANNOTATION_INVALID and "segment ids [7]" in unlisted.detail


def test_sa1b_draws_foreground_or_the_category_given():
    binary = np.zeros((3, 4), bool)
    binary[1, 1:3] = True
    record = {"image": {"height": 3, "width": 4}, "annotations": [{"id": 1, "segmentation": rle(binary)}]}
    mask = drawn.drawn_mask(drawn.SA1B_DRAWING, json.dumps(record).encode(), LIMITS)
    assert np.asarray(Image.open(io.BytesIO(mask))).tolist() == [[0, 0, 0, 0], [0, 1, 1, 0], [0, 0, 0, 0]]
    record["annotations"][0]["category_id"] = 12
    mask = drawn.drawn_mask(drawn.SA1B_DRAWING, json.dumps(record).encode(), LIMITS)
    assert np.asarray(Image.open(io.BytesIO(mask)))[1].tolist() == [0, 12, 12, 0]
    broken = drawn.drawn_mask(drawn.SA1B_DRAWING, b"{not json", LIMITS)
    assert broken.reason == reasons.ANNOTATION_INVALID


def test_the_pre_key_changes_with_the_drawing_and_names_the_rules():
    one, two = (coco.packed_drawing({"kind": coco.INSTANCES, "annotations": [[1, c, 0, SQUARE]]}) for c in (1, 2))
    assert drawn.pre_key(one) != drawn.pre_key(two)
    assert drawn.pre_key(one) == drawn.pre_key(zlib.compress(zlib.decompress(one), 9))      # of the drawing, not zlib's
    assert drawn.pre_key(one).startswith(f"drawn{drawn.RULES}:pycocotools-")


# --------------------------------------------------------------------------- reading files
def coco_file(path, categories_last=True):
    content = {"info": {}, "images": [{"id": 1, "file_name": "a.jpg", "height": 2, "width": 2}],
               "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "segmentation": SQUARE,
                                "categories": ["a nested key of the same name"]}]}
    categories = [{"id": 1, "name": "person"}, {"id": 3, "name": "car"}]
    content = {**content, "categories": categories} if categories_last else {"categories": categories, **content}
    path.write_text(json.dumps(content))
    return categories


@pytest.mark.parametrize("last", [True, False])
def test_categories_are_read_from_the_tail_or_streamed(tmp_path, last):
    categories = coco_file(tmp_path / "instances_x.json", categories_last=last)
    found, how = io_coco.read_categories(str(tmp_path / "instances_x.json"))
    assert found == categories
    assert ("from its last" in how) == last and ("streamed" in how) != last


def test_a_nested_categories_key_is_not_taken_for_the_files():
    tail = b'{"annotations": [{"id": 1, "categories": [{"id": 9, "name": "x"}]}]}'
    assert io_coco.categories_in_tail(tail) is None
    assert io_coco.categories_in_tail(b'..., "categories": [{"id": 2, "name": "y"}]\n}\n') == [{"id": 2, "name": "y"}]


def test_a_coco_file_is_told_from_a_json_lines_listing(tmp_path):
    coco_file(tmp_path / "instances_x.json")
    (tmp_path / "listing.json").write_text('{"image": "a.jpg", "mask": "a.png"}\n{"image": "b.jpg", "mask": "b.png"}\n')
    (tmp_path / "sa_1.json").write_text('{"image": {"image_id": 1}, "annotations": []}')
    assert io_coco.sniff(str(tmp_path / "instances_x.json")) == "coco"
    assert io_coco.sniff(str(tmp_path / "listing.json")) is None
    assert io_coco.sniff(str(tmp_path / "sa_1.json")) is None


def test_a_truncated_file_is_one_line_naming_it(tmp_path):
    coco_file(tmp_path / "instances_x.json")
    path = tmp_path / "instances_x.json"
    path.write_bytes(path.read_bytes()[:-40])
    with pytest.raises(coco.CocoError, match="is not a complete JSON file"):
        io_coco.read_categories(str(path))
    with pytest.raises(IOError, match="cannot read the annotation file"):
        list(io_coco.records(str(path), io_coco.ANNOTATIONS, coco.INSTANCES))


def test_a_spilled_pairs_annotations_stay_behind_and_a_lost_spill_is_named():
    from beam_pipeline.stages import pairs
    from beam_pipeline.stages.specs import CheckSpec
    drawing = coco.packed_drawing({"kind": coco.INSTANCES, "height": 2, "width": 2, "void": 255, "crowd": "ignore",
                                   "background": 0, "annotations": [[1, 3, 0, SQUARE]]})
    ref = PairRef(key="k", source_id="a.jpg", image="/d/a.jpg", mask="/d/x.json#1", drawing=drawing)
    spilled = pairs.spilled_ref(ref)
    assert spilled.drawing == drawn.SPILLED and len(spilled.drawing) < len(drawing)
    assert pairs.spilled_ref(PairRef(key="k", source_id="a", image="a", mask="m.png")).drawing == b""
    lost = pairs.read_mask(spilled, CheckSpec("segmentation", LIMITS))
    assert lost.reason == reasons.CHANGED_SINCE_VALIDATION and "run again to draw it" in lost.detail
    assert np.asarray(Image.open(io.BytesIO(pairs.read_mask(ref, CheckSpec("segmentation", LIMITS))))).tolist() == [
        [3, 3], [3, 3]]


@pytest.mark.parametrize("found, layout", [
    ({"annotations/instances_*.json"}, "coco"),
    ({"annotations/instances_*.json", "annotations/panoptic_*.json"}, "coco_panoptic"),
    ({"sa_*.json|*/sa_*.json"}, "sa1b"),
    ({"annotations/stuff_*.json"}, None),                  # stuff alone: --layout coco says so
])
def test_auto_recognises_the_coco_layouts_by_their_files(found, layout):
    from beam_pipeline.core import layouts
    detected = layouts.detect(lambda marker: marker in found)
    assert (detected.name if detected else None) == layout
