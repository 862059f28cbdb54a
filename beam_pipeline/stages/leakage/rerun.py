"""What a re-run compares and joins again, given its parent's near-duplicate index (core/leakage/index.py).

``SinceParent`` splits this run's pairs against the parent's index: each pair's node (image, unit, hash) is sent
to the bucket of its first band, where the parent's rows of band 0 hold every parent hash once; a node the parent
holds as it is needs no comparison, a node it does not is new, and a parent node this run does not hold as it was
is gone (removed, changed, moved to another split group). Only new nodes go to the band buckets (FindNearPairs
then reads the parent's rows there). The parent's pairs between nodes still held stay pairs; their components are
kept unless a new pair or a gone image touches them (``ComponentsToJoin``): only the touched components' pairs,
with the new ones, are joined again. Without a parent index, every node is new and nothing is kept.
"""

import dataclasses
from typing import Dict

import apache_beam as beam
import numpy as np

from beam_pipeline.core import paths
from beam_pipeline.core.failures import read_failed
from beam_pipeline.core.leakage import bands, index, phash
from beam_pipeline.core.leakage.groups import unit_id
from beam_pipeline.core.leakage.splits import image_id
from beam_pipeline.core.records import ValidPair
from beam_pipeline.io import files
from beam_pipeline.stages.leakage.components import nothing
from beam_pipeline.stages.leakage.find import BAND_WIDTH, BandRowsFn, every_bucket_markers
from beam_pipeline.stages.shuffle import GroupPackedByKey
from beam_pipeline.stages.specs import LeakageSpec, ShuffleSpec

GONE_TAG = "gone"              # (image id, unit id) of a parent node this run does not hold as it was


def node_of(pair: ValidPair):
    """(image id, unit id, hash): the pair as a node of the band shuffle."""
    return image_id(pair.ref.key), unit_id(pair.ref), pair.phash


@dataclasses.dataclass
class Changes:
    """SinceParent's outputs."""
    nodes: object              # (image id, unit id, hash) to compare
    gone: object               # image id of each gone node
    gone_units: object         # unit id of each gone node
    old_pairs: object          # (a, b, unit a, unit b, distance, component) of the parent's pairs still held


class FirstBandFn(BandRowsFn):
    """(image id, unit id, hash) -> (bucket of its first band, packed rows (image, unit, hash)), bundled as BandRowsFn
    bundles its band rows: the first band of a bundle's hashes is cut in one numpy call, not one a node (about
    0.4 ms each)."""

    def _by_bucket(self, rows: np.ndarray) -> Dict[int, np.ndarray]:
        return bands.first_band_buckets(rows, self._layout)


class ClassifyFn(beam.DoFn):
    """(bucket, [packed rows, ...]) -> the new nodes (image, unit, hash); (image, unit) of each gone parent node
    (GONE_TAG). A node is held when the parent's band-0 rows of the bucket hold it exactly (image, unit, hash)."""

    def __init__(self, output: str, parent: index.ParentIndex):
        self._output = output
        self._parent = parent

    def process(self, element):
        bucket, blobs = element
        parts = [bands.from_bytes(blob, bands.ROW_WORDS) for blob in blobs if blob]
        current = np.concatenate(parts) if parts else np.zeros((0, bands.ROW_WORDS), np.uint64)
        held = np.zeros((0, bands.ROW_WORDS), np.uint64)
        relative = self._parent.file(bucket)
        if relative:
            path = paths.join(self._output, relative)
            try:
                rows = bands.from_bytes(files.read_bytes(path), BAND_WIDTH)
            except OSError as error:
                raise read_failed(path, error) from error
            held = rows[rows[:, 0] == 0][:, 2:]
        held_keys, current_keys = bands.row_keys(held), bands.row_keys(current)
        known, now = set(held_keys), set(current_keys)
        for row, key in zip(current.tolist(), current_keys):
            if key not in known:
                yield int(row[0]), int(row[1]), phash.from_words(row[2:])
        for row, key in sorted(zip(held.tolist(), held_keys)):
            if key not in now:
                yield beam.pvalue.TaggedOutput(GONE_TAG, (int(row[0]), int(row[1])))


PAIRS_RANGE_BYTES = 1 << 20     # the parent's pairs file is read in ranges of this size, spread over the workers


def _read_pair_lines(part, output: str):
    """(pairs file, start, end) -> the parent's pairs whose lines start in that byte range, read as they go: no
    worker holds the file (docs/scale.md)."""
    relative, start, end = part
    path = paths.join(output, relative)
    try:
        for line in files.read_lines_in_range(path, start, end):
            if line:
                a, b, unit_a, unit_b, distance, component, _ = index.pair_ids(line.decode("utf-8"))
                yield a, b, unit_a, unit_b, distance, component
    except (OSError, UnicodeDecodeError) as error:
        raise read_failed(path, error) from error


class InSetFn(beam.DoFn):
    """Keeps the elements whose ``key`` is (``keep_members``) or is not in the side input ``members``, a set built
    once per bundle."""

    def __init__(self, key, keep_members: bool):
        self._key = key
        self._keep = keep_members
        self._members, self._source = frozenset(), None

    def process(self, element, members):
        if members is not self._source:
            self._members, self._source = frozenset(members), members
        if any(key in self._members for key in self._key(element)) == self._keep:
            yield element


def _images_of_pair(pair):
    return pair[0], pair[1]


def _unit_of_label(element):
    return (element[0],)


def _component_of_label(element):
    return (element[1],)


def _component_of_pair(pair):
    return (pair[5],)


def _image(element):
    return element[0]


def _unit(element):
    return element[1]


