"""Strategy selection: the order of `auto` and the error messages."""

import json

import pytest
import tensorflow as tf

import trainer.training.strategy
from trainer.training.strategy import StrategyError, choose_strategy, mixed_precision_policy


def no_tpu(address):
    raise StrategyError(f"--strategy tpu: no TPU reachable at {address or 'local'} (test)")


def test_auto_on_a_cpu_machine_is_the_default_strategy(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    monkeypatch.delenv("TPU_NAME", raising=False)
    strategy, why = choose_strategy("auto", connect_tpu=no_tpu)
    assert strategy is tf.distribute.get_strategy()
    assert why.startswith("auto:") and "default strategy" in why


def test_auto_tries_a_tpu_first_then_falls_back(monkeypatch):
    tried = []

    def record(address):
        tried.append(address)
        raise StrategyError("no TPU")

    monkeypatch.delenv("TF_CONFIG", raising=False)
    strategy, why = choose_strategy("auto", tpu="grpc://10.0.0.2:8470", connect_tpu=record)
    assert tried == ["grpc://10.0.0.2:8470"]
    assert "default strategy" in why


def test_auto_picks_multi_worker_from_tf_config_before_gpus(monkeypatch):
    config = {"cluster": {"worker": ["localhost:1", "localhost:2"]}, "task": {"type": "worker", "index": 0}}
    monkeypatch.setenv("TF_CONFIG", json.dumps(config))
    # Only the decision is checked: building the strategy would start a server.
    monkeypatch.setattr(trainer.training.strategy, "MultiWorkerStrategy", lambda: "multi-worker")
    strategy, why = choose_strategy("auto", connect_tpu=no_tpu)
    assert strategy == "multi-worker" and "2 workers" in why


def test_tpu_asked_for_but_unreachable_is_one_clear_line():
    with pytest.raises(StrategyError) as error:
        choose_strategy("tpu", tpu="grpc://127.0.0.1:1")
    message = str(error.value)
    assert message.startswith("--strategy tpu: no TPU reachable at grpc://127.0.0.1:1")
    assert "\n" not in message


@pytest.mark.parametrize("name,message", [("gpu", "choose one of"), ("multi_worker", "needs TF_CONFIG")])
def test_bad_strategy_names_and_missing_cluster(monkeypatch, name, message):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(StrategyError, match=message):
        choose_strategy(name)


def test_mixed_precision_auto_is_off_on_cpu():
    strategy = tf.distribute.get_strategy()
    assert mixed_precision_policy("auto", strategy) is None
    assert mixed_precision_policy("bfloat16", strategy) == "mixed_bfloat16"
    with pytest.raises(StrategyError):
        mixed_precision_policy("int8", strategy)
