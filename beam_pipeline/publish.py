"""PublishOutputs: write the rejects, move the shards into place, write manifest.json last.

Inputs: ShardInfo, every Outcome (filtered, rejected, duplicate), and the
number of discovered inputs. ``manifest.json`` is written only after every
shard and the rejects files exist, so a reader that sees a manifest sees a
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
REJECTS_PREFIX = "rejects/rejects"


def _is_reportable(outcome: Outcome) -> bool:
    """Rejects and duplicates go to the rejects files; user-filtered inputs are only counted."""
    return outcome.status != "filtered"


def _status_and_reason(outcome: Outcome):
    return outcome.status, outcome.reason


class FinalizeFn(beam.DoFn):
    """Runs once: publish the staged shards, then write manifest.json."""

    def __init__(self, config: CorpusConfig, options: dict, versions: dict):
        self._config = config
        self._options = options
        self._versions = versions

    def process(self, _, shards, counts, discovered, rejects_files):
        output = self._config.output
        shard_dicts = [dataclasses.asdict(shard) for shard in shards]
        manifest = build_manifest(
            task=self._config.task, num_classes=self._config.num_classes,
            ignore_label=self._config.limits.ignore_label, class_names=self._config.class_names,
            shards=shard_dicts, outcome_counts=count_outcomes(counts), discovered=discovered,
            options=self._options, versions=self._versions,
            rejects_files=[paths.relative_to(output, path) or path for path in rejects_files])
        staging = staging_dir(output)
        sources = [paths.join(staging, shard.path) for shard in shards]
        if sources:
            FileSystems.rename(sources, [paths.join(output, shard.path) for shard in shards])
        if FileSystems.exists(staging):
            FileSystems.delete([staging])
        with FileSystems.create(paths.join(output, MANIFEST_NAME)) as handle:
            handle.write(json.dumps(manifest, indent=2, sort_keys=False).encode("utf-8") + b"\n")
        yield paths.join(output, MANIFEST_NAME)


def _to_json(outcome: Outcome) -> str:
    return outcome.to_json()


class PublishOutputs(beam.PTransform):
    """``manifest_path = (shards, outcomes, discovered) | PublishOutputs(config, options, versions)``."""

    def __init__(self, config: CorpusConfig, options: dict, versions: dict):
        super().__init__()
        self._config = config
        self._options = options
        self._versions = versions

    def expand(self, inputs):
        shards, outcomes, discovered = inputs
        rejects_files = (outcomes
                         | "KeepReportable" >> beam.Filter(_is_reportable)
                         | "ToJsonLines" >> beam.Map(_to_json)
                         # one JSON object per line
                         | "WriteRejects" >> beam.io.WriteToText(
                             paths.join(self._config.output, REJECTS_PREFIX), file_name_suffix=".jsonl",
                             num_shards=1, shard_name_template="-SSSSS-of-NNNNN"))
                         # path of each rejects file
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
                    rejects_files=beam.pvalue.AsList(rejects_files)))
