"""Connected components of the near-duplicate graph, whose nodes are split units (a group, or a pair alone).

Hash-to-Min (Rastogi et al., "Finding connected components in map-reduce in logarithmic rounds", ICDE 2013):
every node ``v`` holds a cluster ``C(v)``, at first itself and its neighbours. In a round, each node sends its
whole cluster to the cluster's smallest node ``m``, and ``{m}`` to every node of its cluster; its new cluster is
the union of what it received. Clusters double their reach each round, so a chain of ``d`` links (a video's
frames) is joined in about ``2 log2 d`` rounds, not ``d``; once every cluster stays the same, the smallest node
of each component holds the whole component and every other node holds ``{that node}``: its label. One round is
one shuffle (stages/leakage/components.py). Nodes are 63-bit ints; a cluster is a sorted tuple.

:func:`union_find` gives the same labels in one process: for a corpus small enough that one worker holds its
graph's nodes (``ONE_WORKER_PAIRS``: one step instead of the rounds' sixteen shuffles), for the chains that the
unrolled rounds did not finish, and for tests and ``--plan``.
"""

from typing import Dict, Iterable, Iterator, List, Optional, Tuple

ONE_WORKER_PAIRS = 50_000     # default --near_duplicates_one_worker_pairs: up to this many pairs, union-find in one
                              # worker (its forest holds at most one node a pair); beyond, Hash-to-Min rounds
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


def inbox() -> list:
    """What a node has received so far in a round, folded as it arrives: ``[members, its last cluster]``. It holds
    the union of the clusters, not each one, so a node sent the clusters of a whole component (the smallest node
    of a large one, in the middle rounds) holds the component once, not once a sender."""
    return [set(), None]


def take(box: list, message: Tuple[int, Cluster]) -> list:
    """``box`` with one more message folded in."""
    kind, cluster = message
    if kind == SELF:
        box[1] = cluster
    else:
        box[0].update(cluster)
    return box


def joined(boxes: Iterable) -> list:
    """One inbox of several, each holding part of a node's messages (folded apart by a round's bundles; an inbox
    or its :func:`sealed` form)."""
    out = inbox()
    for members, before in boxes:
        out[0].update(members)
        if before is not None:
            out[1] = before
    return out


def sealed(box: list) -> Tuple[Cluster, Optional[Cluster]]:
    """An inbox as it crosses a shuffle: its members as a tuple, its last cluster."""
    return tuple(box[0]), box[1]


def opened(box: list) -> Tuple[Cluster, bool]:
    """(the node's new cluster, whether it changed) from its whole inbox."""
    members, before = box
    after = tuple(sorted(members))
    return after, after != before


def received(values: Iterable[Tuple[int, Cluster]]) -> Tuple[Cluster, bool]:
    """(the node's new cluster, whether it changed) from what it received in a round."""
    box = inbox()
    for message in values:
        take(box, message)
    return opened(box)


def label(cluster: Cluster) -> int:
    """A node's component label once the clusters are stable: the smallest node it knows."""
    return cluster[0]


def find(parent: Dict[int, int], x: int) -> int:
    """The root of ``x`` in a union-find forest (``parent``: node -> parent, a root its own), paths halved."""
    root = x
    while parent[root] != root:
        root = parent[root]
    while parent[x] != root:
        parent[x], x = root, parent[x]
    return root


def union(parent: Dict[int, int], a: int, b: int) -> None:
    """Join the trees of ``a`` and ``b`` (added when new): the smaller root becomes the root, so that a tree's root
    is always its smallest node."""
    parent.setdefault(a, a)
    parent.setdefault(b, b)
    ra, rb = find(parent, a), find(parent, b)
    if ra != rb:
        parent[max(ra, rb)] = min(ra, rb)


def flattened(parent: Dict[int, int]) -> Dict[int, int]:
    """``{node: smallest node of its component}``: a forest as labels (also a forest, of depth one)."""
    return {node: find(parent, node) for node in parent}


def merged(forests: Iterable[Dict[int, int]]) -> Dict[int, int]:
    """One forest of several (each node's link to its parent is an edge): the union-find of a graph whose edges were
    cut into parts, each part joined alone first (the one-worker join's partial combines)."""
    forests = iter(forests)
    parent = dict(next(forests, {}))
    for forest in forests:
        for node, above in forest.items():
            union(parent, node, above)
    return parent


def union_find(edges: Iterable[Tuple[int, int]]) -> Dict[int, int]:
    """``{node: smallest node of its component}`` for every node of ``edges``, in one process."""
    parent: Dict[int, int] = {}
    for a, b in edges:
        union(parent, a, b)
    return flattened(parent)


def cluster_edges(node: int, cluster: Cluster) -> List[Tuple[int, int]]:
    """A cluster as edges (its node to each member): what the one-process finish joins."""
    return [(node, member) for member in cluster if member != node]


def sizes(labels: Dict[int, int]) -> Dict[int, int]:
    """``{label: nodes}`` of a labelling."""
    out: Dict[int, int] = {}
    for component in labels.values():
        out[component] = out.get(component, 0) + 1
    return out
