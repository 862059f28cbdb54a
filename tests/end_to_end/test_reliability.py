"""Failure and recovery (docs/recovery.md): kills at every phase, concurrent runs, damaged files, a full disk, the reject gate.

The kill matrix runs one small command (40 pairs of the sample corpus, statistics on, two SDK worker
processes) again and again on one output folder, in one module fixture:

1. a clean run into a folder of its own: the reference;
2. on a fresh output, runs killed at named phases (beam_pipeline/phases.py): while validating, during
   the statistics, with a shard half written, just before the publish and during it (report and TFDV
   statistics written, manifest.json not yet). The kill is SIGKILL to the run's process group: the
   launcher and its SDK workers;
3. the documented recovery, the same command again. It runs while the output holds what all the kills
   before left (their version folders and the last one's stale lock), and it is paused while validating
   so that a second, concurrent run can be started against it, which must fail at once naming it;
4. --overwrite runs on that dataset killed with a shard half written and just before manifest.json is
   written, then one killed after a fixed delay, then one killed just after its commit;
5. the recovery again, with --overwrite.

And on an output of its own: a run killed once verdict buckets are committed, then the same command
again, which must reuse every verdict the killed run committed (the verdict cache, docs/cache.md).

After each kill the output holds the previous complete dataset (the same manifest.json bytes, every
file verified) or none (no manifest.json, which is all a reader opens first), beam_pipeline.verify says
the same, and no process of the run is left. Each recovery gives what the clean run gave, byte for byte
(conftest.assert_same_outputs), and leaves no lock and no other version than the ones kept.
"""

import dataclasses
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Optional

import pytest

from beam_pipeline import phases
from beam_pipeline.verify import NO_DATASET, main as verify_main, verify
from conftest import ENGINE_OPTIONS, ENGINES, NUM_CLASSES, ROOT, assert_same_outputs, dataset_dir, manifest_of
from tools.compare_outputs import record_differences

RUN_TIMEOUT = 900
FRESH_KILLS = (phases.VALIDATE, phases.STATISTICS, phases.WRITE_SHARD, phases.PUBLISH, phases.PUBLISH_MANIFEST)
OVERWRITE_KILLS = (phases.WRITE_SHARD, phases.PUBLISH_MANIFEST)
TIMED_KILL_FRACTION = 0.5           # of the clean run's wall time


def command(corpus_dir) -> list:
    return ["--input", str(corpus_dir / "segmentation" / "manifest.csv"), "--num_classes", str(NUM_CLASSES),
            "--max_examples", "40", "--target_shard_bytes", "2000000"]


@dataclasses.dataclass
class Run:
    process: subprocess.Popen
    log: Path
    started: float
    pause_file: Optional[Path] = None

    def output(self) -> str:
        return self.log.read_text() if self.log.exists() else ""


def start(args, log: Path, pause_at: Optional[str] = None, preexec_fn=None, pause_after: int = 1) -> Run:
    """python -m beam_pipeline in a process group of its own (the SDK workers join it).

    Unless ``args`` choose an engine, the run gets SDK worker processes, as a large corpus does (a corpus as
    small as these tests' would run in the launcher alone): a kill must stop the workers too."""
    if not any(str(arg).split("=")[0] in ENGINE_OPTIONS for arg in args):
        args = [*args, *ENGINES["processes2"]]
    env = dict(os.environ)
    pause_file = None
    if pause_at:
        pause_file = log.with_suffix(".paused")
        env.update({phases.PAUSE_AT_VARIABLE: pause_at, phases.PAUSE_FILE_VARIABLE: str(pause_file),
                    phases.PAUSE_AFTER_VARIABLE: str(pause_after)})
    with open(log, "w") as handle:
        process = subprocess.Popen([sys.executable, "-m", "beam_pipeline", *map(str, args)], cwd=ROOT,
                                   stdout=handle, stderr=subprocess.STDOUT, text=True, env=env,
                                   start_new_session=True, preexec_fn=preexec_fn)
    return Run(process, log, time.monotonic(), pause_file)


