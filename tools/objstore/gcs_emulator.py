"""gcp-storage-emulator (2026.7.19) with four gaps filled that Beam, TensorFlow 2.21 and the tests hit.

    python gcs_emulator.py start --host 127.0.0.1 --port PORT --in-memory

1. An empty media upload (uploadType=media, no body): TF creates directory markers ("dir/"
   objects) that way (makedirs, SavedModel, tf.Transform); the emulator reads the missing body as
   None and answers nothing (TypeError in handlers/objects.py _media_upload).
2. GET /storage/v1/b/<bucket>/storageLayout: TF's RenameFile asks for it first (hierarchical
   namespace check) and fails on the emulator's 404. Answered as a flat (non-HNS) bucket.
3. Preconditions: ifGenerationMatch on uploads (media, multipart, resumable start and finish) and
   on delete, answered 412 like GCS (0 = "only if absent"). The emulator serves one request at a
   time (http.server.HTTPServer), so check-then-write is atomic, as GCS's own precondition is.
4. Paged listing: the emulator returns every object in one answer; GCS pages at maxResults
   (default and maximum 1000) with nextPageToken. Pages here hold at most GCS_EMULATOR_PAGE_SIZE
   (environment; default 1000, as GCS) or maxResults items, so clients' pagination is exercised
   without uploading thousands of objects to a server that serves one request at a time.

Same arguments as `gcp-storage-emulator`. The patches reach into the emulator's handlers, so its
version is pinned exactly (requirements.txt); tests/integration/test_objstore_servers.py checks each patch.
"""

import json
import os
import sys
from http import HTTPStatus

from gcp_storage_emulator import __main__ as emulator_main
from gcp_storage_emulator import server
from gcp_storage_emulator.handlers import objects

_media_upload = objects._media_upload
PAGE_SIZE = int(os.environ.get("GCS_EMULATOR_PAGE_SIZE", "1000"))


def _media_upload_allowing_empty(request, response, storage):
    if request.data is None:
        request._data = b""
    return _media_upload(request, response, storage)


objects._media_upload = _media_upload_allowing_empty


def _storage_layout(request, response, storage, *args, **kwargs):
    name = request.params.get("bucket_name")
    if name and storage.buckets.get(name):
        response.json({"kind": "storage#storageLayout", "bucket": name, "location": "US",
                       "locationType": "multi-region"})
    else:
        response.status = HTTPStatus.NOT_FOUND


def _current_generation(storage, bucket_name, object_name):
    try:
        return int(storage.get_file_obj(bucket_name, object_name)["generation"])
    except objects.NotFound:
        return 0


def _precondition_failed(request, response, storage, object_name):
    """True (and a 412 answer) when ifGenerationMatch does not hold for object_name."""
    wanted = request.query.get("ifGenerationMatch")
    if not wanted or object_name is None:
        return False
    current = _current_generation(storage, request.params["bucket_name"], object_name)
    if int(wanted[0]) == current:
        return False
    response.status = HTTPStatus.PRECONDITION_FAILED
    response.json({"error": {"code": 412, "message": "At least one of the pre-conditions you specified did not hold.",
                             "errors": [{"reason": "conditionNotMet", "domain": "global",
                                         "message": "Precondition Failed"}]}})
    return True


def _upload_name(request):
    if request.query.get("name"):
        return request.query["name"][0]
    data = request.data
    if isinstance(data, dict):
        return (data.get("meta") or data).get("name")
    return None


def _insert(request, response, storage, *args, **kwargs):
    if _precondition_failed(request, response, storage, _upload_name(request)):
        return None
    return objects.insert(request, response, storage, *args, **kwargs)


def _upload_partial(request, response, storage, *args, **kwargs):
    # the session URL repeats the start request's query (name, ifGenerationMatch)
    if _precondition_failed(request, response, storage, _upload_name(request)):
        return None
    return objects.upload_partial(request, response, storage, *args, **kwargs)


def _delete(request, response, storage, *args, **kwargs):
    if _precondition_failed(request, response, storage, request.params.get("object_id")):
        return None
    return objects.delete(request, response, storage, *args, **kwargs)


def _ls_paged(request, response, storage, *args, **kwargs):
    """objects.ls, then cut the items to one page (token = index of the first item of the page)."""
    objects.ls(request, response, storage, *args, **kwargs)
    if response.status != HTTPStatus.OK or not isinstance(response._content, (str, bytes)):
        return
    payload = json.loads(response._content)
    items = sorted(payload.get("items") or [], key=lambda item: item["name"])
    start = int(request.query.get("pageToken", ["0"])[0] or 0)
    size = min(int(request.query.get("maxResults", ["1000"])[0]), PAGE_SIZE)
    payload["items"] = items[start:start + size]
    if start + size < len(items):
        payload["nextPageToken"] = str(start + size)
    if start:
        payload["prefixes"] = []
    response.json(payload)


_WRAPPED = {objects.ls: _ls_paged, objects.insert: _insert, objects.upload_partial: _upload_partial, objects.delete: _delete}
server.HANDLERS = (
    (r"^/storage/v1/b/(?P<bucket_name>[-.\w]+)/storageLayout$", {server.GET: _storage_layout}),
    *((regex, {method: _WRAPPED.get(fn, fn) for method, fn in handlers.items()})
      for regex, handlers in server.HANDLERS),
)

if __name__ == "__main__":
    sys.exit(emulator_main.main())
