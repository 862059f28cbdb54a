"""The processes of a local cluster: a free port, waiting for a started process to listen on its
port, and stopping a process started in its own session together with everything it started.
"""

import contextlib
import os
import signal
import socket
import subprocess
import time
from typing import Optional


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("localhost", 0))
        return sock.getsockname()[1]


def _wait_for_port(port: int, deadline: float, process: subprocess.Popen, what: str, log: str) -> None:
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode}; see {log}")
        with contextlib.suppress(OSError), socket.create_connection(("localhost", port), timeout=1):
            return
        time.sleep(0.2)
    raise RuntimeError(f"{what} did not listen on port {port} in time; see {log}")


def _stop(process: Optional[subprocess.Popen], grace: float = 10) -> None:
    """Stop a process started with start_new_session=True and everything it started."""
    if process is None or process.poll() is not None and not _group_alive(process.pid):
        return
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=wait)
        end = time.monotonic() + wait
        while _group_alive(process.pid) and time.monotonic() < end:
            time.sleep(0.1)
        if not _group_alive(process.pid):
            return


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
