"""Records across shuffles: packed to one bytes value each, counted, and moved by Beam or through files.

Only metadata crosses a shuffle (PairRef, ValidPair: no pixels, no file bytes). Each record travels as
the bytes of ``core.records.pack``. Two kinds of boundary carry records from stage to stage:

* :class:`GroupPackedByKey`: ``(key, record)`` grouped by key (also what spreads the pairs over the
  workers before validation: grouped by verdict bucket, stages/validate.py), from one input or several;
* :class:`Materialize`: the same records, for a consumer that waits on a side input (the stage
  cannot start before the side input is complete, so its main input is held until then), or several
  inputs' records flattened. Its two halves, :class:`HoldRecords` and :class:`ReadHeldRecords`, serve a
  consumer that runs in another environment than the records' maker.

How they are moved is the ShuffleSpec's choice (``--shuffle``). ``beam``: Beam's GroupByKey, and
nothing for Materialize; the right choice where the runner's shuffle keeps its data
on disk (Dataflow, Flink). ``files``: the records go into files in the spec's folder, a file per
bucket (a stable hash of the key) and bundle, and only the files' paths cross the
runner; each bucket is then read, and grouped, by one worker. Beam's DirectRunner engine keeps every
PCollection that crosses a stage in the launcher's memory and hands each worker its whole part of a
stage's input at once, so with ``beam`` the memory of both grows with the number of pairs; with
``files`` it holds paths, and a worker one bucket (docs/scale.md). The groups and records are the
same either way, and so is every output byte. This is the only module that packs and unpacks records
for the pipeline.
"""

import uuid
from typing import Dict, List

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics
from apache_beam.transforms.window import GlobalWindows

from beam_pipeline.core import paths
from beam_pipeline.core.failures import write_failed
from beam_pipeline.core.hashing import stable_hash
from beam_pipeline.core.records import frame_packed, pack, read_framed, unpack
from beam_pipeline.stages.counters import SHUFFLE
from beam_pipeline.stages.signatures import AnyOutput
from beam_pipeline.stages.specs import ShuffleSpec

BUCKET_SALT = "shuffle"


_SHUFFLE_BYTES = Metrics.counter(*SHUFFLE)      # Beam's counters find the running step's cell at each inc


def packed(record) -> bytes:
    """``record`` packed, and counted as bytes about to cross a shuffle."""
    data = pack(record)
    _SHUFFLE_BYTES.inc(len(data))
    return data


class Unpacked:
    """The records of one group, unpacked one at a time as they are read (re-iterable)."""

    def __init__(self, values):
        self._values = values

    def __iter__(self):
        return (unpack(data) for data in self._values)


def _pack_value(element):
    key, record = element
    return key, packed(record)


def _unpack_values(element):
    key, values = element
    return key, Unpacked(values)


# --------------------------------------------------------------------------
# Through files
# --------------------------------------------------------------------------
class _WriteBucketsFn(AnyOutput, beam.DoFn):
    """``(key, record)`` -> nothing; at the bundle's end ``(bucket, path)`` of each file it wrote.

    The record is packed here (one step fewer per element than a packing Map before it). Each bucket's records go
    to a file of this bundle's own (a new name per bundle, so a retried bundle never mixes with its first attempt);
    a record lands in the bucket of a stable hash of its key."""

    def __init__(self, spec: ShuffleSpec, name: str):
        self._folder = paths.join(spec.folder, name)
        self._buckets = spec.buckets
        self._files: Dict[int, _RecordFile] = {}
        self._prefix = ""

    def start_bundle(self):
        self._files, self._prefix = {}, uuid.uuid4().hex

    def process(self, element):
        key, record = element
        value = packed(record)
        key_bytes = pack(key)
        data = frame_packed(key_bytes) + frame_packed(value)
        bucket = stable_hash(BUCKET_SALT, key_bytes.hex()) % self._buckets
        handle = self._files.get(bucket)
        if handle is None:
            handle = self._files[bucket] = _RecordFile(paths.join(self._folder, f"{self._prefix}-{bucket:05d}.records"))
        handle.write(data)

    def finish_bundle(self):
        files, self._files = self._files, {}
        for bucket, handle in sorted(files.items()):
            yield GlobalWindows.windowed_value((bucket, handle.close()))


