"""Near-duplicate pairs without comparing all pairs: bands of the hash as keys, candidates checked by exact distance.

Pigeonhole: two 256-bit hashes within ``radius`` bits of each other differ in at most ``radius`` bits, so they
agree exactly on at least one of ``radius + 1`` disjoint bands. Every hash is cut into ``radius + 1`` bands (of
the bits in a fixed shuffled order, so that a band is not one region of the thumbnail), each (band, band value)
is a key, and only the hashes that share a key are compared. Every pair within the radius is found.

The rows of one bucket (the keys ``bucket_of`` sends there, all bands) are one worker's: sorted by (band, value),
each run of equal keys is compared pair by pair, and a run longer than ``MAX_RUN`` (a thousand blank frames) is
*capped*: each of its hashes is compared with the next ``WINDOW`` in the order of the whole hash, which links a run
of identical hashes into one chain at a bounded cost, and the run is reported. Two hashes that agree on several
bands meet in each of those bands' runs; a pair is kept only by the run of the *first* band they agree on (each
row holds its whole hash, so the bands before its run's are recomputed), so every pair leaves the buckets once,
not once per shared band (a copy of an image agrees on all of them). Where that first band's run is capped, the
pair is kept only if the window links it there. The rows of a bucket are also the version's index, kept for a
re-run (core/leakage/index.py). Pure numpy.
"""

import dataclasses
import hashlib
from typing import Dict, Iterator, List, Tuple

import numpy as np

from beam_pipeline.core.leakage import phash

BUCKETS = 64                  # keys of the band shuffle, and files of the index; fixed: a re-run reads the parent's
MAX_RUN = 2000                # a run of one band value compared pair by pair up to this long (2 M distances) ...
WINDOW = 64                   # ... and beyond it, each hash with the next WINDOW in hash order
ROW_WORDS = 2 + phash.BYTES // 8      # a row: image id, unit id, the hash's four 64-bit words
ROW_DTYPE = np.dtype(">u8")   # rows are stored big-endian, the same bytes on every machine
_ORDER_SALT = b"beam_pipeline.leakage.bands"
_BUCKET_MIX = np.uint64(0x9E3779B97F4A7C15)


def bit_order() -> np.ndarray:
    """A fixed shuffle of the 256 bit positions (from SHA-256): bands take consecutive positions of it."""
    keys = [hashlib.sha256(_ORDER_SALT + i.to_bytes(2, "big")).digest() for i in range(phash.BITS)]
    return np.argsort(np.array(keys, dtype=object), kind="stable").astype(np.int64)


_ORDER = bit_order()


@dataclasses.dataclass(frozen=True)
class Layout:
    """The bands for a radius: ``radius + 1`` bands of the shuffled bits, as even as they divide."""
    radius: int

    @property
    def bands(self) -> int:
        return self.radius + 1

    def edges(self) -> np.ndarray:
        return np.linspace(0, phash.BITS, self.bands + 1).astype(np.int64)

    def describe(self) -> dict:
        return {"bands": self.bands, "bits_per_band": [int(b) for b in np.diff(self.edges())], "buckets": BUCKETS}


def rows_of(image_ids: np.ndarray, unit_ids: np.ndarray, words: np.ndarray) -> np.ndarray:
    """(n, ROW_WORDS) uint64 rows of n hashes (``words``: phash.as_words)."""
    return np.column_stack([image_ids.astype(np.uint64), unit_ids.astype(np.uint64), words]).astype(np.uint64)


def band_values(words: np.ndarray, layout: Layout, first: int = 0) -> np.ndarray:
    """(n, bands) uint64: each hash's value in each band (a band of more than 64 bits folded by XOR); with
    ``first``, only the first ``first`` bands' (n, first)."""
    bits = np.unpackbits(words.astype(">u8").view(np.uint8).reshape(len(words), phash.BYTES), axis=1)[:, _ORDER]
    edges = layout.edges()
    count = min(first, layout.bands) if first else layout.bands
    out = np.zeros((len(words), count), dtype=np.uint64)
    for band in range(count):
        chunk = bits[:, edges[band]:edges[band + 1]]
        pad = (-chunk.shape[1]) % 64
        packed = np.ascontiguousarray(np.packbits(np.pad(chunk, ((0, 0), (pad, 0))), axis=1)).view(">u8")
        packed = packed.astype(np.uint64)
        out[:, band] = np.bitwise_xor.reduce(packed, axis=1)
    return out


