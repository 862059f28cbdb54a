"""Listing the input through Beam's filesystems: listing files (.csv, .jsonl, .parquet) and globs.

The input listing is the user's file with one row per pair (not the
dataset's manifest.json, which the pipeline writes). What each kind of input
lists becomes PairRefs here (core/pairing.py), streamed. Rows are streamed in
record batches with pyarrow; the whole table is never loaded. CSV columns are
read as text (the filter converts text to numbers where needed), so a column
whose later rows change type cannot fail the read.
"""

import io
from typing import Iterator, List, Tuple, Union

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.json as pa_json
import pyarrow.parquet as pq
from apache_beam.io.filesystem import BeamIOError
from apache_beam.io.filesystems import FileSystems

from beam_pipeline.core import paths
from beam_pipeline.core.pairing import class_folder_ref, row_to_pair
from beam_pipeline.core.records import Outcome, PairRef


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
    raise ValueError(f"unknown listing file type: {path} (use .csv, .jsonl or .parquet)")


def _csv_header(path: str) -> List[str]:
    with FileSystems.open(path, compression_type="uncompressed") as handle:
        reader = pa_csv.open_csv(handle, read_options=pa_csv.ReadOptions(block_size=64 * 1024, use_threads=False))
        try:
            return list(reader.schema.names)
        finally:
            reader.close()


def read_columns(path: str) -> List[str]:
    """Column names of a listing file; raises OSError / ValueError / pyarrow errors when unreadable."""
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
    """Every row of the listing file as a dict of Python values, a batch at a time."""
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


def match_files(pattern: str) -> Iterator[Tuple[str, int]]:
    """``(path, size)`` of every file matching a glob; nothing when none matches.

    Object stores list a prefix a page at a time (S3 and GCS: 1000 objects); Beam's S3 and GCS
    filesystems follow the pages. A listing that fails (a refused request, a server error that
    outlived the retries) raises BeamIOError: it never reads as "no files".
    """
    for result in FileSystems.match([pattern]):
        for metadata in result.metadata_list:
            yield metadata.path, metadata.size_in_bytes


def folder_exists(folder: str) -> bool:
    """Whether ``folder`` exists or holds any file.

    On gs:// and s3:// a folder is only a key prefix: ``FileSystems.exists`` is False for it
    (with or without a trailing slash) even while files live below it, so a folder there
    exists when a match below it finds one file.
    """
    if FileSystems.exists(folder):
        return True
    try:
        results = FileSystems.match([paths.join(folder, "**")], limits=[1])
    except BeamIOError:
        return False
    return any(result.metadata_list for result in results)


def relative_matches(root: str, pattern: str) -> Iterator[str]:
    """The path relative to ``root`` of every file matching ``pattern`` (itself relative to ``root``)."""
    for path, _ in match_files(paths.join(root, pattern)):
        relative = paths.relative_to(root, path)
        if relative is not None:
            yield relative


def listed_pairs(path: str, root: str, task: str, allow_outside_root: bool) -> Iterator[Union[PairRef, Outcome]]:
    """A PairRef per row of a listing file, or a rejected Outcome for a bad row."""
    for row in iter_rows(path):
        ref, outcome = row_to_pair(row, root, task, allow_outside_root)
        yield ref if outcome is None else outcome


def class_folder_pairs(root: str, pattern: str) -> Iterator[PairRef]:
    """A PairRef per image in ``<class>/<file>`` below ``root``, labelled by its folder."""
    for relative in relative_matches(root, pattern):
        yield class_folder_ref(relative, root)


def keyed_images(root: str, pattern: str, mask_template: str) -> Iterator[Tuple[str, str]]:
    """(mask path its template renders, image path) of every image matching ``pattern``, relative to ``root``."""
    for relative in relative_matches(root, pattern):
        yield paths.render_template(mask_template, relative), relative


def keyed_masks(root: str, pattern: str) -> Iterator[Tuple[str, str]]:
    """(mask path, mask path) of every mask matching ``pattern``, relative to ``root``."""
    for relative in relative_matches(root, pattern):
        yield relative, relative
