"""``python -m trainer.serve`` against hostile and broken clients, on raw sockets (a client library would be too
polite: it would not declare 300 MB, stall mid-body or hang up early).

One real server process, on localhost, serves the segmentation export that the serving tests share
(``trainer_jobs.segmentation_job``) with tight limits, so that every bound is reached by a few sockets: one
worker and one queued request, 6 connections, a 2 s request timeout, 1 MB requests and 2 images a request.
Each case checks the answer on the wire, that the server's log says it in one line (never a traceback), and
that the server goes on answering a good request. A client that hangs up while its request waits for the
worker, or while the worker answers it, depends on how long the model takes: tests/unit/test_rest_server.py
holds those requests at a gate instead.
"""

import base64
import io
import json
import re
import select
import socket
import struct
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from PIL import Image

from conftest import ROOT, free_port, stop_process_group, wait_for_port
from trainer_jobs import segmentation_job

TIMEOUT = 2.0                   # --request_timeout
MAX_BYTES = 1_000_000           # --max_request_bytes
MAX_CONNECTIONS = 6
PREDICT = "/v1/models/model:predict"


class ServerProcess:
    """The server, and the lines of its log as they come (a thread reads its stderr)."""

    def __init__(self, args):
        self.port = free_port()
        self.process = subprocess.Popen([sys.executable, "-m", "trainer.serve", *map(str, args),
                                         "--port", str(self.port)], cwd=ROOT, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True, start_new_session=True)
        self.lines = []
        self._reader = threading.Thread(target=lambda: self.lines.extend(self.process.stdout), daemon=True)
        self._reader.start()

    def log_for(self, client: str, wait: float = 5.0):
        """The log lines that name ``client`` (host:port), once there is one (or after ``wait`` seconds)."""
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and not any(client in line for line in list(self.lines)):
            time.sleep(0.05)
        return [line for line in list(self.lines) if client in line]

    def threads(self) -> int:
        with open(f"/proc/{self.process.pid}/status") as status:
            return int(re.search(r"^Threads:\s+(\d+)", status.read(), re.MULTILINE).group(1))


@pytest.fixture(scope="module")
def server(segmentation_run, tmp_path_factory):
    out, _ = segmentation_run
    result, _, _ = segmentation_job(out, tmp_path_factory)
    served = ServerProcess(["--model", result["export"], "--request_timeout", TIMEOUT, "--max_request_bytes",
                            MAX_BYTES, "--max_concurrent", 1, "--max_queue", 1, "--max_connections",
                            MAX_CONNECTIONS, "--max_batch", 2])
    try:
        wait_for_port(served.port, served.process, timeout=180)
        yield served
    finally:
        stop_process_group(served.process)
    text = "".join(served.lines)
    assert "Traceback" not in text, text[-5000:]


def small_png() -> bytes:
    pixels = np.random.default_rng(0).integers(0, 255, (17, 23, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "PNG")
    return buffer.getvalue()


def predict_body(*images: bytes) -> bytes:
    return json.dumps({"instances": [{"b64": base64.b64encode(image).decode()} for image in images]}).encode()


def head(length: int, extra: str = "") -> bytes:
    return (f"POST {PREDICT} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            f"Content-Length: {length}\r\n{extra}\r\n").encode()


def connect(server) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    return sock


def client_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()
    return f"{host}:{port}"


def read_response(sock: socket.socket):
    """(status, headers, body) of one response: its head read byte by byte, then exactly its Content-Length, so
    that nothing of a next response is consumed. (None, {}, b"") when the server closed without one."""
    raw = sock.makefile("rb", buffering=0)
    try:
        lines = []
        while not lines or lines[-1]:
            line = raw.readline()
            if not line:
                return None, {}, b""
            lines.append(line.decode("latin-1").rstrip("\r\n"))
        headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines[1:-1])}
        body = b""
        while len(body) < int(headers.get("content-length", 0)):
            chunk = raw.read(int(headers["content-length"]) - len(body))
            if not chunk:
                break
            body += chunk
        return int(lines[0].split()[1]), headers, body
    finally:
        raw.close()                                        # the socket stays open


