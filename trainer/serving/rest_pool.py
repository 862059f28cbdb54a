"""The worker threads of trainer/serving/rest_server.py: a fixed number of threads answer the requests in a queue.

A queued request can be dropped before a worker takes it (its client has gone); a request a worker has
taken runs to its end. The application's exceptions become HTTP 500 with a logged traceback (a bug in the
application, not a client's doing), and the threads go on.
"""

import logging
import queue
import threading
from typing import Callable, List

from trainer.serving.http_messages import Request, Response, error_response

_LOG = logging.getLogger("trainer.serve")
QUEUED, RUNNING, DROPPED = "queued", "running", "dropped"


class Task:
    """A request in the pool, and whose it is (``owner``: the server's connection)."""
    __slots__ = ("owner", "request", "state")

    def __init__(self, owner, request: Request):
        self.owner, self.request, self.state = owner, request, QUEUED


class WorkerPool:
    """``threads`` workers; each answer goes to ``on_answer(task, response)`` on the worker's thread."""

    def __init__(self, handle: Callable[[Request], Response], threads: int,
                 on_answer: Callable[[Task, Response], None]):
        self._handle = handle
        self._on_answer = on_answer
        self._queue: "queue.Queue" = queue.Queue()     # bounded by the server: it admits so many requests
        self._lock = threading.Lock()                  # a task is either run or dropped, never both
        self._threads: List[threading.Thread] = [
            threading.Thread(target=self._work, name=f"RequestWorker-{i}", daemon=True) for i in range(threads)]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def submit(self, owner, request: Request) -> Task:
        task = Task(owner, request)
        self._queue.put(task)
        return task

    def drop(self, task: Task) -> bool:
        """Drop a task no worker has taken yet; False when one has (it runs to its end)."""
        with self._lock:
            if task.state == QUEUED:
                task.state = DROPPED
            return task.state == DROPPED

    def stop(self) -> None:
        """Let the workers end once the tasks they hold are done (they are daemon threads: exit does not wait)."""
        for _ in self._threads:
            self._queue.put(None)

    def _work(self) -> None:
        while True:
            task = self._queue.get()
            if task is None:
                return
            with self._lock:
                if task.state != QUEUED:
                    continue
                task.state = RUNNING
            request = task.request
            try:
                response = self._handle(request)
            except Exception as error:      # noqa: BLE001 - a bug in the application: 500, and the server goes on
                _LOG.exception("500 for %s %s from %s", request.method, request.path, request.client)
                response = error_response(500, f"internal error: {type(error).__name__}: {error}")
            self._on_answer(task, response)
