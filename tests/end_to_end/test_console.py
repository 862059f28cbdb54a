"""Quiet by default: every command line prints only the project's lines; -v brings third-party output back.

The CLIs run for real, as a user runs them (the pipeline on the seeded sample corpus with its SDK
worker processes, the trainer for one tiny epoch, the report, trainer.evaluate and trainer.serve on the
export the serving tests share). Their stdout and stderr are searched
for the start-up noise a user saw before (issue 12), with patterns written out here, not taken from
the code under test; the same commands with -v or --log_level debug must show that noise, so the
quiet checks can fail.
"""

import logging
import re
import subprocess
import sys

import pytest

from conftest import ENGINES, ROOT, free_port, run_cli, stop_process_group, wait_for_port
from trainer_jobs import segmentation_job

# What third-party libraries print at start-up, as a user saw it before this was fixed.
NOISE = {
    "absl preamble": re.compile(r"All log messages before absl::InitializeLog\(\) is called"),
    "C++ INFO/WARNING line": re.compile(r"^[IW]\d{4} \d\d:\d\d:\S+\s+\d+ \S+\.cc:\d+\]", re.MULTILINE),
    "oneDNN notice": re.compile(r"oneDNN custom operations are on"),
    "no CUDA driver": re.compile(r"Could not find cuda drivers|failed call to cuInit"),
    "FutureWarning": re.compile(r"FutureWarning"),
    "grpcio PQC notice": re.compile(r"does not support Post-Quantum Cryptography"),
    "Beam worker record": re.compile(r"Worker: severity"),
    "Beam worker chatter": re.compile(r"No semi_persistent_directory found"),
    "Beam lint warning": re.compile(r"Using yield and return in the process method"),
    "absl/tensorflow INFO": re.compile(r"INFO (absl|tensorflow):"),
    "Python warning": re.compile(r"^\S+\.py:\d+: \w*Warning: ", re.MULTILINE),
}


def noise_in(text: str):
    return sorted(name for name, pattern in NOISE.items() if pattern.search(text))


def output(completed) -> str:
    return completed.stdout + completed.stderr


# --------------------------------------------------------------------------
# The pipeline
# --------------------------------------------------------------------------
def test_pipeline_prints_only_its_own_lines(segmentation_run):
    _, completed = segmentation_run
    text = output(completed)
    assert noise_in(text) == [], text[-5000:]
    assert "=== beam_pipeline summary ===" in completed.stdout
    assert re.search(r"INFO beam_pipeline\.pipeline: Reading .*manifest\.csv", completed.stderr)
    assert re.search(r"INFO beam_pipeline\.progress: validating +252/252 pairs", completed.stderr)
    third_party = [line for line in completed.stderr.splitlines()
                   if line.strip() and not re.match(r"\S+ \S+ (INFO|WARNING|ERROR) beam_pipeline[.:]", line)]
    assert third_party == []


def test_pipeline_with_worker_processes_prints_only_its_own_lines(corpus_dir, tmp_path):
    """The shared run above runs in the launcher alone (a small corpus); SDK worker processes are quiet too."""
    completed = run_cli("--input", corpus_dir / "segmentation" / "manifest.csv", "--output", tmp_path / "out",
                        "--num_classes", 8, "--max_examples", 30, *ENGINES["processes2"])
    assert noise_in(output(completed)) == [], output(completed)[-5000:]
    third_party = [line for line in completed.stderr.splitlines()
                   if line.strip() and not re.match(r"\S+ \S+ (INFO|WARNING|ERROR) beam_pipeline[.:]", line)]
    assert third_party == []


def test_pipeline_verbose_shows_third_party_lines_from_launcher_and_workers(corpus_dir, tmp_path):
    completed = run_cli("--input", corpus_dir / "segmentation" / "manifest.csv", "--output", tmp_path / "out",
                        "--num_classes", 8, "--max_examples", 30, "-v", *ENGINES["processes2"])
    found = noise_in(output(completed))
    # TensorFlow's C++ lines (launcher and workers; which ones depends on the CPU: oneDNN's notice only where it is
    # on), the grpcio notice (every process), Beam's worker records
    for name in ("absl preamble", "C++ INFO/WARNING line", "FutureWarning", "grpcio PQC notice", "Beam worker record",
                 "Beam worker chatter"):
        assert name in found, (name, found)
    assert "=== beam_pipeline summary ===" in completed.stdout


