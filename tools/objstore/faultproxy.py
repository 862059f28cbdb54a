"""A counting, fault-injecting HTTP reverse proxy for local object-store servers (S3 or GCS JSON API).

    python faultproxy.py --upstream http://127.0.0.1:PORT [--port 0] [--dialect s3|gcs] [--port_file F]

Every request is forwarded to the upstream server unchanged (Host header included, so SigV4
signatures and the GCS emulators' self-links stay valid) and counted by operation kind
(HEAD, GET, LIST, PUT, UPLOAD_PART, COPY, DELETE, ...). Admin endpoints, never forwarded:

    GET  /__proxy__/stats            -> {"counts": {kind: n}, "log": [[method, path, kind, status], ...]}
    POST /__proxy__/reset            -> zero the counters and the log
    POST /__proxy__/faults  (JSON)   -> replace the fault rules, e.g.
         [{"kind": "GET", "every": 3, "status": 503, "code": "SlowDown", "limit": 10},
          {"kind": "UPLOAD_PART", "every": 2, "mode": "reset"}]
         kind "*" matches every request; "every": N fails the Nth, 2Nth, ... matching request;
         "limit" caps how many are failed; "mode" is "status" (an error response in the dialect's
         format) or "reset" (the connection is closed without an answer).
    GET  /__proxy__/faults           -> the rules with how many requests each has failed

Runs in its own process so that every SDK worker process of a pipeline shares one set of counters.
"""

import argparse
import http.client
import http.server
import json
import os
import socket
import sys
import threading
import urllib.parse

# Run as a script (servers.FaultProxy starts python tools/objstore/faultproxy.py): the checkout's
# root goes first on sys.path so that the sibling module imports by its package name.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from tools.objstore.proxy_dialects import error_body, gcs_kind, s3_kind  # noqa: E402

ADMIN = "/__proxy__/"


class State:
    def __init__(self, dialect):
        self.dialect = dialect
        self.lock = threading.Lock()
        self.counts = {}
        self.log = []
        self.rules = []

    def classify(self, method, raw_path, headers):
        parsed = urllib.parse.urlsplit(raw_path)
        query = urllib.parse.parse_qs(parsed.query, keep_blank_values=True)
        path = urllib.parse.unquote(parsed.path)
        kind = (s3_kind if self.dialect == "s3" else gcs_kind)(method, path, query, headers)
        return kind, path

    def fault_for(self, kind):
        """The rule that fails this request, if any (counts matches under the lock)."""
        with self.lock:
            self.counts[kind] = self.counts.get(kind, 0) + 1
            for rule in self.rules:
                if rule["kind"] not in ("*", kind):
                    continue
                rule["seen"] += 1
                if rule["seen"] % rule["every"] == 0 and rule["failed"] < rule.get("limit", 10 ** 9):
                    rule["failed"] += 1
                    return rule
        return None

    def record(self, entry):
        with self.lock:
            if len(self.log) < 200000:
                self.log.append(entry)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state: State = None
    upstream = None  # (host, port)
    _local = threading.local()

    def log_message(self, fmt, *args):  # quiet
        pass

    def _upstream_conn(self):
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = http.client.HTTPConnection(*self.upstream, timeout=120)
            self._local.conn = conn
        return conn

    def _read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _admin(self, method):
        state = self.state
        route = self.path[len(ADMIN):].split("?")[0]
        body = self._read_body()
        if route == "stats":
            with state.lock:
                payload = {"counts": dict(state.counts), "log": list(state.log)}
        elif route == "reset" and method == "POST":
            with state.lock:
                state.counts.clear()
                state.log.clear()
                for rule in state.rules:
                    rule["seen"] = rule["failed"] = 0
            payload = {"ok": True}
        elif route == "faults" and method == "POST":
            rules = json.loads(body or b"[]")
            for rule in rules:
                rule.setdefault("kind", "*")
                rule.setdefault("every", 1)
                rule.setdefault("mode", "status")
                rule.setdefault("status", 503)
                rule.setdefault("code", "SlowDown" if state.dialect == "s3" else "backendError")
                rule["seen"] = rule["failed"] = 0
            with state.lock:
                state.rules = rules
            payload = {"ok": True, "rules": rules}
        elif route == "faults":
            with state.lock:
                payload = {"rules": list(state.rules)}
        else:
            self.send_error(404)
            return
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _proxy(self, method):
        if self.path.startswith(ADMIN):
            return self._admin(method)
        state = self.state
        body = self._read_body()
        kind, path = state.classify(method, self.path, self.headers)
        rule = state.fault_for(kind)
        if rule is not None:
            state.record([method, self.path, kind, "fault:" + rule["mode"]])
            if rule["mode"] == "reset":
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                return
            data, ctype = error_body(state.dialect, rule["status"], rule["code"])
            self.send_response(rule["status"])
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if method != "HEAD":      # a HEAD answer has no body: one would be read as the next answer
                self.wfile.write(data)
            return
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("transfer-encoding", "connection")}
        if body or method in ("PUT", "POST"):
            headers["Content-Length"] = str(len(body))
        for attempt in range(2):
            conn = self._upstream_conn()
            try:
                conn.request(method, self.path, body=body, headers=headers)
                response = conn.getresponse()
                data = response.read()
                break
            except (http.client.HTTPException, OSError):
                conn.close()
                self._local.conn = None
                if attempt:
                    raise
        state.record([method, self.path, kind, response.status])
        self.send_response(response.status)
        for key, value in response.getheaders():
            if key.lower() in ("transfer-encoding", "connection", "content-length"):
                continue
            self.send_header(key, value)
        if method == "HEAD":  # a HEAD answer carries the object's length, not the (empty) body's
            self.send_header("Content-Length", response.getheader("Content-Length", "0"))
        else:
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if method != "HEAD":
            self.wfile.write(data)

    def do_GET(self):
        self._proxy("GET")

    def do_HEAD(self):
        self._proxy("HEAD")

    def do_PUT(self):
        self._proxy("PUT")

    def do_POST(self):
        self._proxy("POST")

    def do_DELETE(self):
        self._proxy("DELETE")

    def do_PATCH(self):
        self._proxy("PATCH")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--dialect", choices=("s3", "gcs"), default="s3")
    parser.add_argument("--port_file")
    args = parser.parse_args(argv)
    upstream = urllib.parse.urlsplit(args.upstream)
    Handler.state = State(args.dialect)
    Handler.upstream = (upstream.hostname, upstream.port)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    port = server.server_address[1]
    if args.port_file:
        with open(args.port_file, "w") as handle:
            handle.write(str(port))
    print(f"faultproxy on http://127.0.0.1:{port} -> {args.upstream} ({args.dialect})", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
