"""The pure parts of publishing: run ids and working files, the files table, the reject-rate gate,
write failures as one line, and when a lock's holder counts as gone. Hand-made inputs, no pipeline."""

import datetime
import errno
import hashlib
import os
import subprocess
import sys

import pytest

from beam_pipeline.core import digests, layout, locking
from beam_pipeline.core.failures import describe_failure, write_failed
from beam_pipeline.core.gates import COUNTS_GATE, count_refusal, reject_refusal


def test_run_ids_sort_by_start_time_and_are_recognised():
    early = layout.new_run_id(datetime.datetime(2026, 11, 30, 23, 28, 34, tzinfo=datetime.timezone.utc), "ad1c1f9d")
    later = layout.new_run_id(datetime.datetime(2026, 12, 1, 0, 0, 1, tzinfo=datetime.timezone.utc), "00000000")
    assert early == "20261130T232834Z-ad1c1f9d"
    assert sorted([later, early]) == [early, later]
    assert layout.is_run_id(early) and not layout.is_run_id("my-notes") and not layout.is_run_id(early + "-tfdv")
    assert layout.version_dir("gs://b/out", early) == "gs://b/out/runs/" + early
    assert layout.data_dir_entry(early) == "runs/" + early


@pytest.mark.parametrize("relative,working", [
    (".tmp/tftransform_tmp/x/saved_model.pb", True), ("_pending_manifest.json", True), ("_refusal.json", True),
    ("rejects/beam-temp-rejects-1b2c/0a.jsonl", True), ("beam-temp-x/1", True),
    ("train-00000-of-00002.tfrecord", False), ("transform/transform_fn/saved_model.pb", False),
    ("rejects/rejects-00000-of-00001.jsonl", False), ("stats/train.tfrecord", False), ("report.html", False)])
def test_working_files_are_told_from_published_ones(relative, working):
    assert layout.is_working_file(relative) == working


def test_file_entries_and_checks():
    a, b = b"first file", b"second"
    table = {"a": digests.entry(a), "dir/b": digests.stream_entry([b[:3], b[3:]])}
    assert table["a"] == {"bytes": 10, "sha256": hashlib.sha256(a).hexdigest()}
    assert table["dir/b"] == {"bytes": 6, "sha256": hashlib.sha256(b).hexdigest()}
    assert digests.check_sizes(table, {"a": 10, "dir/b": 6}) == []
    problems = digests.check_sizes(table, {"a": 9, "extra.txt": 1})
    assert [(p.kind, p.path) for p in problems] == [("size", "a"), ("missing", "dir/b"), ("extra", "extra.txt")]
    assert [p.kind for p in digests.check_sizes(table, {"a": 10, "dir/b": 6, "x": 1}, extras=False)] == []
    contents = {"a": a, "dir/b": b"SECOND"}
    flipped = digests.check_digests(table, lambda path: hashlib.sha256(contents[path]).hexdigest())
    assert [(p.kind, p.path) for p in flipped] == [("sha256", "dir/b")]
    assert digests.check_digests(table, lambda path: "never read", skip=["a", "dir/b"]) == []
    assert digests.total_bytes(table) == 16


def test_shard_entries_come_from_the_splits():
    splits = {"train": {"shards": [{"path": "train-0.tfrecord", "bytes": 5, "sha256": "ab", "records": 1}]},
              "val": {"shards": [{"path": "val-0.tfrecord", "bytes": 7, "sha256": "cd", "records": 2}]}}
    assert digests.shard_entries(splits) == {"train-0.tfrecord": {"bytes": 5, "sha256": "ab"},
                                             "val-0.tfrecord": {"bytes": 7, "sha256": "cd"}}


