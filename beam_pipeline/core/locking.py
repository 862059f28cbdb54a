"""The lock record of an output folder, and when its holder counts as gone. Pure: no I/O but /proc.

``OUTPUT/_lock.json`` names the run that holds the output::

    {"run_id", "host", "pid", "pid_start", "started", "heartbeat", "lease_seconds"}

On local disk the holder also keeps an flock on the file, and liveness is exactly "can another
process flock it". On object stores (no flock) a holder is gone when it ran on this host and its
process (pid and start time, so a reused pid does not count) no longer runs, or, from any host,
when it has not refreshed ``heartbeat`` for ``lease_seconds``. The backends are in
beam_pipeline/io/stores/local.py.
"""

import datetime
import os
import socket
from typing import Optional, Tuple

HOST_VARIABLE = "BEAM_PIPELINE_LOCK_HOST"     # tests play a run on another host by setting it


class OutputLocked(RuntimeError):
    """Another live run holds the output; the message names it."""


class LockLost(RuntimeError):
    """This run's lock was taken over by another run (it stopped refreshing it for longer than its lease)."""


def this_host() -> str:
    return os.environ.get(HOST_VARIABLE) or socket.gethostname()


def process_start(pid: int) -> Optional[str]:
    """A process's start time (clock ticks since boot, /proc/<pid>/stat field 22); None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def new_record(run_id: str, now: float, lease_seconds: float) -> dict:
    started = datetime.datetime.fromtimestamp(now, datetime.timezone.utc).isoformat(timespec="seconds")
    return {"run_id": run_id, "host": this_host(), "pid": os.getpid(), "pid_start": process_start(os.getpid()),
            "started": started, "heartbeat": now, "lease_seconds": lease_seconds}


def describe(record: dict) -> str:
    """``run 2026…-ad1c1f9d (host vm, pid 23476, started 2026-11-30T23:28:34+00:00)``."""
    return (f"run {record.get('run_id', '?')} (host {record.get('host', '?')}, pid {record.get('pid', '?')}, "
            f"started {record.get('started', '?')})")


def is_stale(record: dict, now: float) -> Tuple[bool, str]:
    """Whether the holder named by ``record`` is gone, and why (for the take-over line or the refusal)."""
    if record.get("host") == this_host() and record.get("pid") is not None:
        if process_start(int(record["pid"])) != record.get("pid_start"):
            return True, f"its process {record['pid']} no longer runs on this host"
        return False, "its process is running on this host"
    silent = now - float(record.get("heartbeat") or 0)
    lease = float(record.get("lease_seconds") or 0)
    if silent > lease:
        return True, f"no heartbeat for {silent:.0f} s (lease {lease:.0f} s)"
    return False, f"its last heartbeat was {silent:.0f} s ago (lease {lease:.0f} s)"
