"""core/masks/maps.py, core/masks/values.py, core/masks/mapped.py on hand-made masks; the shipped maps against
their published definitions (tests/published.py)."""

import io

import numpy as np
import pytest
import tifffile
from PIL import Image

from beam_pipeline.core.masks import maps as lm
from beam_pipeline.core import masks, reasons
from beam_pipeline.core.masks import report as mask_report
from beam_pipeline.core.pixels import Limits
from beam_pipeline.core.points import sample_points
from published import (ADE20K_CLASSES, CAMVID_LABEL_COLORS, CAMVID_SEGNET_GROUPS, CITYSCAPES_LABELS, PET_TRIMAP,
                       VOC_CLASSES, VOC_VOID)


def build(text: str, kind=lm.VALUES, names=(), num_classes=4, **options) -> lm.MaskMap:
    rows = lm.parse_rows(text.encode(), kind, "test.csv")
    resolved = lm.resolve_classes(rows, names, num_classes, "test.csv")
    return lm.mask_map(kind, resolved, rows, reduce_zero_label=options.get("reduce", False),
                       unmapped=options.get("unmapped", lm.REJECT), source="--label_map test.csv", sha256="0")


def shipped(name: str) -> lm.MaskMap:
    spec = lm.SHIPPED[name]
    kind = lm.COLORS if spec.option == "--color_map" else lm.VALUES
    rows = lm.parse_rows(lm.shipped_bytes(name), kind, name)
    names = spec.class_names or lm.names_in_map(rows)
    resolved = lm.resolve_classes(rows, names, len(names), name)
    return lm.mask_map(kind, resolved, rows, reduce_zero_label=False, unmapped=lm.REJECT, source=name, sha256="0")


def png(array: np.ndarray, mode=None) -> bytes:
    out = io.BytesIO()
    Image.fromarray(array, mode).save(out, format="PNG")
    return out.getvalue()


def through_map(num_classes: int, mask_map: lm.MaskMap, **limits):
    """(Limits, MaskMap): what core/masks takes to read a mask through a map."""
    return Limits(num_classes=num_classes, **limits), mask_map


def stored(data: bytes, limits_and_map) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(masks.stored_mask(data, *limits_and_map))))


# --------------------------------------------------------------------------- parsing
@pytest.mark.parametrize("text, message", [
    ("value,label\n0,1\n", "the header must be value,class"),
    ("value,class\n0,9\n", "class 9 is outside 0..3"),
    ("value,class\n0,roda\n", "class 'roda' is neither"),
    ("value,class\n0,1\n0,2\n", "value 0 is listed twice"),
    ("value,class\n70000,1\n", "value 70000 is outside 0..65535"),
    ("value,class\n-1,1\n", "value -1 is outside"),
    ("value,class\n", "lists no values"),
])
def test_a_bad_map_is_one_line_naming_the_line(text, message):
    with pytest.raises(lm.MapError, match=message) as error:
        build(text)
    assert "\n" not in str(error.value)


def test_json_maps_names_comments_and_ignore():
    mapped = build('{"0": "ignore", "7": "road", "8": 1}', names=("road", "walk"), num_classes=2)
    assert mapped.entries == ((0, lm.IGNORE), (7, 0), (8, 1))
    commented = build("# a comment\nvalue,class,name\n3,ignore,void\n5,2,car\n")
    assert commented.entries == ((3, lm.IGNORE), (5, 2)) and dict(commented.names) == {3: "void", 5: "car"}
    assert lm.names_in_map(lm.parse_rows(b"value,class\n1,cat\n2,dog\n3,cat\n4,ignore\n5,0\n", lm.VALUES, "m")) == (
        "cat", "dog")


# --------------------------------------------------------------------------- values
def test_a_value_map_converts_8_and_16_bit_masks_and_names_unmapped_values():
    mapped = build("value,class\n7,0\n8,1\n0,ignore\n1000,3\n")
    limits = through_map(4, mapped)
    values = np.array([[7, 7, 8, 0], [0, 8, 8, 7]], np.uint8)
    check = masks.check_mask(png(values), *limits)
    assert (check.class_pixels, check.ignore_pixels) == ((3, 3, 0, 0), 2)
    assert check.source_pixels == ((0, 2), (7, 3), (8, 3))
    assert stored(png(values), limits).tolist() == [[0, 0, 1, 255], [255, 1, 1, 0]]
    sixteen = values.astype(np.uint16)
    sixteen[0, 0] = 1000
    assert stored(png(sixteen), limits).tolist() == [[3, 0, 1, 255], [255, 1, 1, 0]]
    sixteen[1, 3] = 1256                          # 1256 % 256 == 232, 1256 & 255 is not 1000's class: no wrap
    rejected = masks.check_mask(png(sixteen), *limits)
    assert rejected.reason == reasons.MASK_VALUE_UNMAPPED and "1256 (1 px)" in rejected.detail


