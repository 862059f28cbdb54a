"""ReadCorpus: discover every input pair, from a listing file or from folders.

Output: a PCollection of PairRef (main) and one of Outcome (``rejected``) for
inputs that cannot form a pair: bad listing rows, paths outside the root,
orphan images and orphan masks. Only paths and metadata travel; no file
content is read here. The per-input work is in beam_pipeline/stages/pairs.py.
"""

import apache_beam as beam

from beam_pipeline.core.progress import DISCOVERED, REJECTED_PREFIX
from beam_pipeline.core.records import Outcome, PairRef
from beam_pipeline.stages import counters, pairs
from beam_pipeline.stages.specs import REJECTED_TAG, DiscoverSpec


class _Discovered:
    """Counts what leaves ReadCorpus, as manifest.json's ``discovered`` does: pairs and unpaired inputs."""

    def __init__(self):
        self._found = counters.counter(*DISCOVERED)

    def tagged(self, item):
        if isinstance(item, Outcome):
            self._found.inc()
            counters.counter(DISCOVERED[0], f"{REJECTED_PREFIX}{item.reason}").inc()
            return beam.pvalue.TaggedOutput(REJECTED_TAG, item)
        if isinstance(item, PairRef):
            self._found.inc()
        return item


class DiscoverFn(counters.CountingDoFn):
    """Source -> PairRef, or a rejected Outcome (listing files, class folders); or (mask path, path) to join."""

    def __init__(self, spec: DiscoverSpec):
        self._spec = spec
        self._discovered = _Discovered()

    def process(self, source: pairs.Source):
        for item in pairs.discover_source(self._spec, source):
            yield self._discovered.tagged(item)


class JoinOnMaskPathFn(counters.CountingDoFn):
    """(mask path, {images: [...], masks: [...]}) -> PairRef, or orphan Outcomes."""

    def __init__(self, spec: DiscoverSpec):
        self._spec = spec
        self._discovered = _Discovered()

    def process(self, element):
        mask_rel, grouped = element
        for item in pairs.join_on_mask_path(self._spec, mask_rel, grouped["images"], grouped["masks"]):
            yield self._discovered.tagged(item)


class ReadCorpus(beam.PTransform):
    """Discover pairs: ``pairs, rejected = pipeline | ReadCorpus(DiscoverSpec(input, ...))``."""

    def __init__(self, spec: DiscoverSpec):
        super().__init__()
        self._spec = spec

    def expand(self, pbegin):
        spec = self._spec
        sources = pairs.sources(spec)
        if not pairs.joins_on_mask_path(spec):
            outputs = (pbegin
                       | "ListSources" >> beam.Create(list(sources))
                       # Source (a listing file, or the class-folder glob)
                       | "Discover" >> beam.ParDo(DiscoverFn(spec)).with_outputs(REJECTED_TAG, main="pairs"))
                       # PairRef | rejected Outcome
            return outputs.pairs, outputs[REJECTED_TAG]
        images = (pbegin
                  | "ListImageGlobs" >> beam.Create([s for s in sources if s.kind == pairs.IMAGES])
                  | "MatchImages" >> beam.ParDo(DiscoverFn(spec)))
                  # (mask path, image path), relative to the root
        masks = (pbegin
                 | "ListMaskGlob" >> beam.Create([s for s in sources if s.kind == pairs.MASKS])
                 | "MatchMasks" >> beam.ParDo(DiscoverFn(spec)))
                 # (mask path, mask path)
        outputs = ({"images": images, "masks": masks}
                   | "JoinOnMaskPath" >> beam.CoGroupByKey()
                   # (mask path, {"images": [...], "masks": [...]})
                   | "PairImagesWithMasks" >> beam.ParDo(JoinOnMaskPathFn(spec)).with_outputs(
                       REJECTED_TAG, main="pairs"))
                   # PairRef | rejected Outcome
        return outputs.pairs, outputs[REJECTED_TAG]
