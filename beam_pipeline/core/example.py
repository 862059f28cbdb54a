"""Encoding ``tf.train.Example`` records and TFRecord framing without TensorFlow.

The wire format of ``tf.train.Example`` is small and stable, so it is written
here directly. That keeps TensorFlow off the hot path of the Beam workers and
makes the bytes deterministic: features are always written in sorted key
order, so the same example gives the same bytes on every runner. Tests parse
these bytes with ``tf.train.Example`` and read the files with ``tf.data``.
"""

import struct
from typing import Dict, Iterable, List, Sequence, Union

import google_crc32c
import numpy as np

from beam_pipeline.core import features as f
from beam_pipeline.core.points import unflatten_points

FeatureValue = Union[bytes, str, int, float, Sequence[int], Sequence[float], Sequence[bytes]]


def _varint(value: int) -> bytes:
    if 0 <= value < _CACHED:
        return _SMALL_VARINTS[value]
    return _encode_varint(value)


def _encode_varint(value: int) -> bytes:
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


_CACHED = 1 << 14
_SMALL_VARINTS = tuple(_encode_varint(value) for value in range(_CACHED))   # Tags and most lengths.


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2)."""
    return _varint((number << 3) | 2) + _varint(len(payload)) + payload


def bytes_feature(values: Iterable[Union[bytes, str]]) -> bytes:
    items = b"".join(_field(1, v.encode("utf-8") if isinstance(v, str) else bytes(v)) for v in values)
    return _field(1, items)           # Feature.bytes_list


_VECTOR_MIN = 8          # From this many values on, varints are encoded with numpy.
_SHIFTS = np.arange(0, 70, 7, dtype=np.uint64)


def _packed_varints(values) -> bytes:
    """The concatenated varints of non-negative ints, vectorised (same bytes as :func:`_varint`)."""
    array = np.asarray(values, dtype=np.uint64)
    groups = (array[:, None] >> _SHIFTS[None, :]) & np.uint64(0x7F)
    more = (array[:, None] >> (_SHIFTS[None, :] + np.uint64(7))) > 0
    used = np.concatenate([np.ones((len(array), 1), bool), more[:, :-1]], axis=1)
    encoded = (groups | (more.astype(np.uint64) << np.uint64(7))).astype(np.uint8)
    return encoded[used].tobytes()


def int64_feature(values: Iterable[int]) -> bytes:
    values = list(values)
    if len(values) >= _VECTOR_MIN and min(values) >= 0:
        packed = _packed_varints(values)
    else:
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


# A serialized record as consecutive pieces (``b"".join(pieces)`` is the record): an image's or a mask's bytes
# are a piece of their own, so that encoding, framing, hashing and writing a record never copies them. Each
# copy of a 250 KB photo costs a fresh allocation and its page faults, about 0.1 ms (docs/benchmarks.md).
Pieces = List[bytes]
_LARGE = 4096             # a value of this many bytes or more stays a piece of its own


def large_bytes_feature(value: bytes) -> Pieces:
    """:func:`bytes_feature` of one value, as pieces: its headers, then the value itself."""
    inner = _varint(0x0A) + _varint(len(value))                       # BytesList.value
    return [_varint(0x0A) + _varint(len(inner) + len(value)) + inner, value]   # Feature.bytes_list


def encode_example_pieces(features: Dict[str, Union[bytes, Pieces]]) -> Pieces:
    """:func:`encode_example` as pieces; a feature given as pieces (:func:`large_bytes_feature`) is not joined.
    The same bytes as ``encode_example`` once joined."""
    body: Pieces = []
    total = 0
    for name, feature in sorted(features.items()):
        parts = [feature] if isinstance(feature, bytes) else feature
        length = sum(len(part) for part in parts)
        head = _field(1, name.encode("utf-8")) + _varint(0x12) + _varint(length)   # the key, Feature's header
        entry = _varint(0x0A) + _varint(len(head) + length) + head
        body.append(entry)
        body.extend(parts)
        total += len(entry) + length
    return _merged([_varint(0x0A) + _varint(total)] + body)


def _merged(pieces: Pieces) -> Pieces:
    """Adjacent small pieces joined, large ones kept as they are."""
    out: Pieces = []
    small: List[bytes] = []
    for piece in pieces:
        if len(piece) >= _LARGE:
            if small:
                out.append(b"".join(small))
                small = []
            out.append(piece)
        else:
            small.append(piece)
    if small:
        out.append(b"".join(small))
    return out


def frame_pieces(pieces: Pieces) -> Pieces:
    """:func:`frame_record` of the record ``pieces`` form, as pieces."""
    length = struct.pack("<Q", sum(len(piece) for piece in pieces))
    crc = 0
    for piece in pieces:
        crc = google_crc32c.extend(crc, piece)
    return _merged([length + struct.pack("<I", masked_crc(length))] + list(pieces) + [struct.pack("<I", mask_crc(crc))])


def mask_crc(crc: int) -> int:
    """TFRecord's masking of a CRC-32C: rotated right by 15 bits, plus a constant."""
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def masked_crc(data: bytes) -> int:
    """TFRecord's masked CRC-32C of ``data``, as a frame stores it (the readers check it: report/tfrecord.py)."""
    return mask_crc(google_crc32c.value(data))