class SinceParent(beam.PTransform):
    """``Changes = pairs | SinceParent(spec, ShuffleSpec())``."""

    def __init__(self, spec: LeakageSpec, shuffle: ShuffleSpec = ShuffleSpec()):
        super().__init__()
        self._spec = spec
        self._shuffle = shuffle

    def expand(self, pairs):
        nodes = pairs | "Nodes" >> beam.Map(node_of)
        # (image id, unit id, hash)
        parent = self._spec.parent
        if parent is None:
            return Changes(nodes, pairs | "NothingGone" >> beam.FlatMap(nothing),
                           pairs | "NoGoneUnits" >> beam.FlatMap(nothing),
                           pairs | "NoParentPairs" >> beam.FlatMap(nothing))
        every_bucket = pairs.pipeline | "EveryFirstBandBucket" >> beam.Create(every_bucket_markers(), reshuffle=False)
        # (bucket, b""): every bucket is read, so that the parent's nodes in a bucket that no current node reaches
        # (all its images removed) are gone too; grouped with the nodes' rows, as FindNearPairs does
        first_band = nodes | "ByFirstBand" >> beam.ParDo(FirstBandFn(self._spec.radius))
        # (bucket of the first band, packed rows of a bundle's nodes)
        classified = ((first_band, every_bucket)
                      | "GroupByFirstBand" >> GroupPackedByKey(self._shuffle)
                      # (bucket, [packed rows, ...]): with the parent's rows of band 0 of that bucket
                      | "NewOrGone" >> beam.ParDo(ClassifyFn(self._spec.output, parent)).with_outputs(
                          GONE_TAG, main="new"))
        gone_nodes = classified[GONE_TAG]
        # (image id, unit id) of each parent node this run does not hold as it was
        gone = gone_nodes | "GoneImages" >> beam.Map(_image)
        ranges = ([(parent.pairs_file, start, end)
                   for start, end in files.line_ranges(parent.pairs_bytes, PAIRS_RANGE_BYTES)]
                  if parent.pairs_file else [])
        old_pairs = (pairs.pipeline
                     | "ParentPairsFile" >> beam.Create(ranges)
                     # (pairs file, start, end): a byte range of it, each read where it lands
                     | "ParentPairs" >> beam.FlatMap(_read_pair_lines, output=self._spec.output)
                     | "StillHeld" >> beam.ParDo(InSetFn(_images_of_pair, False), members=beam.pvalue.AsList(gone)))
        # (a, b, unit a, unit b, distance, component) of a parent pair whose two images are held as they were
        return Changes(classified.new, gone, gone_nodes | "GoneUnits" >> beam.Map(_unit), old_pairs)


def _cross_unit(pair) -> bool:
    return pair[2] != pair[3]


def _unit_labels(pair):
    a, b, unit_a, unit_b, distance, component = pair
    yield unit_a, component
    yield unit_b, component


def _component(element):
    return element[1]


def _edge(pair):
    return pair[2], pair[3]


def _endpoints(pair):
    yield pair[2]
    yield pair[3]


class ComponentsToJoin(beam.PTransform):
    """``edges, kept_labels = found | ComponentsToJoin(changes, has_parent, every_edge)``: the unit edges Hash-to-Min
    joins (the new pairs', and the parent's pairs' in components a new pair or a gone image touches), and the
    components of the parent that stay as they were, ``(unit, component)``. With ``every_edge`` (components joined
    by union-find in one worker, which costs one step however many edges it gets), every held pair of the parent is
    an edge again and no component is kept: the same components, without the steps that find the touched ones."""

    def __init__(self, changes: Changes, has_parent: bool, every_edge: bool = False):
        super().__init__()
        self._changes = changes
        self._has_parent = has_parent
        self._every_edge = every_edge

    def expand(self, found):
        changes = self._changes
        new_edges = found | "NewCrossUnit" >> beam.Filter(_cross_unit) | "NewUnitEdges" >> beam.Map(_edge)
        if not self._has_parent:
            return new_edges, found | "NoKeptComponents" >> beam.FlatMap(nothing)
        old = changes.old_pairs | "OldCrossUnit" >> beam.Filter(_cross_unit)
        if self._every_edge:
            return ((new_edges, old | "HeldUnitEdges" >> beam.Map(_edge)) | "EveryEdge" >> beam.Flatten(),
                    new_edges | "NoKeptLabels" >> beam.FlatMap(nothing))
        old_labels = old | "OldLabels" >> beam.FlatMap(_unit_labels) | "DistinctOldLabels" >> beam.Distinct()
        # (unit, component) of each unit in a parent component (several units)
        touched_units = ((found | "NewEndpoints" >> beam.FlatMap(_endpoints), changes.gone_units)
                         | "TouchedUnits" >> beam.Flatten()
                         | "DistinctTouchedUnits" >> beam.Distinct())
        touched = (old_labels
                   | "TouchedLabels" >> beam.ParDo(InSetFn(_unit_of_label, True),
                                                   members=beam.pvalue.AsList(touched_units))
                   | "TouchedComponents" >> beam.Map(_component)
                   | "DistinctTouched" >> beam.Distinct())
        # component of the parent that a new pair or a gone image touches: joined again
        again = (old
                 | "InTouched" >> beam.ParDo(InSetFn(_component_of_pair, True), members=beam.pvalue.AsList(touched))
                 | "OldUnitEdges" >> beam.Map(_edge))
        kept = old_labels | "Untouched" >> beam.ParDo(InSetFn(_component_of_label, False),
                                                      members=beam.pvalue.AsList(touched))
        return (new_edges, again) | "EdgesToJoin" >> beam.Flatten(), kept
