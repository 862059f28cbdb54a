"""GroupNearDuplicates: near-duplicate pairs found, joined into components, and each pair's split decided after
validation (docs/leakage.md).

Input: the unique valid pairs, each in the split selection gave its unit (its ``--split_group``, or itself).
Output: the same pairs, each in its final split (``--near_duplicates group`` over fraction splits puts a component
of several units in the split of a stable hash of the component; otherwise no pair moves), and the manifest's
``leakage`` section with the files it lists (the version's index and pairs file) and its warnings. Everything
after this step (statistics, balancing, the gates, the shards) sees the final splits, so the statistics are
exact over them.

Steps: FindNearPairs (bands of the hash) -> FindComponents (Hash-to-Min over the split units) -> every pair
joined with its unit's component, by unit (AssignSplitsFn) -> each near-duplicate pair's two halves joined
(the pairs file, the tallies) -> the section. On a re-run with the parent's index (stages/leakage/rerun.py)
only new hashes are compared and only the components they or the gone images touch are joined again.
"""

import dataclasses
from typing import Optional

import apache_beam as beam
from apache_beam.transforms.window import GlobalWindows

from beam_pipeline.core.leakage import bands, index, summary
from beam_pipeline.core.leakage.groups import unit_id
from beam_pipeline.core.leakage.splits import image_id
from beam_pipeline.core.records import ValidPair
from beam_pipeline.core.rerun.versions import record_key
from beam_pipeline.stages.leakage import rerun
from beam_pipeline.stages.leakage.components import FindComponents
from beam_pipeline.stages.leakage.find import FindNearPairs
from beam_pipeline.stages.leakage.files import WriteSortedLines
from beam_pipeline.stages.shuffle import GroupPackedByKey
from beam_pipeline.stages.specs import LeakageSpec, ShuffleSpec

PAIR, LABEL, HALF = 0, 1, 2            # what AssignSplitsFn receives for a unit
HALF_TAG, TALLY_TAG, SIZE_TAG = "half", "tally", "size"


def _pair_of_unit(pair: ValidPair):
    return unit_id(pair.ref), (PAIR, pair)


def _label_of_unit(element):
    unit, component = element
    return unit, (LABEL, component)


def _halves(pair):
    """A near-duplicate pair's two halves, each to its unit: the unit names its image, split and component (a
    parent's pair still held has its component after these five)."""
    a, b, unit_a, unit_b, distance = pair[:5]
    yield unit_a, (HALF, (a, b, distance, 0))
    yield unit_b, (HALF, (a, b, distance, 1))


class _TallyPerBundle(beam.DoFn):
    """Merges its elements' Tallies per bundle and emits one at the bundle's end (TALLY_TAG), so that what reaches
    AllTallies is a few elements, not one a pair or a component (a Flatten's input is held by Beam's
    DirectRunner engine)."""

    def __init__(self):
        self._tally = summary.Tally()

    def start_bundle(self):
        self._tally = summary.Tally()

    def finish_bundle(self):
        tally, self._tally = self._tally, summary.Tally()
        yield beam.pvalue.TaggedOutput(TALLY_TAG, GlobalWindows.windowed_value(tally))


class AssignSplitsFn(_TallyPerBundle):
    """(unit, [(PAIR, ValidPair) | (LABEL, component) | (HALF, edge half), ...]) -> each ValidPair in its final split;
    the halves of its near-duplicate pairs, named (HALF_TAG); (component, images) (SIZE_TAG); at the bundle's end,
    the Tally of its units (TALLY_TAG: one element a bundle, not one a unit)."""

    def __init__(self, spec: LeakageSpec):
        super().__init__()
        self._spec = spec

    def process(self, element):
        unit, values = element
        component, halves = None, {}
        for kind, value in values:
            if kind == LABEL:
                component = value
            elif kind == HALF:
                halves[value] = None                 # each half once (in order), however many times it came
        named, splits, finals, moved, group = {}, set(), set(), 0, ""
        for kind, pair in values:
            if kind != PAIR:
                continue
            final = self._spec.policy.final_split(pair.ref.split, component)
            moved += final != pair.ref.split
            splits.add(pair.ref.split)
            finals.add(final)
            group = pair.ref.group
            if halves or component is not None:      # named only for the pairs file and the component's size
                named[image_id(pair.ref.key)] = (pair.ref.source_id, pair.ref.split, final, record_key(pair.ref.key))
            yield pair if final == pair.ref.split else dataclasses.replace(
                pair, ref=dataclasses.replace(pair.ref, split=final))
        label = unit if component is None else component
        for a, b, distance, end in halves:
            found = named.get(b if end else a)
            if found is not None:
                yield beam.pvalue.TaggedOutput(HALF_TAG, ((a, b), (end, distance, unit, label, found)))
        spanning = len(splits) > 1 and bool(group)
        self._tally.merge(summary.Tally(moved=moved, units={split: 1 for split in finals}, spanning=int(spanning),
                                        spanning_examples=[group] if spanning else []))
        if component is not None and named:
            yield beam.pvalue.TaggedOutput(SIZE_TAG, (component, len(named)))


