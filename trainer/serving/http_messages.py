"""HTTP/1.1 requests and responses as trainer/serving/rest_server.py reads and writes them: pure functions on bytes.

Only what a REST API needs: a request line, header fields, and a body framed by ``Content-Length``.
Everything else is refused with the status that says why (RFC 9110/9112): a malformed head 400, a
body without a declared length, chunked ones included, 411, a body over the limit 413, another HTTP
version 505, headers over 64 KiB or 100 fields 431.
"""

import dataclasses
import http
import json
import re
from typing import Dict, Tuple

MAX_HEADER_BYTES = 64 * 1024
MAX_HEADER_FIELDS = 100
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_VERSION = re.compile(r"HTTP/1\.[01]")


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


class HTTPError(Exception):
    """A request refused before it reached the application: ``status`` and a one-line reason."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def parse_head(head: bytes) -> Tuple[str, str, str, Dict[str, str]]:
    """``(method, target, version, headers)`` of a request head (the bytes before the blank line)."""
    lines = head.decode("latin-1").split("\r\n")
    while lines and not lines[0]:
        lines.pop(0)                    # an empty line before the request line may be ignored (RFC 9112, 2.2)
    parts = lines[0].split(" ") if lines else []
    if len(parts) != 3 or not _TOKEN.fullmatch(parts[0]) or not parts[1]:
        raise HTTPError(400, f"malformed request line {(lines[0] if lines else '')[:100]!r}")
    method, target, version = parts
    if not _VERSION.fullmatch(version):
        raise HTTPError(505 if version.startswith("HTTP/") else 400, f"HTTP version {version[:20]!r}: "
                        "this server speaks HTTP/1.1 and HTTP/1.0")
    if len(lines) - 1 > MAX_HEADER_FIELDS:
        raise HTTPError(431, f"{len(lines) - 1} header fields; at most {MAX_HEADER_FIELDS}")
    headers: Dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or not _TOKEN.fullmatch(name):
            raise HTTPError(400, f"malformed header field {line[:100]!r}")
        name, value = name.lower(), value.strip(" \t")
        if name == "content-length" and name in headers and headers[name] != value:
            raise HTTPError(400, "two different Content-Length fields")
        headers[name] = f"{headers[name]}, {value}" if name in headers and name != "content-length" else value
    return method, target, version, headers


def body_length(method: str, headers: Dict[str, str], max_bytes: int) -> int:
    """The body's declared length, checked against ``max_bytes`` before any of it is read."""
    if "transfer-encoding" in headers:
        raise HTTPError(411, "a chunked request body is not accepted: send the body with a Content-Length")
    declared = headers.get("content-length")
    if declared is None:
        if method in ("POST", "PUT", "PATCH"):
            raise HTTPError(411, f"a {method} request needs a Content-Length")
        return 0
    if not declared.isdigit():
        raise HTTPError(400, f"Content-Length {declared[:30]!r} is not a number of bytes")
    length = int(declared)
    if length > max_bytes:
        raise HTTPError(413, f"the request body declares {length:,} bytes; this server takes at most {max_bytes:,} "
                             "(--max_request_bytes)")
    return length


def keep_alive(version: str, headers: Dict[str, str]) -> bool:
    """HTTP/1.1 keeps the connection unless the client says close; HTTP/1.0 closes unless it says keep-alive."""
    tokens = {token.strip().lower() for token in headers.get("connection", "").split(",")}
    return "keep-alive" in tokens if version == "HTTP/1.0" else "close" not in tokens


def serialize(response: Response, keep_alive: bool) -> bytes:
    """The response's bytes: status line, headers (``Connection: close`` when the server will close), body."""
    lines = [f"HTTP/1.1 {response.status} {http.HTTPStatus(response.status).phrase}",
             f"Content-Type: {response.content_type}", f"Content-Length: {len(response.body)}"]
    lines += [f"{name}: {value}" for name, value in response.headers]
    if not keep_alive:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + response.body


def error_response(status: int, message: str, headers: Tuple[Tuple[str, str], ...] = ()) -> Response:
    """``{"error": message}``, as TensorFlow Serving's REST API answers an error."""
    return Response(status, json.dumps({"error": message}).encode(), headers=headers)
