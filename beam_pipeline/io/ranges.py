"""Byte ranges of a file on any filesystem Beam knows, for validation's spill (core/spill.py): on gs:// and s3://
exactly the bytes asked for, in one ranged GET.

Beam's readers cost a metadata request per open and then fetch from the offset on, up to their 16 MiB
buffer: for a 250 KB entry in a spill file of hundreds of MB that is two requests and up to 64 times the
bytes. io/streams.py's S3 client (one per thread) and Beam's GCS client make the request here.
"""

from typing import Tuple

from apache_beam.io.filesystems import FileSystems

from beam_pipeline.io import streams


def read_ranges(path: str, offset: int, lengths: Tuple[int, ...]) -> Tuple[bytes, ...]:
    """The consecutive byte ranges of ``lengths`` from ``offset`` of ``path``: on gs:// and s3:// one ranged GET
    of exactly those bytes (an open through Beam's readers costs a metadata request and fetches from the
    offset up to 16 MiB), locally a read per range; raises when the file is missing or shorter."""
    total = sum(lengths)
    if path.startswith(streams.S3_SCHEME) or path.startswith("gs://"):
        data = _ranged_get(path, offset, total) if total else b""
        if len(data) != total:
            raise IOError(f"{path} holds {len(data)} of the {total} bytes asked for at offset {offset}")
        out, start = [], 0
        for length in lengths:
            out.append(data[start:start + length])
            start += length
        return tuple(out)
    with streams.open_for_read(path) as handle:
        handle.seek(offset)
        out = tuple(handle.read(length) if length else b"" for length in lengths)
    if sum(len(part) for part in out) != total:
        raise IOError(f"{path} ends before the {total} bytes asked for at offset {offset}")
    return out


def _ranged_get(path: str, offset: int, length: int) -> bytes:
    if path.startswith(streams.S3_SCHEME):
        from apache_beam.io.aws.s3io import parse_s3_path
        bucket, key = parse_s3_path(path)
        response = streams.s3_client(path).get_object(Bucket=bucket, Key=key,
                                                      Range=f"bytes={offset}-{offset + length - 1}")
        return response["Body"].read()
    bucket, _, name = path[len("gs://"):].partition("/")
    client = FileSystems.get_filesystem(path)._gcsIO().client        # noqa: SLF001 - Beam's client
    return client.bucket(bucket).blob(name).download_as_bytes(start=offset, end=offset + length - 1, checksum=None)
