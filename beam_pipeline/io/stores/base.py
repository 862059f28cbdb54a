"""What every output store implements: the output lock (:class:`OutputLock`) and the backend's operations
on one output folder (:class:`Store`); see the package docstring for how each backend meets them."""

import abc
import json
from typing import Optional

ACQUIRE_ATTEMPTS = 5               # tries to create or take over a lock record that keeps changing


class OutputLock(abc.ABC):
    """One run's hold on an output folder: acquire before writing anything, check before the commit."""

    record: Optional[dict] = None

    @abc.abstractmethod
    def acquire(self, run_id: str) -> Optional[str]:
        """Take the lock for ``run_id``; raises OutputLocked naming a live holder.

        Returns the line that says a stale lock was taken over, or None.
        """

    @abc.abstractmethod
    def check(self) -> None:
        """Raise LockLost when another run has taken the lock over (fencing, just before the commit)."""

    @abc.abstractmethod
    def release(self) -> None:
        """Give the lock up (a killed run cannot; the next run takes its stale lock over)."""


class Store(abc.ABC):
    """The backend-specific operations for one output folder."""

    def __init__(self, output: str):
        self.output = output

    @abc.abstractmethod
    def lock(self) -> OutputLock:
        """A new, not yet acquired, lock on the output folder."""

    @abc.abstractmethod
    def publish_file(self, path: str, data: bytes) -> None:
        """Write a small file so that readers see either the old content or the whole new one."""

    def abort_unfinished_uploads(self) -> int:
        """Remove what killed writers left invisible under the output; returns how many. Nothing by default."""
        return 0


def parse_record(data: bytes) -> dict:
    try:
        return json.loads(data or b"{}")
    except ValueError:
        return {}
