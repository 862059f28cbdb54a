"""Reading manifest files (.csv, .jsonl, .parquet) with pyarrow, in bounded memory.

Rows are streamed in record batches; the whole table is never loaded. CSV
columns are read as text (the filter converts text to numbers where needed),
so a column whose later rows change type cannot fail the read.
"""

import io
from typing import Iterator, List

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.json as pa_json
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems


BATCH_ROWS = 4096
_BLOCK_BYTES = 4 * 1024 * 1024


def _kind(path: str) -> str:
    lower = path.lower()
    if lower.endswith(".csv"):
        return "csv"
    if lower.endswith((".jsonl", ".json")):
        return "jsonl"
    if lower.endswith(".parquet"):
        return "parquet"
    raise ValueError(f"unknown manifest type: {path} (use .csv, .jsonl or .parquet)")


def _csv_header(path: str) -> List[str]:
    with FileSystems.open(path, compression_type="uncompressed") as handle:
        reader = pa_csv.open_csv(handle, read_options=pa_csv.ReadOptions(block_size=64 * 1024, use_threads=False))
        try:
            return list(reader.schema.names)
        finally:
            reader.close()


def read_columns(path: str) -> List[str]:
    """Column names of a manifest; raises OSError / ValueError / pyarrow errors when unreadable."""
    kind = _kind(path)
    if kind == "csv":
        return _csv_header(path)
    with FileSystems.open(path, compression_type="uncompressed") as handle:
        if kind == "parquet":
            return list(pq.ParquetFile(handle).schema_arrow.names)
        first = next(_jsonl_blocks(handle, 1), None)
        return [] if first is None else list(first.schema.names)


def _jsonl_blocks(handle, lines_per_block: int) -> Iterator[pa.Table]:
    """JSON-lines parsed by pyarrow a block of lines at a time (bounded memory)."""
    block = []
    for line in handle:
        if line.strip():
            block.append(line if line.endswith(b"\n") else line + b"\n")
        if len(block) >= lines_per_block:
            yield pa_json.read_json(io.BytesIO(b"".join(block)))
            block = []
    if block:
        yield pa_json.read_json(io.BytesIO(b"".join(block)))


def iter_rows(path: str) -> Iterator[dict]:
    """Every row of the manifest as a dict of Python values, a batch at a time."""
    kind = _kind(path)
    columns = _csv_header(path) if kind == "csv" else None
    with FileSystems.open(path, compression_type="uncompressed") as handle:
        if kind == "csv":
            reader = pa_csv.open_csv(
                handle,
                read_options=pa_csv.ReadOptions(block_size=_BLOCK_BYTES, use_threads=False),
                convert_options=pa_csv.ConvertOptions(
                    column_types={name: pa.string() for name in columns}, strings_can_be_null=True))
            try:
                for batch in reader:
                    yield from batch.to_pylist()
            finally:
                reader.close()   # A reader left open at exit can abort the interpreter.
            return
        if kind == "parquet":
            batches = pq.ParquetFile(handle).iter_batches(batch_size=BATCH_ROWS)
        else:
            batches = _jsonl_blocks(handle, BATCH_ROWS)
        for batch in batches:
            yield from batch.to_pylist()
