"""Unit tests of the pure path, hashing, filter and selection helpers."""

import hashlib

import pytest

from beam_pipeline.core import paths
from beam_pipeline.core.filter_expr import FilterEvalError, FilterSyntaxError, parse_filter
from beam_pipeline.core.hashing import stable_hash, unit_interval
from beam_pipeline.core.selection import SplitSpec, assign_split, keep_in_sample, parse_split


def test_stable_hash_is_salted_sha256_prefix():
    expected = int.from_bytes(hashlib.sha256(b"salt\x00images/a.jpg").digest()[:8], "big")
    assert stable_hash("salt", "images/a.jpg") == expected
    assert stable_hash("other", "images/a.jpg") != expected
    assert 0.0 <= unit_interval("salt", "images/a.jpg") < 1.0


@pytest.mark.parametrize("root,entry,full,inside", [
    ("/data/set", "images/a.jpg", "/data/set/images/a.jpg", True),
    ("/data/set", "./images/../images/a.jpg", "/data/set/images/a.jpg", True),
    ("/data/set", "../other/a.jpg", "/data/other/a.jpg", False),
    ("/data/set", "/elsewhere/a.jpg", "/elsewhere/a.jpg", False),
    ("/data/set", "/data/set/images/a.jpg", "/data/set/images/a.jpg", True),
    ("/data/set", "/data/settings/a.jpg", "/data/settings/a.jpg", False),
    ("gs://bucket/set", "images/a.jpg", "gs://bucket/set/images/a.jpg", True),
    ("gs://bucket/set", "../../x.jpg", "gs://x.jpg", False),
    ("gs://bucket/set", "s3://bucket/set/a.jpg", "s3://bucket/set/a.jpg", False),
])
def test_resolve_under_root(root, entry, full, inside):
    assert paths.resolve_under_root(root, entry) == (full, inside)


@pytest.mark.parametrize("template,image,mask", [
    ("masks/{stem}.png", "images/0001.jpg", "masks/0001.png"),
    ("{parent}annot/{stem}.png", "train/0001TP_006690.png", "trainannot/0001TP_006690.png"),
    ("labels/{relstem}_mask.png", "a/b/c.jpg", "labels/a/b/c_mask.png"),
    ("{reldir}/{name}.mask", "x/y.jpg", "x/y.jpg.mask"),
])
def test_render_template(template, image, mask):
    assert paths.render_template(template, image) == mask


def test_template_glob_and_unknown_field():
    assert paths.template_glob("{parent}annot/{stem}.png") == "*annot/*.png"
    with pytest.raises(ValueError, match="unknown field"):
        paths.check_template("masks/{basename}.png")
    with pytest.raises(ValueError, match="uses no field"):
        paths.check_template("masks/fixed.png")


@pytest.mark.parametrize("text,row,expected", [
    ("source == 'camA' and capture_year >= 2020", {"source": "camA", "capture_year": "2021"}, True),
    ("source == 'camA' and capture_year >= 2020", {"source": "camA", "capture_year": "2019"}, False),
    ("source == 'camA' and capture_year >= 2020", {"source": "camB", "capture_year": 2022}, False),
    ("split in ('train', 'val')", {"split": "val"}, True),
    ("split not in ['train']", {"split": "train"}, False),
    ("not (a == 1 or b < -2.5)", {"a": "2", "b": "0"}, True),
    ("1 < a <= 3", {"a": "3"}, True),
    ("flag", {"flag": True}, True),
])
def test_filter_expression(text, row, expected):
    assert parse_filter(text)(row) is expected


@pytest.mark.parametrize("text", [
    "__import__('os').system('true')", "a.b == 1", "a[0] == 1", "a + 1 > 2", "lambda: 1", "a ==",
    "a == b()",
])
def test_filter_refuses_anything_but_comparisons(text):
    with pytest.raises(FilterSyntaxError):
        parse_filter(text)


