"""The HTTP/1.1 server under trainer/serve.py, bounded so that hostile clients cannot hold it.

TensorFlow Serving's REST server in spirit (a fixed pool of request threads, a deadline, a largest message),
with nginx's client limits. One thread, this loop on :mod:`selectors`, accepts connections and moves every
socket's bytes without blocking (rest_connection.py), so a slow client holds no thread. At most
``max_connections`` connections are open (one more: 503, closed). A request must come whole within
``request_timeout`` of its connection being ready for it, and its response be taken within as long (else 408,
or closed). Headers are at most 64 KiB (431); a body declares its length (411), at most ``max_request_bytes``
(413 before any of it is read). From the end of its headers to its response a request holds one of
``max_concurrent + max_queue`` places (none free: 503 with Retry-After); ``max_concurrent`` workers answer
(rest_pool.py). So the bodies held are at most (max_concurrent + max_queue) x max_request_bytes. A client that
disconnects is one log line, and its request is dropped if no worker has taken it yet.
"""

import collections
import dataclasses
import logging
import os
import selectors
import socket
import threading
import time
from typing import Callable, Optional, Tuple

from trainer.serving.http_messages import HTTPError, Request, Response, error_response, serialize
from trainer.serving.rest_connection import LINGERING, READING, WAITING, WRITING, Connection
from trainer.serving.rest_pool import Task, WorkerPool

_LOG = logging.getLogger("trainer.serve")
LINGER_SECONDS = 2.0        # after an error answer, what the client still sends is read and dropped this long at
LINGER_BYTES = 1 << 20      # most, and this much: closing on unread bytes resets the connection, and the client
TICK = 0.25                 # could lose the answer. The loop checks the deadlines this often.
READ_AHEAD = 64 * 1024      # bytes of a next request read while the current one is answered


@dataclasses.dataclass(frozen=True)
class Limits:
    """The server's bounds (trainer/serve.py's options)."""
    max_request_bytes: int = 64 << 20           # a larger declared body gets 413 before any of it is read
    request_timeout: float = 30.0               # seconds for a request to come whole, and for its response to go
    max_concurrent: int = os.cpu_count() or 1   # worker threads: requests answered at once
    max_queue: int = 32                         # requests waiting for a worker; one more gets 503
    max_connections: int = 64                   # open connections; one more gets 503 and is closed


