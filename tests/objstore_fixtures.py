"""Session-scoped object-store servers (tools/objstore) and the corpus in their buckets (imported by tests/conftest.py).

* ``s3_store``: moto's server; ``s3_proxy``: a counting, fault-injecting proxy in front of it;
  ``s3_faults``: that proxy, reset before and cleared of faults after a test.
* ``gcs_store``: the patched emulator behind its own counting proxy, with the TLS route that sends
  TensorFlow's gs:// there too; ``gcs_proxy`` is that proxy.
* ``object_corpus``: a small seeded sample corpus on local disk; ``s3_corpus`` and ``gcs_corpus``: the
  same files uploaded to a bucket named ``corpus`` (``segmentation/``: listing, images/, masks/;
  ``outside/``: the target of the path-escaping row).

Each server starts once per session, on a free loopback port, and stops when the session ends.
Tests use their own bucket names, so they do not see each other's objects.
"""

import itertools
from pathlib import Path

import pytest

from tools.objstore.servers import FaultProxy, Servers, start_gcs_emulator, start_moto, start_tls_route
from tools.objstore.stores import GcsStore, S3Store, offline_gcs_credentials

from shared_outputs import once

CORPUS_BUCKET = "corpus"
CORPUS_PAIRS = 24          # valid segmentation pairs of the object-store corpus (the broken ones come on top)
CORPUS_CLASS_IMAGES = 8
GCS_PAGE_SIZE = 50         # the emulator's listing page: small, so listings of the small corpus span pages
_buckets = itertools.count()


def unique_bucket(stem: str) -> str:
    """A bucket name no other test of the session uses (S3: 3-63 lowercase characters)."""
    return f"{stem}-{next(_buckets):03d}"


@pytest.fixture(scope="session")
def object_servers():
    servers = Servers()
    yield servers
    servers.stop()


@pytest.fixture(scope="session")
def s3_store(object_servers, tmp_path_factory):
    server = object_servers.add(start_moto(str(tmp_path_factory.mktemp("s3-logs"))))
    return S3Store(server.url)


@pytest.fixture(scope="session")
def s3_proxy(object_servers, s3_store, tmp_path_factory):
    return object_servers.add(FaultProxy(s3_store.endpoint, "s3", str(tmp_path_factory.mktemp("s3-proxy-logs"))))


@pytest.fixture
def s3_faults(s3_proxy):
    """The S3 proxy with zeroed counters; its fault rules are cleared after the test."""
    s3_proxy.set_faults([])
    s3_proxy.reset()
    yield s3_proxy
    s3_proxy.set_faults([])


@pytest.fixture(scope="session")
def gcs_proxy(object_servers, tmp_path_factory):
    logs = str(tmp_path_factory.mktemp("gcs-logs"))
    emulator = object_servers.add(start_gcs_emulator(logs, page_size=GCS_PAGE_SIZE))
    return object_servers.add(FaultProxy(emulator.url, "gcs", logs))


@pytest.fixture(scope="session")
def gcs_store(object_servers, gcs_proxy, tmp_path_factory):
    logs = tmp_path_factory.mktemp("gcs-route")
    route, tf_env = start_tls_route(gcs_proxy.url, str(logs))
    object_servers.add(route)
    return GcsStore(gcs_proxy.url, offline_gcs_credentials(str(logs / "credentials.json")), tf_env)


@pytest.fixture
def gcs_faults(gcs_proxy):
    """The GCS proxy with zeroed counters; its fault rules are cleared after the test."""
    gcs_proxy.set_faults([])
    gcs_proxy.reset()
    yield gcs_proxy
    gcs_proxy.set_faults([])


@pytest.fixture(scope="session")
def object_corpus(tmp_path_factory):
    """A small seeded sample corpus on local disk (segmentation listing, paired folders, classes), read only,
    made once per session (tests/shared_outputs.py)."""
    def make(folder):
        from tools.sample_corpus.corpus import write_corpus
        write_corpus(str(folder), seed=0, num_pairs=CORPUS_PAIRS, num_class_images=CORPUS_CLASS_IMAGES)
        return str(folder)
    return Path(once(tmp_path_factory, "object-corpus", make))


def _upload_corpus(store, root):
    store.make_bucket(CORPUS_BUCKET)
    for folder in ("segmentation", "outside"):
        store.upload_tree(root / folder, CORPUS_BUCKET, folder)
    return store


@pytest.fixture(scope="session")
def s3_corpus(s3_store, object_corpus):
    return _upload_corpus(s3_store, object_corpus)


@pytest.fixture(scope="session")
def gcs_corpus(gcs_store, object_corpus):
    return _upload_corpus(gcs_store, object_corpus)
