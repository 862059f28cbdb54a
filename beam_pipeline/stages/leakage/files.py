"""WriteSortedLines: a JSON-lines file of the version, the same bytes on every runner and however the bundles fall.

Lines are spread over PART_BUCKETS parts by a stable hash of the line; the file is the parts in order, each part's
lines sorted. A part is cut into runs by a second hash (one run for a small corpus; with the shuffle's 256
buckets, 16 runs a part): each run's lines are sorted and written as a file in the version's working folder, and
one worker joins the files, merging the runs of a part line by line as it reads them
(io/files.join_sorted_parts). No process holds every line, or a part's: at a million near-duplicate pairs a part
is some 15 MB of lines, a run 1 MB.
"""

import apache_beam as beam

from beam_pipeline.core import layout, paths
from beam_pipeline.core.hashing import stable_hash
from beam_pipeline.io import files
from beam_pipeline.stages.shuffle import GroupPackedByKey
from beam_pipeline.stages.specs import ShuffleSpec

PART_BUCKETS = 16
_SALT = "leakage-lines"
_RUN_SALT = "leakage-lines-run"


def runs_per_part(shuffle: ShuffleSpec) -> int:
    """Runs a part is cut into: one per PART_BUCKETS of the shuffle's buckets (which grow with the corpus counted
    at launch, core/runners.shuffle_buckets), at least one."""
    return max(1, shuffle.buckets // PART_BUCKETS)


class _ToRun:
    """line -> ((part, run), line)."""

    def __init__(self, runs: int):
        self._runs = runs

    def __call__(self, line: str):
        run = stable_hash(_RUN_SALT, line) % self._runs if self._runs > 1 else 0
        return (stable_hash(_SALT, line) % PART_BUCKETS, run), line


class WritePartFn(beam.DoFn):
    """((part, run), [line, ...]) -> ((part, run), path of the file holding the run's lines, sorted)."""

    def __init__(self, folder: str):
        self._folder = folder

    def process(self, element):
        (part, run), lines = element
        path = paths.join(self._folder, f"part-{part:03d}-{run:03d}.jsonl")
        files.write_bytes(path, "".join(f"{line}\n" for line in sorted(lines)).encode("utf-8"))
        yield (part, run), path


class JoinPartsFn(beam.DoFn):
    """Once: the runs' files joined, part by part in order, each part's runs merged -> (the file, relative to the
    output, its ``files`` entry)."""

    def __init__(self, output: str, relative: str):
        self._output = output
        self._relative = relative

    def process(self, _, parts):
        by_part = {}
        for (part, _run), path in sorted(parts):
            by_part.setdefault(part, []).append(path)
        entry = files.join_sorted_parts([by_part[part] for part in sorted(by_part)],
                                        paths.join(self._output, self._relative))
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
                 | "ToBucket" >> beam.Map(_ToRun(runs_per_part(self._shuffle)))
                 | "GroupByBucket" >> GroupPackedByKey(self._shuffle)
                 # ((part, run), [line, ...])
                 | "WritePart" >> beam.ParDo(WritePartFn(self._folder)))
        # ((part, run), path of the run's file)
        return (lines.pipeline
                | "Once" >> beam.Create([None])
                | "JoinParts" >> beam.ParDo(JoinPartsFn(self._output, self._relative),
                                            parts=beam.pvalue.AsList(parts)))
