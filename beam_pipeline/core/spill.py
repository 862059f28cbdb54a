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
