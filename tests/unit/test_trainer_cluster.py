"""The strategy factory's decisions on the TF_CONFIG layouts that Vertex AI, Kubernetes and people write.

Vertex AI puts worker pool 0 (one replica) in TF_CONFIG as ``chief`` and pool 1 as ``worker``; a cluster
written by hand often has workers only. Every process that trains (chief and workers) must take part in
one MultiWorkerMirrored run, and exactly one of them, the chief (worker 0 when there is no chief), owns
--job_dir. The expected values below are written out by hand from that rule.
"""

import json

import pytest
import tensorflow as tf

from trainer.training.cluster import Cluster, StrategyError, cluster_from_tf_config, pick_strategy
from trainer.training.strategy import choose_strategy, worker_dir


def tf_config(cluster, task_type=None, index=0, **extra):
    config = {"cluster": cluster, **extra}
    if task_type:
        config["task"] = {"type": task_type, "index": index}
    return json.dumps(config)


VERTEX_TWO = {"chief": ["cmle-training-workerpool0-ab-0:2222"], "worker": ["cmle-training-workerpool1-ab-0:2222"]}
WORKERS_TWO = {"worker": ["10.0.0.2:2222", "10.0.0.3:2222"]}
VERTEX_FOUR = {"chief": ["c:2222"], "worker": ["w0:2222", "w1:2222", "w2:2222"]}


# (TF_CONFIG, tasks that train, description, this process is the chief, auto's choice and reason on a CPU machine)
LAYOUTS = [
    pytest.param(None, 0, "no tasks", True, "default", "auto: 0 GPU(s), no TPU, one worker: default strategy",
                 id="no TF_CONFIG"),
    pytest.param("", 0, "no tasks", True, "default", "auto: 0 GPU(s), no TPU, one worker: default strategy",
                 id="empty TF_CONFIG"),
    pytest.param(tf_config({"chief": ["c:2222"]}, "chief", 0, environment="cloud", job={"jobName": "x"}),
                 1, "1 chief", True, "default", "auto: 0 GPU(s), no TPU, one worker: default strategy",
                 id="Vertex, one replica"),
    pytest.param(tf_config({"worker": ["w:2222"]}, "worker", 0), 1, "1 worker", True, "default",
                 "auto: 0 GPU(s), no TPU, one worker: default strategy", id="one worker"),
    pytest.param(tf_config(VERTEX_TWO, "chief", 0, environment="cloud"), 2, "1 chief and 1 worker", True,
                 "multi_worker", "auto: TF_CONFIG lists 1 chief and 1 worker", id="Vertex chief of chief+worker"),
    pytest.param(tf_config(VERTEX_TWO, "worker", 0, environment="cloud"), 2, "1 chief and 1 worker", False,
                 "multi_worker", "auto: TF_CONFIG lists 1 chief and 1 worker", id="Vertex worker 0 of chief+worker"),
    pytest.param(tf_config(VERTEX_FOUR, "worker", 2), 4, "1 chief and 3 workers", False,
                 "multi_worker", "auto: TF_CONFIG lists 1 chief and 3 workers", id="Vertex worker 2 of 1+3"),
    pytest.param(tf_config(WORKERS_TWO, "worker", 0), 2, "2 workers", True,
                 "multi_worker", "auto: TF_CONFIG lists 2 workers", id="worker 0 of 2 workers is the chief"),
    pytest.param(tf_config(WORKERS_TWO, "worker", 1), 2, "2 workers", False,
                 "multi_worker", "auto: TF_CONFIG lists 2 workers", id="worker 1 of 2 workers"),
]


@pytest.mark.parametrize("text,tasks,description,chief,kind,why", LAYOUTS)
def test_layouts(text, tasks, description, chief, kind, why):
    cluster = cluster_from_tf_config(text)
    assert (cluster.tasks, cluster.describe(), cluster.is_chief) == (tasks, description, chief)
    assert pick_strategy("auto", cluster, gpus=0) == (kind, why)


def test_a_cluster_of_several_tasks_wins_over_local_gpus():
    cluster = cluster_from_tf_config(tf_config(VERTEX_TWO, "chief", 0))
    assert pick_strategy("auto", cluster, gpus=4) == ("multi_worker", "auto: TF_CONFIG lists 1 chief and 1 worker")
    assert pick_strategy("auto", Cluster(), gpus=4) == ("mirrored", "auto: 4 GPUs")
    assert pick_strategy("auto", cluster_from_tf_config(tf_config({"chief": ["c:1"]}, "chief")), gpus=2) == \
        ("mirrored", "auto: 2 GPUs")


