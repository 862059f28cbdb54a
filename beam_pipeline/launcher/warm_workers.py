"""SDK worker processes started while the pipeline is built, so that their imports overlap the construction.

On the DirectRunner with worker processes (``--direct_running_mode multi_processing``), Beam's engine starts
each SDK worker as ``python -m apache_beam.runners.worker.sdk_worker_main`` once the pipeline is built and
translated, a few seconds in which one of the two cores is idle (docs/benchmarks.md, "Fast start"). Here the
launcher starts the worker processes as soon as it has chosen them (:class:`WarmPool`): each imports the SDK
harness, then waits on its stdin. They never import tf.Transform or TensorFlow:
the statistics' steps run in the launcher's own process, which imported both to build the pipeline
(runners.statistics_in_the_launcher). The engine's command for a worker becomes ``python -m
beam_pipeline.launcher.warm_workers`` (the *client*, a process that imports nothing heavy): it asks the launcher's
pool for a waiting process over a socket, the pool hands that process the environment the engine gave the client
(control and logging addresses, pipeline options, worker id), and the client waits for it and exits with its
status. Without a waiting process (all taken, the pool closed, or a process that died), the client becomes the SDK
worker itself, as Beam would have started it.

The processes are the same SDK harness with the same options, so every output byte is the same. A waiting
process that the run never uses is stopped when the pool closes, and leaves by itself when the launcher dies (its
stdin closes).
"""

import json
import logging
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import uuid
from typing import List, Optional, Tuple

from beam_pipeline.stages.worker import SDK_WORKER_MAIN, WARM_WORKER_MAIN

POOL_ENV = "BEAM_PIPELINE_WARM_POOL"      # the pool's socket, in the environment the engine gives each client
ABSTRACT = "@"                            # POOL_ENV's mark of a name in Linux's abstract socket namespace
WAIT_FLAG = "--wait"
_WARM, _COLD = b"w", b"c"
_LOG = logging.getLogger(__name__)


# --------------------------------------------------------------------------
# Framing: one length-prefixed message at a time over a stream socket
# --------------------------------------------------------------------------
def _send(connection: socket.socket, data: bytes) -> None:
    connection.sendall(struct.pack("<I", len(data)) + data)


def _receive(connection: socket.socket) -> Optional[bytes]:
    header = _exactly(connection, 4)
    if header is None:
        return None
    return _exactly(connection, struct.unpack("<I", header)[0])


def _listening(count: int) -> Tuple[socket.socket, str, Optional[str]]:
    """(the pool's listening socket, its address for POOL_ENV, the folder holding it or None). On Linux the socket
    has a name in the abstract namespace: no file, and no limit from the length of TMPDIR (a socket's path must fit
    in 108 bytes); elsewhere it is a file in a new temporary folder. Raises OSError when neither can be made."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    name = f"beam_pipeline_workers_{uuid.uuid4().hex}"
    folder = None
    try:
        if sys.platform.startswith("linux"):
            server.bind("\0" + name)
            address = ABSTRACT + name
        else:
            folder = tempfile.mkdtemp(prefix="beam_pipeline_workers_")
            address = os.path.join(folder, "pool.sock")
            server.bind(address)
        server.listen(max(count, 1) * 2)
    except OSError:
        server.close()
        if folder is not None:
            os.rmdir(folder)
        raise
    return server, address, folder


def _connectable(address: str) -> str:
    return "\0" + address[len(ABSTRACT):] if address.startswith(ABSTRACT) else address


def _exactly(connection: socket.socket, size: int) -> Optional[bytes]:
    data = b""
    while len(data) < size:
        chunk = connection.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


# --------------------------------------------------------------------------
# The launcher's side
# --------------------------------------------------------------------------
class WarmPool:
    """``count`` waiting worker processes, each having imported the SDK harness, and the socket
    their clients ask for one on; sets POOL_ENV for the engine's workers while open."""

    def __init__(self, count: int):
        self._server, self.address, self._folder = _listening(count)      # OSError: no pool (runners.warm_pool)
        self._lock = threading.Lock()
        self._waiting: List[subprocess.Popen] = []
        try:
            for _ in range(count):
                self._waiting.append(subprocess.Popen([sys.executable, "-m", WARM_WORKER_MAIN, WAIT_FLAG],
                                                      stdin=subprocess.PIPE))
        except OSError:
            for process in self._waiting:
                process.kill()
                process.wait()
            self._server.close()
            raise
        self.count = count
        self.served = 0                          # clients given a waiting process
        self._previous = os.environ.get(POOL_ENV)
        os.environ[POOL_ENV] = self.address
        self._thread = threading.Thread(target=self._serve, name="warm_worker_pool", daemon=True)
        self._thread.start()

    def _take(self) -> Optional[subprocess.Popen]:
        with self._lock:
            while self._waiting:
                process = self._waiting.pop(0)
                if process.poll() is None:
                    return process
            return None

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self._server.accept()
            except OSError:                      # closed: no more clients
                return
            threading.Thread(target=self._hand_over, args=(connection,), name="warm_worker", daemon=True).start()

    def _hand_over(self, connection: socket.socket) -> None:
        with connection:
            try:
                environment = _receive(connection)
                process = self._take() if environment is not None else None
                if process is None:
                    _send(connection, _COLD)
                    return
                try:
                    process.stdin.write(environment + b"\n")
                    process.stdin.close()
                except OSError:                  # it died meanwhile: the client starts the worker itself
                    _send(connection, _COLD)
                    return
                with self._lock:
                    self.served += 1
                _send(connection, _WARM)
                _send(connection, str(process.wait()).encode())
            except OSError:                      # the client went away: its worker's process ends with the run
                return

    def close(self) -> None:
        """No more clients; a process still waiting is stopped (it holds nothing yet: a run that fails before its
        engine starts does not wait for its imports). Processes that serve the engine are not waited for here: they
        end when the engine closes their control channel."""
        try:
            self._server.shutdown(socket.SHUT_RDWR)     # wakes the accept() of the serving thread
        except OSError:
            pass
        self._server.close()
        with self._lock:
            waiting, self._waiting = self._waiting, []
        for process in waiting:
            process.kill()
            process.wait()
            try:
                process.stdin.close()
            except OSError:
                pass
        _LOG.debug("DirectRunner: %d of the %d worker processes started before the pipeline was built served it",
                   self.served, self.count)
        if self._previous is None:
            os.environ.pop(POOL_ENV, None)
        else:
            os.environ[POOL_ENV] = self._previous
        if self._folder is not None:
            try:
                os.unlink(self.address)
                os.rmdir(self._folder)
            except OSError:
                pass


