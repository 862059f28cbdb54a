"""The same corpus through the DirectRunner and through a standalone Flink cluster gives the same outputs.

The Flink side is a real session cluster from Flink's own distribution (a JobManager and a
TaskManager process, tools/flink/cluster.py), Beam's Flink job server jar built with Maven
(tools/flink/fetch_job_server.sh, cached in build/flink/), and Python SDK workers from an external
worker pool. Needs java and mvn (and, the first time, Maven Central and PyPI); skipped without them, except
under CI=true, where a skip fails (tests/conftest.py) and `make test` installs them (tools/install_java_maven.sh).

What must be equal, and how:
- shards: byte for byte (manifest.json lists each shard's SHA-256, and the files are compared);
  shard contents and record order are functions of the input and the options, not of the runner;
- manifest.json: equal, except the options that name the output folder and the runner, and the entries
  that name the run (run_id, data_dir, timing, the files table; conftest.RUN_ENTRIES);
- stats.json: byte for byte;
- rejects and the class index: equal as multisets of JSON lines. Their file order is the order in
  which the runner hands the elements to the text sink (DirectRunner and Flink bundle and
  parallelise differently), and the pipeline does not sort them;
- transform/: the variables and schemas byte for byte; saved_model.pb differs only in the numeric
  suffixes TensorFlow appends to traced function names (a per-process counter, e.g.
  ``__inference_signature_wrapper_907`` vs ``_2115``), so both graphs are applied to the same
  records and must give the same tensors.
"""

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter

import numpy as np
import pytest

from conftest import NUM_CLASSES, ROOT, RUN_DEPENDENT, RUN_ENTRIES, dataset_dir

pytestmark = [pytest.mark.flink, pytest.mark.integration]

FLINK_RUN_TIMEOUT = 600
MISSING_TOOLS = [tool for tool in ("java", "mvn") if shutil.which(tool) is None]


def _summary_seconds(stdout: str) -> float:
    match = re.search(r"^time: ([0-9.]+) s", stdout, re.MULTILINE)
    return float(match.group(1)) if match else float("nan")