def test_a_misspelt_option_is_still_reported(tmp_path):
    completed = run_cli("--input", tmp_path / "missing.csv", "--output", tmp_path / "out", "--num_classes", 8,
                        "--max_exampels", 5, check=False)
    assert completed.returncode == 2
    # Refused before the input is looked at (options.check_known_options), where Beam alone would only warn.
    assert "error: unknown option(s) --max_exampels (did you mean --max_examples?)" in completed.stderr
    assert noise_in(output(completed)) == []


def test_pipeline_help_lists_log_level():
    completed = run_cli("--help")
    assert "--log_level {debug,info,warning,error}" in completed.stdout
    assert "-v, --verbose" in completed.stdout
    assert "--progress_every" in completed.stdout
    assert noise_in(output(completed)) == []


# --------------------------------------------------------------------------
# The report and the trainer
# --------------------------------------------------------------------------
def run_module(module, *args):
    completed = subprocess.run([sys.executable, "-m", module, *map(str, args)], cwd=ROOT, capture_output=True,
                               text=True, timeout=900)
    assert completed.returncode == 0, f"{completed.stdout[-3000:]}\n{completed.stderr[-5000:]}"
    return completed


def test_report_quiet_and_verbose(segmentation_run, tmp_path):
    out, _ = segmentation_run
    quiet = run_module("beam_pipeline.report", out, "--report_path", tmp_path / "quiet.html", "--no_statistics")
    assert noise_in(output(quiet)) == [], output(quiet)[-3000:]
    assert quiet.stdout.startswith(f"wrote {tmp_path / 'quiet.html'}")
    verbose = run_module("beam_pipeline.report", out, "--report_path", tmp_path / "verbose.html", "--no_statistics",
                         "--log_level", "debug")
    assert "grpcio PQC notice" in noise_in(output(verbose))


TINY_TRAINING = ("--epochs", 1, "--steps_per_epoch", 2, "--validation_steps", 1, "--global_batch_size", 2,
                 "--crop", "64,64", "--depth", 2, "--width", 8, "--shuffle_buffer", 4, "--no_verify_shards")


def test_trainer_quiet_and_verbose(segmentation_run, tmp_path):
    out, _ = segmentation_run
    quiet = run_module("trainer", "--data", out, "--job_dir", tmp_path / "quiet", *TINY_TRAINING)
    assert noise_in(output(quiet)) == [], output(quiet)[-5000:]
    assert re.search(r"INFO trainer\.training\.train: strategy: ", quiet.stderr)
    assert quiet.stdout.strip().splitlines()[-1].startswith("trained 1 epoch(s)")
    third_party = [line for line in quiet.stderr.splitlines()
                   if line.strip() and not re.match(r"\S+ \S+ (INFO|WARNING|ERROR) trainer[.:]", line)]
    assert third_party == []
    verbose = run_module("trainer", "--data", out, "--job_dir", tmp_path / "verbose", *TINY_TRAINING, "-v")
    found = noise_in(output(verbose))
    for name in ("absl preamble", "C++ INFO/WARNING line", "grpcio PQC notice", "absl/tensorflow INFO"):
        assert name in found, (name, found)


def test_evaluate_quiet_and_verbose(segmentation_run, tmp_path_factory):
    out, _ = segmentation_run
    result, _, _ = segmentation_job(out, tmp_path_factory)
    args = ("--model", result["export"], "--data", out, "--max_examples", 1, "--progress_seconds", 0)
    quiet = run_module("trainer.evaluate", *args)
    assert noise_in(output(quiet)) == [], output(quiet)[-5000:]
    assert quiet.stdout.strip().splitlines()[-1].startswith("evaluated 1 images of test in ")
    assert re.search(r"INFO trainer\.evaluate: evaluated 1/1 images of test", quiet.stderr)
    third_party = [line for line in quiet.stderr.splitlines()
                   if line.strip() and not re.match(r"\S+ \S+ (INFO|WARNING|ERROR) trainer[.:]", line)]
    assert third_party == []
    verbose = run_module("trainer.evaluate", *args, "-v")
    found = noise_in(output(verbose))
    for name in ("absl preamble", "C++ INFO/WARNING line", "grpcio PQC notice"):
        assert name in found, (name, found)


