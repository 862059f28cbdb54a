"""Versions made of shards from several runs (docs/incremental.md): a re-run writes only what changed and holds
the same records as a fresh full run.

On a copy of the sample corpus: D is the listing without every 10th row. The final listing is D + Δ − R: Δ (every
10th row) added, R (every 7th row of D) removed, one image rewritten with other pixels, and one pair moved to
another split in the listing's split column. On one thread and on two SDK worker processes (conftest.ENGINES), a
run on D and then a re-run on the final listing (--overwrite, the same command otherwise) must publish a version
whose live records are, as a multiset of SHA-256 per split, those of a fresh full run on the final listing;
stats.json and the TFDV statistics byte-identical; the class index the same lines for the live records; every
removed, changed and moved pair's record deleted and no kept shard rewritten. Then --compact all on that version gives shards byte-identical to the
fresh run's (tools/compare_outputs.py).
"""

import collections
import csv
import hashlib
import json
import shutil
from pathlib import Path

import pytest
import tensorflow as tf
from PIL import Image

from conftest import ENGINES, NUM_CLASSES, assert_same_outputs, dataset_dir, run_cli
from deltas import live_records, records_changed

OPTIONS = ["--num_classes", str(NUM_CLASSES), "--target_shard_bytes", "2000000"]
DELTA_EVERY, REMOVE_EVERY = 10, 7


