"""Shared fixtures: one seeded sample corpus and one pipeline run per test session; the tiers' markers."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

NUM_CLASSES = 8
INTEGRATION_MARKERS = ("integration", "flink")   # a skip of these fails under CI=true
# The tiers, one folder each (docs/testing.md); every test is marked with its folder's name, so that
# ``-m unit``, ``-m "not integration"`` and the like select them too. ``make test-fast`` runs the first two.
TIERS = ("unit", "composites", "end_to_end", "integration")

from shared_outputs import completed_from_json, completed_to_json, once, root_of  # noqa: E402


def pytest_collection_modifyitems(config, items):
    """Mark each test with its tier: the name of the folder below tests/ it lives in."""
    tests = os.path.join(ROOT, "tests")
    for item in items:
        relative = os.path.relpath(str(item.fspath), tests).split(os.sep)
        if len(relative) > 1 and relative[0] in TIERS:
            item.add_marker(relative[0])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under CI=true an integration test that skips fails: CI must not pass by leaving Flink (or the browser,
    or the full-disk case) untested. ``make test`` installs what they need (tools/install_*.sh)."""
    outcome = yield
    report = outcome.get_result()
    if (report.skipped and os.environ.get("CI") == "true" and not hasattr(report, "wasxfail")
            and any(item.get_closest_marker(name) for name in INTEGRATION_MARKERS)):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"{item.nodeid} skipped under CI=true, where integration tests must run: {reason}"


@pytest.fixture(scope="session")
def corpus_dir(tmp_path_factory):
    """The seeded sample corpus, read only (a test that changes it copies it; tests/deltas.py only adds files)."""
    def make(folder):
        from tools.sample_corpus.corpus import write_corpus
        write_corpus(str(folder), seed=0)
        return str(folder)
    return Path(once(tmp_path_factory, "corpus", make))


# The DirectRunner in one process, its workers threads: what the tests' command lines run with unless they
# choose (docs/running.md, "The command and the default runner"). The default itself runs a corpus as small
# as the tests' in the launcher alone (in_memory), a larger one in a worker process per core.
THREADS = ("--direct_running_mode", "multi_threading")
# The two engines of the tests parametrised over them: one thread, and the default's worker processes (two).
ENGINES = {"threads1": ["--direct_running_mode", "multi_threading", "--direct_num_workers", "1"],
           "processes2": ["--direct_running_mode", "multi_processing", "--direct_num_workers", "2"]}
# Options that choose the engine: a command holding one of them runs as it says.
ENGINE_OPTIONS = ("--direct_running_mode", "--direct_num_workers", "--runner")


def run_cli(*args, check=True, default_engine=False):
    """Run ``python -m beam_pipeline`` as a user would; returns the CompletedProcess.

    Unless the command chooses its engine (ENGINE_OPTIONS) or ``default_engine`` is set, the run's workers
    are threads (THREADS). The shared runs below take the default (for these corpora: the launcher's own
    process); the tests that need worker processes (the kill matrix, the worker logs, the option-passing to
    workers, each parametrised threads/processes pair) ask for them."""
    args = [str(arg) for arg in args]
    if not default_engine and not any(arg.split("=")[0] in ENGINE_OPTIONS for arg in args) and "--help" not in args:
        args += THREADS
    completed = subprocess.run([sys.executable, "-m", "beam_pipeline", *args],
                               cwd=ROOT, capture_output=True, text=True, timeout=900)
    if check and completed.returncode != 0:
        raise AssertionError(f"exit {completed.returncode}\n{completed.stdout[-3000:]}\n{completed.stderr[-5000:]}")
    return completed


def shared_run(tmp_path_factory, name: str, *args, default_engine=False):
    """(output folder, completed process): ``run_cli(*args, "--output", folder)`` once per session (``once``)."""
    def make(folder):
        return completed_to_json(run_cli(*args, "--output", folder, default_engine=default_engine))
    value = once(tmp_path_factory, name, make)
    return root_of(tmp_path_factory, name), completed_from_json(value)