def buckets_of(values: np.ndarray) -> np.ndarray:
    """(n, bands) bucket of each (band, value) key: a mix of both, modulo BUCKETS."""
    bands = np.arange(values.shape[1], dtype=np.uint64)[None, :]
    with np.errstate(over="ignore"):
        mixed = (values + bands * _BUCKET_MIX) * _BUCKET_MIX
    return (mixed >> np.uint64(40)) % np.uint64(BUCKETS)


def first_band_buckets(rows: np.ndarray, layout: Layout) -> Dict[int, np.ndarray]:
    """{bucket: rows}: each row (image, unit, hash words) once, in the bucket of its first band's key, where the
    index's band-0 rows hold every hash of a version once (a re-run's new or held question, stages/leakage/rerun.py)."""
    if not len(rows):
        return {}
    buckets = buckets_of(band_values(rows[:, 2:], layout, first=1))[:, 0]
    return {int(bucket): rows[buckets == bucket] for bucket in np.unique(buckets)}


def row_keys(rows: np.ndarray) -> List[bytes]:
    """Each row's bytes (as to_bytes writes it): a hashable key of the whole row."""
    data = np.ascontiguousarray(rows.astype(ROW_DTYPE))
    return data.view(np.dtype((np.void, data.dtype.itemsize * data.shape[1]))).ravel().tolist() if len(rows) else []


def by_bucket(rows: np.ndarray, layout: Layout) -> Dict[int, np.ndarray]:
    """{bucket: its band rows}: each row once per band, as (band, value, *row), for the band shuffle."""
    if not len(rows):
        return {}
    values = band_values(rows[:, 2:], layout)
    buckets = buckets_of(values)
    out: Dict[int, List[np.ndarray]] = {}
    for band in range(layout.bands):
        banded = np.column_stack([np.full(len(rows), band, np.uint64), values[:, band], rows])
        for bucket in np.unique(buckets[:, band]):
            out.setdefault(int(bucket), []).append(banded[buckets[:, band] == bucket])
    return {bucket: np.concatenate(parts) for bucket, parts in out.items()}


def to_bytes(rows: np.ndarray) -> bytes:
    return rows.astype(ROW_DTYPE).tobytes()


def from_bytes(data: bytes, width: int) -> np.ndarray:
    return np.frombuffer(data, dtype=ROW_DTYPE).astype(np.uint64).reshape(-1, width)


@dataclasses.dataclass(frozen=True)
class Found:
    """What one bucket's comparison found: pairs (image a, image b, unit a, unit b, distance), the capped runs."""
    pairs: np.ndarray                 # (k, 5) uint64, image a < image b
    capped: Tuple[Tuple[int, int], ...] = ()    # (band, run length) of each capped run
    compared: int = 0                 # distances computed


def near_pairs(banded: np.ndarray, radius: int, new_from: int = 0) -> Found:
    """The pairs within ``radius`` among ``banded`` rows (band, value, image, unit, 4 hash words) of one bucket,
    sorted or not. With ``new_from`` > 0 only pairs with at least one row at index >= ``new_from`` are kept (a
    re-run: the rows before it are the parent's, already compared among themselves)."""
    if len(banded) < 2:
        return Found(np.zeros((0, 5), np.uint64))
    new = np.arange(len(banded)) >= new_from
    order = np.lexsort((banded[:, 2], banded[:, 1], banded[:, 0]))
    rows, new = banded[order], new[order]
    values = band_values(rows[:, 4:], Layout(radius))      # (n, bands): which band two rows first agree on
    keys = rows[:, :2]
    starts = np.flatnonzero(np.r_[True, np.any(keys[1:] != keys[:-1], axis=1)])
    stops = np.r_[starts[1:], len(rows)]
    lengths = stops - starts
    found, capped, compared = [], [], 0
    for start, stop in zip(starts[lengths > MAX_RUN], stops[lengths > MAX_RUN]):
        if new_from and not new[start:stop].any():
            continue
        run = rows[start:stop]
        capped.append((int(run[0, 0]), len(run)))
        pairs, n = _windowed(run, new[start:stop], radius, values, start)
        compared += n
        found.append(pairs)
    small = (lengths > 1) & (lengths <= MAX_RUN)
    for batch in _batches(starts[small], stops[small]):
        pairs, n = _pairs_in_runs(rows, new, batch, radius, bool(new_from), values)
        compared += n
        found.append(pairs)
    found = [pairs for pairs in found if len(pairs)]
    pairs = np.concatenate(found) if found else np.zeros((0, 5), np.uint64)
    return Found(_unique(pairs), tuple(capped), compared)


