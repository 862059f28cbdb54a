"""The whole pipeline on object stores: ``python -m beam_pipeline`` reading its corpus from a bucket and
publishing to another, on the local S3 server (moto) and GCS emulator, against one local-disk run.

The command is docs/outputs.md's cloud command with the test servers' endpoint and credentials (S3: the
``--s3_endpoint_url``/``--s3_region_name`` options and boto3's environment; GCS: the emulator's variables
and ``--project``). The whole run on each store is the DirectRunner's default, two SDK worker processes (the
store's options must reach them); the runs after it use threads (conftest.THREADS), which the tests in this module
do not depend on and which start faster.

* Each store's run equals the same run on local disk byte for byte (conftest.assert_same_outputs:
  shards, stats.json, transform variables and schemas, TFDV statistics; rejects as sets of lines),
  manifest.json lists every object of the version folder, and ``python -m beam_pipeline.verify``
  passes. Before it, the output holds a lease of a run on another host that stopped its heartbeat an
  hour ago: the run takes it over, saying so.
* A live holder of the lock refuses a second run, naming it (GCS: a process holding the lock; S3: a
  running pipeline, below); once killed, its lock is taken over.
* On S3: an ``--overwrite`` run killed (SIGKILL to its process group) with a shard half written leaves
  the published dataset as it was; the next ``--overwrite`` run takes the killed run's lock over, keeps
  the old version readable until its commit, and cleans up what the killed run left.
* The verdict cache beside an output on each store (docs/cache.md): the S3 recovery above reuses the first
  run's verdicts and still equals the local run. On each store, a re-run on a changed listing (tests/deltas.py)
  reuses them, keeps the first run's shards, writes only what changed and holds a fresh local run's records.
* On S3: paired folders whose listing spans two pages (1000 keys each), read through a proxy that
  refuses a share of the requests with 503/500: every record arrives once, equal to the local run.

The requests each store's run makes, per input, are printed (``pytest -s``); docs/outputs.md's "Object stores"
quotes them.
"""

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

import pytest
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from beam_pipeline import phases
from beam_pipeline.core import layout
from beam_pipeline.io.cache import spill as spill_store
from conftest import OBJECT_RUN_OPTIONS, ROOT, THREADS, assert_same_outputs, dataset_dir, manifest_of, run_cli
from deltas import live_records, records_changed, uncacheable, write_delta
from objstore_fixtures import CORPUS_BUCKET, unique_bucket
from tools.objstore.stores import apply_env, subprocess_env

RUN_TIMEOUT = 600
COMMON = OBJECT_RUN_OPTIONS
FOLDER_INPUT = ["--image_glob", "images/*", "--mask_template", "masks/{stem}.png"]
FILLERS = 1001          # objects listed before the images, so that their listing spans two S3 pages
OTHER_HOST = "build-host-7"


