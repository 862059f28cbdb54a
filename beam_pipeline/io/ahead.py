"""Work on the items of a stream done a few items ahead, on threads, the results handed back in the stream's order.

For work that waits on files and stores or releases the GIL (reads, SHA-256, zlib, a stat or a metadata request):
the shard writer prepares its records ahead of the one it writes (stages/write.py), and a re-run's look takes its
pairs' versions ahead of the ones it sums (launcher/rerun/unchanged.py). At most ``ahead`` items are in flight,
whatever the stream's length. Leaving the loop early waits for those in flight, then stops the threads.
"""

import collections
import concurrent.futures
from typing import Callable, Iterable, Iterator, Tuple, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


def mapped_ahead(function: Callable[[Item], Result], items: Iterable[Item], threads: int,
                 ahead: int) -> Iterator[Tuple[Item, Result]]:
    """``(item, function(item))`` for each item, in order, with up to ``ahead`` of them worked on by ``threads``."""
    pending = collections.deque()
    with concurrent.futures.ThreadPoolExecutor(max_workers=threads) as pool:
        for item in items:
            pending.append((item, pool.submit(function, item)))
            if len(pending) >= ahead:
                done, future = pending.popleft()
                yield done, future.result()
        while pending:
            done, future = pending.popleft()
            yield done, future.result()
