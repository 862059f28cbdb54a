"""The test servers themselves: the GCS emulator's four patches, the fault proxy, TensorFlow's gs:// route.

The object-store tests rely on these behaving like S3 and GCS where it matters; each check here
fails if a server upgrade or a patch stops doing so.
"""

import os
import subprocess
import sys
import urllib.request

import pytest

from objstore_fixtures import GCS_PAGE_SIZE, unique_bucket


def test_gcs_emulator_accepts_an_empty_upload_and_answers_storage_layout(gcs_store):
    bucket = unique_bucket("gcs-patches")
    gcs_store.make_bucket(bucket)
    gcs_store.put(bucket, "dir/", b"")                       # patch 1: TF's directory markers
    assert gcs_store.get(bucket, "dir/") == b""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(f"{gcs_store.endpoint}/storage/v1/b/{bucket}/storageLayout") as answer:   # patch 2
        assert answer.status == 200


def test_gcs_emulator_honours_if_generation_match(gcs_store):
    from google.api_core.exceptions import PreconditionFailed
    bucket = unique_bucket("gcs-preconditions")
    gcs_store.make_bucket(bucket)
    blob = gcs_store.client.bucket(bucket).blob("lock")
    blob.upload_from_string(b"first", if_generation_match=0)
    with pytest.raises(PreconditionFailed):                   # patch 3: create-if-absent refused
        gcs_store.client.bucket(bucket).blob("lock").upload_from_string(b"second", if_generation_match=0)
    assert gcs_store.get(bucket, "lock") == b"first"


def test_gcs_emulator_pages_listings(gcs_store):
    bucket = unique_bucket("gcs-pages")
    gcs_store.make_bucket(bucket)
    names = [f"many/{i:03d}" for i in range(GCS_PAGE_SIZE + 7)]
    for name in names:
        gcs_store.put(bucket, name, b"x")
    pages = list(gcs_store.client.list_blobs(bucket, prefix="many/").pages)    # patch 4
    assert [page.num_items for page in pages] == [GCS_PAGE_SIZE, 7]
    assert gcs_store.keys(bucket, "many/") == names


def test_fault_proxy_counts_and_fails_requests(s3_store, s3_faults):
    bucket = unique_bucket("proxy")
    s3_store.make_bucket(bucket)
    s3_store.put(bucket, "a", b"1")
    proxied = s3_store.through(s3_faults)
    s3_faults.set_faults([{"kind": "GET", "every": 2, "status": 503, "code": "SlowDown", "limit": 1}])
    for _ in range(3):
        assert proxied.get(bucket, "a") == b"1"      # the one 503 is retried by boto3
    assert s3_faults.counts() == {"GET": 4}
    assert s3_faults.faults_injected() == {"GET": 1}


def test_tensorflow_reaches_the_gcs_emulator_through_the_tls_route(gcs_store):
    bucket = unique_bucket("tf-gcs")
    gcs_store.make_bucket(bucket)
    script = ("import tensorflow as tf, sys\n"
              f"path = 'gs://{bucket}/dir/hello.txt'\n"
              "with tf.io.gfile.GFile(path, 'wb') as f: f.write(b'hello')\n"
              "print(tf.io.gfile.listdir(path.rsplit('/', 1)[0]), tf.io.gfile.GFile(path, 'rb').read())\n")
    completed = subprocess.run([sys.executable, "-c", script], env=dict(os.environ, **gcs_store.env()),
                               capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert completed.stdout.strip().endswith("['hello.txt'] b'hello'")
    assert gcs_store.get(bucket, "dir/hello.txt") == b"hello"
