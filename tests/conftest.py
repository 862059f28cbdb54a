"""Shared fixtures: one seeded sample corpus and one pipeline run per test session."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

NUM_CLASSES = 8


@pytest.fixture(scope="session")
def corpus_dir(tmp_path_factory):
    from tools.sample_corpus import write_corpus
    out = tmp_path_factory.mktemp("corpus")
    write_corpus(str(out), seed=0)
    return out


def run_cli(*args, check=True):
    """Run ``python -m beam_pipeline`` as a user would; returns the CompletedProcess."""
    completed = subprocess.run([sys.executable, "-m", "beam_pipeline", *map(str, args)],
                               cwd=ROOT, capture_output=True, text=True, timeout=900)
    if check and completed.returncode != 0:
        raise AssertionError(f"exit {completed.returncode}\n{completed.stdout[-3000:]}\n{completed.stderr[-5000:]}")
    return completed


@pytest.fixture(scope="session")
def segmentation_run(corpus_dir, tmp_path_factory):
    """The sample corpus's manifest through the command line, with small shards."""
    out = tmp_path_factory.mktemp("seg_out")
    completed = run_cli("--input", corpus_dir / "segmentation" / "manifest.csv", "--output", out,
                        "--num_classes", NUM_CLASSES, "--target_shard_bytes", 4_000_000)
    return out, completed


def _lines(folder, pattern):
    return sorted(line for path in sorted(folder.glob(pattern)) for line in path.read_text().splitlines())


def assert_same_outputs(expected_dir, actual_dir):
    """Two runs of the same options wrote the same data: shards byte for byte, counts, stats, rejects.

    Rejects and the class index are compared as sets of lines: they are text files
    whose line order follows the runner's bundles, which differ between runners.
    """
    import json
    expected = json.loads((expected_dir / "manifest.json").read_text())
    actual = json.loads((actual_dir / "manifest.json").read_text())
    ignored = ("options", "versions", "rejects", "class_index")
    assert {k: v for k, v in actual.items() if k not in ignored} == \
        {k: v for k, v in expected.items() if k not in ignored}
    for entry in expected["splits"].values():
        for shard in entry["shards"]:
            assert (actual_dir / shard["path"]).read_bytes() == (expected_dir / shard["path"]).read_bytes(), \
                shard["path"]
    if (expected_dir / "stats.json").exists():
        assert json.loads((actual_dir / "stats.json").read_text()) == \
            json.loads((expected_dir / "stats.json").read_text())
    assert _lines(actual_dir, "rejects/*") == _lines(expected_dir, "rejects/*")
    assert _lines(actual_dir, "class_index/*") == _lines(expected_dir, "class_index/*")
    assert sorted(p.name for p in actual_dir.glob("*.tfrecord")) == \
        sorted(p.name for p in expected_dir.glob("*.tfrecord"))


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
def classification_run(corpus_dir, tmp_path_factory):
    """The sample corpus's class folders through the command line, balanced by strata."""
    out = tmp_path_factory.mktemp("cls_out")
    completed = run_cli("--input", corpus_dir / "classification" / "images", "--output", out,
                        "--task", "classification", "--num_classes", NUM_CLASSES, "--balance", "strata")
    return out, completed


# Object-store servers (moto S3, the patched GCS emulator, the fault proxy) and the corpus in their buckets.
from objstore_fixtures import (gcs_corpus, gcs_faults, gcs_proxy, gcs_store, object_corpus,  # noqa: E402,F401
                               object_servers, s3_corpus, s3_faults, s3_proxy, s3_store)
