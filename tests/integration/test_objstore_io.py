"""Reading and listing through Beam's filesystems on the local S3 and GCS servers (in this process).

A pair's files are read by beam_pipeline.stages.pairs.read_file and listed by beam_pipeline.io.folders; the
tests compare what they return with the corpus files on local disk, and count the requests each
read costs through the counting proxy.
"""

import concurrent.futures
import hashlib
import threading

import pytest
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from beam_pipeline.core import reasons
from beam_pipeline.core.reasons import Rejection
from beam_pipeline.io import files, folders, streams
from beam_pipeline.stages import pairs
from beam_pipeline.stages.specs import CLASS_FOLDERS, DiscoverSpec
from objstore_fixtures import CORPUS_BUCKET, GCS_PAGE_SIZE, unique_bucket
from tools.objstore.stores import apply_env

MAX_BYTES = 2_000_000
IMAGE = "segmentation/images/img_000000.jpg"
MASK = "segmentation/masks/img_000000.png"


def image_names(corpus, count):
    """The first ``count`` regular images of the corpus (JPEG or PNG), relative to it."""
    found = sorted((corpus / "segmentation" / "images").glob("img_*"))[:count]
    return [path.relative_to(corpus).as_posix() for path in found]


def use_store(store, monkeypatch):
    """Point Beam's FileSystems in this process at ``store`` (environment and options)."""
    apply_env(store.env(), monkeypatch)
    FileSystems.set_options(PipelineOptions(store.flags()))


@pytest.fixture(params=["s3", "gcs"])
def counted(request, monkeypatch):
    """(store seen through its counting proxy, the proxy), the corpus uploaded."""
    request.getfixturevalue(f"{request.param}_corpus")
    proxy = request.getfixturevalue(f"{request.param}_faults")
    store = request.getfixturevalue(f"{request.param}_store")
    if request.param == "s3":
        store = store.through(proxy)
    use_store(store, monkeypatch)
    yield store, proxy
    FileSystems.set_options(None)


def test_read_file_returns_the_object_bytes_in_two_requests(counted, object_corpus):
    store, proxy = counted
    for relative in (IMAGE, MASK):
        assert pairs.read_file(store.url(CORPUS_BUCKET, relative), MAX_BYTES, "image") == \
            (object_corpus / relative).read_bytes()
    # S3: HEAD (size) + GET; GCS: metadata GET + media GET. A read past the end would be a third on GCS.
    expected = {"HEAD": 2, "GET": 2} if store.scheme == "s3" else {"GET_METADATA": 2, "GET_MEDIA": 2}
    assert proxy.counts() == expected


@pytest.mark.parametrize("key, reason", [
    ("segmentation/masks/broken_missingmask.png", reasons.MISSING_FILE),
    ("segmentation/masks/never-uploaded/x.png", reasons.MISSING_FILE),
    ("segmentation/masks/broken_emptymask.png", reasons.EMPTY_FILE),
    ("segmentation/images/broken_bomb.png", reasons.FILE_TOO_LARGE),    # ~390 KB, over the 100 KB limit below
])
def test_read_file_rejects_unusable_objects(counted, key, reason):
    store, _ = counted
    result = pairs.read_file(store.url(CORPUS_BUCKET, key), 100_000, "mask")
    assert isinstance(result, Rejection) and result.reason == reason, result


def test_a_missing_bucket_is_a_missing_file(counted):
    store, _ = counted
    result = pairs.read_file(store.url("no-such-bucket", "a.png"), MAX_BYTES, "image")
    assert result == Rejection(reasons.MISSING_FILE, f"image file not found: {store.url('no-such-bucket', 'a.png')}")


def test_a_refused_object_is_unreadable(counted):
    store, proxy = counted
    first_request = "HEAD" if store.scheme == "s3" else "GET_METADATA"
    proxy.set_faults([{"kind": first_request, "status": 403, "code": "AccessDenied", "limit": 1}])
    result = pairs.read_file(store.url(CORPUS_BUCKET, IMAGE), MAX_BYTES, "image")
    assert isinstance(result, Rejection) and result.reason == reasons.UNREADABLE, result
    assert proxy.faults_injected() == {first_request: 1}


