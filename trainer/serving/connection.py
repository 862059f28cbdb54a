"""One client connection of trainer/serving/server.py: uvicorn's h11 protocol with the limits uvicorn lacks.

uvicorn (with h11) owns the socket, the parsing, the framing, keep-alive and pipelining. What it has no
setting for is added here, on its protocol class (uvicorn's ``Config(http=...)`` takes one) and through h11's
own events, never by reading HTTP bytes:

- at most ``max_connections`` open connections: one more gets 503 and is closed;
- one deadline: a request must come whole, head and body, within ``request_timeout`` of its connection being
  ready for it (else 408, or an idle connection closed), and its response be taken within as long (else the
  connection is dropped); the model's time does not count;
- a head h11 refuses is answered in JSON with its status, as TensorFlow Serving does: 431 once more than
  ``MAX_HEADER_BYTES`` of it came (h11's own hint), else 400 (uvicorn answers every refused head 400 in plain
  text);
- a client that goes is one log line saying how far its request had come, and a request no worker has taken
  yet is dropped (the application never answers it).

The application (server.py) sees the connection's :class:`Exchange` in ``scope["state"]``.
"""

import concurrent.futures
import dataclasses
import http
import json
import logging
import os
import socket
from typing import Optional, Tuple

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

_LOG = logging.getLogger("trainer.serve")
MAX_HEADER_BYTES = 64 * 1024        # a request's head at most (h11's max_incomplete_event_size); more: 431
EXCHANGE = "trainer.exchange"       # the key of the connection's Exchange in each request's scope["state"]


@dataclasses.dataclass(frozen=True)
class Limits:
    """The server's bounds (trainer/serve.py's options)."""
    max_request_bytes: int = 64 << 20           # a larger declared body gets 413 before any of it is read
    request_timeout: float = 30.0               # seconds for a request to come whole, and for its response to go
    max_concurrent: int = os.cpu_count() or 1   # worker threads: requests answered at once
    max_queue: int = 32                         # requests waiting for a worker; one more gets 503
    max_connections: int = 64                   # open connections; one more gets 503 and is closed


def error_body(message: str) -> bytes:
    """``{"error": message}``, as TensorFlow Serving's REST API answers an error."""
    return json.dumps({"error": message}).encode()


class Exchange:
    """What the connection's current request has reached, for its deadline and for the log."""

    def __init__(self):
        self.client = "?"
        self.head_bytes = 0                 # bytes of a request come while its head is incomplete
        self.body_bytes = 0                 # body bytes the application has taken
        self.job: Optional[concurrent.futures.Future] = None    # the request at a worker, or waiting for one

    def next_request(self) -> None:
        self.head_bytes = self.body_bytes = 0
        self.job = None

    def drop(self) -> bool:
        """Drop the request if no worker has taken it yet; False when one has (it runs to its end)."""
        return self.job is not None and self.job.cancel()


class LimitedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, with the connection limit, the deadline, JSON refusals and the log lines."""

    def __init__(self, config, server_state, app_state, _loop=None, *, limits: Limits):
        super().__init__(config, server_state, app_state, _loop)
        self.limits = limits
        self.exchange = Exchange()
        self.app_state = {**app_state, EXCHANGE: self.exchange}    # each request's scope["state"] holds it
        self.deadline: Optional[float] = None   # loop time by which the current step must be done
        self.closed_by_server = False

    # ----------------------------------------------------------------------
    # uvicorn's protocol hooks
    # ----------------------------------------------------------------------
    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            # What asyncio sets on the sockets it creates itself, not on those accepted from server.py's listener:
            # without it a response's head and body wait for the client's delayed ACK (40 ms a request).
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.exchange.client = "%s:%d" % self.client[:2] if self.client else "?"
        open_connections = len(self.connections) - 1
        if open_connections >= self.limits.max_connections:
            _LOG.info("503 for %s: %d connections are open (--max_connections)", self.exchange.client,
                      open_connections)
            self.refuse(503, "the server is busy: too many open connections; retry later", (("retry-after", "1"),))
            return
        self.deadline = self.loop.time() + self.limits.request_timeout

    def data_received(self, data: bytes) -> None:
        if self.stage()[0] in ("idle", "head"):
            self.exchange.head_bytes += len(data)
        super().data_received(data)

    def send_400_response(self, msg: str) -> None:
        """h11 refused the head (uvicorn's hook): its status, in JSON, and the connection closes."""
        unparsed, _ = self.conn.trailing_data          # what came of a head h11 has not parsed whole
        status, message = (431, f"the request's headers are over {MAX_HEADER_BYTES:,} bytes") if \
            max(len(unparsed), self.exchange.head_bytes) > MAX_HEADER_BYTES else (400, "a malformed HTTP request")
        _LOG.info("%d for %s: %s", status, self.exchange.client, message)
        self.refuse(status, message)

    def on_response_complete(self) -> None:
        self.exchange.next_request()
        self.deadline = self.loop.time() + self.limits.request_timeout     # to take it, and to send the next
        super().on_response_complete()

    def connection_lost(self, exc: Optional[Exception]) -> None:
        stage, detail = self.stage()
        if not self.closed_by_server and stage != "idle":
            how = (f"its connection failed ({type(exc).__name__}: {getattr(exc, 'strerror', None) or exc})"
                   if exc else "it closed its connection")
            if stage == "waiting":
                _LOG.info("%s: %s %s", self.exchange.client, how,
                          "before a worker took its request: dropped unanswered" if self.exchange.drop() else
                          "while its request was being answered")
            elif stage == "writing":
                _LOG.info("%s: %s before its response was sent", self.exchange.client, how)
            else:
                _LOG.info("%s: %s in the middle of a request (%s had come)", self.exchange.client, how, detail)
        self.deadline = None
        super().connection_lost(exc)

    def shutdown(self) -> None:
        """The server stops: close at once; a request no worker has taken is dropped."""
        self.exchange.drop()
        self.closed_by_server = True
        self.transport.close()

    # ----------------------------------------------------------------------
    # The limits
    # ----------------------------------------------------------------------
    def stage(self) -> Tuple[str, str]:
        """Where the connection is (idle, head, body, waiting, writing) and, for the log, how much has come."""
        if self.exchange.job is not None:
            return "waiting", ""
        if self.cycle is not None and not self.cycle.response_complete:
            declared = dict(self.cycle.scope["headers"]).get(b"content-length", b"0").decode("latin-1")
            came = self.exchange.body_bytes + len(self.cycle.body)
            return "body", f"{came:,} of its {int(declared) if declared.isdigit() else 0:,} body bytes"
        if self.transport is not None and self.transport.get_write_buffer_size():
            return "writing", ""
        if self.exchange.head_bytes:
            return "head", f"{self.exchange.head_bytes:,} bytes of its headers"
        return "idle", ""

    def check_deadline(self, now: float) -> None:
        """Called by the server about ten times a second (server.py's tick)."""
        if self.deadline is None or now < self.deadline or self.closed_by_server:
            return
        stage, detail = self.stage()
        if stage == "waiting":
            return                                  # the model's time; the deadline is set again with its answer
        self.deadline = None
        timeout = self.limits.request_timeout
        if stage == "writing":
            _LOG.info("dropped %s: it did not take its response within %g s (--request_timeout)",
                      self.exchange.client, timeout)
            self.closed_by_server = True
            self.transport.abort()
        elif stage == "idle":
            self.closed_by_server = True            # an idle connection, kept alive or never used: closed
            self.transport.close()
        else:
            _LOG.info("408 for %s: the request did not come whole within %g s (--request_timeout); %s came",
                      self.exchange.client, timeout, detail)
            self.refuse(408, f"the request did not come whole within {timeout:g} s")

    def refuse(self, status: int, message: str, headers: Tuple[Tuple[str, str], ...] = ()) -> None:
        """Answer an error through h11 (before the request has come whole, or in place of its answer), then
        close: the unread rest of a request cannot be skipped. The application of the request, if it runs,
        is told its client has gone, and what it would send is dropped."""
        if self.cycle is not None and not self.cycle.response_complete:
            self.cycle.disconnected = True
            self.cycle.message_event.set()
        body = error_body(message)
        fields = [("content-type", "application/json"), ("content-length", str(len(body))),
                  ("connection", "close"), *headers]
        events = (h11.Response(status_code=status, headers=fields, reason=http.HTTPStatus(status).phrase),
                  h11.Data(data=body), h11.EndOfMessage())
        try:
            for event in events:
                self.transport.write(self.conn.send(event))
        except h11.LocalProtocolError:
            pass                                    # a response had begun: the connection is closed without one
        self.closed_by_server = True
        self.transport.close()