def _joined_pair(element):
    """((a, b), [half, ...]) -> (pairs-file line, Tally) once both halves are there (each half may come twice: a
    pair found in two band buckets)."""
    (a, b), halves = element
    ends = {}
    for end, distance, unit, label, found in halves:
        ends[end] = (distance, unit, label, found)
    if len(ends) < 2:
        return
    (distance, unit_a, label, (name_a, before_a, after_a, key_a)) = ends[0]
    (_, unit_b, _, (name_b, before_b, after_b, key_b)) = ends[1]
    line = index.pair_line({"a": name_a, "b": name_b, "distance": distance, "splits": [after_a, after_b],
                            "splits_before": [before_a, before_b], "component": index.hex_id(label),
                            "ids": [index.hex_id(value) for value in (a, b, unit_a, unit_b)]})
    yield line, summary.pair_tally(distance, (unit_a, unit_b), (before_a, before_b), (after_a, after_b),
                                   (name_a, name_b), (key_a, key_b))


class JoinHalvesFn(_TallyPerBundle):
    """((a, b), [half, ...]) -> the pair's line of the pairs file; its Tally merged into the bundle's."""

    def process(self, element):
        for line, tally in _joined_pair(element):
            self._tally.merge(tally)
            yield line


class SizeTalliesFn(_TallyPerBundle):
    """(component, [images of a unit, ...]) -> nothing; the component's size merged into the bundle's Tally."""

    def process(self, element):
        _, images = element
        size = sum(images)
        self._tally.merge(summary.Tally(component_sizes={summary.size_bin(size): 1}, largest=size))
        return ()


class MergeTallies(beam.CombineFn):
    def create_accumulator(self):
        return summary.Tally()

    def add_input(self, accumulator, tally):
        return accumulator.merge(tally)

    def merge_accumulators(self, accumulators):
        merged = summary.Tally()
        for accumulator in accumulators:
            merged.merge(accumulator)
        return merged

    def extract_output(self, accumulator):
        return accumulator


class SectionFn(beam.DoFn):
    """The manifest's ``leakage`` section, its files and warnings: one dict for PublishOutputs."""

    def __init__(self, spec: LeakageSpec, rounds: int):
        self._spec = spec
        self._rounds = rounds

    def process(self, _, tally, index_files, pairs_file):
        spec = self._spec
        table = dict(index_files)
        buckets = {int(path.rsplit("-", 1)[1].split(".")[0]): path for path in table}
        pairs_path, pairs_entry = pairs_file[0]
        table[pairs_path] = pairs_entry
        leakage = summary.section(
            tally[0] if tally else summary.Tally(), policy=spec.policy.policy, radius=spec.radius,
            bands=bands.Layout(spec.radius).describe(), split_group=spec.split_group,
            moves_splits=spec.policy.moves_splits, pairs_file=pairs_path,
            index=index.description(spec.radius, spec.split_group, buckets), note=spec.note, rounds=self._rounds)
        leakage["index"]["reused"] = spec.parent.run_id if spec.parent else None
        leakage["index"]["rebuilt"] = spec.rebuilt
        yield {"leakage": leakage, "files": table,
               "warnings": summary.warnings(leakage, spec.policy.split.mode if spec.policy.split else "")}