def frame_record(record: bytes) -> bytes:
    """One TFRecord: length, CRC of the length, data, CRC of the data."""
    length = struct.pack("<Q", len(record))
    return length + struct.pack("<I", masked_crc(length)) + record + struct.pack("<I", masked_crc(record))


def _read_varint(data, at: int):
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7


def _fields(data):
    """(field number, wire type, value) of a message's fields: a length-delimited value as a memoryview (no copy),
    a varint as an int; fixed-width values as memoryviews."""
    data = memoryview(data)
    at = 0
    while at < len(data):
        tag, at = _read_varint(data, at)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, at = _read_varint(data, at)
        elif wire == 2:
            length, at = _read_varint(data, at)
            value, at = data[at:at + length], at + length
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            value, at = data[at:at + width], at + width
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        yield number, wire, value


def example_bytes_values(record, names: Sequence[str]) -> Dict[str, memoryview]:
    """The first value of each bytes feature of ``names`` in a serialized ``tf.train.Example`` (those present),
    as views into ``record``: how the writer takes the image and the mask back out of a spilled record."""
    wanted = set(names)
    found: Dict[str, memoryview] = {}
    for number, _, features in _fields(record):                     # Example.features
        if number != 1:
            continue
        for entry_number, _, entry in _fields(features):            # Features.feature (a map entry)
            if entry_number != 1:
                continue
            key = value = None
            for field, _, item in _fields(entry):
                if field == 1:
                    key = bytes(item).decode("utf-8")
                elif field == 2:
                    value = item
            if key in wanted and value is not None:
                for kind, _, listed in _fields(value):              # Feature.bytes_list
                    if kind == 1:
                        first = next((v for n, _, v in _fields(listed) if n == 1), None)
                        if first is not None:
                            found[key] = first
    return found


def pair_example(pair, image: bytes, mask: bytes = b"") -> bytes:
    """The serialized ``tf.train.Example`` of a ValidPair and the bytes to store."""
    return b"".join(pair_example_pieces(pair, image, mask))


def pair_example_pieces(pair, image: bytes, mask: bytes = b"") -> Pieces:
    """:func:`pair_example` as pieces: the image's and the mask's bytes are not copied."""
    return encode_example_pieces(_pair_features(pair, image, mask))


def _pair_features(pair, image: bytes, mask: bytes) -> Dict[str, Union[bytes, Pieces]]:
    values = {
        f.IMAGE_ENCODED: large_bytes_feature(image),
        f.IMAGE_FORMAT: bytes_feature([pair.image_format]),
        f.IMAGE_HEIGHT: int64_feature([pair.height]),
        f.IMAGE_WIDTH: int64_feature([pair.width]),
        f.IMAGE_SOURCE_ID: bytes_feature([pair.ref.source_id]),
        f.IMAGE_KEY_SHA256: bytes_feature([pair.image_sha256]),
        f.CHANNEL_SUM: int64_feature(pair.channel_sum),
        f.CHANNEL_SUM_SQUARES: int64_feature(pair.channel_sum_squares),
        f.REPEAT_COPY: int64_feature([pair.copy]),
    }
    if pair.class_pixels:
        values[f.MASK_ENCODED] = large_bytes_feature(mask)
        values[f.MASK_FORMAT] = bytes_feature(["png"])
        values[f.CLASS_PIXELS] = int64_feature(pair.class_pixels)
        values[f.IGNORE_PIXELS] = int64_feature([pair.ignore_pixels])
        point_classes, point_yx = unflatten_points(pair.point_classes, pair.point_yx)
        values[f.POINT_CLASSES] = int64_feature(point_classes)
        values[f.POINT_YX] = int64_feature(point_yx)
    else:
        values[f.CLASS_LABEL] = int64_feature([pair.label])
    return values