def test_filter_columns_and_eval_errors():
    expression = parse_filter("source == 'camA' and (year > 2000 or 'x' in tags)")
    assert expression.columns == ("source", "year", "tags")
    with pytest.raises(FilterEvalError, match="no column"):
        expression({"year": 1})
    with pytest.raises(FilterEvalError, match="not a number"):
        parse_filter("year > 2000")({"year": "unknown"})


def test_parse_split_forms_and_errors():
    assert parse_split("column") == SplitSpec("column")
    assert parse_split("column:fold") == SplitSpec("column", column_name="fold")
    assert parse_split("folder") == SplitSpec("folder")
    assert parse_split("train=0.8,val=0.2").fractions == (("train", 0.8), ("val", 0.2))
    for bad in ("train=0.8,val=0.1", "train=x", "train", "a=0.5,a=0.5", "a=-0.5,b=1.5"):
        with pytest.raises(ValueError):
            parse_split(bad)


def test_hash_split_follows_fractions_and_is_stable():
    spec = parse_split("train=0.8,val=0.1,test=0.1")
    keys = [f"images/{i:05d}.jpg" for i in range(20000)]
    splits = [assign_split(spec, key, {}, "") for key in keys]
    assert abs(splits.count("train") / len(keys) - 0.8) < 0.015
    assert abs(splits.count("val") / len(keys) - 0.1) < 0.01
    assert splits == [assign_split(spec, key, {}, "") for key in keys]


def test_column_and_folder_splits():
    assert assign_split(SplitSpec("column"), "k", {"split": " val "}, "") == "val"
    assert assign_split(SplitSpec("column"), "k", {"split": ""}, "") is None
    assert assign_split(SplitSpec("column"), "k", {}, "") is None
    assert assign_split(SplitSpec("folder"), "k", {}, "train") == "train"


def test_sampling_is_deterministic_and_close_to_fraction():
    keys = [f"k{i}" for i in range(20000)]
    kept = [key for key in keys if keep_in_sample(key, 0.02)]
    assert 300 <= len(kept) <= 500
    assert kept == [key for key in keys if keep_in_sample(key, 0.02)]
    assert all(keep_in_sample(key, 1.0) for key in keys[:100])


@pytest.mark.parametrize("pattern, point", [
    ("images/*/*.png", ("images", "*", "*.png")),
    ("*/*", ("", "*", "*")),
    ("data/cam?/2024/*.jpg", ("data", "cam?", "2024/*.jpg")),
    ("images/*.png", None),                      # the wildcard is in the file name: one flat folder
    ("images/**/*.png", None),                   # any depth: matched whole
    ("a/b/c.png", None),
])
def test_where_a_glob_fans_out(pattern, point):
    assert paths.fan_out_point(pattern) == point


def test_a_fanned_out_glob_names_each_matching_subfolder():
    assert paths.fanned_out("images/cam*/*.png", ["camB", "camA", "other", ".camC"]) == \
        ["images/camA/*.png", "images/camB/*.png"]
    assert paths.fanned_out("*/*", ["b", "a"]) == ["a/*", "b/*"]


@pytest.mark.parametrize("root", ["/data/set", "/data/set/", "gs://bucket/set", "s3://b/deep/set", "rel/set", "/"])
def test_resolving_a_listing_path_fast_gives_what_joining_it_gives(root):
    """resolve_under_root's plain-path shortcut agrees with join + relative_to on every kind of entry."""
    import random
    rng = random.Random(0)
    parts = ["a", "b.png", "..", ".", "", "c d", "x..y", ".hidden", "images", "gs:", "s3://other/x"]
    entries = ["images/a.png", "a/b/c.png", "../x.png", "./a.png", "a//b.png", "a/", "/abs/x.png", "a/./b",
               "gs://bucket/set/a.png", "..", ".", "x..y/z"]
    entries += ["/".join(rng.choice(parts) for _ in range(rng.randint(1, 4))) for _ in range(400)]
    for entry in entries:
        full = paths.join(root, entry)
        assert paths.resolve_under_root(root, entry) == (full, paths.relative_to(root, full) is not None), entry
