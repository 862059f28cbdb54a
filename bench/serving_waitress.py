"""trainer.serve's predict handler on waitress 3.0.2, with waitress's own limits only: the candidate server
``bench/serving_load.py --waitress`` measures beside ``python -m trainer.serve`` (docs/benchmarks.md). Not
the product: no 503 for a full queue or too many connections (waitress stops accepting), no 411, no 408
(its channel_timeout is a time of silence), and errors answered in plain text.

Run (waitress is not a pinned dependency: pip install waitress==3.0.2 first)
    .venv/bin/python bench/serving_waitress.py --model EXPORT_DIR --port 8501
"""

import argparse
import http
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def application(service, request_type):
    """A WSGI application calling ``service.handle`` (trainer/serving/predict.py) on a waitress thread."""
    def app(environ, start_response):
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        headers = {name[5:].replace("_", "-").lower(): value for name, value in environ.items()
                   if name.startswith("HTTP_")}
        client = f"{environ.get('REMOTE_ADDR')}:{environ.get('REMOTE_PORT')}"
        response = service.handle(request_type(environ["REQUEST_METHOD"], environ.get("PATH_INFO", "/"), headers,
                                               body, client))
        start_response(f"{response.status} {http.HTTPStatus(response.status).phrase}",
                       [("Content-Type", response.content_type), ("Content-Length", str(len(response.body))),
                        *response.headers])
        return [response.body]
    return app


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="a SavedModel exported by python -m trainer")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8501)
    args = parser.parse_args(argv)
    from trainer import console
    console.configure("info")
    import waitress

    from trainer.serving.predict import ModelService
    from trainer.serving.server import Limits, Request
    limits = Limits()                           # trainer.serve's defaults, where waitress has the setting
    service = ModelService(args.model, "model", 64)
    waitress.serve(application(service, Request), host=args.host, port=args.port, threads=limits.max_concurrent,
                   connection_limit=limits.max_connections, max_request_body_size=limits.max_request_bytes,
                   max_request_header_size=64 * 1024, channel_timeout=int(limits.request_timeout), ident=None,
                   _quiet=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
