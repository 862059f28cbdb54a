"""build_pipeline: the wiring, one labelled step per concern; and run(), which launches it."""

import logging
import shutil
import time
from typing import Dict, List, Optional

import apache_beam as beam

from beam_pipeline.core import layout, paths
from beam_pipeline.core.balance import growth_refusal
from beam_pipeline.core.failures import RunFailed, describe_failure
from beam_pipeline.core.gates import (count_refusal, offending_values, reject_refusal, split_signal, summed,
                                     top_values, train_refusal)
from beam_pipeline.core.layouts import LAYOUTS, described
from beam_pipeline.core.masks.report import border_warnings, edge_tally
from beam_pipeline.core.rerun.versions import ParentSpec
from beam_pipeline.core.selection import SplitSpec
from beam_pipeline.io.cache import spill as spill_store
from beam_pipeline.launcher import launch, memory, runners, watch
from beam_pipeline.launcher.rerun.cache import claim_cache, collect_cache
from beam_pipeline.launcher.rerun.parent import checked_parent, without_damaged
from beam_pipeline.launcher.commit import OutputRun
from beam_pipeline.launcher.rerun import unchanged
from beam_pipeline.launcher.config import CorpusConfig
from beam_pipeline.launcher.leakage import drift_spec, leakage_spec
from beam_pipeline.report.masks import sampled_masks
from beam_pipeline.stages.rerun.adopt import AdoptKilledSpill
from beam_pipeline.stages.balance_split import BalanceTrainSplit
from beam_pipeline.stages.counters import SHUFFLE, counter_total
from beam_pipeline.stages.discover import ReadCorpus
from beam_pipeline.stages.publish import PublishOutputs, read_result
from beam_pipeline.stages.rerun.reuse import KeepParentRecords, NameLostRecords
from beam_pipeline.stages.select import SelectSubset
from beam_pipeline.stages.sampling import prompt_state_sampler
from beam_pipeline.stages.signatures import cache_signatures
from beam_pipeline.stages.validate import DeduplicatePairs, ValidatePairs
from beam_pipeline.stages.leakage.drift import ProfileVersion
from beam_pipeline.stages.leakage.group import GroupNearDuplicates
from beam_pipeline.stages.shuffle import Materialize
from beam_pipeline.stages.specs import CacheSpec, DriftSpec, LeakageSpec, ShuffleSpec
from beam_pipeline.stages.write import WriteShards

_LOG = logging.getLogger("beam_pipeline.pipeline")    # the name it had before the launcher/ folder


def _growth_refusals(growth: float, max_growth: float):
    refusal = growth_refusal(growth, max_growth)
    return [refusal] if refusal else []


def _status_and_reason(outcome):
    return outcome.status, outcome.reason


def _reject_refusals(counts, discovered: int, max_fraction: float, values):
    refusal = reject_refusal(counts, discovered, max_fraction, top_values(values))
    return [refusal] if refusal else []


def _split_signal(pair):
    return split_signal(pair.ref.split, pair.class_pixels, pair.label)


def _train_refusals(splits, allow: bool):
    refusal = train_refusal(splits, allow)
    return [refusal] if refusal else []


def _count_refusals(counts, discovered: int, valid: int):
    refusal = count_refusal(counts, discovered, valid)
    return [refusal] if refusal else []