class _RecordFile:
    """A file of framed records being written; an OSError names it (a full disk is one line, not a traceback)."""

    def __init__(self, path: str):
        self.path = path
        try:
            self._handle = FileSystems.create(path, compression_type="uncompressed")
        except OSError as error:
            raise write_failed(path, error) from error

    def write(self, data: bytes) -> None:
        try:
            self._handle.write(data)
        except OSError as error:
            raise write_failed(self.path, error) from error

    def close(self) -> str:
        try:
            self._handle.close()
        except OSError as error:
            raise write_failed(self.path, error) from error
        return self.path


def _framed_values(path: str):
    with FileSystems.open(path, compression_type="uncompressed") as handle:
        yield from read_framed(handle)


class _ReadBucketFn(beam.DoFn):
    """``(bucket, [path, ...])`` -> the bucket's groups ``(key, Unpacked values)``.

    A bucket is read by one worker and grouped in memory (one bucket of the shuffle, never the whole
    of it). The files are removed once read."""

    def process(self, element):
        _, files = element
        files = sorted(files)
        groups: Dict[bytes, List[bytes]] = {}
        for path in files:
            values = _framed_values(path)
            for key_bytes in values:
                groups.setdefault(key_bytes, []).append(next(values))
        for key_bytes in sorted(groups):
            yield unpack(key_bytes), Unpacked(groups.pop(key_bytes))
        FileSystems.delete(files)


class _ThroughFiles(beam.PTransform):
    """Keyed inputs (one, or several grouped together) into one files shuffle: each input is written by the stage
    that makes it, and with several only the files' paths are flattened. A Flatten of the records themselves
    would be a stage of its own on Beam's DirectRunner engine, which holds every record crossing it in the
    launcher's memory (docs/scale.md)."""

    def __init__(self, spec: ShuffleSpec):
        super().__init__()
        self._spec = spec

    def expand(self, inputs):
        name = uuid.uuid4().hex
        if len(inputs) == 1:
            files = inputs[0] | "WriteBuckets" >> beam.ParDo(_WriteBucketsFn(self._spec, name))
        else:
            files = (tuple(keyed | f"WriteBuckets{i}" >> beam.ParDo(_WriteBucketsFn(self._spec, name))
                           for i, keyed in enumerate(inputs))
                     | "AllBucketFiles" >> beam.Flatten())
        # (bucket, path of a file of a bundle's records in that bucket)
        return (files
                | "GroupFilesByBucket" >> beam.GroupByKey()
                # (bucket, [path, ...])
                | "ReadBuckets" >> beam.ParDo(_ReadBucketFn()))
                # (key, Unpacked records)


class _ReadFileFn(beam.DoFn):
    """path -> the records of one bundle's file (bytes), streamed; the file is removed once read."""

    def process(self, path: str):
        yield from _framed_values(path)
        FileSystems.delete([path])


class _WriteFileFn(beam.DoFn):
    """record -> nothing, packed; at the bundle's end the path of the one file its records went to."""

    def __init__(self, spec: ShuffleSpec, name: str):
        self._folder = paths.join(spec.folder, name)
        self._file = None

    def process(self, record):
        data = packed(record)
        if self._file is None:
            self._file = _RecordFile(paths.join(self._folder, f"{uuid.uuid4().hex}.records"))
        self._file.write(frame_packed(data))

    def finish_bundle(self):
        if self._file is not None:
            record_file, self._file = self._file, None
            yield GlobalWindows.windowed_value(record_file.close())


