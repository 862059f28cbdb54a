"""Folder inputs matched one subfolder at a time (io/folders.py, issue 20), on a real local tree.

A glob whose first wildcard is a folder is fanned out over the subfolders it matches; the fanned-out
globs together match exactly the files the whole glob matches, through Beam's own FileSystems.match.
"""

import pytest

from beam_pipeline.core import paths
from beam_pipeline.core.pairing import class_folder_classes
from beam_pipeline.io import folders
from beam_pipeline.stages import pairs
from beam_pipeline.stages.specs import CLASS_FOLDERS, PAIRED, DiscoverSpec


@pytest.fixture
def tree(tmp_path):
    for camera in ("camA", "camB", "camC", ".hidden"):
        for day in ("d1", "d2"):
            for i in range(3):
                path = tmp_path / "images" / camera / day / f"{i}.png"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(b"x")
    (tmp_path / "images" / "top.png").write_bytes(b"x")          # not in a camera folder
    (tmp_path / "images" / "empty").mkdir()
    return tmp_path


def matched(root, pattern):
    return sorted(folders.relative_matches(str(root), pattern))


def test_subfolders_are_the_folders_directly_below(tree):
    assert folders.subfolders(str(tree / "images")) == [".hidden", "camA", "camB", "camC", "empty"]
    assert folders.subfolders(str(tree / "missing")) == []


@pytest.mark.parametrize("pattern", ["images/*/*/*.png", "images/cam*/d1/*.png", "images/*/d?/1.png",
                                     "images/*/*"])
def test_the_fanned_out_globs_match_what_the_whole_glob_matches(tree, pattern):
    spec = DiscoverSpec(str(tree), input_format=PAIRED, image_globs=(pattern,), mask_template="m/{stem}.png")
    fanned = pairs.fan_out(spec, pairs.Source(pairs.IMAGES, pattern))
    assert len(fanned) > 1
    assert sorted(f for source in fanned for f in matched(tree, source.pattern)) == matched(tree, pattern)


def test_a_glob_of_one_flat_folder_is_not_fanned_out(tree):
    spec = DiscoverSpec(str(tree), input_format=PAIRED, mask_template="m/{stem}.png")
    source = pairs.Source(pairs.IMAGES, "images/*.png")
    assert pairs.fan_out(spec, source) == [source]
    assert paths.fan_out_point("images/**") is None


def test_class_folders_are_the_subfolders_with_a_file(tmp_path):
    for name, files in (("pizza", 2), ("sushi", 1), ("empty", 0)):
        (tmp_path / name).mkdir()
        for i in range(files):
            (tmp_path / name / f"{i}.jpg").write_bytes(b"x")
    (tmp_path / "ramen" / "deeper").mkdir(parents=True)
    (tmp_path / "ramen" / "deeper" / "0.jpg").write_bytes(b"x")   # not <class>/<file>: not a class
    assert folders.class_folder_names(str(tmp_path)) == ["pizza", "sushi"]
    spec = DiscoverSpec(str(tmp_path), input_format=CLASS_FOLDERS, task="classification")
    fanned = pairs.fan_out(spec, pairs.Source(CLASS_FOLDERS, pairs.CLASS_FOLDER_GLOB))
    assert [source.pattern for source in fanned] == ["empty/*", "pizza/*", "ramen/*", "sushi/*"]


FOLDERS = ["sushi", "pizza", "ramen", "apple_pie"]          # as listed, not sorted


@pytest.mark.parametrize("num_classes, class_names, classes", [
    (None, (), ("apple_pie", "pizza", "ramen", "sushi")),     # counted: the sorted folder names
    (4, (), ("apple_pie", "pizza", "ramen", "sushi")),
    (None, ("ramen", "sushi", "pizza", "apple_pie"), ("ramen", "sushi", "pizza", "apple_pie")),   # ids in their order
    (4, ("ramen", "sushi", "pizza", "apple_pie"), ("ramen", "sushi", "pizza", "apple_pie")),
])
def test_class_folders_count_themselves(num_classes, class_names, classes):
    assert class_folder_classes(FOLDERS, "food/images", num_classes, class_names) == classes


@pytest.mark.parametrize("found, num_classes, class_names, message", [
    (FOLDERS, 5, (), "--num_classes is 5 but food/images has 4 class folders (apple_pie, pizza, ramen, sushi); "
                     "leave --num_classes out to use the number of class folders"),
    (FOLDERS, 3, (), "--num_classes is 3 but food/images has 4 class folders (apple_pie, pizza, ramen, sushi); "
                     "leave --num_classes out to use the number of class folders"),
    (FOLDERS, None, ("pizza", "sushi"),
     "--class_names lists 2 names but food/images has 4 class folders (apple_pie, pizza, ramen, sushi)"),
    (FOLDERS, None, ("pizza", "sushi", "ramen", "apple"),
     "--class_names names 'apple', which food/images has no class folder for (its class folders: apple_pie, "
     "pizza, ramen, sushi)"),
    (FOLDERS, None, ("pizza", "sushi", "ramen", "pizza"), "--class_names lists 'pizza' more than once"),
    ([], None, (), "no class folders in food/images: give one folder per class, each holding its images "
                   "(e.g. food/images/pizza/1.jpg)"),
    ([f"c{i:03d}" for i in range(101)], 100, (),
     "--num_classes is 100 but food/images has 101 class folders (c000, c001, c002, c003, c004, c005, c006, c007, "
     "c008, c009, c010, c011, ... (89 more)); leave --num_classes out to use the number of class folders"),
])
def test_class_folders_that_do_not_match_the_options_are_refused_in_one_line(found, num_classes, class_names,
                                                                             message):
    with pytest.raises(ValueError) as refused:
        class_folder_classes(found, "food/images", num_classes, class_names)
    assert str(refused.value) == message