def closed_by_server(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def post(server, body: bytes):
    with connect(server) as sock:
        sock.sendall(head(len(body)) + body)
        status, _, answer = read_response(sock)
        return status, json.loads(answer)


def still_serving(server) -> None:
    status, answer = post(server, predict_body(small_png()))
    assert status == 200, answer
    assert (answer["predictions"][0]["height"], answer["predictions"][0]["width"]) == (17, 23)


# --------------------------------------------------------------------------
# Size, time, places, connections
# --------------------------------------------------------------------------
def test_a_body_over_max_request_bytes_gets_413_before_any_of_it_is_read(server):
    with connect(server) as sock:
        sock.sendall(head(300_000_000))                    # the request: 300 MB declared, none sent
        started = time.monotonic()
        status, headers, body = read_response(sock)
        assert time.monotonic() - started < TIMEOUT        # answered at once, not after the request timeout
        assert status == 413 and headers["connection"] == "close"
        assert json.loads(body)["error"] == ("the request body declares 300,000,000 bytes; this server takes at "
                                             "most 1,000,000 (--max_request_bytes)")
        assert closed_by_server(sock)
        client = client_of(sock)
    assert len(server.log_for(client)) == 1
    still_serving(server)


def test_a_client_that_declares_too_much_and_goes_on_sending_gets_its_413_and_then_hangs_up(server):
    sock = connect(server)
    client = client_of(sock)
    sock.sendall(head(300_000_000) + b"x" * 200_000)       # a client that sends before it reads
    status, _, _ = read_response(sock)
    assert status == 413
    sock.close()                                           # gives up: before, a 25-line BrokenPipeError traceback
    time.sleep(0.5)
    lines = server.log_for(client)
    assert len(lines) == 1 and "413" in lines[0]
    still_serving(server)


@pytest.mark.parametrize("stall", ["headers", "body"])
def test_a_client_too_slow_to_send_its_request_is_dropped_after_request_timeout(server, stall):
    sock = connect(server)
    client = client_of(sock)
    first = head(100)[:30] if stall == "headers" else head(100) + b'{"instances": '
    rest = head(100)[30:] if stall == "headers" else b"x" * 100
    started = time.monotonic()
    sock.sendall(first)
    for byte in rest[:20]:                                 # one byte every 0.25 s: never idle, always too slow
        if select.select([sock], [], [], 0.25)[0]:
            break                                          # the server has answered
        sock.sendall(bytes([byte]))
    elapsed = time.monotonic() - started
    status, _, body = read_response(sock)
    assert TIMEOUT <= elapsed < TIMEOUT + 3, elapsed      # the deadline is for the whole request, not per byte
    assert status == 408 and "did not come whole within 2 s" in json.loads(body)["error"]
    sock.close()
    (line,) = server.log_for(client)
    assert "408 for" in line and ("bytes of its headers came" if stall == "headers" else "body bytes came") in line
    still_serving(server)


def test_an_idle_connection_is_closed_after_request_timeout(server):
    with connect(server) as sock:
        started = time.monotonic()
        assert closed_by_server(sock)                      # no request, no answer: closed
        assert TIMEOUT <= time.monotonic() - started < TIMEOUT + 3


def test_requests_beyond_the_workers_and_the_queue_get_503(server):
    """One worker and one queued place: two requests in (their bodies still coming), the third is refused at
    once, and a fourth is taken again once the two have gone."""
    holding = [connect(server) for _ in range(2)]
    for sock in holding:                                   # each holds a place while its body is awaited: the
        sock.sendall(head(100, "Expect: 100-continue\r\n"))   # server says so with its 100 Continue
        assert sock.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"
    with connect(server) as third:
        third.sendall(head(10))
        status, headers, body = read_response(third)
    assert status == 503 and headers["retry-after"] == "1"
    assert "the server is busy: 2 requests are being answered or waiting" in json.loads(body)["error"]
    for sock in holding:
        sock.close()
    time.sleep(0.3)
    still_serving(server)


def test_connections_beyond_max_connections_get_503_and_threads_stay_bounded(server):
    threads = server.threads()
    idle = [connect(server) for _ in range(MAX_CONNECTIONS)]
    time.sleep(0.3)
    with connect(server) as extra:
        status, _, body = read_response(extra)
        assert status == 503 and "too many open connections" in json.loads(body)["error"]
        assert closed_by_server(extra)
    assert server.threads() == threads                     # slow or idle clients hold sockets, never threads
    for sock in idle:
        sock.close()
    time.sleep(0.3)
    still_serving(server)


# --------------------------------------------------------------------------
# Clients that hang up
# --------------------------------------------------------------------------
@pytest.mark.parametrize("reset, logged", [
    (False, "it closed its connection in the middle of a request (10 of its 100 body bytes had come)"),
    (True, "its connection failed (ConnectionResetError: Connection reset by peer) in the middle of a request "
           "(10 of its 100 body bytes had come)"),
])
def test_a_client_that_disconnects_mid_request_is_one_log_line(server, reset, logged):
    sock = connect(server)
    client = client_of(sock)
    sock.sendall(head(100) + b"0123456789")
    time.sleep(0.1)
    hang_up(sock, reset)
    (line,) = server.log_for(client)
    assert logged in line
    still_serving(server)


def hang_up(sock: socket.socket, reset: bool) -> None:
    if reset:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))   # close with a reset
    sock.close()


