"""The strategy factory's TPU branch, as far as it runs without a TPU.

What is real here: TF's own TPUClusterResolver and TPU initialisation, pointed at this machine's (absent)
TPU chips, at a TensorFlow gRPC server that has no TPU, at an address where nothing listens, and at a
metadata server that does not answer. Which TPU `auto` tries is decided from --tpu, TPU_NAME and the
machine's PCI devices; those are read from hand-made sysfs trees.
"""

import logging
import os
import subprocess
import sys

import pytest
import tensorflow as tf

from conftest import ROOT, free_port, wait_for_port
from trainer.training.cluster import StrategyError, local_tpu_chips, tpu_address
from trainer.training.strategy import choose_strategy

NO_TPU_ENV = ("TPU_NAME", "KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS", "TPU_CONFIG", "TF_CONFIG")


@pytest.fixture
def no_tpu_env(monkeypatch):
    for variable in NO_TPU_ENV:
        monkeypatch.delenv(variable, raising=False)
    if local_tpu_chips():
        pytest.skip("this machine has TPU chips")


def pci_device(root, name, vendor, device):
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "vendor").write_text(vendor + "\n")
    (folder / "device").write_text(device + "\n")


def test_tpu_chips_are_counted_from_pci_vendor_and_device_ids(tmp_path):
    pci = tmp_path / "pci"
    for slot in range(4):                                            # a v4-8 TPU VM: four chips
        pci_device(pci, f"0000:00:0{slot + 4}.0", "0x1ae0", "0x005e")
    pci_device(pci, "0000:00:03.0", "0x1ae0", "0x0042")              # Google's gVNIC network card: no TPU
    pci_device(pci, "0000:00:01.0", "0x8086", "0x7110")              # an Intel bridge
    assert local_tpu_chips(str(pci), str(tmp_path / "dev")) == 4


def test_v5e_chips_without_accel_device_files_are_found(tmp_path):
    pci = tmp_path / "pci"
    pci_device(pci, "0000:00:05.0", "0x1ae0", "0x0063")
    assert local_tpu_chips(str(pci), str(tmp_path / "dev")) == 1


def test_accel_device_files_count_when_no_pci_tree_says_more(tmp_path):
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("accel0", "accel1", "null"):
        (dev / name).write_text("")
    assert local_tpu_chips(str(tmp_path / "no-pci"), str(dev)) == 2
    pci_device(tmp_path / "pci", "0000:00:03.0", "0x1ae0", "0x0042")
    assert local_tpu_chips(str(tmp_path / "pci"), str(tmp_path / "empty")) == 0


@pytest.mark.parametrize("tpu,environ,chips,expected", [
    ("grpc://10.0.0.2:8470", {"TPU_NAME": "other"}, 4, "grpc://10.0.0.2:8470"),   # --tpu wins
    ("local", {}, 0, "local"),
    (None, {"TPU_NAME": "my-tpu"}, 0, ""),                          # TPUClusterResolver reads TPU_NAME itself
    (None, {"KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS": "grpc://10.0.0.3:8470"}, 0, ""),
    (None, {"TPU_NAME": ""}, 4, "local"),                            # an empty variable is no name
    (None, {}, 8, "local"),                                          # this TPU VM's own chips
    (None, {}, 0, None),                                             # nothing to try
])
def test_which_tpu_is_tried(tpu, environ, chips, expected):
    assert tpu_address(tpu, environ, chips) == expected


def test_tpu_asked_for_on_a_machine_without_one(no_tpu_env):
    with pytest.raises(StrategyError) as error:
        choose_strategy("tpu")
    assert str(error.value) == ("--strategy tpu: no TPU here; give --tpu NAME or grpc://HOST:PORT, set TPU_NAME, "
                                "or run on a TPU VM")


@pytest.mark.parametrize("address,detail", [
    ("grpc://localhost", "invalid literal for int()"),
    ("grpc://127.0.0.1:{closed}", "Connection refused"),
])
def test_a_tpu_address_that_does_not_answer_is_one_line(no_tpu_env, address, detail):
    address = address.format(closed=free_port())
    with pytest.raises(StrategyError) as error:
        choose_strategy("tpu", tpu=address)
    message = str(error.value)
    assert message.startswith(f"--strategy tpu: no TPU reachable at {address} (") and detail in message
    assert "\n" not in message


def test_a_tpu_name_needs_the_metadata_server(no_tpu_env, monkeypatch):
    # A TPU name is resolved through GCE's metadata server and the Cloud TPU API; off Google Cloud
    # TF raises urllib's URLError, which must not escape as a traceback.
    monkeypatch.setenv("GCE_METADATA_HOST", f"127.0.0.1:{free_port()}")
    with pytest.raises(StrategyError) as error:
        choose_strategy("tpu", tpu="my-tpu")
    message = str(error.value)
    assert message.startswith("--strategy tpu: no TPU reachable at my-tpu (") and "Connection refused" in message
    assert "\n" not in message