def _serve_briefly(export, *args):
    """``python -m trainer.serve`` until it answers one status request, then SIGTERM: its whole output."""
    import signal
    import urllib.request
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "trainer.serve", "--model", export, "--port", str(port),
                               *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              start_new_session=True)
    try:
        wait_for_port(port, server, timeout=180)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models/model", timeout=60) as response:
            assert response.status == 200
        server.send_signal(signal.SIGTERM)
        stdout, stderr = server.communicate(timeout=60)
    finally:
        stop_process_group(server)
    assert server.returncode == 0, stderr[-3000:]
    return stdout + stderr


def test_serve_verbose(segmentation_run, tmp_path_factory):
    """Quiet, trainer.serve prints only its own lines: test_trainer_serving_limits.py's last test reads the whole
    log of a server that met every hostile case. With -v the third-party lines come back."""
    out, _ = segmentation_run
    result, _, _ = segmentation_job(out, tmp_path_factory)
    found = noise_in(_serve_briefly(result["export"], "-v"))
    for name in ("absl preamble", "C++ INFO/WARNING line", "grpcio PQC notice"):
        assert name in found, (name, found)


@pytest.mark.parametrize("module", ["trainer", "trainer.evaluate", "trainer.serve"])
def test_trainer_help_lists_log_level(module):
    completed = subprocess.run([sys.executable, "-m", module, "--help"], cwd=ROOT, capture_output=True,
                               text=True, timeout=120)
    assert "--log_level {debug,info,warning,error}" in completed.stdout
    assert "-v, --verbose" in completed.stdout


# --------------------------------------------------------------------------
# The parts, on Beam's own log forwarding
# --------------------------------------------------------------------------
def forwarded(entries, project_level=logging.INFO):
    """Log entries sent by a worker, through Beam's BeamFnLoggingServicer and console.WorkerRecords."""
    from apache_beam.portability.api import beam_fn_api_pb2
    from apache_beam.runners.portability.local_job_service import BeamFnLoggingServicer

    from beam_pipeline import console
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record)

    forwarder = logging.getLogger(console.WORKER_LOG_FORWARDER)
    keep, only = Keep(), console.WorkerRecords(project_level)
    forwarder.addHandler(keep)
    forwarder.addFilter(only)
    saved = forwarder.level, forwarder.propagate
    forwarder.setLevel(logging.DEBUG)
    forwarder.propagate = False
    try:
        BeamFnLoggingServicer().Logging([beam_fn_api_pb2.LogEntry.List(log_entries=entries)])
    finally:
        forwarder.removeHandler(keep)
        forwarder.removeFilter(only)
        forwarder.setLevel(saved[0])
        forwarder.propagate = saved[1]
    return records


def entry(severity, message, location, trace=""):
    from apache_beam.portability.api import beam_fn_api_pb2
    return beam_fn_api_pb2.LogEntry(severity=getattr(beam_fn_api_pb2.LogEntry.Severity.Enum, severity),
                                    message=message, log_location=location, trace=trace)


