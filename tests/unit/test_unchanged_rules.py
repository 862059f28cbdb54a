"""core/rerun/unchanged.py: what a version records of its inputs, and when a re-run may publish nothing."""

import hashlib
import random

import pytest

from beam_pipeline.core.rerun import unchanged

VERSIONS = ("a.png|10:5:7:5", "a_mask.png|3:5:8:5")


def tally_of(tokens):
    tally = unchanged.Tally()
    for token in tokens:
        tally.add(token)
    return tally


def test_the_digest_is_the_same_in_any_order_and_in_any_bundles():
    """The property Beam's combiner needs: bundles of any size, summed in any order, give the run's digest."""
    tokens = [unchanged.pair_token(f"k{i}", i % 3, (f"img{i}|{i}:1:2:3", f"mask{i}|{i}:1:2:3")) for i in range(300)]
    whole = tally_of(tokens)
    shuffled = tokens[:]
    random.Random(7).shuffle(shuffled)
    bundles = [tally_of(shuffled[start:start + 37]) for start in range(0, 300, 37)]
    totals = {}
    for bundle in bundles:
        for key, total in bundle.items():
            totals[key] = totals.get(key, 0) + total
    entry = unchanged.inputs_entry({"validated": 100, "from_cache": 150, "rehashed": 50, **totals})
    assert entry == {"pairs": 300, "digest": whole.digest()}
    # the recorded digest is the SHA-256 of the sums, written out
    sums = [sum(token[i] for token in tokens) for i in range(unchanged.PARTS)]
    assert whole.digest() == hashlib.sha256(":".join(map(str, sums)).encode()).hexdigest()[:32]


def test_each_sum_stays_within_a_signed_64_bit_integer_up_to_four_billion_pairs():
    assert all(0 <= part < 2 ** unchanged.PART_BITS for part in unchanged.pair_token("k", 1, VERSIONS))
    assert 2 ** 32 * (2 ** unchanged.PART_BITS - 1) < 2 ** 63


@pytest.mark.parametrize("key, label, versions", [
    ("k2", 1, VERSIONS),                                   # another pair
    ("k", 2, VERSIONS),                                    # another label
    ("k", 1, ("a.png|10:6:7:6", VERSIONS[1])),             # the image touched
    ("k", 1, (VERSIONS[0], None)),                         # the mask gone
    ("k", 1, (None, VERSIONS[1])),                         # the image gone
])
def test_a_pair_s_token_moves_with_its_key_label_and_files(key, label, versions):
    assert unchanged.pair_token(key, label, versions) != unchanged.pair_token("k", 1, VERSIONS)


def test_a_pair_without_a_run_has_no_sums_and_the_empty_digest_is_stable():
    assert unchanged.Tally().items() == []
    assert unchanged.inputs_entry({}) == {"pairs": 0, "digest": unchanged.Tally().digest()}


def test_operational_options_never_count_as_a_change():
    before = {"input": "a.csv", "output": "out", "target_shard_bytes": 100, "overwrite": False, "keep_versions": 1,
              "shuffle": "auto", "cache_dir": None, "spill": "auto", "runner": "DirectRunner"}
    now = dict(before, output="moved/out", overwrite=True, keep_versions=3, shuffle="files", cache_dir="/c", spill="never",
               runner="FlinkRunner", skip_unchanged="always")
    assert unchanged.moved_options(before, now) == []
    assert unchanged.moved_options(before, dict(now, target_shard_bytes=200, compact="all")) == [
        "compact", "target_shard_bytes"]


def recorded(pairs=10, **extra):
    return {"lineage": {"inputs": {"pairs": pairs, "digest": "d", "listing": None, "code": "c", **extra}},
            "options": {"input": "x"}, "versions": {"python": "3.11"},
            "counts": {"discovered": 12, "filtered_out": {"total": 2, "by_reason": {"sampled_out": 2}}}}


@pytest.mark.parametrize("arguments, phrase", [
    (dict(mode="never"), "--skip_unchanged never"),
    (dict(parent=None), "no version is published"),
    (dict(use_cache=False), "--no_cache"),
    (dict(revalidate=True), "--revalidate"),
    (dict(audit=0.1), "--cache_audit"),
    (dict(max_examples=5), "--max_examples"),
    (dict(streamable=False), "joined"),
    (dict(parent={"lineage": {"inputs": {"pairs": 1, "digest": "d"}}}), "does not record"),
    (dict(parent={"lineage": {}}), "does not record"),
    (dict(parent=recorded(pairs=100_001), remote=True), "100,001 pairs"),
])
def test_why_a_re_run_is_not_looked_at(arguments, phrase):
    given = dict(mode="auto", parent=recorded(), use_cache=True, revalidate=False, audit=0.0, max_examples=None,
                 streamable=True, remote=False)
    given.update(arguments)
    assert phrase in unchanged.why_not_checked(**given)


def test_a_large_version_is_looked_at_locally_and_with_always():
    common = dict(use_cache=True, revalidate=False, audit=0.0, max_examples=None, streamable=True)
    assert unchanged.why_not_checked("auto", recorded(pairs=100_001), remote=False, **common) is None
    assert unchanged.why_not_checked("always", recorded(pairs=10 ** 8), remote=True, **common) is None


def test_what_moved_before_the_input_is_looked_at():
    parent = recorded(listing="a.csv|1:2:3:4")
    same = dict(options={"input": "x"}, versions={"python": "3.11"}, code="c", listing="a.csv|1:2:3:4")
    assert unchanged.what_moved(parent, **same) is None
    assert unchanged.what_moved(parent, **dict(same, options={"input": "y"})) == "options changed: --input"
    assert unchanged.what_moved(parent, **dict(same, versions={"python": "3.12"})) == "package versions changed"
    assert unchanged.what_moved(parent, **dict(same, code="d")) == "the pipeline's code changed"
    assert unchanged.what_moved(parent, **dict(same, listing="a.csv|1:2:3:5")) == "the listing file changed"


def test_what_the_look_at_the_input_finds():
    tally = tally_of([unchanged.pair_token(f"k{i}", 0, VERSIONS) for i in range(10)])
    parent = recorded(digest=tally.digest())
    assert unchanged.inputs_moved(parent, tally, 12, {"sampled_out": 2}) is None
    assert unchanged.inputs_moved(parent, tally, 13, {"sampled_out": 2}) == "13 inputs discovered, 12 before"
    assert unchanged.inputs_moved(parent, tally, 12, {"sampled_out": 1, "excluded": 1}) == \
        "other inputs are filtered out"
    assert unchanged.inputs_moved(recorded(pairs=9, digest=tally.digest()), tally, 12, {"sampled_out": 2}) == \
        "10 pairs to validate, 9 before"
    assert unchanged.inputs_moved(recorded(), tally, 12, {"sampled_out": 2}) == "files were added, changed or removed"