@pytest.fixture(scope="module")
def corpus(corpus_dir, tmp_path_factory):
    """(folder, D listing, final listing, what changed): a copy of the sample corpus."""
    folder = tmp_path_factory.mktemp("versions_corpus") / "segmentation"
    shutil.copytree(corpus_dir / "segmentation", folder)
    with open(folder / "manifest.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    valid = [row for row in rows if "broken" not in row["image"] and "escape" not in row["image"]]
    base = [row for index, row in enumerate(rows) if index % DELTA_EVERY != DELTA_EVERY - 1]
    removed = [row for index, row in enumerate(base) if index % REMOVE_EVERY == REMOVE_EVERY - 1]
    final = [dict(row) for row in rows if row not in removed]
    kept_valid = [row for row in valid if row in base and row not in removed]
    changed, moved = kept_valid[3], kept_valid[11]
    moved_row = next(row for row in final if row["image"] == moved["image"])
    moved_row["split"] = "val" if moved["split"] != "val" else "test"
    for name, chosen in (("d.csv", base), ("final.csv", final)):
        with open(folder / name, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(chosen)
    return folder, changed, moved, removed


@pytest.fixture(scope="module")
def fresh(corpus, tmp_path_factory):
    """A full run on the final listing, after the changed image is rewritten (the reference)."""
    folder, changed, _, _ = corpus
    image = folder / changed["image"]
    before = image.read_bytes()
    out = tmp_path_factory.mktemp("versions_fresh") / "out"
    return out, before


@pytest.fixture(scope="module", params=list(ENGINES))
def versioned(request, corpus, fresh, tmp_path_factory):
    """(versioned output, the reference): a run on D, the image rewritten, then a re-run on the final listing."""
    folder, changed, _, _ = corpus
    workers = ENGINES[request.param]
    out = tmp_path_factory.mktemp(f"versions_{request.param}") / "out"
    image = folder / changed["image"]
    image.write_bytes(fresh[1])                         # the image as D had it
    run_cli("--input", folder / "d.csv", "--output", out, *OPTIONS, *workers)
    flipped = Image.open(image).transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    flipped.save(image, format=Image.open(image).format)
    run_cli("--input", folder / "final.csv", "--output", out, *OPTIONS, *workers, "--overwrite")
    if not (fresh[0] / "manifest.json").exists():
        run_cli("--input", folder / "final.csv", "--output", fresh[0], *OPTIONS)
    return out, fresh[0]


def class_index(out):
    """The live lines of the class index as (class, source id, copy), each checked against the record it names."""
    manifest = json.loads((out / "manifest.json").read_text())
    sources, deleted = {}, {}
    for entry in manifest["splits"].values():
        for shard in entry["shards"]:
            deleted[shard["path"]] = set(shard.get("deleted", ()))
            for index, record in enumerate(tf.data.TFRecordDataset(str(out / shard["path"]))):
                example = tf.train.Example.FromString(record.numpy())
                sources[shard["path"], index] = example.features.feature["image/source_id"].bytes_list.value[0].decode()
    lines = []
    for path in manifest["class_index"]:
        for row in map(json.loads, (out / path).read_text().splitlines()):
            if row["record"] in deleted[row["shard"]]:
                continue
            assert sources[row["shard"], row["record"]] == row["source_id"], row
            lines.append((row["class"], row["source_id"], row["copy"]))
    return sorted(lines)


def test_the_version_holds_the_fresh_runs_records(versioned):
    out, reference = versioned
    assert live_records(out) == live_records(reference)
    assert (dataset_dir(out) / "stats.json").read_bytes() == (dataset_dir(reference) / "stats.json").read_bytes()
    for split in ("train", "val", "test"):
        tfdv = f"stats/{split}.tfrecord"
        assert (dataset_dir(out) / tfdv).read_bytes() == (dataset_dir(reference) / tfdv).read_bytes(), split
    assert class_index(out) == class_index(reference)
    manifest, fresh = (json.loads((o / "manifest.json").read_text()) for o in (out, reference))
    assert manifest["counts"] == fresh["counts"]
    kept = ("num_examples", "num_images", "num_bytes", "class_images", "class_pixels", "ignore_pixels", "repeat_weight",
            "class_repeat_weight")
    assert {s: {k: e[k] for k in kept} for s, e in manifest["splits"].items()} == \
        {s: {k: e[k] for k in kept} for s, e in fresh["splits"].items()}
    # the balance the trainer will apply, to the last bit: the repeat factors are summed exactly, whatever shards
    # and runs hold the records
    assert manifest["balance"] == fresh["balance"]


def test_only_what_changed_is_written_and_what_is_gone_is_deleted(versioned):
    out, _ = versioned
    manifest = json.loads((out / "manifest.json").read_text())
    lineage = manifest["lineage"]
    parent = json.loads((out / "runs" / lineage["parent_run_id"] / "manifest.json").read_text())
    new, gone = records_changed(out)
    assert gone > 2 and new > 2                            # R and Δ, the changed image, the moved pair
    records = lineage["records"]
    own = manifest["data_dir"] + "/"
    written = sum(s["records"] for e in manifest["splits"].values() for s in e["shards"] if s["path"].startswith(own))
    assert (records["written"], records["deleted"], records["compacted"]) == (new, gone, 0) and written == new
    assert records["kept"] + records["deleted"] == parent["counts"]["records_written"]
    assert records["kept"] + written == manifest["counts"]["records_written"]
    assert lineage["reused_runs"] == [lineage["parent_run_id"]]
    deleted = sum(len(s.get("deleted", ())) for e in manifest["splits"].values() for s in e["shards"])
    assert deleted == records["deleted"]
    assert subprocess_verify(out) == 0


def subprocess_verify(out) -> int:
    from beam_pipeline.verify import main
    return main([str(out)])


def test_compact_all_gives_the_fresh_runs_shards(versioned, corpus, tmp_path):
    out, reference = versioned
    folder = corpus[0]
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    run_cli("--input", folder / "final.csv", "--output", copy, *OPTIONS, "--overwrite", "--compact", "all")
    assert_same_outputs(reference, copy)
    lineage = json.loads((copy / "manifest.json").read_text())["lineage"]
    assert lineage["records"]["kept"] == 0 and lineage["records"]["compacted"] > 0


def test_the_trainer_reads_exactly_the_live_records(versioned):
    """An unbalanced pass of the trainer's input over each split, and what trainer.evaluate reads, skip the deleted
    records: the fresh run's records, no more."""
    from trainer.data.artifacts import load_artifacts
    from trainer.data.input import live_records as trainer_records
    from trainer.data.input import shard_for_pipeline
    out, reference = versioned
    expected = live_records(reference)
    artifacts = load_artifacts(str(out))
    for split in ("train", "val", "test"):
        shard = shard_for_pipeline(artifacts.shard_paths(split), deleted=artifacts.deleted(split))
        read = collections.Counter(hashlib.sha256(r.numpy()).hexdigest() for r in trainer_records(shard, 8, True))
        assert read == expected[split], split


def test_the_plain_tf_data_reader_of_the_docs_reads_the_live_records(versioned):
    """docs/incremental.md's reader for consumers other than this trainer, run as written."""
    from conftest import ROOT
    text = (Path(ROOT) / "docs" / "incremental.md").read_text()
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    namespace = {}
    exec(compile(code, "docs/incremental.md", "exec"), namespace)      # noqa: S102 - the documented snippet
    out, reference = versioned
    expected = live_records(reference)
    for split in ("train", "val", "test"):
        read = collections.Counter(hashlib.sha256(r.numpy()).hexdigest()
                                   for r in namespace["live_records"](str(out), split))
        assert read == expected[split], split
