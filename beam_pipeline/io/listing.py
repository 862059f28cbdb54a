"""The input listing through Beam's filesystems: a listing file (.csv, .jsonl, .parquet), read in ranges,
and the pairs its rows give (core/pairing.py), streamed.

The input listing is the user's file with one row per pair (not the dataset's manifest.json, which
the pipeline writes). It is read in ranges that can be read apart, on as many workers as there are:

* CSV and JSON lines: byte ranges. A range owns the lines that start in it (a line that starts before
  the range and ends in it belongs to the range before), so any cut of ``[start, stop)`` into ranges
  reads every line exactly once. A quoted CSV value may therefore not hold a line break (pyarrow's
  default, as before ranges: use JSON lines or Parquet for such values).
* Parquet: ranges of rows. A range reads the row groups it overlaps and keeps its own rows.

Each range is read a batch of rows at a time (``BATCH_ROWS``, ``BLOCK_BYTES``): no process holds more
than a batch. :func:`read_range` asks its caller to claim each batch's last position before it is
parsed, the contract of Beam's OffsetRestrictionTracker, so a runner may split a range while it is
read. CSV columns are read as text (the filter converts text to numbers where needed), so a column
whose later rows change type cannot fail the read; a CSV row with the wrong number of values becomes
a rejected row instead of failing the read.
"""

import dataclasses
import io
from typing import Callable, Iterator, List, Optional, Tuple, Union

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.json as pa_json
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems

from beam_pipeline.core.pairing import bad_listing_row, row_to_pair
from beam_pipeline.core.records import Outcome, PairRef

CSV, JSONL, PARQUET = "csv", "jsonl", "parquet"
BATCH_ROWS = 4096                   # rows parsed and handed on at a time
BLOCK_BYTES = 1024 * 1024           # CSV and JSON lines: bytes read at a time (lines are cut from them)
MIN_RANGE_BYTES = 4 * 1024 * 1024   # the smallest range of a text listing worth a task of its own
MIN_RANGE_ROWS = 64 * 1024          # ... and of a Parquet listing
RANGES_PER_LISTING = 64             # a listing is cut into at most this many ranges to start with


def kind_of(path: str) -> str:
    lower = path.lower()
    if lower.endswith(".csv"):
        return CSV
    if lower.endswith((".jsonl", ".json")):
        return JSONL
    if lower.endswith(".parquet"):
        return PARQUET
    raise ValueError(f"unknown listing file type: {path} (use .csv, .jsonl or .parquet)")


def _open(path: str):
    return FileSystems.open(path, compression_type="uncompressed")


def _csv_header(path: str) -> Tuple[List[str], int]:
    """The CSV's column names and the byte offset of its first data line."""
    with _open(path) as handle:
        line = handle.readline()
    reader = pa_csv.open_csv(io.BytesIO(line), read_options=pa_csv.ReadOptions(use_threads=False))
    try:
        return list(reader.schema.names), len(line)
    finally:
        reader.close()   # A reader left open at exit can abort the interpreter.


def read_columns(path: str) -> List[str]:
    """Column names of a listing file; raises OSError / ValueError / pyarrow errors when unreadable."""
    kind = kind_of(path)
    if kind == CSV:
        return _csv_header(path)[0]
    if kind == PARQUET:
        with _open(path) as handle:
            return list(pq.ParquetFile(handle).schema_arrow.names)
    with _open(path) as handle:
        for line in handle:
            if line.strip():
                return list(pa_json.read_json(io.BytesIO(line)).schema.names)
    return []


def count_rows(path: str, limit: int) -> int:
    """The listing's data rows, counted no further than ``limit + 1``: a larger listing reads as ``limit + 1``.

    What the launcher needs to tell a small corpus from a large one without reading a large listing whole
    (Parquet's row count is in its footer). A text line that is not a row (a blank line) is not counted; a
    row the pipeline will reject still is.
    """
    kind = kind_of(path)
    if kind == PARQUET:
        with _open(path) as handle:
            return min(pq.ParquetFile(handle).metadata.num_rows, limit + 1)
    rows = 0
    with _open(path) as handle:
        if kind == CSV:
            handle.readline()
        for line in handle:
            if line.strip():
                rows += 1
                if rows > limit:
                    break
    return rows


