"""Mistakes named, never published (issue 42), on real photographs stored as Oxford-IIIT Pet and VOC store them
(tests/layout_corpora.py), read through a listing of the user's, as issue 42's new user did:

* a listing with Pet's own split names (trainval, test) has no train split: the run is refused in one line that
  names the splits and the --split_names that fixes it, and --plan says the run would be refused;
* Pet's trimaps with --reduce_zero_label make the border (value 3) a class: a ``warning:`` line names it;
* VOC masks through a map that does not list their void value (255): the reject gate's line names the value with
  its pixels and masks, and the map row that fixes it; --plan says the same.
"""

import csv

import pytest

from conftest import run_cli
from layout_corpora import write_layout

PAIRS = 9


def _listing(folder, truth, name: str, split_of=lambda split: split):
    rows = [{"image": image, "mask": mask, "split": split_of(split)} for image, (mask, split) in sorted(truth.items())]
    path = folder / name
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["image", "mask", "split"])
        writer.writeheader()
        writer.writerows(rows)
    return path


@pytest.fixture(scope="module")
def pet(tmp_path_factory):
    """A listing of Pet's images and trimaps with Pet's own split names."""
    root = tmp_path_factory.mktemp("pet_listing")
    truth = write_layout("pet", root, PAIRS)
    masks = {image: f"annotations/trimaps/{image.split('/')[-1][:-4]}.png" for image in truth}
    rows = {image: (masks[image], split) for image, (_, split) in truth.items()}
    return root, _listing(root, rows, "pet.csv")


def test_a_listing_without_a_train_split_is_refused_naming_its_splits_and_the_fix(pet, tmp_path):
    root, listing = pet
    completed = run_cli("--input", listing, "--output", tmp_path / "out", "--label_map", "pet", check=False)
    assert completed.returncode == 2 and "Traceback" not in completed.stderr
    (line,) = [line for line in completed.stderr.splitlines() if line.startswith("error:")]
    assert "no train split (splits: test 3, trainval 6)" in line and "--split_names (e.g. trainval=train)" in line
    assert not (tmp_path / "out" / "manifest.json").exists()
    plan = run_cli("--input", listing, "--output", tmp_path / "out", "--label_map", "pet", "--plan")
    assert "warning: the real run would be refused: the version would have no train split" in plan.stdout
    named = run_cli("--input", listing, "--output", tmp_path / "named", "--label_map", "pet",
                    "--split_names", "trainval=train")
    assert "splits (records in shards): test 3 in 1" in named.stdout and "train 6 in 1" in named.stdout


def test_trimaps_border_made_a_class_by_reduce_zero_label_is_named_in_a_warning(pet, tmp_path):
    root, listing = pet
    completed = run_cli("--input", listing, "--output", tmp_path / "out", "--reduce_zero_label", "--num_classes", "3",
                        "--split_names", "trainval=train")
    (line,) = [line for line in completed.stdout.splitlines() if "lies only on object edges" in line]
    assert line.startswith("warning: class 2 (2) lies only on object edges: ")
    assert "it is value 3 (--reduce_zero_label)" in line and "a --label_map row 3,ignore" in line
    mapped = run_cli("--input", listing, "--output", tmp_path / "mapped", "--label_map", "pet",
                     "--split_names", "trainval=train")
    assert "lies only on object edges" not in mapped.stdout            # the shipped map makes the border ignore


def test_an_unmapped_value_is_named_with_its_pixels_and_the_row_that_fixes_it(tmp_path):
    truth = write_layout("voc", tmp_path / "voc", PAIRS)
    rows = {image: (f"SegmentationClass/{image.split('/')[-1][:-4]}.png", split) for image, (_, split) in truth.items()}
    listing = _listing(tmp_path / "voc", rows, "voc.csv")
    (tmp_path / "map.csv").write_text("value,class\n" + "".join(f"{c},{c}\n" for c in range(21)))
    args = ["--input", listing, "--output", tmp_path / "out", "--label_map", tmp_path / "map.csv", "--num_classes", "21"]
    completed = run_cli(*args, check=False)
    assert completed.returncode == 2
    (line,) = [line for line in completed.stderr.splitlines() if line.startswith("error:")]
    assert "top reasons: mask_value_unmapped 9 (value 255: " in line and " in 9 mask(s); fix: add a row for it to " \
                                                                          "the --label_map (255,ignore" in line
    plan = run_cli(*args, "--plan")
    assert "the real run would be refused: 9 of 9 selected inputs" in plan.stdout
    assert "mask_value_unmapped 9 (value 255: " in plan.stdout
