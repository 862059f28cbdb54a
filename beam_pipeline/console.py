"""What the pipeline's commands print: the project's own lines by default, everything with -v.

Quiet, the default (``--log_level info``), shows progress, warnings about the
data, errors and the summary. Third-party start-up noise is kept out of every
process, the DirectRunner's SDK worker processes included:

- environment variables the workers inherit: TF_CPP_MIN_LOG_LEVEL (TensorFlow's
  C++ log), GRPC_VERBOSITY (gRPC's C core) and PYTHONWARNINGS (deprecation
  notices printed at import, such as google-api-core's grpcio one);
- in this process, warnings filters and the level of third-party loggers;
- the workers' log records, which Beam forwards to this process as one
  ``Worker: <LogEntry>`` line each (:class:`WorkerRecords`): third-party ones
  below ERROR are dropped, the project's are shown as its own lines;
- lines written to file descriptor 2 by native code, which no log level
  reaches: TensorFlow's C++ start-up notices are written while its shared
  libraries load, before TF_CPP_MIN_LOG_LEVEL applies (:class:`NativeStderrFilter`);
- for remote workers, Beam's SDK harness log level, set through the pipeline
  options that travel with the job (:func:`worker_log_options`).

``--log_level debug`` (``-v``) does none of this: third-party libraries print
what they print by default, and the project's debug lines are added.
What both packages' consoles share (the levels, the quiet process, the line
format) is the top-level leaf package ``command_console``.
Only the standard library is imported here, so that :func:`configure` runs
before Beam or TensorFlow is imported.
"""

import argparse
import logging
import os
import re
import sys
from typing import Optional, Sequence

import command_console
from command_console import DEBUG, DEFAULT_LEVEL, ERROR, INFO, LEVELS, WARNING  # noqa: F401 - the commands' levels
from native_stderr import NATIVE_NOISE, NativeStderrFilter  # noqa: F401 - NATIVE_NOISE: the lines it drops

PACKAGE = "beam_pipeline"

# What the quiet levels set in the environment, unless the user set it: inherited by every worker process.
QUIET_ENVIRONMENT = {
    **command_console.QUIET_ENVIRONMENT,     # TensorFlow's C++ log (errors only), gRPC's C core
    "PYTHONWARNINGS": "ignore",              # warnings printed by third-party imports in the workers
}

# Third-party loggers whose warnings are about the user's own command line (Beam's "Discarding unparseable
# args: ['--max_exampels', '5']" for a misspelt option): shown from WARNING up at every level.
USER_FACING_LOGGERS = ("apache_beam.options.pipeline_options",)
# Decoders that log an error about a broken input file they are handed; each such file becomes a rejection
# with the reason, so their lines repeat it (Pillow's TIFF plugin: "More samples per pixel than can be decoded").
DECODER_LOGGERS = ("PIL",)
_DECODER_LOCATION = re.compile(r'log_location: "[^"]*/PIL/')
# Beam logs each record a worker process sends as one line of this logger (local_job_service.BeamFnLoggingServicer).
WORKER_LOG_FORWARDER = "apache_beam.runners.portability.local_job_service"
# Beam's runner loggers that log an error which run() then raises: it is reported once, as the exception.
RUNNER_LOGGERS = ("apache_beam.runners.common", "apache_beam.runners.worker.sdk_worker",
                  "apache_beam.runners.worker.bundle_processor",
                  "apache_beam.runners.portability.fn_api_runner.fn_runner")

_LOG_LEVEL_HELP = ("How much to print. info (default): the project's progress, warnings about the data, errors "
                   "and the summary; third-party start-up notices (TensorFlow, gRPC, absl, Beam's workers, "
                   "deprecation warnings) are kept out of this process and of every worker. debug: everything, "
                   "third-party lines included. warning: no progress. error: errors only.")


