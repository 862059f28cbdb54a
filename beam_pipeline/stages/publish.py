"""PublishOutputs: the job's last step. It writes rejects, class index and stats.json into the run's
version folder, takes the digest of every file the job wrote, and leaves the pending manifest for the
launcher, which commits it (beam_pipeline/launcher/commit.py).

Inputs: ShardInfo, every Outcome (rejected, duplicate), the inputs filtered
out counted per reason (``((FILTERED, reason), n)``), the number of
discovered inputs, the stats dict (empty without statistics), class-index
lines, the tf.Transform writes to wait for, and the run's refusals.
Nothing here is visible to a reader: the version folder is named by no
manifest until the launcher, which holds the output's lock, checks it and
writes ``manifest.json``. A refused run (a gate failed, core.records.Refusal)
writes no shard and leaves its reason instead, which :func:`read_result`
turns into :class:`RunRefused` for the launcher.
"""

import dataclasses

import apache_beam as beam
from apache_beam.io import textio

from beam_pipeline import phases
from beam_pipeline.core import digests, layout, paths
from beam_pipeline.core.manifest import build_manifest, count_outcomes
from beam_pipeline.core.records import FILTERED, Outcome, Refusal
from beam_pipeline.io import files, streams
from beam_pipeline.stages.specs import PublishSpec


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


class _JsonLinesSink(textio._TextSink):  # noqa: SLF001 - WriteToText's sink, opened through storage
    """Beam's text sink, whose files may be empty on s3:// too (streams.create_for_write)."""

    def open(self, temp_path):
        return streams.create_for_write(temp_path, self.mime_type, self.compression_type)


class _WriteJsonLines(beam.io.WriteToText):
    """``lines | _WriteJsonLines(prefix)``: one ``PREFIX-00000-of-00001.jsonl``, empty when no line comes.

    Beam writes that empty file on every filesystem but s3:// (apache/beam#21369); its sink here
    writes it there too, so a clean corpus publishes the same files on every store.
    """

    def __init__(self, prefix: str):
        super().__init__(prefix)
        self._sink = _JsonLinesSink(prefix, file_name_suffix=".jsonl", num_shards=1,
                                    shard_name_template="-SSSSS-of-NNNNN")


def _jsonl_files(lines, label: str, prefix: str):
    return lines | label >> _WriteJsonLines(prefix)


def read_result(data_dir: str) -> dict:
    """The pending manifest a finished job left in ``data_dir``; raises RunRefused when the run was refused."""
    pending = paths.join(data_dir, layout.PENDING_MANIFEST)
    if not files.exists(pending):
        refusal = files.read_json(paths.join(data_dir, layout.REFUSAL))
        raise RunRefused(Refusal(**refusal))
    return files.read_json(pending)


class FinalizeFn(beam.DoFn):
    """Runs once, after every other write: stats.json, the files table, then the pending manifest (or the refusal)."""

    def __init__(self, spec: PublishSpec, options: dict, versions: dict):
        self._spec = spec
        self._options = options
        self._versions = versions

    def process(self, _, shards, counts, discovered, rejects_files, stats, index_files, transform_written,
                refusals):
        phases.reached(phases.FINALIZE)
        if refusals:
            files.write_bytes(paths.join(self._spec.data_dir, layout.REFUSAL), files.json_bytes(dataclasses.asdict(refusals[0])))
        else:
            yield self._finalize(shards, counts, discovered, rejects_files, stats[0] if stats else None, index_files)

    def _finalize(self, shards, counts, discovered, rejects_files, stats, index_files) -> str:
        spec = self._spec
        data_dir = spec.data_dir
        manifest = build_manifest(
            task=spec.task, num_classes=spec.num_classes, ignore_label=spec.ignore_label,
            class_names=spec.class_names, shards=[dataclasses.asdict(shard) for shard in shards],
            outcome_counts=count_outcomes(counts), discovered=discovered, options=self._options,
            versions=self._versions, rejects_files=[self._relative(path) for path in rejects_files],
            stats=stats, balance=spec.balance.as_dict(),
            class_index_files=[self._relative(path) for path in index_files])
        table = digests.shard_entries(manifest["splits"])
        if stats:
            table[layout.STATS] = files.write_bytes(paths.join(data_dir, layout.STATS), files.json_bytes(stats))
        for relative in manifest["rejects"] + manifest["class_index"]:
            table[relative] = files.file_entry(paths.join(data_dir, relative))
        files.remove_folder(layout.temp_dir(data_dir))       # tf.Transform's temporary files
        transform = layout.transform_dir(data_dir)
        for relative in sorted(files.list_files(transform)):
            table[paths.join(layout.TRANSFORM_DIR, relative)] = files.file_entry(paths.join(transform, relative))
        manifest["files"] = dict(sorted(table.items()))
        pending = paths.join(data_dir, layout.PENDING_MANIFEST)
        files.write_bytes(pending, files.json_bytes(manifest))
        return pending

    def _relative(self, path: str) -> str:
        return paths.relative_to(self._spec.data_dir, path) or path


class PublishOutputs(beam.PTransform):
    """``pending_manifest_path = (shards, outcomes, filtered, discovered, stats, class_index, transform_written,
    refusals) | PublishOutputs(PublishSpec(data_dir, task, ...), options, versions)``."""

    def __init__(self, spec: PublishSpec, options: dict, versions: dict):
        super().__init__()
        self._spec = spec
        self._options = options
        self._versions = versions

    def expand(self, inputs):
        shards, outcomes, filtered, discovered, stats, class_index, transform_written, refusals = inputs
        data_dir = self._spec.data_dir
        rejects_files = _jsonl_files(
            outcomes
            | "KeepReportable" >> beam.Filter(_is_reportable)
            | "ToJsonLines" >> beam.Map(_to_json),
            # one JSON object per rejected or duplicate input
            "WriteRejects", paths.join(data_dir, layout.REJECTS_PREFIX))
        index_files = _jsonl_files(class_index, "WriteClassIndex", paths.join(data_dir, layout.CLASS_INDEX_PREFIX))
        counts = ((outcomes
                   | "StatusAndReason" >> beam.Map(_status_and_reason)
                   | "CountOutcomes" >> beam.combiners.Count.PerElement(),
                   filtered)
                  | "WithFilteredCounts" >> beam.Flatten())
                  # ((status, reason), n)
        return (shards.pipeline
                | "Once" >> beam.Create([None])
                | "WriteStatsAndPendingManifest" >> beam.ParDo(
                    FinalizeFn(self._spec, self._options, self._versions),
                    shards=beam.pvalue.AsList(shards), counts=beam.pvalue.AsList(counts),
                    discovered=beam.pvalue.AsSingleton(discovered),
                    rejects_files=beam.pvalue.AsList(rejects_files), stats=beam.pvalue.AsList(stats),
                    index_files=beam.pvalue.AsList(index_files),
                    transform_written=beam.pvalue.AsList(transform_written),
                    refusals=beam.pvalue.AsList(refusals)))
