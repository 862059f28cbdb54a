"""Records across shuffles: packed to one bytes value each, counted, and unpacked on the other side.

Only metadata crosses a shuffle (PairRef, ValidPair: no pixels, but the bytes of
a converted file of at most 32 KiB, a palette mask's grey PNG). Each record
travels as the bytes of ``core.records.pack``: Beam's DirectRunner engine keeps
grouped values decoded until the group is read, and one bytes object per record
is several times smaller than the dataclass it holds, which keeps the run's
memory flat as the corpus grows (docs/benchmarks.md, "Prism and memory"). This is the only module
that packs and unpacks records for the pipeline.
"""

import apache_beam as beam
from apache_beam.metrics import Metrics

from beam_pipeline.core.records import pack, unpack
from beam_pipeline.stages.counters import SHUFFLE


def packed(record) -> bytes:
    """``record`` packed, and counted as bytes about to cross a shuffle."""
    data = pack(record)
    Metrics.counter(*SHUFFLE).inc(len(data))
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


class SpreadOverWorkers(beam.PTransform):
    """``records | SpreadOverWorkers()``: the same records, redistributed so that every worker gets some."""

    def expand(self, records):
        return (records
                | "Pack" >> beam.Map(packed)
                # bytes
                | "Reshuffle" >> beam.Reshuffle()
                | "Unpack" >> beam.Map(unpack))


class GroupPackedByKey(beam.PTransform):
    """``(key, record) | GroupPackedByKey()`` -> ``(key, records)``, the values packed across the GroupByKey."""

    def expand(self, keyed):
        return (keyed
                | "Pack" >> beam.Map(_pack_value)
                # (key, bytes)
                | "Group" >> beam.GroupByKey()
                # (key, [bytes, ...])
                | "Unpack" >> beam.Map(_unpack_values))