def test_transient_errors_are_retried_and_the_bytes_arrive_once(counted, object_corpus):
    store, proxy = counted
    kinds = ("HEAD", "GET") if store.scheme == "s3" else ("GET_METADATA", "GET_MEDIA")
    proxy.set_faults([{"kind": kind, "every": 2, "status": 503} for kind in kinds]
                     + [{"kind": kinds[1], "every": 3, "mode": "reset"}])
    for name in image_names(object_corpus, 3):
        data = pairs.read_file(store.url(CORPUS_BUCKET, name), MAX_BYTES, "image")
        assert not isinstance(data, Rejection), data
        assert hashlib.sha256(data).hexdigest() == hashlib.sha256((object_corpus / name).read_bytes()).hexdigest()
    assert sum(proxy.faults_injected().values()) >= 3


def test_one_s3_client_per_thread(s3_corpus, monkeypatch, object_corpus):
    """Beam's S3 filesystem builds a boto3 client per call (~130 ms of CPU); reads here reuse one."""
    import botocore.session
    use_store(s3_corpus, monkeypatch)
    created = []
    original = botocore.session.Session.create_client

    def counting_create_client(self, *args, **kwargs):
        created.append(args[0] if args else kwargs.get("service_name"))
        return original(self, *args, **kwargs)
    monkeypatch.setattr(botocore.session.Session, "create_client", counting_create_client)
    names = image_names(object_corpus, 5)
    read = {}

    def read_in_a_new_thread():     # a thread of its own starts without a client
        for name in names:
            read[name] = pairs.read_file(s3_corpus.url(CORPUS_BUCKET, name), MAX_BYTES, "image")
    thread = threading.Thread(target=read_in_a_new_thread)
    thread.start()
    thread.join()
    assert read == {name: (object_corpus / name).read_bytes() for name in names}
    assert created == ["s3"]
    FileSystems.exists(s3_corpus.url(CORPUS_BUCKET, IMAGE))      # Beam's own call: a client of its own
    assert created == ["s3", "s3"]
    FileSystems.set_options(None)


def test_s3_retry_settings_reach_every_boto3_client():
    import boto3
    assert streams.S3_RETRY_DEFAULTS == {"AWS_RETRY_MODE": "standard", "AWS_MAX_ATTEMPTS": "10"}
    client = boto3.session.Session().client("s3", region_name="us-east-1", aws_access_key_id="x",
                                            aws_secret_access_key="y")
    assert client.meta.config.retries == {"mode": "standard", "total_max_attempts": 10}


@pytest.mark.parametrize("store_name, objects", [("s3", 1005), ("gcs", GCS_PAGE_SIZE * 2 + 5)])
def test_listing_follows_every_page(request, monkeypatch, store_name, objects):
    """S3 pages at 1000 keys; the GCS emulator here at GCS_PAGE_SIZE (GCS itself: 1000)."""
    store = request.getfixturevalue(f"{store_name}_store")
    proxy = request.getfixturevalue(f"{store_name}_faults")
    bucket = unique_bucket("pages")
    store.make_bucket(bucket)
    # Names that sort before the images, so a listing that stopped after its first page would miss images.
    names = [f"set/images/_filler/{i:04d}.txt" for i in range(objects - 3)] + \
            [f"set/images/img_{i}.jpg" for i in range(3)]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda name: store.put(bucket, name, b"x"), names))
    if store_name == "s3":
        store = store.through(proxy)
    use_store(store, monkeypatch)
    proxy.reset()
    found = sorted(folders.relative_matches(store.url(bucket, "set"), "images/*.jpg"))
    assert found == [f"images/img_{i}.jpg" for i in range(3)]
    assert len(list(folders.match_files(store.url(bucket, "set/images/**")))) == objects
    pages = -(-objects // (1000 if store_name == "s3" else GCS_PAGE_SIZE))
    assert proxy.counts()["LIST"] == 2 * pages
    FileSystems.set_options(None)


@pytest.mark.parametrize("store_name", ["s3", "gcs"])
def test_subfolders_and_class_folders_by_a_delimited_listing(request, monkeypatch, store_name):
    """A folder on an object store is a prefix: the folders below one come from one delimited listing
    (every page of it: more folders than a GCS emulator page), and a fanned-out glob matches what the
    whole glob matches."""
    store = request.getfixturevalue(f"{store_name}_store")
    bucket = unique_bucket("folders")
    store.make_bucket(bucket)
    classes = [f"class{i:02d}" for i in range(GCS_PAGE_SIZE + 3)]
    names = [f"set/{name}/{i}.jpg" for name in classes for i in range(2)] + ["set/top.jpg", "set/a/b/deep.jpg"]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda name: store.put(bucket, name, b"x"), names))
    use_store(store, monkeypatch)
    root = store.url(bucket, "set")
    assert folders.subfolders(root) == sorted(classes + ["a"])
    assert folders.class_folder_names(root) == classes              # "a" holds no file directly
    spec = DiscoverSpec(root, input_format=CLASS_FOLDERS, task="classification")
    fanned = pairs.fan_out(spec, pairs.Source(CLASS_FOLDERS, "*/*"))
    assert len(fanned) == len(classes) + 1
    assert sorted(f for source in fanned for f in folders.relative_matches(root, source.pattern)) == \
        sorted(folders.relative_matches(root, "*/*"))
    FileSystems.set_options(None)


