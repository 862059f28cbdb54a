"""The small records that travel between pipeline stages.

None of them holds pixels or file bytes: the shuffle carries references and
metadata only. The writer takes a pair's bytes from validation's spill
(core/rerun/spill.py: a reference, checked by its CRC32C), or reads them again from
the source files and checks them against the digest taken at validation.
"""

import dataclasses
import json
import pickle
import struct
from typing import Iterator, Optional, Tuple

from beam_pipeline.core.repeat_weights import weight_units
from beam_pipeline.core.sharding import shard_name_parts

Metadata = Tuple[Tuple[str, object], ...]

# Outcome.status: what happened to a discovered input that is not written.
REJECTED = "rejected"        # the input is bad (a reason code from reasons.py)
FILTERED = "filtered"        # left out by the user's own selection
DUPLICATE = "duplicate"      # valid, but its content is written under another key
VALID = "valid"              # (--plan samples only) the pair would be written


def pack(record) -> bytes:
    """A record as one bytes value, for the values of a shuffle (see beam_pipeline/stages/shuffle.py).

    Beam's DirectRunner engine keeps every grouped value as a decoded Python
    object until the group is read; one bytes object per record is several
    times smaller than a dataclass with its strings and tuples, which keeps
    the run's memory close to flat as the corpus grows.
    """
    return pickle.dumps(record, protocol=pickle.HIGHEST_PROTOCOL)


def unpack(data: bytes):
    return pickle.loads(data)


def frame_packed(data: bytes) -> bytes:
    """``data`` with its length in front, to write one packed record after another into a file."""
    return struct.pack("<I", len(data)) + data


def read_framed(handle) -> Iterator[bytes]:
    """The records :func:`frame_packed` wrote to ``handle``, one at a time; raises on a cut-off file."""
    while True:
        header = handle.read(4)
        if not header:
            return
        (length,) = struct.unpack("<I", header)
        data = handle.read(length)
        if len(header) < 4 or len(data) < length:
            raise IOError(f"a record file ends inside a record ({len(data)} of {length} bytes)")
        yield data


class _CompactPickle:
    """Pickle a frozen dataclass as (class, field values): no field names in every record."""

    _field_names: Tuple[str, ...] = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._field_names = ()

    def __reduce__(self):
        cls = self.__class__
        if not cls._field_names:
            cls._field_names = tuple(field.name for field in dataclasses.fields(cls))
        return cls, tuple(getattr(self, name) for name in cls._field_names)


@dataclasses.dataclass(frozen=True)
class PairRef(_CompactPickle):
    """One discovered input: an image with its mask or label, not yet read.

    ``key`` is unique per discovered pair and stable across runs; every hash-based
    decision (sampling, split, shard) is made on it. ``source_id`` is the
    human-readable id written to the example (the image path relative to the
    input root).
    """
    key: str
    source_id: str
    image: Optional[str]              # Full path (any Beam filesystem scheme).
    mask: Optional[str] = None        # Segmentation only.
    label: Optional[str] = None       # Classification only: a class name or id, as given.
    metadata: Metadata = ()           # Listing columns other than image/mask/label.
    split: Optional[str] = None       # Set by the selection (which also drops the metadata).
    drawing: bytes = b""              # A mask drawn from annotations (core/masks/drawn.py): what draws it; b"": a file.
    group: str = ""                   # --split_group: the pair's split group ("": the pair alone).

    def meta(self) -> dict:
        return dict(self.metadata)


@dataclasses.dataclass(frozen=True)
class Outcome(_CompactPickle):
    """What happened to one discovered input that is not written.

    ``status`` is REJECTED, FILTERED or DUPLICATE; ``reason`` a code from
    :mod:`reasons`. This is also the row format of the rejects files.
    """
    status: str
    reason: str
    detail: str
    key: str
    image: Optional[str]
    mask: Optional[str] = None
    label: Optional[str] = None

    @classmethod
    def for_ref(cls, ref: PairRef, status: str, reason: str, detail: str) -> "Outcome":
        """The outcome of one discovered pair, with its key and paths."""
        return cls(status, reason, detail, key=ref.key, image=ref.image, mask=ref.mask, label=ref.label)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)


