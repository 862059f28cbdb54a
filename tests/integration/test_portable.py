"""The pipeline through PortableRunner: Beam's job service plus an external pool of SDK worker processes.

This is the Fn API path that Flink, Spark and Dataflow use. The SDK workers are
separate processes started by the pool, so the run succeeds only if nothing
depends on state of the launching process: no module globals written at run
time, no save_main_session, nothing unpicklable captured in a DoFn.
"""

import os
import subprocess
import sys

import pytest

from conftest import NUM_CLASSES, assert_same_outputs, free_port, run_cli, stop_process_group, wait_for_port

VENV_BIN = os.path.dirname(sys.executable)


def _service(args, log_path, cwd):
    """Start a Beam service in its own process group, with this environment's python first on PATH.

    The worker pool starts SDK workers with a bare ``python``; without this PATH
    they would be another interpreter's, and the job would hang.
    """
    env = dict(os.environ, PATH=VENV_BIN + os.pathsep + os.environ.get("PATH", ""))
    log = open(log_path, "w")
    return subprocess.Popen([sys.executable, "-m", *args], cwd=cwd, env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)


@pytest.fixture(scope="module")
def portable_services(tmp_path_factory):
    folder = tmp_path_factory.mktemp("portable")
    pool_port, job_port = free_port(), free_port()
    pool = _service(["apache_beam.runners.worker.worker_pool_main", f"--service_port={pool_port}"],
                    folder / "worker_pool.log", folder)
    jobs = _service(["apache_beam.runners.portability.local_job_service_main", f"--port={job_port}"],
                    folder / "job_service.log", folder)
    try:
        wait_for_port(pool_port, pool)
        wait_for_port(job_port, jobs)
        yield job_port, pool_port, folder
    finally:
        stop_process_group(jobs)
        stop_process_group(pool)


def test_portable_runner_with_external_workers_writes_the_same_outputs(
        segmentation_run, corpus_dir, portable_services, tmp_path):
    job_port, pool_port, folder = portable_services
    expected, _ = segmentation_run
    completed = run_cli("--input", corpus_dir / "segmentation" / "manifest.csv", "--output", tmp_path,
                        "--num_classes", NUM_CLASSES, "--target_shard_bytes", 4_000_000,
                        "--runner", "PortableRunner", f"--job_endpoint=localhost:{job_port}",
                        "--environment_type", "EXTERNAL", f"--environment_config=localhost:{pool_port}",
                        check=False)
    assert completed.returncode == 0, (completed.stderr[-4000:] + "\nworker pool log:\n"
                                       + (folder / "worker_pool.log").read_text()[-4000:])
    assert_same_outputs(expected, tmp_path)