def build_pipeline(p: beam.Pipeline, config: CorpusConfig, split_spec: SplitSpec, options: dict,
                   package_versions: dict, temp_dir: str, data_dir: str, shuffle: ShuffleSpec = ShuffleSpec(),
                   cache: CacheSpec = CacheSpec(), parent: Optional[ParentSpec] = None,
                   rewritten: Optional[str] = None, leakage: Optional[LeakageSpec] = None,
                   drift: Optional[DriftSpec] = None, validation_threads: int = 1):
    """Add every step to ``p``, writing into ``data_dir`` (the run's version folder, core/layout.py);
    records cross the shuffles as ``shuffle`` says (stages/shuffle.py), verdicts are reused from and
    kept in ``cache`` (docs/cache.md), and the records of ``parent`` (the published version's shards, those found
    damaged apart: launcher/rerun/parent.py) that did not change are kept where it holds them
    (docs/incremental.md); ``rewritten``: why there is no parent to keep from. ``leakage``: near duplicates and
    split groups, whose components are put into one split after validation, and ``drift``, the comparison with the
    parent version (docs/leakage.md); None: neither (--near_duplicates off without --split_group).
    ``validation_threads``: pairs a worker reads and checks at once (launcher/runners.py validation_threads).

    Returns the PCollection holding the pending manifest's path (beam_pipeline/stages/publish.py).
    """
    refs, unpaired = p | "ReadCorpus" >> ReadCorpus(config.discover_spec(), shuffle)
    # PairRef | rejected Outcome (bad rows, orphans, paths outside the root)
    discovered = ((refs | "CountPairs" >> beam.combiners.Count.Globally(),
                   unpaired | "CountUnpaired" >> beam.combiners.Count.Globally())
                  | "MergeDiscoveryCounts" >> beam.Flatten()
                  | "CountDiscovered" >> beam.CombineGlobally(sum))
    # int: every discovered input
    selected, dropped, filtered = refs | "SelectSubset" >> SelectSubset(config.select_spec(split_spec), shuffle)
    # PairRef with split | rejected Outcome | ((FILTERED, reason), n): the inputs filtered out, counted
    selected_count = None
    if cache.folder is not None and cache.spill == "auto":
        selected_count = selected | "CountSelected" >> beam.combiners.Count.Globally()
        # int: the selected pairs, which the shards of --spill auto are kept room for
    valid, invalid, settled = selected | "ValidatePairs" >> ValidatePairs(config.check_spec(), cache, shuffle,
                                                                          selected_count, validation_threads)
    # ValidPair | rejected Outcome | (how, n): pairs validated afresh, reused from the cache, reused after a hash
    unique, duplicates = valid | "DeduplicatePairs" >> DeduplicatePairs(shuffle)
    # ValidPair (one per content) | duplicate Outcome
    sections = ()
    if leakage is not None:
        unique, leakage_section = unique | "GroupNearDuplicates" >> GroupNearDuplicates(leakage, shuffle)
        # ValidPair in its final split | the manifest's leakage section, with its files and warnings
        sections = (leakage_section, unique | "ProfileVersion" >> ProfileVersion(drift))
        # ... and its profile and drift since the parent version, with their warnings
    early_rejects = ((unpaired, dropped, invalid)
                     | "MergeEarlyOutcomes" >> Materialize(shuffle)
                     # rejected Outcome, each input written where it is made: a Flatten's stage would hold every
                     # reject in the launcher (docs/scale.md)
                     | "EarlyStatusAndReason" >> beam.Map(_status_and_reason)
                     | "CountEarlyOutcomes" >> beam.combiners.Count.PerElement())
    early_counts = ((early_rejects, filtered)
                    | "WithFilteredCounts" >> beam.Flatten()
                    # ((status, reason), n) of the inputs filtered out or rejected before writing
                    | "AllEarlyCounts" >> beam.combiners.ToList())
    rejected_values = (invalid
                       | "OffendingValues" >> beam.FlatMap(offending_values)
                       | "SumOffendingValues" >> beam.CombinePerKey(summed)
                       | "AllOffendingValues" >> beam.combiners.ToList())
    # [((reason, mask value or colour), (pixels, masks)), ...] of the pairs rejected for their masks' values
    reject_refusals = early_counts | "CheckRejectRate" >> beam.FlatMap(
        _reject_refusals, discovered=beam.pvalue.AsSingleton(discovered), max_fraction=config.max_reject_fraction,
        values=beam.pvalue.AsSingleton(rejected_values))
    # Refusal when more than --max_reject_fraction of the selected inputs were rejected, naming the values
    valid_count = valid | "CountValid" >> beam.combiners.Count.Globally()
    count_refusals = early_counts | "CheckCounts" >> beam.FlatMap(
        _count_refusals, discovered=beam.pvalue.AsSingleton(discovered), valid=beam.pvalue.AsSingleton(valid_count))
    # Refusal when discovered != filtered + rejected + valid: inputs lost before writing (a bug)
    if config.compute_stats:
        from beam_pipeline.stages.stats import ComputeStats  # TensorFlow is imported only when it is needed.
        stats, transform_written = unique | runners.STATISTICS_STEP >> ComputeStats(config.stats_spec(data_dir),
                                                                                  temp_dir, shuffle)
        # stats dict (train split, from tf.Transform) | paths of the written transform output
    else:
        stats = p | "NoStats" >> beam.Create([{}])
        transform_written = p | "NoTransformOutput" >> beam.Create([])
    balance = config.balance_spec()
    balanced, growth = unique | "BalanceTrainSplit" >> BalanceTrainSplit(balance, stats, shuffle)
    # ValidPair (train: repeat copies or strata) | float growth of the train split
    growth_refusals = growth | "CheckGrowth" >> beam.FlatMap(_growth_refusals, max_growth=balance.max_growth)
    # Refusal when the growth is above --max_growth
    train_refusals = (unique
                      | "SplitSignals" >> beam.Map(_split_signal)
                      | "SumPerSplit" >> beam.CombinePerKey(summed)
                      | "AllSplits" >> beam.combiners.ToList()
                      | "CheckTrain" >> beam.FlatMap(_train_refusals, allow=config.allow_no_train))
    # Refusal when no train split, or no train pair holding a class, would be published (--allow_no_train)
    refusals = ((count_refusals, reject_refusals, growth_refusals, train_refusals)
                | "MergeRefusals" >> beam.Flatten())
    # Refusal of any gate: then no shard is written and nothing is published
    if parent is not None:
        to_write, kept, version_counts, lost = balanced | "KeepParentRecords" >> KeepParentRecords(
            parent, config.output, config.num_classes, shuffle)
        # ValidPair to write (new, changed, compacted, rebuilt) | ShardInfo of a parent shard kept
        # | (kept|deleted|compacted|rebuilt|lost, n) | (record key, damaged parent shard) of a record lost with it
        if parent.damaged:
            invalid = invalid | "NameLostRecords" >> NameLostRecords(lost)
            # rejected Outcome: a pair whose files are gone, and whose record was in a damaged shard, renamed
    else:
        to_write = balanced
        kept = p | "NoKeptShards" >> beam.Create([])
        version_counts = p | "NoVersionCounts" >> beam.Create([])
    adopt = config.adopt_spec(data_dir, cache) if cache.folder is not None else None
    if adopt is not None and adopt.enabled and spill_store.local_spill_left(cache.folder):
        to_write, adopted, adopted_counts = to_write | "AdoptKilledSpill" >> AdoptKilledSpill(adopt, refusals, shuffle)
        # ValidPair to write | ShardInfo of a killed run's spill file adopted as a shard | ("adopted", n)
    else:                   # no killed run's spill file to adopt (or a cache that adopts none): no step for it
        adopted = p | "NoAdoptedShards" >> beam.Create([])
        adopted_counts = p | "NoAdoptedCounts" >> beam.Create([])
    written, changed = to_write | "WriteShards" >> WriteShards(config.write_spec(data_dir), refusals, shuffle)
    # ShardInfo (its keys file and class index part written beside it) | rejected Outcome (changed since validation)
    shards = (written, kept, adopted) | "AllShards" >> beam.Flatten()
    # ShardInfo of every shard of the version: this run's and the parent's it keeps
    outcomes = ((unpaired, dropped, invalid, duplicates, changed)
                | "MergeOutcomes" >> Materialize(shuffle))
    # Outcome: everything discovered and not written, but the inputs filtered out (counted in ``filtered``)
    real_stats = stats | "DropEmptyStats" >> beam.Filter(bool)
    lineage = ((settled, version_counts, adopted_counts) | "SettledAndVersioned" >> beam.Flatten()
               | "CountLineage" >> beam.CombinePerKey(sum))
    # (how, n) for the whole run: validated, from the cache, rehashed; records kept, deleted, compacted, adopted
    publish = config.publish_spec(data_dir, cache, config.record_layout(package_versions), rewritten)
    extra = (sections | "AllSections" >> beam.Flatten(),) if sections else ()
    return ((shards, outcomes, filtered, discovered, real_stats, transform_written, refusals, lineage, *extra)
            | "PublishOutputs" >> PublishOutputs(publish, options, package_versions))


