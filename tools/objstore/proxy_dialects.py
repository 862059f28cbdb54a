"""What faultproxy.py needs to know of the two dialects it fronts, S3 (path-style) and the GCS JSON
API: the operation kind of a request (HEAD, GET, LIST, PUT, UPLOAD_PART, ...), by which it counts
requests and matches fault rules, and the body of an injected error response in each one's format.
"""

import json
import re


def s3_kind(method: str, path: str, query: dict, headers) -> str:
    """The S3 operation of a path-style request."""
    key_part = path.lstrip("/").split("/", 1)
    has_key = len(key_part) == 2 and key_part[1] != ""
    if method == "HEAD":
        return "HEAD" if has_key else "HEAD_BUCKET"
    if method == "GET":
        if not has_key:
            return "LIST" if "uploads" not in query else "LIST_UPLOADS"
        return "LIST_PARTS" if "uploadId" in query else "GET"
    if method == "PUT":
        if "partNumber" in query:
            return "UPLOAD_PART_COPY" if headers.get("x-amz-copy-source") else "UPLOAD_PART"
        if headers.get("x-amz-copy-source"):
            return "COPY"
        return "PUT" if has_key else "CREATE_BUCKET"
    if method == "POST":
        if "uploads" in query:
            return "CREATE_MULTIPART"
        if "uploadId" in query:
            return "COMPLETE_MULTIPART"
        if "delete" in query:
            return "DELETE_BATCH"
        return "POST"
    if method == "DELETE":
        return "ABORT_MULTIPART" if "uploadId" in query else "DELETE"
    return method


_GCS_OBJECT = re.compile(r"^/storage/v1/b/[^/]+/o/(.+)$")


def gcs_kind(method: str, path: str, query: dict, headers) -> str:
    """The GCS JSON API operation."""
    if path.startswith("/batch/"):
        return "BATCH"
    if path.endswith("/storageLayout"):
        return "GET_LAYOUT"
    if path.startswith("/upload/storage/v1/"):
        upload_type = query.get("uploadType", [""])[0]
        if method == "POST":
            return "UPLOAD_" + (upload_type or "?").upper()
        return "UPLOAD_CHUNK"  # PUT with upload_id
    if path.startswith("/download/") or query.get("alt", [""])[0] == "media":
        return "GET_MEDIA"
    if "/rewriteTo/" in path:
        return "REWRITE"
    if "/copyTo/" in path:
        return "COPY"
    if re.match(r"^/storage/v1/b/[^/]+/o/?$", path):
        return "LIST" if method == "GET" else "INSERT"
    match = _GCS_OBJECT.match(path)
    if match:
        return {"GET": "GET_METADATA", "DELETE": "DELETE", "PATCH": "PATCH", "PUT": "UPDATE"}.get(method, method)
    if re.match(r"^/storage/v1/b/[^/]+/?$", path):
        return "GET_BUCKET" if method == "GET" else method + "_BUCKET"
    if re.match(r"^/[^/]+/.+", path) and method == "GET":  # XML-API style /bucket/object media GET
        return "GET_MEDIA"
    return method


def error_body(dialect, status, code):
    if dialect == "s3":
        body = (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
                f"<Message>injected by faultproxy</Message><RequestId>faultproxy</RequestId></Error>")
        return body.encode(), "application/xml"
    body = {"error": {"code": status, "message": f"injected by faultproxy ({code})",
                      "errors": [{"reason": code, "message": "injected by faultproxy"}]}}
    return json.dumps(body).encode(), "application/json"