@pytest.fixture(scope="session")
def segmentation_run(corpus_dir, tmp_path_factory):
    """The sample corpus's manifest through the command line, with small shards."""
    return shared_run(tmp_path_factory, "seg_out", "--input", corpus_dir / "segmentation" / "manifest.csv",
                      "--num_classes", NUM_CLASSES, "--target_shard_bytes", 4_000_000, default_engine=True)


# The options of every whole run on the object-store corpus (tests/objstore_fixtures.py): it is small and has
# one input of each broken kind, so the reject gate stays off.
OBJECT_RUN_OPTIONS = ["--num_classes", str(NUM_CLASSES), "--target_shard_bytes", "2000000",
                      "--max_reject_fraction", "1"]


@pytest.fixture(scope="session")
def object_local_run(object_corpus, tmp_path_factory):
    """(output folder, seconds): the object-store corpus's listing on local disk with OBJECT_RUN_OPTIONS, on the
    DirectRunner: the reference for the runs on the S3 server and the GCS emulator (DirectRunner and Flink)."""
    def make(folder):
        import time
        started = time.monotonic()
        run_cli("--input", object_corpus / "segmentation" / "manifest.csv", "--output", folder / "out",
                *OBJECT_RUN_OPTIONS)
        return time.monotonic() - started
    seconds = once(tmp_path_factory, "objstore-local", make)
    return root_of(tmp_path_factory, "objstore-local") / "out", seconds


def assert_same_outputs(expected_dir, actual_dir, input_roots=None):
    """Two runs of the same options published the same data (tools/compare_outputs.py): every file of the
    manifest's table byte for byte (shards, stats.json, transform variables and schemas, TFDV statistics),
    the same counts and splits, and the rejects and class index as sets of lines. When the two runs read
    the same corpus from two places, ``input_roots=(expected root, actual root)`` names them."""
    assert differences(expected_dir, actual_dir, input_roots) == []


def free_port() -> int:
    import socket
    with socket.socket() as sock:
        sock.bind(("localhost", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, process, timeout: float = 60.0) -> None:
    """Wait until something listens on localhost:port; fail early if ``process`` died."""
    import socket
    import time
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"{process.args} exited with {process.returncode} before listening")
        with socket.socket() as sock:
            if sock.connect_ex(("localhost", port)) == 0:
                return
        time.sleep(0.2)
    raise AssertionError(f"nothing listens on port {port} after {timeout} s")


def stop_process_group(process) -> None:
    """Stop a service started with start_new_session=True, and the workers it started."""
    import signal
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.fixture(scope="session")
def segmentation_repeat_run(corpus_dir, tmp_path_factory):
    """(output, completed process): the sample corpus's manifest with repeat copies written into the shards
    (--balance repeat_factor; the default, training, leaves the repeats to the trainer)."""
    return shared_run(tmp_path_factory, "repeat_out", "--input", corpus_dir / "segmentation" / "manifest.csv",
                      "--num_classes", NUM_CLASSES, "--target_shard_bytes", 4_000_000, "--balance", "repeat_factor")


@pytest.fixture(scope="session")
def segmentation_strata_run(corpus_dir, tmp_path_factory):
    """The sample corpus's manifest balanced by strata (the statistics' and the trainer's strata tests)."""
    return shared_run(tmp_path_factory, "strata_out", "--input", corpus_dir / "segmentation" / "manifest.csv",
                      "--num_classes", NUM_CLASSES, "--balance", "strata")[0]


@pytest.fixture(scope="session")
def classification_run(corpus_dir, tmp_path_factory):
    """The sample corpus's class folders through the command line, balanced by strata; without --num_classes:
    the class folders count themselves."""
    return shared_run(tmp_path_factory, "cls_out", "--input", corpus_dir / "classification" / "images",
                      "--task", "classification", "--balance", "strata", default_engine=True)


from tools.compare_outputs import RUN_DEPENDENT, RUN_ENTRIES, dataset_dir, differences, manifest_of  # noqa: E402,F401

# Object-store servers (moto S3, the patched GCS emulator, the fault proxy) and the corpus in their buckets.
from objstore_fixtures import (gcs_corpus, gcs_faults, gcs_proxy, gcs_store, object_corpus,  # noqa: E402,F401
                               object_servers, s3_corpus, s3_faults, s3_proxy, s3_store)
