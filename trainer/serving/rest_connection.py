"""One client connection of trainer/serving/rest_server.py: its non-blocking socket, the bytes in and out, and how far
its current request has come. The server decides what to do; this only moves and frames bytes."""

import socket
from typing import Dict, Optional, Tuple

from trainer.serving.http_messages import MAX_HEADER_BYTES, HTTPError, Request, body_length, keep_alive, parse_head

READ_CHUNK = 256 * 1024
SEND_CHUNK = 1 << 20
# What a connection is doing: reading a request, waiting for its answer (queued or with a worker), writing a
# response, or lingering (reading and dropping what the client still sends after an error, before closing).
READING, WAITING, WRITING, LINGERING = "reading", "waiting", "writing", "lingering"


class Connection:
    def __init__(self, sock: socket.socket, client: str, deadline: float):
        sock.setblocking(False)
        self.sock, self.client = sock, client
        self.state = READING
        self.deadline = deadline            # when the current step must be done by (not while WAITING)
        self.inbox = bytearray()
        self.outbox = memoryview(b"")
        self.head: Optional[Tuple[str, str, str, Dict[str, str]]] = None   # method, target, version, headers
        self.length = 0                     # the current request's declared body length
        self.keep_alive = True
        self.holds_place = False            # one of the server's max_concurrent + max_queue places
        self.task = None                    # the request's rest_pool.Task while WAITING
        self.dropped = 0                    # bytes read and dropped while LINGERING
        self.events = 0                     # the selector events it is registered for

    def receive(self) -> Optional[bytes]:
        """Bytes from the client (b"" when it closed), None when none are there yet; OSError when the socket
        failed."""
        try:
            return self.sock.recv(READ_CHUNK)
        except (BlockingIOError, InterruptedError):
            return None

    def send_pending(self) -> bool:
        """Send what the socket takes now; True once the outbox is empty. OSError when the client is gone."""
        while self.outbox:
            try:
                sent = self.sock.send(self.outbox[:SEND_CHUNK])
            except (BlockingIOError, InterruptedError):
                return False
            self.outbox = self.outbox[sent:]
        return True

    def queue(self, data: bytes) -> None:
        self.outbox = memoryview(bytes(self.outbox) + data) if self.outbox else memoryview(data)

    def take_head(self, max_request_bytes: int) -> bool:
        """Parse the request's head once it has come whole; True when it has. Raises HTTPError for a head that
        is malformed, too large (431), or declares a body that is not accepted (411, 413)."""
        if self.head is not None:
            return True
        end = self.inbox.find(b"\r\n\r\n")
        if (end if end >= 0 else len(self.inbox)) > MAX_HEADER_BYTES:
            raise HTTPError(431, f"the request's headers are over {MAX_HEADER_BYTES:,} bytes")
        if end < 0:
            return False
        head = parse_head(bytes(self.inbox[:end]))
        length = body_length(head[0], head[3], max_request_bytes)
        del self.inbox[:end + 4]
        self.head, self.length, self.keep_alive = head, length, keep_alive(head[2], head[3])
        return True

    def expects_continue(self) -> bool:
        """The client waits for ``100 Continue`` before it sends a body that has not come yet."""
        return (self.head is not None and self.head[3].get("expect", "").lower() == "100-continue"
                and len(self.inbox) < self.length)

    def take_request(self) -> Optional[Request]:
        """The request, once its body has come whole; the bytes after it stay for the next one."""
        if self.head is None or len(self.inbox) < self.length:
            return None
        method, target, _, headers = self.head
        body = bytes(self.inbox[:self.length])
        del self.inbox[:self.length]
        self.head, self.length = None, 0
        return Request(method, target.split("?", 1)[0], headers, body, self.client)

    def mid_request(self) -> bool:
        return bool(self.inbox) or self.head is not None

    def received(self) -> str:
        """How much of the current request has come, for the log."""
        if self.head is None:
            return f"{len(self.inbox):,} bytes of its headers"
        return f"{len(self.inbox):,} of its {self.length:,} body bytes"