def add_log_level_arguments(parser) -> None:
    """--log_level and -v, on an argparse parser or a PipelineOptions argument group."""
    command_console.add_log_level_arguments(parser, _LOG_LEVEL_HELP)


def level_from_argv(argv: Sequence[str]) -> str:
    """The --log_level of a command line, read before Beam parses it (errors are left to Beam's parser)."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    add_log_level_arguments(parser)
    try:
        known, _ = parser.parse_known_args(list(argv))
    except SystemExit:              # a bad value: the real parser reports it
        return DEFAULT_LEVEL
    return known.log_level


def worker_log_options(level: str) -> dict:
    """Beam's SDK harness log options for ``level``: what the workers themselves log and send.

    These are pipeline options, so they reach remote workers (Dataflow, Flink). The user's
    own --default_sdk_harness_log_level and --sdk_harness_log_level_overrides take precedence.
    """
    if level == DEBUG:
        return {"default_sdk_harness_log_level": "INFO", "sdk_harness_log_level_overrides": {PACKAGE: "DEBUG"}}
    return {"default_sdk_harness_log_level": "ERROR", "sdk_harness_log_level_overrides": {PACKAGE: level.upper()}}


class _Settings:
    level: Optional[str] = None         # None: configure() was not called (the pipeline used as a library)
    interactive = False                 # stderr was a terminal when configure() ran
    native_filter: Optional["NativeStderrFilter"] = None


SETTINGS = _Settings()


def configure(level: str = DEFAULT_LEVEL) -> None:
    """Set up this process (and the environment its workers inherit) for ``level``; call it first."""
    SETTINGS.level = level
    SETTINGS.interactive = _is_terminal(sys.stderr)
    if level != DEBUG:
        SETTINGS.native_filter = command_console.quiet_process(PACKAGE, QUIET_ENVIRONMENT, SETTINGS.native_filter)
        if not isinstance(sys.stderr, HarnessTracebacksDropped):
            sys.stderr = HarnessTracebacksDropped(sys.stderr)
    _configure_logging(level)


def shutdown() -> None:
    """Forward what the native filter still holds; before os._exit, which skips atexit."""
    if SETTINGS.native_filter is not None:
        SETTINGS.native_filter.stop()
        SETTINGS.native_filter = None


def progress_display() -> str:
    """How progress is shown: ``bar`` (a live bar on a terminal), ``lines`` (plain lines), or ``off``."""
    if SETTINGS.level in (WARNING, ERROR):
        return "off"
    if SETTINGS.level == INFO and SETTINGS.interactive:
        return "bar"
    return "lines"


_is_terminal = command_console.is_terminal


# --------------------------------------------------------------------------
# Python logging
# --------------------------------------------------------------------------
class CurrentStderrHandler(logging.StreamHandler):
    """Writes to whatever sys.stderr is at the time, so a live progress bar can print lines above itself."""

    def __init__(self):
        super().__init__(sys.stderr)

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value):
        pass


class ConsoleFormatter(command_console.ConsoleFormatter):
    """command_console's line format for the pipeline's lines (its ``beam_pipeline.*`` loggers)."""

    def __init__(self, compact: bool):
        super().__init__(compact, PACKAGE)


class OneReportPerError(logging.Filter):
    """Drop the runner's own error logs: the same error is raised from run() and reported once."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.name.startswith("apache_beam") and record.levelno >= logging.ERROR)


