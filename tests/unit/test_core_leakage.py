"""Splits you can trust, the pure parts (core/leakage/): the hash, bands against brute force, Hash-to-Min against a
breadth-first search, split groups, the policy a re-run keeps, the split a component goes to, drift and --plan's
estimate. Every expected value is computed here by a method of its own (numpy over all pairs, a BFS, arithmetic on
hand-made counts), never by the code under test."""

import collections
import io
import itertools
import math

import numpy as np
import pytest
from PIL import Image

from beam_pipeline.core.leakage import bands, components, drift, groups, phash, summary
from beam_pipeline.core.leakage.splits import Policy
from beam_pipeline.core.records import PairRef
from beam_pipeline.core.selection import parse_split


def _photo(seed: int, size=(96, 72)) -> np.ndarray:
    """A smooth random picture (low-frequency noise), seeded."""
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (6, 8, 3), dtype=np.uint8)
    return np.asarray(Image.fromarray(small).resize(size, Image.Resampling.BICUBIC))


def _hamming(a: bytes, b: bytes) -> int:
    return sum(bin(x ^ y).count("1") for x, y in zip(a, b))


# --------------------------------------------------------------------------
# The hash
# --------------------------------------------------------------------------
def test_the_hash_is_256_bits_and_the_same_for_the_same_pixels():
    image = Image.fromarray(_photo(1))
    first = phash.perceptual_hash(image)
    assert len(first) == 32 and first == phash.perceptual_hash(image.copy())


def test_a_grey_image_hashes_as_its_rgb_conversion():
    grey = Image.fromarray(_photo(2)).convert("L")
    rgb = Image.fromarray(np.repeat(np.asarray(grey)[:, :, None], 3, axis=2))
    assert phash.perceptual_hash(grey) == phash.perceptual_hash(rgb)


def test_a_jpeg_re_encode_stays_near_and_another_picture_does_not():
    image = _photo(3, (320, 240))
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="JPEG", quality=70)
    copy = np.asarray(Image.open(buffer).convert("RGB"))
    h = phash.perceptual_hash(Image.fromarray(image))
    assert _hamming(h, phash.perceptual_hash(Image.fromarray(copy))) <= 4
    assert _hamming(h, phash.perceptual_hash(Image.fromarray(_photo(4, (320, 240))))) > 3 * phash.DEFAULT_RADIUS


def test_distance_counts_the_bits_that_differ():
    a = bytes(32)
    b = bytes([0b10100000]) + bytes(30) + bytes([1])
    assert phash.distance(a, b) == 3 == _hamming(a, b)
    words = phash.as_words([a, b])
    assert phash.distances(words[0], words[1]) == 3