# --------------------------------------------------------------------------
# Bad requests: 400 with the reason, and the server goes on
# --------------------------------------------------------------------------
def _png_header_claiming(height, width) -> bytes:
    ihdr = width.to_bytes(4, "big") + height.to_bytes(4, "big") + bytes([8, 2, 0, 0, 0])
    return b"\x89PNG\r\n\x1a\n" + len(ihdr).to_bytes(4, "big") + b"IHDR" + ihdr + b"\0" * 4


@pytest.mark.parametrize("body, status, reason", [
    (b'{"instances": [', 400, "the request body is not JSON"),
    (b'{"instances": [{"b64": "***"}]}', 400, "an image is not valid base64"),
    (predict_body(b"plain text, not an image"), 400, "entry 0 (0-based) of the request is not a JPEG or PNG image"),
    (predict_body(_png_header_claiming(20000, 20000)), 400, "over the served limit"),
    (predict_body(small_png(), small_png(), small_png()), 400, "3 images in one request; this server takes at most 2"),
    (b'{"images": []}', 400, 'either "instances" or "inputs"'),
])
def test_bad_requests_get_400_with_the_reason(server, body, status, reason):
    got, answer = post(server, body)
    assert got == status and reason in answer["error"], answer
    still_serving(server)


@pytest.mark.parametrize("raw, status", [
    (b"GARBAGE\r\n\r\n", 400),
    (b"POST " + PREDICT.encode() + b" HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", 411),
    (b"POST " + PREDICT.encode() + b" HTTP/1.1\r\nHost: x\r\n\r\n", 411),
    (b"GET /v1/models/model HTTP/2.0\r\n\r\n", 505),
    (b"GET /v1/models/model HTTP/1.1\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n", 431),
])
def test_malformed_http_gets_its_status_and_the_connection_closes(server, raw, status):
    with connect(server) as sock:
        sock.sendall(raw)
        got, headers, _ = read_response(sock)
        assert got == status and headers["connection"] == "close"
        assert closed_by_server(sock)
    still_serving(server)


def test_keep_alive_and_pipelined_requests_are_answered_in_order(server):
    body = predict_body(small_png())
    with connect(server) as sock:
        sock.sendall(b"GET /v1/models/model HTTP/1.1\r\nHost: x\r\n\r\n" + head(len(body)) + body +
                     b"GET /v1/models/nothing HTTP/1.1\r\nHost: x\r\n\r\n")
        assert [read_response(sock)[0] for _ in range(3)] == [200, 200, 404]


def test_the_log_holds_only_the_servers_own_lines(server):
    """After every case above (this runs last): one line per event, all the server's own, from its start-up line
    on, no traceback, no third-party start-up noise (tests/end_to_end/test_console.py checks -v)."""
    lines = [line for line in list(server.lines) if line.strip()]
    assert lines and all(re.match(r"\S+ \S+ (INFO|WARNING|ERROR) trainer\.serve: ", line) for line in lines), lines
    assert "serving " in lines[0] and "(1 workers, 1 queued, 6 connections, 1,000,000 bytes a request, 2 s " \
                                     "timeout)" in lines[0]
