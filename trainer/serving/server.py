"""The HTTP server under ``python -m trainer.serve``: uvicorn, bounded so that hostile clients cannot hold it.

uvicorn (its h11 protocol, on asyncio's event loop) accepts connections and reads and writes every socket
without blocking, so a slow or silent client holds a socket, never a thread; ``max_concurrent`` worker
threads run the application (``handle(Request) -> Response``: the predict handler, trainer/serving/predict.py).
The bounds are TensorFlow Serving's REST server's in spirit (a fixed pool of request threads, a deadline, a
largest message) with nginx's client limits. uvicorn has settings for the head's size and keep-alive; the
rest is this module's ASGI :class:`Application` (the checks of a request's head, its place, its body, its
worker) and trainer/serving/connection.py (connections, the deadline, refused heads, clients that go):

- a head is at most 64 KiB (431); a body declares its length (else 411), at most ``max_request_bytes``
  (413 before any of it is read); another HTTP version than 1.x gets 505;
- from the end of its head to its answer a request holds one of ``max_concurrent + max_queue`` places (none
  free: 503 with Retry-After, at once), so the bodies held are at most that many times ``max_request_bytes``;
  ``Expect: 100-continue`` is answered only once the request has its place;
- an application that raises gives 500, with its traceback in the log, and the server goes on.
"""

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import functools
import logging
import socket
import threading
from typing import Callable, Dict, Optional, Tuple

import uvicorn

from trainer.serving.connection import EXCHANGE, MAX_HEADER_BYTES, Exchange, LimitedH11Protocol, Limits, error_body

_LOG = logging.getLogger("trainer.serve")
BODY_METHODS = ("POST", "PUT", "PATCH")


@dataclasses.dataclass(frozen=True)
class Request:
    method: str
    path: str                           # the target without its query
    headers: Dict[str, str]             # lower-case names
    body: bytes
    client: str                         # "host:port", for the log


@dataclasses.dataclass(frozen=True)
class Response:
    status: int
    body: bytes = b""
    content_type: str = "application/json"
    headers: Tuple[Tuple[str, str], ...] = ()


def error_response(status: int, message: str, headers: Tuple[Tuple[str, str], ...] = ()) -> Response:
    return Response(status, error_body(message), headers=headers)


class Places:
    """The ``max_concurrent + max_queue`` places a request holds from the end of its head to its answer."""

    def __init__(self, count: int):
        self.count = count
        self.taken = 0
        self._lock = threading.Lock()           # released from a worker's thread when its client has gone

    def take(self) -> bool:
        with self._lock:
            if self.taken >= self.count:
                return False
            self.taken += 1
            return True

    def release(self, *_) -> None:
        with self._lock:
            self.taken -= 1


