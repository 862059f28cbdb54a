"""What the trainer checks before its first step and while it trains (issue 20), on real shards.

Before the first step: every listed file's size, and the digests of the files whose size does not
grow with the data. While training: the digests of the shards this process reads (and, on the chief,
of the rejects and class index), read again in the background; a mismatch stops training with one
line and nothing is exported. What was verified for a manifest.json is not verified again on restart.
"""

import json
import shutil

import pytest
import tensorflow as tf

from beam_pipeline.core.example import frame_record
from trainer.data.artifacts import ArtifactError, load_artifacts
from trainer.training.config import TrainConfig
from trainer.training.train import train
from trainer.data.verification import BackgroundVerifier, check_before_training, verified_record

TINY = dict(epochs=1, steps_per_epoch=1, crop=(32, 32), depth=2, width=8, global_batch_size=2,
            shuffle_buffer=4, bn_recalibration_batches=0)


@pytest.fixture
def copy(segmentation_run, tmp_path):
    out, _ = segmentation_run
    target = tmp_path / "data"
    shutil.copytree(out, target)
    return target


def _shards(artifacts):
    return sorted(shard["path"] for entry in artifacts.manifest["splits"].values() for shard in entry["shards"])


def test_the_first_check_leaves_exactly_the_shards_and_the_growing_files(copy, tmp_path):
    artifacts = load_artifacts(str(copy))
    files = artifacts.manifest["files"]
    # paths are relative to the output folder (runs/<run id>/...): the growing ones are the rejects, the class
    # index parts and the keys files, whichever run wrote them
    growing = sorted(name for name in files if name.split("/", 2)[-1].startswith(("rejects/", "class_index/", "keys/")))
    assert growing and len(_shards(artifacts)) >= 3
    record = verified_record(str(tmp_path / "job"), artifacts)
    later = check_before_training(artifacts, record)
    assert later == sorted(_shards(artifacts) + growing)
    assert sorted(record.files) == sorted(set(files) - set(later))      # the rest was checked, and recorded
    assert record.path.endswith(f"verified/{artifacts.manifest_sha256}.json")


def test_a_missing_or_resized_file_is_found_before_the_first_step(copy, tmp_path):
    artifacts = load_artifacts(str(copy))
    shard = copy / _shards(artifacts)[0]
    shard.write_bytes(shard.read_bytes() + b"x")
    with pytest.raises(ArtifactError, match="bytes, manifest.json says"):
        check_before_training(artifacts, None)
    shard.unlink()
    with pytest.raises(ArtifactError, match="is listed in manifest.json but missing") as raised:
        check_before_training(artifacts, None)
    # which version is damaged, and what repairs it (issue 45)
    assert f"(version {artifacts.manifest['data_dir']} of " in str(raised.value)
    assert "run the pipeline's command again on that output with --overwrite" in str(raised.value)
    assert "--compact all writes every record again" in str(raised.value)


def test_verification_done_for_this_manifest_is_not_repeated(copy, tmp_path):
    artifacts = load_artifacts(str(copy))
    job = str(tmp_path / "job")
    later = check_before_training(artifacts, verified_record(job, artifacts))
    first = BackgroundVerifier(artifacts, later, verified_record(job, artifacts))
    first.run()
    assert first.error is None and first.checked == len(later)
    again = verified_record(job, artifacts)                                 # a restart reads the record
    assert BackgroundVerifier(artifacts, check_before_training(artifacts, again), again).files == []
    other = load_artifacts(str(copy))
    (copy / "manifest.json").write_text(json.dumps(dict(other.manifest, note="another version")))
    changed = load_artifacts(str(copy))                                     # another manifest: checked afresh
    assert changed.manifest_sha256 != artifacts.manifest_sha256
    assert BackgroundVerifier(changed, later, verified_record(job, changed)).files == later


def _damage_one_record(path):
    """Change one character of a record's source_id and frame it again: CRCs and size hold, the SHA-256 not."""
    records = [bytes(raw.numpy()) for raw in tf.data.TFRecordDataset(str(path))]
    example = tf.train.Example.FromString(records[0])
    source = example.features.feature["image/source_id"].bytes_list.value[0]
    changed = source[:-1] + (b"X" if source[-1:] != b"X" else b"Y")
    example.features.feature["image/source_id"].bytes_list.value[0] = changed
    records[0] = example.SerializeToString()
    path.write_bytes(b"".join(frame_record(record) for record in records))


def test_a_shard_that_reads_well_but_differs_stops_training_and_nothing_is_exported(copy, tmp_path):
    artifacts = load_artifacts(str(copy))
    train_shard = next(p for p in _shards(artifacts) if p.rsplit("/", 1)[-1].startswith("train-"))
    path = copy / train_shard                       # relative to the output folder (format 3)
    size = path.stat().st_size
    _damage_one_record(path)
    assert path.stat().st_size == size
    job = tmp_path / "job"
    with pytest.raises(ArtifactError, match=f"{train_shard} does not match its SHA-256"):
        train(TrainConfig(data=str(copy), job_dir=str(job), **TINY))
    assert (job / "input_shards.json").exists()             # training had started
    assert not (job / "export").exists()


def test_a_restart_of_a_verified_job_checks_nothing_in_the_background(copy, tmp_path, caplog):
    job = tmp_path / "job"
    train(TrainConfig(data=str(copy), job_dir=str(job), **TINY))
    artifacts = load_artifacts(str(copy))
    record = json.loads((job / "verified" / f"{artifacts.manifest_sha256}.json").read_text())["files"]
    assert sorted(record) == sorted(artifacts.manifest["files"])           # the chief checked every file
    caplog.clear()
    with caplog.at_level("INFO", logger="trainer"):
        train(TrainConfig(data=str(copy), job_dir=str(job), **dict(TINY, epochs=2)))
    assert not [r for r in caplog.records if "in the background" in r.getMessage()]
