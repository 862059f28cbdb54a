"""PublishOutputs: the job's last step. It writes the rejects and stats.json into the run's version folder,
takes the digest of every file the job wrote, and leaves the pending manifest for the launcher, which
commits it (beam_pipeline/launcher/commit.py).

Inputs: ShardInfo (with its keys file and part of the class index, written beside it), every Outcome
(rejected, duplicate), the inputs filtered out counted per reason (``((FILTERED, reason), n)``), the
number of discovered inputs, the stats dict (empty without statistics), the tf.Transform writes to wait
for, the run's refusals, and how many pairs were validated or taken from the verdict cache (the
manifest's ``lineage``). The rejects are written in parts by each bundle and joined here into one
``rejects/rejects-00000-of-00001.jsonl``: their lines never cross a shuffle. Every path in the manifest is
relative to the output folder (core/layout.py).
Nothing here is visible to a reader: the version folder is named by no
manifest until the launcher, which holds the output's lock, checks it and
writes ``manifest.json``. A refused run (a gate failed, core.records.Refusal)
writes no shard and leaves its reason instead, which :func:`read_result`
turns into :class:`RunRefused` for the launcher.
"""

import dataclasses
import uuid

import apache_beam as beam
from apache_beam.transforms.window import GlobalWindows

from beam_pipeline import phases
from beam_pipeline.core import digests, layout, paths
from beam_pipeline.core.failures import RunFailed, write_failed
from beam_pipeline.core.gates import COUNTS_GATE, first_refusal
from beam_pipeline.core.manifest import CountsDoNotReconcile, build_manifest, count_outcomes, lineage_summary
from beam_pipeline.core.records import FILTERED, Outcome, Refusal
from beam_pipeline.io import files, streams
from beam_pipeline.stages.signatures import AnyOutput
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


class LinesToPartFn(beam.DoFn):
    """JSON line -> nothing; at the bundle's end the path of the part file this bundle wrote its lines to.

    FinalizeFn joins the parts into the one file the manifest lists: the lines never cross a shuffle."""

    def __init__(self, folder: str):
        self._folder = folder
        self._handle, self._path = None, None

    def process(self, line: str):
        if self._handle is None:
            self._path = paths.join(self._folder, f"{uuid.uuid4().hex}.jsonl")
            self._handle = streams.create_for_write(self._path, compression_type="uncompressed")
        self._handle.write(line.encode("utf-8") + b"\n")

    def finish_bundle(self):
        if self._handle is not None:
            path, handle, self._handle, self._path = self._path, self._handle, None, None
            try:
                handle.close()
            except OSError as error:
                raise write_failed(path, error) from error
            yield GlobalWindows.windowed_value(path)


def joined_file(prefix: str) -> str:
    """The one file a JSON-lines output is published as: ``PREFIX-00000-of-00001.jsonl``."""
    return f"{prefix}-00000-of-00001.jsonl"


def read_result(data_dir: str) -> dict:
    """The pending manifest a finished job left in ``data_dir``; raises RunRefused when a gate refused the
    run, RunFailed when its counts did not reconcile."""
    pending = paths.join(data_dir, layout.PENDING_MANIFEST)
    if not files.exists(pending):
        refusal = Refusal(**files.read_json(paths.join(data_dir, layout.REFUSAL)))
        if refusal.gate == COUNTS_GATE:
            raise RunFailed(refusal.message)
        raise RunRefused(refusal)
    return files.read_json(pending)


