"""The predict handler of ``python -m trainer.serve``: TensorFlow Serving's REST API on one SavedModel.

Routes, predict requests in the row (``instances``) and columnar (``inputs``) formats, and their answers; a
request the model refuses is HTTP 400 with ``{"error": ...}``. It owns no socket: trainer/serving/server.py
calls :meth:`ModelService.handle` on its worker threads. TensorFlow is imported when the model is loaded.
"""

import base64
import binascii
import json
import logging
import re
import time
from typing import List, Optional, Tuple

from trainer.serving.server import Request, Response

_LOG = logging.getLogger("trainer.serve")
INPUT_NAME = "image_bytes"


_ASSERTION = re.compile(r"assertion failed: \[(?P<what>[^\]]*)\] \[(?P<values>.*)\]\s*$")


def _in_words(message: str) -> str:
    """A refusal of the export's checks (trainer/export/signature.py's Assert ops, which TensorFlow prints as
    ``assertion failed: [text] [values]``) said in words: ``image_bytes: entries 1, 3 (0-based) of the request are
    not JPEG or PNG images``, ``... entry 0 is 20000x20000``; any other message as it is."""
    found = _ASSERTION.search(message)
    if found is None:
        return message
    what, numbers = found["what"].rstrip(": "), [int(n) for n in re.findall(r"-?\d+", found["values"])]
    if "not JPEG or PNG" in what:
        entries = ", ".join(map(str, numbers))
        if len(numbers) == 1:
            return f"{INPUT_NAME}: entry {entries} (0-based) of the request is not a JPEG or PNG image"
        return f"{INPUT_NAME}: entries {entries} (0-based) of the request are not JPEG or PNG images"
    if "over the served limit" in what:
        limit = re.search(r"limit of (\d+) pixels", what)
        sizes = ", ".join(f"entry {e} is {w}x{h} ({h * w:,} pixels)"
                          for e, h, w in zip(numbers[0::3], numbers[1::3], numbers[2::3]))
        return f"{INPUT_NAME}: {sizes}, over the served limit of {int(limit[1]):,} pixels" if limit else message
    return f"{what}: {', '.join(map(str, numbers))}"


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


class ModelService:
    """The REST API of one SavedModel: ``handle(Request) -> Response``, called on trainer/serving/server.py's
    worker threads (several at once: a loaded signature may be called from several threads)."""

    def __init__(self, model_dir: str, model_name: str, max_batch: int):
        import tensorflow as tf
        self.loaded = tf.saved_model.load(model_dir)
        self.signature = self.loaded.signatures["serving_default"]
        self.model_name = model_name
        self.max_batch = max_batch

    def predict(self, images: List[bytes]) -> dict:
        import tensorflow as tf
        try:
            return self.signature(image_bytes=tf.constant(images, tf.string))
        except tf.errors.InvalidArgumentError as error:
            lines = [line.strip() for line in str(error).splitlines() if line.strip()]
            messages = [line for line in lines if not line.startswith(("Graph execution error", "Detected at",
                                                                        "<stack traces", "[[", "{{"))]
            raise RequestError("; ".join(_in_words(message) for message in messages) or lines[-1]) from None

    def metadata(self) -> dict:
        inputs = self.signature.structured_input_signature[1]
        outputs = self.signature.structured_outputs

        def describe(spec):
            return {"dtype": spec.dtype.name, "shape": [-1 if d is None else d for d in spec.shape.as_list()]}
        return {"model_spec": {"name": self.model_name, "version": "1"},
                "metadata": {"signature_def": {"serving_default": {
                    "inputs": {name: describe(spec) for name, spec in inputs.items()},
                    "outputs": {name: describe(spec) for name, spec in outputs.items()}}}}}

    def _route(self, path: str) -> Optional[str]:
        match = re.fullmatch(r"/v1/models/([^/:]+)(?:/versions/\d+)?(/metadata|:predict)?", path)
        if not match or match.group(1) != self.model_name:
            return None
        return match.group(2) or ""

    def handle(self, request: Request) -> Response:
        route = self._route(request.path)
        if request.method == "GET" and route == "":
            return _json(200, {"model_version_status": [{"version": "1", "state": "AVAILABLE",
                                                         "status": {"error_code": "OK", "error_message": ""}}]})
        if request.method == "GET" and route == "/metadata":
            return _json(200, self.metadata())
        if request.method == "POST" and route == ":predict":
            return self._predict(request)
        if route is not None:
            return _json(405, {"error": f"{request.method} {request.path}: GET the model or its /metadata, "
                                        f"POST :predict"})
        return _json(404, {"error": f"no such resource: {request.path} (the model is {self.model_name!r})"})

    def _predict(self, request: Request) -> Response:
        started = time.monotonic()
        try:
            images, rows = parse_predict_request(request.body, self.max_batch)
            response = format_predict_response(self.predict(images), rows)
        except RequestError as error:
            _LOG.info("400 for %s (%d bytes of request): %s", request.client, len(request.body), error)
            return _json(400, {"error": str(error)})
        _LOG.info("predicted %d image(s) for %s in %.3f s", len(images), request.client, time.monotonic() - started)
        return _json(200, response)


def _json(status: int, payload: dict) -> Response:
    return Response(status, json.dumps(payload).encode())