def client_command() -> str:
    """The engine's command for an SDK worker while a pool is open (run with a shell, as Beam runs its own)."""
    return f"{sys.executable} -m {WARM_WORKER_MAIN}"


def sdk_worker_command() -> str:
    """The command Beam's engine runs for an SDK worker process by default (fn_runner.py)."""
    return f"{sys.executable} -m {SDK_WORKER_MAIN}"


def with_client_command(pipeline_proto) -> None:
    """The pipeline's SDK worker processes started by the client instead of Beam's command (in place)."""
    from apache_beam.portability import python_urns
    default, client = sdk_worker_command().encode("utf-8"), client_command().encode("utf-8")
    for environment in pipeline_proto.components.environments.values():
        if environment.urn == python_urns.SUBPROCESS_SDK and environment.payload == default:
            environment.payload = client


# --------------------------------------------------------------------------
# The processes' side
# --------------------------------------------------------------------------
def _run_as_client() -> int:
    """Ask the pool for a waiting process and wait for it; or become the SDK worker."""
    address = os.environ.get(POOL_ENV)
    if address:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
                connection.connect(_connectable(address))
                _send(connection, json.dumps(dict(os.environ)).encode())
                if _receive(connection) == _WARM:
                    status = _receive(connection)
                    return int(status) if status is not None else 1
        except OSError:
            pass
    os.execv(sys.executable, [sys.executable, "-m", SDK_WORKER_MAIN])
    return 1                                        # not reached


def _wait_and_run() -> None:
    """Import the SDK harness, wait for the environment of the worker to be, then be it."""
    from beam_pipeline.launcher import memory
    memory.defer_collections()                                 # no collection scans the harness as it imports
    from apache_beam.runners.worker import sdk_worker_main     # the import this process exists to make early
    from beam_pipeline.stages.worker import prepare_sdk_worker
    prepare_sdk_worker()                            # before its first bundle processor, not at the first DoFn's setup
    line = sys.stdin.buffer.readline()
    if not line.strip():                            # the pool closed, or the launcher is gone: never needed
        os._exit(0)
    environment = json.loads(line)
    os.environ.clear()
    os.environ.update(environment)
    try:
        with memory.frozen_for_the_run():                      # the harness's modules frozen, the collector on
            sdk_worker_main.main([])
    except BaseException:  # noqa: BLE001 - a harness that failed exits as sdk_worker_main would, with its traceback
        import traceback
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)                                     # no interpreter teardown, as stages/worker.py


if __name__ == "__main__":
    if sys.argv[1:2] == [WAIT_FLAG]:
        _wait_and_run()
    sys.exit(_run_as_client())