@pytest.mark.parametrize("variable,template", [
    ("TPU_NAME", "grpc://127.0.0.1:{closed}"),
    ("KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS", "grpc://127.0.0.1:{closed},grpc://127.0.0.1:{closed}"),
])
def test_auto_falls_back_when_the_tpu_in_the_environment_does_not_answer(no_tpu_env, monkeypatch, caplog,
                                                                        variable, template):
    # TF itself would wait for minutes on an address where nothing listens.
    address = template.format(closed=free_port())
    monkeypatch.setenv(variable, address)
    with caplog.at_level(logging.INFO, logger="trainer.training.strategy"):
        strategy, why = choose_strategy("auto")
    assert strategy is tf.distribute.get_strategy()
    assert why == "auto: 0 GPU(s), no TPU, one worker: default strategy"
    assert f"auto: no TPU (--strategy tpu: no TPU reachable at {address} (" in caplog.text


def test_auto_in_a_cluster_does_not_try_a_tpu(monkeypatch):
    # Several tasks train under MultiWorkerMirrored; a TPU_NAME left in the environment is not tried (the
    # decision is checked before any strategy is built: building one would start a server).
    monkeypatch.setenv("TPU_NAME", "grpc://127.0.0.1:1")
    monkeypatch.setenv("TF_CONFIG", '{"cluster": {"chief": ["localhost:1"], "worker": ["localhost:2"]}, '
                                    '"task": {"type": "chief", "index": 0}}')
    tried = []

    def connect(address):
        tried.append(address)
        raise StrategyError("not reached")

    with pytest.raises(StrategyError, match="--strategy tpu: TF_CONFIG lists 1 chief and 1 worker"):
        choose_strategy("tpu", connect_tpu=connect)
    assert tried == []


TF_SERVER = """
import sys
import tensorflow as tf
port = int(sys.argv[1])
server = tf.distribute.Server(tf.train.ClusterSpec({"worker": [f"localhost:{port}"]}), job_name="worker",
                              task_index=0, protocol="grpc", start=True)
server.join()
"""


def run_trainer(out, job_dir, *args):
    env = {name: value for name, value in os.environ.items() if name not in NO_TPU_ENV}
    return subprocess.Popen([sys.executable, "-m", "trainer", "--data", str(out), "--job_dir", str(job_dir),
                             "--epochs", "1", "--steps_per_epoch", "1", "--crop", "32,32", *args],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**env, "CUDA_VISIBLE_DEVICES": "-1"})


def test_the_readme_tpu_command_off_a_tpu_and_a_tf_server_without_tpus(segmentation_run, tmp_path):
    """`--strategy tpu --tpu local` (docs/training.md's TPU VM command) here, and a grpc:// TPU address where a real
    TensorFlow server runs but has no TPU: TF's own initialisation fails, and the trainer exits 2 with one line."""
    if local_tpu_chips():
        pytest.skip("this machine has TPU chips")
    out, _ = segmentation_run
    port = free_port()
    server = subprocess.Popen([sys.executable, "-c", TF_SERVER, str(port)], cwd=ROOT, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, env={**os.environ, "CUDA_VISIBLE_DEVICES": "-1"})
    try:
        local = run_trainer(out, tmp_path / "local", "--strategy", "tpu", "--tpu", "local")
        wait_for_port(port, server, timeout=120)
        remote = run_trainer(out, tmp_path / "remote", "--strategy", "tpu", "--tpu", f"grpc://localhost:{port}")
        results = [process.communicate(timeout=300) for process in (local, remote)]
    finally:
        server.kill()
        server.wait()
    # This machine has no TPU chip: said so, in one line, whatever TensorFlow build is installed (the same
    # line under TF 2.20: tests/integration/test_trainer_second_tf.py). The server's TensorFlow has no TPU
    # device: TF's own first line.
    expected = {"local": "error: --strategy tpu: no TPU was found: --tpu local means this machine's TPU chips, and "
                         "it has none (no Google TPU among its PCI devices, no /dev/accel*)",
                f"grpc://localhost:{port}": f"error: --strategy tpu: no TPU reachable at grpc://localhost:{port} "
                                            "(TPUs not found in the cluster."}
    for process, (stdout, stderr), where in zip((local, remote), results, expected):
        errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
        assert process.returncode == 2, stderr[-3000:]
        assert len(errors) == 1 and "Traceback" not in stderr, stderr[-3000:]
        assert errors[0].startswith(expected[where]), errors[0]
    assert not list(tmp_path.rglob("*.weights.h5"))                  # Nothing trained.


def test_a_tensorflow_without_tpu_kernels_is_named(no_tpu_env):
    """What TF itself raises when it is asked for a TPU it has no kernels for (PyPI's tensorflow wheel; on a
    TPU VM, the wrong build) is said in one line, not TF's page-long kernel listing."""
    from trainer.training.strategy import _tpu_detail
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu="local")
    with pytest.raises(tf.errors.OpError) as error:
        tf.tpu.experimental.initialize_tpu_system(resolver)
    assert _tpu_detail(error.value) == (f"TensorFlow {tf.__version__} here is built without TPU support: no kernel "
                                        "for ConfigureDistributedTPU; a TPU VM needs a TPU build of TensorFlow, see "
                                        "docs/training.md")