# --------------------------------------------------------------------------
# Bands: every pair within the radius, against all pairs
# --------------------------------------------------------------------------
def _random_hashes(n: int, planted: int, flips, seed: int = 0):
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 2, (n, 256), dtype=np.uint8)
    for i in range(0, 2 * planted, 2):
        bits[i + 1] = bits[i]
        bits[i + 1, rng.choice(256, flips[(i // 2) % len(flips)], replace=False)] ^= 1
    return [np.packbits(row).tobytes() for row in bits]


def _brute_force(hashes, radius):
    bits = np.unpackbits(np.frombuffer(b"".join(hashes), np.uint8).reshape(len(hashes), 32), axis=1)
    found = set()
    for i in range(len(hashes)):
        d = (bits[i + 1:] != bits[i]).sum(axis=1)
        found.update((i, i + 1 + int(j)) for j in np.flatnonzero(d <= radius))
    return found


def _banded_pairs(hashes, radius, ids=None):
    ids = np.arange(len(hashes), dtype=np.uint64) if ids is None else ids
    rows = bands.rows_of(ids, ids, phash.as_words(hashes))
    found = set()
    for banded in bands.by_bucket(rows, bands.Layout(radius)).values():
        for a, b, _, _, d in bands.pair_tuples(bands.near_pairs(banded, radius).pairs):
            found.add((a, b))
            assert d <= radius
    return found


@pytest.mark.parametrize("radius", [0, 3, 14, 20])
def test_bands_find_every_pair_within_the_radius_and_no_other(radius):
    hashes = _random_hashes(600, 120, flips=[0, 1, radius, radius + 1, max(radius - 1, 0), 2 * radius + 3])
    assert _banded_pairs(hashes, radius) == _brute_force(hashes, radius)


def test_runs_compared_in_small_batches_find_the_same_pairs(monkeypatch):
    """A bucket's runs are compared in batches of about _BATCH_PAIRS candidates, a run cut between its rows when
    it has more: any batch size finds every pair within the radius (also for a re-run's new rows only) and counts
    the same distances."""
    hashes = _random_hashes(500, 150, flips=[0, 1, 3, 5])
    ids = np.arange(500, dtype=np.uint64)
    rows = bands.rows_of(ids, ids, phash.as_words(hashes))
    buckets = list(bands.by_bucket(rows, bands.Layout(5)).values())
    whole = [bands.near_pairs(banded, 5, new_from=len(banded) // 3) for banded in buckets]
    for size in (2, 7, 1000):
        monkeypatch.setattr(bands, "_BATCH_PAIRS", size)
        for banded, expected in zip(buckets, whole):
            found = bands.near_pairs(banded, 5, new_from=len(banded) // 3)
            assert np.array_equal(found.pairs, expected.pairs) and found.compared == expected.compared
    assert _banded_pairs(hashes, 5) == _brute_force(hashes, 5)


def test_a_pair_sharing_several_bands_is_found_once():
    hashes = _random_hashes(10, 1, flips=[0])
    ids = np.arange(10, dtype=np.uint64)
    rows = bands.rows_of(ids, ids, phash.as_words(hashes))
    banded = np.concatenate(list(bands.by_bucket(rows, bands.Layout(14)).values()))
    found = bands.near_pairs(banded, 14).pairs
    assert found.tolist() == [[0, 1, 0, 1, 0]]


def test_a_pair_sharing_bands_of_several_buckets_leaves_only_the_bucket_of_its_first_shared_band():
    """Two hashes 0..3 bits apart agree on most of their 15 bands, so they meet in several buckets' runs: only the
    run of the first band they agree on keeps them, so every pair leaves the buckets once, with its units."""
    hashes = _random_hashes(300, 100, flips=[0, 1, 3])
    ids = np.arange(300, dtype=np.uint64) * np.uint64(7919)
    rows = bands.rows_of(ids, ids + np.uint64(1), phash.as_words(hashes))
    kept, met = [], 0
    for banded in bands.by_bucket(rows, bands.Layout(14)).values():
        kept.extend(bands.pair_tuples(bands.near_pairs(banded, 14).pairs))
        for _, run in itertools.groupby(sorted(banded[:, :2].tolist())):
            met += math.comb(len(list(run)), 2)                     # pairs of rows sharing a band's value
    assert len(kept) == len(set(kept)) == 100 < met / 5              # each planted pair once, met many times
    assert {(a // 7919, b // 7919) for a, b, _, _, _ in kept} == _brute_force(hashes, 14)
    assert all(ua == a + 1 and ub == b + 1 for a, b, ua, ub, _ in kept)


def test_a_huge_run_is_capped_and_still_chains_identical_hashes(monkeypatch):
    monkeypatch.setattr(bands, "MAX_RUN", 50)
    blank = [bytes(32)] * 200
    ids = np.arange(200, dtype=np.uint64)
    rows = bands.rows_of(ids, ids, phash.as_words(blank))
    band0 = [banded[banded[:, 0] == 0] for banded in bands.by_bucket(rows, bands.Layout(2)).values()]
    found = bands.near_pairs(np.concatenate([b for b in band0 if len(b)]), 2)
    assert found.capped == ((0, 200),)
    assert found.compared < 200 * 199 // 2
    edges = [(int(a), int(b)) for a, b in found.pairs[:, :2]]
    assert set(components.union_find(edges).values()) == {0}          # one chain through all 200


def test_a_rerun_compares_only_the_new_rows():
    hashes = _random_hashes(40, 20, flips=[1])
    ids = np.arange(40, dtype=np.uint64)
    rows = bands.rows_of(ids, ids, phash.as_words(hashes))
    banded = np.concatenate(list(bands.by_bucket(rows, bands.Layout(4)).values()))
    old = banded[banded[:, 2] < 30]
    new = banded[banded[:, 2] >= 30]
    found = bands.near_pairs(np.concatenate([old, new]), 4, new_from=len(old))
    expected = {p for p in _brute_force(hashes, 4) if max(p) >= 30}
    assert {(int(a), int(b)) for a, b in found.pairs[:, :2]} == expected


# --------------------------------------------------------------------------
# Components: Hash-to-Min rounds against a breadth-first search
# --------------------------------------------------------------------------
def _bfs_labels(edges):
    graph = collections.defaultdict(set)
    for a, b in edges:
        graph[a].add(b)
        graph[b].add(a)
    labels = {}
    for start in graph:
        if start in labels:
            continue
        seen, queue = {start}, [start]
        while queue:
            node = queue.pop()
            for other in graph[node] - seen:
                seen.add(other)
                queue.append(other)
        for node in seen:
            labels[node] = min(seen)
    return labels


def _hash_to_min(edges, rounds, receive=components.received):
    """(labels, rounds taken), or (None, rounds) when unfinished; ``receive`` turns a node's messages of a round
    into (its new cluster, whether it changed)."""
    clusters = components.first_clusters(edges)
    for done in range(rounds):
        inbox = collections.defaultdict(list)
        for node, cluster in clusters.items():
            for target, message in components.messages(node, cluster):
                inbox[target].append(message)
        merged = {node: receive(values) for node, values in inbox.items()}
        clusters = {node: cluster for node, (cluster, _) in merged.items()}
        if not any(changed for _, changed in merged.values()):
            return {node: components.label(cluster) for node, cluster in clusters.items()}, done + 1
    return None, rounds


def test_each_hash_is_classified_in_the_bucket_where_the_index_holds_its_first_band():
    """A re-run asks the bucket of a hash's first band whether the parent held it: that bucket's index file must
    hold the hash's band-0 row, whatever bundle cut it."""
    hashes = _random_hashes(300, 30, flips=[0, 2])
    ids = np.arange(300, dtype=np.uint64) * 7 + 3
    rows = bands.rows_of(ids, ids + 1, phash.as_words(hashes))
    layout = bands.Layout(14)
    indexed = {bucket: banded[banded[:, 0] == 0][:, 2:] for bucket, banded in bands.by_bucket(rows, layout).items()}
    classified = bands.first_band_buckets(rows, layout)
    assert sum(len(r) for r in classified.values()) == 300
    for bucket, held in classified.items():
        assert sorted(map(tuple, held.tolist())) == sorted(map(tuple, indexed[bucket].tolist()))
    halves = [bands.first_band_buckets(part, layout) for part in (rows[:123], rows[123:])]   # two bundles
    for bucket in classified:
        parts = [half[bucket] for half in halves if bucket in half]
        assert sorted(map(tuple, np.concatenate(parts).tolist())) == sorted(map(tuple, classified[bucket].tolist()))


def test_row_keys_are_the_rows_bytes():
    rows = np.array([[1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 7]], dtype=np.uint64)
    keys = bands.row_keys(rows)
    assert keys == [bands.to_bytes(rows[:1]), bands.to_bytes(rows[1:])] and keys[0] != keys[1]
    assert keys[0] == b"".join(v.to_bytes(8, "big") for v in (1, 2, 3, 4, 5, 6))
    assert bands.row_keys(np.zeros((0, 6), np.uint64)) == []


@pytest.mark.parametrize("length", [2, 10, 100, 1000])
def test_a_chain_is_joined_in_logarithmic_rounds(length):
    order = np.random.default_rng(length).permutation(length).tolist()
    edges = [(order[i], order[i + 1]) for i in range(length - 1)]
    labels, rounds = _hash_to_min(edges, 60)
    assert labels == _bfs_labels(edges)
    assert rounds <= 2 * math.ceil(math.log2(length)) + 3


def test_hash_to_min_and_union_find_agree_on_a_random_graph():
    rng = np.random.default_rng(5)
    edges = [tuple(int(x) for x in rng.integers(0, 400, 2)) for _ in range(300)]
    edges = [(a, b) for a, b in edges if a != b]
    expected = _bfs_labels(edges)
    assert _hash_to_min(edges, 40)[0] == expected
    assert components.union_find(edges) == expected


@pytest.mark.parametrize("parts", [1, 3, 17])
def test_forests_of_parts_of_the_edges_merge_into_the_components_of_all(parts):
    """What the one-worker join does: each bundle joins its part of the edges into a forest (flattened or not,
    as Beam's compact may), and the forests, merged in any order, label every node by its component's smallest."""
    rng = np.random.default_rng(parts)
    edges = [tuple(int(x) for x in rng.integers(0, 500, 2)) for _ in range(400)]
    edges = [(a, b) for a, b in edges if a != b] + [(1000 + i, 1001 + i) for i in range(60)]   # and a long chain
    rng.shuffle(edges)
    forests = []
    for index in range(parts):
        forest = {}
        for a, b in edges[index::parts]:
            components.union(forest, a, b)
        forests.append(components.flattened(forest) if index % 2 else forest)
    expected = _bfs_labels(edges)
    assert components.flattened(components.merged(forests)) == expected
    assert components.flattened(components.merged(reversed(forests))) == expected
    assert components.merged([]) == {} and set(expected.values()) >= {1000}


def test_a_nodes_inbox_is_the_union_of_what_it_received_and_tells_whether_it_changed():
    full, low, own = components.FULL, components.MIN, components.SELF
    messages = [(full, (1, 2, 3)), (low, (1,)), (full, (1, 3, 4)), (own, (1, 2)), (full, (1, 2))]
    assert components.received(messages) == ((1, 2, 3, 4), True)
    assert components.received([(low, (1,)), (own, (1,)), (low, (1,))]) == ((1,), False)
    box = components.inbox()
    for message in messages:
        components.take(box, message)
    assert box == [{1, 2, 3, 4}, (1, 2)]                     # each member once, however many senders named it


@pytest.mark.parametrize("parts", [1, 2, 5])
def test_a_rounds_messages_folded_in_parts_give_what_they_give_whole(parts):
    """What a round's bundles do (stages/leakage/components.SendFn): each folds its part of a node's messages into
    an inbox, and the inboxes, joined in any order, sealed or not, open as the node's messages taken whole; the
    rounds then label every node by its component's smallest."""
    rng = np.random.default_rng(parts)
    edges = [tuple(int(x) for x in rng.integers(0, 300, 2)) for _ in range(500)]
    edges = [(a, b) for a, b in edges if a != b]

    def folded(values):
        boxes = [components.inbox() for _ in range(parts)]
        for position, index in enumerate(rng.permutation(len(values))):
            components.take(boxes[position % parts], values[index])
        whole = components.received(values)
        assert components.opened(components.joined(boxes)) == whole
        assert components.opened(components.joined(reversed(boxes))) == whole
        assert components.opened(components.joined(map(components.sealed, boxes))) == whole
        return components.opened(components.joined(boxes))

    labels, _ = _hash_to_min(edges, 40, receive=folded)
    assert labels == _bfs_labels(edges)


# --------------------------------------------------------------------------
# Split groups, the policy, the split of a component
# --------------------------------------------------------------------------
def _ref(source_id, **meta):
    return PairRef(key=f"{source_id}|m", source_id=source_id, image="/x/" + source_id, metadata=tuple(meta.items()))


@pytest.mark.parametrize("text,ref,group", [
    ("column:drive", _ref("a/b.png", drive="0001TP"), "0001TP"),
    ("column:drive", _ref("a/b.png", drive=" "), None),
    ("folder", _ref("seq01/frame_003.jpg"), "seq01"),
    ("folder", _ref("frame_003.jpg"), "."),
    ("folder:2", _ref("city/seq01/frame_003.jpg"), "city"),
    ("regex:([^/]+)_[^_/]+\\.png$", _ref("train/0001TP_006690.png"), "0001TP"),
    ("regex:([^/]+)_[^_/]+\\.png$", _ref("train/frame.jpg"), None),
])
def test_the_group_of_a_pair(text, ref, group):
    assert groups.group_of(groups.parse_split_group(text), ref) == group


@pytest.mark.parametrize("text", ["column:", "folder:0", "folder:x", "regex:(", "regex:abc", "camera"])
def test_a_wrong_split_group_is_one_line(text):
    with pytest.raises(ValueError) as error:
        groups.parse_split_group(text)
    assert "\n" not in str(error.value) and "--split_group" in str(error.value)


def test_a_rerun_keeps_the_parents_policy_and_an_old_output_its_splits():
    assert groups.resolved_policy(None, None) == (groups.GROUP, None)
    assert groups.resolved_policy("off", {"leakage": {"policy": "group"}}) == ("off", None)
    assert groups.resolved_policy(None, {"leakage": {"policy": "report"}}) == ("report", None)
    policy, note = groups.resolved_policy(None, {"run_id": "x", "options": {}})
    assert policy == groups.REPORT and "splits are kept" in note and "\n" not in note


def test_only_group_over_fraction_splits_moves_a_component():
    fractions = parse_split("train=0.5,test=0.5")
    assert Policy("group", fractions).moves_splits
    assert not Policy("report", fractions).moves_splits
    assert not Policy("group", parse_split("column")).moves_splits
    policy = Policy("group", fractions, (("test", "holdout"),))
    chosen = {policy.component_split(c) for c in range(200)}
    assert chosen == {"train", "holdout"}                    # renamed, and both splits drawn
    assert policy.final_split("train", None) == "train"      # a unit alone keeps its split


# --------------------------------------------------------------------------
# Drift and --plan's estimate
# --------------------------------------------------------------------------
def test_jensen_shannon_of_known_histograms():
    assert drift.jensen_shannon({"a": 5}, {"a": 9}) == 0.0
    assert drift.jensen_shannon({"a": 1}, {"b": 1}) == pytest.approx(1.0)
    # p = (1/2, 1/2), q = (1, 0): m = (3/4, 1/4); JS = (1/2)(1/2 log2(2/3) + 1/2 log2 2) + (1/2)(log2(4/3))
    expected = 0.5 * (0.5 * math.log2(0.5 / 0.75) + 0.5 * math.log2(0.5 / 0.25)) + 0.5 * math.log2(1 / 0.75)
    assert drift.jensen_shannon({"a": 1, "b": 1}, {"a": 2}) == pytest.approx(expected)


def test_drift_flags_the_class_whose_share_moved_most():
    parent = {"images": 100, "class_images": [100, 50, 10], "class_pixels": [800, 150, 50], "sizes": {"36": 100},
              "brightness": [0] * 8 + [100] + [0] * 7}
    now = {"images": 100, "class_images": [100, 50, 30], "class_pixels": [800, 150, 50], "sizes": {"36": 100},
           "brightness": [0] * 8 + [100] + [0] * 7}
    table = drift.compare(parent, now, 0.1, ["road", "car", "bike"])
    rows = {row["feature"]: row for row in table["rows"]}
    assert rows["class share of images"]["value"] == pytest.approx(0.2) and rows["class share of images"]["moved"]
    assert "class 2 (bike)" in rows["class share of images"]["detail"]
    assert not rows["class share of pixels"]["moved"] and rows["image size"]["value"] == 0.0
    [warning] = drift.warnings(table, "20261201T000000Z-00000000")
    assert warning["message"].startswith("class share of images moved since version 20261201T000000Z-00000000")


def test_the_plan_estimate_counts_the_pairs_of_its_sample():
    hashes = _random_hashes(50, 5, flips=[2])
    estimate = summary.plan_estimate(hashes, selected=50, radius=6)
    assert estimate["pairs_in_sample"] == len(_brute_force(hashes, 6)) == 5
    rate = 5 / (50 * 49 / 2)
    assert estimate["share_estimate"] == pytest.approx(1 - (1 - rate) ** 49)
