"""One run per output on local disk: the flock lock of beam_pipeline/io/stores/local.py, in real processes.

A live holder refuses a second run and is named; a holder killed with SIGKILL leaves a lock file
that the next run takes over at once, saying so; of several contenders for one stale lock exactly
one wins; a run whose lock file was replaced notices before its commit. (The S3 and GCS lease locks
behind the same interface are tested against local S3 and GCS servers: issue 14.)
"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from beam_pipeline.core.locking import LockLost, OutputLocked
from beam_pipeline.io import stores

HOLD = r"""
import sys, time
from beam_pipeline.core.locking import OutputLocked
from beam_pipeline.io import stores
lock = stores.LocalStore(sys.argv[1]).lock()
try:
    taken = lock.acquire(sys.argv[2])
except OutputLocked as error:
    print("LOCKED", error, flush=True)
    sys.exit(3)
print("HELD", taken or "", flush=True)
time.sleep(float(sys.argv[3]))
lock.release()
"""


def hold(folder, run_id, seconds=600):
    child = subprocess.Popen([sys.executable, "-c", HOLD, str(folder), run_id, str(seconds)],
                             stdout=subprocess.PIPE, text=True)
    return child


def first_line(child, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = child.stdout.readline()
        if line:
            return line.strip()
        if child.poll() is not None:
            break
    raise AssertionError(f"no line from {child.args}")


def test_acquire_writes_the_record_and_release_removes_it(tmp_path):
    lock = stores.LocalStore(str(tmp_path / "out")).lock()
    assert lock.acquire("20261201T000000Z-00000001") is None
    record = json.loads((tmp_path / "out" / "_lock.json").read_text())
    assert record["run_id"] == "20261201T000000Z-00000001" and record["pid"] == os.getpid()
    assert record["host"] and record["started"] and record["pid_start"]
    lock.check()
    lock.release()
    assert not (tmp_path / "out" / "_lock.json").exists()
    assert sorted(os.listdir(tmp_path / "out")) == []               # no temporary file left behind


def test_a_live_holder_refuses_a_second_run_and_is_named(tmp_path):
    holder = hold(tmp_path, "20261201T000000Z-0000aaaa")
    try:
        assert first_line(holder) == "HELD"
        started = time.monotonic()
        with pytest.raises(OutputLocked) as refused:
            stores.LocalStore(str(tmp_path)).lock().acquire("20261201T000001Z-0000bbbb")
        assert time.monotonic() - started < 1.0
        message = str(refused.value)
        assert f"run 20261201T000000Z-0000aaaa (host {os.uname().nodename}, pid {holder.pid}, started 20" in message
        assert "still holds the lock" in message
    finally:
        holder.kill()
        holder.wait()


def test_a_killed_holders_lock_is_taken_over_at_once_saying_so(tmp_path):
    holder = hold(tmp_path, "20261201T000000Z-0000dead")
    assert first_line(holder) == "HELD"
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    assert (tmp_path / "_lock.json").exists()                        # SIGKILL leaves the file behind
    lock = stores.LocalStore(str(tmp_path)).lock()
    taken = lock.acquire("20261201T000002Z-0000cafe")
    assert taken.startswith("taking over the stale lock of run 20261201T000000Z-0000dead (host ")
    assert f"pid {holder.pid}" in taken and "no longer holds the lock" in taken
    assert json.loads((tmp_path / "_lock.json").read_text())["run_id"] == "20261201T000002Z-0000cafe"
    lock.release()


def test_of_four_contenders_for_a_stale_lock_exactly_one_wins(tmp_path):
    holder = hold(tmp_path, "20261201T000000Z-0000dead")
    assert first_line(holder) == "HELD"
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    racers = [hold(tmp_path, f"20261201T000003Z-0000000{i}") for i in range(4)]
    lines = [first_line(racer) for racer in racers]
    for racer in racers:
        racer.kill()
        racer.wait()
    assert sum(line.startswith("HELD taking over the stale lock") for line in lines) == 1, lines
    assert sum(line.startswith("LOCKED") for line in lines) == 3, lines


def test_a_run_whose_lock_was_replaced_notices_before_its_commit(tmp_path):
    lock = stores.LocalStore(str(tmp_path)).lock()
    lock.acquire("20261201T000004Z-00000001")
    os.unlink(tmp_path / "_lock.json")                               # someone removed it by hand
    with pytest.raises(LockLost):
        lock.check()
    lock.release()


def test_publish_file_replaces_whole_files(tmp_path):
    store = stores.LocalStore(str(tmp_path))
    target = tmp_path / "manifest.json"
    store.publish_file(str(target), b"old")
    store.publish_file(str(target), b'{"new": true}')
    assert target.read_bytes() == b'{"new": true}'
    assert sorted(os.listdir(tmp_path)) == ["manifest.json"]


@pytest.mark.parametrize("output,kind", [("/data/out", "LocalStore"), ("relative/out", "LocalStore"),
                                         ("gs://bucket/out", "GcsStore"), ("s3://bucket/out", "S3Store")])
def test_the_store_follows_the_outputs_scheme(output, kind):
    assert type(stores.store_for(output, None)).__name__ == kind


def test_an_unknown_scheme_has_no_lock():
    with pytest.raises(ValueError, match="no lock is known for hdfs://"):
        stores.store_for("hdfs://namenode/out", None)
