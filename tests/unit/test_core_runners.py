"""Which runners' workers cannot read this machine's files (beam_pipeline.core.runners)."""

import pytest

from beam_pipeline.core.runners import direct_engine, placement, shuffle_buckets, unreachable_local_paths


@pytest.mark.parametrize("runner,kwargs,remote", [
    (None, {}, False),
    ("DirectRunner", {}, False),
    ("DataflowRunner", {}, True),
    ("apache_beam.runners.dataflow.dataflow_runner.DataflowRunner", {}, True),
    ("FlinkRunner", {"flink_master": "[local]"}, False),
    ("FlinkRunner", {}, False),                                   # [auto] starts an embedded cluster
    ("FlinkRunner", {"flink_master": "localhost:8081", "environment_type": "EXTERNAL"}, False),
    ("FlinkRunner", {"flink_master": "localhost:8081"}, True),    # DOCKER is the default here
    ("FlinkRunner", {"flink_master": "[local]", "environment_type": "DOCKER"}, True),
    ("FlinkRunner", {"flink_master": "10.0.0.5:8081", "environment_type": "EXTERNAL"}, True),
    ("FlinkRunner", {"flink_master": "http://127.0.0.1:8081", "environment_type": "PROCESS"}, False),
    ("SparkRunner", {"spark_master_url": "local[2]"}, False),
    ("SparkRunner", {"spark_master_url": "spark://cluster:7077", "environment_type": "LOOPBACK"}, True),
    ("PortableRunner", {"job_endpoint": "localhost:8099", "environment_type": "LOOPBACK"}, False),
    ("PortableRunner", {"job_endpoint": "localhost:8099"}, True),
    ("PortableRunner", {"job_endpoint": "[::1]:8099", "environment_type": "EXTERNAL"}, False),
    ("PortableRunner", {"job_endpoint": "jobs.example.com:8099", "environment_type": "EXTERNAL"}, True),
])
def test_placement(runner, kwargs, remote):
    assert placement(runner, **kwargs).remote is remote


def test_only_local_paths_are_reported_and_only_for_remote_workers():
    paths = {"input": "gs://bucket/manifest.csv", "output": "/data/out", "temp_location": None,
             "staging_location": "s3://bucket/staging"}
    assert unreachable_local_paths(placement("DataflowRunner"), paths) == ["--output=/data/out"]
    assert unreachable_local_paths(placement("DirectRunner"), paths) == []
    assert "Google Cloud" in placement("DataflowRunner").reason
    assert "Docker" in placement("PortableRunner", job_endpoint="localhost:8099").reason


# --------------------------------------------------------------------------
# The DirectRunner's engine when the command line names none
# --------------------------------------------------------------------------
def test_a_small_corpus_runs_in_the_launcher():
    engine = direct_engine(252, cores=2, small=1000)
    assert (engine.running_mode, engine.num_workers) == ("in_memory", 1)
    assert "about 252 pairs (at most 1,000)" in engine.reason and "above 1,000" in engine.reason


def test_the_threshold_itself_is_small_and_one_more_is_not():
    assert direct_engine(1000, cores=2, small=1000).running_mode == "in_memory"
    larger = direct_engine(1001, cores=2, small=1000)
    assert (larger.running_mode, larger.num_workers) == ("multi_processing", 2)
    assert "more than 1,000 pairs" in larger.reason


def test_an_unknown_size_gets_a_worker_process_per_core():
    engine = direct_engine(None, cores=4)
    assert (engine.running_mode, engine.num_workers) == ("multi_processing", 4)
    assert "unknown size" in engine.reason


def test_asking_for_workers_asks_for_processes_whatever_the_size():
    engine = direct_engine(10, cores=2, given_workers=3)
    assert (engine.running_mode, engine.num_workers) == ("multi_processing", 3)


def test_the_reason_names_images_for_classification():
    assert "about 10 images (at most 1,000)" in direct_engine(10, cores=2, unit="images").reason
    assert "more than 1,000 images" in direct_engine(5000, cores=2, unit="images").reason


# --------------------------------------------------------------------------
# The files shuffle's buckets
# --------------------------------------------------------------------------
@pytest.mark.parametrize("pairs,buckets", [
    (0, 4), (252, 4), (8_000, 4), (8_001, 5), (10_000, 5), (20_000, 10), (50_000, 25),
    (50_001, 256),             # counted past the limit: as many as an uncounted corpus
    (None, 256),               # not counted (a COCO file, an unreadable input)
])
def test_a_counted_corpus_gets_a_bucket_per_2000_pairs_and_at_least_four(pairs, buckets):
    assert shuffle_buckets(pairs) == buckets


def test_the_count_limit_is_where_buckets_stop_following_the_count():
    assert shuffle_buckets(100_000, limit=1_000_000) == 50
    assert shuffle_buckets(10_000_000, limit=100_000_000) == 256
    assert shuffle_buckets(2_001, limit=2_000) == 256
