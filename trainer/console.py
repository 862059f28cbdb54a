"""What the trainer prints: its own lines by default, everything with -v.

Quiet, the default (``--log_level info``), shows the trainer's choices
(strategy, precision, input files), Keras's line per epoch, warnings, errors
and the final summary. Third-party noise is kept out:

- TensorFlow's C++ log above errors (TF_CPP_MIN_LOG_LEVEL) and gRPC's C core
  (GRPC_VERBOSITY), set in the environment before TensorFlow is imported;
- Python warnings and the third-party loggers (tensorflow, absl, keras) below ERROR;
- lines written to file descriptor 2 by native code, which no log level
  reaches: TensorFlow's C++ start-up notices are written while its shared
  libraries load, before TF_CPP_MIN_LOG_LEVEL applies (:class:`NativeStderrFilter`).

``--log_level debug`` (``-v``) does none of this. The pipeline's
beam_pipeline/console.py does the same for its processes; the two packages
share no code (they are coupled through artifacts only), so the native
filter exists in both.
Only the standard library is imported here, so that :func:`configure` runs
before TensorFlow is imported.
"""

import atexit
import faulthandler
import io
import logging
import os
import re
import sys
import threading
import warnings
from typing import List, Optional

PACKAGE = "trainer"
DEBUG, INFO, WARNING, ERROR = "debug", "info", "warning", "error"
LEVELS = (DEBUG, INFO, WARNING, ERROR)
DEFAULT_LEVEL = INFO

# Set in the environment by the quiet levels unless the user set them.
QUIET_ENVIRONMENT = {
    "TF_CPP_MIN_LOG_LEVEL": "2",       # TensorFlow's C++ log: errors only, once its libraries are loaded
    "GRPC_VERBOSITY": "ERROR",         # gRPC's C core (multi-worker and TPU strategies talk gRPC)
}

# Lines that native code writes straight to file descriptor 2 and that say nothing about the run.
NATIVE_NOISE = re.compile(rb"""
    WARNING:\ All\ log\ messages\ before\ absl::InitializeLog\(\)\ is\ called       # absl's preamble
  | [IW]\d{4}\ \d\d:\d\d:[\d.]+\s+\d+\ \S+:\d+\]                                     # C++ INFO/WARNING (absl, glog)
  | \d{4}-\d\d-\d\d\ [\d:.]+:\ [IW]\ \S+:\d+\]                                      # C++ INFO/WARNING (TF's own format)
  | E\d{4}\ \d\d:\d\d:[\d.]+\s+\d+\ \S+:\d+\]\ .*\b(cuInit|cuDNN|cuFFT|cuBLAS)\b    # CUDA libraries, no GPU here
  | To\ enable\ the\ following\ instructions:.*rebuild\ TensorFlow                  # 2nd line of a CPU notice
""", re.VERBOSE)

_LOG_LEVEL_HELP = ("How much to print. info (default): the trainer's own lines, Keras's line per epoch, warnings, "
                   "errors and the summary; TensorFlow's, absl's and gRPC's start-up notices and deprecation "
                   "warnings are kept out. debug: everything, third-party lines included. warning: warnings and "
                   "errors only. error: errors only.")


def add_log_level_arguments(parser) -> None:
    """--log_level and -v on the trainer's argparse parser."""
    parser.add_argument("--log_level", default=DEFAULT_LEVEL, type=str.lower, choices=LEVELS, help=_LOG_LEVEL_HELP)
    parser.add_argument("-v", "--verbose", dest="log_level", action="store_const", const=DEBUG,
                        help="The same as --log_level debug.")


_NATIVE_FILTER: Optional["NativeStderrFilter"] = None


def configure(level: str = DEFAULT_LEVEL) -> None:
    """Set up this process for ``level``; call it before TensorFlow is imported."""
    global _NATIVE_FILTER
    interactive = sys.stderr.isatty()
    if level != DEBUG:
        for name, value in QUIET_ENVIRONMENT.items():
            os.environ.setdefault(name, value)
        warnings.simplefilter("ignore")
        warnings.filterwarnings("default", module=rf"{PACKAGE}(\.|$)")
        if _NATIVE_FILTER is None:
            _NATIVE_FILTER = NativeStderrFilter(NATIVE_NOISE)
            _NATIVE_FILTER.start()
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)     # the filter's sys.stderr, when there is one
    handler.setFormatter(ConsoleFormatter(compact=interactive))
    root.addHandler(handler)
    root.setLevel(logging.INFO if level == DEBUG else logging.ERROR)
    logging.getLogger(PACKAGE).setLevel(level.upper())
    # TensorFlow and absl give their loggers a level of their own; quiet keeps them at the root's.
    for name in ("tensorflow", "absl", "keras"):
        logging.getLogger(name).setLevel(logging.NOTSET if level == DEBUG else logging.ERROR)


class ConsoleFormatter(logging.Formatter):
    """On a terminal, ``12:00:05 message`` for the trainer's lines (``warning:``/``error:`` added when they are not
    info) and the level and logger name for third-party lines. In a log (not a terminal), every line in
    logging's classic form, ``2026-01-31 12:00:05,123 INFO logger: message``, which log tools parse."""

    def __init__(self, compact: bool):
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S" if compact else None)
        self._compact = compact

    def formatMessage(self, record: logging.LogRecord) -> str:
        own = record.name == PACKAGE or record.name.startswith(PACKAGE + ".")
        if not (self._compact and own):
            return super().formatMessage(record)
        level = "" if record.levelno == logging.INFO else f" {record.levelname.lower()}:"
        return f"{record.asctime}{level} {record.message}"


class NativeStderrFilter:
    """Pass file descriptor 2 through a pipe that drops the lines matching ``noise``.

    Native code (TensorFlow's C++ log, absl) writes to the pipe; a thread
    forwards every other line to ``sys.stderr``, which in this process writes
    straight to the terminal (or log file), so Python's tracebacks never wait on the thread.
    """

    def __init__(self, noise: "re.Pattern[bytes]"):
        self._noise = noise
        self._saved: Optional[int] = None
        self._thread: Optional[threading.Thread] = None
        self.dropped: List[bytes] = []          # the lines kept out, for a look in a debugger

    def start(self) -> None:
        sys.stderr.flush()
        self._saved = os.dup(2)
        read, write = os.pipe()
        os.dup2(write, 2)
        os.close(write)
        sys.stderr = io.TextIOWrapper(io.FileIO(self._saved, "w", closefd=False), encoding=sys.stderr.encoding,
                                      errors="backslashreplace", line_buffering=True)
        faulthandler.enable(file=sys.stderr)    # a crash's traceback must not depend on the thread
        self._thread = threading.Thread(target=self._forward, args=(read,), name="NativeStderrFilter", daemon=True)
        self._thread.start()
        atexit.register(self.stop)

    def _forward(self, read: int) -> None:
        with os.fdopen(read, "rb") as pipe:
            for line in pipe:
                if self._noise.match(line):
                    if len(self.dropped) < 1000:
                        self.dropped.append(line)
                    continue
                sys.stderr.write(line.decode("utf-8", "replace"))
                sys.stderr.flush()

    def stop(self, timeout: float = 2.0) -> None:
        """Give descriptor 2 back and forward what is left."""
        if self._saved is None:
            return
        os.dup2(self._saved, 2)
        self._saved = None
        if self._thread is not None:
            self._thread.join(timeout)