def wait_paused(run: Run) -> None:
    deadline = time.monotonic() + RUN_TIMEOUT
    while not run.pause_file.exists():
        if run.process.poll() is not None:
            raise AssertionError(f"the run ended ({run.process.returncode}) before its pause:\n{run.output()[-5000:]}")
        if time.monotonic() > deadline:
            kill_group(run)
            raise AssertionError(f"the run did not reach its pause in {RUN_TIMEOUT} s:\n{run.output()[-5000:]}")
        time.sleep(0.05)


def finish(run: Run) -> int:
    try:
        return run.process.wait(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        kill_group(run)
        raise AssertionError(f"the run did not finish in {RUN_TIMEOUT} s:\n{run.output()[-5000:]}") from None


def group_members(pgid: int) -> List[int]:
    """Live (not zombie) processes in a process group, from /proc."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(entry))
    return members


def kill_group(run: Run) -> List[int]:
    """SIGKILL to the launcher and every SDK worker; returns the pids still alive a few seconds later."""
    try:
        os.killpg(run.process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    run.process.wait()
    deadline = time.monotonic() + 10
    while group_members(run.process.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    return group_members(run.process.pid)


def listing(out: Path) -> dict:
    return {"top": sorted(p.name for p in out.iterdir()) if out.exists() else [],
            "versions": sorted(p.name for p in (out / "runs").iterdir()) if (out / "runs").exists() else [],
            "lock": json.loads((out / "_lock.json").read_text()) if (out / "_lock.json").exists() else None}


@dataclasses.dataclass
class Kill:
    phase: str
    before: Optional[bytes]              # manifest.json before the run
    after: Optional[bytes]               # and after its kill
    verified: object                     # beam_pipeline.verify.Verification
    reader_error: Optional[str]          # what the trainer says when it opens the output
    survivors: List[int]
    state: dict
    seconds: float


def reader_error(out: Path) -> Optional[str]:
    """What the trainer (a reader) makes of the output: None when it loads and verifies a dataset."""
    from trainer.data.artifacts import ArtifactError, load_artifacts
    from trainer.data.verification import verify_all
    try:
        verify_all(load_artifacts(str(out)))
    except ArtifactError as error:
        return str(error)
    return None


def manifest_bytes(out: Path) -> Optional[bytes]:
    path = out / "manifest.json"
    return path.read_bytes() if path.exists() else None


def observe_kill(out: Path, run: Run, phase: str, before: Optional[bytes]) -> Kill:
    survivors = kill_group(run)
    return Kill(phase, before, manifest_bytes(out), verify(str(out)), reader_error(out), survivors, listing(out),
                time.monotonic() - run.started)


def kill_at(out: Path, args: list, phase: str, log: Path, pause_after: int = 1) -> Kill:
    before = manifest_bytes(out)
    run = start([*args, "--output", out], log, pause_at=phase, pause_after=pause_after)
    wait_paused(run)
    return observe_kill(out, run, phase, before)


@pytest.fixture(scope="module")
def reference(corpus_dir, tmp_path_factory):
    """The clean run: the command once into a fresh folder, and its wall time."""
    out = tmp_path_factory.mktemp("reliability") / "reference"
    run = start([*command(corpus_dir), "--output", out], out.parent / "reference.log")
    assert finish(run) == 0, run.output()[-5000:]
    return out, time.monotonic() - run.started


@pytest.fixture(scope="module")
def matrix(corpus_dir, reference, tmp_path_factory):
    work = tmp_path_factory.mktemp("kill_matrix")
    out = work / "out"
    args = command(corpus_dir)
    record = {"fresh": [], "overwrite": []}
    for phase in FRESH_KILLS:
        record["fresh"].append(kill_at(out, args, phase, work / f"fresh-{phase}.log"))
    record["before_rerun"] = listing(out)
    # The documented recovery, paused while validating so that a second run can try its luck.
    rerun = start([*args, "--output", out], work / "rerun.log", pause_at=phases.VALIDATE)
    wait_paused(rerun)
    holder = json.loads((out / "_lock.json").read_text())
    second = start([*args, "--output", out], work / "concurrent.log")
    record["concurrent"] = (finish(second), second.output(), time.monotonic() - second.started, holder)
    Path(str(rerun.pause_file) + ".go").touch()
    record["rerun"] = (finish(rerun), rerun.output(), listing(out))
    record["rerun_manifest"] = manifest_of(out)
    assert record["rerun"][0] == 0, record["rerun"][1][-5000:]
    record["rerun_verified"] = verify(str(out))
    # The last kill came after every record was written: the re-run adopts the killed run's spill files as its
    # shards (stages/rerun/adopt.py), so the version holds a fresh run's records, in shards laid out as the kill left them.
    assert record_differences(reference[0], out) == []
    record["rerun_same"] = True
    overwrite = [*args, "--overwrite", "--compact", "all"]   # the same input: all written again, not kept
    for phase in OVERWRITE_KILLS:
        record["overwrite"].append(kill_at(out, overwrite, phase, work / f"overwrite-{phase}.log"))
    before = manifest_bytes(out)
    timed = start([*overwrite, "--output", out], work / "overwrite-timed.log")
    time.sleep(TIMED_KILL_FRACTION * reference[1])
    record["timed"] = observe_kill(out, timed, f"after {TIMED_KILL_FRACTION * reference[1]:.1f} s", before)
    record["committed"] = kill_at(out, overwrite, phases.COMMITTED, work / "overwrite-committed.log")
    last = start([*overwrite, "--output", out], work / "overwrite-rerun.log")
    record["overwrite_rerun"] = (finish(last), last.output(), listing(out))
    record["out"] = out
    return record


# --------------------------------------------------------------------------
# The kill matrix
# --------------------------------------------------------------------------
@pytest.mark.parametrize("index,phase", list(enumerate(FRESH_KILLS)))
def test_a_run_killed_before_its_commit_leaves_nothing_a_reader_could_take_for_a_dataset(matrix, index, phase):
    kill = matrix["fresh"][index]
    assert kill.phase == phase
    assert kill.before is None and kill.after is None                 # no manifest.json: no dataset
    assert not kill.verified.ok and kill.verified.error.startswith("no dataset")
    assert kill.reader_error.startswith("no manifest.json in ")
    assert kill.survivors == []
    assert kill.state["lock"] is not None                              # the killed run's, stale now
    # Only its own version folder, named by no manifest: each run removes what killed runs left when it starts.
    assert kill.state["versions"] == [kill.state["lock"]["run_id"]]
    if index:
        assert kill.state["lock"]["run_id"] != matrix["fresh"][index - 1].state["lock"]["run_id"]


def test_verify_says_no_dataset_with_its_own_exit_status(matrix, tmp_path, capsys):
    kill = matrix["fresh"][-1]
    assert kill.verified.error == f"no dataset: {kill.verified.output} holds no manifest.json"
    assert verify_main([str(tmp_path)]) == NO_DATASET
    assert capsys.readouterr().err.strip() == f"error: no dataset: {tmp_path} holds no manifest.json"


def test_a_second_run_on_a_held_output_fails_at_once_naming_the_first(matrix):
    code, text, seconds, holder = matrix["concurrent"]
    assert code == 2, text[-3000:]
    last = text.strip().splitlines()[-1]
    assert last.startswith("error: run ")
    for value in (holder["run_id"], f"host {holder['host']}", f"pid {holder['pid']}", f"started {holder['started']}"):
        assert value in last
    assert "Traceback" not in text
    assert seconds < 60, seconds          # what it costs to start Python and read the options; no pipeline


def test_the_rerun_takes_the_stale_lock_over_and_equals_a_clean_run(matrix):
    code, text, after = matrix["rerun"]
    stale = matrix["fresh"][-1].state["lock"]
    assert f"taking over the stale lock of run {stale['run_id']}" in text
    assert "its process no longer holds the lock" in text
    assert matrix["rerun_same"]                                        # record_differences(reference, output)
    assert matrix["rerun_manifest"]["lineage"]["records"]["adopted"] > 0
    assert matrix["rerun_verified"].ok, [str(p) for p in matrix["rerun_verified"].problems]
    manifest = matrix["rerun_manifest"]
    assert after["top"] == ["cache", "manifest.json", "runs"]                   # no lock left
    assert after["versions"] == [manifest["run_id"]]                   # every killed run's folder is gone
    assert matrix["before_rerun"]["versions"] == [stale["run_id"]]


@pytest.mark.parametrize("index,phase", list(enumerate(OVERWRITE_KILLS)))
def test_a_killed_overwrite_leaves_the_previous_dataset_as_it_was(matrix, index, phase):
    kill = matrix["overwrite"][index]
    assert kill.phase == phase
    assert kill.before is not None and kill.after == kill.before       # the same manifest.json, byte for byte
    assert json.loads(kill.after)["run_id"] == matrix["rerun_manifest"]["run_id"]
    assert kill.verified.ok, [str(p) for p in kill.verified.problems]
    assert kill.reader_error is None                                   # the trainer verifies and would train
    assert kill.survivors == []


def test_a_timed_kill_leaves_a_complete_dataset(matrix):
    kill = matrix["timed"]
    assert kill.survivors == []
    assert kill.after is not None and kill.verified.ok, [str(p) for p in kill.verified.problems]
    assert kill.reader_error is None
    assert kill.after == kill.before or json.loads(kill.after)["run_id"] != json.loads(kill.before)["run_id"]


def test_a_run_killed_just_after_its_commit_has_published_the_new_dataset(matrix):
    kill = matrix["committed"]
    new = json.loads(kill.after)
    assert new["run_id"] != json.loads(kill.before)["run_id"]
    assert kill.verified.ok and kill.reader_error is None
    assert json.loads(kill.before)["run_id"] in new["retained_run_ids"]  # the previous version is kept


def test_the_overwrite_rerun_equals_a_clean_run_and_keeps_one_previous_version(matrix, reference):
    code, text, after = matrix["overwrite_rerun"]
    assert code == 0, text[-5000:]
    out = matrix["out"]
    assert_same_outputs(reference[0], out)
    result = verify(str(out))
    assert result.ok, [str(p) for p in result.problems]
    manifest = manifest_of(out)
    committed = json.loads(matrix["committed"].after)
    assert manifest["retained_run_ids"] == [committed["run_id"]]      # --keep_versions 1
    assert after["versions"] == sorted([manifest["run_id"], committed["run_id"]])
    assert after["top"] == ["cache", "manifest.json", "runs"]



# --------------------------------------------------------------------------
# Kill, then re-run: the verdict cache (docs/cache.md) keeps what the killed run finished
# --------------------------------------------------------------------------
def committed_verdicts(out: Path) -> dict:
    """Every verdict in the committed parts of the output's cache (one fingerprint), read as a re-run does."""
    from beam_pipeline.core.rerun.verdicts import NUM_BUCKETS
    from beam_pipeline.io.cache import verdicts as verdict_store
    folders = [p for p in (out / "cache").iterdir() if p.is_dir()]
    assert len(folders) == 1, folders
    verdicts = {}
    for bucket in range(NUM_BUCKETS):
        verdicts.update(verdict_store.load(str(folders[0]), bucket))
    return verdicts


@pytest.fixture(scope="module", params=list(ENGINES))
def resumed(request, corpus_dir, reference, tmp_path_factory):
    """A fresh output: the command (on one thread, or two SDK worker processes) killed once a worker has committed its
    8th verdict bucket (most hold one of the 40 pairs), then run again."""
    work = tmp_path_factory.mktemp(f"resumed_{request.param}")
    out = work / "out"
    args = [*command(corpus_dir), *ENGINES[request.param]]
    kill = kill_at(out, args, phases.VERDICTS_COMMITTED, work / "killed.log", pause_after=8)
    kept = committed_verdicts(out)
    rerun = start([*args, "--output", out], work / "rerun.log")
    return kill, kept, (finish(rerun), rerun.output()), out, args


def test_a_rerun_after_a_kill_mid_validation_reuses_every_committed_verdict_and_equals_a_clean_run(resumed, reference):
    kill, kept, (code, text), out, _ = resumed
    assert kill.after is None and kill.survivors == []
    assert 8 <= len(kept) < 40                                        # some of the 40 pairs, not all
    assert code == 0, text[-5000:]
    # The killed run's spill files are adopted as shards, not copied: a fresh run's records, laid out as the kill
    # left them; every record the killed run committed a verdict for is adopted.
    assert record_differences(reference[0], out) == []
    manifest = manifest_of(out)
    lineage, counts = manifest["lineage"], manifest["counts"]
    adopted, written = lineage["records"]["adopted"], lineage["records"]["written"]
    print(f"adopted {adopted} records, wrote {written}")
    assert 0 < adopted <= len([v for v in kept.values() if v.valid])
    live = sum(shard["records"] - len(shard.get("deleted") or ()) for entry in manifest["splits"].values()
               for shard in entry["shards"])
    assert adopted + written == live
    print(f"\nkilled with {len(kept)} verdicts committed; the re-run: {lineage}")
    assert lineage["rehashed"] == 0                                   # the files did not change
    # A listing may name a pair twice; each of its rows reuses the one verdict.
    assert lineage["from_cache"] >= len(kept)
    before_validation = counts["rejected"]["by_reason"].get("path_outside_root", 0)     # the listing's own check
    assert lineage["validated"] + lineage["from_cache"] == (counts["discovered"] - counts["filtered_out"]["total"]
                                                            - before_validation)
    assert lineage["parent_run_id"] is None                           # the killed run published nothing
    assert verify(str(out)).ok


def test_a_version_with_adopted_shards_is_the_parent_of_the_next_rerun_like_any_other(resumed, reference):
    """The adopted shards' keys files (a deleted record's line included) serve the next re-run, which keeps every
    record where the resumed version holds it."""
    _, _, _, out, args = resumed
    before = manifest_of(out)
    again = start([*args, "--output", out, "--overwrite"], out.parent / "again.log")
    code = finish(again)
    assert code == 0, again.output()[-5000:]
    manifest = manifest_of(out)
    records = manifest["lineage"]["records"]
    assert records["written"] == 0 and records["adopted"] == 0 and records["deleted"] == 0
    assert records["kept"] == before["lineage"]["records"]["adopted"] + before["lineage"]["records"]["written"]
    assert record_differences(reference[0], out) == []
    assert verify(str(out)).ok

# --------------------------------------------------------------------------
# Damaged files
# --------------------------------------------------------------------------
KINDS = {   # a file of each kind the manifest lists, by what it is
    "shard": lambda files: next(p for p in files if p.startswith("train-")),
    "transform variables": lambda files: next(p for p in files if p.startswith("transform/transform_fn/variables/")),
    "transform graph": lambda files: "transform/transform_fn/saved_model.pb",
    "raw schema": lambda files: "transform/metadata/schema.pbtxt",
    "stats.json": lambda files: "stats.json",
    "rejects": lambda files: next(p for p in files if p.startswith("rejects/")),
    "class index": lambda files: next(p for p in files if p.startswith("class_index/")),
    "report": lambda files: "report.html",
    "TFDV statistics": lambda files: "stats/train.tfrecord",
}


# The kinds whose size grows with the dataset: the trainer checks their digests while it trains
# (trainer/data/verification.py); the others before its first step.
CHECKED_WHILE_TRAINING = ("shard", "rejects", "class index")


def flip_byte(path: Path) -> bytes:
    original = path.read_bytes()
    data = bytearray(original)
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    return original


@pytest.fixture
def copy_of_reference(reference, tmp_path):
    out = tmp_path / "copy"
    shutil.copytree(reference[0], out)
    return out


def test_every_published_file_is_listed_with_its_digest(reference):
    out = reference[0]
    manifest = manifest_of(out)
    on_disk = sorted(str(p.relative_to(dataset_dir(out))) for p in dataset_dir(out).rglob("*") if p.is_file())
    # the version's own copy of its manifest is the only file beside them (garbage collection reads it)
    assert sorted([*manifest["files"], "manifest.json"]) == sorted(on_disk)
    assert (dataset_dir(out) / "manifest.json").read_bytes() == (out / "manifest.json").read_bytes()
    for kind, pick in KINDS.items():
        assert pick(manifest["files"]) in manifest["files"], kind
    raw = json.loads((out / "manifest.json").read_text())         # manifest_of leaves the run folders out
    assert raw["transform_dir"] == raw["data_dir"] + "/transform"


def test_a_flipped_byte_in_each_kind_of_file_is_caught_by_verify_and_by_the_trainer(copy_of_reference, tmp_path,
                                                                                   capsys):
    from trainer.data.artifacts import ArtifactError
    from trainer.training.config import TrainConfig
    from trainer.training.train import train
    out = copy_of_reference
    files = manifest_of(out)["files"]
    for kind, pick in KINDS.items():
        relative = pick(files)
        path = dataset_dir(out) / relative
        original = flip_byte(path)
        assert verify_main([str(out)]) == 1, kind
        report = capsys.readouterr().err
        named = f"{dataset_dir(out).relative_to(out)}/{relative}"        # verify names paths as the manifest does
        assert f"sha256  {named}: SHA-256" in report and report.strip().splitlines()[-1].startswith("FAILED: 1 "), \
            (kind, report)
        job_dir = tmp_path / f"job-{kind.replace(' ', '_')}"
        with pytest.raises(ArtifactError, match="does not match its SHA-256"):
            train(TrainConfig(data=str(out), job_dir=str(job_dir), epochs=1, steps_per_epoch=1, crop=(32, 32)))
        if kind in CHECKED_WHILE_TRAINING:               # read again beside training: it stops, exports nothing
            assert (job_dir / "input_shards.json").exists() and not (job_dir / "export").exists(), kind
        else:
            assert not job_dir.exists(), kind            # before the first step: no backup, no log, no checkpoint
        path.write_bytes(original)
    assert verify_main([str(out)]) == 0


def test_verify_names_missing_and_extra_files_from_the_command_line(copy_of_reference):
    out = copy_of_reference
    data = dataset_dir(out)
    (data / "stats.json").unlink()
    (data / "notes.txt").write_text("not part of the dataset")
    completed = subprocess.run([sys.executable, "-m", "beam_pipeline.verify", str(out)], cwd=ROOT,
                               capture_output=True, text=True, timeout=300)
    assert completed.returncode == 1
    lines = completed.stderr.strip().splitlines()
    version = dataset_dir(out).relative_to(out)
    assert any(line.startswith(f"extra   {version}/notes.txt: ") for line in lines), lines
    assert any(line.startswith(f"missing {version}/stats.json: ") for line in lines), lines
    assert lines[-1].startswith("FAILED: 2 problem(s)")


# --------------------------------------------------------------------------
# A full disk, the reject gate, an output that is a file
# --------------------------------------------------------------------------
def _mount_tmpfs(folder: Path, size_bytes: int) -> bool:
    folder.mkdir(parents=True, exist_ok=True)
    completed = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_bytes // 1024}k", "tmpfs", str(folder)],
                               capture_output=True, text=True)
    return completed.returncode == 0