def test_unmapped_values_can_be_ignored():
    mapped = build("value,class\n7,0\n", unmapped=lm.IGNORE_UNMAPPED)
    limits = through_map(4, mapped)
    check = masks.check_mask(png(np.array([[7, 9], [9, 40]], np.uint8)), *limits)
    assert (check.class_pixels, check.ignore_pixels) == ((1, 0, 0, 0), 3)
    assert stored(png(np.array([[7, 9], [9, 40]], np.uint8)), limits).tolist() == [[0, 255], [255, 255]]


def test_reduce_zero_label_first_then_the_map():
    reduce_only = through_map(3, lm.MaskMap(lm.IDENTITY, reduce_zero_label=True, source="r"))
    values = np.array([[0, 1, 2, 3], [255, 3, 1, 0]], np.uint8)
    assert stored(png(values), reduce_only).tolist() == [[255, 0, 1, 2], [255, 2, 0, 255]]
    too_big = masks.check_mask(png(np.array([[4]], np.uint8)), *reduce_only)
    assert too_big.reason == reasons.MASK_VALUE_OUT_OF_RANGE and "4 (1 px)" in too_big.detail
    then_map = through_map(2, build("value,class\n0,1\n1,1\n2,0\n", num_classes=2, reduce=True))
    assert stored(png(values), then_map).tolist() == [[255, 1, 1, 0], [255, 0, 1, 255]]


def test_tiff_masks_16_bit_negative_and_float_values():
    limits = through_map(4, build("value,class\n300,2\n65535,ignore\n"), mask_formats=("png", "tiff"))
    out = io.BytesIO()
    tifffile.imwrite(out, np.array([[300, 65535], [300, 300]], np.uint16), compression="zlib")
    assert stored(out.getvalue(), limits).tolist() == [[2, 255], [2, 2]]
    png_only = through_map(4, limits[1])
    assert masks.check_mask(out.getvalue(), *png_only).reason == reasons.FORMAT_NOT_ALLOWED
    for array, reason in ((np.array([[-3, 300]], np.int32), reasons.MASK_VALUE_OUT_OF_RANGE),
                          (np.array([[70000, 300]], np.int32), reasons.MASK_VALUE_OUT_OF_RANGE),
                          (np.array([[2.0, 300.0]], np.float32), reasons.UNSUPPORTED_MODE)):
        out = io.BytesIO()
        tifffile.imwrite(out, array)
        assert masks.check_mask(out.getvalue(), *limits).reason == reason, array.dtype


def test_an_rgb_mask_through_a_value_map_is_not_single_channel():
    limits = through_map(4, build("value,class\n0,0\n"))
    result = masks.check_mask(png(np.zeros((2, 2, 3), np.uint8)), *limits)
    assert result.reason == reasons.MASK_NOT_SINGLE_CHANNEL and "--color_map" in result.detail


# --------------------------------------------------------------------------- colours
COLOURS = "r,g,b,class\n128,64,128,0\n0,0,142,1\n0,0,0,ignore\n"


def test_colours_match_exactly_and_an_unknown_colour_is_named_with_its_pixels():
    limits = through_map(2, build(COLOURS, kind=lm.COLORS, num_classes=2))
    rgb = np.zeros((2, 3, 3), np.uint8)
    rgb[0] = (128, 64, 128)
    rgb[1, 0] = (0, 0, 142)
    assert stored(png(rgb), limits).tolist() == [[0, 0, 0], [1, 255, 255]]
    rgb[1, 2] = (128, 64, 129)                    # one level off: never rounded to (128,64,128)
    rejected = masks.check_mask(png(rgb), *limits)
    assert rejected.reason == reasons.MASK_COLOR_UNKNOWN and "(128,64,129) (1 px)" in rejected.detail


