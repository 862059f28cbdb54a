"""--spill (docs/cache.md): validation's spill never takes the room the shards need, and without it the
writer reads the files again and publishes the same bytes.

On a copy of the sample corpus: a run without the cache is the reference. On a tmpfs with room for that
dataset but not for the dataset and its spill, --spill always fails in one line and --spill auto (the
default) publishes the reference's bytes; --spill never keeps verdicts only, and publishes them too.
"""

import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import NUM_CLASSES, assert_same_outputs, manifest_of, run_cli

OPTIONS = ["--num_classes", str(NUM_CLASSES), "--target_shard_bytes", "2000000"]


@pytest.fixture(scope="module")
def corpus(corpus_dir, tmp_path_factory):
    """A copy of the sample corpus's segmentation folder (other modules change their copies, not this one)."""
    root = tmp_path_factory.mktemp("spill_corpus") / "corpus"
    shutil.copytree(corpus_dir, root)
    return root / "segmentation" / "manifest.csv"


@pytest.fixture(scope="module")
def reference(corpus, tmp_path_factory):
    """The run without the verdict cache, so without a spill."""
    out = tmp_path_factory.mktemp("spill_reference") / "out"
    run_cli("--input", corpus, "--output", out, *OPTIONS, "--no_cache")
    return out


def folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


@pytest.fixture
def small_disk(tmp_path):
    """``mount(size_bytes)`` -> the folder of a new tmpfs of that size; unmounted after the test (needs root)."""
    mounted = []

    def mount(size_bytes: int) -> Path:
        folder = tmp_path / f"disk{len(mounted)}"
        folder.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_bytes}", "tmpfs", str(folder)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
        mounted.append(folder)
        return folder

    yield mount
    for folder in mounted:
        subprocess.run(["umount", str(folder)], check=False)


def validated_pairs(manifest: dict) -> int:
    return manifest["lineage"]["validated"]


@pytest.mark.integration
def test_the_spill_leaves_the_shards_room_on_a_small_disk(corpus, reference, small_disk):
    """With --spill always the spill takes the shards' room and the run fails in one line, no traceback (the
    run's workers are threads: Beam's harness prints a failed bundle's traceback into this stderr); --spill
    auto stops spilling, the writer reads those files again, and the run publishes the reference's bytes."""
    written = manifest_of(reference)["lineage"]["bytes_written"]
    size = folder_bytes(reference) + written // 2          # the dataset fits; the dataset and a spill do not
    always = small_disk(size) / "out"
    failed = run_cli("--input", corpus, "--output", always, *OPTIONS, "--spill", "always", check=False)
    assert failed.returncode != 0
    errors = [line for line in failed.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "No space left on device" in errors[0], failed.stderr[-2000:]
    assert "Traceback" not in failed.stderr, failed.stderr[-4000:]

    auto = small_disk(size) / "out"
    done = run_cli("--input", corpus, "--output", auto, *OPTIONS)
    assert_same_outputs(reference, auto)
    lineage = manifest_of(auto)["lineage"]
    assert 0 < lineage["not_spilled"] <= lineage["validated"] == validated_pairs(manifest_of(reference))
    assert done.stderr.count("stops keeping pairs' bytes in its spill") == 1          # once per worker process
    assert (f"({lineage['not_spilled']} validated not kept in the spill, --spill: the writer read their files "
            f"again)") in done.stdout + done.stderr


def test_spill_never_keeps_verdicts_only_and_publishes_the_same(corpus, reference, tmp_path):
    out = tmp_path / "out"
    run_cli("--input", corpus, "--output", out, *OPTIONS, "--spill", "never")
    assert_same_outputs(reference, out)
    lineage = manifest_of(out)["lineage"]
    assert lineage["cache"] is not None and 0 < lineage["not_spilled"] <= lineage["validated"]
    assert not list((out / "cache").rglob("*.records"))            # no spill file was written

