"""Progress while the pipeline runs: counts from the worker processes to the launcher, lines and a live bar.

The channel is tested across real processes; the lines and the bar come from real runs of the command
line on the seeded sample corpus (plain lines when stderr is a pipe, a rich bar on a pseudo-terminal),
and their figures are checked against manifest.json.
"""

import datetime
import fcntl
import json
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time

import pytest

from conftest import NUM_CLASSES, ROOT, run_cli
from test_console import noise_in

from beam_pipeline.core.progress import Progress
from beam_pipeline.launcher import watch
from beam_pipeline.stages import counters

# The phases of a run, in order, as this test expects the lines to name them.
ORDER = ["starting", "listing", "validating", "analysing", "writing", "finishing"]


# --------------------------------------------------------------------------
# The channel
# --------------------------------------------------------------------------
WORKER = """
import sys, threading
from beam_pipeline.stages import counters
valid = counters.counter("ValidatePairs", "valid")
def work():
    for _ in range(int(sys.argv[1])):
        valid.inc()
threads = [threading.Thread(target=work) for _ in range(4)]
[t.start() for t in threads]
[t.join() for t in threads]
counters.counter("ValidatePairs", "rejected_truncated").inc(int(sys.argv[2]))
counters.CountingDoFn().finish_bundle()
"""


def test_totals_of_worker_processes_are_summed_by_the_reader(tmp_path):
    env = dict(os.environ, **{counters.ENV: str(tmp_path)})
    for per_thread, rejected in ((1000, 3), (250, 0)):
        subprocess.run([sys.executable, "-c", WORKER, str(per_thread), str(rejected)], cwd=ROOT, env=env,
                       check=True, timeout=120)
    assert len(list(tmp_path.glob("*.json"))) == 2
    assert counters.read_totals(str(tmp_path)) == {"ValidatePairs:valid": 4 * 1000 + 4 * 250,
                                                   "ValidatePairs:rejected_truncated": 3}


def test_without_the_variable_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.delenv(counters.ENV, raising=False)
    counters.counter("ValidatePairs", "valid").inc()
    counters.CountingDoFn().finish_bundle()
    monkeypatch.setenv(counters.ENV, str(tmp_path))
    counters.counter("ValidatePairs", "valid").inc(2)
    counters.CountingDoFn().finish_bundle()
    assert counters.read_totals(str(tmp_path)) == {"ValidatePairs:valid": 2}


class Recorder:
    def __init__(self):
        self.shown, self.closed = [], []

    def show(self, now, p, rate, eta, changed):
        self.shown.append((p.phase, changed))

    def close(self, phase, p, seconds):
        self.closed.append((phase, p.figures(phase)))

    def stop(self):
        pass


def test_monitor_closes_each_phase_once_and_never_goes_back(tmp_path):
    recorder = Recorder()
    monitor = watch.Monitor(str(tmp_path), recorder)
    monitor.observe(0.0, Progress("validating", 10, 4, 0, 0, 1))
    monitor.observe(1.0, Progress("validating", 10, 8, 0, 0, 1))
    monitor.observe(2.0, Progress("analysing", 10, 10, 9, 0, 1))
    monitor.observe(2.5, Progress("validating", 10, 9, 0, 0, 1))      # an older file read late
    monitor.observe(3.0, Progress("writing", 10, 10, 9, 3, 1))
    monitor.finish({"ReadCorpus:discovered": 10, "SelectSubset:selected": 10, "ValidatePairs:valid": 9,
                    "ValidatePairs:rejected_truncated": 1, "WriteShards:pairs_written": 9})
    assert recorder.shown == [("validating", True), ("validating", False), ("analysing", True), ("writing", True)]
    assert recorder.closed == [("validating", (10, 10)), ("writing", (9, 9))]


# --------------------------------------------------------------------------
# Plain lines in a log
# --------------------------------------------------------------------------
LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) INFO beam_pipeline\.progress: (\w+) +(.*)$")


def progress_lines(stderr: str):
    """(seconds, phase, done, total, rejected, text) of every progress line; done/total None when not shown."""
    rows = []
    for line in stderr.splitlines():
        match = LINE.match(line)
        if not match:
            continue
        stamp, phase, text = match.groups()
        when = datetime.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()
        pairs = re.search(r"([\d,]+)/([\d,]+) pairs", text)
        rejected = re.search(r"rejected ([\d,]+)", text)
        done, total = (int(pairs.group(1).replace(",", "")), int(pairs.group(2).replace(",", ""))) if pairs \
            else (None, None)
        rows.append((when, phase, done, total, int(rejected.group(1).replace(",", "")) if rejected else None, text))
    return rows