class Server:
    """``Server(("127.0.0.1", 8501), handle, Limits()).serve_forever()``; ``shutdown()``, from any thread or a
    signal handler, stops it."""

    def __init__(self, address, handle: Callable[[Request], Response], limits: Limits = Limits()):
        self.limits = limits
        self._listener = socket.create_server(address, backlog=max(limits.max_connections, 16))
        self._listener.setblocking(False)
        self.server_address = self._listener.getsockname()
        self._wake_read, self._wake_write = socket.socketpair()
        self._wake_read.setblocking(False)
        self._wake_write.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ)
        self._selector.register(self._wake_read, selectors.EVENT_READ)
        self._connections = set()
        self._places = 0                            # requests past their headers and not yet answered
        self._answers = collections.deque()         # (Task, Response) from the workers
        self._pool = WorkerPool(handle, limits.max_concurrent, self._answered_by_worker)
        self._stopping = threading.Event()

    def serve_forever(self) -> None:
        self._pool.start()
        try:
            while not self._stopping.is_set():
                for key, events in self._selector.select(TICK):
                    if key.fileobj is self._listener:
                        self._accept()
                    elif key.fileobj is self._wake_read:
                        self._drain_wakeups()
                    elif events & selectors.EVENT_READ:
                        self._on_readable(key.data)
                    elif events & selectors.EVENT_WRITE:
                        self._send(key.data)
                self._deliver_answers()
                self._expire(time.monotonic())
        finally:
            self._close_all()

    def shutdown(self) -> None:
        self._stopping.set()
        self._wake()

    def _wake(self) -> None:
        try:
            self._wake_write.send(b"\0")
        except OSError:
            pass                                    # a wake-up is pending already, or the server is closed

    def _drain_wakeups(self) -> None:
        try:
            self._wake_read.recv(4096)
        except OSError:
            pass

    def _watch(self, connection: Connection, events: int) -> None:
        if events != connection.events and not events:
            self._selector.unregister(connection.sock)
        elif events != connection.events:
            (self._selector.modify if connection.events else self._selector.register)(connection.sock, events,
                                                                                         connection)
        connection.events = events

    def _accept(self) -> None:
        while True:
            try:
                sock, address = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as error:                # out of file descriptors, or reset before it was accepted
                _LOG.warning("cannot accept a connection: %s", error)
                return
            client = f"{address[0]}:{address[1]}"
            if len(self._connections) >= self.limits.max_connections:
                _LOG.info("503 for %s: %d connections are open (--max_connections)", client, len(self._connections))
                try:
                    sock.send(serialize(error_response(503, "the server is busy: too many open connections; retry later",
                                               (("Retry-After", "1"),)), keep_alive=False))
                except OSError:
                    pass
                sock.close()
                continue
            connection = Connection(sock, client, time.monotonic() + self.limits.request_timeout)
            self._connections.add(connection)
            self._watch(connection, selectors.EVENT_READ)

    def _expire(self, now: float) -> None:
        for connection in [c for c in self._connections if c.state != WAITING and c.deadline <= now]:
            if connection.state == WRITING:
                _LOG.info("dropped %s: it did not take its response within %g s (--request_timeout)",
                          connection.client, self.limits.request_timeout)
            if connection.state == READING and connection.mid_request():
                _LOG.info("408 for %s: the request did not come whole within %g s (--request_timeout); %s came",
                          connection.client, self.limits.request_timeout, connection.received())
                self._refuse(connection, 408, f"the request did not come whole within "
                                              f"{self.limits.request_timeout:g} s", log=False)
            else:
                self._close(connection)             # lingering done, a stalled reader, or an idle connection

    # ----------------------------------------------------------------------
    # Requests in
    # ----------------------------------------------------------------------
    def _on_readable(self, connection: Connection) -> None:
        try:
            data = connection.receive()
        except OSError as error:
            self._lost(connection, error)
            return
        if data is None:
            return
        if connection.state == LINGERING:
            connection.dropped += len(data)
            if not data or connection.dropped > LINGER_BYTES:
                self._close(connection)
            return
        if not data:
            self._lost(connection, None)
            return
        connection.inbox += data
        if connection.state == READING:
            self._advance(connection)
        elif len(connection.inbox) > READ_AHEAD:
            self._watch(connection, 0)              # the next request waits its turn, in the socket's buffers

    def _advance(self, connection: Connection) -> None:
        """Take the request's head and body as they come; hand the request to the workers once it is whole."""
        if connection.head is None:
            try:
                if not connection.take_head(self.limits.max_request_bytes):
                    return
            except HTTPError as error:
                self._refuse(connection, error.status, str(error))
                return
            if self._places >= self.limits.max_concurrent + self.limits.max_queue:
                self._refuse(connection, 503, f"the server is busy: {self._places} requests are being answered "
                                              "or waiting; retry later", (("Retry-After", "1"),))
                return
            self._places += 1
            connection.holds_place = True
            if connection.expects_continue():
                connection.queue(b"HTTP/1.1 100 Continue\r\n\r\n")
                self._send(connection)
        request = connection.take_request()
        if request is None:
            return
        connection.state = WAITING
        connection.task = self._pool.submit(connection, request)
        # Read on while it waits: a client that closes its connection is seen, and its request dropped.
        self._watch(connection, selectors.EVENT_READ if len(connection.inbox) <= READ_AHEAD else 0)

    # ----------------------------------------------------------------------
    # Responses out
    # ----------------------------------------------------------------------
    def _answered_by_worker(self, task: Task, response: Response) -> None:
        self._answers.append((task, response))      # on a worker's thread: the loop takes it from here
        self._wake()

    def _deliver_answers(self) -> None:
        while self._answers:
            task, response = self._answers.popleft()
            connection = task.owner
            connection.task = None
            if connection not in self._connections:
                self._release(connection)           # its client has gone: the answer is dropped
                continue
            connection.state = WRITING
            connection.deadline = time.monotonic() + self.limits.request_timeout
            connection.queue(serialize(response, connection.keep_alive))
            self._send(connection)

    def _send(self, connection: Connection) -> None:
        try:
            done = connection.send_pending()
        except OSError as error:
            self._lost(connection, error)
            return
        if not done:
            self._watch(connection, selectors.EVENT_WRITE)
        elif connection.state == WRITING:
            self._release(connection)
            if connection.keep_alive:
                self._next_request(connection)
            else:
                self._linger(connection)
        else:
            self._watch(connection, selectors.EVENT_READ)   # a 100 Continue went out: the body comes next

    def _next_request(self, connection: Connection) -> None:
        connection.state = READING
        connection.deadline = time.monotonic() + self.limits.request_timeout
        self._watch(connection, selectors.EVENT_READ)
        if connection.inbox:
            self._advance(connection)

    def _refuse(self, connection: Connection, status: int, message: str,
                headers: Tuple[Tuple[str, str], ...] = (), log: bool = True) -> None:
        """Answer an error before the request has come whole, then close: its unread rest cannot be skipped."""
        if log:
            _LOG.info("%d for %s: %s", status, connection.client, message)
        connection.keep_alive = False
        connection.state = WRITING
        connection.deadline = time.monotonic() + self.limits.request_timeout
        connection.queue(serialize(error_response(status, message, headers), keep_alive=False))
        self._send(connection)

    def _linger(self, connection: Connection) -> None:
        """Half-close; read and drop what the client still sends, for a moment, before closing."""
        try:
            connection.sock.shutdown(socket.SHUT_WR)
        except OSError:
            self._close(connection)
            return
        connection.state, connection.deadline = LINGERING, time.monotonic() + LINGER_SECONDS
        self._watch(connection, selectors.EVENT_READ)

    # ----------------------------------------------------------------------
    # Clients gone, and closing
    # ----------------------------------------------------------------------
    def _lost(self, connection: Connection, error: Optional[OSError]) -> None:
        """The client closed its connection (``error`` None) or its socket failed: one log line, and close."""
        how = f"its connection failed ({type(error).__name__}: {error.strerror or error})" if error else \
            "it closed its connection"
        if connection.state == WAITING:
            dropped = connection.task is not None and self._pool.drop(connection.task)
            _LOG.info("%s: %s %s", connection.client, how, "before a worker took its request: dropped unanswered"
                      if dropped else "while its request was being answered")
        elif connection.state == WRITING:
            _LOG.info("%s: %s before its response was sent", connection.client, how)
        elif connection.state == READING and connection.mid_request():
            _LOG.info("%s: %s in the middle of a request (%s had come)", connection.client, how,
                      connection.received())
        self._close(connection)

    def _release(self, connection: Connection) -> None:
        if connection.holds_place:
            connection.holds_place = False
            self._places -= 1

    def _close(self, connection: Connection) -> None:
        if connection not in self._connections:
            return
        self._connections.discard(connection)
        if connection.task is None or self._pool.drop(connection.task):
            self._release(connection)               # a request being answered keeps its place until it is done
        self._watch(connection, 0)
        connection.sock.close()

    def _close_all(self) -> None:
        for connection in list(self._connections):
            self._close(connection)
        self._pool.stop()
        for sock in (self._listener, self._wake_read, self._wake_write):
            sock.close()
        self._selector.close()
