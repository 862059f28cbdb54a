"""The two object stores as the tests see them: URLs, set-up clients, and what the pipeline needs.

``S3Store`` and ``GcsStore`` share one small interface, so a test can run the same steps on either:

* ``url(bucket, key)``: ``s3://bucket/key`` or ``gs://bucket/key``;
* ``flags()``: the Beam options a run needs besides its own (endpoint, region, project);
* ``env()``: the environment the launcher and its SDK worker processes need (credentials, emulator);
* ``make_bucket``, ``put``, ``get``, ``keys``, ``upload_tree``, ``download_tree``: set-up and checks,
  through the store's own client (boto3, google-cloud-storage), never through the code under test.

The set-up clients talk to the server directly; ``through(proxy)`` gives the same store seen through
a counting, fault-injecting proxy.
"""

import dataclasses
import json
import os
from pathlib import Path
from typing import Dict, List, Optional

S3_REGION = "us-east-1"
S3_KEY_ID = "testing"
S3_SECRET = "testing"
GCS_PROJECT = "test-project"


def offline_gcs_credentials(path: str) -> str:
    """authorized_user credentials that google-auth accepts without a network call.

    google-auth takes ``token`` and ``expiry`` from the file; with an expiry far ahead it never refreshes
    (without a file, Beam retries google.auth.default four times with backoff: 22 s in every process,
    and it would probe the GCE metadata server). The emulator ignores the bearer token.
    """
    with open(path, "w") as handle:
        json.dump({"type": "authorized_user", "client_id": "emulator", "client_secret": "emulator",
                   "refresh_token": "emulator", "token": "emulator-token", "expiry": "2099-01-01T00:00:00Z"}, handle)
    return path


class Store:
    scheme = ""

    def url(self, bucket: str, key: str = "") -> str:
        return f"{self.scheme}://{bucket}/{key}"

    def upload_tree(self, local_dir, bucket: str, prefix: str = "") -> int:
        """Every file under ``local_dir`` to ``bucket/prefix/<relative path>``; returns the number of files."""
        count = 0
        for path in sorted(Path(local_dir).rglob("*")):
            if path.is_file():
                key = "/".join(part for part in (prefix.strip("/"), path.relative_to(local_dir).as_posix()) if part)
                self.put(bucket, key, path.read_bytes())
                count += 1
        return count

    def download_tree(self, bucket: str, prefix: str, local_dir) -> List[str]:
        """Every object under ``bucket/prefix/`` into ``local_dir`` (directory markers skipped); the keys."""
        prefix = prefix.strip("/") + "/"
        keys = [key for key in self.keys(bucket, prefix) if not key.endswith("/")]
        for key in keys:
            target = Path(local_dir) / key[len(prefix):]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(self.get(bucket, key))
        return keys

    # Provided by each store
    def flags(self) -> List[str]:
        raise NotImplementedError

    def env(self) -> Dict[str, str]:
        raise NotImplementedError

    def make_bucket(self, bucket: str) -> None:
        raise NotImplementedError

    def put(self, bucket: str, key: str, data: bytes) -> None:
        raise NotImplementedError

    def get(self, bucket: str, key: str) -> bytes:
        raise NotImplementedError

    def keys(self, bucket: str, prefix: str = "") -> List[str]:
        raise NotImplementedError

    def delete(self, bucket: str, key: str) -> None:
        raise NotImplementedError


@dataclasses.dataclass
class S3Store(Store):
    """moto's S3 server at ``endpoint`` (or a proxy in front of it)."""
    endpoint: str
    scheme = "s3"

    def __post_init__(self):
        import boto3
        self.client = boto3.session.Session().client(
            "s3", endpoint_url=self.endpoint, region_name=S3_REGION, aws_access_key_id=S3_KEY_ID,
            aws_secret_access_key=S3_SECRET)

    def through(self, proxy) -> "S3Store":
        return S3Store(proxy.url)

    def flags(self) -> List[str]:
        """Beam's S3 options for this server. Credentials come from the environment (boto3's chain)."""
        return [f"--s3_endpoint_url={self.endpoint}", f"--s3_region_name={S3_REGION}"]

    def env(self) -> Dict[str, str]:
        return {"AWS_ACCESS_KEY_ID": S3_KEY_ID, "AWS_SECRET_ACCESS_KEY": S3_SECRET, "AWS_DEFAULT_REGION": S3_REGION,
                "AWS_EC2_METADATA_DISABLED": "true"}

    def endpoint_env(self) -> Dict[str, str]:
        """boto3's own endpoint variable: the route for workers that do not get the pipeline options."""
        return {"AWS_ENDPOINT_URL_S3": self.endpoint}

    def make_bucket(self, bucket: str) -> None:
        self.client.create_bucket(Bucket=bucket)

    def put(self, bucket: str, key: str, data: bytes) -> None:
        self.client.put_object(Bucket=bucket, Key=key, Body=data)

    def get(self, bucket: str, key: str) -> bytes:
        return self.client.get_object(Bucket=bucket, Key=key)["Body"].read()

    def keys(self, bucket: str, prefix: str = "") -> List[str]:
        keys = []
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            keys += [item["Key"] for item in page.get("Contents", [])]
        return keys

    def delete(self, bucket: str, key: str) -> None:
        self.client.delete_object(Bucket=bucket, Key=key)

    def incomplete_uploads(self, bucket: str, prefix: str = "") -> List[str]:
        answer = self.client.list_multipart_uploads(Bucket=bucket, Prefix=prefix)
        return [upload["Key"] for upload in answer.get("Uploads", [])]


@dataclasses.dataclass
class GcsStore(Store):
    """The patched gcp-storage-emulator at ``endpoint`` (usually a counting proxy in front of it).

    The emulator writes the Host of the uploading request into an object's mediaLink, which readers
    follow: objects uploaded through the proxy are read through it, so every request is counted.
    """
    endpoint: str
    credentials_file: str
    tf_env: Optional[Dict[str, str]] = None     # the TLS route for TensorFlow's own gs:// (tls_route.py)
    scheme = "gs"

    def __post_init__(self):
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage
        self.client = storage.Client(project=GCS_PROJECT, credentials=AnonymousCredentials(),
                                     client_options={"api_endpoint": self.endpoint})

    def flags(self) -> List[str]:
        return [f"--project={GCS_PROJECT}"]

    def env(self) -> Dict[str, str]:
        env = {"STORAGE_EMULATOR_HOST": self.endpoint, "NO_GCE_CHECK": "true",
               "GOOGLE_APPLICATION_CREDENTIALS": self.credentials_file, "GOOGLE_CLOUD_PROJECT": GCS_PROJECT}
        env.update(self.tf_env or {})
        return env

    def make_bucket(self, bucket: str) -> None:
        self.client.create_bucket(bucket)

    def put(self, bucket: str, key: str, data: bytes) -> None:
        self.client.bucket(bucket).blob(key).upload_from_string(data)

    def get(self, bucket: str, key: str) -> bytes:
        return self.client.bucket(bucket).blob(key).download_as_bytes()

    def keys(self, bucket: str, prefix: str = "") -> List[str]:
        return [blob.name for blob in self.client.list_blobs(bucket, prefix=prefix or None)]

    def delete(self, bucket: str, key: str) -> None:
        self.client.bucket(bucket).blob(key).delete()


def apply_env(env: Dict[str, str], monkeypatch) -> None:
    """Set ``env`` for an in-process test (undone after it)."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)


def subprocess_env(store: Store, extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """This process's environment plus the store's, for a launcher started as a subprocess."""
    return dict(os.environ, **store.env(), **(extra or {}))