def test_a_refused_listing_raises_instead_of_listing_nothing(counted):
    store, proxy = counted
    proxy.set_faults([{"kind": "LIST", "status": 403, "code": "AccessDenied"}])
    with pytest.raises(Exception) as raised:
        list(folders.match_files(store.url(CORPUS_BUCKET, "segmentation/images/*.jpg")))
    assert "403" in str(raised.value) or "AccessDenied" in str(raised.value) or "Forbidden" in str(raised.value)


@pytest.mark.parametrize("status, expected", [(404, streams.MISSING), (403, streams.DENIED), (401, streams.DENIED)])
def test_read_failure_names_a_missing_or_refused_object(status, expected):
    from apache_beam.io.aws.clients.s3.messages import S3ClientError
    from google.api_core.exceptions import from_http_status
    assert streams.read_failure(S3ClientError("no", status), "s3://b/k") == expected
    assert streams.read_failure(from_http_status(status, "no"), "gs://b/k") == expected


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 504])
def test_read_failure_raises_server_errors_again(status):
    """A server error that outlived the retries fails the bundle (the runner retries it), not the input."""
    from apache_beam.io.aws.clients.s3.messages import S3ClientError
    from apache_beam.io.filesystem import BeamIOError
    from google.api_core.exceptions import from_http_status
    for error in (S3ClientError("busy", status), from_http_status(status, "busy"),
                  BeamIOError("Match operation failed", {"s3://b/k": S3ClientError("busy", status)})):
        with pytest.raises(type(error)):
            streams.read_failure(error, "s3://b/k")
    with pytest.raises(S3ClientError):
        streams.read_failure(S3ClientError("connection reset", None), "s3://b/k")


@pytest.fixture
def new_bucket(request, monkeypatch):
    """(store name, stem) -> (the store, a new empty bucket on it), Beam's FileSystems pointed at the store until
    the test ends."""
    def make(store_name, stem):
        store = request.getfixturevalue(f"{store_name}_store")
        bucket = unique_bucket(stem)
        store.make_bucket(bucket)
        use_store(store, monkeypatch)
        return store, bucket
    yield make
    FileSystems.set_options(None)


@pytest.mark.parametrize("store_name", ["s3", "gcs"])
def test_create_empty_writes_an_empty_object(new_bucket, store_name):
    store, bucket = new_bucket(store_name, "empty")
    streams.create_empty(store.url(bucket, "rejects/rejects-00000-of-00001.jsonl"))
    assert store.keys(bucket) == ["rejects/rejects-00000-of-00001.jsonl"]
    assert store.get(bucket, "rejects/rejects-00000-of-00001.jsonl") == b""
    if store_name == "s3":
        assert store.incomplete_uploads(bucket) == []


def test_beam_cannot_write_an_empty_s3_object(new_bucket):
    """apache/beam#21369, the reason for streams.create_empty: if this starts passing, Beam fixed it."""
    s3_store, bucket = new_bucket("s3", "beam-empty")
    with pytest.raises(Exception, match="MalformedXML"):
        FileSystems.create(s3_store.url(bucket, "empty.jsonl")).close()
    assert s3_store.keys(bucket) == []
    assert s3_store.incomplete_uploads(bucket) == ["empty.jsonl"]


@pytest.mark.parametrize("store_name", ["s3", "gcs"])
def test_a_text_object_read_in_byte_ranges_gives_each_line_once(new_bucket, store_name):
    """How a re-run reads its parent's pairs file (stages/leakage/rerun.py): ranges that cut lines anywhere."""
    store, bucket = new_bucket(store_name, "ranges")
    lines = [b"{\"line\": %d, \"pad\": \"%s\"}" % (i, b"x" * (i * 37 % 300)) for i in range(400)]
    data = b"\n".join(lines) + b"\n"
    url = store.url(bucket, "leakage/pairs-00000-of-00001.jsonl")
    with FileSystems.create(url) as handle:
        handle.write(data)
    for range_bytes in (997, 4096, len(data) + 1):
        read = [line for start, end in files.line_ranges(len(data), range_bytes)
                for line in files.read_lines_in_range(url, start, end)]
        assert read == lines, range_bytes
