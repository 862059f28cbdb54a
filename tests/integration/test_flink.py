"""The same corpus through the DirectRunner and through a standalone Flink cluster gives the same outputs.

The Flink side is a real session cluster from Flink's own distribution (a JobManager and two
TaskManager processes of one slot each, tools/flink/cluster.py, so every shuffle's records cross
between TaskManagers), Beam's Flink job server jar built with Maven
(tools/flink/fetch_job_server.sh, cached in build/flink/), and Python SDK workers from an external
worker pool. Needs java and mvn (and, the first time, Maven Central and PyPI); skipped without them, except
under CI=true, where a skip fails (tests/conftest.py) and `make test` installs them (tools/install_java_maven.sh).

What must be equal, and how:
- shards: byte for byte (manifest.json lists each shard's SHA-256, and the files are compared);
  shard contents and record order are functions of the input and the options, not of the runner;
- manifest.json: equal, except the options that name the output folder and the runner, and the entries
  that name the run (run_id, data_dir, timing, the files table; conftest.RUN_ENTRIES);
- stats.json: byte for byte;
- rejects and the class index: equal as multisets of JSON lines. The rejects' line order is the
  order of the bundles that wrote their parts (DirectRunner and Flink bundle and parallelise
  differently), and the pipeline does not sort them;
- transform/: the variables and schemas byte for byte; saved_model.pb differs only in the numeric
  suffixes TensorFlow appends to traced function names (a per-process counter, e.g.
  ``__inference_signature_wrapper_907`` vs ``_2115``), so both graphs are applied to the same
  records and must give the same tensors.

One cluster and worker pool serve two jobs: the sample corpus on local disk (above, against conftest's
segmentation_run), and the object-store corpus read from the S3 server (moto, tests/objstore_fixtures.py)
and published to another bucket. That one must equal the same corpus's DirectRunner run on local disk
byte for byte (conftest.assert_same_outputs, as in tests/integration/test_objstore_pipeline.py), and
``python -m beam_pipeline.verify`` must pass on it. The S3 endpoint and region reach the SDK workers with
the job's pipeline options (tools/flink/sdk_boot.py); the credentials are in the worker pool's
environment, as on a TaskManager host. tf.Transform writes on this machine's disk and its output is
copied to the bucket: the workers share that disk, so the launcher lets it run.

Near-duplicate grouping (docs/leakage.md) runs on both runners on a corpus of planted copies with no split column:
the grouped version is the same on Flink, byte for byte (its leakage section, pairs file and index included), and a
re-run on Flink that compares only its new hashes with the parent's index ends with the splits, pairs, records and
statistics of a fresh DirectRunner run.

Last, the local-disk job runs again on a changed listing (tests/deltas.py: pairs added and removed, one moved
to another split): the version it publishes keeps the first job's shards, writes only what changed and holds
the records of a fresh DirectRunner run on that listing (docs/incremental.md).
"""

import contextlib
import dataclasses
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

from beam_pipeline.core import layout
from conftest import (NUM_CLASSES, OBJECT_RUN_OPTIONS, ROOT, RUN_DEPENDENT, RUN_ENTRIES, assert_same_outputs,
                      dataset_dir, manifest_of, run_cli)
from deltas import live_records, records_changed, uncacheable, write_delta
from tools.compare_outputs import file_content
from objstore_fixtures import CORPUS_BUCKET, unique_bucket

pytestmark = [pytest.mark.flink, pytest.mark.integration]

FLINK_RUN_TIMEOUT = 600
MISSING_TOOLS = [tool for tool in ("java", "mvn") if shutil.which(tool) is None]


def _summary_seconds(stdout: str) -> float:
    match = re.search(r"^time: ([0-9.]+) s", stdout, re.MULTILINE)
    return float(match.group(1)) if match else float("nan")


