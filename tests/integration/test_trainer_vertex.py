"""Vertex AI's layout: one ``chief`` (worker pool 0) and one ``worker`` (pool 1), as two `python -m trainer` processes.

Vertex AI gives every replica the same cluster in TF_CONFIG, with pool 0 as the ``chief`` job and pool 1
as the ``worker`` job, and runs the same command on each. Here both run on localhost ports with
``--strategy auto`` on the fixture shards: they must train together under MultiWorkerMirrored (same
weights bit for bit), and only the chief may write the shared outputs in --job_dir (one export).
"""

import json
import time

import numpy as np
import pytest

from test_trainer_multiworker import h5_arrays, run_cluster

TASKS = (("chief", 0), ("worker", 0))
ARGS = ["--strategy", "auto", "--epochs", "1", "--steps_per_epoch", "3", "--global_batch_size", "4",
        "--crop", "32,32", "--depth", "1", "--width", "4", "--validation_steps", "1", "--learning_rate", "0.01",
        "--shuffle_buffer", "8"]


@pytest.fixture(scope="module")
def vertex_run(segmentation_run, tmp_path_factory):
    out, _ = segmentation_run
    job_dir = tmp_path_factory.mktemp("vertex_job")
    started = time.monotonic()
    codes, logs = run_cluster(TASKS, ["--data", str(out), "--job_dir", str(job_dir), *ARGS], job_dir.parent,
                              environment="cloud")
    seconds = time.monotonic() - started
    print(f"chief and worker took {seconds:.0f} s")
    for (job, index), code, log in zip(TASKS, codes, logs):
        assert code == 0, f"{job}:{index} exit {code} after {seconds:.0f} s\n{log[-5000:]}"
    return out, job_dir, logs


def summary(log):
    return [line for line in log.splitlines() if line.startswith("trained ")][-1]


def test_chief_and_worker_train_as_one_multi_worker_run(vertex_run):
    out, job_dir, (chief_log, worker_log) = vertex_run
    chief, worker = summary(chief_log), summary(worker_log)
    assert "under auto: TF_CONFIG lists 1 chief and 1 worker;" in chief
    assert "under auto: TF_CONFIG lists 1 chief and 1 worker;" in worker
    # The loss is reduced over both tasks, so both report the same numbers.
    assert chief.split("; ")[1] == worker.split("; ")[1]
    assert chief.endswith(f"exported to {job_dir / 'export'}")
    assert worker.endswith(f"wrote to {job_dir / 'workertemp_0'} (not the chief)")
    # Two input pipelines, one per task, each reading its own train shards.
    parts = [json.loads((folder / "input_shards.json").read_text())["train"][0]
             for folder in (job_dir, job_dir / "workertemp_0")]
    assert sorted(part["pipeline_id"] for part in parts) == [0, 1]
    assert all(part["num_pipelines"] == 2 for part in parts)
    assert not set(parts[0]["files"]) & set(parts[1]["files"])


def test_exactly_one_export_and_only_the_chief_writes_the_job_dir(vertex_run):
    _, job_dir, _ = vertex_run
    exports = sorted(path.relative_to(job_dir).as_posix() for path in job_dir.rglob("saved_model.pb"))
    assert exports == ["export/saved_model.pb"]
    # The worker's checkpoints, logs and backup go to its own folder, named by its task index.
    assert sorted(path.name for path in job_dir.iterdir() if path.name.startswith("workertemp_")) == ["workertemp_0"]
    for folder in (job_dir, job_dir / "workertemp_0"):
        assert (folder / "training.csv").read_text().startswith("epoch")
        assert (folder / "checkpoints" / "epoch-0001.weights.h5").exists()


def test_chief_and_worker_end_with_identical_weights(vertex_run):
    _, job_dir, _ = vertex_run
    chief, worker = (h5_arrays(folder / "checkpoints" / "epoch-0001.weights.h5")
                     for folder in (job_dir, job_dir / "workertemp_0"))
    assert chief.keys() == worker.keys() and len(chief) > 20
    different = [name for name in chief if not np.array_equal(chief[name], worker[name])]
    assert not different, different
    # And they trained, in step: the optimizer's step counter (Keras saves it first) is at --steps_per_epoch.
    assert int(chief["optimizer/vars/0"]) == int(worker["optimizer/vars/0"]) == 3
