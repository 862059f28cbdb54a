"""Multi-worker training: two `python -m trainer` processes on localhost under MultiWorkerMirroredStrategy.

Each worker gets TF_CONFIG for the same 2-worker cluster, trains a few steps on the fixture shards with
`--strategy auto`, records which files its input pipelines read (input_shards.json) and saves its weights
(the chief into --job_dir, worker 1 into job_dir/workertemp_1).
"""

import json
import os
import socket
import subprocess
import sys
import time

import h5py
import numpy as np
import pytest

from conftest import NUM_CLASSES, ROOT

WORKERS = 2
TIMEOUT_S = 300
DEPTH, WIDTH, STEPS = 1, 4, 3


def free_ports(count):
    """Ports the OS gives out now; all sockets are held open together, so the ports differ."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("localhost", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def run_cluster(tasks, args, log_dir, environment=None):
    """One `python -m trainer` per (job, index) of one TF_CONFIG cluster; a task that fails or hangs gets the
    others killed. ``environment`` is TF_CONFIG's (Vertex AI sets "cloud"). Returns the exit codes and the
    logs, in the order of ``tasks``.
    """
    addresses = iter(f"localhost:{port}" for port in free_ports(len(tasks)))
    cluster = {}
    for job, _ in tasks:
        cluster.setdefault(job, []).append(next(addresses))
    processes, logs = [], []
    try:
        for job, index in tasks:
            tf_config = {"cluster": cluster, "task": {"type": job, "index": index}}
            if environment:
                tf_config["environment"] = environment
            env = dict(os.environ, TF_CONFIG=json.dumps(tf_config),
                       CUDA_VISIBLE_DEVICES="-1",             # CPU only, and few threads on a shared machine.
                       TF_NUM_INTRAOP_THREADS="1", TF_NUM_INTEROP_THREADS="2", OMP_NUM_THREADS="1")
            logs.append(log_dir / f"{job}{index}.log")
            with open(logs[-1], "w") as log:
                processes.append(subprocess.Popen([sys.executable, "-m", "trainer", *args], cwd=ROOT, env=env,
                                                  stdout=log, stderr=subprocess.STDOUT))
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            codes = [process.poll() for process in processes]
            if all(code is not None for code in codes) or any(code not in (None, 0) for code in codes):
                break
            time.sleep(0.5)
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
            process.wait()
    return [process.returncode for process in processes], [log.read_text() for log in logs]


@pytest.fixture(scope="module")
def two_workers(segmentation_run, tmp_path_factory):
    out, _ = segmentation_run
    job_dir = tmp_path_factory.mktemp("mwms_job")
    args = ["--data", str(out), "--job_dir", str(job_dir), "--strategy", "auto", "--epochs", "1",
            "--steps_per_epoch", str(STEPS), "--global_batch_size", "4", "--crop", "32,32", "--depth", str(DEPTH),
            "--width", str(WIDTH), "--validation_steps", "1", "--learning_rate", "0.01", "--shuffle_buffer", "8"]
    started = time.monotonic()
    codes, logs = run_cluster([("worker", index) for index in range(WORKERS)], args, job_dir.parent)
    seconds = time.monotonic() - started
    print(f"two workers took {seconds:.0f} s")
    for index, (code, log) in enumerate(zip(codes, logs)):
        assert code == 0, f"worker {index} exit {code} after {seconds:.0f} s\n{log[-5000:]}"
    return out, job_dir, logs


def worker_dirs(job_dir):
    return [job_dir] + [job_dir / f"workertemp_{index}" for index in range(1, WORKERS)]


def test_both_workers_train_together_under_multi_worker_mirrored(two_workers):
    _, job_dir, logs = two_workers
    summaries = [[line for line in log.splitlines() if line.startswith("trained ")][-1] for log in logs]
    assert all("auto: TF_CONFIG lists 2 workers" in summary for summary in summaries)
    # Every worker re-estimates the batch norm statistics (a collective); only the chief validates.
    assert all("moving statistics of 6 layers re-estimated on 20 training batches" in log for log in logs)
    assert ["validation after epoch 1" in log for log in logs] == [True, False]
    # The loss is reduced over both workers, so both report the same numbers.
    assert len({summary.split("; ")[1] for summary in summaries}) == 1
    assert (job_dir / "export" / "saved_model.pb").exists()
    assert not (job_dir / "workertemp_1" / "export").exists()       # Only the chief's export is kept.
    for folder in worker_dirs(job_dir):
        assert (folder / "training.csv").read_text().startswith("epoch")


def test_each_worker_read_its_own_train_shards(two_workers):
    out, job_dir, _ = two_workers
    manifest = json.loads((out / "manifest.json").read_text())
    train_shards = {str(out / shard["path"]) for shard in manifest["splits"]["train"]["shards"]}
    assert len(train_shards) >= WORKERS
    read = [json.loads((folder / "input_shards.json").read_text()) for folder in worker_dirs(job_dir)]
    train = [record["train"] for record in read]
    assert all(len(parts) == 1 for parts in train)                  # One input pipeline per worker.
    train = [parts[0] for parts in train]
    assert sorted(part["pipeline_id"] for part in train) == list(range(WORKERS))
    assert all(part["num_pipelines"] == WORKERS and part["record_shards"] == 1 for part in train)
    files = [set(part["files"]) for part in train]
    assert all(files)
    assert not files[0] & files[1]
    assert files[0] | files[1] == train_shards
    # Validation (whole val images after each epoch) runs on the chief only, over the whole val split.
    val_shards = [str(out / shard["path"]) for shard in manifest["splits"]["val"]["shards"]]
    chief_val, other_val = (record["val"] for record in read)
    assert other_val == []
    assert [(part["files"], part["num_pipelines"]) for part in chief_val] == [(val_shards, 1)]


def h5_arrays(path):
    arrays = {}
    with h5py.File(path, "r") as handle:
        handle.visititems(lambda name, item: arrays.update({name: item[()]}) if isinstance(item, h5py.Dataset)
                          else None)
    return arrays


def test_both_workers_end_with_identical_weights(two_workers):
    _, job_dir, _ = two_workers
    paths = [folder / "checkpoints" / "epoch-0001.weights.h5" for folder in worker_dirs(job_dir)]
    chief, other = (h5_arrays(path) for path in paths)
    # Every saved array, bit for bit: the model's weights (trainable ones and the batch norm moving
    # statistics, which are synchronized across workers) and the optimizer's state.
    assert chief.keys() == other.keys() and len(chief) > 20
    different = [name for name in chief if not np.array_equal(chief[name], other[name])]
    assert not different, different

    # The weights really trained on data: the moving means started at zero.
    from trainer.models.networks import ModelConfig, build_model
    model = build_model("segmentation", NUM_CLASSES,
                        ModelConfig(name="unet", depth=DEPTH, width=WIDTH, sync_batch_norm=True))
    model.load_weights(str(paths[0]))
    moving_means = [weight.numpy() for weight in model.weights if weight.path.endswith("moving_mean")]
    assert len(moving_means) == 6 and all(np.abs(mean).max() > 0 for mean in moving_means)
