"""--plan: exact listing counts, estimates from a measured sample, and nothing written."""

import pytest

import re
from pathlib import Path

from beam_pipeline.core.plan import MEMORY_HEADROOM, PIPELINE_OVERHEAD, PairSample, estimate, object_store_requests
from conftest import NUM_CLASSES, ROOT, run_cli

MiB = 1024 * 1024


def _sample(split, status="valid", record=1000, cpu=0.01, classes=(0,)):
    return PairSample(split=split, status=status, reason="" if status == "valid" else "truncated",
                      file_bytes=900 if status == "valid" else 0, record_bytes=record if status == "valid" else 0,
                      ref_bytes=100, pair_bytes=400 if status == "valid" else 0, cpu_seconds=cpu,
                      present_classes=classes if status == "valid" else ())


def test_estimate_scales_the_sample_by_hand():
    samples = [_sample("train") for _ in range(3)] + [_sample("train", status="rejected")]
    plan = estimate(discovered=1000, selected_by_split={"train": 800, "val": 100}, samples=samples,
                    target_shard_bytes=100_000, balance="none", balance_threshold=0.5, num_classes=2,
                    sample_worker_rss_bytes=50_000_000)
    assert plan["selected"] == 900
    assert plan["written"] == 675                                   # 900 * 3/4
    assert plan["rejected"] == {"truncated": 225}
    assert plan["splits"]["train"] == {"records": 600, "bytes": 600_000, "shards": 6, "shard_bytes": 100_000}
    assert plan["splits"]["val"]["records"] == 75
    assert plan["shuffle_bytes"] == 900 * 100 + 2 * 675 * 400
    assert plan["vcpu_hours"] == pytest.approx(900 * 0.01 * PIPELINE_OVERHEAD / 3600)
    # A shard of 100 records of 400 metadata bytes each, two records read ahead.
    assert plan["worker_memory_per_core_bytes"] == round(50_000_000 * MEMORY_HEADROOM + 100 * 400 + 2 * 1000)


def test_estimate_repeat_factor_growth_from_sample_presence():
    # Class 1 in 1 of 8 train images: r = sqrt(0.5 / (1/8)) = 2 for that image, 1 for the others.
    samples = [_sample("train", classes=(0,)) for _ in range(7)] + [_sample("train", classes=(0, 1))]
    plan = estimate(discovered=8, selected_by_split={"train": 8}, samples=samples, target_shard_bytes=10**9,
                    balance="repeat_factor", balance_threshold=0.5, num_classes=2, sample_worker_rss_bytes=0)
    assert plan["train_growth"] == pytest.approx(9 / 8)
    assert plan["splits"]["train"]["records"] == 9


def test_plan_on_the_sample_corpus_writes_nothing(corpus_dir, tmp_path):
    out = tmp_path / "never_written"
    completed = run_cli("--input", corpus_dir / "segmentation" / "manifest.csv", "--output", out,
                        "--num_classes", NUM_CLASSES, "--plan", "--plan_sample", 100)
    assert not out.exists()
    text = completed.stdout
    assert "measured 100 sampled pairs" in text
    assert "discovered inputs        252 (exact)" in text      # 252 manifest rows
    assert "selected pairs           251 (exact)" in text      # one row leaves the manifest's folder
    for label in ("shuffle", "worker memory per core", "vCPU-hours", "train ", "val ", "test "):
        assert label in text
    assert "object-store requests    (as on gs://; this run's local paths make none" in text
    # A listing file input: no listing pages; 251 selected pairs of two files, 2 GETs per open and one
    # request for each file's version (the verdict cache's pre-key).
    assert "    listing pages          ~0\n" in text
    assert "~1,506 validation + " in text
    assert "and 1 per validated file for its version (the verdict cache; a first run)" in text


def test_plan_of_class_folders_counts_images_without_num_classes(corpus_dir, tmp_path):
    completed = run_cli("--input", corpus_dir / "classification" / "images", "--output", tmp_path / "never",
                        "--task", "classification", "--plan", "--plan_sample", 20)
    text = completed.stdout
    assert "measured 20 sampled images" in text
    assert "selected images          403 (exact)" in text      # 8 class folders, 403 files
    assert re.search(r"written \(estimate\) +\d+ images", text)
    assert "CPU per image " in text
    assert "pair" not in text


