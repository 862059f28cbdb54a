"""Connected components of the near-duplicate graph, whose nodes are split units (a group, or a pair alone).

Hash-to-Min (Rastogi et al., "Finding connected components in map-reduce in logarithmic rounds", ICDE 2013):
every node ``v`` holds a cluster ``C(v)``, at first itself and its neighbours. In a round, each node sends its
whole cluster to the cluster's smallest node ``m``, and ``{m}`` to every node of its cluster; its new cluster is
the union of what it received. Clusters double their reach each round, so a chain of ``d`` links (a video's
frames) is joined in about ``2 log2 d`` rounds, not ``d``; once every cluster stays the same, the smallest node
of each component holds the whole component and every other node holds ``{that node}``: its label. One round is
one shuffle (stages/leakage/components.py). Nodes are 63-bit ints; a cluster is a sorted tuple.

:func:`union_find` gives the same labels in one process: for the chains that the unrolled rounds did not finish,
and for tests and ``--plan``.
"""

from typing import Dict, Iterable, Iterator, List, Tuple

Cluster = Tuple[int, ...]
FULL, MIN, SELF = 0, 1, 2          # message kinds: a whole cluster, a smallest node, the node's own last cluster


def first_clusters(edges: Iterable[Tuple[int, int]]) -> Dict[int, Cluster]:
    """``{node: itself and its neighbours}`` of an edge list (one process; the pipeline groups edges instead)."""
    found: Dict[int, set] = {}
    for a, b in edges:
        if a != b:
            found.setdefault(a, {a}).add(b)
            found.setdefault(b, {b}).add(a)
    return {node: tuple(sorted(members)) for node, members in found.items()}


def neighbours_cluster(node: int, neighbours: Iterable[int]) -> Cluster:
    return tuple(sorted({node, *neighbours}))


def messages(node: int, cluster: Cluster) -> Iterator[Tuple[int, Tuple[int, Cluster]]]:
    """(target, (kind, cluster)) sent by ``node`` in a round: its cluster to its smallest node, the smallest node to
    each member, and its cluster to itself (to tell whether it changed)."""
    smallest = cluster[0]
    yield smallest, (FULL, cluster)
    for member in cluster:
        yield member, (MIN, (smallest,))
    yield node, (SELF, cluster)


def received(values: Iterable[Tuple[int, Cluster]]) -> Tuple[Cluster, bool]:
    """(the node's new cluster, whether it changed) from what it received in a round."""
    members, before = set(), None
    for kind, cluster in values:
        if kind == SELF:
            before = cluster
        else:
            members.update(cluster)
    after = tuple(sorted(members))
    return after, after != before


def label(cluster: Cluster) -> int:
    """A node's component label once the clusters are stable: the smallest node it knows."""
    return cluster[0]


def union_find(edges: Iterable[Tuple[int, int]]) -> Dict[int, int]:
    """``{node: smallest node of its component}`` for every node of ``edges``, in one process."""
    parent: Dict[int, int] = {}

    def find(x: int) -> int:
        root = x
        while parent[root] != root:
            root = parent[root]
        while parent[x] != root:
            parent[x], x = root, parent[x]
        return root

    for a, b in edges:
        parent.setdefault(a, a)
        parent.setdefault(b, b)
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return {node: find(node) for node in parent}


def cluster_edges(node: int, cluster: Cluster) -> List[Tuple[int, int]]:
    """A cluster as edges (its node to each member): what the one-process finish joins."""
    return [(node, member) for member in cluster if member != node]


def sizes(labels: Dict[int, int]) -> Dict[int, int]:
    """``{label: nodes}`` of a labelling."""
    out: Dict[int, int] = {}
    for component in labels.values():
        out[component] = out.get(component, 0) + 1
    return out
