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
limit, a malformed body) gets HTTP 400 with ``{"error": "..."}``; the server
goes on serving.
"""

import argparse
import base64
import binascii
import http.server
import json
import logging
import os
import re
import sys
import time
from typing import List, Optional, Tuple

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

_LOG = logging.getLogger("trainer.serve")
INPUT_NAME = "image_bytes"


class RequestError(ValueError):
    """A request the server cannot answer; the message goes back to the client with HTTP 400."""


def _decode_instance(instance) -> bytes:
    """One image of a request: {"b64": ...} or {"image_bytes": {"b64": ...}}."""
    if isinstance(instance, dict) and INPUT_NAME in instance:
        instance = instance[INPUT_NAME]
    if not isinstance(instance, dict) or "b64" not in instance:
        raise RequestError(f'each image must be {{"b64": "<base64 bytes>"}} or {{"{INPUT_NAME}": {{"b64": ...}}}}')
    try:
        return base64.b64decode(instance["b64"], validate=True)
    except (binascii.Error, TypeError, ValueError) as error:
        raise RequestError(f"an image is not valid base64 ({error})") from None


def parse_predict_request(body: bytes, max_batch: int) -> Tuple[List[bytes], bool]:
    """The images of a predict request, and whether it used the row format ("instances")."""
    try:
        request = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise RequestError(f"the request body is not JSON ({error})") from None
    if not isinstance(request, dict) or ("instances" in request) == ("inputs" in request):
        raise RequestError('the request must be a JSON object with either "instances" or "inputs"')
    rows = "instances" in request
    items = request["instances"] if rows else request["inputs"]
    if isinstance(items, dict) and not rows:
        items = items.get(INPUT_NAME)
    if not isinstance(items, list):
        raise RequestError(f'"instances" (or "inputs"/"inputs.{INPUT_NAME}") must be a list of images')
    if len(items) > max_batch:
        raise RequestError(f"{len(items)} images in one request; this server takes at most {max_batch}")
    return [_decode_instance(item) for item in items], rows


def format_predict_response(outputs: dict, rows: bool) -> dict:
    values = {name: tensor.numpy() for name, tensor in outputs.items()}
    values = {name: value.astype(str) if value.dtype.kind in "OS" else value for name, value in values.items()}
    if not rows:
        return {"outputs": {name: value.tolist() for name, value in values.items()}}
    count = len(next(iter(values.values()))) if values else 0
    return {"predictions": [{name: value[index].tolist() for name, value in values.items()}
                            for index in range(count)]}


class ModelServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address, model_dir: str, model_name: str, max_batch: int):
        import tensorflow as tf
        self.loaded = tf.saved_model.load(model_dir)
        self.signature = self.loaded.signatures["serving_default"]
        self.model_name = model_name
        self.max_batch = max_batch
        super().__init__(address, RequestHandler)

    def predict(self, images: List[bytes]) -> dict:
        import tensorflow as tf
        try:
            return self.signature(image_bytes=tf.constant(images, tf.string))
        except tf.errors.InvalidArgumentError as error:
            lines = [line.strip() for line in str(error).splitlines() if line.strip()]
            messages = [line for line in lines if not line.startswith(("Graph execution error", "Detected at",
                                                                        "<stack traces", "[[", "{{"))]
            raise RequestError("; ".join(messages) or lines[-1]) from None

    def metadata(self) -> dict:
        inputs = self.signature.structured_input_signature[1]
        outputs = self.signature.structured_outputs

        def describe(spec):
            return {"dtype": spec.dtype.name, "shape": [-1 if d is None else d for d in spec.shape.as_list()]}
        return {"model_spec": {"name": self.model_name, "version": "1"},
                "metadata": {"signature_def": {"serving_default": {
                    "inputs": {name: describe(spec) for name, spec in inputs.items()},
                    "outputs": {name: describe(spec) for name, spec in outputs.items()}}}}}


class RequestHandler(http.server.BaseHTTPRequestHandler):
    server: ModelServer
    protocol_version = "HTTP/1.1"

    def _send(self, status: int, payload: dict) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _model_path(self) -> Optional[str]:
        match = re.fullmatch(r"/v1/models/([^/:]+)(?:/versions/\d+)?(/metadata|:predict)?", self.path)
        if not match or match.group(1) != self.server.model_name:
            return None
        return match.group(2) or ""

    def do_GET(self):  # noqa: N802 (http.server's name)
        route = self._model_path()
        if route == "":
            self._send(200, {"model_version_status": [{"version": "1", "state": "AVAILABLE",
                                                       "status": {"error_code": "OK", "error_message": ""}}]})
        elif route == "/metadata":
            self._send(200, self.server.metadata())
        else:
            self._send(404, {"error": f"no such resource: {self.path} (the model is {self.server.model_name!r})"})

    def do_POST(self):  # noqa: N802
        if self._model_path() != ":predict":
            self._send(404, {"error": f"POST /v1/models/{self.server.model_name}:predict, not {self.path}"})
            return
        started = time.monotonic()
        try:
            length = int(self.headers.get("Content-Length", "0"))
            images, rows = parse_predict_request(self.rfile.read(length), self.server.max_batch)
            response = format_predict_response(self.server.predict(images), rows)
        except RequestError as error:
            _LOG.info("400 for %d bytes of request: %s", length, error)
            self._send(400, {"error": str(error)})
            return
        _LOG.info("predicted %d image(s) in %.3f s", len(images), time.monotonic() - started)
        self._send(200, response)

    def log_message(self, format, *args):  # noqa: A002 (http.server's signature)
        _LOG.debug("%s " + format, self.address_string(), *args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m trainer.serve",
        description="Serve an exported model (python -m trainer's JOB_DIR/export) over HTTP with TensorFlow "
                    "Serving's REST predict API, for trying it out where TensorFlow Serving is not installed.")
    add = parser.add_argument
    add("--model", required=True, help="The exported SavedModel folder.")
    add("--model_name", default="model", help="NAME in /v1/models/NAME:predict (default model).")
    add("--host", default="127.0.0.1", help="Address to listen on (default 127.0.0.1; 0.0.0.0 for every interface).")
    add("--port", type=int, default=8501, help="Port (default 8501, TensorFlow Serving's REST port).")
    add("--max_batch", type=int, default=64, help="Most images accepted in one request (default 64).")
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        server = ModelServer((args.host, args.port), args.model, args.model_name, args.max_batch)
    except OSError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    _LOG.info("serving %s as %r on http://%s:%d/v1/models/%s:predict", args.model, args.model_name, args.host,
              server.server_address[1], args.model_name)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
