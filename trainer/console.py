"""What the trainer prints: its own lines by default, everything with -v.

Quiet, the default (``--log_level info``), shows the trainer's choices
(strategy, precision, input files), Keras's line per epoch, warnings, errors
and the final summary. Third-party noise is kept out:

- TensorFlow's C++ log above errors (TF_CPP_MIN_LOG_LEVEL) and gRPC's C core
  (GRPC_VERBOSITY), set in the environment before TensorFlow is imported;
- Python warnings and the third-party loggers (tensorflow, absl, keras) below ERROR;
- lines written to file descriptor 2 by native code, which no log level
  reaches: TensorFlow's C++ start-up notices are written while its shared
  libraries load, before TF_CPP_MIN_LOG_LEVEL applies (``native_stderr``).

``--log_level debug`` (``-v``) does none of this. What the two packages' consoles
share (the levels, the quiet process, the line format) is the top-level leaf
package ``command_console``, which beam_pipeline/console.py uses too: the two
packages still import nothing of each other (they are coupled through artifacts only).
Only the standard library is imported here, so that :func:`configure` runs
before TensorFlow is imported.
"""

import logging
import sys
from typing import Optional

import command_console
from command_console import DEBUG, DEFAULT_LEVEL, ERROR, INFO, LEVELS, WARNING  # noqa: F401 - the trainer's levels
from native_stderr import NATIVE_NOISE, NativeStderrFilter  # noqa: F401 - NATIVE_NOISE: the lines it drops

PACKAGE = "trainer"
QUIET_ENVIRONMENT = command_console.QUIET_ENVIRONMENT     # set in the environment by the quiet levels
THIRD_PARTY_LOGGERS = ("tensorflow", "absl", "keras")      # they set a level of their own; quiet keeps the root's

_LOG_LEVEL_HELP = ("How much to print. info (default): the command's own lines (and Keras's line per epoch when "
                   "training), warnings, errors and the summary; TensorFlow's, absl's and gRPC's start-up notices "
                   "and deprecation warnings are kept out. debug: everything, third-party lines included. warning: "
                   "warnings and errors only. error: errors only.")


def add_log_level_arguments(parser) -> None:
    """--log_level and -v on the trainer's argparse parser."""
    command_console.add_log_level_arguments(parser, _LOG_LEVEL_HELP)


_NATIVE_FILTER: Optional[NativeStderrFilter] = None


def configure(level: str = DEFAULT_LEVEL) -> None:
    """Set up this process for ``level``; call it before TensorFlow is imported."""
    global _NATIVE_FILTER
    compact = command_console.is_terminal(sys.stderr)    # before the native filter takes descriptor 2
    if level != DEBUG:
        _NATIVE_FILTER = command_console.quiet_process(PACKAGE, QUIET_ENVIRONMENT, _NATIVE_FILTER)
    handler = logging.StreamHandler(sys.stderr)     # the filter's sys.stderr, when there is one
    handler.setFormatter(command_console.ConsoleFormatter(compact, PACKAGE))
    command_console.log_to(handler, PACKAGE, level)
    for name in THIRD_PARTY_LOGGERS:
        logging.getLogger(name).setLevel(logging.NOTSET if level == DEBUG else logging.ERROR)
