"""FindNearPairs: every pair of hashes within the radius, by bands of the hash as keys (core/leakage/bands.py).

Input: nodes ``(image id, unit id, hash)``. Each bundle cuts its hashes into bands and sends them to the band
buckets in one packed array per bucket (not one element per band), and each bucket is compared by one worker:
no process holds every hash. The bucket's rows are also this version's index file of that bucket. On a re-run
(``parent``), the nodes are only the new ones: a bucket reads the parent's rows of that bucket, drops the gone
images' rows (``gone``, a side input: the images of the parent that this version no longer holds as they were),
compares each new row with the others, and writes the merged rows. A pair found in several buckets (its hashes
agree on several bands, and so meet in several buckets) is kept only by the bucket of the first band they agree on
(core/leakage/bands.py), so no second shuffle makes the pairs distinct.
Output: ``(image a, image b, unit a, unit b, distance)``, each pair once; the index files written (FILES_TAG); what
the buckets compared and capped (TALLY_TAG).
"""

from typing import Dict, List, Optional

import apache_beam as beam
import numpy as np
from apache_beam.transforms.window import GlobalWindows

from beam_pipeline.core import paths
from beam_pipeline.core.failures import read_failed
from beam_pipeline.core.leakage import bands, index, phash
from beam_pipeline.core.leakage.summary import Tally
from beam_pipeline.io import files
from beam_pipeline.stages.shuffle import GroupPackedByKey
from beam_pipeline.stages.specs import ShuffleSpec

FILES_TAG = "files"            # (path relative to the output, its files entry)
TALLY_TAG = "tally"            # Tally of a bucket: distances computed, runs capped
BAND_WIDTH = 2 + bands.ROW_WORDS   # a band row: band, value, then the row (image, unit, the hash)
_FLUSH_ROWS = 5_000            # a bundle sends its rows once it holds this many hashes (about 5 MB of band rows)


class BandRowsFn(beam.DoFn):
    """(image id, unit id, hash) -> (bucket, packed band rows), once per bucket at the end of the bundle (or when
    it holds _FLUSH_ROWS hashes)."""

    def __init__(self, radius: int):
        self._layout = bands.Layout(radius)
        self._nodes: List[tuple] = []

    def start_bundle(self):
        self._nodes = []

    def process(self, node):
        if len(node[2]) == phash.BYTES:
            self._nodes.append(node)
            if len(self._nodes) >= _FLUSH_ROWS:
                yield from self._flush()

    def finish_bundle(self):
        for element in self._flush():
            yield GlobalWindows.windowed_value(element)

    def _flush(self):
        nodes, self._nodes = self._nodes, []
        if not nodes:
            return
        ids = np.array([n[0] for n in nodes], dtype=np.uint64)
        units = np.array([n[1] for n in nodes], dtype=np.uint64)
        rows = bands.rows_of(ids, units, phash.as_words(n[2] for n in nodes))
        for bucket, banded in sorted(self._by_bucket(rows).items()):
            yield bucket, bands.to_bytes(banded)

    def _by_bucket(self, rows: np.ndarray) -> Dict[int, np.ndarray]:
        """{bucket: packed rows}: each row once per band (bands.by_bucket)."""
        return bands.by_bucket(rows, self._layout)


def every_bucket_markers() -> List[tuple]:
    """(bucket, b"") for every bucket of the band shuffle: a bucket no row reaches is still read and written."""
    return [(bucket, b"") for bucket in range(bands.BUCKETS)]


class FindInBucketFn(beam.DoFn):
    """(bucket, [packed band rows, ...]) -> each near pair the bucket keeps, (image a, image b, unit a, unit b,
    distance); its index file (FILES_TAG); its Tally (TALLY_TAG)."""

    def __init__(self, radius: int, output: str, version: str, parent: Optional[index.ParentIndex]):
        self._radius = radius
        self._output = output
        self._version = version
        self._parent = parent

    def process(self, element, gone=()):
        bucket, blobs = element
        parts = [bands.from_bytes(blob, BAND_WIDTH) for blob in blobs if blob]
        new = np.concatenate(parts) if parts else np.zeros((0, BAND_WIDTH), np.uint64)
        old = self._parent_rows(bucket, gone)
        rows = np.concatenate([old, new])
        found = bands.near_pairs(rows, self._radius, new_from=len(old) if self._parent else 0)
        yield from bands.pair_tuples(found.pairs)
        yield beam.pvalue.TaggedOutput(TALLY_TAG, Tally(compared=found.compared,
                                                         capped=[(n, band) for band, n in found.capped]))
        if len(rows):
            rows = rows[np.lexsort((rows[:, 2], rows[:, 1], rows[:, 0]))]
            relative = f"{self._version}/{index.index_file(bucket)}"
            entry = files.write_bytes(paths.join(self._output, relative), bands.to_bytes(rows))
            yield beam.pvalue.TaggedOutput(FILES_TAG, (relative, entry))

    def _parent_rows(self, bucket: int, gone) -> np.ndarray:
        empty = np.zeros((0, BAND_WIDTH), np.uint64)
        relative = self._parent.file(bucket) if self._parent else None
        if not relative:
            return empty
        path = paths.join(self._output, relative)
        try:
            rows = bands.from_bytes(files.read_bytes(path), BAND_WIDTH)
        except OSError as error:
            raise read_failed(path, error) from error
        if len(gone) and len(rows):
            rows = rows[~np.isin(rows[:, 2], np.fromiter(gone, dtype=np.uint64, count=len(gone)))]
        return rows


class FindNearPairs(beam.PTransform):
    """``pairs, index_files, tallies = nodes | FindNearPairs(radius, output, version, parent, gone, ShuffleSpec())``."""

    def __init__(self, radius: int, output: str, version: str, parent: Optional[index.ParentIndex] = None,
                 gone=None, shuffle: ShuffleSpec = ShuffleSpec()):
        super().__init__()
        self._radius = radius
        self._output = output
        self._version = version
        self._parent = parent
        self._gone = gone
        self._shuffle = shuffle

    def expand(self, nodes):
        every_bucket = nodes.pipeline | "EveryBucket" >> beam.Create(every_bucket_markers(), reshuffle=False)
        # (bucket, b""): every bucket is compared, and writes its index file, even with no new row. Grouped with the
        # band rows as a second input, each written where it is made: the DirectRunner's engine (Beam 2.70) lost
        # whole packed band rows between a Flatten of the two and the files shuffle (docs/leakage.md, "Cost")
        side: Dict[str, object] = {} if self._gone is None else {"gone": beam.pvalue.AsList(self._gone)}
        band_rows = nodes | "BandRows" >> beam.ParDo(BandRowsFn(self._radius))
        # (bucket, packed band rows of a bundle)
        found = ((band_rows, every_bucket)
                 | "GroupByBandBucket" >> GroupPackedByKey(self._shuffle)
                 # (bucket, [packed band rows, ...]): one worker per bucket
                 | "CompareInBucket" >> beam.ParDo(FindInBucketFn(self._radius, self._output, self._version,
                                                                  self._parent), **side)
                 .with_outputs(FILES_TAG, TALLY_TAG, main="pairs"))
        # (image a, image b, unit a, unit b, distance), each pair once | (index file, entry) | Tally
        return found.pairs, found[FILES_TAG], found[TALLY_TAG]
