"""Reading the TFRecord container format without TensorFlow (writing is ``core.example.frame_record``).

A TFRecord file is a sequence of records, each framed as::

    uint64 length (little endian) | uint32 masked CRC-32C of length | data | uint32 masked CRC-32C of data

The functions work on any binary file object, so the same code reads a local
file or one opened through Beam's FileSystems (gs://, s3://).
"""

import struct
from typing import BinaryIO, Iterator, Optional

from beam_pipeline.core.example import masked_crc

_LENGTH = struct.Struct("<Q")
_CRC = struct.Struct("<I")


class CorruptRecord(ValueError):
    """A TFRecord frame whose length or checksum is wrong, or that ends early."""


def _read_exact(handle: BinaryIO, n: int, what: str) -> bytes:
    data = handle.read(n)
    if len(data) != n:
        raise CorruptRecord(f"file ends inside a record's {what} ({len(data)} of {n} bytes)")
    return data


def _read_header(handle: BinaryIO) -> Optional[int]:
    """The next record's data length, or None at the end of the file."""
    header = handle.read(_LENGTH.size + _CRC.size)
    if not header:
        return None
    if len(header) != _LENGTH.size + _CRC.size:
        raise CorruptRecord(f"file ends inside a record header ({len(header)} bytes)")
    length_bytes = header[:_LENGTH.size]
    if _CRC.unpack(header[_LENGTH.size:])[0] != masked_crc(length_bytes):
        raise CorruptRecord("record length checksum mismatch")
    return _LENGTH.unpack(length_bytes)[0]


def read_records(handle: BinaryIO, max_bytes: Optional[int] = None) -> Iterator[bytes]:
    """Yield each record's data, checking both checksums; stop before ``max_bytes`` of data are passed."""
    passed = 0
    while True:
        length = _read_header(handle)
        if length is None:
            return
        if max_bytes is not None and passed + length > max_bytes:
            return
        data = _read_exact(handle, length, "data")
        if _CRC.unpack(_read_exact(handle, _CRC.size, "checksum"))[0] != masked_crc(data):
            raise CorruptRecord("record data checksum mismatch")
        passed += length
        yield data