def _limit_file_size(limit: int):
    def apply():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def test_a_full_disk_ends_the_run_with_the_file_and_the_cause_and_keeps_the_previous_dataset(
        corpus_dir, reference, tmp_path):
    """On a tmpfs that holds the previous dataset and 1.5 MB more. Where mounting is refused (not root), the
    kernel's per-process file-size limit (RLIMIT_FSIZE) makes the writes fail instead (EFBIG, not ENOSPC)."""
    previous = reference[0]
    used = sum(p.stat().st_size for p in previous.rglob("*") if p.is_file())
    disk = tmp_path / "disk"
    mounted = _mount_tmpfs(disk, used + 1_500_000 + 64 * 4096)
    try:
        out = disk / "out"
        shutil.copytree(previous, out)
        before = manifest_bytes(out)
        limit = None if mounted else _limit_file_size(1_000_000)
        # --compact all: the same input would otherwise keep every shard of the previous version and write none
        run = start([*command(corpus_dir), "--overwrite", "--compact", "all", "--output", out], tmp_path / "full.log",
                    preexec_fn=limit)
        assert finish(run) == 1, run.output()[-5000:]
        last = run.output().strip().splitlines()[-1]
        cause = "No space left on device" if mounted else "File too large"
        assert last.startswith(f"error: cannot write {out}/runs/"), last
        assert f": {cause}. Nothing was published: {out} holds what it held before" in last
        assert "Traceback" not in run.output()      # the workers' reports of the failed bundle are not repeated
        assert manifest_bytes(out) == before
        result = verify(str(out))
        assert result.ok, [str(p) for p in result.problems]
        assert listing(out)["versions"] == [manifest_of(out)["run_id"]]   # the failed run's folder is gone
        assert listing(out)["lock"] is None
    finally:
        if mounted:
            subprocess.run(["umount", str(disk)], check=True)


