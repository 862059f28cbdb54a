"""Shard sizing and assignment by bytes, deterministic and memory-bounded.

Examples are spread over shards in two steps, so no worker ever holds the
list of all examples:

1. Each example falls in one of ``NUM_BUCKETS`` buckets of its split by a
   salted stable hash of its key; only the byte total of each non-empty
   bucket is gathered (at most NUM_BUCKETS numbers per split, however large
   the corpus).
2. :func:`pack_buckets` packs the buckets into shards, largest first onto the
   lightest shard (LPT). Each shard is thus a random, representative mix, and
   shard sizes differ by at most about one bucket: a few per cent up to
   ``NUM_BUCKETS / 16`` shards per split (4,096 shards, 512 GB at 128 MB).

Inside a shard, records are ordered by another salted hash of the key, so the
same input gives byte-identical shards whatever order the runner delivers.
"""

import heapq
import math
from typing import Callable, Dict, Hashable, Iterable, List, Tuple

from beam_pipeline.core.hashing import stable_hash

NUM_BUCKETS = 65536
BUCKET_SALT = "bucket"
ORDER_SALT = "order"


def num_shards_for(total_bytes: int, target_shard_bytes: int) -> int:
    """The shard count that brings shards closest to the target size (at least one)."""
    if total_bytes <= 0:
        return 1
    ratio = total_bytes / target_shard_bytes
    low = max(1, math.floor(ratio))
    high = max(1, math.ceil(ratio))
    # Pick the count whose shard size is closer to the target, in relative terms.
    return low if abs(math.log(total_bytes / low / target_shard_bytes)) <= abs(
        math.log(total_bytes / high / target_shard_bytes)) else high


def bucket_of(key: str) -> int:
    return stable_hash(BUCKET_SALT, key) % NUM_BUCKETS


def pack_buckets(bucket_bytes: Iterable[Tuple[Hashable, int]], num_shards: int,
                 group_of: Callable[[Hashable], Hashable] = None) -> Dict[Hashable, int]:
    """Map each bucket to a shard so that shard byte totals are as even as LPT makes them.

    ``bucket_bytes`` holds ``(bucket, bytes)``; buckets are placed largest first
    on the lightest shard. When ``group_of`` is given, buckets of one group
    (the repeat copies of the same images) go to different shards while there
    are shards enough. Ties are broken by bucket and shard index, so the result
    depends only on the input values.
    """
    ordered = sorted(bucket_bytes, key=_largest_first)
    heap: List[Tuple[int, int]] = [(0, shard) for shard in range(num_shards)]
    used: Dict[Hashable, set] = {}
    assignment = {}
    for bucket, size in ordered:
        taken = used.setdefault(group_of(bucket), set()) if group_of else set()
        skipped = []
        while heap and heap[0][1] in taken and len(taken) < num_shards:
            skipped.append(heapq.heappop(heap))
        load, shard = heapq.heappop(heap)
        for item in skipped:
            heapq.heappush(heap, item)
        assignment[bucket] = shard
        taken.add(shard)
        heapq.heappush(heap, (load + size, shard))
    return assignment


def _largest_first(item):
    bucket, size = item
    return -size, bucket


def record_order(key: str) -> int:
    return stable_hash(ORDER_SALT, key)


def shard_file_name(group: str, index: int, num_shards: int) -> str:
    return f"{group}-{index:05d}-of-{num_shards:05d}.tfrecord"


def shard_name_parts(path: str) -> Tuple[str, int, int]:
    """(group, index, num_shards) of a shard path (any folder), the inverse of :func:`shard_file_name`."""
    group, index, _, of = path.rsplit("/", 1)[-1].rsplit(".", 1)[0].rsplit("-", 3)
    return group, int(index), int(of)


def same_images(item) -> int:
    """The packing group of a ``(bucket, copy)`` item: repeat copies of one bucket's images."""
    bucket, _ = item
    return bucket
