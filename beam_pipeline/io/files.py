"""Whole files through Beam's FileSystems, the same on local disk, gs:// and s3://.

Reading and writing small files with errors that name the file, SHA-256 of a file read in
chunks, listing every file below a folder with its size (one match), and removing a folder (on
object stores a folder is a key prefix: it is removed with a trailing slash, and it "exists" only
while a file lives below it).
"""

import heapq
import json
import os
from typing import Dict

from apache_beam.io.filesystem import BeamIOError
from apache_beam.io.filesystems import FileSystems

from beam_pipeline.core import digests, paths
from beam_pipeline.core.failures import write_failed

_CHUNK = digests.CHUNK_BYTES
_PAST_THE_END = 1 << 62                 # a range end past any file's end: read the file to its end


def write_bytes(path: str, data: bytes) -> dict:
    """Write ``data`` to ``path``; returns its ``files`` entry. An OSError names the file."""
    try:
        with FileSystems.create(path) as handle:
            handle.write(data)
    except OSError as error:
        raise write_failed(path, error) from error
    return digests.entry(data)


def join_parts(parts, target: str) -> dict:
    """Write the files ``parts`` one after the other into ``target`` (empty when there are none), read
    and written in chunks; returns ``target``'s ``files`` entry. An OSError names the file."""
    return join_sorted_parts([[part] for part in parts], target)


def join_sorted_parts(parts, target: str, write_bytes_at_once: int = 1 << 20) -> dict:
    """Write ``parts`` one after the other into ``target``, each part a list of files of sorted lines (each line
    ended by a newline) written as one sorted run: a part of one file is copied in chunks, the files of a part of
    several are merged line by line as they are read (``heapq.merge``: a few lines of each file held, never a
    whole file). Returns ``target``'s ``files`` entry; an OSError names the file. The bytes are those of each
    part's lines sorted together: a line end sorts before every character a line holds (JSON escapes control
    characters), and UTF-8 bytes sort as their characters do."""
    from beam_pipeline.io import streams
    digest_of = digests.StreamDigest()
    try:
        handle = streams.create_for_write(target, compression_type="uncompressed")
        try:
            def write(chunk):
                handle.write(chunk)
                digest_of.update(chunk)

            for files_of_part in parts:
                if len(files_of_part) == 1:
                    for chunk in _chunks(files_of_part[0]):
                        write(chunk)
                    continue
                held, size = [], 0
                for line in heapq.merge(*(read_lines_in_range(path, 0, _PAST_THE_END) for path in files_of_part)):
                    held.append(line)
                    size += len(line) + 1
                    if size >= write_bytes_at_once:
                        write(b"\n".join(held) + b"\n")
                        held, size = [], 0
                if held:
                    write(b"\n".join(held) + b"\n")
        finally:
            handle.close()
    except OSError as error:
        raise write_failed(target, error) from error
    return digest_of.entry()


def json_bytes(value) -> bytes:
    return json.dumps(value, indent=2).encode("utf-8") + b"\n"


def read_bytes(path: str) -> bytes:
    with FileSystems.open(path, compression_type="uncompressed") as handle:
        return handle.read()


def read_lines_in_range(path: str, start: int, end: int, chunk_bytes: int = 1 << 16):
    """The lines of a text file that start at a byte offset in ``[start, end)``, without their line ends, read in
    chunks as they are yielded: ranges that cut a file anywhere, end to end, give each of its lines once (a line
    that starts in a range is read to its end, past the range if it must). Only ``read`` and ``seek`` are asked of
    the store's file (a ``readline`` of some stores' readers reads a byte a call)."""
    position = max(start - 1, 0)              # the file offset of buffer[at]
    skip = start > 0                          # the first line read ends the line the range starts in: the one before's
    buffer, at = b"", 0
    chunks = _chunks(path, position, chunk_bytes)
    try:
        while True:
            newline = buffer.find(b"\n", at)
            if newline < 0:
                data = next(chunks, b"")
                if not data:
                    if len(buffer) > at and not skip and position < end:
                        yield buffer[at:]     # the last line, without a line end
                    return
                buffer, at = buffer[at:] + data, 0
                continue
            line, line_start = buffer[at:newline], position
            position += newline + 1 - at
            at = newline + 1
            if skip:
                skip = False
                continue
            if line_start >= end:
                return
            yield line
    finally:
        chunks.close()                        # the file, when the range ends before it does


