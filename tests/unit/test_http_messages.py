"""trainer/serving/http_messages.py on hand-written request heads: what is read, and what is refused with which status."""

import pytest

from trainer.serving.http_messages import (HTTPError, Response, body_length, error_response, keep_alive, parse_head,
                                   serialize)


def test_a_request_head_is_read():
    method, target, version, headers = parse_head(
        b"POST /v1/models/m:predict?x=1 HTTP/1.1\r\nHost: localhost:8501\r\nContent-Length:  12 \r\n"
        b"Accept: a\r\naccept: b")
    assert (method, target, version) == ("POST", "/v1/models/m:predict?x=1", "HTTP/1.1")
    assert headers == {"host": "localhost:8501", "content-length": "12", "accept": "a, b"}


@pytest.mark.parametrize("head, status, message", [
    (b"GARBAGE", 400, "malformed request line 'GARBAGE'"),
    (b"GET /  HTTP/1.1", 400, "malformed request line 'GET /  HTTP/1.1'"),
    (b"GET / HTTP/2.0", 505, "HTTP version 'HTTP/2.0': this server speaks HTTP/1.1 and HTTP/1.0"),
    (b"GET / SPDY/3", 400, "HTTP version 'SPDY/3': this server speaks HTTP/1.1 and HTTP/1.0"),
    (b"GET / HTTP/1.1\r\nno colon here", 400, "malformed header field 'no colon here'"),
    (b"GET / HTTP/1.1\r\nHost : x", 400, "malformed header field 'Host : x'"),
    (b"GET / HTTP/1.1\r\n folded", 400, "malformed header field ' folded'"),
    (b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2", 400, "two different Content-Length fields"),
    (b"GET / HTTP/1.1" + b"\r\nX: y" * 101, 431, "101 header fields; at most 100"),
])
def test_a_malformed_head_is_refused_with_its_status(head, status, message):
    with pytest.raises(HTTPError) as refused:
        parse_head(head)
    assert (refused.value.status, str(refused.value)) == (status, message)


@pytest.mark.parametrize("method, headers, expected", [
    ("GET", {}, 0),
    ("POST", {"content-length": "0"}, 0),
    ("POST", {"content-length": "1000"}, 1000),
    ("POST", {}, (411, "a POST request needs a Content-Length")),
    ("POST", {"transfer-encoding": "chunked"},
     (411, "a chunked request body is not accepted: send the body with a Content-Length")),
    ("POST", {"content-length": "-1"}, (400, "Content-Length '-1' is not a number of bytes")),
    ("POST", {"content-length": "1001"},
     (413, "the request body declares 1,001 bytes; this server takes at most 1,000 (--max_request_bytes)")),
])
def test_the_body_length_is_declared_and_bounded(method, headers, expected):
    if isinstance(expected, int):
        assert body_length(method, headers, 1000) == expected
        return
    with pytest.raises(HTTPError) as refused:
        body_length(method, headers, 1000)
    assert (refused.value.status, str(refused.value)) == expected


@pytest.mark.parametrize("version, connection, kept", [
    ("HTTP/1.1", None, True), ("HTTP/1.1", "close", False), ("HTTP/1.1", "Keep-Alive, Close", False),
    ("HTTP/1.0", None, False), ("HTTP/1.0", "keep-alive", True),
])
def test_keep_alive(version, connection, kept):
    assert keep_alive(version, {} if connection is None else {"connection": connection}) is kept


def test_a_response_is_framed_by_its_length():
    assert serialize(Response(200, b'{"a": 1}'), keep_alive=True) == (
        b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 8\r\n\r\n{"a": 1}')
    assert serialize(error_response(503, "busy", (("Retry-After", "1"),)), keep_alive=False) == (
        b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: 17\r\n"
        b'Retry-After: 1\r\nConnection: close\r\n\r\n{"error": "busy"}')
