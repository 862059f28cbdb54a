"""The verdict cache (docs/cache.md): incremental runs give what a full run gives, byte for byte.

On a copy of the sample corpus (252 listing rows), D is the listing without every 20th row and Δ
those rows. On one thread and on two SDK worker processes (conftest.ENGINES): a full run on
D + Δ without the cache is the reference; a run on D and then the same command on D + Δ (the
cache next to the output, no new flag) must publish the same shards, stats.json, transform output, rejects and class index, having
validated only Δ and the pairs whose files cannot be kept (missing or empty). Then, on that output:
one image rewritten with one byte changed (its size and mtime put back) and another only touched;
--revalidate; a mask template that points elsewhere; an option that changes verdicts. Each must
detect what changed, validate it again, and still equal a fresh run on the corpus as it is then.
The kill-then-re-run row is in the kill matrix (test_reliability.py).
"""

import csv
import json
import os
import shutil
from pathlib import Path

import pytest

from beam_pipeline.core import reasons
from conftest import ENGINES, NUM_CLASSES, assert_same_outputs, manifest_of, run_cli

DELTA_EVERY = 20
UNCACHEABLE = (reasons.MISSING_FILE, reasons.EMPTY_FILE, reasons.UNREADABLE, reasons.FILE_TOO_LARGE)
# --compact all: every re-run writes every record again, as a full run does, so that the cache's runs can equal a
# full run byte for byte; what a re-run keeps of its parent's shards is tests/end_to_end/test_versions.py's.
OPTIONS = ["--num_classes", str(NUM_CLASSES), "--target_shard_bytes", "2000000", "--compact", "all"]