@dataclasses.dataclass(frozen=True)
class ValidPair(_CompactPickle):
    """A validated pair: everything the writer and the statistics need, and no pixels.

    ``class_pixels[c]`` is the number of mask pixels of class ``c``;
    ``ignore_pixels`` those equal to the ignore label. For classification the
    mask fields are empty and ``label`` is the class id.
    No file's bytes cross a shuffle, only this metadata: ``spill`` says where
    validation left the bytes the record stores (core/rerun/spill.py; empty when it did
    not), and without it the writer reads the source files again, converting a
    file that validation converted (to RGB PNG, or 8-bit grey PNG) the same way.
    """
    ref: PairRef
    height: int
    width: int
    image_format: str                 # Format as stored: "jpeg" or "png".
    image_sha256: str                 # Digest of the source file's bytes.
    image_stored_bytes: int           # Bytes of the encoded image as stored.
    image_converted: bool             # True when the image was re-encoded (core/images.py).
    mask_sha256: str = ""
    mask_stored_bytes: int = 0
    mask_converted: bool = False
    class_pixels: Tuple[int, ...] = ()
    ignore_pixels: int = 0
    label: int = -1
    channel_sum: Tuple[int, ...] = (0, 0, 0)
    channel_sum_squares: Tuple[int, ...] = (0, 0, 0)
    point_classes: bytes = b""            # Class of each stored sample point (uint8 each).
    point_yx: bytes = b""                 # (y, x) of each sample point (uint16 little-endian each).
    copy: int = 0                         # Repeat-factor copy index; 0 is the original.
    stratum: int = -1                     # --balance strata: the image's rarest class; -1 otherwise.
    repeat_factor: float = 1.0            # The image's repeat factor (train split, when balancing).
    source_pixels: Tuple[Tuple[int, int], ...] = ()   # Mapped masks: (source value or colour, pixels).
    phash: bytes = b""                    # The image's perceptual hash (core/leakage/phash.py), for near duplicates.
    spill: Tuple = ()                     # core/rerun/spill.SpillRef of the stored bytes, or () (read the sources).

    @property
    def shard_group(self) -> str:
        """Shards are made per group: the split, or the split's stratum."""
        return self.ref.split if self.stratum < 0 else f"{self.ref.split}-stratum{self.stratum:03d}"

    @property
    def present_classes(self) -> Tuple[int, ...]:
        if self.class_pixels:
            return tuple(c for c, n in enumerate(self.class_pixels) if n)
        return (self.label,) if self.label >= 0 else ()

    @property
    def shard_key(self) -> str:
        """The key that places this record (each copy of an image is placed on its own)."""
        return self.ref.key if self.copy == 0 else f"{self.ref.key}#copy{self.copy}"

    @property
    def content_key(self) -> str:
        """Equal for two pairs with byte-identical files (and the same label)."""
        return f"{self.image_sha256}:{self.mask_sha256}:{self.label}"

    @property
    def estimated_record_bytes(self) -> int:
        """Close to the serialized record size; used to size shards by bytes."""
        return (self.image_stored_bytes + self.mask_stored_bytes + 160 + 10 * len(self.class_pixels)
                + 2 * len(self.point_yx) + 2 * len(self.ref.source_id))


@dataclasses.dataclass(frozen=True)
class ShardInfo(_CompactPickle):
    """One written shard, as listed in ``manifest.json``."""
    group: str                            # The split, or "<split>-stratum<c>".
    split: str
    index: int
    num_shards: int
    path: str                         # Relative to the output folder: runs/<run_id>/<name>.
    records: int
    bytes: int
    sha256: str
    originals: int = 0                   # Records that are not repeat copies.
    class_images: Tuple[int, ...] = ()   # Examples that contain each class (or have each label).
    class_pixels: Tuple[int, ...] = ()   # Segmentation: pixels of each class.
    ignore_pixels: int = 0
    stratum: int = -1
    repeat_weight: int = 0               # Sum of the records' repeat factors, exact (core/balance.weight_units).
    mask_values: Tuple[Tuple[int, int, int], ...] = ()   # Mapped masks: (source, pixels, images), originals only.
    keys: str = ""                        # The shard's keys file (core/rerun/versions.py), relative to the output.
    class_index: str = ""                 # The shard's part of the class index ("" when it has no train record).
    side_files: Tuple[Tuple[str, int, str], ...] = ()    # (path, bytes, sha256) of the two files above.
    deleted: Tuple[int, ...] = ()         # Record indices (0-based, in file order) the version does not hold.
    class_repeat_weight: Tuple[int, ...] = ()     # The live records' repeat factors summed per class they hold
                                                  # (exact, as repeat_weight).
    live_bytes: int = -1                  # The live records' framed bytes (-1: all of the file's, none deleted).