def line_ranges(size: int, range_bytes: int):
    """``(start, end)`` byte ranges of at most ``range_bytes`` that cover a file of ``size`` bytes, end to end; one
    range to the end of the file when its size is not known (0)."""
    if size <= 0:
        return [(0, _PAST_THE_END)]
    return [(start, min(start + range_bytes, size)) for start in range(0, size, range_bytes)]


def read_json(path: str):
    return json.loads(read_bytes(path))


def _chunks(path: str, start: int = 0, chunk_bytes: int = _CHUNK):
    """The file's bytes from ``start`` on, ``chunk_bytes`` at a time."""
    with FileSystems.open(path, compression_type="uncompressed") as handle:
        if start:
            handle.seek(start)
        while True:
            chunk = handle.read(chunk_bytes)
            if not chunk:
                return
            yield chunk
            if len(chunk) < chunk_bytes:   # a short read is the end (saves a request past it on GCS)
                return


def file_entry(path: str) -> dict:
    """``{"bytes", "sha256"}`` of a file, read in chunks."""
    return digests.stream_entry(_chunks(path))


def sha256(path: str) -> str:
    return file_entry(path)["sha256"]


def sha256_and_records(path: str):
    """(SHA-256, TFRecord records counted, -1 when the framing is cut) of a shard, read once in chunks."""
    digest, counter = digests.StreamDigest(), digests.RecordCounter()
    for chunk in _chunks(path):
        digest.update(chunk)
        counter.update(chunk)
    return digest.entry()["sha256"], counter.total()


def list_files(folder: str) -> Dict[str, int]:
    """``{path relative to folder: size}`` of every file below ``folder`` (none when it does not exist).

    Objects whose name ends in ``/`` are not files: TensorFlow writes such empty directory markers on
    gs:// (``transform/metadata/``), where a local disk has a folder.
    """
    if not paths.split_scheme(folder)[0]:
        return _list_local(folder)
    try:
        results = FileSystems.match([paths.join(folder, "**")])
    except BeamIOError:
        return {}
    found = {}
    for result in results:
        for metadata in result.metadata_list:
            relative = paths.relative_to(folder, metadata.path)
            if relative is not None and not metadata.path.endswith("/"):
                found[relative] = metadata.size_in_bytes
    return found


def _list_local(folder: str) -> Dict[str, int]:
    """What Beam's local ``match`` of ``folder/**`` gives (a walk of the folder, each file with its size; a file that
    goes meanwhile is left out), without the regular expression it builds and compiles from the pattern on every
    call: about 0.5 ms, and the verdict cache lists each of its bucket folders twice a run (454 calls in README's
    first run)."""
    found = {}
    for directory, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(directory, name)
            try:
                size = os.path.getsize(path)
            except OSError:
                continue
            relative = paths.relative_to(folder, path)
            if relative is not None:
                found[relative] = size
    return found


def match_paths(pattern: str):
    """The files matching a glob (none when nothing matches)."""
    try:
        return [metadata.path for result in FileSystems.match([pattern]) for metadata in result.metadata_list]
    except BeamIOError:
        return []


def exists(path: str) -> bool:
    return FileSystems.exists(path)


def remove_folder(folder: str) -> None:
    """Delete ``folder`` and everything below it; nothing when it is not there.

    A local folder is named without a trailing slash (Beam's local filesystem then removes the
    folder itself); an object-store prefix with one (without, only an object of exactly that name goes).
    """
    folder = folder.rstrip("/")
    if paths.split_scheme(folder)[0]:
        if list_files(folder):
            FileSystems.delete([folder + "/"])
    elif FileSystems.exists(folder):
        FileSystems.delete([folder])


def remove_files(file_paths) -> None:
    """Delete these files (a missing one is no error)."""
    present = [path for path in file_paths if FileSystems.exists(path)]
    if present:
        FileSystems.delete(present)


def remove_empty_folders(folder: str) -> None:
    """Remove the empty folders below a local ``folder`` (an object store has no folders to leave behind)."""
    if paths.split_scheme(folder)[0] or not os.path.isdir(folder):
        return
    for parent, _, _ in os.walk(folder, topdown=False):
        if parent != folder and not os.listdir(parent):     # its children walked (and removed) first
            try:
                os.rmdir(parent)
            except OSError:
                pass                 # filled again meanwhile, or not ours to remove