class HarnessTracebacksDropped:
    """``sys.stderr`` without the traceback of a failed bundle that Beam's SDK harness prints (``sdk_worker._execute``;
    it logs it too, which OneReportPerError drops): run() raises the same error, which the launcher reports once.
    Only in-process workers (multi_threading, in_memory) print into this stderr. All else goes through."""

    _HARNESS = os.path.join("apache_beam", "runners", "worker", "sdk_worker.py")

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        caller = sys._getframe().f_back             # print() is a builtin: the frame that called it (or None)
        if caller is not None and caller.f_code.co_name == "_execute" and caller.f_code.co_filename.endswith(
                self._HARNESS):
            return len(text)
        return self._stream.write(text)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def _configure_logging(level: str) -> None:
    handler = CurrentStderrHandler()
    handler.setFormatter(ConsoleFormatter(compact=SETTINGS.interactive))
    command_console.log_to(handler, PACKAGE, level)
    for name in USER_FACING_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    for name in DECODER_LOGGERS:
        logging.getLogger(name).setLevel(logging.DEBUG if level == DEBUG else logging.CRITICAL)
    for name in RUNNER_LOGGERS:
        logging.getLogger(name).addFilter(OneReportPerError())
    forwarder = logging.getLogger(WORKER_LOG_FORWARDER)
    if level != DEBUG:
        forwarder.setLevel(logging.DEBUG)           # WorkerRecords decides, record by record
        forwarder.addFilter(WorkerRecords(getattr(logging, level.upper())))


# --------------------------------------------------------------------------
# Log records from the worker processes
# --------------------------------------------------------------------------
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


class WorkerRecords(logging.Filter):
    """Beam's ``Worker: <LogEntry>`` lines: the project's become its own lines, the rest only from ERROR up.

    The entry's log_location (the source file) tells the project's records from
    third-party ones: the DirectRunner's workers run this same installation. A
    project record is shown under its module's logger name with the worker's
    message, at or above ``project_level``.
    """

    def __init__(self, project_level: int):
        super().__init__()
        self._project_level = project_level

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.args[0] if isinstance(record.args, tuple) and len(record.args) == 1 else None
        if isinstance(text, str) and _DECODER_LOCATION.search(text):
            return False                            # a decoder's complaint about an input: its rejection says it
        if record.msg != "Worker: %s" or not isinstance(text, str):
            return record.levelno >= logging.ERROR
        # parsed when it may be the project's, or may be shown: a third-party record below ERROR is not
        entry = _parse_log_entry(text) if PACKAGE in text or record.levelno >= logging.ERROR else None
        module = entry and project_module(entry.log_location.rsplit(":", 1)[0])
        if not module:
            return record.levelno >= logging.ERROR and not _bundle_failure(entry)
        if record.levelno < self._project_level:
            return False
        record.name, record.msg, record.args = module, entry.message, ()
        if entry.trace:
            record.exc_text = entry.trace.rstrip()
        return True


def _bundle_failure(entry) -> bool:
    """Whether a worker's entry was logged by one of RUNNER_LOGGERS' modules (the SDK harness reporting a failed
    bundle, with its traceback): the worker's copy of what OneReportPerError drops in the launcher.

    run() raises the same error: the launcher reports it once, as one line when it is a failure the user can
    act on (a full disk, a file that cannot be written), or as the exception otherwise. ``-v`` shows these
    entries too (the filter is not installed at debug level).
    """
    if entry is None:
        return False
    location = entry.log_location.rsplit(":", 1)[0].replace(os.sep, "/")
    return location.endswith(_RUNNER_SOURCES)


_RUNNER_SOURCES = tuple(name.replace(".", "/") + ".py" for name in RUNNER_LOGGERS)   # the loggers' source files


def project_module(path: str) -> Optional[str]:
    """``beam_pipeline.stages.validate`` for this installation's beam_pipeline/stages/validate.py; None for
    other files."""
    if not (path.startswith(_PACKAGE_DIR + os.sep) and path.endswith(".py")):
        return None
    relative = os.path.relpath(path[:-3], os.path.dirname(_PACKAGE_DIR))
    return relative.replace(os.sep, ".")


def _parse_log_entry(text: str):
    from google.protobuf import text_format
    from apache_beam.portability.api import beam_fn_api_pb2
    try:
        return text_format.Parse(text, beam_fn_api_pb2.LogEntry())
    except text_format.ParseError:
        return None