@dataclasses.dataclass(frozen=True)
class Refusal:
    """Why a run stops before any shard is written (a gate failed); the launcher reports ``message``."""
    gate: str                             # which check refused: "max_growth", ...
    message: str                          # one line for the user


class ShardTally:
    """Running counts over a shard's live records, in file order: per class presence, pixels and repeat weight, the
    ignore pixels, the mapped masks' source values, and the records, originals, repeat weight and framed bytes. Its
    :meth:`info` is the one place a shard's ShardInfo is built (the writer's shards, the ones a re-run adopts, and
    the parent shards it keeps)."""

    def __init__(self, num_classes: int):
        self._images = [0] * num_classes
        self._pixels = [0] * num_classes
        self._segmentation = False
        self.ignore = 0
        self._sources = {}                 # mapped masks' source value -> [pixels, images], originals only
        self._weighted = [0] * num_classes     # the records' repeat factors summed per class they hold (exact)
        self.originals = self.weight = self.live_bytes = 0

    def add(self, pair: ValidPair, framed_bytes: int = 0) -> None:
        """The next live record, of ``pair``, ``framed_bytes`` long."""
        self.originals += pair.copy == 0
        self.weight += weight_units(pair.repeat_factor)
        self.live_bytes += framed_bytes
        self._add_classes(pair)

    def info(self, path: str, group: str, split: str, *, records: int, bytes: int, sha256: str,
             side_files: Tuple[str, str, Tuple[Tuple[str, int, str], ...]] = ("", "", ()),
             deleted: Tuple[int, ...] = (), stratum: int = -1) -> "ShardInfo":
        """The ShardInfo of the shard at ``path`` (its name gives its index and count: core/sharding.py) holding
        ``records`` records (the deleted ones too) in ``bytes`` bytes; ``side_files``: its keys file, its part of
        the class index, and their (path, bytes, sha256)."""
        _, index, num_shards = shard_name_parts(path)
        keys, class_index, files = side_files
        return ShardInfo(group=group, split=split, index=index, num_shards=num_shards, path=path, records=records,
                         bytes=bytes, sha256=sha256, originals=self.originals, class_images=self.images(),
                         class_pixels=self.pixels(), ignore_pixels=self.ignore, stratum=stratum,
                         repeat_weight=self.weight, mask_values=self.mask_values(), keys=keys,
                         class_index=class_index, side_files=files, deleted=tuple(deleted),
                         class_repeat_weight=self.weighted(), live_bytes=self.live_bytes if deleted else -1)

    def _add_classes(self, pair: ValidPair) -> None:
        for c in pair.present_classes:
            if 0 <= c < len(self._weighted):
                self._weighted[c] += weight_units(pair.repeat_factor)
        if pair.class_pixels:
            self._segmentation = True
            for c, count in enumerate(pair.class_pixels):
                if count:
                    self._images[c] += 1
                    self._pixels[c] += count
            self.ignore += pair.ignore_pixels
            if pair.copy == 0:
                for source, pixels in pair.source_pixels:
                    tally = self._sources.setdefault(source, [0, 0])
                    tally[0] += pixels
                    tally[1] += 1
        elif 0 <= pair.label < len(self._images):
            self._images[pair.label] += 1

    def images(self) -> Tuple[int, ...]:
        return tuple(self._images)

    def pixels(self) -> Tuple[int, ...]:
        return tuple(self._pixels) if self._segmentation else ()

    def weighted(self) -> Tuple[int, ...]:
        return tuple(self._weighted)

    def mask_values(self) -> Tuple[Tuple[int, int, int], ...]:
        return tuple((source, pixels, images) for source, (pixels, images) in sorted(self._sources.items()))