# --------------------------------------------------------------------------
# The two boundaries
# --------------------------------------------------------------------------
class GroupPackedByKey(beam.PTransform):
    """``(key, record) | GroupPackedByKey(ShuffleSpec())`` -> ``(key, records)``, the values packed across.

    ``(a, b, ...) | GroupPackedByKey(ShuffleSpec())`` groups several keyed inputs together, as a Flatten before it
    would, without the Flatten's stage: each input is packed, and written through files, where it is made."""

    def __init__(self, spec: ShuffleSpec = ShuffleSpec()):
        super().__init__()
        self._spec = spec

    def expand(self, keyed):
        several = isinstance(keyed, (tuple, list))
        if self._spec.folder is not None:
            return (tuple(keyed) if several else (keyed,)) | "ThroughFiles" >> _ThroughFiles(self._spec)
            # (key, Unpacked records): each record packed as it is written
        packed_inputs = (tuple(pcoll | f"Pack{i}" >> beam.Map(_pack_value) for i, pcoll in enumerate(keyed))
                         if several else (keyed | "Pack" >> beam.Map(_pack_value),))
        # (key, bytes) of each input
        packed_pairs = packed_inputs | "AllInputs" >> beam.Flatten() if several else packed_inputs[0]
        return (packed_pairs
                | "Group" >> beam.GroupByKey()
                # (key, [bytes, ...])
                | "Unpack" >> beam.Map(_unpack_values))


def _held_in_files(records, spec: ShuffleSpec):
    """Each input's records packed and written to a file per bundle, in the stage that makes them -> the files'
    paths (one input, or several flattened: only paths cross the Flatten)."""
    name = uuid.uuid4().hex
    if isinstance(records, (tuple, list)):
        return (tuple(pcoll | f"WriteFile{i}" >> beam.ParDo(_WriteFileFn(spec, name))
                      for i, pcoll in enumerate(records))
                | "AllFiles" >> beam.Flatten())
    return records | "WriteFile" >> beam.ParDo(_WriteFileFn(spec, name))


def _read_held(files):
    """Paths of held records -> the records, read in the stage that consumes them."""
    return (files
            | "SpreadFiles" >> beam.Reshuffle()
            # the stage break: the records stay in their files until their consumer reads them
            | "ReadFile" >> beam.ParDo(_ReadFileFn())
            | "Unpack" >> beam.Map(unpack))


class Materialize(beam.PTransform):
    """``records | Materialize(ShuffleSpec())``: the same records; with files, held in them (only their
    paths cross the runner) for a consumer that waits on a side input.

    ``(a, b, ...) | Materialize(ShuffleSpec())`` is their Flatten without the Flatten's stage: with files, each
    input is packed and written where it is made and only the paths are flattened. A Flatten of the records
    themselves would hold every one of them in the launcher's memory on Beam's DirectRunner engine
    (docs/scale.md); with ``beam`` it is that Flatten, which a runner that spills keeps on disk."""

    def __init__(self, spec: ShuffleSpec = ShuffleSpec()):
        super().__init__()
        self._spec = spec

    def expand(self, records):
        several = isinstance(records, (tuple, list))
        if self._spec.folder is None:
            return records | "AllInputs" >> beam.Flatten() if several else records
        return _read_held(_held_in_files(records, self._spec))
        # the records, read by their consumer's stage


class HoldRecords(beam.PTransform):
    """``held = records | HoldRecords(ShuffleSpec())``: Materialize's first half, for a consumer that runs in
    another environment (the DirectRunner's statistics run in the launcher, launcher/runners.py): with files,
    the records are written where they are made and ``held`` is the files' paths; with ``beam``, the records.
    ``held | ReadHeldRecords(spec)``, applied in the consumer's environment, gives them back."""

    def __init__(self, spec: ShuffleSpec = ShuffleSpec()):
        super().__init__()
        self._spec = spec

    def expand(self, records):
        return records if self._spec.folder is None else _held_in_files(records, self._spec)


class ReadHeldRecords(beam.PTransform):
    """``records = held | ReadHeldRecords(ShuffleSpec())``: Materialize's second half (see HoldRecords)."""

    def __init__(self, spec: ShuffleSpec = ShuffleSpec()):
        super().__init__()
        self._spec = spec

    def expand(self, held):
        return held if self._spec.folder is None else _read_held(held)