class GroupNearDuplicates(beam.PTransform):
    """``pairs, section = unique | GroupNearDuplicates(LeakageSpec(...), ShuffleSpec())``."""

    def __init__(self, spec: LeakageSpec, shuffle: ShuffleSpec = ShuffleSpec(), rounds: Optional[int] = None):
        super().__init__()
        self._spec = spec
        self._shuffle = shuffle
        self._rounds = rounds

    def expand(self, pairs):
        spec = self._spec
        changes = pairs | "SinceParent" >> rerun.SinceParent(spec, self._shuffle)
        # nodes (image id, unit id, hash) to compare; the parent's nodes gone, its pairs still held (re-runs)
        found, index_files, find_tallies = changes.nodes | "FindNearPairs" >> FindNearPairs(
            spec.radius, spec.output, spec.version, spec.parent, changes.gone if spec.parent else None, self._shuffle)
        # (image a, image b, unit a, unit b, distance) of every pair with a new image | (index file, entry) | Tally
        rounds = spec.rounds if self._rounds is None else self._rounds
        edges, old_labels = found | "ComponentsToJoin" >> rerun.ComponentsToJoin(changes, spec.parent is not None,
                                                                                every_edge=rounds == 0)
        # (unit a, unit b) to join | (unit, component) of the parent's components no new pair or gone image touches
        labels, component_tally = edges | "FindComponents" >> FindComponents(rounds, self._shuffle)
        # (unit, component) of every unit with a near duplicate in another unit | Tally
        assigned = ((pairs | "PairByUnit" >> beam.Map(_pair_of_unit),
                     labels | "LabelByUnit" >> beam.Map(_label_of_unit),
                     old_labels | "KeptLabelByUnit" >> beam.Map(_label_of_unit),
                     found | "HalvesByUnit" >> beam.FlatMap(_halves),
                     changes.old_pairs | "HeldHalvesByUnit" >> beam.FlatMap(_halves))
                    # each input packed and written where it is made: no Flatten's stage holding every pair
                    | "GroupByUnit" >> GroupPackedByKey(self._shuffle)
                    # (unit, [(PAIR, ValidPair) | (LABEL, component) | (HALF, edge half), ...])
                    | "AssignSplits" >> beam.ParDo(AssignSplitsFn(spec)).with_outputs(HALF_TAG, TALLY_TAG, SIZE_TAG,
                                                                                       main="pairs"))
        # ValidPair in its final split | ((a, b), named half) | Tally | (component, images)
        joined = (assigned[HALF_TAG]
                  | "GroupHalves" >> GroupPackedByKey(self._shuffle)
                  # ((a, b), [named half, ...])
                  | "JoinHalves" >> beam.ParDo(JoinHalvesFn()).with_outputs(TALLY_TAG, main="lines"))
        # pairs-file line of each near-duplicate pair | Tally of a bundle's pairs
        pairs_file = joined.lines | "WritePairsFile" >> WriteSortedLines(
            spec.output, spec.version, index.pairs_file(), spec.data_dir, self._shuffle)
        # (pairs file, its entry)
        sizes = (assigned[SIZE_TAG]
                 | "ImagesPerComponent" >> GroupPackedByKey(self._shuffle)
                 # (component, [images of each of its units, ...])
                 | "SizeTallies" >> beam.ParDo(SizeTalliesFn()).with_outputs(TALLY_TAG, main="none"))
        # Tally of a bundle's component sizes
        tally = ((find_tallies, component_tally, assigned[TALLY_TAG], sizes[TALLY_TAG], joined[TALLY_TAG])
                 | "AllTallies" >> beam.Flatten()
                 | "MergeTallies" >> beam.CombineGlobally(MergeTallies()))
        section = (pairs.pipeline
                   | "OnceForTheSection" >> beam.Create([None])
                   | "LeakageSection" >> beam.ParDo(
                       SectionFn(spec, rounds), tally=beam.pvalue.AsList(tally),
                       index_files=beam.pvalue.AsList(index_files), pairs_file=beam.pvalue.AsList(pairs_file)))
        return assigned.pairs, section