@pytest.fixture(scope="module")
def corpus(corpus_dir, tmp_path_factory):
    """A copy of the sample corpus (this module changes files in it) with listings D and D + Δ."""
    root = tmp_path_factory.mktemp("cache_corpus") / "corpus"
    shutil.copytree(corpus_dir, root)
    folder = root / "segmentation"
    with open(folder / "manifest.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    base = [row for index, row in enumerate(rows) if index % DELTA_EVERY != DELTA_EVERY - 1]
    for name, chosen in (("d.csv", base), ("d_delta.csv", rows)):
        with open(folder / name, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(chosen)
    return folder, len(rows) - len(base)


def selected(manifest: dict) -> int:
    """The pairs that reached validation: all but those the listing's checks rejected."""
    return manifest["counts"]["discovered"] - manifest["counts"]["rejected"]["by_reason"].get("path_outside_root", 0)


def uncacheable(manifest: dict) -> int:
    by_reason = manifest["counts"]["rejected"]["by_reason"]
    return sum(by_reason.get(reason, 0) for reason in UNCACHEABLE)


def lineage(out: Path) -> dict:
    return manifest_of(out)["lineage"]


@pytest.fixture(scope="module")
def full_run(corpus, tmp_path_factory):
    """The full run on D + Δ without the cache (on threads): the reference of both engines' incremental runs."""
    folder, _ = corpus
    reference = tmp_path_factory.mktemp("cache_reference") / "out"
    run_cli("--input", folder / "d_delta.csv", "--output", reference, *OPTIONS, "--no_cache")
    return reference


@pytest.fixture(scope="module", params=list(ENGINES))
def incremental(request, corpus, full_run, tmp_path_factory):
    """(reference output, incremental output, lineage of the run on D, engine)."""
    folder, _ = corpus
    workers = ENGINES[request.param]
    reference = full_run
    out = tmp_path_factory.mktemp(f"cache_{request.param}") / "incremental"
    run_cli("--input", folder / "d.csv", "--output", out, *OPTIONS, *workers)
    first = lineage(out)
    run_cli("--input", folder / "d_delta.csv", "--output", out, *OPTIONS, *workers, "--overwrite")
    return reference, out, first, request.param


def test_a_run_after_adding_pairs_validates_only_them_and_equals_a_full_run(incremental, corpus):
    reference, out, first, _ = incremental
    _, delta = corpus
    assert_same_outputs(reference, out)
    full = manifest_of(reference)
    assert full["lineage"]["cache"] is None and full["lineage"]["validated"] == selected(full)
    assert (first["validated"], first["from_cache"], first["rehashed"]) == (selected(full) - delta, 0, 0)
    second = lineage(out)
    assert second["parent_run_id"] and second["cache"]["fingerprint"] == first["cache"]["fingerprint"]
    # every pair of D came from the cache but those whose files cannot be kept; Δ was validated
    assert second["validated"] == delta + uncacheable(full)
    assert second["from_cache"] == selected(full) - second["validated"] and second["rehashed"] == 0
    assert first["not_spilled"] == second["not_spilled"] == 0          # --spill auto, on a roomy disk


def test_the_summary_and_the_report_show_the_lineage(incremental, corpus):
    _, out, _, engine = incremental
    if engine != "processes2":
        pytest.skip("one output is enough")
    folder, _ = corpus
    # the pipeline runs although nothing changed (without the option the re-run publishes nothing: test_unchanged.py)
    again = run_cli("--input", folder / "d_delta.csv", "--output", out, *OPTIONS, "--overwrite",
                    "--skip_unchanged", "never")
    reused = lineage(out)
    assert reused["validated"] == uncacheable(manifest_of(out))            # nothing changed
    assert (f"validation: {reused['validated']} pairs validated, {reused['from_cache']} from the verdict cache; "
            f"built on version {reused['parent_run_id']}") in again.stdout + again.stderr
    report = (out / manifest_of(out)["data_dir"] / "report.html").read_text()
    assert 'id="lineage"' in report and reused["cache"]["fingerprint"] in report


def rewrite_one_byte(path: Path) -> None:
    """Change one byte of a JPEG's entropy-coded data, then put its mtime back: the same size and mtime."""
    data = bytearray(path.read_bytes())
    stat = path.stat()
    start = data.index(b"\xff\xda") + 20                                   # inside the first scan
    index = next(i for i in range(start + len(data[start:]) // 2, len(data) - 2)
                 if data[i] not in (0xFF, 0xFE) and data[i - 1] != 0xFF)
    data[index] ^= 0x01
    path.write_bytes(bytes(data))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_size == stat.st_size and path.stat().st_mtime_ns == stat.st_mtime_ns


def plain_jpegs(folder: Path) -> list:
    """The JPEG images of regular pairs (img_*), each in one listing row only (the sample corpus repeats one)."""
    with open(folder / "manifest.csv", newline="") as handle:
        images = [row["image"] for row in csv.DictReader(handle)]
    return [image for image in images if image.startswith("images/img_") and image.endswith(".jpg")
            and images.count(image) == 1]


@pytest.fixture(scope="module")
def changed(incremental, corpus, tmp_path_factory):
    """On the processes2 output: one image's byte changed (size and mtime kept), another touched; a run, a
    fresh run on the corpus as it is now, and then --revalidate."""
    reference, out, _, engine = incremental
    if engine != "processes2":
        pytest.skip("one output is enough")
    folder, _ = corpus
    changed_image, touched_image = plain_jpegs(folder)[:2]
    rewrite_one_byte(folder / changed_image)
    touched = folder / touched_image
    os.utime(touched, ns=(touched.stat().st_atime_ns, touched.stat().st_mtime_ns + 10**9))
    run_cli("--input", folder / "d_delta.csv", "--output", out, *OPTIONS, "--overwrite")
    after_change = lineage(out)
    fresh = tmp_path_factory.mktemp("cache_changed") / "fresh"
    run_cli("--input", folder / "d_delta.csv", "--output", fresh, *OPTIONS, "--no_cache")
    assert_same_outputs(fresh, out)
    run_cli("--input", folder / "d_delta.csv", "--output", out, *OPTIONS, "--overwrite", "--revalidate")
    assert_same_outputs(fresh, out)
    return after_change, lineage(out), fresh


def test_a_changed_byte_under_the_same_size_and_mtime_is_validated_again(changed):
    after_change, _, fresh = changed
    base = uncacheable(manifest_of(fresh))
    # the rewritten image (its ctime moved) was hashed, differed and was validated; the touched one was
    # hashed and reused
    assert (after_change["validated"], after_change["rehashed"]) == (base + 1, 1)


def test_revalidate_hashes_every_file_and_reuses_only_the_same_bytes(changed):
    _, revalidated, fresh = changed
    assert revalidated["from_cache"] == 0 and revalidated["validated"] == uncacheable(manifest_of(fresh))
    assert revalidated["rehashed"] == selected(manifest_of(fresh)) - revalidated["validated"]


def test_an_option_that_changes_verdicts_starts_a_new_cache_and_drops_the_old(incremental, corpus, changed):
    _, out, _, _ = incremental
    folder, _ = corpus
    old = lineage(out)["cache"]["fingerprint"]
    run_cli("--input", folder / "d_delta.csv", "--output", out, *OPTIONS, "--overwrite",
            "--sample_points_per_class", "4")
    new = lineage(out)
    assert new["cache"]["fingerprint"] != old and new["from_cache"] + new["rehashed"] == 0
    assert sorted(path.name for path in (out / "cache").iterdir() if path.is_dir()) == [new["cache"]["fingerprint"]]


def test_a_mask_template_pointing_elsewhere_validates_every_pair_again(corpus, tmp_path_factory):
    """Paired folders: masks2/ holds the same masks but one. A pair's key names its mask (image|mask), and a
    verdict belongs to its key (the crop sample points are drawn from the key's hash): with --mask_template
    masks2/{stem}.png every pair is new to the cache and validated, and the output equals a fresh run's."""
    folder, _ = corpus
    work = tmp_path_factory.mktemp("cache_template")
    paired = ["--input", folder, "--image_glob", "images/img_*", *OPTIONS, "--max_reject_fraction", "1"]
    out = work / "out"
    run_cli(*paired, "--mask_template", "masks/{stem}.png", "--output", out)
    shutil.copytree(folder / "masks", folder / "masks2")
    from PIL import Image
    changed_mask = folder / "masks2" / "img_000001.png"
    pixels = Image.open(changed_mask)
    pixels.putpixel((0, 0), (pixels.getpixel((0, 0)) + 1) % NUM_CLASSES)
    pixels.save(changed_mask)
    run_cli(*paired, "--mask_template", "masks2/{stem}.png", "--output", out, "--overwrite")
    moved = lineage(out)
    fresh = work / "fresh"
    run_cli(*paired, "--mask_template", "masks2/{stem}.png", "--output", fresh, "--no_cache")
    assert_same_outputs(fresh, out)
    written = manifest_of(fresh)
    # Pairing rejects some images (no mask) before validation; the run without a cache validated the rest.
    assert moved["validated"] == written["lineage"]["validated"] > 0
    assert (moved["from_cache"], moved["rehashed"]) == (0, 0)


def test_a_cache_dir_of_another_output_is_refused_in_one_line(corpus, tmp_path):
    folder, _ = corpus
    shared = tmp_path / "shared-cache"
    run_cli("--input", folder / "d.csv", "--output", tmp_path / "a", *OPTIONS, "--cache_dir", shared,
            "--max_examples", "5", "--max_reject_fraction", "1")
    refused = run_cli("--input", folder / "d.csv", "--output", tmp_path / "b", *OPTIONS, "--cache_dir", shared,
                      "--max_examples", "5", "--max_reject_fraction", "1", check=False)
    assert refused.returncode != 0
    message = [line for line in refused.stderr.splitlines() if "--cache_dir" in line]
    assert len(message) == 1 and f"is the verdict cache of {tmp_path / 'a'}" in message[0]
    assert "Traceback" not in refused.stderr
    assert json.loads((shared / "_owner.json").read_text()) == {"output": str(tmp_path / "a")}
