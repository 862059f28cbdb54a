"""ReadAnnotations: the pairs of COCO annotation files (``--layout coco``, ``coco_panoptic``), ReadCorpus's part for
the annotation layouts (core/layouts.py's ANNOTATIONS family).

Each file is streamed twice, in parallel: once for its ``images``, once for its ``annotations`` (io/coco.py: a record
at a time, never the file whole), each record keyed by (file, image id); the records are grouped by that key across
a shuffle (stages/shuffle.py: through files on the DirectRunner, so no process holds them), and each image's group
becomes a PairRef whose ``drawing`` draws its mask where validation and the writer read it (core/masks/drawn.py), or
the Outcome that accounts for it (core/coco.py: ``orphan_annotation``, ``annotation_invalid``, ``no_annotations``).
Only annotations, the metadata they are, cross the shuffle: no pixel is drawn here.
"""

import apache_beam as beam

from beam_pipeline.core.progress import DISCOVERED, REJECTED_PREFIX
from beam_pipeline.core.records import FILTERED, Outcome
from beam_pipeline.stages import counters, pairs, worker
from beam_pipeline.stages.shuffle import GroupPackedByKey
from beam_pipeline.stages.specs import REJECTED_TAG, DiscoverSpec, ShuffleSpec

FILTERED_PREFIX = "filtered_"


class StreamAnnotationsFn(counters.CountingDoFn):
    """Source (one array of one annotation file) -> ``((file, image id), (IMAGE | ANNOTATION, fields))``."""

    def __init__(self, spec: DiscoverSpec):
        self._spec = spec

    def setup(self):
        worker.prepare_sdk_worker()            # a file that breaks off is the run's one line, not a traceback

    def process(self, source: pairs.Source):
        yield from pairs.discover_source(self._spec, source)


class PairAnnotatedImageFn(counters.CountingDoFn):
    """``((file, image id), records)`` -> PairRef, or an Outcome (``rejected``) counted as ReadCorpus counts it."""

    def __init__(self, spec: DiscoverSpec):
        self._spec = spec
        self._found = counters.counter(*DISCOVERED)

    def process(self, element):
        (file, image_id), records = element
        item = pairs.annotated(self._spec, file, image_id, records)
        self._found.inc()
        if isinstance(item, Outcome):
            prefix = FILTERED_PREFIX if item.status == FILTERED else REJECTED_PREFIX
            counters.counter(DISCOVERED[0], f"{prefix}{item.reason}").inc()
            yield beam.pvalue.TaggedOutput(REJECTED_TAG, item)
        else:
            yield item


class ReadAnnotations(beam.PTransform):
    """``pairs, outcomes = pipeline | ReadAnnotations(DiscoverSpec(...), ShuffleSpec())``."""

    def __init__(self, spec: DiscoverSpec, shuffle: ShuffleSpec = ShuffleSpec()):
        super().__init__()
        self._spec = spec
        self._shuffle = shuffle

    def expand(self, pbegin):
        outputs = (pbegin
                   | "ListAnnotationArrays" >> beam.Create(list(pairs.sources(self._spec)))
                   # Source: the images and the annotations of each annotation file
                   | "SpreadArrays" >> beam.Reshuffle()
                   | "StreamAnnotations" >> beam.ParDo(StreamAnnotationsFn(self._spec))
                   # ((file, image id), (IMAGE | ANNOTATION, fields)), a record at a time
                   | "GroupByImage" >> GroupPackedByKey(self._shuffle)
                   # ((file, image id), [record, ...]): one image's entry and annotations
                   | "PairAnnotatedImages" >> beam.ParDo(PairAnnotatedImageFn(self._spec)).with_outputs(
                       REJECTED_TAG, main="pairs"))
                   # PairRef (its mask drawn later) | Outcome (orphan_annotation, annotation_invalid, no_annotations)
        return outputs.pairs, outputs[REJECTED_TAG]
