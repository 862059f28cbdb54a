"""Validation's spill: the bytes a pair's record stores, kept from validation for the writer (docs/cache.md).

When validation checks a pair afresh it holds both files' bytes. It appends the bytes the record
stores (the image and the mask as stored: converted files converted, core/example.stored_files) to a
spill file beside its verdicts part, and the pair carries a reference to them. The writer copies
them from there instead of reading, hashing and converting the source files again.

A reference is ``(file, offset, image bytes, mask bytes, CRC32C of both)``: the entry is the image's
bytes followed by the mask's, at ``offset`` in ``file``. An entry whose length or CRC32C does not
match is not used: the writer reads the sources, as without a spill. Pure: no Beam, no TensorFlow.
"""

from typing import Optional, Tuple

import google_crc32c

SpillRef = Tuple[str, int, int, int, int]       # (file, offset, image bytes, mask bytes, CRC32C)


def checksum(image: bytes, mask: bytes) -> int:
    """The CRC32C of the entry ``image + mask``, without joining them."""
    return google_crc32c.extend(google_crc32c.value(image), mask) if mask else google_crc32c.value(image)


def reference(path: str, offset: int, image: bytes, mask: bytes) -> SpillRef:
    """Where the entry of ``image`` and ``mask`` written at ``offset`` of ``path`` is, with its check."""
    return path, offset, len(image), len(mask), checksum(image, mask)


def matches(ref: SpillRef, image: bytes, mask: bytes) -> bool:
    """Whether ``image`` and ``mask``, as read from the entry, are the bytes written there."""
    return len(image) == ref[2] and len(mask) == ref[3] and checksum(image, mask) == ref[4]


def live(ref: SpillRef, committed_run: str) -> bool:
    """Whether the entry's file is still there: a commit collects every spill, so only the spills of runs after
    ``committed_run`` (the last run to commit, or "" for none) remain. A spill file's name begins with its
    run's id (io/verdict_store.py), and run ids, of one length, sort by their start time."""
    if not committed_run:
        return True
    name = ref[0].rsplit("/", 1)[-1]
    return name[:len(committed_run)] > committed_run


# --spill auto: how much free space a worker leaves on a disk that holds both the spill and the shards.
RESERVE_MARGIN_BYTES = 16 << 20      # beyond the shards' estimate: the parts, the manifest, the report
RECORD_OVERHEAD = 1.05               # a record's bytes over its entry's: features, framing


def shard_reserve(selected_pairs: int, entries: int, entry_bytes: int) -> int:
    """The free bytes to keep for the shards while spilling: every selected pair's record at the mean size
    of the ``entries`` seen so far (``entry_bytes`` in all), RECORD_OVERHEAD more, and RESERVE_MARGIN_BYTES.
    The spill is collected only at the commit, after the shards are written, so both are on the disk at
    once. ``selected_pairs`` 0: the shards are on another disk, only the margin is kept."""
    if not entries or not selected_pairs:
        return RESERVE_MARGIN_BYTES
    return int(selected_pairs * (entry_bytes / entries) * RECORD_OVERHEAD) + RESERVE_MARGIN_BYTES


def room_for_entry(free_bytes: int, size: int, reserve: int) -> bool:
    """Whether an entry of ``size`` bytes leaves at least ``reserve`` bytes free."""
    return free_bytes - size >= reserve