def test_rgba_alpha_0_is_ignore_and_partial_alpha_is_rejected():
    limits = through_map(2, build(COLOURS, kind=lm.COLORS, num_classes=2))
    rgba = np.zeros((1, 3, 4), np.uint8)
    rgba[0] = [(128, 64, 128, 255), (0, 0, 142, 255), (9, 9, 9, 0)]
    check = masks.check_mask(png(rgba, "RGBA"), *limits)
    assert (check.class_pixels, check.ignore_pixels) == ((1, 1), 1)
    assert stored(png(rgba, "RGBA"), limits).tolist() == [[0, 1, 255]]
    rgba[0, 2, 3] = 128
    assert masks.check_mask(png(rgba, "RGBA"), *limits).reason == reasons.MASK_ALPHA_PARTIAL


def test_a_palette_mask_is_read_through_its_palette_and_16_bit_colour_is_refused():
    limits = through_map(2, build(COLOURS, kind=lm.COLORS, num_classes=2))
    image = Image.frombytes("P", (3, 1), bytes([2, 0, 1]))
    image.putpalette([0, 0, 142, 0, 0, 0, 128, 64, 128])            # index order means nothing
    out = io.BytesIO()
    image.save(out, format="PNG")
    assert stored(out.getvalue(), limits).tolist() == [[0, 1, 255]]
    deep = io.BytesIO()
    Image.fromarray(np.zeros((2, 2), np.uint16)).save(deep, format="PNG")
    assert masks.check_mask(deep.getvalue(), *limits).reason == reasons.UNSUPPORTED_MODE


# --------------------------------------------------------------------------- points
@pytest.mark.parametrize("kind", ["values", "colors"])
def test_mapped_masks_give_the_points_of_their_converted_mask(kind):
    rng = np.random.default_rng(0)
    classes = rng.integers(0, 2, size=(64, 80)).astype(np.uint8)
    classes[5, 7] = 2                                              # a class too rare to be probed
    if kind == "values":
        limits = through_map(3, build("value,class\n10,0\n20,1\n30,2\n31,2\n", num_classes=3))
        data = png(np.array([10, 20, 30], np.uint8)[classes])
    else:
        limits = through_map(3, build(COLOURS + "1,2,3,2\n", kind=lm.COLORS, num_classes=3))
        data = png(np.array([(128, 64, 128), (0, 0, 142), (1, 2, 3)], np.uint8)[classes])
    check = masks.check_mask(data, *limits)
    converted = stored(data, limits)
    got = sample_points(check.values, "key", 3, 8, check.class_pixels)
    want = sample_points(converted, "key", 3, 8, check.class_pixels)
    assert {c: p.tolist() for c, p in got.items()} == {c: p.tolist() for c, p in want.items()}
    assert got[2].tolist() == [[5, 7]]


# --------------------------------------------------------------------------- shipped maps
def test_cityscapes_map_is_the_published_label_table_every_label_id_covered():
    mapped = dict(shipped("cityscapes").entries)
    published = {label.id: label.trainId for label in CITYSCAPES_LABELS if label.id >= 0}
    assert sorted(mapped) == sorted(published) == list(range(34))
    for label_id, train_id in published.items():
        assert mapped[label_id] == (lm.IGNORE if train_id == 255 else train_id), label_id
    names = [next(label.name for label in CITYSCAPES_LABELS if label.trainId == t) for t in range(19)]
    assert list(lm.SHIPPED["cityscapes"].class_names) == names


def test_camvid_map_is_the_published_colours_in_segnet_groups_every_colour_covered():
    mapped = dict(shipped("camvid").entries)
    assert sorted(mapped) == sorted(lm.pack_color(*rgb) for rgb in CAMVID_LABEL_COLORS.values())
    group_of = {member: c for c, (_, members) in enumerate(CAMVID_SEGNET_GROUPS) for member in members}
    for name, rgb in CAMVID_LABEL_COLORS.items():
        assert mapped[lm.pack_color(*rgb)] == group_of.get(name, lm.IGNORE), name
    assert list(lm.SHIPPED["camvid"].class_names) == [name for name, _ in CAMVID_SEGNET_GROUPS]


def test_voc_map_keeps_the_21_classes_and_ignores_void():
    assert dict(shipped("voc").entries) == {**{c: c for c in range(21)}, VOC_VOID: lm.IGNORE}
    assert lm.SHIPPED["voc"].class_names == VOC_CLASSES


