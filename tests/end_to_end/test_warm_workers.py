"""The DirectRunner's SDK worker processes, started before the pipeline is built (launcher/warm_workers.py).

A run on worker processes takes the launcher's waiting processes for its workers, none of which imports TensorFlow
(the statistics run in the launcher: runners.statistics_in_the_launcher), and publishes the same bytes as the run in
the launcher's own process; waiting processes that no run takes leave when the pool closes, and when
the launcher is killed; a worker command with no pool to ask is Beam's own SDK worker.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import NUM_CLASSES, ROOT, assert_same_outputs

from beam_pipeline.launcher import warm_workers


def processes_with(marker: str):
    """pids of the live processes whose environment holds ``marker`` (this test's own TMPDIR)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environment = (entry / "environ").read_bytes()
            status = (entry / "stat").read_text().split()
        except OSError:
            continue
        if marker.encode() in environment and status[2] != "Z":
            found.append(int(entry.name))
    return found


def until_seen(marker: str, count: int, seconds: float = 10.0):
    """The processes of ``marker`` once ``count`` are seen, or those seen after ``seconds`` (a process's /proc entry
    read while the machine is busy may not show it at the first look: once in a CI run, one of two was missed)."""
    deadline = time.monotonic() + seconds
    while len(processes_with(marker)) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    return processes_with(marker)


def until_none_left(marker: str, seconds: float = 30.0):
    deadline = time.monotonic() + seconds
    while processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    return processes_with(marker)


# Imported by every Python process started with this folder on PYTHONPATH: a worker process (the client, a waiting
# process, Beam's own worker) that imports TensorFlow leaves a file named by its pid in TENSORFLOW_IMPORTS; a
# waiting process notes each garbage collection it makes, with how many objects were frozen then and whether it
# had imported the SDK harness yet, in COLLECTIONS/<pid>.
WATCH_TENSORFLOW = """
import gc, os, sys
_command = open("/proc/self/cmdline", "rb").read().split(b"\\0")
if b"--wait" in _command:
    _notes = os.path.join(os.environ["COLLECTIONS"], str(os.getpid()))

    def _note(phase, info):
        if phase == "stop":
            harness = "apache_beam.runners.worker.sdk_worker_main" in sys.modules
            with open(_notes, "a") as notes:
                notes.write(f"{gc.get_freeze_count()} {int(harness)}\\n")

    gc.callbacks.append(_note)
_WORKERS = (b"beam_pipeline.launcher.warm_workers", b"apache_beam.runners.worker.sdk_worker_main")
if any(name in _command for name in _WORKERS):
    _marks = os.environ["TENSORFLOW_IMPORTS"]

    class _WatchTensorFlow:
        def find_spec(self, name, path=None, target=None):
            if name == "tensorflow":
                with open(os.path.join(_marks, str(os.getpid())), "w") as mark:
                    mark.write(" ".join(part.decode() for part in _command))
            return None

    sys.meta_path.insert(0, _WatchTensorFlow())
"""


def test_a_run_on_worker_processes_started_before_its_build_publishes_what_the_launcher_alone_does(
        segmentation_run, corpus_dir, tmp_path):
    """Two worker processes, started while the pipeline was built, serve the run (the debug line counts them),
    never import TensorFlow (the statistics' steps run in the launcher) and make no garbage collection while they
    import the SDK harness (launcher/memory.py: it is frozen once imported, and the run's own garbage collected);
    the version is byte for byte the default engine's, and no process of the run outlives it."""
    expected_dir, _ = segmentation_run
    temporary, watch, marks = tmp_path / "tmp", tmp_path / "watch", tmp_path / "tensorflow_imports"
    collections = tmp_path / "collections"
    for folder in (temporary, watch, marks, collections):
        folder.mkdir()
    (watch / "sitecustomize.py").write_text(WATCH_TENSORFLOW)
    python_path = os.pathsep.join(filter(None, [str(watch), os.environ.get("PYTHONPATH")]))
    completed = subprocess.run(
        [sys.executable, "-m", "beam_pipeline", "--input", str(corpus_dir / "segmentation" / "manifest.csv"),
         "--num_classes", str(NUM_CLASSES), "--target_shard_bytes", "4000000", "--output", str(tmp_path / "out"),
         "--direct_running_mode", "multi_processing", "--direct_num_workers", "2", "--log_level", "debug"],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
        env=dict(os.environ, TMPDIR=str(temporary), PYTHONPATH=python_path, TENSORFLOW_IMPORTS=str(marks),
                 COLLECTIONS=str(collections)))
    assert completed.returncode == 0, completed.stderr[-5000:]
    assert "2 of the 2 worker processes started before the pipeline was built served it" in completed.stderr
    assert {mark.name: mark.read_text() for mark in marks.iterdir()} == {}
    served = {notes.name: [tuple(map(int, line.split())) for line in notes.read_text().splitlines()]
              for notes in collections.iterdir()}
    served = {pid: [frozen for frozen, harness in made if harness] for pid, made in served.items()}
    assert len([pid for pid, made in served.items() if made]) == 2, served    # both ran bundles, and collected
    assert all(frozen > 10_000 for made in served.values() for frozen in made), served
    assert "transforms of ComputeStats run in the launcher's process" in completed.stderr
    assert_same_outputs(expected_dir, tmp_path / "out")
    assert until_none_left(str(temporary)) == []
    assert list(temporary.glob("beam_pipeline_workers_*")) == []


def test_waiting_processes_no_run_takes_leave_when_the_pool_closes(tmp_path, monkeypatch):
    """Closed while its processes still import (a run refused before its engine starts): at once, not after them.
    The temporary folder's path is longer than a Unix socket's path may be (108 bytes): the pool opens all the same."""
    temporary = tmp_path / ("long-" * 25)
    temporary.mkdir()
    monkeypatch.setenv("TMPDIR", str(temporary))
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", None)
    pool = warm_workers.WarmPool(2)
    assert os.environ[warm_workers.POOL_ENV] == pool.address
    assert len(until_seen(str(temporary), 2)) == 2
    started = time.monotonic()
    pool.close()
    assert time.monotonic() - started < 2.0        # tf.Transform's import alone takes longer
    assert warm_workers.POOL_ENV not in os.environ
    assert until_none_left(str(temporary)) == []
    assert pool.served == 0
    assert list(temporary.iterdir()) == []


def test_waiting_processes_leave_when_the_launcher_is_killed(tmp_path):
    """The launcher killed alone (SIGKILL, no teardown) while its workers still import: they see their stdin close
    and leave, instead of waiting for ever."""
    launcher = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from beam_pipeline.launcher import warm_workers; "
         "warm_workers.WarmPool(2); print('open', flush=True); time.sleep(600)"],
        cwd=ROOT, stdout=subprocess.PIPE, text=True, env=dict(os.environ, TMPDIR=str(tmp_path)))
    try:
        assert launcher.stdout.readline().strip() == "open"
        assert len(processes_with(str(tmp_path))) == 3            # the launcher and its two waiting processes
    finally:
        launcher.send_signal(signal.SIGKILL)
        launcher.wait()
    assert until_none_left(str(tmp_path)) == []


def test_a_worker_command_with_no_pool_to_ask_is_beams_sdk_worker(tmp_path):
    """The client whose pool is gone (or never was) runs ``sdk_worker_main`` itself: here, without the engine's
    control address, it fails as Beam's worker does, naming the missing variable."""
    environment = {name: value for name, value in os.environ.items() if not name.endswith("API_SERVICE_DESCRIPTOR")}
    environment[warm_workers.POOL_ENV] = str(tmp_path / "no-such-pool.sock")
    completed = subprocess.run(warm_workers.client_command(), shell=True, cwd=ROOT, capture_output=True, text=True,
                               timeout=300, env=environment)
    assert completed.returncode != 0
    assert "CONTROL_API_SERVICE_DESCRIPTOR" in completed.stderr
