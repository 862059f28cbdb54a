"""Launch-time plumbing that object stores need (docs/recovery.md; notes F1-F3).

- the DirectRunner's SDK worker processes get the pipeline options (a bare FnApiRunner gives them none,
  so S3 endpoint and credentials options never reached the workers' filesystems);
- a folder on a store where a folder is only a key prefix (``FileSystems.exists`` is False for it) is found.

Both are checked through Beam's own FileSystem registry, with schemes of the test's own that behave as
gs:// and s3:// do in the respect under test; the S3 and GCS servers themselves are issue 14's tests.
"""

import os

import apache_beam as beam
import pytest
from apache_beam.io.filesystems import FileSystems
from apache_beam.io.localfilesystem import LocalFileSystem
from apache_beam.options.pipeline_options import PipelineOptions, S3Options
from apache_beam.testing.util import assert_that, equal_to

from beam_pipeline.io import folders
from beam_pipeline.launcher import launch, runners

HERE = os.path.dirname(os.path.abspath(__file__))
ENDPOINT = "http://options-reached-the-worker.invalid:9"


class OptionsProbeFileSystem(LocalFileSystem):
    """``optionsprobe://``: remembers the options Beam builds it with, as the S3 filesystem reads its own."""

    def __init__(self, pipeline_options):
        super().__init__(pipeline_options)
        self.options = pipeline_options

    @classmethod
    def scheme(cls):
        return "optionsprobe"


class EndpointSeenFn(beam.DoFn):
    """Runs in an SDK worker process: which S3 endpoint would the worker's filesystems use, and where."""

    def process(self, _):
        options = FileSystems.get_filesystem("optionsprobe://anything").options
        endpoint = options.view_as(S3Options).s3_endpoint_url if options is not None else None
        yield endpoint, os.getpid()


def test_sdk_worker_processes_get_the_pipeline_options(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([HERE, os.environ.get("PYTHONPATH", "")]))  # workers import us
    options = PipelineOptions(["--s3_endpoint_url", ENDPOINT, "--direct_running_mode", "multi_processing",
                               "--direct_num_workers", "2"])
    pids = []
    with beam.Pipeline(runner=runners.runner(options), options=options) as p:
        seen = (p | beam.Create(range(8)) | beam.Reshuffle() | beam.ParDo(EndpointSeenFn()))
        assert_that(seen | "Endpoints" >> beam.Map(lambda pair: pair[0]) | beam.Distinct(), equal_to([ENDPOINT]))
        pids = seen | "Pids" >> beam.Map(lambda pair: pair[1])
        assert_that(pids | "NotTheLauncher" >> beam.Filter(lambda pid, me: pid == me, me=os.getpid()),
                    equal_to([]), label="InWorkers")


class PrefixOnlyFileSystem(LocalFileSystem):
    """``prefixonly://``: like gs:// and s3://, a "folder" is no object, so exists() is False for it."""

    @classmethod
    def scheme(cls):
        return "prefixonly"

    @staticmethod
    def _local(path):
        return path[len("prefixonly://"):]

    def exists(self, path):
        return os.path.isfile(self._local(path))

    def match(self, patterns, limits=None):
        results = LocalFileSystem(None).match([self._local(p) for p in patterns], limits)
        for result in results:
            for metadata in result.metadata_list:
                metadata.path = "prefixonly://" + metadata.path
        return results


def test_a_folder_is_found_where_only_its_files_exist(tmp_path):
    folder = tmp_path / "corpus" / "images"
    (folder / "cat").mkdir(parents=True)
    (folder / "cat" / "one.jpg").write_bytes(b"x")
    (tmp_path / "empty").mkdir()
    url = f"prefixonly://{folder}"
    assert not FileSystems.exists(url)                    # what gs:// and s3:// answer for a prefix
    assert folders.folder_exists(url)
    assert folders.folder_exists(url + "/")
    assert folders.folder_exists(str(folder))             # a local folder, as before
    assert not folders.folder_exists(f"prefixonly://{tmp_path / 'empty'}")
    assert not folders.folder_exists(f"prefixonly://{tmp_path / 'missing'}")


def test_class_folders_on_a_prefix_only_store_resolve(tmp_path):
    for name in ("apple", "pear"):
        (tmp_path / "images" / name).mkdir(parents=True)
        (tmp_path / "images" / name / "a.jpg").write_bytes(b"x")
    launched = launch.resolve(["--input", f"prefixonly://{tmp_path / 'images'}", "--output", str(tmp_path / "out"),
                               "--task", "classification"])
    assert launched.config.class_names == ("apple", "pear")
    assert launched.config.num_classes == 2                 # counted: no --num_classes


def test_filesystems_get_the_options_before_the_launcher_touches_files(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "1.jpg").write_bytes(b"x")
    launch.resolve(["--input", str(tmp_path), "--output", str(tmp_path / "out"), "--task", "classification",
                    "--num_classes", "1", "--class_names", "a", "--s3_endpoint_url", ENDPOINT])
    assert FileSystems.get_filesystem("optionsprobe://x").options.view_as(S3Options).s3_endpoint_url == ENDPOINT


@pytest.fixture(autouse=True)
def _no_options_left_behind():
    yield
    FileSystems.set_options(None)


def test_a_local_folder_is_listed_as_beams_own_match_lists_it(tmp_path):
    """io/files.list_files walks a local folder itself (Beam's match builds a regular expression per call): the same
    files, relative paths and sizes as ``FileSystems.match(folder/**)``, and nothing for a missing folder or a file."""
    from beam_pipeline.io import files
    root = tmp_path / "cache"
    for relative, size in {"0001/a.verdicts": 3, "0001/.tmp-b.verdicts": 0, "0002/deep/c": 7, "top.json": 11}.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_bytes(b"x" * size)
    (root / "0003" / "empty").mkdir(parents=True)
    beams = {os.path.relpath(m.path, root): m.size_in_bytes
             for m in FileSystems.match([str(root / "**")])[0].metadata_list}
    assert files.list_files(str(root)) == beams == {"0001/a.verdicts": 3, "0001/.tmp-b.verdicts": 0,
                                                    "0002/deep/c": 7, "top.json": 11}
    assert files.list_files(str(root) + "/") == beams
    assert files.list_files(str(root / "0001")) == {"a.verdicts": 3, ".tmp-b.verdicts": 0}
    assert files.list_files(str(tmp_path / "missing")) == {}
    assert files.list_files(str(root / "top.json")) == {}
