"""Write failures as one line that names the file and the cause. Pure.

A failed write in an SDK worker reaches the launcher as the text of the worker's traceback, wrapped
by the runner. The project's own writers raise :func:`write_failed` errors, whose text holds
``cannot write '<path>': <cause>``; for writes by Beam's text sink or by tf.Transform,
:func:`describe_failure` finds the operating system's cause in the text and names the file from
the text or from the failing step.
"""

import errno
import os
import re
from typing import Dict, Optional

_OURS = re.compile(r"cannot write '([^']+)': ([^\n\[]+?)(?:\s*\[while running|\s*$|\n)", re.MULTILINE)
_OURS_READ = re.compile(r"cannot read the published '([^']+)': ([^\n\[]+?)(?:\s*\[while running|\s*$|\n)",
                        re.MULTILINE)
_INPUT = re.compile(r"cannot read the annotation file '([^']+)': ([^\n\[]+?)(?:\s*\[while running|\s*$|\n)",
                    re.MULTILINE)
_ERRNO = re.compile(r"\[Errno (\d+)\] ([^:\n\[]+?)(?::\s*'([^']+)')?(?:\s*\[while running|\s*$|\n|')", re.MULTILINE)
_STEP = re.compile(r"while running '([^']+)'")
# Causes that are about where the output goes, not about the program (errno codes).
WRITE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EFBIG, errno.EIO,
                errno.ENOTDIR, errno.EISDIR)
_CAUSE_TEXTS = tuple(os.strerror(code) for code in WRITE_ERRNOS)


class RunFailed(RuntimeError):
    """The run stopped on a failed write; nothing was published (the message names file and cause)."""


def write_failed(path: str, error: OSError) -> OSError:
    """The error to raise when writing ``path`` failed with ``error``: its text names both."""
    cause = error.strerror or str(error)
    return OSError(error.errno, f"cannot write '{path}': {cause}")


def read_failed(path: str, error: Exception) -> OSError:
    """The error to raise when a file of the published version, checked at launch (launcher/rerun/parent.py), cannot
    be read during the run: its text names it, and :func:`describe_failure` makes it one line."""
    cause = getattr(error, "strerror", None) or (str(error).splitlines()[0] if str(error) else type(error).__name__)
    return OSError(f"cannot read the published '{path}': {cause}")


def describe_failure(text: str, step_files: Dict[str, str], written_under: str = "") -> Optional[str]:
    """``cannot write <file>: <cause>`` from a failed run's error text, or None when no write failed (an annotation
    file that breaks off while it is streamed, io/coco.py, is named the same way: it is found only then).

    ``step_files``: a step label (or a prefix of one) -> the file or folder that step writes, for
    errors whose text names no file (Beam's text sink and TensorFlow report only the cause).
    ``written_under``: the folder the run writes into; an error naming a file elsewhere (an input
    that cannot be read) is not a failed write.
    """
    ours = _OURS.search(text)
    if ours:
        return f"cannot write {ours.group(1)}: {ours.group(2).strip()}"
    broken = list(_INPUT.finditer(text))             # the last: the message (a traceback quotes the source first)
    if broken:
        return f"cannot read the annotation file {broken[-1].group(1)}: {broken[-1].group(2).strip()}"
    read = _OURS_READ.search(text)
    if read:
        return (f"the published version's {read.group(1)} could not be read during the run "
                f"({read.group(2).strip()}); run again: the check at launch finds what is damaged")
    for match in _ERRNO.finditer(text):
        if int(match.group(1)) not in WRITE_ERRNOS:
            continue
        named = match.group(3)
        path = named if named and named.startswith(written_under) else None if named else _step_file(text, step_files)
        if path:
            return f"cannot write {path}: {match.group(2).strip()}"
    for cause in _CAUSE_TEXTS:
        path = _step_file(text, step_files) if cause in text else None
        if path:
            return f"cannot write {path}: {cause}"
    return None


def _step_file(text: str, step_files: Dict[str, str]) -> Optional[str]:
    """The file the failing step writes; None when the failing step writes nothing of the output."""
    for step in _STEP.findall(text):
        for label, path in step_files.items():
            if step.startswith(label) or f"/{label}" in step:
                return path
    return None
