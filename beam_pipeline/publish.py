"""PublishOutputs: write rejects, class index and stats.json, move the shards into place, manifest.json last.

Inputs: ShardInfo, every Outcome (filtered, rejected, duplicate), the number
of discovered inputs, the stats dict (empty without statistics), class-index
lines, and the tf.Transform writes to wait for. ``manifest.json`` is written
only after everything else exists, so a reader that sees a manifest sees a
complete output.
"""

import dataclasses
import json

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from beam_pipeline.core import paths
from beam_pipeline.core.manifest import build_manifest, count_outcomes
from beam_pipeline.core.records import Outcome
from beam_pipeline.options import CorpusConfig
from beam_pipeline.write import staging_dir

MANIFEST_NAME = "manifest.json"
STATS_NAME = "stats.json"
REJECTS_PREFIX = "rejects/rejects"
CLASS_INDEX_PREFIX = "class_index/class_index"


def _is_reportable(outcome: Outcome) -> bool:
    """Rejects and duplicates go to the rejects files; user-filtered inputs are only counted."""
    return outcome.status != "filtered"


def _status_and_reason(outcome: Outcome):
    return outcome.status, outcome.reason


def _to_json(outcome: Outcome) -> str:
    return outcome.to_json()


def _write_json(path: str, value: dict) -> None:
    with FileSystems.create(path) as handle:
        handle.write(json.dumps(value, indent=2).encode("utf-8") + b"\n")


def _jsonl_files(lines, label: str, prefix: str):
    return lines | label >> beam.io.WriteToText(prefix, file_name_suffix=".jsonl", num_shards=1,
                                                shard_name_template="-SSSSS-of-NNNNN")


class FinalizeFn(beam.DoFn):
    """Runs once: write stats.json, publish the staged shards, then write manifest.json."""

    def __init__(self, config: CorpusConfig, options: dict, versions: dict):
        self._config = config
        self._options = options
        self._versions = versions

    def process(self, _, shards, counts, discovered, rejects_files, stats, index_files, transform_written):
        config = self._config
        output = config.output
        stats = stats[0] if stats else None
        manifest = build_manifest(
            task=config.task, num_classes=config.num_classes, ignore_label=config.limits.ignore_label,
            class_names=config.class_names, shards=[dataclasses.asdict(shard) for shard in shards],
            outcome_counts=count_outcomes(counts), discovered=discovered, options=self._options,
            versions=self._versions, rejects_files=[self._relative(path) for path in rejects_files],
            stats=stats, balance={"method": config.balance, "threshold": config.balance_threshold,
                                  "max_growth": config.max_growth},
            class_index_files=[self._relative(path) for path in index_files])
        if stats:
            _write_json(paths.join(output, STATS_NAME), stats)
        staging = staging_dir(output)
        sources = [paths.join(staging, shard.path) for shard in shards]
        if sources:
            FileSystems.rename(sources, [paths.join(output, shard.path) for shard in shards])
        leftovers = [path for path in (staging, paths.join(output, ".tmp")) if FileSystems.exists(path)]
        if leftovers:
            FileSystems.delete(leftovers)
        _write_json(paths.join(output, MANIFEST_NAME), manifest)
        yield paths.join(output, MANIFEST_NAME)

    def _relative(self, path: str) -> str:
        return paths.relative_to(self._config.output, path) or path


class PublishOutputs(beam.PTransform):
    """``manifest_path = (shards, outcomes, discovered, stats, class_index, transform_written) | PublishOutputs(...)``."""

    def __init__(self, config: CorpusConfig, options: dict, versions: dict):
        super().__init__()
        self._config = config
        self._options = options
        self._versions = versions

    def expand(self, inputs):
        shards, outcomes, discovered, stats, class_index, transform_written = inputs
        output = self._config.output
        rejects_files = _jsonl_files(
            outcomes
            | "KeepReportable" >> beam.Filter(_is_reportable)
            | "ToJsonLines" >> beam.Map(_to_json),
            # one JSON object per rejected or duplicate input
            "WriteRejects", paths.join(output, REJECTS_PREFIX))
        index_files = _jsonl_files(class_index, "WriteClassIndex", paths.join(output, CLASS_INDEX_PREFIX))
        counts = (outcomes
                  | "StatusAndReason" >> beam.Map(_status_and_reason)
                  | "CountOutcomes" >> beam.combiners.Count.PerElement())
                  # ((status, reason), n)
        return (shards.pipeline
                | "Once" >> beam.Create([None])
                | "PublishShardsAndManifest" >> beam.ParDo(
                    FinalizeFn(self._config, self._options, self._versions),
                    shards=beam.pvalue.AsList(shards), counts=beam.pvalue.AsList(counts),
                    discovered=beam.pvalue.AsSingleton(discovered),
                    rejects_files=beam.pvalue.AsList(rejects_files), stats=beam.pvalue.AsList(stats),
                    index_files=beam.pvalue.AsList(index_files),
                    transform_written=beam.pvalue.AsList(transform_written)))
