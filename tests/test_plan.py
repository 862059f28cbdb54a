"""--plan: exact listing counts, estimates from a measured sample, and nothing written."""

import pytest

from beam_pipeline.core.plan import MEMORY_HEADROOM, PIPELINE_OVERHEAD, PairSample, estimate
from conftest import NUM_CLASSES, run_cli


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
