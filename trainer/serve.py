"""``python -m trainer.serve``: serve an exported model over HTTP with TensorFlow Serving's REST API.

For trying a model, and for tests, where TensorFlow Serving itself is not at
hand; in production run TensorFlow Serving (or Vertex AI) on the same export
folder: it takes the same requests. The subset of the REST API spoken here:

- ``GET  /v1/models/NAME``           the model's status;
- ``GET  /v1/models/NAME/metadata``  the serving_default signature's inputs and outputs;
- ``POST /v1/models/NAME:predict``   a batch of images, in the row format
  ``{"instances": [{"b64": "<base64 JPEG or PNG>"}, ...]}`` (or
  ``[{"image_bytes": {"b64": ...}}, ...]``) answered with
  ``{"predictions": [{<output>: <value for that image>, ...}, ...]}``, or in the
  columnar format ``{"inputs": [{"b64": ...}, ...]}`` (or
  ``{"inputs": {"image_bytes": [...]}}``) answered with
  ``{"outputs": {<output>: <batch value>, ...}}``.

As with TensorFlow Serving, the whole request is one batch: a segmentation
``class_map`` is padded to the largest image of the request with -1, and each
prediction carries its image's ``height`` and ``width``. A request that the
model refuses (bytes that are not a JPEG or PNG image, an image over its pixel
limit, a malformed body, more than ``--max_batch`` images) gets HTTP 400 with
``{"error": "..."}``; the server goes on serving.

The HTTP server under it is uvicorn (trainer/serving/server.py), bounded as TensorFlow
Serving's REST server is, so that hostile or broken clients cannot hold it: worker
threads (``--max_concurrent``), waiting requests (``--max_queue``, then 503),
connections (``--max_connections``), request bytes (``--max_request_bytes``, 413
before the body is read) and time (``--request_timeout``). The handler is
trainer/serving/predict.py.
"""

import argparse
import logging
import signal
import sys

from trainer import console
from trainer.serving.predict import ModelService
from trainer.serving.server import Limits, Server

_LOG = logging.getLogger("trainer.serve")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m trainer.serve",
        description="Serve an exported model (python -m trainer's JOB_DIR/export) over HTTP with TensorFlow "
                    "Serving's REST predict API, for trying it out where TensorFlow Serving is not installed. "
                    "It runs on uvicorn, bounded as TensorFlow Serving's REST server is: in threads, waiting "
                    "requests, connections, request bytes and time (docs/training.md, Serving).")
    add = parser.add_argument
    add("--model", required=True, help="The exported SavedModel folder.")
    add("--model_name", default="model", help="NAME in /v1/models/NAME:predict (default model).")
    add("--host", default="127.0.0.1", help="Address to listen on (default 127.0.0.1; 0.0.0.0 for every interface).")
    add("--port", type=int, default=8501, help="Port (default 8501, TensorFlow Serving's REST port).")
    add("--max_batch", type=int, default=64, help="Most images accepted in one request (default 64); more get 400.")
    add("--max_request_bytes", type=int, default=Limits.max_request_bytes,
        help=f"Largest request body, in bytes (default {Limits.max_request_bytes:,}, 64 MiB). A request that "
             "declares more gets HTTP 413 before any of its body is read; a body must declare its length (a "
             "chunked one, or a POST without Content-Length, gets 411). Headers are at most 64 KiB (else 431).")
    add("--request_timeout", type=float, default=Limits.request_timeout,
        help=f"Seconds a client has to send a whole request, headers and body, and again to take its response "
             f"(default {Limits.request_timeout:g}, TensorFlow Serving's --rest_api_timeout_in_ms). A slower "
             "client is dropped (408 when part of a request had come); an idle kept-alive connection is closed. The "
             "time a request waits for a worker, or the model takes, does not count.")
    add("--max_concurrent", type=int, default=Limits.max_concurrent,
        help=f"Requests answered at once, by as many worker threads (default: the number of CPUs, here "
             f"{Limits.max_concurrent}).")
    add("--max_queue", type=int, default=Limits.max_queue,
        help=f"Requests that may wait for a worker (default {Limits.max_queue}). A request that finds the workers "
             "busy and the queue full gets HTTP 503 with Retry-After. The request bodies held in memory are at "
             "most (max_concurrent + max_queue) x max_request_bytes.")
    add("--max_connections", type=int, default=Limits.max_connections,
        help=f"Open connections (default {Limits.max_connections}); one more is answered 503 and closed. Reading "
             "and writing the sockets takes no thread, so slow clients hold connections, not workers.")
    console.add_log_level_arguments(parser)
    return parser


def parse_args(argv=None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    if min(args.max_batch, args.max_request_bytes, args.max_concurrent, args.max_connections) < 1 or \
            args.max_queue < 0 or args.request_timeout <= 0:
        parser.error("--max_batch, --max_request_bytes, --max_concurrent and --max_connections must be >= 1, "
                     "--max_queue >= 0 and --request_timeout > 0")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    console.configure(args.log_level)           # before TensorFlow is imported
    limits = Limits(max_request_bytes=args.max_request_bytes, request_timeout=args.request_timeout,
                    max_concurrent=args.max_concurrent, max_queue=args.max_queue,
                    max_connections=args.max_connections)
    try:
        service = ModelService(args.model, args.model_name, args.max_batch)
        server = Server((args.host, args.port), service.handle, limits)
    except OSError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: server.shutdown())
    _LOG.info("serving %s as %r on http://%s:%d/v1/models/%s:predict (%d workers, %d queued, %d connections, "
              "%s bytes a request, %g s timeout)", args.model, args.model_name, args.host, server.server_address[1],
              args.model_name, limits.max_concurrent, limits.max_queue, limits.max_connections,
              f"{limits.max_request_bytes:,}", limits.request_timeout)
    server.serve_forever()
    _LOG.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