def _size(path: str) -> int:
    return FileSystems.match([path])[0].metadata_list[0].size_in_bytes


@dataclasses.dataclass(frozen=True)
class Extent:
    """The positions of a listing's rows: bytes of its data lines (text), or row numbers (Parquet)."""
    start: int
    stop: int
    unit: str                        # "bytes" | "rows"


def extent(path: str) -> Extent:
    """Where the rows of the listing are, for :func:`read_range` and :func:`split_points`."""
    kind = kind_of(path)
    if kind == PARQUET:
        with _open(path) as handle:
            return Extent(0, pq.ParquetFile(handle).metadata.num_rows, "rows")
    start = _csv_header(path)[1] if kind == CSV else 0
    return Extent(start, max(start, _size(path)), "bytes")


def split_points(whole: Extent) -> List[Tuple[int, int]]:
    """The first ranges to read apart: at most RANGES_PER_LISTING, none smaller than the minimum."""
    smallest = MIN_RANGE_ROWS if whole.unit == "rows" else MIN_RANGE_BYTES
    length = whole.stop - whole.start
    count = max(1, min(RANGES_PER_LISTING, length // smallest))
    edges = [whole.start + length * i // count for i in range(count + 1)]
    return [(a, b) for a, b in zip(edges, edges[1:]) if b > a] or [(whole.start, whole.stop)]


Claim = Callable[[int], bool]       # claim(position) -> False when the range was cut before it: stop there


@dataclasses.dataclass(frozen=True)
class BadRow:
    """A line that could not be read as a row: its text and what is wrong with it."""
    text: str
    problem: str


@dataclasses.dataclass(frozen=True)
class Batch:
    """Rows read together, as dicts of Python values, and the lines among them that are not rows."""
    rows: List[dict]
    bad_rows: Tuple[BadRow, ...] = ()


def read_range(path: str, start: int, stop: int, claim: Claim) -> Iterator[Batch]:
    """The rows of ``[start, stop)`` in batches of at most BATCH_ROWS rows (lines, for text files).

    Each row's position (the byte offset its line starts at, or its row number) is claimed before the
    row is parsed; when ``claim`` returns False the range ends there (the rest is another range's). At
    the end of the rows, ``claim(stop)`` says that nothing is left before ``stop``.
    """
    kind = kind_of(path)
    if kind == PARQUET:
        batches = _parquet_range(path, start, stop, claim)
    else:
        columns = _csv_header(path)[0] if kind == CSV else None
        batches = _text_range(path, start, stop, claim, columns)
    for batch, complete in batches:
        if batch.rows or batch.bad_rows:
            yield batch
        if not complete:
            return
    claim(stop)


def _claimed(positions: List[int], claim: Claim) -> int:
    """How many of ``positions``, in order, ``claim`` grants (it grants a prefix)."""
    for granted, position in enumerate(positions):
        if not claim(position):
            return granted
    return len(positions)


def _text_range(path: str, start: int, stop: int, claim: Claim, columns: Optional[List[str]]):
    """(Batch, whether every line of the block was claimed) per block of lines."""
    for lines, offsets in _line_blocks(path, start, stop):
        granted = _claimed(offsets, claim)
        lines = lines[:granted]
        yield (_parse_csv(lines, columns) if columns is not None else _parse_jsonl(lines)), granted == len(offsets)


def _line_blocks(path: str, start: int, stop: int) -> Iterator[Tuple[List[bytes], List[int]]]:
    """(lines, the offset each starts at) for the lines that start in ``[start, stop)``, in blocks."""
    with _open(path) as handle:
        position = start
        if start > 0:
            handle.seek(start - 1)
            if handle.read(1) != b"\n":          # mid-line: that line is the previous range's
                position = start + len(handle.readline())
        else:
            handle.seek(0)
        lines: List[bytes] = []
        offsets: List[int] = []
        block_bytes = 0
        while position < stop:
            line = handle.readline()
            if not line:
                break
            lines.append(line if line.endswith(b"\n") else line + b"\n")
            offsets.append(position)
            block_bytes += len(line)
            position += len(line)
            if len(lines) >= BATCH_ROWS or block_bytes >= BLOCK_BYTES:
                yield lines, offsets
                lines, offsets, block_bytes = [], [], 0
        if lines:
            yield lines, offsets


def _csv_table(lines: List[bytes], columns: List[str], bad: List[BadRow]) -> pa.Table:
    def keep_apart(row) -> str:
        bad.append(BadRow(row.text, f"{row.actual_columns} values where the header has {row.expected_columns}"))
        return "skip"

    return pa_csv.read_csv(
        io.BytesIO(b"".join(lines)),
        read_options=pa_csv.ReadOptions(column_names=columns, use_threads=False, block_size=2 * BLOCK_BYTES),
        parse_options=pa_csv.ParseOptions(invalid_row_handler=keep_apart),
        convert_options=pa_csv.ConvertOptions(column_types={name: pa.string() for name in columns},
                                              strings_can_be_null=True))


def _parse_csv(block: List[bytes], columns: List[str]) -> Batch:
    """Lines of a CSV listing (no header) as text columns; a line that is not a row of the header's
    columns (a wrong number of values, an unclosed quote) is a BadRow."""
    bad = [BadRow(_text_of(line), "an unclosed quote") for line in block if line.count(b'"') % 2]
    if bad:                                     # a row is one line: an open quote must not take the next one
        block = [line for line in block if not line.count(b'"') % 2]
    if not block:
        return Batch([], tuple(bad))
    try:
        return Batch(_csv_table(block, columns, bad).to_pylist(), tuple(bad))
    except pa.ArrowInvalid:                     # a line that confuses the parser: read the block line by line
        rows = []
        for line in block:
            try:
                rows.extend(_csv_table([line], columns, bad).to_pylist())
            except pa.ArrowInvalid as error:
                bad.append(BadRow(_text_of(line), _first_line(error)))
        return Batch(rows, tuple(bad))


def _parse_jsonl(block: List[bytes]) -> Batch:
    """JSON lines as a table; a line that is not a JSON object is a BadRow (empty lines are skipped)."""
    lines = [line for line in block if line.strip()]
    if not lines:
        return Batch([])
    try:
        return Batch(pa_json.read_json(io.BytesIO(b"".join(lines))).to_pylist())
    except pa.ArrowInvalid:
        rows, bad = [], []
        for line in lines:
            try:
                rows.extend(pa_json.read_json(io.BytesIO(line)).to_pylist())
            except pa.ArrowInvalid as error:
                bad.append(BadRow(_text_of(line), _first_line(error)))
        return Batch(rows, tuple(bad))


def _text_of(line: bytes) -> str:
    return line.decode("utf-8", "replace").rstrip("\r\n")


def _first_line(error: BaseException) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


def _parquet_range(path: str, start: int, stop: int, claim: Claim):
    """(Batch, whether every row of it was claimed) per batch of the row groups ``[start, stop)`` overlaps."""
    with _open(path) as handle:
        parquet = pq.ParquetFile(handle)
        first_row = 0
        for group in range(parquet.metadata.num_row_groups):
            rows = parquet.metadata.row_group(group).num_rows
            group_start, first_row = first_row, first_row + rows
            if first_row <= start or group_start >= stop:
                continue
            row = group_start
            for batch in parquet.iter_batches(batch_size=BATCH_ROWS, row_groups=[group]):
                batch_start, row = row, row + batch.num_rows
                keep_from, keep_to = max(start, batch_start), min(stop, row)
                if keep_to <= keep_from:
                    if batch_start >= stop:
                        return
                    continue
                granted = _claimed(list(range(keep_from, keep_to)), claim)
                yield Batch(batch.slice(keep_from - batch_start, granted).to_pylist()), granted == keep_to - keep_from


def listed_pairs(path: str, start: int, stop: int, claim: Claim, root: str, task: str,
                 allow_outside_root: bool) -> Iterator[Union[PairRef, Outcome]]:
    """A PairRef per row of ``[start, stop)``, or a rejected Outcome for a row that is bad (core/pairing.py)
    or that is not a row at all."""
    for batch in read_range(path, start, stop, claim):
        for row in batch.rows:
            ref, outcome = row_to_pair(row, root, task, allow_outside_root)
            yield ref if outcome is None else outcome
        for bad in batch.bad_rows:
            yield bad_listing_row(bad.text, bad.problem)
