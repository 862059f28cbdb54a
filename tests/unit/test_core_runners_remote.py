"""Remote runners: EXTERNAL worker pools by address, and where a Flink job's staged artifacts must live.

Pure (beam_pipeline.core.runners: no Beam, no I/O). Expected messages are written out by hand.
"""

import pytest

from beam_pipeline.core.runners import artifact_staging_problem, external_pool_address, placement


@pytest.mark.parametrize("config,service_address,address", [
    ("localhost:50000", None, "localhost:50000"),
    ('{"url": "10.1.2.3:50000", "params": {"a": "b"}}', None, "10.1.2.3:50000"),   # Beam's JSON form
    (None, "pool.example.com:50000", "pool.example.com:50000"),  # --environment_options external_service_address=
    ("localhost:50000", "pool.example.com:50000", "localhost:50000"),   # the config wins, as in Beam
    ('{"params": {}}', None, None),
    ("{not json", None, None),
    (None, None, None),
])
def test_external_pool_address(config, service_address, address):
    assert external_pool_address(config, service_address) == address


@pytest.mark.parametrize("master,pool,remote", [
    ("localhost:8081", "localhost:50000", False),      # the local cluster of tools/flink/cluster.py
    ("localhost:8081", "127.0.0.1:50000", False),
    ("[local]", "localhost:50000", False),
    ("localhost:8081", "10.1.2.3:50000", True),        # a pool on another host: its workers cannot see our files
    ("localhost:8081", "pool.example.com:50000", True),
    ("[local]", '{"url": "pool.example.com:50000"}', True),
    ("flink.example.com:8081", "localhost:50000", True),  # localhost as the remote TaskManager sees it
])
def test_external_workers_are_placed_by_the_pool_address(master, pool, remote):
    where = placement("FlinkRunner", flink_master=master, environment_type="EXTERNAL", environment_config=pool)
    assert where.remote is remote


def test_a_remote_pool_is_named_in_the_reason():
    where = placement("PortableRunner", job_endpoint="localhost:8099", environment_type="EXTERNAL",
                      environment_config="10.1.2.3:50000")
    assert (where.remote, where.reason) == (
        True, "the SDK workers run in the EXTERNAL worker pool at 10.1.2.3:50000, another machine")
    where = placement("PortableRunner", job_endpoint="localhost:8099", environment_type="EXTERNAL",
                      external_service_address="10.1.2.4:50000")
    assert (where.remote, where.reason) == (
        True, "the SDK workers run in the EXTERNAL worker pool at 10.1.2.4:50000, another machine")


def test_a_pool_address_means_nothing_for_other_environments():
    # LOOPBACK runs the workers in this process whatever --environment_config says.
    where = placement("FlinkRunner", flink_master="[local]", environment_type="LOOPBACK",
                      environment_config="10.1.2.3:50000")
    assert where.remote is False


REMOTE = "flink.example.com:8081"


@pytest.mark.parametrize("options,message", [
    (dict(flink_master=REMOTE),
     "the Flink master flink.example.com:8081 is another machine, whose TaskManagers cannot read the job "
     "server's local temporary folder: give --artifacts_dir gs://BUCKET/beam-artifacts (or --flink_submit_uber_jar)"),
    (dict(flink_master="http://10.0.0.5:8081"),
     "the Flink master http://10.0.0.5:8081 is another machine, whose TaskManagers cannot read the job "
     "server's local temporary folder: give --artifacts_dir gs://BUCKET/beam-artifacts (or --flink_submit_uber_jar)"),
    (dict(flink_master=REMOTE, artifacts_dir="/tmp/artifacts"),
     "--artifacts_dir /tmp/artifacts is a local path, which the TaskManagers of flink.example.com:8081 cannot "
     "read: use gs://BUCKET/beam-artifacts, or --allow_local_paths when every TaskManager mounts it at the same place"),
    (dict(flink_master=REMOTE, artifacts_dir="file:///tmp/artifacts"),
     "--artifacts_dir file:///tmp/artifacts is a local path, which the TaskManagers of flink.example.com:8081 "
     "cannot read: use gs://BUCKET/beam-artifacts, or --allow_local_paths when every TaskManager mounts it at "
     "the same place"),
    (dict(flink_master=REMOTE, artifacts_dir="s3://bucket/artifacts"),
     "--artifacts_dir s3://bucket/artifacts: the job server jar of tools/flink reads only gs:// besides local "
     "paths (it carries no s3:// filesystem); use gs://, or --flink_submit_uber_jar"),
    (dict(flink_master=REMOTE, artifacts_dir="hdfs://namenode/artifacts", allow_local_paths=True),
     "--artifacts_dir hdfs://namenode/artifacts: the job server jar of tools/flink reads only gs:// besides local "
     "paths (it carries no hdfs:// filesystem); use gs://, or --flink_submit_uber_jar"),
])
def test_remote_flink_refuses_artifacts_its_taskmanagers_cannot_read(options, message):
    assert artifact_staging_problem("FlinkRunner", **options) == message


@pytest.mark.parametrize("runner,options", [
    ("FlinkRunner", dict(flink_master=REMOTE, artifacts_dir="gs://bucket/beam-artifacts")),
    ("FlinkRunner", dict(flink_master=REMOTE, submit_uber_jar=True)),
    ("FlinkRunner", dict(flink_master=REMOTE, artifacts_dir="/mnt/shared/artifacts", allow_local_paths=True)),
    ("FlinkRunner", dict(flink_master="[local]")),
    ("FlinkRunner", dict(flink_master="[auto]")),
    ("FlinkRunner", dict()),                                  # [auto]: an embedded cluster
    ("FlinkRunner", dict(flink_master="localhost:8081")),      # also with DOCKER: each TaskManager reads locally
    ("apache_beam.runners.portability.flink_runner.FlinkRunner", dict(flink_master="127.0.0.1:8081")),
    ("DataflowRunner", dict(flink_master=REMOTE)),            # Dataflow stages to --staging_location
    ("DirectRunner", dict()),
    ("PortableRunner", dict()),   # a job server elsewhere keeps its own --artifacts-dir: nothing to check here
])
def test_artifacts_that_reach_the_workers_pass(runner, options):
    assert artifact_staging_problem(runner, **options) is None