def test_reject_gate_refuses_above_the_fraction_and_names_the_top_reasons():
    counts = [(("rejected", "orphan_image"), 300), (("rejected", "mask_value_out_of_range"), 12),
              (("rejected", "truncated"), 2), (("rejected", "undecodable"), 1), (("filtered", "filter_expression"), 100)]
    refusal = reject_refusal(counts, discovered=467, max_fraction=0.1)
    assert refusal.gate == "max_reject_fraction"
    assert refusal.message.startswith("315 of 367 selected inputs (85.8%) were rejected")   # filtered ones not counted
    assert ("top reasons: orphan_image 300 (fix: check --mask_template (or the layout: --layout)), "
            "mask_value_out_of_range 12 (fix: check --num_classes and --ignore_label, or read the masks through a "
            "--label_map (a row V,ignore or V,<class>)), truncated 2 and 1 more reason(s)") in refusal.message
    assert "--max_reject_fraction 0.1" in refusal.message


def test_reject_gate_names_the_values_rejected_most_and_the_row_that_fixes_them():
    """Issue 42: the gate read 'mask_value_unmapped 26' and never said which value (255) nor which option helps."""
    from beam_pipeline.core.gates import offending_values, summed, top_values
    from beam_pipeline.core.records import Outcome
    details = ["mask has values 255 (1,000 px), 7 (20 px) that --label_map m.csv does not list"] * 25 + [
        "mask has values 255 (24 px) that --label_map m.csv does not list"]
    totals = {}
    for detail in details:
        for key, value in offending_values(Outcome("rejected", "mask_value_unmapped", detail, key="k", image=None)):
            totals[key] = summed([totals.get(key, (0, 0)), value])
    assert totals == {("mask_value_unmapped", "255"): (25_024, 26), ("mask_value_unmapped", "7"): (500, 25)}
    refusal = reject_refusal([(("rejected", "mask_value_unmapped"), 26)], discovered=30, max_fraction=0.1,
                             values=top_values(totals.items()))
    assert ("mask_value_unmapped 26 (value 255: 25,024 px in 26 mask(s); value 7: 500 px in 25 mask(s); fix: add a "
            "row for it to the --label_map (255,ignore, or its class), or --unmapped ignore)") in refusal.message
    plain = Outcome("rejected", "mask_value_out_of_range", "mask has values [9, 255] outside 0..7", key="k", image=None)
    assert list(offending_values(plain)) == [(("mask_value_out_of_range", "9"), (0, 1)),
                                             (("mask_value_out_of_range", "255"), (0, 1))]


@pytest.mark.parametrize("rejected,selected,fraction,refused", [
    (3, 10, 0.3, False), (4, 10, 0.3, True), (0, 0, 0.0, False), (10, 10, 1.0, False), (1, 10, 0.0, True)])
def test_reject_gate_threshold(rejected, selected, fraction, refused):
    counts = [(("rejected", "truncated"), rejected)] if rejected else []
    assert (reject_refusal(counts, selected, fraction) is not None) == refused


def test_counts_that_add_up_pass_and_counts_that_do_not_name_what_is_missing():
    counts = [(("filtered", "filter_expression"), 2_803_040), (("rejected", "missing_file"), 10)]
    assert count_refusal(counts, discovered=2_803_751, valid=701) is None
    refusal = count_refusal(counts, discovered=3_000_000, valid=701)
    assert refusal.gate == COUNTS_GATE
    assert refusal.message.startswith("the counts do not reconcile before writing (at CheckCounts): 3,000,000 "
                                      "inputs discovered, but 2,803,040 filtered out, 10 rejected and 701 valid "
                                      "make 2,803,751; +196,249 between discovery and validation.")
    assert "Nothing was written or published" in refusal.message


def test_our_write_errors_name_the_file_and_cause():
    error = write_failed("/out/runs/x/train-00000-of-00001.tfrecord", OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))
    text = f"RuntimeError: Traceback ...\nOSError: {error} [while running 'WriteShards/WriteShardFiles']"
    assert describe_failure(text, {}) == \
        "cannot write /out/runs/x/train-00000-of-00001.tfrecord: No space left on device"


