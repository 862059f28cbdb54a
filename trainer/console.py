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
beam_pipeline/console.py does the same for its processes; the native filter
is the top-level package ``native_stderr``, a leaf with no dependencies, so
the two packages share it and still import nothing of each other (they are
coupled through artifacts only).
Only the standard library is imported here, so that :func:`configure` runs
before TensorFlow is imported.
"""

import logging
import os
import sys
import warnings
from typing import Optional

from native_stderr import NATIVE_NOISE, NativeStderrFilter

PACKAGE = "trainer"
DEBUG, INFO, WARNING, ERROR = "debug", "info", "warning", "error"
LEVELS = (DEBUG, INFO, WARNING, ERROR)
DEFAULT_LEVEL = INFO

# Set in the environment by the quiet levels unless the user set them.
QUIET_ENVIRONMENT = {
    "TF_CPP_MIN_LOG_LEVEL": "2",       # TensorFlow's C++ log: errors only, once its libraries are loaded
    "GRPC_VERBOSITY": "ERROR",         # gRPC's C core (multi-worker and TPU strategies talk gRPC)
}

_LOG_LEVEL_HELP = ("How much to print. info (default): the command's own lines (and Keras's line per epoch when "
                   "training), warnings, errors and the summary; TensorFlow's, absl's and gRPC's start-up notices "
                   "and deprecation warnings are kept out. debug: everything, third-party lines included. warning: "
                   "warnings and errors only. error: errors only.")


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
