"""FindComponents: the connected components of the near-duplicate graph, by Hash-to-Min rounds
(core/leakage/components.py): one shuffle a round, each round doubling how far a cluster reaches, so chains of
``d`` links (a video's frames) are joined in about ``2 log2 d`` rounds.

A corpus of at most ``--near_duplicates_one_worker_pairs`` pairs (counted at launch) skips the rounds: its
edges are joined by union-find, per bundle and then in one worker (UnionFindFn), in one shuffle, where sixteen rounds
and their checks cost some twenty steps, each with a runner's fixed cost (docs/benchmarks.md). The labels are the
same.

The graph is unrolled to ``rounds`` rounds (Beam has no loops). A component still changing after the last round
(a chain of more than a few thousand split units) makes the run finish every component in one worker by union-find
on the clusters (only the graph's units, no hash; the summary warns). Input: edges ``(unit a, unit b)``, a != b,
in any number of copies. Output: ``(unit, component)`` for every unit with an edge, the component being its
smallest unit; and a Tally of the units finished in one worker.
"""

import apache_beam as beam

from beam_pipeline.core.leakage import components
from beam_pipeline.core.leakage.summary import Tally

ROUNDS = 16                   # Hash-to-Min rounds unrolled: chains of about 2,000-5,000 units finish in them
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


def _send(element):
    node, (cluster, _) = element
    return components.messages(node, cluster)


def _changed(element) -> int:
    return int(element[1][1])


def _merge(element):
    node, values = element
    return node, components.received(values)


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
    """``labels, tally = edges | FindComponents(rounds)``; ``rounds`` 0: union-find in one worker (UnionFindFn), one
    shuffle instead of ``rounds`` (a small corpus, counted at launch: launcher/runners.component_rounds)."""

    def __init__(self, rounds: int = ROUNDS):
        super().__init__()
        self._rounds = rounds

    def expand(self, edges):
        if self._rounds == 0:
            labels = (edges
                      | "UnionFindInOneWorker" >> beam.CombineGlobally(UnionFindFn()).without_defaults()
                      # {unit: component} of the whole graph (none without an edge)
                      | "OneWorkerLabels" >> beam.FlatMap(_labels))
            return labels, edges | "NothingUnfinished" >> beam.FlatMap(nothing)
        clusters = (edges
                    | "BothWays" >> beam.FlatMap(_both_ways)
                    | "GroupNeighbours" >> beam.GroupByKey()
                    | "FirstClusters" >> beam.Map(_first_cluster))
        # (unit, its cluster: itself and its neighbours, sorted)
        state = clusters | "NotYetChanged" >> beam.Map(_not_yet_changed)
        for round_ in range(self._rounds):
            state = (state
                     | f"Send{round_:02d}" >> beam.FlatMap(_send)
                     # (unit, (FULL | MIN | SELF, cluster)): the messages of one Hash-to-Min round
                     | f"Receive{round_:02d}" >> beam.GroupByKey()
                     | f"Merge{round_:02d}" >> beam.Map(_merge))
                     # (unit, (its new cluster, whether it changed))
        changed = (state
                   | "Changed" >> beam.Map(_changed)
                   | "CountChanged" >> beam.CombineGlobally(sum))
        # int: units whose cluster changed in the last round (0: every component is finished)
        labelled = state | "Label" >> beam.ParDo(LabelFn(), changed=beam.pvalue.AsSingleton(changed)).with_outputs(
            LabelFn.FINISH_TAG, main="labels")
        finished = (labelled[LabelFn.FINISH_TAG]
                    | "GatherUnfinished" >> beam.GroupByKey()
                    | "FinishInOneWorker" >> beam.FlatMap(_finish))
        # (unit, component) of a run whose rounds did not finish every component (a very long chain)
        tally = (labelled[LabelFn.FINISH_TAG]
                 | "CountFinished" >> beam.combiners.Count.Globally()
                 | "FinishedTally" >> beam.Map(_finished_tally))
        return (labelled.labels, finished) | "AllLabels" >> beam.Flatten(), tally
