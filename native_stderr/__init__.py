"""Native code's lines on file descriptor 2, which no log level reaches, filtered.

A leaf package shared by both packages' consoles (beam_pipeline/console.py, trainer/console.py), which
are otherwise coupled through artifacts only: it imports nothing but the standard library, so it runs
before Beam or TensorFlow is imported.
"""

import atexit
import faulthandler
import io
import os
import re
import sys
import threading
from typing import List, Optional

# Lines that native code writes straight to file descriptor 2 and that say nothing about the run.
NATIVE_NOISE = re.compile(rb"""
    WARNING:\ All\ log\ messages\ before\ absl::InitializeLog\(\)\ is\ called       # absl's preamble
  | [IW]\d{4}\ \d\d:\d\d:[\d.]+\s+\d+\ \S+:\d+\]                                     # C++ INFO/WARNING (absl, glog)
  | \d{4}-\d\d-\d\d\ [\d:.]+:\ [IW]\ \S+:\d+\]                                      # C++ INFO/WARNING (TF's own format)
  | E\d{4}\ \d\d:\d\d:[\d.]+\s+\d+\ \S+:\d+\]\ .*\b(cuInit|cuDNN|cuFFT|cuBLAS)\b    # CUDA libraries, no GPU here
  | \d{4}-\d\d-\d\d\ [\d:.]+:\ E\ \S+:\d+\]\ .*\bcuInit\b                          # the same in TF 2.20's format
  | To\ enable\ the\ following\ instructions:.*rebuild\ TensorFlow                  # 2nd line of a CPU notice
""", re.VERBOSE)


class NativeStderrFilter:
    """Pass file descriptor 2 through a pipe that drops the lines matching ``noise``.

    Native code (TensorFlow's C++ log, absl) and child processes (the
    pipeline's SDK workers inherit descriptor 2) write to the pipe; a thread
    forwards every other line to ``sys.stderr``. Python's own ``sys.stderr`` in this process
    writes straight to the terminal (or log file), so tracebacks and the
    progress bar never wait on the thread.
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
        """Give descriptor 2 back; the thread ends when the last writer (a worker still exiting) closes it."""
        if self._saved is None:
            return
        os.dup2(self._saved, 2)
        self._saved = None
        if self._thread is not None:
            self._thread.join(timeout)
