"""Outputs made once per test session and shared by all of its test processes.

A session fixture runs once per process, and ``make test`` runs two (pytest-xdist): each would make its own
copy of the sample corpus, its runs and the trained models. ``once`` makes an output in the first process
that asks for it, under a file lock in the session's base folder, and every other process waits for it and
reads what was recorded. What is shared must be read only: a test that changes an output works on a copy in
its own ``tmp_path``.

The session's base folder is removed when the session passes (pytest's ``tmp_path_retention_policy =
failed``): under xdist each worker's base folder is a child of it, and the controller removes it.
"""

import fcntl
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Callable


def _root(tmp_path_factory) -> Path:
    base = Path(tmp_path_factory.getbasetemp())
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "shared"
    root.mkdir(exist_ok=True)
    return root


def root_of(tmp_path_factory, name: str) -> Path:
    """The folder ``once(tmp_path_factory, name, ...)`` gave ``make``."""
    return _root(tmp_path_factory) / name


def once(tmp_path_factory, name: str, make: Callable[[Path], object]):
    """``make(folder)`` once per session, in a new folder; its JSON-able value, recorded, in every process.

    A process whose ``make`` failed records nothing: the next one to ask tries again, in a clean folder."""
    root = _root(tmp_path_factory)
    folder, record = root / name, root / f"{name}.json"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if record.exists():
            return json.loads(record.read_text())
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        value = make(folder)
        record.write_text(json.dumps(value))
        return value


def completed_to_json(completed: subprocess.CompletedProcess) -> dict:
    return {"args": [str(arg) for arg in completed.args], "returncode": completed.returncode,
            "stdout": completed.stdout, "stderr": completed.stderr}


def completed_from_json(value: dict) -> subprocess.CompletedProcess:
    return subprocess.CompletedProcess(value["args"], value["returncode"], value["stdout"], value["stderr"])
