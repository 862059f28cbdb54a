"""WriteSortedLines: a JSON-lines file of the version, the same bytes on every runner and however the bundles fall.

Lines are spread over PART_BUCKETS buckets by a stable hash of the line; each bucket's lines are sorted and written
as one part (in the version's working folder), and the parts are joined in bucket order into the one file the
manifest lists. No process holds every line.
"""

import apache_beam as beam

from beam_pipeline.core import layout, paths
from beam_pipeline.core.hashing import stable_hash
from beam_pipeline.io import files
from beam_pipeline.stages.shuffle import GroupPackedByKey
from beam_pipeline.stages.specs import ShuffleSpec

PART_BUCKETS = 16
_SALT = "leakage-lines"


def _bucketed(line: str):
    return stable_hash(_SALT, line) % PART_BUCKETS, line


class WritePartFn(beam.DoFn):
    """(bucket, [line, ...]) -> (bucket, path of the part holding its lines, sorted)."""

    def __init__(self, folder: str):
        self._folder = folder

    def process(self, element):
        bucket, lines = element
        path = paths.join(self._folder, f"part-{bucket:03d}.jsonl")
        files.write_bytes(path, "".join(f"{line}\n" for line in sorted(lines)).encode("utf-8"))
        yield bucket, path


class JoinPartsFn(beam.DoFn):
    """Once: the parts joined in bucket order -> (the file, relative to the output, its ``files`` entry)."""

    def __init__(self, output: str, relative: str):
        self._output = output
        self._relative = relative

    def process(self, _, parts):
        entry = files.join_parts([path for _, path in sorted(parts)], paths.join(self._output, self._relative))
        yield self._relative, entry


class WriteSortedLines(beam.PTransform):
    """``(path, entry) = lines | WriteSortedLines(output, version, name, data_dir, ShuffleSpec())``: ``name`` in the
    version."""

    def __init__(self, output: str, version: str, name: str, data_dir: str, shuffle: ShuffleSpec = ShuffleSpec()):
        super().__init__()
        self._shuffle = shuffle
        self._output = output
        self._relative = f"{version}/{name}"
        self._folder = paths.join(layout.parts_dir(data_dir, "leakage"), name.replace("/", "_"))

    def expand(self, lines):
        parts = (lines
                 | "ToBucket" >> beam.Map(_bucketed)
                 | "GroupByBucket" >> GroupPackedByKey(self._shuffle)
                 | "WritePart" >> beam.ParDo(WritePartFn(self._folder)))
        # (bucket, path of its part)
        return (lines.pipeline
                | "Once" >> beam.Create([None])
                | "JoinParts" >> beam.ParDo(JoinPartsFn(self._output, self._relative),
                                            parts=beam.pvalue.AsList(parts)))
