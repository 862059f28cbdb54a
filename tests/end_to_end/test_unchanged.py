"""A re-run that finds nothing changed publishes nothing and says so (issue 44, --skip_unchanged, docs/incremental.md).

Each corpus is a copy of the sample corpus's (the tests change its files), published once by a real run. The
re-runs then go through the launcher's own look (``launcher/rerun/unchanged.skipped`` on the checked command line,
as ``python -m beam_pipeline`` calls it), one change at a time, each named by the line the launcher logs, and the
last one through a real run again, after which the same command finds nothing changed once more.
"""

import csv
import json
import logging
import os
import shutil
import subprocess
import sys

import pytest

from beam_pipeline.launcher import launch
from beam_pipeline.launcher.rerun.unchanged import skipped
from conftest import NUM_CLASSES, ROOT, run_cli

SEGMENTATION = ["--task", "segmentation", "--num_classes", str(NUM_CLASSES), "--target_shard_bytes", "2000000"]


def look(argv, caplog):
    """(the manifest the re-run would return, or None; the reason the launcher logged for running)."""
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="beam_pipeline.unchanged"):
        found = skipped(launch.resolve([str(arg) for arg in argv]))
    reasons = [record.getMessage() for record in caplog.records if record.name == "beam_pipeline.unchanged"]
    return found, (reasons[-1] if reasons else "")


@pytest.fixture(scope="module")
def listing_run(corpus_dir, tmp_path_factory):
    """(corpus folder, output, the command): the sample corpus's listing, published once."""
    root = tmp_path_factory.mktemp("unchanged")
    folder = root / "segmentation"
    shutil.copytree(corpus_dir / "segmentation", folder)
    output = root / "out"
    argv = ["--input", folder / "manifest.csv", "--output", output, *SEGMENTATION]
    run_cli(*argv)
    return folder, output, [*argv, "--overwrite"]


def test_the_same_command_again_publishes_nothing_before_tensorflow_starts(listing_run):
    folder, output, argv = listing_run
    published = (output / "manifest.json").read_bytes()
    versions = sorted(os.listdir(output / "runs"))
    completed = run_cli(*argv)
    assert "unchanged: nothing changed since this version of " in completed.stdout
    assert "Nothing was written. --skip_unchanged never runs the pipeline all the same" in completed.stdout
    assert (output / "manifest.json").read_bytes() == published and sorted(os.listdir(output / "runs")) == versions
    # a fresh process: the answer, and the version's own manifest, come before TensorFlow is imported
    probe = ("import json, sys; from beam_pipeline.launcher.pipeline import run; result = run(sys.argv[1:]); "
             "print(json.dumps([result.get('unchanged'), result['run_id'], 'tensorflow' in sys.modules]))")
    answer = subprocess.run([sys.executable, "-c", probe, *map(str, argv)], cwd=ROOT, capture_output=True,
                            text=True, timeout=300, check=True)
    found, run_id, tensorflow = json.loads(answer.stdout.strip().splitlines()[-1])
    manifest = json.loads(published)
    with open(folder / "manifest.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    # every row but the one whose path leaves the root (rejected at discovery) reached validation
    assert found["pairs"] == len(rows) - 1 == manifest["lineage"]["inputs"]["pairs"]
    assert found["files"] == len(manifest["files"]) and run_id == manifest["run_id"] and tensorflow is False


def test_each_change_runs_the_pipeline_and_says_what_changed(listing_run, caplog):
    folder, output, argv = listing_run
    found, _ = look(argv, caplog)
    assert found is not None and found["run_id"] == json.loads((output / "manifest.json").read_text())["run_id"]
    # options that never change a published byte
    assert look([*argv, "--keep_versions", "3", "--spill", "never"], caplog)[0] is not None
    found, why = look([*argv[:-2], "3000000", "--overwrite"], caplog)       # --target_shard_bytes
    assert found is None and "options changed: --target_shard_bytes since version" in why
    assert look([*argv, "--skip_unchanged", "never"], caplog)[0] is None
    # a published shard damaged, then its bytes put back (a new file: its version moved, its SHA-256 decides)
    manifest = json.loads((output / "manifest.json").read_text())
    shard = output / manifest["splits"]["train"]["shards"][0]["path"]
    data = shard.read_bytes()
    shard.unlink()
    shard.write_bytes(data[:len(data) // 2])
    found, why = look(argv, caplog)
    assert found is None and f"the published {manifest['splits']['train']['shards'][0]['path']} holds " in why
    shard.unlink()
    shard.write_bytes(data)
    found, _ = look(argv, caplog)
    assert found is not None and found["unchanged"]["hashed"] == 1
    # an image touched (its bytes the same), then the listing written again with the same rows
    image = folder / "images" / "img_000003.png"
    stat = image.stat()
    os.utime(image, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    found, why = look(argv, caplog)
    assert found is None and "files were added, changed or removed since version" in why
    listing = folder / "manifest.csv"
    rows = listing.read_bytes()
    listing.unlink()
    listing.write_bytes(rows)
    found, why = look(argv, caplog)
    assert found is None and "the listing file changed since version" in why
    # the pipeline runs on it and publishes a version, which the same command then finds current
    completed = run_cli(*argv)
    assert "published: version" in completed.stdout and "unchanged:" not in completed.stdout
    found, _ = look(argv, caplog)
    assert found is not None and found["run_id"] != manifest["run_id"]


def test_class_folders_a_new_image_runs_and_taking_it_away_again_does_not(corpus_dir, tmp_path, caplog):
    folder = tmp_path / "images"
    shutil.copytree(corpus_dir / "classification" / "images", folder)
    argv = ["--input", folder, "--output", tmp_path / "out", "--task", "classification"]
    run_cli(*argv)
    argv.append("--overwrite")
    found, _ = look(argv, caplog)
    images = sum(len(files) for _, _, files in os.walk(folder))
    assert found is not None and found["unchanged"]["pairs"] == images
    first = sorted((folder / "sushi").iterdir())[0]
    extra = folder / "sushi" / "zz_extra.jpg"
    shutil.copyfile(first, extra)
    found, why = look(argv, caplog)
    assert found is None and f"more than the {images:,} pairs validated before" in why
    extra.unlink()
    assert look(argv, caplog)[0] is not None