class Application:
    """The ASGI application uvicorn calls once a request's head has come."""

    def __init__(self, handle: Callable[[Request], Response], limits: Limits):
        self._handle = handle
        self._limits = limits
        self.places = Places(limits.max_concurrent + limits.max_queue)
        self.workers = concurrent.futures.ThreadPoolExecutor(limits.max_concurrent, "RequestWorker")

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return                              # no lifespan events (uvicorn's lifespan is off), no websockets
        exchange: Exchange = scope["state"][EXCHANGE]
        headers = {}
        for name, value in scope["headers"]:
            name, value = name.decode("latin-1"), value.decode("latin-1")
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        refused = self._refused_head(scope, headers)
        if refused is not None:
            _LOG.info("%d for %s: %s", refused[0], exchange.client, refused[1])
            await _send(send, error_response(*refused), close=True)
            return
        if not self.places.take():
            message = f"the server is busy: {self.places.taken} requests are being answered or waiting; retry later"
            _LOG.info("503 for %s: %s", exchange.client, message)
            await _send(send, error_response(503, message, (("retry-after", "1"),)), close=True)
            return
        job: Optional[concurrent.futures.Future] = None
        try:
            body = await _body(receive, exchange)
            if body is None:
                return                          # its client has gone, or was too slow: connection.py said so
            request = Request(scope["method"], scope["path"], headers, body, exchange.client)
            exchange.job = job = self.workers.submit(self._answer, request)
            try:
                response = await asyncio.wrap_future(job)
            except asyncio.CancelledError:
                job.cancel()                    # dropped: its client has gone, or the server stops
                return
            await _send(send, response, close=False)
        finally:
            if job is None or job.done():
                self.places.release()
            else:
                job.add_done_callback(self.places.release)     # a worker has it: its place is held to the end

    def _refused_head(self, scope, headers: Dict[str, str]) -> Optional[Tuple[int, str]]:
        """The status and reason for a head refused before any of its body is read; None when it passes."""
        head = len(scope["method"]) + len(scope["raw_path"]) + len(scope["query_string"]) + sum(
            len(name) + len(value) + 4 for name, value in scope["headers"])
        if head > MAX_HEADER_BYTES:             # h11 bounds a head that comes in parts; this, one that came whole
            return 431, f"the request's headers are over {MAX_HEADER_BYTES:,} bytes"
        if scope["http_version"] not in ("1.0", "1.1"):
            return 505, f"HTTP version 'HTTP/{scope['http_version']}': this server speaks HTTP/1.1 and HTTP/1.0"
        if "transfer-encoding" in headers:
            return 411, "a chunked request body is not accepted: send the body with a Content-Length"
        declared = headers.get("content-length")
        if declared is None and scope["method"] in BODY_METHODS:
            return 411, f"a {scope['method']} request needs a Content-Length"
        if declared is not None and int(declared) > self._limits.max_request_bytes:      # h11 checked the digits
            return 413, (f"the request body declares {int(declared):,} bytes; this server takes at most "
                         f"{self._limits.max_request_bytes:,} (--max_request_bytes)")
        return None

    def _answer(self, request: Request) -> Response:
        """On a worker's thread: the application's answer; 500 when it raises (a bug, not a client's doing)."""
        try:
            return self._handle(request)
        except Exception as error:      # noqa: BLE001 - a bug in the application: 500, and the server goes on
            _LOG.exception("500 for %s %s from %s", request.method, request.path, request.client)
            return error_response(500, f"internal error: {type(error).__name__}: {error}")


async def _body(receive, exchange: Exchange) -> Optional[bytes]:
    """The request's body (uvicorn sends ``100 Continue`` on the first receive); None when the client has gone."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        exchange.body_bytes += len(chunks[-1])
        if not message.get("more_body"):
            return b"".join(chunks)


async def _send(send, response: Response, close: bool) -> None:
    """A whole response; ``close`` ends the connection after it (a request refused before its body was read)."""
    headers = [(b"content-type", response.content_type.encode()),
               (b"content-length", str(len(response.body)).encode())]
    headers += [(name.encode("latin-1"), value.encode("latin-1")) for name, value in response.headers]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": response.status, "headers": headers})
    await send({"type": "http.response.body", "body": response.body})


class _Uvicorn(uvicorn.Server):
    """uvicorn's server with the deadline checked on its tick, and no signal handling of its own (the command
    stops it with :meth:`Server.shutdown`; uvicorn's would raise the signal again once it has stopped)."""

    def capture_signals(self):
        return contextlib.nullcontext()

    async def on_tick(self, counter: int) -> bool:
        now = asyncio.get_running_loop().time()
        for connection in list(self.server_state.connections):
            connection.check_deadline(now)
        return await super().on_tick(counter)


class Server:
    """``Server(("127.0.0.1", 8501), handle, Limits()).serve_forever()``; ``shutdown()``, from any thread or a
    signal handler, stops it."""

    def __init__(self, address, handle: Callable[[Request], Response], limits: Limits = Limits()):
        self.limits = limits
        self._socket = socket.create_server(address, backlog=max(limits.max_connections, 16))
        self.server_address = self._socket.getsockname()
        self.application = Application(handle, limits)
        config = uvicorn.Config(
            self.application, http=functools.partial(LimitedH11Protocol, limits=limits), interface="asgi3",
            loop="asyncio", lifespan="off", log_config=None, access_log=False, proxy_headers=False,
            server_header=False, h11_max_incomplete_event_size=MAX_HEADER_BYTES,
            timeout_keep_alive=limits.request_timeout)
        self._server = _Uvicorn(config)

    def serve_forever(self) -> None:
        try:
            self._server.run(sockets=[self._socket])
        finally:
            self._socket.close()
            self.application.workers.shutdown(wait=False, cancel_futures=True)

    def shutdown(self) -> None:
        self._server.should_exit = True
