"""FindComponents: the connected components of the near-duplicate graph, by Hash-to-Min rounds
(core/leakage/components.py): one shuffle a round, each round doubling how far a cluster reaches, so chains of
``d`` links (a video's frames) are joined in about ``2 log2 d`` rounds.

A corpus of at most ``--near_duplicates_one_worker_pairs`` pairs (counted at launch) skips the rounds: its
edges are joined by union-find, per bundle and then in one worker (UnionFindFn), in one shuffle, where sixteen rounds
and their checks cost some twenty steps, each with a runner's fixed cost (docs/benchmarks.md). The labels are the
same.

Each round's messages are folded, in the bundle that sends them, into one inbox per target (SendFn): what reaches
a node is the union of its senders' clusters, once, where the smallest node of a large component would otherwise be
sent that component once per member. The neighbours, the rounds and the state held for the last count cross the
shuffle as the ShuffleSpec says (through files on the DirectRunner: its launcher holds their paths, a worker one
bucket; docs/scale.md).

The graph is unrolled to ``rounds`` rounds (Beam has no loops). A component still changing after the last round
(a chain of more than a few thousand split units) makes the run finish every component in one worker by union-find
on the clusters (only the graph's units, no hash; the summary warns). Input: edges ``(unit a, unit b)``, a != b,
in any number of copies. Output: ``(unit, component)`` for every unit with an edge, the component being its
smallest unit; and a Tally of the units finished in one worker.
"""

import apache_beam as beam
from apache_beam.transforms.window import GlobalWindows

from beam_pipeline.core.leakage import components
from beam_pipeline.core.leakage.summary import Tally
from beam_pipeline.stages.shuffle import GroupPackedByKey, Materialize
from beam_pipeline.stages.specs import ShuffleSpec

ROUNDS = 16                   # Hash-to-Min rounds unrolled: chains of about 2,000-5,000 units finish in them
FOLD_MEMBERS = 1 << 17        # cluster members a round's bundle holds in its inboxes before it sends them on (~8 MB)
TALLY_TAG = "tally"


def _both_ways(edge):
    a, b = edge
    yield a, b
    yield b, a


def _first_cluster(element):
    node, neighbours = element
    return node, components.neighbours_cluster(node, neighbours)


def _not_yet_changed(element):
    node, cluster = element
    return node, (cluster, True)


def _changed(element) -> int:
    return int(element[1][1])


class SendFn(beam.DoFn):
    """(unit, (cluster, changed)) -> (target, inbox) of one Hash-to-Min round: each message folded, in the bundle,
    into its target's inbox (core/leakage/components.inbox), so that what crosses the shuffle to a node is the
    union of its senders' clusters in the bundle, once, not every sender's cluster (the smallest node of a large
    component is sent the clusters of its whole component in the middle rounds). The bundle's inboxes go out when
    they hold FOLD_MEMBERS members, and at its end; a node's inboxes from several bundles are joined after the
    shuffle, to the same cluster."""

    def start_bundle(self):
        self._boxes, self._held = {}, 0

    def process(self, element):
        node, (cluster, _) = element
        boxes = self._boxes
        for target, message in components.messages(node, cluster):
            box = boxes.get(target)
            if box is None:
                box = boxes[target] = components.inbox()
            components.take(box, message)
            self._held += len(message[1])
        if self._held >= FOLD_MEMBERS:
            yield from self._out()

    def finish_bundle(self):
        for element in self._out():
            yield GlobalWindows.windowed_value(element)

    def _out(self):
        boxes, self._boxes, self._held = self._boxes, {}, 0
        for target, box in boxes.items():
            yield target, components.sealed(box)


def _open(element):
    """(unit, [inbox, ...]) -> (unit, (its new cluster, whether it changed))."""
    node, boxes = element
    return node, components.opened(components.joined(boxes))


class LabelFn(beam.DoFn):
    """(unit, (cluster, changed)) -> (unit, component) when every cluster is stable; else (0, (unit, cluster)) to
    the one-worker finish (FINISH_TAG)."""
    FINISH_TAG = "finish"

    def process(self, element, changed):
        node, (cluster, _) = element
        if changed:
            yield beam.pvalue.TaggedOutput(self.FINISH_TAG, (0, (node, cluster)))
        else:
            yield node, components.label(cluster)