class FinalizeFn(AnyOutput, beam.DoFn):
    """Runs once, after every other write: stats.json, the files table, then the pending manifest (or the refusal)."""

    def __init__(self, spec: PublishSpec, options: dict, package_versions: dict):
        self._spec = spec
        self._options = options
        self._package_versions = package_versions

    def process(self, _, shards, counts, discovered, reject_parts, stats, transform_written, refusals, settled,
                sections=()):
        phases.reached(phases.FINALIZE)
        if refusals:
            files.write_bytes(paths.join(self._spec.data_dir, layout.REFUSAL),
                              files.json_bytes(dataclasses.asdict(first_refusal(refusals))))
        else:
            try:
                yield self._finalize(shards, counts, discovered, reject_parts, stats[0] if stats else None,
                                     dict(settled), sections)
            except CountsDoNotReconcile as error:      # a bug, reported as one line: nothing is published
                files.write_bytes(paths.join(self._spec.data_dir, layout.REFUSAL), files.json_bytes(
                    dataclasses.asdict(Refusal(COUNTS_GATE, f"the counts do not reconcile at PublishOutputs: {error}. "
                                                            "Nothing was published. This is a bug, not bad input: "
                                                            "please report it with the run's log"))))

    def _finalize(self, shards, counts, discovered, reject_parts, stats, settled, sections=()) -> str:
        spec = self._spec
        data_dir, version = spec.data_dir, spec.version
        rejects = layout.in_version(version, joined_file(layout.REJECTS_PREFIX))
        table = {rejects: files.join_parts(sorted(reject_parts), paths.join(data_dir, joined_file(
            layout.REJECTS_PREFIX)))}
        shard_dicts = [dataclasses.asdict(shard) for shard in sorted(shards, key=_shard_order)]
        manifest = build_manifest(
            task=spec.task, num_classes=spec.num_classes, ignore_label=spec.ignore_label,
            class_names=spec.class_names, shards=shard_dicts,
            outcome_counts=count_outcomes(counts), discovered=discovered, options=self._options,
            versions=self._package_versions, rejects_files=[rejects], stats=stats, balance=spec.balance.as_dict(),
            class_index_files=[shard.class_index for shard in shards if shard.class_index],
            lineage=lineage_summary(settled, spec.cache_folder, shard_dicts, version, spec.rewritten),
            mask_map=spec.mask_map, label_map=spec.label_map, version=version, record_layout=spec.record_layout)
        for extra in sections:             # the leakage and drift steps' sections, files and warnings (stages/leakage)
            manifest.update({key: value for key, value in extra.items() if key not in ("files", "warnings")})
            table.update(extra.get("files") or {})
            manifest["warnings"] = manifest["warnings"] + list(extra.get("warnings") or ())
        table.update(digests.shard_entries(manifest["splits"]))
        for shard in shards:
            table.update({path: {"bytes": size, "sha256": sha} for path, size, sha in shard.side_files})
        if stats:
            table[layout.in_version(version, layout.STATS)] = files.write_bytes(paths.join(data_dir, layout.STATS),
                                                                                 files.json_bytes(stats))
        files.remove_folder(layout.temp_dir(data_dir))       # tf.Transform's temporary files, the parts
        transform = layout.transform_dir(data_dir)
        for relative in sorted(files.list_files(transform)):
            table[layout.in_version(version, paths.join(layout.TRANSFORM_DIR, relative))] = files.file_entry(
                paths.join(transform, relative))
        manifest["files"] = dict(sorted(table.items()))
        pending = paths.join(data_dir, layout.PENDING_MANIFEST)
        files.write_bytes(pending, files.json_bytes(manifest))
        return pending


def _shard_order(shard):
    return shard.split, shard.group, shard.path             # a kept shard's path names its run


class PublishOutputs(beam.PTransform):
    """``pending_manifest_path = (shards, outcomes, filtered, discovered, stats, transform_written, refusals,
    settled[, sections]) | PublishOutputs(PublishSpec(data_dir, task, ...), options, package_versions)``; ``settled``:
    ``(how, n)`` of ValidatePairs, for the manifest's lineage; ``sections``: dicts of manifest sections with their
    ``files`` and ``warnings`` (stages/leakage)."""

    def __init__(self, spec: PublishSpec, options: dict, package_versions: dict):
        super().__init__()
        self._spec = spec
        self._options = options
        self._package_versions = package_versions

    def expand(self, inputs):
        shards, outcomes, filtered, discovered, stats, transform_written, refusals, settled, *more = inputs
        extra = {"sections": beam.pvalue.AsList(more[0])} if more else {}
        data_dir = self._spec.data_dir
        reject_parts = (outcomes
                        | "KeepReportable" >> beam.Filter(_is_reportable)
                        | "ToJsonLines" >> beam.Map(_to_json)
                        # one JSON object per rejected or duplicate input
                        | "WriteRejects" >> beam.ParDo(LinesToPartFn(layout.parts_dir(data_dir, "rejects"))))
                        # path of each bundle's part of the rejects
        counts = ((outcomes
                   | "StatusAndReason" >> beam.Map(_status_and_reason)
                   | "CountOutcomes" >> beam.combiners.Count.PerElement(),
                   filtered)
                  | "WithFilteredCounts" >> beam.Flatten())
                  # ((status, reason), n)
        return (shards.pipeline
                | "Once" >> beam.Create([None])
                | "WriteStatsAndPendingManifest" >> beam.ParDo(
                    FinalizeFn(self._spec, self._options, self._package_versions),
                    shards=beam.pvalue.AsList(shards), counts=beam.pvalue.AsList(counts),
                    discovered=beam.pvalue.AsSingleton(discovered),
                    reject_parts=beam.pvalue.AsList(reject_parts), stats=beam.pvalue.AsList(stats),
                    transform_written=beam.pvalue.AsList(transform_written),
                    refusals=beam.pvalue.AsList(refusals), settled=beam.pvalue.AsList(settled), **extra))