# --------------------------------------------------------------------------
# Running the command line against a store
# --------------------------------------------------------------------------
def start(store, args, log: Path, pause_at=None) -> subprocess.Popen:
    """``python -m beam_pipeline`` with the store's environment, in a process group of its own."""
    env = subprocess_env(store)
    if pause_at:
        env.update({phases.PAUSE_AT_VARIABLE: pause_at, phases.PAUSE_FILE_VARIABLE: str(log) + ".paused"})
    with open(log, "w") as handle:
        return subprocess.Popen([sys.executable, "-m", "beam_pipeline", *map(str, args), *store.flags()], cwd=ROOT,
                                stdout=handle, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def finish(process, log: Path) -> str:
    try:
        process.wait(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    return log.read_text()


def run(store, args, log: Path):
    """(exit status, console output) of a whole run."""
    process = start(store, args, log)
    text = finish(process, log)
    return process.returncode, text


def wait_paused(process, log: Path) -> None:
    deadline = time.monotonic() + RUN_TIMEOUT
    while not Path(str(log) + ".paused").exists():
        assert process.poll() is None, \
            f"the run ended ({process.returncode}) before its pause:\n{log.read_text()[-4000:]}"
        assert time.monotonic() < deadline, "the run did not reach its pause"
        time.sleep(0.05)


def go_on(log: Path) -> None:
    Path(str(log) + ".paused.go").touch()


def kill_group(process) -> None:
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def verify_cli(store, url):
    return subprocess.run([sys.executable, "-m", "beam_pipeline.verify", url, *store.flags()], cwd=ROOT,
                          capture_output=True, text=True, env=subprocess_env(store), timeout=RUN_TIMEOUT)


def use_store(store, monkeypatch):
    """Beam's FileSystems in this process, pointed at ``store`` (for beam_pipeline.verify.verify)."""
    apply_env(store.env(), monkeypatch)
    FileSystems.set_options(PipelineOptions(store.flags()))


def download(store, bucket, prefix, local: Path) -> Path:
    """The published output (manifest.json, runs/...) on local disk, through the store's own client."""
    store.download_tree(bucket, prefix, local)
    return local


def corpus_roots(object_corpus, store):
    """The corpus on local disk and in its bucket (reject lines name inputs by path)."""
    return str(object_corpus), store.url(CORPUS_BUCKET).rstrip("/")


def lock_record(store, bucket, prefix):
    key = f"{prefix}/{layout.LOCK}"
    return json.loads(store.get(bucket, key)) if key in store.keys(bucket, prefix) else None


def versions(store, bucket, prefix):
    return sorted({key.split("/")[2] for key in store.keys(bucket, f"{prefix}/runs/") if key.count("/") > 2})


def published_files(store, bucket, prefix, manifest):
    """The files of the manifest's version folder as the store lists them (directory markers left out)."""
    data = f"{prefix}/{manifest['data_dir']}/"
    return sorted(key[len(data):] for key in store.keys(bucket, data) if not key.endswith("/"))


# --------------------------------------------------------------------------
# Fixtures: the local runs everything is compared with, and each store's published output
# --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def local_run(object_local_run):
    """The corpus's listing on local disk: the reference for every store (shared with test_flink.py)."""
    return object_local_run


def plant_stale_lease(store, bucket, prefix) -> dict:
    """The lock record of a run on another host whose heartbeat stopped an hour ago (its lease: 10 min)."""
    record = {"run_id": "20261201T000000Z-5ta1e0ff", "host": OTHER_HOST, "pid": 4242, "pid_start": "777",
              "started": "2026-12-01T00:00:00+00:00", "heartbeat": time.time() - 3600, "lease_seconds": 600.0}
    store.put(bucket, f"{prefix}/{layout.LOCK}", json.dumps(record).encode())
    return record


@dataclasses.dataclass
class Published:
    """One store's whole run into ``bucket/v1``, through the store's counting proxy."""
    store: object
    bucket: str
    code: int
    output: str
    seconds: float
    counts: dict
    stale: dict                 # the lease of another host's run the output held before
    log: list                   # [method, path, operation, status] of every request the proxy saw


def publish_on(request, store_name: str, log: Path) -> Published:
    store = request.getfixturevalue(f"{store_name}_corpus")
    proxy = request.getfixturevalue(f"{store_name}_proxy")
    if store_name == "s3":
        store = store.through(proxy)             # every request counted (the GCS store is behind its proxy)
    bucket = unique_bucket("published")
    store.make_bucket(bucket)
    stale = plant_stale_lease(store, bucket, "v1")
    proxy.set_faults([])
    proxy.reset()
    started = time.monotonic()
    code, output = run(store, ["--input", store.url(CORPUS_BUCKET, "segmentation/manifest.csv"),
                               "--output", store.url(bucket, "v1"), *COMMON], log)
    return Published(store, bucket, code, output, time.monotonic() - started, proxy.counts(), stale, proxy.log())


@pytest.fixture(scope="module")
def published(request, tmp_path_factory):
    """``published(store_name)``: that store's whole run, made once per module (the kill test starts from it)."""
    runs = {}

    def get(store_name: str) -> Published:
        if store_name not in runs:
            log = tmp_path_factory.mktemp(f"published-{store_name}") / "run.log"
            runs[store_name] = publish_on(request, store_name, log)
        return runs[store_name]
    return get


# --------------------------------------------------------------------------
# The whole run on each store
# --------------------------------------------------------------------------
@pytest.mark.parametrize("store_name", ["s3", "gcs"])
def test_the_whole_run_on_each_store_equals_the_local_run(store_name, local_run, published, tmp_path,
                                                          object_corpus):
    result = published(store_name)
    store, bucket, output = result.store, result.bucket, result.output
    assert result.code == 0, output[-6000:]
    stale = result.stale
    assert (f"taking over the stale lock of run {stale['run_id']} (host {OTHER_HOST}, pid 4242, started "
            f"{stale['started']}): no heartbeat for 36") in output

    local_out, local_seconds = local_run
    copy = download(store, bucket, "v1", tmp_path / "copy")
    assert_same_outputs(local_out, copy, input_roots=corpus_roots(object_corpus, store))
    manifest = manifest_of(copy)
    assert manifest["options"]["output"] == store.url(bucket, "v1")
    # manifest.json lists every object of its version folder, and nothing else is left beside it but the
    # version's copy of that manifest (garbage collection reads it)
    assert published_files(store, bucket, "v1", manifest) == sorted([*manifest["files"], "manifest.json"])
    assert lock_record(store, bucket, "v1") is None
    assert versions(store, bucket, "v1") == [manifest["run_id"]]
    if store_name == "s3":
        assert store.incomplete_uploads(bucket) == []
    verified = verify_cli(store, store.url(bucket, "v1"))
    assert verified.returncode == 0, verified.stderr[-3000:]
    assert verified.stdout.startswith(f"OK: {len(manifest['files'])} files")
    # every record was validated afresh and written from validation's spill in OUTPUT/cache: one ranged GET of
    # its entry each (io/streams.read_ranges), and the commit collected the spill
    assert len(spill_reads(result.log)) == written_records(manifest)
    assert not [key for key in store.keys(bucket) if key.endswith(spill_store.PART_SPILL_SUFFIX)]
    inputs = manifest["counts"]["discovered"]
    counts = result.counts
    print(f"\n{store_name}: {result.seconds:.1f} s (local {local_seconds:.1f} s); requests "
          f"{dict(sorted(counts.items()))}; per input ({inputs}): "
          + ", ".join(f"{kind} {number / inputs:.2f}" for kind, number in sorted(counts.items())))


def spill_reads(log: list) -> list:
    """The reads of validation's spill files (S3 GET, GCS media GET) in a proxy's log."""
    return [entry for entry in log if entry[2] in ("GET", "GET_MEDIA")
            and urllib.parse.unquote(entry[1].split("?")[0]).endswith(spill_store.PART_SPILL_SUFFIX)]


def written_records(manifest: dict) -> int:
    return sum(shard["records"] for entry in manifest["splits"].values() for shard in entry["shards"])


def test_s3_reads_of_the_corpus_match_the_request_model_of_plan(published, local_run):
    """--plan's request estimate (core/plan.object_store_requests, docs/runners.md "Cost per TB") against the reads the
    proxy counted on the corpus's image and mask objects during the whole S3 run."""
    from beam_pipeline.core.plan import object_store_requests
    result = published("s3")
    assert result.code == 0, result.output[-6000:]
    listing = "/" + CORPUS_BUCKET + "/segmentation/manifest.csv"
    reads = [entry for entry in result.log if entry[1].startswith(f"/{CORPUS_BUCKET}/") and entry[1] != listing
             and entry[2] in ("GET", "HEAD")]
    manifest = manifest_of(local_run[0])
    counts = manifest["counts"]
    model = object_store_requests(
        files_per_pair=2, validated_pairs=counts["discovered"] - counts["filtered_out"]["total"],
        written_records=written_records(manifest),
        listed_objects=0, shard_sizes=[], input_bytes=1, output_scheme="s3://", cache=True)
    # The writer reads validation's spill in the cache (OUTPUT/cache, in the output's bucket), not the corpus.
    corpus = model["validation_gets"] + model["reread_gets"]
    spilled = spill_reads(result.log)
    print(f"\ncorpus reads counted {len(reads)}, modelled {corpus} "
          f"({model['validation_gets']} validating, {model['reread_gets']} re-reading); reads of the spill "
          f"counted {len(spilled)}, modelled {model['spill_gets']}")
    assert model["reread_gets"] == 0
    # The model counts 2 requests per file opened; broken inputs open fewer (a missing image skips its mask).
    assert abs(len(reads) - corpus) <= 0.1 * corpus, (len(reads), model)
    assert abs(len(spilled) - model["spill_gets"]) <= 0.1 * model["spill_gets"], (len(spilled), model)


def test_gcs_a_live_lock_holder_refuses_a_second_run_and_a_killed_ones_is_taken_over(gcs_corpus, tmp_path):
    """On S3 a running pipeline is the holder (the killed --overwrite test below); here a process holding the lock."""
    store = gcs_corpus
    bucket = unique_bucket("locked")
    store.make_bucket(bucket)
    output = store.url(bucket, "v1")
    with open(tmp_path / "holder.log", "w") as holder_log:
        holder = subprocess.Popen([sys.executable, "-c", HOLD, output, "20261201T010000Z-0000aaaa", *store.flags()],
                                  cwd=ROOT, env=subprocess_env(store), stdout=subprocess.PIPE, stderr=holder_log,
                                  text=True, start_new_session=True)
    try:
        assert holder.stdout.readline().strip() == "HELD"
        code, text = run(store, ["--input", store.url(CORPUS_BUCKET, "segmentation/manifest.csv"), "--output", output,
                                 *COMMON], tmp_path / "second.log")
        assert code == 2, text[-4000:]
        assert (f"error: run 20261201T010000Z-0000aaaa (host {os.uname().nodename}, pid {holder.pid}, started 20"
                in text), text[-4000:]
        assert "holds this output: its process is running on this host" in text
        assert store.keys(bucket) == ["v1/_lock.json"]            # the refused run wrote nothing
    finally:
        kill_group(holder)
    # The holder died without releasing: the next run on this host takes its lock over at once.
    taker = subprocess.run([sys.executable, "-c", TAKE, output, "20261201T010001Z-0000bbbb", *store.flags()],
                           cwd=ROOT, env=subprocess_env(store), capture_output=True, text=True, timeout=120)
    assert taker.returncode == 0, taker.stderr[-3000:]
    assert taker.stdout.startswith("taking over the stale lock of run 20261201T010000Z-0000aaaa (host "), taker.stdout
    assert f"its process {holder.pid} no longer runs on this host" in taker.stdout
    assert store.keys(bucket) == []                                # and released it


@pytest.fixture(scope="module")
def delta_run(object_corpus, tmp_path_factory):
    """(the changed listing, a fresh local run on it): tests/deltas.py's D + Δ − R of the corpus, one pair moved to
    another split, and the reference every store's re-run on it must hold."""
    delta = write_delta(object_corpus / "segmentation")
    fresh = tmp_path_factory.mktemp("delta-fresh") / "out"
    run_cli("--input", delta.listing, "--output", fresh, *COMMON)
    return delta, fresh


def rerun_on_the_changed_listing(store, bucket, delta_run, object_corpus, tmp_path):
    """The published output's command again with --overwrite on the changed listing (uploaded beside the corpus,
    with its new files), then the checks: the version keeps the first run's shards, validates and writes only what
    is new, deletes what is gone, and holds the fresh local run's records: the same SHA-256 per split, stats.json
    byte for byte, the same counts and balance; ``verify`` passes."""
    delta, fresh = delta_run
    folder = object_corpus / "segmentation"
    for relative in [*delta.added, delta.listing.name]:
        store.put(CORPUS_BUCKET, f"segmentation/{relative}", (folder / relative).read_bytes())
    args = ["--input", store.url(CORPUS_BUCKET, f"segmentation/{delta.listing.name}"), "--output",
            store.url(bucket, "v1"), "--overwrite", *COMMON, *THREADS]
    code, text = run(store, args, tmp_path / "rerun.log")
    assert code == 0, text[-6000:]
    copy = download(store, bucket, "v1", tmp_path / "copy")
    manifest, reference = (json.loads((out / "manifest.json").read_text()) for out in (copy, fresh))
    assert live_records(copy) == live_records(fresh)
    assert (dataset_dir(copy) / "stats.json").read_bytes() == (dataset_dir(fresh) / "stats.json").read_bytes()
    assert manifest["counts"] == reference["counts"] and manifest["balance"] == reference["balance"]
    lineage = manifest["lineage"]
    # the verdict cache beside the output, on the store, used on each object's version (S3: ETag; GCS:
    # generation and CRC32C): only the new pairs and the rejects the cache never keeps are validated again
    assert lineage["from_cache"] > 0 and lineage["rehashed"] == 0
    assert lineage["validated"] == uncacheable(manifest) + len(delta.added) // 2
    assert lineage["cache"]["folder"].startswith(store.url(bucket, "v1/cache/"))
    assert f"{lineage['from_cache']} from the verdict cache" in text
    assert lineage["reused_runs"] == [lineage["parent_run_id"]]
    new, gone = records_changed(copy)
    assert new > 2 and gone > 2                  # Δ and the moved pair; R and the moved pair
    assert (lineage["records"]["written"], lineage["records"]["deleted"]) == (new, gone)
    verified = verify_cli(store, store.url(bucket, "v1"))
    assert verified.returncode == 0, verified.stderr[-3000:]
    # The same command once more: nothing changed, so nothing is published (every object's version looked at on the
    # store, the corpus's several at once: launcher/rerun/unchanged.py), and the version stays the one above.
    published = store.get(bucket, "v1/manifest.json")
    code, text = run(store, args, tmp_path / "unchanged.log")
    assert code == 0 and "unchanged: nothing changed since this version of " in text, text[-6000:]
    assert f"the files of its {lineage['validated'] + lineage['from_cache']} pairs are as they were" in text
    assert store.get(bucket, "v1/manifest.json") == published


def rerun_on_a_damaged_version(store, bucket, delta_run, tmp_path):
    """The published version damaged on the store (one kept shard's object deleted, another's rewritten with a
    flipped byte: a new ETag or generation and CRC32C, the same size), and the same command again: both shards are
    found at launch and not kept, their records are written again from their sources, and the version holds the
    fresh local run's records and passes ``verify`` (issue 45)."""
    delta, fresh = delta_run
    manifest = json.loads(store.get(bucket, "v1/manifest.json"))
    train = sorted(shard["path"] for shard in manifest["splits"]["train"]["shards"])
    gone, flipped = train[0], train[-1]
    store.delete(bucket, f"v1/{gone}")
    data = bytearray(store.get(bucket, f"v1/{flipped}"))
    data[len(data) // 2] ^= 0x01
    store.put(bucket, f"v1/{flipped}", bytes(data))
    code, text = run(store, ["--input", store.url(CORPUS_BUCKET, f"segmentation/{delta.listing.name}"),
                             "--output", store.url(bucket, "v1"), "--overwrite", *COMMON, *THREADS],
                     tmp_path / "damaged.log")
    assert code == 0 and "Traceback" not in text, text[-6000:]
    copy = download(store, bucket, "v1", tmp_path / "damaged-copy")
    lineage = json.loads((copy / "manifest.json").read_text())["lineage"]
    assert sorted(d["shard"] for d in lineage["damaged_parent"]) == sorted([gone, flipped])
    assert "is missing" in text and "has other bytes" in text
    assert lineage["parent_check"]["hashed"] == 1                   # the flipped one: its version moved
    assert live_records(copy) == live_records(fresh)
    verified = verify_cli(store, store.url(bucket, "v1"))
    assert verified.returncode == 0, verified.stderr[-3000:]


def test_gcs_rerun_on_a_changed_listing_writes_the_change_and_holds_a_fresh_runs_records(
        gcs_corpus, published, delta_run, object_corpus, tmp_path):
    result = published("gcs")
    assert result.code == 0, result.output[-6000:]
    rerun_on_the_changed_listing(gcs_corpus, result.bucket, delta_run, object_corpus, tmp_path)
    rerun_on_a_damaged_version(gcs_corpus, result.bucket, delta_run, tmp_path)


HOLD = r"""
import sys, time
from apache_beam.options.pipeline_options import PipelineOptions
from beam_pipeline.io import stores
lock = stores.store_for(sys.argv[1], PipelineOptions(sys.argv[3:])).lock()
lock.acquire(sys.argv[2])
print("HELD", flush=True)
time.sleep(600)
"""

TAKE = r"""
import sys
from apache_beam.options.pipeline_options import PipelineOptions
from beam_pipeline.io import stores
lock = stores.store_for(sys.argv[1], PipelineOptions(sys.argv[3:])).lock()
print(lock.acquire(sys.argv[2]), flush=True)
lock.release()
"""


# --------------------------------------------------------------------------
# S3: a killed --overwrite run, and the recovery that replaces the dataset
# --------------------------------------------------------------------------
def test_s3_killed_overwrite_keeps_the_dataset_and_the_next_run_replaces_it(
        s3_store, published, local_run, object_corpus, tmp_path, monkeypatch):
    result = published("s3")
    assert result.code == 0, result.output[-6000:]
    bucket = result.bucket
    first = json.loads(s3_store.get(bucket, "v1/manifest.json"))
    store = s3_store                                # straight to the server: the proxy only adds latency here
    output = store.url(bucket, "v1")
    # --compact all: the same input would otherwise keep every record of the version before and write no shard
    args = ["--input", store.url(CORPUS_BUCKET, "segmentation/manifest.csv"), "--output", output, "--overwrite",
            "--compact", "all", *COMMON, *THREADS]
    use_store(store, monkeypatch)
    from beam_pipeline.verify import verify
    before = store.get(bucket, "v1/manifest.json")

    # 1. Killed with a shard half written: a second run meanwhile is refused, naming it.
    killed_log = tmp_path / "killed.log"
    killed = start(store, args, killed_log, pause_at=phases.WRITE_SHARD)
    try:
        wait_paused(killed, killed_log)
        holder = lock_record(store, bucket, "v1")
        assert holder["pid"] == killed.pid
        code, text = run(store, args, tmp_path / "concurrent.log")
        assert code == 2 and f"error: run {holder['run_id']} (host " in text, text[-4000:]
        unfinished = store.incomplete_uploads(bucket, "v1/")
    finally:
        kill_group(killed)
    assert store.get(bucket, "v1/manifest.json") == before      # what a reader opens first: unchanged
    assert verify(output).ok
    assert lock_record(store, bucket, "v1")["run_id"] == holder["run_id"]      # SIGKILL leaves the lock
    assert set(versions(store, bucket, "v1")) == {first["run_id"], holder["run_id"]}
    assert unfinished, "the killed run had a shard's multipart upload open"

    # 2. The next --overwrite run: the old dataset stays readable until its commit.
    next_log = tmp_path / "next.log"
    following = start(store, args, next_log, pause_at=phases.PUBLISH_MANIFEST)
    try:
        wait_paused(following, next_log)
        assert store.get(bucket, "v1/manifest.json") == before
        assert verify(output).ok
        assert holder["run_id"] not in versions(store, bucket, "v1")       # the killed run's version is gone
        go_on(next_log)
        text = finish(following, next_log)
    finally:
        if following.poll() is None:
            kill_group(following)
    assert following.returncode == 0, text[-6000:]
    assert f"taking over the stale lock of run {holder['run_id']} (host " in text
    copy = download(store, bucket, "v1", tmp_path / "copy")
    manifest = manifest_of(copy)
    assert manifest["run_id"] not in (first["run_id"], holder["run_id"])
    assert manifest["retained_run_ids"] == [first["run_id"]]              # kept for readers mid-epoch
    # The verdicts of the first run, in OUTPUT/cache on S3, reused on their objects' ETags: only the pairs
    # whose files cannot be kept (missing ones) are validated again.
    assert manifest["lineage"]["from_cache"] > 0 and manifest["lineage"]["rehashed"] == 0
    assert manifest["lineage"]["validated"] == uncacheable(manifest)
    assert manifest["lineage"]["cache"]["folder"].startswith(store.url(bucket, "v1/cache/"))
    assert versions(store, bucket, "v1") == sorted([first["run_id"], manifest["run_id"]])
    assert_same_outputs(local_run[0], copy, input_roots=corpus_roots(object_corpus, store))
    assert lock_record(store, bucket, "v1") is None
    assert store.incomplete_uploads(bucket) == []
    assert verify(output).ok
    FileSystems.set_options(None)


# --------------------------------------------------------------------------
# S3: a listing of two pages, read through a proxy that refuses some requests
# --------------------------------------------------------------------------
def test_s3_paired_folders_over_two_listing_pages_with_transient_errors(
        s3_corpus, s3_faults, object_corpus, tmp_path):
    import concurrent.futures
    bucket = unique_bucket("paged")
    s3_corpus.make_bucket(bucket)
    s3_corpus.upload_tree(object_corpus / "segmentation", bucket, "set")
    # Keys under images/ that sort before the images: a listing that stopped after one page would miss them.
    fillers = [f"set/images/_filler/{i:04d}.txt" for i in range(FILLERS)]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda key: s3_corpus.put(bucket, key, b"x"), fillers))
    local_out = tmp_path / "local"
    run_cli("--input", object_corpus / "segmentation", "--output", local_out, *FOLDER_INPUT, *COMMON)

    store = s3_corpus.through(s3_faults)
    s3_faults.set_faults([
        {"kind": "GET", "every": 3, "status": 503, "code": "SlowDown", "limit": 15},
        {"kind": "HEAD", "every": 4, "status": 503, "code": "SlowDown", "limit": 10},
        {"kind": "LIST", "every": 2, "status": 500, "code": "InternalError", "limit": 3},
        {"kind": "GET", "every": 7, "mode": "reset", "limit": 4},
        {"kind": "UPLOAD_PART", "every": 2, "status": 503, "code": "SlowDown", "limit": 3},
        {"kind": "PUT", "every": 2, "status": 503, "code": "SlowDown", "limit": 1},
    ])
    code, text = run(store, ["--input", store.url(bucket, "set"), "--output", store.url(bucket, "out"),
                             *FOLDER_INPUT, *COMMON, *THREADS], tmp_path / "run.log")
    injected = s3_faults.faults_injected()
    counts = s3_faults.counts()
    assert code == 0, text[-6000:]
    copy = download(s3_corpus, bucket, "out", tmp_path / "copy")
    assert_same_outputs(local_out, copy, input_roots=(str(object_corpus / "segmentation"), store.url(bucket, "set")))
    assert all(injected[kind] > 0 for kind in ("GET", "HEAD", "LIST", "UPLOAD_PART", "PUT")), injected
    assert counts["LIST"] >= 2 + injected["LIST"]                 # the images' listing: two pages
    print(f"\nfaults injected {injected}; requests {dict(sorted(counts.items()))}")


# --------------------------------------------------------------------------
# S3: a re-run on a changed listing (last: it replaces the published S3 version the kill test recovered)
# --------------------------------------------------------------------------
def test_s3_rerun_on_a_changed_listing_writes_the_change_and_holds_a_fresh_runs_records(
        s3_corpus, published, delta_run, object_corpus, tmp_path):
    result = published("s3")
    assert result.code == 0, result.output[-6000:]
    rerun_on_the_changed_listing(s3_corpus, result.bucket, delta_run, object_corpus, tmp_path)
    rerun_on_a_damaged_version(s3_corpus, result.bucket, delta_run, tmp_path)