_BATCH_PAIRS = 1 << 18        # candidate pairs compared at once (their rows are gathered: ~100 bytes a pair, so about
                              # 26 MB; a run of MAX_RUN rows alone has 2 M of them, so a run is cut between its rows)


def _batches(starts: np.ndarray, stops: np.ndarray):
    """(first rows, their runs' stops) of about _BATCH_PAIRS candidate pairs each: every row k of the runs, with
    the stop of its run, pairs with the rows after it in its run (a batch may cut a run between two rows)."""
    lengths = stops - starts
    first = np.repeat(starts, lengths) + (np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths))
    stop = np.repeat(stops, lengths)
    cumulative = np.cumsum(stop - first - 1)
    done = 0
    while done < len(first):
        last = int(np.searchsorted(cumulative, (cumulative[done - 1] if done else 0) + _BATCH_PAIRS, "right"))
        last = max(last, done + 1)
        yield first[done:last], stop[done:last]
        done = last


def _first_shared(band: np.ndarray, values: np.ndarray, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """For pairs of rows i, j of one run, of band ``band`` (``values``: each row's value in every band): True where
    the run's band is the first their hashes agree on, so that no other bucket keeps the pair."""
    agreed = np.zeros(len(i), dtype=bool)
    for earlier in range(int(band.max()) if len(i) else 0):    # a band at a time: no (pairs, bands) array
        agreed |= (values[i, earlier] == values[j, earlier]) & (band > np.uint64(earlier))
    return ~agreed


def _pairs_in_runs(rows: np.ndarray, new: np.ndarray, batch, radius: int, only_new: bool, values: np.ndarray):
    """Every pair of a batch's rows with the later rows of their runs, compared in one numpy pass (row k pairs
    with ``rows[k + 1:stop]``, ``stop`` the end of its run)."""
    k, stops = batch
    later = stops - k - 1                                          # rows after k in its run
    i = np.repeat(k, later)
    j = i + 1 + (np.arange(later.sum()) - np.repeat(np.cumsum(later) - later, later))
    if only_new:
        keep = new[i] | new[j]
        i, j = i[keep], j[keep]
    d = phash.distances(rows[i, 4:], rows[j, 4:])
    close = d <= radius
    close[close] = _first_shared(rows[i[close], 0], values, i[close], j[close])
    return _pair_rows(rows, i[close], j[close], d[close]), len(i)


def _windowed(run: np.ndarray, fresh: np.ndarray, radius: int, values: np.ndarray, start: int):
    """The capped run ``run`` (rows ``start`` on of the bucket's, whose band values ``values`` holds): each hash
    compared with the next WINDOW in the order of the whole hash."""
    order = np.lexsort(tuple(run[:, col] for col in range(ROW_WORDS + 1, 3, -1)))
    run, fresh = run[order], fresh[order]
    parts, compared = [], 0
    for step in range(1, WINDOW + 1):
        i = np.arange(len(run) - step)
        j = i + step
        d = phash.distances(run[i, 4:], run[j, 4:])
        close = d <= radius
        close[close] = _first_shared(run[i[close], 0], values, start + order[i[close]], start + order[j[close]])
        compared += len(i)
        parts.append(_pair_rows(run, i[close], j[close], d[close]))
    return np.concatenate(parts), compared


def _pair_rows(run: np.ndarray, i: np.ndarray, j: np.ndarray, d: np.ndarray) -> np.ndarray:
    a, b = run[i, 2], run[j, 2]
    swap = a > b
    ua, ub = run[i, 3], run[j, 3]
    return np.column_stack([np.where(swap, b, a), np.where(swap, a, b), np.where(swap, ub, ua),
                            np.where(swap, ua, ub), d.astype(np.uint64)])


def _unique(pairs: np.ndarray) -> np.ndarray:
    """Each pair once (a pair sharing two bands in this bucket is found twice), different images only."""
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    if not len(pairs):
        return pairs
    return np.unique(pairs, axis=0)


def pair_tuples(pairs: np.ndarray) -> Iterator[Tuple[int, int, int, int, int]]:
    for a, b, ua, ub, d in pairs.tolist():
        yield int(a), int(b), int(ua), int(ub), int(d)