def _described(config: CorpusConfig) -> str:
    """How the input is read, as the first line says it: listing, paired, class_folders, or the layout."""
    if config.layout in LAYOUTS:
        return described(LAYOUTS[config.layout])
    return config.input_format


def _border_warnings(config: CorpusConfig, pending: dict) -> List[dict]:
    """A warning per class that lies only on object edges in a sample of the written train masks
    (core/masks/report.border_warnings)."""
    if config.task != "segmentation":
        return []
    tally = edge_tally(sampled_masks(config.output, pending), config.num_classes)
    names = list(config.class_names) or [str(c) for c in range(config.num_classes)]
    return border_warnings(tally, names, config.mask_map)


def step_files(data_dir: str) -> Dict[str, str]:
    """What each step writes, to name the file when a write fails in Beam's or tf.Transform's code."""
    return {"PublishOutputs/WriteRejects": layout.parts_dir(data_dir, "rejects") + "/",
            "PublishOutputs": paths.join(data_dir, layout.STATS),
            "ComputeStats": layout.transform_dir(data_dir) + "/",
            "WriteShards": data_dir + "/"}


def run(argv: Optional[List[str]] = None) -> dict:
    """Run the whole job; returns manifest.json's content plus ``elapsed_seconds``.

    Raises CorpusOptionsError (a bad option or input, before anything runs), OutputLocked (another
    live run holds the output), publish.RunRefused (a gate stopped the run before any shard was
    written) and RunFailed (a write failed: the message names the file and the cause). In every
    case nothing is published and the output's previous dataset is as it was.
    With --plan nothing runs: the result is ``{"plan": estimates}`` (see beam_pipeline/launcher/plan.py). When
    nothing changed since the published version, nothing runs either: the result is its manifest with ``unchanged``
    (launcher/rerun/unchanged.py, --skip_unchanged).
    """
    argv = list(argv or [])
    launched = launch.resolve(argv)
    config = launched.config
    if launched.plan_sample is not None:
        from beam_pipeline.launcher.plan import make_plan
        with memory.frozen_for_the_run():
            return {"plan": make_plan(config, launched.split, launched.plan_sample)}
    launch.check_output(config)
    found = unchanged.skipped(launched)
    if found is not None:
        return found
    counted = launch.input_count(launched.options, config)
    runners.apply_runner_defaults(argv, launched.options, config, counted)
    runners.apply_worker_log_options(argv, launched.options)
    pool = runners.warm_pool(launched.options)   # workers importing while it is built
    try:
        return _run_launched(launched, config, counted)
    finally:
        if pool is not None:
            pool.close()


