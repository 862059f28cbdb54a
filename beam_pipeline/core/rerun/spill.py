"""Validation's spill: the records of the pairs validated afresh, kept from validation for the writer (docs/cache.md).

When validation checks a pair afresh it holds both files' bytes. It frames the pair's record (the TFRecord the
writer writes for the pair's first copy: core/example.py, with the image and the mask as stored) into a spill
file, and the pair carries a reference to it. The writer copies the record from there instead of reading,
hashing and converting the source files again, and a re-run after a kill adopts whole spill files of the killed
run as shards (stages/rerun/adopt.py) instead of copying them.

A reference is ``(file, offset, framed bytes, CRC32C of the framed record, CRC32C of the source id)``. An entry
whose length or CRC32C does not match is not used: the writer reads the sources, as without a spill. The record
names the pair's source id, so an entry is copied as it is only for the first copy (repeat copy 0) of a pair
whose source id is the one it was written with; otherwise the writer takes the image and the mask out of it and
encodes the record again. Pure: no Beam, no TensorFlow.
"""

import re
from typing import Iterable, Optional, Tuple

import google_crc32c

from beam_pipeline.core import features
from beam_pipeline.core.example import example_bytes_values, masked_crc, pair_example_pieces

SpillRef = Tuple[str, int, int, int, int]       # (file, offset, framed bytes, CRC32C, CRC32C of the source id)
SPILL_FILE_SUFFIX = ".spill"     # a local spill file of framed records (a TFRecord file, not named as a shard)


def checksum(pieces: Iterable[bytes]) -> int:
    """The CRC32C of the pieces' concatenation, without joining them."""
    crc = 0
    for piece in pieces:
        crc = google_crc32c.extend(crc, piece)
    return crc


def source_check(source_id: str) -> int:
    return google_crc32c.value(source_id.encode("utf-8"))


def reference(path: str, offset: int, framed: Iterable[bytes], source_id: str) -> SpillRef:
    """Where the framed record of ``framed`` pieces written at ``offset`` of ``path`` is, with its checks."""
    framed = list(framed)
    return path, offset, sum(len(piece) for piece in framed), checksum(framed), source_check(source_id)


def matches(ref: SpillRef, framed: bytes) -> bool:
    """Whether ``framed``, as read from the entry, is the framed record written there."""
    return len(framed) == ref[2] and checksum((framed,)) == ref[3]


def verbatim(ref: SpillRef, copy: int, source_id: str) -> bool:
    """Whether the entry is the very record to write for repeat copy ``copy`` of a pair of ``source_id``."""
    return copy == 0 and ref[4] == source_check(source_id)


def live(ref: SpillRef, committed_run: str) -> bool:
    """Whether the entry's file is still there: a commit collects every spill, so only the spills of runs after
    ``committed_run`` (the last run to commit, or "" for none) remain. A spill file's name begins with its
    run's id (io/cache/verdicts.py), and run ids, of one length, sort by their start time."""
    if not committed_run:
        return True
    name = ref[0].rsplit("/", 1)[-1]
    return name[:len(committed_run)] > committed_run


def split_in_name(split: str) -> str:
    """How a local spill file's name gives its split (io/cache/spill.ProcessSpill): every character but ASCII
    letters, digits, _ and . as _."""
    return re.sub(r"[^A-Za-z0-9_.]", "_", split)


def adoptable(ref: SpillRef, run_id: str) -> bool:
    """Whether the entry is in a local spill file of another run (one killed before its commit) that a re-run may
    adopt as a shard (stages/rerun/adopt.py): per-part spills on object stores are copied instead."""
    if not ref:
        return False
    path = ref[0]
    name = path.rsplit("/", 1)[-1]
    return "://" not in path and path.endswith(SPILL_FILE_SUFFIX) and not name.startswith(run_id + "-")


# TFRecord framing, read back: a length (8 bytes) and its masked CRC (4), the record, the record's masked CRC (4).
FRAME_HEADER = 12
FRAME_FOOTER = 4


def frame_length(header: bytes) -> Optional[int]:
    """The record length a frame's 12-byte header gives, or None when it is cut off or its CRC does not match."""
    if len(header) < FRAME_HEADER:
        return None
    length_bytes = header[:8]
    if int.from_bytes(header[8:12], "little") != masked_crc(length_bytes):
        return None
    return int.from_bytes(length_bytes, "little")


def record_of(framed) -> memoryview:
    """The record a framed record holds (no copy)."""
    return memoryview(framed)[FRAME_HEADER:len(framed) - FRAME_FOOTER]


def record_pieces(pair, framed: bytes):
    """The record of ``pair`` (a ValidPair) from the framed record validation spilled for it: that record itself
    for the pair's first copy under the same source id, else encoded again around the image and mask it stores."""
    record = record_of(framed)
    if verbatim(pair.spill, pair.copy, pair.ref.source_id):
        return [bytes(record)]
    stored = example_bytes_values(record, (features.IMAGE_ENCODED, features.MASK_ENCODED))
    return pair_example_pieces(pair, bytes(stored[features.IMAGE_ENCODED]),
                               bytes(stored.get(features.MASK_ENCODED, b"")))


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
