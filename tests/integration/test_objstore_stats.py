"""tf.Transform's output on s3://: written on local disk, copied with Beam's filesystems, equal to a local run.

TensorFlow 2.21 has no S3 filesystem, so ComputeStats stages tf.Transform's work on this machine's
disk and copies the output (beam_pipeline/stages/stats.py). Here ComputeStats runs twice on the same valid
pairs of the object-store corpus, into a local folder and into s3://, and the two transform outputs
and stats dicts are compared byte for byte; tft.TFTransformOutput loads the copy brought back.
"""

import hashlib
import json
import tempfile

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_pipeline import TestPipeline

from beam_pipeline.core import paths, runners
from beam_pipeline.core.pixels import Limits
from beam_pipeline.core.records import ValidPair
from beam_pipeline.core.selection import SplitSpec
from beam_pipeline.stages import pairs
from beam_pipeline.stages.specs import CheckSpec, DiscoverSpec, SelectSpec, StatsSpec
from objstore_fixtures import unique_bucket
from tools.objstore.stores import apply_env

NUM_CLASSES = 8


@pytest.fixture(scope="module")
def valid_pairs(object_corpus):
    """The corpus's valid pairs, found and checked by the product's own per-pair functions."""
    root = str(object_corpus / "segmentation")
    found = []
    spec = DiscoverSpec(paths.join(root, "manifest.csv"))
    for ref in pairs.discover(spec):
        ref = ref if not hasattr(ref, "status") else None
        ref = ref and pairs.select(ref, SelectSpec(SplitSpec("column")))
        result = ref and pairs.check(ref, CheckSpec("segmentation", Limits(num_classes=NUM_CLASSES)))[0]
        if isinstance(result, ValidPair):
            found.append(result)
    assert len(found) > 20
    return found


def _write_stats(stats: dict, path: str) -> None:
    with open(path, "w") as handle:
        json.dump(stats, handle, sort_keys=True)


def run_compute_stats(valid, output, temp_dir, stats_path, flags=()):
    from beam_pipeline.stages.stats import ComputeStats
    with TestPipeline(options=PipelineOptions(list(flags))) as p:
        stats, written = (p | beam.Create(valid)
                          | ComputeStats(StatsSpec(output, "segmentation", NUM_CLASSES), temp_dir))
        _ = stats | beam.Map(_write_stats, path=stats_path)
        _ = written | beam.combiners.Count.Globally()


def tree_digests(folder):
    return {path.relative_to(folder).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(folder.rglob("*")) if path.is_file()}


def transformed(transform_dir, pair):
    """The transform graph at ``transform_dir`` applied to one pair's raw features (its real bytes)."""
    import tensorflow as tf
    import tensorflow_transform as tft
    from beam_pipeline.core import features
    from beam_pipeline.core.stats import summary_values
    output = tft.TFTransformOutput(str(transform_dir))
    values = summary_values(pair, "segmentation")
    with open(pair.ref.image, "rb") as image, open(pair.ref.mask, "rb") as mask:
        values[features.IMAGE_ENCODED], values[features.MASK_ENCODED] = [image.read()], [mask.read()]
    raw = {name: tf.constant([values[name][0] if not spec.shape else values[name]], dtype=spec.dtype)
           for name, spec in output.raw_feature_spec().items()}
    return {name: tensor.to_list() if isinstance(tensor, tf.RaggedTensor) else tensor.numpy().tolist()
            for name, tensor in output.transform_features_layer()(raw).items()}


def test_transform_output_on_s3_equals_the_local_one(valid_pairs, s3_store, tmp_path, monkeypatch):
    """Variables, assets and schemas byte for byte; saved_model.pb differs between any two runs (the
    numeric suffixes TensorFlow gives traced functions, a per-process counter: tests/integration/test_flink.py),
    so both graphs are applied to the same pairs and must give the same tensors."""
    apply_env(s3_store.env(), monkeypatch)
    machine_tmp = tmp_path / "machine-tmp"          # where the local stage goes when --temp_location is s3://
    machine_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(machine_tmp))
    bucket = unique_bucket("stats")
    s3_store.make_bucket(bucket)
    run_compute_stats(valid_pairs, str(tmp_path / "local"), str(tmp_path / "local-tmp"), str(tmp_path / "local.json"))
    run_compute_stats(valid_pairs, s3_store.url(bucket, "run"), s3_store.url(bucket, "tmp"),
                      str(tmp_path / "s3.json"), s3_store.flags())

    keys = s3_store.download_tree(bucket, "run", tmp_path / "from-s3")
    assert keys and all(key.startswith("run/transform/") for key in keys)     # nothing else: no temp files
    local, copied = tree_digests(tmp_path / "local"), tree_digests(tmp_path / "from-s3")
    assert sorted(copied) == sorted(local)
    assert any("/variables/" in name for name in local)
    for name in local:
        if not name.endswith(("saved_model.pb", "fingerprint.pb")):
            assert copied[name] == local[name], name
    assert (tmp_path / "s3.json").read_text() == (tmp_path / "local.json").read_text()
    assert s3_store.incomplete_uploads(bucket) == []
    assert list(machine_tmp.glob("transform-stage-*")) == []      # the stage was removed after the copy
    for pair in valid_pairs[:3]:
        expected = transformed(tmp_path / "local" / "transform", pair)
        actual = transformed(tmp_path / "from-s3" / "transform", pair)
        assert "image" in expected and expected == actual


@pytest.mark.parametrize("runner, extra, refused", [
    ("DataflowRunner", {}, True),
    ("FlinkRunner", {"flink_master": "flink.example.com:8081"}, True),
    ("FlinkRunner", {"flink_master": "localhost:8081", "environment_type": "EXTERNAL"}, False),
    ("DirectRunner", {}, False),
])
def test_s3_output_with_statistics_needs_workers_that_share_this_disk(runner, extra, refused):
    where = runners.placement(runner, **extra)
    problem = runners.transform_output_problem(where, "s3://bucket/v1", "gs://bucket/tmp", True, False)
    assert (problem is not None) == refused
    if refused:
        assert problem.startswith("--output s3://bucket/v1 with statistics needs a filesystem TensorFlow can write")
        assert "--no_stats" in problem
    assert runners.transform_output_problem(where, "s3://bucket/v1", "gs://bucket/tmp", False, False) is None
    assert runners.transform_output_problem(where, "gs://bucket/v1", "gs://bucket/tmp", True, False) is None


def test_a_shared_local_temp_location_allows_s3_output_on_remote_workers():
    where = runners.placement("DataflowRunner")
    assert runners.transform_output_problem(where, "s3://b/v1", "/mnt/shared/tmp", True, True) is None
    assert runners.transform_output_problem(where, "gs://b/v1", "s3://b/tmp", True, False).startswith(
        "--temp_location s3://b/tmp with statistics")
