"""File access through Beam's filesystems, so local paths, gs:// and s3:// work alike."""

from typing import Iterator, Tuple, Union

from apache_beam.io.filesystem import BeamIOError
from apache_beam.io.filesystems import FileSystems

from beam_pipeline.core import reasons
from beam_pipeline.core.checks import Rejection

_CHUNK = 4 * 1024 * 1024


def read_bytes(path: str, max_bytes: int, what: str) -> Union[bytes, Rejection]:
    """All bytes of ``path``, or a Rejection (missing, unreadable, empty or too large).

    At most ``max_bytes + 1`` bytes are read, so an oversized file costs no memory.
    """
    try:
        handle = FileSystems.open(path, compression_type="uncompressed")
    except (BeamIOError, OSError) as error:
        if not _exists(path):
            return Rejection(reasons.MISSING_FILE, f"{what} file not found: {path}")
        return Rejection(reasons.UNREADABLE, f"{what} file cannot be opened: {error}")
    try:
        with handle:
            chunks = []
            size = 0
            while size <= max_bytes:
                chunk = handle.read(min(_CHUNK, max_bytes + 1 - size))
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
    except (BeamIOError, OSError) as error:
        return Rejection(reasons.UNREADABLE, f"{what} file cannot be read: {error}")
    if size > max_bytes:
        return Rejection(reasons.FILE_TOO_LARGE, f"{what} file is larger than {max_bytes} bytes")
    if size == 0:
        return Rejection(reasons.EMPTY_FILE, f"{what} file is empty")
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _exists(path: str) -> bool:
    try:
        return FileSystems.exists(path)
    except (BeamIOError, OSError):
        return False


def match_files(pattern: str) -> Iterator[Tuple[str, int]]:
    """``(path, size)`` of every file matching a glob; nothing when none matches."""
    try:
        results = FileSystems.match([pattern])
    except BeamIOError:
        return
    for result in results:
        for metadata in result.metadata_list:
            yield metadata.path, metadata.size_in_bytes
