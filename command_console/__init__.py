"""What the project's commands print, shared by both packages' consoles (beam_pipeline/console.py,
trainer/console.py), which are otherwise coupled through artifacts only.

The levels and ``--log_level``/``-v``; a quiet process (the environment variables that quiet TensorFlow's
C++ log and gRPC's C core, Python warnings other than the package's own, and native code's lines on file
descriptor 2 filtered by :mod:`native_stderr`); the root logger; and the line format
(:class:`ConsoleFormatter`). A leaf package: it imports the standard library and ``native_stderr`` only, so
a command sets it up before Beam or TensorFlow is imported.
"""

import logging
import os
import warnings
from typing import Dict, Optional

from native_stderr import NATIVE_NOISE, NativeStderrFilter

DEBUG, INFO, WARNING, ERROR = "debug", "info", "warning", "error"
LEVELS = (DEBUG, INFO, WARNING, ERROR)
DEFAULT_LEVEL = INFO

# What the quiet levels set in the environment, unless the user set it (each console may add to it).
QUIET_ENVIRONMENT = {
    "TF_CPP_MIN_LOG_LEVEL": "2",       # TensorFlow's C++ log: errors only, once its libraries are loaded
    "GRPC_VERBOSITY": "ERROR",         # gRPC's C core (the multi-worker and TPU strategies and Beam talk gRPC)
}


def add_log_level_arguments(parser, help_text: str) -> None:
    """--log_level (explained by ``help_text``) and -v, on an argparse parser or argument group."""
    parser.add_argument("--log_level", default=DEFAULT_LEVEL, type=str.lower, choices=LEVELS, help=help_text)
    parser.add_argument("-v", "--verbose", dest="log_level", action="store_const", const=DEBUG,
                        help="The same as --log_level debug.")


def quiet_process(package: str, environment: Dict[str, str],
                  native_filter: Optional[NativeStderrFilter]) -> NativeStderrFilter:
    """Keep third-party noise out of this process: ``environment`` set where the user did not set it, Python
    warnings ignored but ``package``'s own, native lines filtered. Returns the native filter (``native_filter``
    when it runs already, else a new one, started)."""
    for name, value in environment.items():
        os.environ.setdefault(name, value)
    warnings.simplefilter("ignore")
    warnings.filterwarnings("default", module=rf"{package}(\.|$)")
    if native_filter is None:
        native_filter = NativeStderrFilter(NATIVE_NOISE)
        native_filter.start()
    return native_filter


def log_to(handler: logging.Handler, package: str, level: str) -> None:
    """Every log record through ``handler`` alone: ``package``'s from ``level`` up, the others from ERROR up
    (from INFO up at debug level)."""
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.INFO if level == DEBUG else logging.ERROR)
    logging.getLogger(package).setLevel(level.upper())


def is_terminal(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class ConsoleFormatter(logging.Formatter):
    """On a terminal, ``12:00:05 message`` for ``package``'s lines (``warning:``/``error:`` added when they are not
    info) and the level and logger name for third-party lines. In a log (not a terminal), every line in
    logging's classic form, ``2026-01-31 12:00:05,123 INFO logger: message``, which log tools parse."""

    def __init__(self, compact: bool, package: str):
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S" if compact else None)
        self._compact = compact
        self._package = package

    def formatMessage(self, record: logging.LogRecord) -> str:
        own = record.name == self._package or record.name.startswith(self._package + ".")
        if not (self._compact and own):
            return super().formatMessage(record)
        level = "" if record.levelno == logging.INFO else f" {record.levelname.lower()}:"
        return f"{record.asctime}{level} {record.message}"
