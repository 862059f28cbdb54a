"""Encoding ``tf.train.Example`` records and TFRecord framing without TensorFlow.

The wire format of ``tf.train.Example`` is small and stable, so it is written
here directly. That keeps TensorFlow off the hot path of the Beam workers and
makes the bytes deterministic: features are always written in sorted key
order, so the same example gives the same bytes on every runner. Tests parse
these bytes with ``tf.train.Example`` and read the files with ``tf.data``.
"""

import struct
from typing import Dict, Iterable, Sequence, Union

import google_crc32c

from beam_pipeline.core import features as f

FeatureValue = Union[bytes, str, int, float, Sequence[int], Sequence[float], Sequence[bytes]]


def _varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2)."""
    return _varint((number << 3) | 2) + _varint(len(payload)) + payload


def bytes_feature(values: Iterable[Union[bytes, str]]) -> bytes:
    items = b"".join(_field(1, v.encode("utf-8") if isinstance(v, str) else bytes(v)) for v in values)
    return _field(1, items)           # Feature.bytes_list


def int64_feature(values: Iterable[int]) -> bytes:
    packed = b"".join(_varint(int(v)) for v in values)
    return _field(3, _field(1, packed) if packed else b"")   # Feature.int64_list


def float_feature(values: Iterable[float]) -> bytes:
    packed = b"".join(struct.pack("<f", float(v)) for v in values)
    return _field(2, _field(1, packed) if packed else b"")   # Feature.float_list


def encode_example(features: Dict[str, bytes]) -> bytes:
    """Serialize ``{name: encoded Feature}`` as a ``tf.train.Example``, keys sorted."""
    entries = b"".join(
        _field(1, _field(1, name.encode("utf-8")) + _field(2, feature))
        for name, feature in sorted(features.items()))
    return _field(1, entries)


def _masked_crc(data: bytes) -> int:
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def frame_record(record: bytes) -> bytes:
    """One TFRecord: length, CRC of the length, data, CRC of the data."""
    length = struct.pack("<Q", len(record))
    return length + struct.pack("<I", _masked_crc(length)) + record + struct.pack("<I", _masked_crc(record))


def pair_example(pair, image: bytes, mask: bytes = b"") -> bytes:
    """The serialized ``tf.train.Example`` of a ValidPair and the bytes to store."""
    values = {
        f.IMAGE_ENCODED: bytes_feature([image]),
        f.IMAGE_FORMAT: bytes_feature([pair.image_format]),
        f.IMAGE_HEIGHT: int64_feature([pair.height]),
        f.IMAGE_WIDTH: int64_feature([pair.width]),
        f.IMAGE_SOURCE_ID: bytes_feature([pair.ref.source_id]),
        f.IMAGE_KEY_SHA256: bytes_feature([pair.image_sha256]),
    }
    if pair.class_pixels:
        values[f.MASK_ENCODED] = bytes_feature([mask])
        values[f.MASK_FORMAT] = bytes_feature(["png"])
        values[f.CLASS_PIXELS] = int64_feature(pair.class_pixels)
        values[f.IGNORE_PIXELS] = int64_feature([pair.ignore_pixels])
    else:
        values[f.CLASS_LABEL] = int64_feature([pair.label])
    return encode_example(values)