def test_object_store_requests_by_hand():
    requests = object_store_requests(files_per_pair=2, validated_pairs=1000, written_records=1100,
                                     listed_objects=2500, shard_sizes=[128 * MiB, 20 * MiB, 1_000_000],
                                     input_bytes=500_000_000_000, output_scheme="gs://", cache=False)
    assert requests["validation_gets"] == 4000          # 1000 pairs x 2 files x 2 requests
    assert requests["reread_gets"] == 4400              # 1100 records (repeat copies re-read too)
    assert requests["gets"] == 8400
    assert requests["list_pages"] == 3                  # 2,500 objects, 1,000 a page
    # start + 16 MiB chunks + a copy into place: 1+8+1, 1+2+1, 1+1+1
    assert requests["uploads"] == 17
    assert requests["per_tb"] == {"gets": 16800, "list_pages": 6, "uploads": 34}   # 0.5 TB read


def test_object_store_requests_with_the_verdict_cache_ask_each_file_its_version():
    requests = object_store_requests(files_per_pair=2, validated_pairs=1000, written_records=1100, listed_objects=0,
                                     shard_sizes=[], input_bytes=1, output_scheme="gs://")
    assert requests["validation_gets"] == 6000          # 1000 pairs x 2 files x (2 requests + 1 for the version)
    assert requests["reread_gets"] == 0                 # the writer reads validation's spill, not the sources ...
    assert requests["spill_gets"] == 1100               # ... one ranged GET per record's entry
    assert requests["gets"] == 7100
    # 1000 pairs fill 639 of the 1024 buckets (1024 x (1 - (1023/1024)^1000) = 638.5), a part and a spill each:
    # 639 x (start + chunk, start) + 639 spill chunks (the 1 byte of input needs fewer)
    assert requests["cache_uploads"] == 639 * 3 + 639 and requests["uploads"] == requests["cache_uploads"]


def test_object_store_uploads_on_s3_and_nothing_read():
    requests = object_store_requests(files_per_pair=1, validated_pairs=0, written_records=0, listed_objects=0,
                                     shard_sizes=[128 * MiB, 20 * MiB, 1_000_000], input_bytes=0,
                                     output_scheme="s3://")
    # create + 5 MiB parts + complete, then a copy: 2+26+1, 2+4+1, 2+1+1
    assert requests["uploads"] == 40
    assert (requests["gets"], requests["list_pages"]) == (0, 0)
    assert requests["per_tb"] == {"gets": 0.0, "list_pages": 0.0, "uploads": 0.0}


def test_readme_cost_per_tb_comes_from_the_model():
    # docs/runners.md's example: 7.5 M pairs of an image and a mask per TB, each written once (no copies), about
    # 7,451 shards of 128 MiB (1 TB of records), a listing file input; or the same as paired folders.
    shards = [128 * MiB] * 7451
    from_listing = object_store_requests(files_per_pair=2, validated_pairs=7_500_000, written_records=7_500_000,
                                         listed_objects=0, shard_sizes=shards, input_bytes=10**12, cache=False)
    from_folders = object_store_requests(files_per_pair=2, validated_pairs=7_500_000, written_records=7_500_000,
                                         listed_objects=15_000_000, shard_sizes=shards, input_bytes=10**12)
    with_cache = object_store_requests(files_per_pair=2, validated_pairs=7_500_000, written_records=7_500_000,
                                       listed_objects=0, shard_sizes=shards, input_bytes=10**12)
    assert from_listing["gets"] == 60_000_000           # 30 M opens x 2
    # 15 M version requests, one per file, 30 M validation GETs and one for each of the 7.5 M spill entries
    assert with_cache["gets"] == 52_500_000
    assert from_listing["uploads"] == 74_510            # 7,451 x (1 + 8 + 1)
    # 1,024 buckets + 3,750 more parts (2,000 verdicts each), a part and a spill each, and 1 TB in 16 MiB chunks
    assert with_cache["cache_uploads"] == 4_774 * 3 + 59_605 == 73_927
    assert from_folders["list_pages"] == 15_000
    cost = re.search(r"\*\*Cloud Storage requests\*\*.*?(?=\n\n)", Path(ROOT, "docs/runners.md").read_text(), re.DOTALL).group(0)
    cost = " ".join(cost.split())
    for figure in ("30 M opens", "60 M GET requests", "$24 per TB", "74,510 upload requests", "15,000 listing pages",
                   "45 M", "7.5 M ranged reads of the spill", "52.5 M in all, ≈ $21 per TB", "73,927 upload requests"):
        assert figure in cost, figure