def _finish(element):
    """(0, [(unit, cluster), ...]) -> (unit, component) by union-find in this worker."""
    _, clusters = element
    edges = (edge for node, cluster in clusters for edge in components.cluster_edges(node, cluster))
    yield from sorted(components.union_find(edges).items())


def _finished_tally(count: int) -> Tally:
    return Tally(finished_in_one_worker=count)


class UnionFindFn(beam.CombineFn):
    """Edges -> ``{unit: component}`` of the whole graph: each bundle joins its edges into a forest (combiner
    lifting), and one worker merges the forests. Its memory is the graph's units, so it runs only on a corpus the
    launcher counted small enough (core/leakage/components.ONE_WORKER_PAIRS)."""

    def create_accumulator(self):
        return {}

    def add_input(self, forest, edge):
        components.union(forest, *edge)
        return forest

    def merge_accumulators(self, forests):
        return components.merged(forests)

    def compact(self, forest):
        return components.flattened(forest)

    def extract_output(self, forest):
        return components.flattened(forest)


def _labels(labels):
    yield from sorted(labels.items())


def nothing(_):
    """An element -> no element: an empty PCollection made in its producer's stage (a Create would be a stage)."""
    return ()


class FindComponents(beam.PTransform):
    """``labels, tally = edges | FindComponents(rounds, ShuffleSpec())``; ``rounds`` 0: union-find in one worker
    (UnionFindFn), one shuffle instead of ``rounds`` (a small corpus, counted at launch:
    launcher/runners.component_rounds). The rounds' messages cross the shuffle as the spec says: through files on
    the DirectRunner, so that its launcher holds their paths, not the graph (stages/shuffle.py)."""

    def __init__(self, rounds: int = ROUNDS, shuffle: ShuffleSpec = ShuffleSpec()):
        super().__init__()
        self._rounds = rounds
        self._shuffle = shuffle

    def expand(self, edges):
        if self._rounds == 0:
            labels = (edges
                      | "UnionFindInOneWorker" >> beam.CombineGlobally(UnionFindFn()).without_defaults()
                      # {unit: component} of the whole graph (none without an edge)
                      | "OneWorkerLabels" >> beam.FlatMap(_labels))
            return labels, edges | "NothingUnfinished" >> beam.FlatMap(nothing)
        clusters = (edges
                    | "BothWays" >> beam.FlatMap(_both_ways)
                    | "GroupNeighbours" >> GroupPackedByKey(self._shuffle)
                    | "FirstClusters" >> beam.Map(_first_cluster))
        # (unit, its cluster: itself and its neighbours, sorted)
        state = clusters | "NotYetChanged" >> beam.Map(_not_yet_changed)
        for round_ in range(self._rounds):
            state = (state
                     | f"Send{round_:02d}" >> beam.ParDo(SendFn())
                     # (unit, inbox): the messages of one Hash-to-Min round, folded per bundle and target
                     | f"Receive{round_:02d}" >> GroupPackedByKey(self._shuffle)
                     # (unit, [inbox, ...])
                     | f"Open{round_:02d}" >> beam.Map(_open))
                     # (unit, (its new cluster, whether it changed))
        changed = (state
                   | "Changed" >> beam.Map(_changed)
                   | "CountChanged" >> beam.CombineGlobally(sum))
        # int: units whose cluster changed in the last round (0: every component is finished)
        labelled = (state
                    | "HoldState" >> Materialize(self._shuffle)
                    # the same, held until the count is known (in files on the DirectRunner, not in its launcher)
                    | "Label" >> beam.ParDo(LabelFn(), changed=beam.pvalue.AsSingleton(changed)).with_outputs(
                        LabelFn.FINISH_TAG, main="labels"))
        finished = (labelled[LabelFn.FINISH_TAG]
                    | "GatherUnfinished" >> GroupPackedByKey(self._shuffle)
                    | "FinishInOneWorker" >> beam.FlatMap(_finish))
        # (unit, component) of a run whose rounds did not finish every component (a very long chain)
        tally = (labelled[LabelFn.FINISH_TAG]
                 | "CountFinished" >> beam.combiners.Count.Globally()
                 | "FinishedTally" >> beam.Map(_finished_tally))
        return (labelled.labels, finished) | "AllLabels" >> beam.Flatten(), tally