def _run_pipeline(args, timeout):
    """python -m beam_pipeline in its own process group: on a timeout the job server it started dies too."""
    process = subprocess.Popen([sys.executable, "-m", "beam_pipeline", *map(str, args)], cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        raise AssertionError(f"the Flink run did not finish in {timeout} s\n{stderr[-5000:]}")
    finally:
        with contextlib.suppress(ProcessLookupError):  # the job server, if anything left it behind
            os.killpg(process.pid, signal.SIGKILL)
    return process.returncode, stdout, stderr


@pytest.fixture(scope="module")
def flink_run(corpus_dir, tmp_path_factory):
    """The sample corpus on a standalone Flink cluster with the options of conftest's segmentation_run."""
    if MISSING_TOOLS:
        pytest.skip(f"{' and '.join(MISSING_TOOLS)} not on PATH: the Flink job server jar is built with Maven")
    from tools.flink import cluster
    started = time.monotonic()
    jar = cluster.job_server_jar()          # cached in build/flink/ after the first build
    cluster.flink_home()                    # likewise
    prepared = time.monotonic()
    work = tmp_path_factory.mktemp("flink_cluster")
    out = tmp_path_factory.mktemp("flink_out")
    with cluster.FlinkCluster(str(work)) as flink, \
            cluster.WorkerPool(str(work / "log" / "worker_pool.log")) as pool:
        up = time.monotonic()
        code, stdout, stderr = _run_pipeline(
            ["--input", corpus_dir / "segmentation" / "manifest.csv", "--output", out,
             "--num_classes", NUM_CLASSES, "--target_shard_bytes", 4_000_000,
             *cluster.pipeline_flags(flink, pool, jar)], FLINK_RUN_TIMEOUT)
        done = time.monotonic()
    if code != 0:
        raise AssertionError(f"exit {code}; Flink and worker pool logs in {work / 'log'}\n"
                             f"{stdout[-2000:]}\n{stderr[-5000:]}")
    print(f"\nFlink: jar and distribution {prepared - started:.1f} s, cluster start {up - prepared:.1f} s, "
          f"pipeline {done - up:.1f} s (its own summary: {_summary_seconds(stdout):.1f} s)")
    return out


@pytest.fixture(scope="module")
def both(segmentation_run, flink_run):
    direct, completed = segmentation_run
    print(f"\nDirectRunner pipeline: {_summary_seconds(completed.stdout):.1f} s (its own summary)")
    return direct, flink_run


def _manifest(out):
    return json.loads((out / "manifest.json").read_text())


def _jsonl_lines(out, folder):
    return Counter(line for path in sorted((dataset_dir(out) / folder).glob("*.jsonl"))
                   for line in path.read_text().splitlines() if line.strip())


def test_shards_are_byte_identical(both):
    direct, flink = both
    splits = _manifest(direct)["splits"]
    assert _manifest(flink)["splits"] == splits      # paths, record counts, bytes, SHA-256, class presence
    shards = [shard["path"] for entry in splits.values() for shard in entry["shards"]]
    assert len(shards) > 3
    flink, direct = dataset_dir(flink), dataset_dir(direct)
    assert sorted(p.name for p in flink.glob("*.tfrecord")) == sorted(p.name for p in direct.glob("*.tfrecord"))
    for path in shards:
        assert (flink / path).read_bytes() == (direct / path).read_bytes(), path


def test_manifest_counts_and_stats_are_equal(both):
    direct, flink = both
    expected, actual = _manifest(direct), _manifest(flink)
    assert actual["counts"] == expected["counts"]
    assert expected["counts"]["written"] == 240
    assert actual["options"].pop("runner") == "FlinkRunner"
    assert expected["options"].pop("runner") == "DirectRunner"
    assert actual["options"].pop("output") != expected["options"].pop("output")
    assert {k: v for k, v in actual.items() if k not in RUN_ENTRIES} == \
        {k: v for k, v in expected.items() if k not in RUN_ENTRIES}
    assert actual["options"] == expected["options"]
    assert {path: entry for path, entry in actual["files"].items() if not path.startswith(RUN_DEPENDENT)} == \
        {path: entry for path, entry in expected["files"].items() if not path.startswith(RUN_DEPENDENT)}
    assert (dataset_dir(flink) / "stats.json").read_bytes() == (dataset_dir(direct) / "stats.json").read_bytes()


def test_rejects_and_class_index_are_equal_as_sets(both):
    direct, flink = both
    rejects = _jsonl_lines(direct, "rejects")
    assert sum(rejects.values()) == 12               # 10 rejected + 2 duplicates
    assert _jsonl_lines(flink, "rejects") == rejects
    class_index = _jsonl_lines(direct, "class_index")
    assert class_index
    assert _jsonl_lines(flink, "class_index") == class_index


def test_transform_output_is_equivalent(both):
    import tensorflow as tf
    import tensorflow_transform as tft
    direct, flink = (dataset_dir(out) for out in both)
    files = sorted(str(p.relative_to(direct / "transform")) for p in (direct / "transform").rglob("*") if p.is_file())
    assert files == sorted(str(p.relative_to(flink / "transform")) for p in (flink / "transform").rglob("*")
                           if p.is_file())
    for name in files:
        if not name.endswith(("saved_model.pb", "fingerprint.pb")):
            assert (flink / "transform" / name).read_bytes() == (direct / "transform" / name).read_bytes(), name
    outputs = []
    for out in (direct, flink):
        transform = tft.TFTransformOutput(str(out / "transform"))
        spec, layer = transform.raw_feature_spec(), transform.transform_features_layer()
        shards = [str(out / s["path"]) for s in _manifest(out.parent.parent)["splits"]["val"]["shards"]]
        batches = tf.data.TFRecordDataset(shards).batch(1).map(lambda r: layer(tf.io.parse_example(r, spec)))
        outputs.append([{k: v.numpy() for k, v in batch.items()} for batch in batches])
    assert len(outputs[0]) == len(outputs[1]) > 0
    for expected, actual in zip(*outputs):
        assert expected.keys() == actual.keys()
        for key in expected:
            assert np.array_equal(expected[key], actual[key]), key
