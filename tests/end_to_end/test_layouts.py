"""Public datasets read as they ship (issue 42): ``--layout`` alone, on folders of real photographs laid out as VOC,
a labelme2voc export, Oxford-IIIT Pet, Cityscapes and ADE20K publish them (tests/layout_corpora.py).

Each run's shards are read back with tf.data: every stored mask equals the pair's true class-id mask pixel for
pixel (the dataset's encoding undone by its shipped map: VOC's void, Pet's border and ADE20K's "other" ignored,
Cityscapes' label ids to train ids), every pair is in the split the dataset's own files or folders give it, and
the class names are the dataset's (tests/published.py). ``--layout auto`` names the layout it chose in its first
line.
"""

import json

import numpy as np
import pytest

from beam_pipeline.launcher import launch
from beam_pipeline.launcher.rerun.unchanged import skipped
from conftest import run_cli
from layout_corpora import LABELME_NAMES, stored_masks, write_layout
from published import ADE20K_CLASSES, CITYSCAPES_LABELS, VOC_CLASSES

PAIRS = 9
LAYOUT_OPTION = {"voc": "auto", "voc_labelme": "voc", "pet": "pet", "cityscapes": "cityscapes", "ade20k": "ade20k"}
SPLITS = {"trainval": "train", "training": "train", "validation": "val"}       # as the layouts publish them


@pytest.fixture(scope="module", params=sorted(LAYOUT_OPTION))
def published(request, tmp_path_factory):
    kind = request.param
    root = tmp_path_factory.mktemp(f"layout_{kind}")
    truth = write_layout(kind, root / "dataset", PAIRS)
    completed = run_cli("--input", root / "dataset", "--output", root / "out", "--layout", LAYOUT_OPTION[kind])
    return kind, truth, root / "out", completed


def test_every_mask_is_its_true_class_ids_pixel_for_pixel(published):
    kind, truth, out, _ = published
    stored = stored_masks(out)
    assert sorted(stored) == sorted(truth)
    for source, (mask, _) in stored.items():
        expected = truth[source][0]
        assert mask.shape == expected.shape and np.array_equal(mask, expected), (kind, source)


def test_splits_come_from_the_datasets_own_files_or_folders(published):
    kind, truth, out, _ = published
    stored = stored_masks(out)
    if kind == "voc_labelme":                   # no split files: by hash, as for any folder
        assert {split for _, split in stored.values()} <= {"train", "val", "test"}
        return
    assert {source: split for source, (_, split) in stored.items()} == {
        source: SPLITS.get(split, split) for source, (_, split) in truth.items()}


def test_class_names_are_the_datasets(published):
    kind, _, out, completed = published
    names = json.loads((out / "manifest.json").read_text())["class_names"]
    expected = {"voc": list(VOC_CLASSES), "voc_labelme": list(LABELME_NAMES), "pet": ["background", "pet"],
                "cityscapes": [label.name for label in sorted(CITYSCAPES_LABELS, key=lambda label: label.trainId)
                               if 0 <= label.trainId < 255],
                "ade20k": [name.split(",")[0].strip() for name in ADE20K_CLASSES]}[kind]
    assert names == expected
    first = completed.stderr.strip().splitlines()[0]               # the console's first line (stdout: the summary)
    if LAYOUT_OPTION[kind] == "auto":
        assert f"(layout {kind}: " in first, first


def test_the_same_command_again_publishes_nothing_where_split_files_list_the_pairs(published):
    """--skip_unchanged on each layout: VOC's and Pet's split files list the pairs, which the launcher streams and
    finds unchanged; the layouts of folders join images and masks, which only the pipeline does, so it runs."""
    kind, _, output, completed = published
    root = output.parent
    argv = ["--input", root / "dataset", "--output", output, "--layout", LAYOUT_OPTION[kind], "--overwrite"]
    found = skipped(launch.resolve([str(arg) for arg in argv]))
    if kind in ("voc", "pet"):
        assert found is not None and found["unchanged"]["pairs"] == PAIRS, found
        assert found["run_id"] == json.loads((output / "manifest.json").read_text())["run_id"]
    else:
        assert found is None
