"""Local object-store servers for the tests: start, stop, and talk to them.

* S3: moto's server (``moto_server``, moto[s3] pinned in requirements.txt).
* GCS: gcp-storage-emulator with four patches (``gcs_emulator.py`` in this folder).
* ``faultproxy.py``: a reverse proxy in front of either, counting requests by operation and failing
  the ones its rules name (503/SlowDown, 500, connection resets).
* ``tls_route.py``: a TLS-terminating CONNECT proxy that sends TensorFlow's own gs:// traffic (its
  endpoints are compiled in, with no emulator variable) to the emulator.

Every server is a child process in its own process group, on a free loopback port; ``stop()``
ends exactly that group. Nothing here is product code; the tests and bench/objstore_throughput.py use it.
"""

import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from typing import Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
VENV_BIN = os.path.dirname(sys.executable)
LOOPBACK = "127.0.0.1"
NO_PROXY = "127.0.0.1,localhost"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


def wait_http(url: str, process: subprocess.Popen, timeout: float = 60.0) -> None:
    """Wait until ``url`` answers (any HTTP status); fail early if ``process`` died."""
    deadline = time.monotonic() + timeout
    last = None
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args[0]} exited with {process.returncode} before answering {url}")
        try:
            with opener.open(url, timeout=2) as response:
                response.read()
                return
        except urllib.error.HTTPError:
            return
        except OSError as error:
            last = error
            time.sleep(0.1)
    raise RuntimeError(f"server at {url} did not come up in {timeout:.0f} s: {last}")


def wait_port(port: int, process: subprocess.Popen, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args} exited with {process.returncode} before listening")
        with socket.socket() as sock:
            if sock.connect_ex((LOOPBACK, port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listens on {LOOPBACK}:{port} after {timeout:.0f} s")


class Server:
    """A child process in its own process group, with its output in ``log_path``."""

    def __init__(self, name: str, argv: List[str], url: str, log_dir: str, env: Optional[dict] = None):
        self.name = name
        self.url = url
        self.log_path = os.path.join(log_dir, f"{name}.log")
        os.makedirs(log_dir, exist_ok=True)
        self._log = open(self.log_path, "ab")
        self.process = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT,
                                        env=dict(os.environ, **(env or {})), start_new_session=True)

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def stop(self) -> None:
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
                self.process.wait(10)
            except ProcessLookupError:
                pass
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self._log.close()

    def log_tail(self, chars: int = 3000) -> str:
        with open(self.log_path, "rb") as handle:
            return handle.read().decode("utf-8", "replace")[-chars:]


def start_moto(log_dir: str) -> Server:
    port = free_port()
    url = f"http://{LOOPBACK}:{port}"
    server = Server("moto", [os.path.join(VENV_BIN, "moto_server"), "-H", LOOPBACK, "-p", str(port)], url, log_dir)
    wait_http(url + "/moto-api/", server.process)
    return server


def start_gcs_emulator(log_dir: str, page_size: int = 1000) -> Server:
    """The patched gcp-storage-emulator, in memory; listings page at ``page_size`` objects (GCS: 1000)."""
    port = free_port()
    url = f"http://{LOOPBACK}:{port}"
    argv = [sys.executable, os.path.join(HERE, "gcs_emulator.py"), "start", "--host", LOOPBACK, "--port", str(port),
            "--in-memory"]
    server = Server("gcs-emulator", argv, url, log_dir, env={"GCS_EMULATOR_PAGE_SIZE": str(page_size)})
    wait_http(url + "/storage/v1/b", server.process)
    return server


class FaultProxy(Server):
    """faultproxy.py in front of ``upstream``: request counts and injected faults, shared by every process."""

    def __init__(self, upstream: str, dialect: str, log_dir: str, port: Optional[int] = None):
        port = port or free_port()
        argv = [sys.executable, os.path.join(HERE, "faultproxy.py"), "--upstream", upstream, "--port", str(port),
                "--dialect", dialect]
        super().__init__(f"faultproxy-{dialect}", argv, f"http://{LOOPBACK}:{port}", log_dir)
        wait_http(self.url + "/__proxy__/stats", self.process)

    def _call(self, route: str, payload=None):
        data = None if payload is None else json.dumps(payload).encode()
        request = urllib.request.Request(self.url + "/__proxy__/" + route, data=data,
                                         method="GET" if payload is None else "POST")
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(request, timeout=30) as response:
            return json.loads(response.read())

    def counts(self) -> Dict[str, int]:
        """Requests seen since the last reset, by operation (HEAD, GET, LIST, PUT, UPLOAD_PART, ...)."""
        return self._call("stats")["counts"]

    def log(self) -> list:
        """[method, path, operation, status or 'fault:<mode>'] of every request since the last reset."""
        return self._call("stats")["log"]

    def reset(self) -> None:
        self._call("reset", {})

    def set_faults(self, rules: List[dict]) -> None:
        """Replace the fault rules (faultproxy.py's docstring has their format); [] stops injecting."""
        self._call("faults", rules)

    def faults_injected(self) -> Dict[str, int]:
        """Requests failed so far, by operation (the rules of one operation added up)."""
        failed: Dict[str, int] = {}
        for rule in self._call("faults")["rules"]:
            failed[rule["kind"]] = failed.get(rule["kind"], 0) + rule["failed"]
        return failed


def start_tls_route(upstream: str, log_dir: str):
    """(server, env): the environment that sends TensorFlow's gs:// requests to ``upstream``.

    TF's libcurl honours HTTPS_PROXY and CURL_CA_BUNDLE; GOOGLE_AUTH_TOKEN_FOR_TESTING skips its auth.
    ``http_proxy`` is needed too (the emulator's resumable-upload Location says http://), and
    ``no_proxy`` keeps Python's own clients (Beam's google-cloud-storage, boto3) off the proxy.
    """
    from tools.objstore import tls_route
    certs = os.path.join(log_dir, "tls-route-certs")
    ca, _, _ = tls_route.make_certs(certs)
    port = free_port()
    argv = [sys.executable, os.path.join(HERE, "tls_route.py"), "--upstream", upstream, "--port", str(port),
            "--certs", certs]
    server = Server("tls-route", argv, f"http://{LOOPBACK}:{port}", log_dir)
    wait_port(port, server.process)
    env = {"HTTPS_PROXY": server.url, "https_proxy": server.url, "http_proxy": server.url,
           "no_proxy": NO_PROXY, "NO_PROXY": NO_PROXY, "CURL_CA_BUNDLE": ca,
           "GOOGLE_AUTH_TOKEN_FOR_TESTING": "emulator-token"}
    return server, env


@dataclasses.dataclass
class Servers:
    """What a test session started, stopped in reverse order."""
    started: List[Server] = dataclasses.field(default_factory=list)

    def add(self, server: Server) -> Server:
        self.started.append(server)
        return server

    def stop(self) -> None:
        while self.started:
            self.started.pop().stop()
