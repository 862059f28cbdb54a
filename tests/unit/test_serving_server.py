"""trainer/serving/server.py (uvicorn with the project's limits) in this process, on localhost, with an
application whose requests wait at a gate the test opens: which request is answered, dropped or refused does
not depend on how fast a model is.

The hostile cases against the real ``python -m trainer.serve`` are in tests/end_to_end/test_trainer_serving_limits.py;
these are the ones only a gate makes deterministic: a client that hangs up while its request waits for the
worker, or while the worker answers it, and an application that raises."""

import logging
import socket
import struct
import threading
import time

import pytest

from trainer.serving.server import Limits, Response, Server


class GatedApp:
    """Answers with the request's body; ``/gate`` waits until the test opens it; ``/boom`` raises."""

    def __init__(self):
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.handled = []

    def __call__(self, request):
        self.handled.append(request.body)
        if request.path == "/gate":
            self.entered.set()
            assert self.gate.wait(30)
        if request.path == "/boom":
            raise RuntimeError("the application failed")
        return Response(200, request.body, "text/plain")


@pytest.fixture
def served(caplog):
    caplog.set_level(logging.INFO, logger="trainer.serve")
    app = GatedApp()
    server = Server(("127.0.0.1", 0), app, Limits(max_request_bytes=1000, request_timeout=10, max_concurrent=1,
                                                  max_queue=2, max_connections=10))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server, app, caplog
    app.gate.set()
    server.shutdown()
    thread.join(10)


def post(server, path: str, body: bytes) -> socket.socket:
    sock = socket.create_connection(server.server_address, timeout=10)
    sock.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
    return sock


def answer(sock: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(4096)
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
    while len(body) < length:
        body += sock.recv(4096)
    return head.split(b"\r\n")[0] + b" " + body


def client_of(sock: socket.socket) -> str:
    return "%s:%d" % sock.getsockname()


def reset(sock: socket.socket) -> None:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def lines_for(caplog, client: str, wait: float = 5.0):
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and not [r for r in caplog.records if client in r.getMessage()]:
        time.sleep(0.02)
    return [r.getMessage() for r in caplog.records if client in r.getMessage()]


def assert_every_place_free(server) -> None:
    """max_concurrent + max_queue = 3 places: three requests whose bodies are awaited hold them (each is told
    100 Continue), a fourth gets 503."""
    holders = []
    for _ in range(3):
        sock = socket.create_connection(server.server_address, timeout=10)
        sock.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
        assert sock.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"
        holders.append(sock)
    fourth = post(server, "/echo", b"hello")
    assert answer(fourth).startswith(b"HTTP/1.1 503 Service Unavailable ")
    for sock in holders + [fourth]:
        sock.close()


def test_a_request_whose_client_hangs_up_while_it_waits_is_dropped_unanswered(served):
    server, app, caplog = served
    running = post(server, "/gate", b"first")
    assert app.entered.wait(10)                            # the one worker is busy
    waiting = post(server, "/echo", b"second")
    time.sleep(0.3)                                        # read and queued behind it
    client = client_of(waiting)
    reset(waiting)
    (line,) = lines_for(caplog, client)
    assert line == (f"{client}: its connection failed (ConnectionResetError: Connection reset by peer) before a "
                    "worker took its request: dropped unanswered")
    app.gate.set()
    assert answer(running) == b"HTTP/1.1 200 OK first"
    time.sleep(0.3)
    assert app.handled == [b"first"]                       # the dropped request never reached the application
    running.close()
    assert_every_place_free(server)


def test_an_answer_whose_client_has_gone_is_dropped_and_its_place_freed(served):
    server, app, caplog = served
    running = post(server, "/gate", b"first")
    assert app.entered.wait(10)
    client = client_of(running)
    running.close()
    (line,) = lines_for(caplog, client)
    assert line == f"{client}: it closed its connection while its request was being answered"
    app.gate.set()
    time.sleep(0.3)
    assert_every_place_free(server)
    assert len(lines_for(caplog, client, wait=0)) == 1


def test_an_application_that_raises_gives_500_and_the_server_goes_on(served):
    server, app, caplog = served
    with post(server, "/boom", b"x") as sock:
        assert answer(sock) == (b'HTTP/1.1 500 Internal Server Error {"error": "internal error: RuntimeError: the '
                                b'application failed"}')
    with post(server, "/echo", b"still here") as sock:
        assert answer(sock) == b"HTTP/1.1 200 OK still here"
    (record,) = [r for r in caplog.records if r.getMessage().startswith("500 for POST /boom")]
    assert record.exc_info is not None                     # a bug in the application keeps its traceback