def _gate_listing(corpus_dir, folder: Path) -> Path:
    """40 rows: 28 valid pairs of the sample corpus and 12 broken ones (30 %): 5 missing masks,
    4 truncated images, 3 masks with a class id out of range."""
    root = corpus_dir / "segmentation"
    rows = [line.split(",")[:2] for line in (root / "manifest.csv").read_text().splitlines()[1:]]
    valid = [(image, mask) for image, mask in rows if Path(image).stem.startswith("img_")][:28]
    folder.mkdir()
    listed = [(root / image, root / mask) for image, mask in valid]
    for i in range(5):
        listed.append((root / valid[i][0], folder / f"missing_{i}.png"))
    for i in range(4):
        data = (root / valid[i][0]).read_bytes()
        (folder / f"cut_{i}{Path(valid[i][0]).suffix}").write_bytes(data[: len(data) // 2])
        listed.append((folder / f"cut_{i}{Path(valid[i][0]).suffix}", root / valid[i][1]))
    bad_image, bad_mask = next((root / i, root / m) for i, m in rows if Path(i).stem == "broken_badlabel")
    for i in range(3):
        shutil.copy(bad_image, folder / f"badlabel_{i}{bad_image.suffix}")
        shutil.copy(bad_mask, folder / f"badlabel_{i}.png")
        listed.append((folder / f"badlabel_{i}{bad_image.suffix}", folder / f"badlabel_{i}.png"))
    listing_file = folder / "listing.csv"
    listing_file.write_text("image,mask\n" + "".join(f"{image},{mask}\n" for image, mask in listed))
    return listing_file


def test_the_reject_gate_refuses_a_mostly_broken_corpus_naming_the_top_reasons(corpus_dir, copy_of_reference,
                                                                             tmp_path):
    listing_file = _gate_listing(corpus_dir, tmp_path / "corpus")
    out = copy_of_reference
    before = manifest_bytes(out)
    run = start(["--input", listing_file, "--allow_outside_root", "--num_classes", NUM_CLASSES, "--no_stats",
                 "--max_reject_fraction", "0.2", "--overwrite", "--output", out], tmp_path / "gate.log")
    assert finish(run) == 2, run.output()[-5000:]
    last = run.output().strip().splitlines()[-1]
    assert last.startswith("error: 12 of 40 selected inputs (30.0%) were rejected, more than "
                           "--max_reject_fraction 0.2 allows; top reasons: missing_file 5 (fix: check the listing's "
                           "paths and the mount), truncated 4, mask_value_out_of_range 3 (value 9 in 3 mask(s); fix: "
                           "check --num_classes and --ignore_label, or read the masks through a --label_map (a row "
                           "9,ignore or 9,<class>))."), last
    assert manifest_bytes(out) == before and verify(str(out)).ok
    assert listing(out)["versions"] == [manifest_of(out)["run_id"]] and listing(out)["lock"] is None


@pytest.mark.parametrize("target", ["file", "file/inside"])
def test_an_output_that_is_a_file_is_one_line_before_anything_runs(corpus_dir, tmp_path, target):
    (tmp_path / "file").write_text("not a folder")
    run = start([*command(corpus_dir), "--output", tmp_path / target], tmp_path / "file.log")
    assert finish(run) == 2
    text = run.output().strip().splitlines()
    assert text[-1].startswith(f"error: --output {tmp_path / target} is not a folder"), text[-1]
    assert "Traceback" not in run.output()
    assert (tmp_path / "file").read_text() == "not a folder"