def test_other_write_errors_are_named_by_step_or_by_their_file():
    steps = {"PublishOutputs/WriteRejects": "/o/runs/x/rejects/rejects-*.jsonl", "ComputeStats": "/o/runs/x/transform/"}
    beam_sink = ("Traceback (most recent call last):\n  ...\nOSError: [Errno 28] No space left on device "
                 "[while running 'PublishOutputs/WriteRejects/Write/WriteImpl/WriteBundles']")
    assert describe_failure(beam_sink, steps) == "cannot write /o/runs/x/rejects/rejects-*.jsonl: No space left on device"
    opened = "PermissionError: [Errno 13] Permission denied: '/o/runs/x/stats.json'"
    assert describe_failure(opened, steps, written_under="/o") == "cannot write /o/runs/x/stats.json: Permission denied"
    tensorflow = ("tensorflow.python.framework.errors_impl.ResourceExhaustedError: /o/runs/x/transform/y; "
                  "No space left on device [while running 'ComputeStats/WriteTransformFn/WriteTransformFn']")
    assert describe_failure(tensorflow, steps) == "cannot write /o/runs/x/transform/: No space left on device"


def test_errors_that_are_not_failed_writes_are_left_alone():
    steps = {"WriteShards": "/o/runs/x/"}
    assert describe_failure("ValueError: invalid literal for int() [while running 'ValidatePairs']", steps) is None
    assert describe_failure("FileNotFoundError: [Errno 2] No such file or directory: '/in/x.png'", steps) is None
    unreadable_input = "PermissionError: [Errno 13] Permission denied: '/in/listing.csv' [while running 'ReadCorpus']"
    assert describe_failure(unreadable_input, steps, written_under="/o") is None
    assert describe_failure("OSError: [Errno 5] Input/output error [while running 'ReadCorpus/List']", steps) is None


def _dead_pid():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_holder_on_this_host_is_gone_exactly_when_its_process_is(monkeypatch):
    monkeypatch.delenv(locking.HOST_VARIABLE, raising=False)
    now = 1_000_000.0
    alive = locking.new_record("r1", now, 600)
    assert locking.is_stale(alive, now + 10_000) == (False, "its process is running on this host")
    reused = dict(alive, pid_start="1")          # same pid, another start time: a reused pid is not the holder
    assert locking.is_stale(reused, now)[0]
    dead = dict(alive, pid=_dead_pid(), pid_start="12345")
    stale, why = locking.is_stale(dead, now)
    assert stale and "no longer runs on this host" in why


def test_a_holder_on_another_host_is_gone_when_its_lease_ran_out(monkeypatch):
    monkeypatch.setenv(locking.HOST_VARIABLE, "elsewhere.example")
    record = locking.new_record("r2", 1000.0, 60)
    monkeypatch.setenv(locking.HOST_VARIABLE, "here.example")
    assert locking.is_stale(record, 1059.0)[0] is False
    stale, why = locking.is_stale(record, 1075.0)
    assert stale and why == "no heartbeat for 75 s (lease 60 s)"
    assert locking.describe(record).startswith("run r2 (host elsewhere.example, pid ")


def test_the_reported_refusal_is_the_same_whatever_order_beam_gives():
    from itertools import permutations
    from beam_pipeline.core.gates import first_refusal
    from beam_pipeline.core.records import Refusal
    refusals = [Refusal("no_train", "the version would have no train split"),
                Refusal("max_reject_fraction", "90 % rejected"),
                Refusal("max_growth", "grows 9x")]
    assert {first_refusal(list(order)).gate for order in permutations(refusals)} == {"max_reject_fraction"}
    assert first_refusal(refusals + [Refusal("counts", "lost inputs")]).gate == "counts"
    assert first_refusal([Refusal("no_train", "b"), Refusal("no_train", "a")]).message == "a"