def test_worker_records_keep_the_projects_lines_and_third_party_errors():
    import beam_pipeline
    package = beam_pipeline.__path__[0]
    beam_file = logging.__file__.replace("logging/__init__.py", "site-packages/apache_beam/runners/worker/x.py")
    sdk_worker = beam_file.replace("x.py", "sdk_worker.py:320")
    bundle_processor = beam_file.replace("x.py", "bundle_processor.py:242")
    records = forwarded([
        entry("WARN", "No semi_persistent_directory found", f"{beam_file}:380"),
        entry("INFO", "Python sdk harness starting.", f"{beam_file}:12"),
        entry("WARN", "3 masks use \"class 9\"\nsecond line", f"{package}/core/images.py:40"),
        entry("INFO", "checked 500 pairs", f"{package}/stages/validate.py:58"),
        entry("ERROR", "Error processing instruction", f"{beam_file}:99", trace="Traceback ...\nValueError: x"),
        entry("DEBUG", "details", f"{package}/stages/validate.py:60"),
        # the SDK harness reporting a failed bundle: run() raises the same error, reported once by the launcher
        entry("ERROR", "Error processing instruction bundle_7. Original traceback is\nTraceback ...\n"
              f"  File \"{package}/stages/write.py\", line 121", sdk_worker, trace="Traceback ...\nOSError: x"),
        entry("ERROR", "OSError: [Errno 28] No space left on device", bundle_processor,
              trace=f"Traceback ...\n  File \"{package}/stages/write.py\"\nOSError: [Errno 28]"),
    ])
    shown = [(r.levelname, r.name, r.getMessage()) for r in records]
    assert shown[:2] == [("WARNING", "beam_pipeline.core.images", "3 masks use \"class 9\"\nsecond line"),
                         ("INFO", "beam_pipeline.stages.validate", "checked 500 pairs")]
    assert len(shown) == 3 and shown[2][0] == "ERROR" and "Worker: " in shown[2][2]
    warnings_only = forwarded([entry("INFO", "checked 500 pairs", f"{package}/stages/validate.py:58")], logging.WARNING)
    assert warnings_only == []


@pytest.mark.parametrize("argv, level", [([], "info"), (["-v"], "debug"), (["--verbose"], "debug"),
                                         (["--log_level=warning"], "warning"), (["--log_level", "ERROR"], "error"),
                                         (["--input", "x", "--log_level", "debug", "--runner=DirectRunner"], "debug"),
                                         (["--log_level=loud"], "info")])
def test_level_from_the_command_line(argv, level):
    from beam_pipeline import console
    assert console.level_from_argv(argv) == level


def test_worker_log_options_follow_log_level_unless_given():
    from apache_beam.options.pipeline_options import PipelineOptions, WorkerOptions

    from beam_pipeline.launcher import runners
    quiet = PipelineOptions([])
    runners.apply_worker_log_options([], quiet)
    assert quiet.view_as(WorkerOptions).default_sdk_harness_log_level == "ERROR"
    assert quiet.view_as(WorkerOptions).sdk_harness_log_level_overrides == {"beam_pipeline": "INFO"}
    argv = ["-v", "--default_sdk_harness_log_level=WARNING"]
    mine = PipelineOptions(argv)
    runners.apply_worker_log_options(argv, mine)
    assert mine.view_as(WorkerOptions).default_sdk_harness_log_level == "WARNING"
    assert mine.view_as(WorkerOptions).sdk_harness_log_level_overrides == {"beam_pipeline": "DEBUG"}


@pytest.mark.parametrize("line, dropped", [
    (b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n", True),
    (b"I0000 00:00:1796083960.122796    4138 port.cc:153] oneDNN custom operations are on.\n", True),
    (b"W1114 09:32:22.280168   13509 tpu_hal.cc:448] something\n", True),
    (b"2024-01-01 12:00:00.123456: I tensorflow/core/platform/cpu_feature_guard.cc:182] This TensorFlow binary\n",
     True),
    (b"E0000 00:00:1796083970.161894    4138 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error\n",
     True),
    (b"E0000 00:00:1796083970.161894    4138 op_kernel.cc:1840] OP_REQUIRES failed: RESOURCE_EXHAUSTED\n", False),
    (b"Traceback (most recent call last):\n", False),
    (b"terminate called after throwing an instance of 'std::bad_alloc'\n", False),
])
@pytest.mark.parametrize("package", ["beam_pipeline", "trainer"])
def test_native_noise_is_only_known_start_up_lines(package, line, dropped):
    import importlib
    console = importlib.import_module(f"{package}.console")
    assert bool(console.NATIVE_NOISE.match(line)) is dropped