@pytest.mark.parametrize("name,cluster,expected", [
    ("multi_worker", cluster_from_tf_config(tf_config(VERTEX_TWO, "worker", 0)),
     ("multi_worker", "1 chief and 1 worker in TF_CONFIG (asked for)")),
    ("multi_worker", cluster_from_tf_config(tf_config({"worker": ["w:1"]}, "worker", 0)),
     ("multi_worker", "1 worker in TF_CONFIG (asked for)")),
    ("mirrored", Cluster(), ("mirrored", "MirroredStrategy over local devices (asked for)")),
    ("default", cluster_from_tf_config(tf_config({"chief": ["c:1"]}, "chief")),
     ("default", "default strategy (asked for)")),
])
def test_strategies_asked_for(name, cluster, expected):
    assert pick_strategy(name, cluster, gpus=0) == expected


@pytest.mark.parametrize("name", ["default", "mirrored"])
def test_a_single_machine_strategy_in_a_cluster_is_refused(name):
    # Each task would train alone and all would write the same --job_dir: the bug this guards against.
    cluster = cluster_from_tf_config(tf_config(VERTEX_TWO, "worker", 0))
    with pytest.raises(StrategyError) as error:
        pick_strategy(name, cluster, gpus=0)
    assert str(error.value) == (f"--strategy {name}: TF_CONFIG lists 1 chief and 1 worker, which would each train "
                                "alone and write the same --job_dir; use --strategy auto or multi_worker")


def test_multi_worker_without_a_cluster_is_refused():
    with pytest.raises(StrategyError, match="needs TF_CONFIG with a cluster of workers"):
        pick_strategy("multi_worker", Cluster(), gpus=0)


@pytest.mark.parametrize("text,message", [
    ("{not json", "TF_CONFIG is not valid JSON"),
    ('["worker"]', 'TF_CONFIG has no "cluster" object'),
    ('{"task": {"type": "worker", "index": 0}}', 'TF_CONFIG has no "cluster" object'),
    (tf_config({"chief": ["c:1"], "worker": ["w:1"], "ps": ["p:1"]}, "chief"),
     "TF_CONFIG lists parameter servers (ps): this trainer trains with MultiWorkerMirrored over the chief and "
     "workers only; remove the parameter-server pool"),
    (tf_config({"chief": ["c:1", "d:1"]}, "chief"), "TF_CONFIG lists 2 chief tasks; a cluster has at most one"),
    (tf_config({"master": ["m:1"], "worker": ["w:1"]}, "master"),
     "TF_CONFIG lists job(s) master: this trainer knows chief and worker only"),
    (tf_config(VERTEX_TWO, "evaluator", 0),
     "TF_CONFIG task type 'evaluator': this trainer runs chief and worker tasks only (validation runs inside fit; "
     "there is no side-car evaluator)"),
    (tf_config(VERTEX_TWO, "worker", 1), "TF_CONFIG task worker:1 is not in its cluster (1 worker task(s))"),
    (tf_config(VERTEX_TWO, "chief", 1), "TF_CONFIG task chief:1 is not in its cluster (1 chief task(s))"),
    (tf_config(WORKERS_TWO), 'TF_CONFIG lists a cluster of several tasks but no "task": which one is this?'),
])
def test_tf_config_this_trainer_cannot_run_in_is_one_clear_line(text, message):
    with pytest.raises(StrategyError) as error:
        cluster_from_tf_config(text)
    assert str(error.value) == message


@pytest.mark.parametrize("name", ["default", "mirrored", "tpu"])
def test_choose_strategy_refuses_before_building_anything(monkeypatch, name):
    monkeypatch.setenv("TF_CONFIG", tf_config(VERTEX_TWO, "chief", 0))
    with pytest.raises(StrategyError, match=r"TF_CONFIG lists 1 chief and 1 worker, which would each train alone"):
        choose_strategy(name, tpu="grpc://127.0.0.1:1")


def test_a_bad_tf_config_stops_choose_strategy(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", tf_config(VERTEX_TWO, "evaluator", 0))
    with pytest.raises(StrategyError, match="task type 'evaluator'"):
        choose_strategy("auto")


def test_outside_a_cluster_this_process_writes_the_job_dir(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    strategy = tf.distribute.get_strategy()
    assert worker_dir("gs://bucket/jobs/unet-001", strategy) == "gs://bucket/jobs/unet-001"