def test_pet_map_makes_the_trimaps_border_ignore():
    classes = lm.SHIPPED["pet"].class_names
    entries = dict(shipped("pet").entries)
    assert sorted(entries) == sorted(PET_TRIMAP)
    for code, meaning in PET_TRIMAP.items():
        expected = (lm.IGNORE if meaning.startswith("not classified") else
                    classes.index("background") if meaning == "background" else classes.index("pet"))
        assert entries[code] == expected, meaning


def test_ade20k_map_is_the_150_classes_of_objectinfo150_other_ignored():
    mapped = shipped("ade20k")
    assert dict(mapped.entries) == {0: lm.IGNORE, **{v: v - 1 for v in range(1, 151)}}
    rows = lm.parse_rows(lm.shipped_bytes("ade20k"), lm.VALUES, "ade20k")
    assert lm.names_in_map(rows) == tuple(name.split(",")[0].strip() for name in ADE20K_CLASSES)
    assert [dict(mapped.names)[v] for v in range(1, 151)] == [name.strip() for name in ADE20K_CLASSES]


# --------------------------------------------------------------------------- warnings
def split(pixels, ignore=0, images=4):
    return {"num_images": images, "class_pixels": pixels, "class_images": [int(p > 0) for p in pixels],
            "ignore_pixels": ignore}


def test_warnings_name_the_absent_class_and_an_ignore_label_that_covers_most_pixels():
    lines = mask_report.class_warnings(task="segmentation", num_classes=2, class_names=("bg", "fg"), ignore_label=255,
                                       splits={"train": split([60, 0], ignore=140)})
    assert [w["class"] for w in lines] == [1, None]
    assert lines[0]["message"].startswith("class 1 (fg) has no pixels in the train split: likely masks stored as 0/255")
    assert "covers 70.0% of all mask pixels" in lines[1]["message"] and "binary255" in lines[1]["message"]
    mapped = build("value,class\n7,0\n9,1\n", num_classes=2)
    lines = mask_report.class_warnings(task="segmentation", num_classes=2, class_names=("a", "b"), ignore_label=255,
                                       splits={"train": split([50, 0], ignore=10)}, mask=mapped)
    assert [w["message"] for w in lines] == [
        "class 1 (b) has no pixels in the train split: --label_map test.csv maps value 9 to it, and no train mask "
        "holds them"]
    assert mask_report.class_warnings(task="segmentation", num_classes=2, class_names=("a", "b"), ignore_label=255,
                                      splits={"train": split([50, 40], ignore=10)}) == []


def test_a_damaged_png_is_rejected_through_a_map_as_without_one():
    limits = through_map(4, build("value,class\n7,0\n8,1\n"))
    no_iend = png(np.array([[7, 8], [8, 7]], np.uint8))[:-12]      # Pillow decodes it; libpng refuses it
    result = masks.check_mask(no_iend, *limits)
    assert result.reason == reasons.UNDECODABLE and "IEND" in result.detail
    assert result == masks.check_mask(no_iend, Limits(num_classes=10))


def test_a_palette_mask_with_transparency_and_a_16_bit_mask_with_unlisted_values_ignored():
    limits = through_map(2, build(COLOURS, kind=lm.COLORS, num_classes=2))
    image = Image.frombytes("P", (4, 1), bytes([0, 1, 2, 3]))
    image.putpalette([128, 64, 128, 0, 0, 142, 0, 0, 142, 5, 5, 5])   # two indices hold one colour
    image.info["transparency"] = 3                                    # index 3 is transparent
    out = io.BytesIO()
    image.save(out, format="PNG", transparency=3)
    check = masks.check_mask(out.getvalue(), *limits)
    assert (check.class_pixels, check.ignore_pixels) == ((1, 2), 1)
    assert dict(check.source_pixels)[0x00008E] == 2
    assert stored(out.getvalue(), limits).tolist() == [[0, 1, 1, 255]]
    wide = through_map(4, build("value,class\n7,0\n300,1\n", unmapped=lm.IGNORE_UNMAPPED))
    values = np.array([[300, 7], [9, 40000]], np.uint16)
    check = masks.check_mask(png(values), *wide)
    assert (check.class_pixels, check.ignore_pixels) == ((1, 1, 0, 0), 2)
    assert check.source_pixels == ((7, 1), (9, 1), (300, 1), (40000, 1))
    assert stored(png(values), wide).tolist() == [[1, 0], [255, 255]]
