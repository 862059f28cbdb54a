"""PublishOutputs: write rejects, class index and stats.json, move the shards into place, manifest.json last.

Inputs: ShardInfo, every Outcome (filtered, rejected, duplicate), the number
of discovered inputs, the stats dict (empty without statistics), class-index
lines, the tf.Transform writes to wait for, and the run's refusals.
``manifest.json`` is written only after everything else exists, so a reader
that sees a manifest sees a complete output. A refused run (a gate failed,
core.records.Refusal) publishes nothing and leaves its reason in the staging
folder, which :func:`read_result` turns into :class:`RunRefused` for the
launcher.
"""

import dataclasses
import json

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from beam_pipeline.core import layout, paths
from beam_pipeline.core.manifest import build_manifest, count_outcomes
from beam_pipeline.core.records import FILTERED, Outcome, Refusal
from beam_pipeline.specs import PublishSpec


class RunRefused(Exception):
    """The run stopped before writing any shard; ``refusal`` says why."""

    def __init__(self, refusal: Refusal):
        super().__init__(refusal.message)
        self.refusal = refusal


def _is_reportable(outcome: Outcome) -> bool:
    """Rejects and duplicates go to the rejects files; user-filtered inputs are only counted."""
    return outcome.status != FILTERED


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


def read_result(output: str) -> dict:
    """The published manifest.json of a finished run; raises RunRefused when the run was refused."""
    manifest = paths.join(output, layout.DATASET_MANIFEST)
    if not FileSystems.exists(manifest):
        refusal_path = paths.join(layout.staging_dir(output), layout.REFUSAL)
        with FileSystems.open(refusal_path) as handle:
            refusal = Refusal(**json.loads(handle.read()))
        FileSystems.delete([layout.staging_dir(output)])
        raise RunRefused(refusal)
    with FileSystems.open(manifest) as handle:
        return json.loads(handle.read())


class FinalizeFn(beam.DoFn):
    """Runs once: write stats.json, publish the staged shards, then write manifest.json (or the refusal)."""

    def __init__(self, spec: PublishSpec, options: dict, versions: dict):
        self._spec = spec
        self._options = options
        self._versions = versions

    def process(self, _, shards, counts, discovered, rejects_files, stats, index_files, transform_written,
                refusals):
        spec = self._spec
        output = spec.output
        if refusals:
            _write_json(paths.join(layout.staging_dir(output), layout.REFUSAL), dataclasses.asdict(refusals[0]))
            return
        stats = stats[0] if stats else None
        manifest = build_manifest(
            task=spec.task, num_classes=spec.num_classes, ignore_label=spec.ignore_label,
            class_names=spec.class_names, shards=[dataclasses.asdict(shard) for shard in shards],
            outcome_counts=count_outcomes(counts), discovered=discovered, options=self._options,
            versions=self._versions, rejects_files=[self._relative(path) for path in rejects_files],
            stats=stats, balance=spec.balance.as_dict(),
            class_index_files=[self._relative(path) for path in index_files])
        if stats:
            _write_json(paths.join(output, layout.STATS), stats)
        staging = layout.staging_dir(output)
        sources = [paths.join(staging, shard.path) for shard in shards]
        if sources:
            FileSystems.rename(sources, [paths.join(output, shard.path) for shard in shards])
        leftovers = [path for path in (staging, layout.temp_dir(output)) if FileSystems.exists(path)]
        if leftovers:
            FileSystems.delete(leftovers)
        _write_json(paths.join(output, layout.DATASET_MANIFEST), manifest)
        yield paths.join(output, layout.DATASET_MANIFEST)

    def _relative(self, path: str) -> str:
        return paths.relative_to(self._spec.output, path) or path


class PublishOutputs(beam.PTransform):
    """``manifest_path = (shards, outcomes, discovered, stats, class_index, transform_written, refusals)
    | PublishOutputs(PublishSpec(output, task, ...), options, versions)``."""

    def __init__(self, spec: PublishSpec, options: dict, versions: dict):
        super().__init__()
        self._spec = spec
        self._options = options
        self._versions = versions

    def expand(self, inputs):
        shards, outcomes, discovered, stats, class_index, transform_written, refusals = inputs
        output = self._spec.output
        rejects_files = _jsonl_files(
            outcomes
            | "KeepReportable" >> beam.Filter(_is_reportable)
            | "ToJsonLines" >> beam.Map(_to_json),
            # one JSON object per rejected or duplicate input
            "WriteRejects", paths.join(output, layout.REJECTS_PREFIX))
        index_files = _jsonl_files(class_index, "WriteClassIndex", paths.join(output, layout.CLASS_INDEX_PREFIX))
        counts = (outcomes
                  | "StatusAndReason" >> beam.Map(_status_and_reason)
                  | "CountOutcomes" >> beam.combiners.Count.PerElement())
                  # ((status, reason), n)
        return (shards.pipeline
                | "Once" >> beam.Create([None])
                | "PublishShardsAndManifest" >> beam.ParDo(
                    FinalizeFn(self._spec, self._options, self._versions),
                    shards=beam.pvalue.AsList(shards), counts=beam.pvalue.AsList(counts),
                    discovered=beam.pvalue.AsSingleton(discovered),
                    rejects_files=beam.pvalue.AsList(rejects_files), stats=beam.pvalue.AsList(stats),
                    index_files=beam.pvalue.AsList(index_files),
                    transform_written=beam.pvalue.AsList(transform_written),
                    refusals=beam.pvalue.AsList(refusals)))