def _run_launched(launched, config, counted) -> dict:
    """run() once the engine is chosen (and its worker processes are starting)."""
    run_options = dict(config.as_dict(), runner=runners.runner_name(launched.options))
    started = time.monotonic()
    inputs_context = unchanged.context(config)
    store = launch.store_of(config, launched.options)
    with OutputRun(store, config.output, config.overwrite, config.keep_versions) as output_run:
        data_dir = output_run.data_dir
        _LOG.info("Reading %s (%s, %s) into %s", config.input, _described(config), config.task, data_dir)
        shuffle, made_for_shuffle = launch.shuffle_spec(launched.options, config, data_dir, counted)
        package_versions = launch.package_versions()
        cache_spec = config.cache_spec(output_run.run_id, package_versions, (output_run.previous or {}).get("run_id") or "")
        if config.cache_dir and config.use_cache:
            claim_cache(config.cache_root, config.output)
        parent, rewritten = config.parent_spec(output_run.previous, package_versions)
        checked = checked_parent(config.output, output_run.previous, parent.shards if parent else (), config.balance,
                                 config.on_damaged_parent)
        parent = parent and without_damaged(parent, checked.damage)
        try:
            cache_signatures()       # Beam's checks of every DoFn, at construction and in the stages run here
            prompt_state_sampler()   # each stage run here ends within 10 ms of its last element, not 200
            p = beam.Pipeline(runner=runners.runner(launched.options), options=launched.options)
            build_pipeline(p, config, launched.split, run_options, package_versions,
                           launch.temp_dir(launched.options, data_dir), data_dir, shuffle, cache_spec, parent,
                           rewritten, leakage_spec(config, launched.split, output_run.previous, data_dir,
                                                     lambda config: runners.component_rounds(config, counted)),
                           drift_spec(config, output_run.previous), runners.validation_threads(launched.options))
            with memory.frozen_for_the_run():          # what is built so far never scanned again, up to the commit
                result = watch.run_and_watch(p, launched.options)     # a progress bar, lines, or where to watch
                pending = read_result(data_dir)
                pending["warnings"] = list(pending.get("warnings") or []) + _border_warnings(config, pending)
                pending["lineage"] = dict(pending["lineage"], inputs=unchanged.recorded(
                    pending["lineage"].get("inputs"), inputs_context))
                timing = {"started": output_run.started, "pipeline_seconds": round(time.monotonic() - started, 1)}
                manifest = output_run.commit(pending, timing, checked.lineage() if parent else {})
                if cache_spec.folder:
                    collect_cache(config.cache_root, cache_spec)
        except Exception as error:  # noqa: BLE001 - only failed writes are reworded; anything else is raised as is
            described = describe_failure(str(error), step_files(data_dir), written_under=config.output)
            if described is None:
                raise
            raise RunFailed(f"{described}. Nothing was published: {config.output} holds what it held "
                            "before") from error
        finally:
            if made_for_shuffle:
                shutil.rmtree(made_for_shuffle, ignore_errors=True)
    manifest["elapsed_seconds"] = time.monotonic() - started
    manifest["shuffle_value_bytes"] = counter_total(result, *SHUFFLE)
    return manifest