# The sample corpus with ten times its pairs, for one worker to validate long enough (a few seconds on a
# quiet machine) that several lines and an ETA show while it does: its 12 broken or odd rows, 10 of
# them rejected and 2 duplicates, as in the sample corpus (tools/sample_corpus/).
LONGER_CORPUS_PAIRS = 2400


@pytest.fixture(scope="module")
def longer_corpus(tmp_path_factory):
    from tools.sample_corpus.corpus import write_corpus
    out = tmp_path_factory.mktemp("longer_corpus")
    write_corpus(str(out), seed=0, num_pairs=LONGER_CORPUS_PAIRS, num_class_images=8)
    return out


def test_progress_lines_in_a_log_agree_with_the_manifest(longer_corpus, tmp_path):
    out = tmp_path / "out"
    completed = run_cli("--input", longer_corpus / "segmentation" / "manifest.csv", "--output", out,
                        "--num_classes", NUM_CLASSES, "--progress_every", 0.5, "--direct_num_workers", 1,
                        "--no_stats")
    counts = json.loads((out / "manifest.json").read_text())["counts"]
    rows = progress_lines(completed.stderr)
    phases = [phase for _, phase, *_ in rows]
    assert phases == sorted(phases, key=ORDER.index), phases
    assert max(b[0] - a[0] for a, b in zip(rows, rows[1:])) < 5.0      # a line at least every 5 s

    validating = [row for row in rows if row[1] == "validating"]
    assert len(validating) >= 3, completed.stderr[-3000:]
    dones = [done for _, _, done, _, _, _ in validating]
    assert dones == sorted(dones) and dones[0] < dones[-1]
    assert {total for _, _, _, total, _, _ in validating} == {counts["discovered"]}
    _, _, last_done, last_total, last_rejected, last_text = validating[-1]
    assert last_done == last_total == counts["discovered"] == LONGER_CORPUS_PAIRS + 12
    assert last_rejected == counts["rejected"]["total"] == 10
    assert re.search(r"[\d.]+ pairs/s", last_text)
    assert any("ETA " in text for *_, text in validating[:-1])

    writing = [row for row in rows if row[1] == "writing"]
    assert writing, completed.stderr[-3000:]
    assert writing[-1][2] == writing[-1][3] == counts["written"] == LONGER_CORPUS_PAIRS


# --------------------------------------------------------------------------
# A live bar on a terminal
# --------------------------------------------------------------------------
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def run_on_terminal(args, timeout=900):
    """The CLI with stdout and stderr on a pseudo-terminal of 120 columns; (exit code, everything it wrote)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    process = subprocess.Popen([sys.executable, "-m", "beam_pipeline", *map(str, args)], cwd=ROOT,
                               stdin=subprocess.DEVNULL, stdout=slave, stderr=slave)
    os.close(slave)
    chunks, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 1.0)
        if not ready:
            if process.poll() is not None:
                break
            continue
        try:
            data = os.read(master, 1 << 16)
        except OSError:             # EIO: every writer closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    code = process.wait(timeout=60)
    return code, b"".join(chunks).decode("utf-8", "replace")


def test_live_bar_on_a_terminal(corpus_dir, tmp_path):
    out = tmp_path / "out"
    code, raw = run_on_terminal(["--input", corpus_dir / "segmentation" / "manifest.csv", "--output", out,
                                 "--num_classes", NUM_CLASSES])
    assert code == 0, raw[-3000:]
    text = ANSI.sub("", raw).replace("\r\n", "\n")
    assert noise_in(text) == [], text[-3000:]
    assert "INFO beam_pipeline" not in text                       # terminal lines are compact
    assert re.search(r"^\d\d:\d\d:\d\d Reading .*manifest\.csv", text, re.MULTILINE)
    redraws = re.findall(r"validating +━+ +([\d,]+)/252 pairs", text)
    assert len(redraws) >= 3 and redraws[-1] == "252"                # redrawn in place, ending complete
    assert re.search(r"writing +━+ +240/240 pairs", text)
    assert "\r" in raw or "\x1b[1A" in raw or "\x1b[2K" in raw     # the bar moves the cursor back
    assert "=== beam_pipeline summary ===" in text
    counts = json.loads((out / "manifest.json").read_text())["counts"]
    assert counts["discovered"] == 252 and counts["written"] == 240