def _run_pipeline(args, timeout, env=None):
    """python -m beam_pipeline in its own process group: on a timeout the job server it started dies too."""
    process = subprocess.Popen([sys.executable, "-m", "beam_pipeline", *map(str, args)], cwd=ROOT, env=env,
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


@dataclasses.dataclass
class Cluster:
    """The module's Flink session cluster and worker pool: the options that send a run there, and its logs."""
    flags: list
    log_dir: object


@pytest.fixture(scope="module")
def flink_cluster(request, tmp_path_factory):
    """One standalone Flink cluster and SDK worker pool for every job of this module.

    The pool's environment holds the S3 server's credentials (boto3's variables), as a TaskManager host's
    would; the endpoint and region come with each job's options.
    """
    if MISSING_TOOLS:
        pytest.skip(f"{' and '.join(MISSING_TOOLS)} not on PATH: the Flink job server jar is built with Maven")
    from tools.flink import cluster
    s3 = request.getfixturevalue("s3_store")
    started = time.monotonic()
    jar = cluster.job_server_jar()          # cached in build/flink/ after the first build
    cluster.flink_home()                    # likewise
    prepared = time.monotonic()
    work = tmp_path_factory.mktemp("flink_cluster")
    # Two TaskManagers of one slot each: every shuffle's records cross between TaskManager processes, as
    # between the hosts of a real cluster.
    with cluster.FlinkCluster(str(work), slots=1, taskmanagers=2) as flink, \
            cluster.WorkerPool(str(work / "log" / "worker_pool.log"), env=s3.env()) as pool:
        print(f"\nFlink: jar and distribution {prepared - started:.1f} s, "
              f"cluster start {time.monotonic() - prepared:.1f} s")
        yield Cluster(cluster.pipeline_flags(flink, pool, jar), work / "log")


def _flink_job(flink_cluster, args, what, env=None):
    """(stdout, seconds) of one python -m beam_pipeline run on the module's cluster; fails with its logs."""
    started = time.monotonic()
    code, stdout, stderr = _run_pipeline([*args, *flink_cluster.flags], FLINK_RUN_TIMEOUT, env)
    seconds = time.monotonic() - started
    if code != 0:
        raise AssertionError(f"{what}: exit {code}; Flink and worker pool logs in {flink_cluster.log_dir}\n"
                             f"{stdout[-2000:]}\n{stderr[-5000:]}")
    print(f"\nFlink, {what}: pipeline {seconds:.1f} s (its own summary: {_summary_seconds(stdout):.1f} s)")
    return stdout, seconds


@pytest.fixture(scope="module")
def flink_run(corpus_dir, flink_cluster, tmp_path_factory):
    """The sample corpus on the Flink cluster with the options of conftest's segmentation_run."""
    out = tmp_path_factory.mktemp("flink_out")
    _flink_job(flink_cluster, ["--input", corpus_dir / "segmentation" / "manifest.csv", "--output", out,
                               "--num_classes", NUM_CLASSES, "--target_shard_bytes", 4_000_000], "local disk")
    return out


@dataclasses.dataclass
class S3Run:
    """The object-store corpus from the S3 server through the Flink cluster, published to ``bucket/v1``."""
    store: object
    bucket: str
    copy: object                # the published output, downloaded with boto3
    stdout: str
    seconds: float


@pytest.fixture(scope="module")
def flink_s3_run(s3_corpus, flink_cluster, tmp_path_factory):
    from tools.objstore.stores import subprocess_env
    store = s3_corpus
    bucket = unique_bucket("flink-published")
    store.make_bucket(bucket)
    stdout, seconds = _flink_job(
        flink_cluster, ["--input", store.url(CORPUS_BUCKET, "segmentation/manifest.csv"),
                        "--output", store.url(bucket, "v1"), *OBJECT_RUN_OPTIONS, *store.flags()],
        "S3 to S3", subprocess_env(store))
    copy = tmp_path_factory.mktemp("flink_s3_copy")
    store.download_tree(bucket, "v1", copy)
    return S3Run(store, bucket, copy, stdout, seconds)


@pytest.fixture(scope="module")
def both(segmentation_run, flink_run):
    direct, completed = segmentation_run
    print(f"\nDirectRunner pipeline: {_summary_seconds(completed.stdout):.1f} s (its own summary)")
    return direct, flink_run


def _manifest(out):
    """The manifest with its paths relative to its version folder (conftest.manifest_of)."""
    return manifest_of(out)


def _jsonl_lines(out, folder):
    """The lines of a version's JSON-lines files (the class index names shards without the run's folder)."""
    version = f"runs/{dataset_dir(out).name}/"
    return Counter(line.replace(version, "") for path in sorted((dataset_dir(out) / folder).glob("*.jsonl"))
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
    assert {path: file_content(entry) for path, entry in actual["files"].items() if not path.startswith(RUN_DEPENDENT)} \
        == {path: file_content(entry) for path, entry in expected["files"].items()
            if not path.startswith(RUN_DEPENDENT)}          # each file's version (mtime, inode) is the run's
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


def test_s3_to_s3_on_flink_equals_the_local_direct_run(flink_s3_run, object_local_run, object_corpus):
    run, store = flink_s3_run, flink_s3_run.store
    local_out, local_seconds = object_local_run
    print(f"\nS3 to S3 on Flink {run.seconds:.1f} s; the same corpus on local disk, DirectRunner {local_seconds:.1f} s")
    assert_same_outputs(local_out, run.copy,
                        input_roots=(str(object_corpus), store.url(CORPUS_BUCKET).rstrip("/")))
    manifest = manifest_of(run.copy)
    assert manifest["options"]["runner"] == "FlinkRunner"
    assert manifest["options"]["output"] == store.url(run.bucket, "v1")
    assert manifest["counts"]["written"] == 24
    # manifest.json lists every object of its version folder; the lock is released, no upload left open
    data = f"v1/{manifest['data_dir']}/"
    assert sorted(key[len(data):] for key in store.keys(run.bucket, data) if not key.endswith("/")) == \
        sorted([*manifest["files"], "manifest.json"])          # and the version's copy of its manifest
    assert f"v1/{layout.LOCK}" not in store.keys(run.bucket, "v1/")
    assert store.incomplete_uploads(run.bucket) == []
    from tools.objstore.stores import subprocess_env
    verified = subprocess.run([sys.executable, "-m", "beam_pipeline.verify", store.url(run.bucket, "v1"),
                               *store.flags()], cwd=ROOT, capture_output=True, text=True,
                              env=subprocess_env(store), timeout=FLINK_RUN_TIMEOUT)
    assert verified.returncode == 0, verified.stderr[-3000:]
    assert verified.stdout.startswith(f"OK: {len(manifest['files'])} files"), verified.stdout


@pytest.fixture(scope="module")
def planted(flink_cluster, tmp_path_factory):
    """Near-duplicate grouping on both runners (docs/leakage.md): the planted corpus of tools/planted_copies.py
    (30 collages of real photographs each with a re-encoded, resized, cropped, brightened or re-formatted copy
    named so that the per-image split separates the two, among 20 more scenes and scikit-image's photographs),
    with no split column, so the fraction splits are grouped. D lacks every third copy; its components are joined
    by union-find in one worker (the default at this size), the Flink re-run's by Hash-to-Min rounds across the
    TaskManagers (``--near_duplicates_one_worker_pairs 0``). Returns (the whole listing, options, {runner: output
    of D})."""
    from tools.planted_copies import write_planted
    import csv
    folder = tmp_path_factory.mktemp("flink_planted") / "corpus"
    listing = write_planted(folder, bases=30, distinct=20, seed=1, workers=2)
    with open(folder / "planted.csv", newline="") as handle:
        later = {row["copy"] for index, row in enumerate(csv.DictReader(handle)) if index % 3 == 0}
    with open(listing, newline="") as source, open(folder / "d.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["image", "mask"])
        writer.writeheader()
        writer.writerows(row for row in csv.DictReader(source) if row["image"] not in later)
    options = ["--num_classes", NUM_CLASSES, "--target_shard_bytes", 2_000_000]
    outs = {name: tmp_path_factory.mktemp(f"planted_{name}") / "out" for name in ("direct", "flink")}
    run_cli("--input", folder / "d.csv", "--output", outs["direct"], *options)
    _flink_job(flink_cluster, ["--input", folder / "d.csv", "--output", outs["flink"], *options],
               "planted copies, grouped")
    return listing, options, outs


@pytest.fixture(scope="module")
def planted_rerun(planted, flink_cluster, tmp_path_factory):
    """(the Flink output, the fresh DirectRunner output, the re-run's stdout): the whole listing on Flink into its
    D output with --overwrite (a re-run comparing only its new hashes with the parent's index, which the SDK
    workers read, and only the components its new pairs touch joined again, by the rounds), and fresh on the
    DirectRunner (union-find). It replaces the Flink output's D version."""
    listing, options, outs = planted
    fresh = tmp_path_factory.mktemp("planted_fresh") / "out"
    run_cli("--input", listing, "--output", fresh, *options)
    stdout, _ = _flink_job(flink_cluster, ["--input", listing, "--output", outs["flink"], *options, "--overwrite",
                                           "--near_duplicates_one_worker_pairs", 0],
                           "planted copies, a re-run against the parent's index, joined by Hash-to-Min rounds")
    return outs["flink"], fresh, stdout


def _live_sources(out):
    """{source id: split} of every live record, read with tf.data."""
    import tensorflow as tf
    manifest = json.loads((out / "manifest.json").read_text())
    spec = {"image/source_id": tf.io.FixedLenFeature([], tf.string)}
    found = {}
    for split, entry in manifest["splits"].items():
        for shard in entry["shards"]:
            deleted = set(shard.get("deleted", ()))
            for index, record in enumerate(tf.data.TFRecordDataset(str(out / shard["path"]))):
                if index not in deleted:
                    found[tf.io.parse_single_example(record, spec)["image/source_id"].numpy().decode()] = split
    return found


def _pair_lines(out):
    manifest = json.loads((out / "manifest.json").read_text())
    run = re.compile(r"runs/\d{8}T\d{6}Z-[0-9a-f]{8}/")
    return sorted(run.sub("", line) for line in (out / manifest["leakage"]["pairs_file"]).read_text().splitlines())


def test_grouped_splits_on_flink_equal_the_direct_runs(planted):
    """The same shards, manifest (its leakage section included), near-duplicate pairs and index, byte for byte;
    and grouping did move planted copies into their base's split."""
    _, _, outs = planted
    assert_same_outputs(outs["direct"], outs["flink"])
    leakage = manifest_of(outs["flink"])["leakage"]
    assert leakage["applied"] == "grouped into one split" and leakage["moved_pairs"] > 0, leakage
    assert leakage["cross_split_pairs"]["before"] > 0 and leakage["cross_split_pairs"]["after"] == 0
    assert leakage["rounds"] == 0


def test_a_rerun_on_flink_against_the_parents_index_ends_as_a_fresh_direct_run(planted_rerun):
    out, fresh, stdout = planted_rerun
    manifest, reference = (json.loads((folder / "manifest.json").read_text()) for folder in (out, fresh))
    assert manifest["options"]["runner"] == "FlinkRunner"
    assert manifest["leakage"]["index"]["reused"] == manifest["lineage"]["parent_run_id"]
    assert manifest["leakage"]["distances_computed"] < reference["leakage"]["distances_computed"]
    assert _live_sources(out) == _live_sources(fresh)
    assert _pair_lines(out) == _pair_lines(fresh)
    assert live_records(out) == live_records(fresh)
    assert (dataset_dir(out) / "stats.json").read_bytes() == (dataset_dir(fresh) / "stats.json").read_bytes()
    assert manifest["counts"] == reference["counts"]
    assert (manifest["leakage"]["rounds"], reference["leakage"]["rounds"]) == (16, 0)
    assert re.search(r"^near-duplicates: \d+ within 14 of 256 bits", stdout, re.M)


def test_a_changed_listing_on_flink_writes_only_the_change_and_holds_the_direct_runs_records(
        both, flink_cluster, corpus_dir, tmp_path):
    """The local-disk job again with --overwrite on a changed listing (tests/deltas.py: D + Δ − R, one pair moved
    to another split; last in this module: it replaces flink_run's version). The SDK workers read the first job's
    verdicts from OUTPUT/cache, the version keeps the first job's shards, writes new ones for what is new and
    deletes what is gone, and holds the records of a fresh DirectRunner run on the changed listing: the same
    SHA-256 per split, stats.json byte for byte, the same counts and balance."""
    _, out = both
    delta = write_delta(corpus_dir / "segmentation")
    options = ["--num_classes", NUM_CLASSES, "--target_shard_bytes", 4_000_000]
    fresh = tmp_path / "direct_fresh"
    run_cli("--input", delta.listing, "--output", fresh, *options)
    stdout, _ = _flink_job(flink_cluster, ["--input", delta.listing, "--output", out, *options, "--overwrite"],
                           "local disk, a changed listing on its verdict cache")
    manifest, reference = (json.loads((folder / "manifest.json").read_text()) for folder in (out, fresh))
    assert live_records(out) == live_records(fresh)
    assert (dataset_dir(fresh) / "stats.json").read_bytes() == (dataset_dir(out) / "stats.json").read_bytes()
    assert manifest["counts"] == reference["counts"] and manifest["balance"] == reference["balance"]
    lineage = manifest["lineage"]
    assert lineage["from_cache"] > 0 and lineage["rehashed"] == 0
    # only the new pairs and what the cache never keeps are validated again
    assert lineage["validated"] == uncacheable(manifest) + len(delta.added) // 2
    assert lineage["reused_runs"] == [lineage["parent_run_id"]]
    new, gone = records_changed(out)
    records = lineage["records"]
    assert new > 2 and gone > 2                  # Δ and the moved pair; R and the moved pair
    assert (records["written"], records["deleted"], records["compacted"]) == (new, gone, 0)
    own = manifest["data_dir"] + "/"
    assert sum(s["records"] for e in manifest["splits"].values() for s in e["shards"] if s["path"].startswith(own)) \
        == new
    assert f"{lineage['from_cache']} from the verdict cache" in stdout
