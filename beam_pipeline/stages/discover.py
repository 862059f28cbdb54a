"""ReadCorpus: discover every input pair, from a listing file (read in ranges, on every worker) or from folders.

Output: a PCollection of PairRef (main) and one of Outcome (``rejected``) for
inputs that cannot form a pair: bad listing rows, paths outside the root,
orphan images and orphan masks. Only paths and metadata travel; no file
content is read here. The per-input work is in beam_pipeline/stages/pairs.py.
"""

import apache_beam as beam
from apache_beam.io.restriction_trackers import OffsetRange, OffsetRestrictionTracker
from apache_beam.transforms.core import RestrictionProvider

from beam_pipeline.core.progress import DISCOVERED, REJECTED_PREFIX
from beam_pipeline.core.records import Outcome, PairRef
from beam_pipeline.io import listing
from beam_pipeline.stages import counters, pairs
from beam_pipeline.stages.annotations import ReadAnnotations
from beam_pipeline.stages.specs import LISTING, REJECTED_TAG, DiscoverSpec, ShuffleSpec


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


class ReadListingFn(counters.CountingDoFn, RestrictionProvider):
    """Source (a listing file) -> PairRef, or a rejected Outcome, for the rows of a range of the listing.

    A splittable DoFn over an OffsetRange of the listing's rows (bytes of a text listing, row numbers of
    a Parquet one: io/listing.py): the runner reads the first ranges on every worker and may cut a range
    again while it is read, so no worker reads the whole listing and none holds more than a batch of rows.
    """

    def __init__(self, spec: DiscoverSpec):
        self._spec = spec
        self._discovered = _Discovered()

    def process(self, source: pairs.Source, tracker=beam.DoFn.RestrictionParam()):
        piece = tracker.current_restriction()
        for item in pairs.discover_listing_range(self._spec, piece.start, piece.stop, tracker.try_claim):
            yield self._discovered.tagged(item)

    # The restriction: the listing's rows, cut into ranges read apart.
    def initial_restriction(self, source: pairs.Source) -> OffsetRange:
        whole = listing.extent(source.pattern)
        return OffsetRange(whole.start, whole.stop)

    def split(self, source: pairs.Source, restriction: OffsetRange):
        unit = "rows" if listing.kind_of(source.pattern) == listing.PARQUET else "bytes"
        for start, stop in listing.split_points(listing.Extent(restriction.start, restriction.stop, unit)):
            yield OffsetRange(start, stop)

    def create_tracker(self, restriction: OffsetRange) -> OffsetRestrictionTracker:
        return OffsetRestrictionTracker(restriction)

    def restriction_size(self, source: pairs.Source, restriction: OffsetRange) -> int:
        return restriction.size()


class JoinOnMaskPathFn(counters.CountingDoFn):
    """(mask path, {images: [...], masks: [...]}) -> PairRef, or orphan Outcomes."""

    def __init__(self, spec: DiscoverSpec):
        self._spec = spec
        self._discovered = _Discovered()

    def process(self, element):
        mask_rel, grouped = element
        for item in pairs.join_on_mask_path(self._spec, mask_rel, grouped["images"], grouped["masks"]):
            yield self._discovered.tagged(item)


class FanOutFn(beam.DoFn):
    """Source -> the Sources it fans out to (pairs.fan_out: one per subfolder of a wildcard folder)."""

    def __init__(self, spec: DiscoverSpec):
        self._spec = spec

    def process(self, source: pairs.Source):
        yield from pairs.fan_out(self._spec, source)


class _FanOut(beam.PTransform):
    """Source -> the Sources it fans out to, spread over the workers."""

    def __init__(self, spec: DiscoverSpec):
        super().__init__()
        self._spec = spec

    def expand(self, sources):
        return (sources
                | "ListSubfolders" >> beam.ParDo(FanOutFn(self._spec))
                # Source, one per subfolder a wildcard folder matches
                | "SpreadFolders" >> beam.Reshuffle())


class ReadCorpus(beam.PTransform):
    """Discover pairs: ``pairs, rejected = pipeline | ReadCorpus(DiscoverSpec(input, ...), ShuffleSpec())``; the
    shuffle spec moves the records of annotation files (stages/annotations.py) across their grouping by image."""

    def __init__(self, spec: DiscoverSpec, shuffle: ShuffleSpec = ShuffleSpec()):
        super().__init__()
        self._spec = spec
        self._shuffle = shuffle

    def expand(self, pbegin):
        spec = self._spec
        if spec.annotations is not None:
            return pbegin | "ReadAnnotations" >> ReadAnnotations(spec, self._shuffle)
            # PairRef whose mask is drawn | Outcome (orphan annotations, invalid images, images without annotations)
        sources = pairs.sources(spec)
        if spec.input_format == LISTING:
            outputs = (pbegin
                       | "ListSources" >> beam.Create(list(sources))
                       # Source (the listing file)
                       | "ReadListing" >> beam.ParDo(ReadListingFn(spec)).with_outputs(REJECTED_TAG, main="pairs"))
                       # PairRef | rejected Outcome, from ranges of the listing read apart
            return outputs.pairs, outputs[REJECTED_TAG]
        if not pairs.joins_on_mask_path(spec):
            outputs = (pbegin
                       | "ListSources" >> beam.Create(list(sources))
                       # Source (the class-folder glob)
                       | "FanOutFolders" >> _FanOut(spec)
                       # Source per class folder, spread over the workers
                       | "Discover" >> beam.ParDo(DiscoverFn(spec)).with_outputs(REJECTED_TAG, main="pairs"))
                       # PairRef | rejected Outcome
            return outputs.pairs, outputs[REJECTED_TAG]
        images = (pbegin
                  | "ListImageGlobs" >> beam.Create([s for s in sources if s.kind == pairs.IMAGES])
                  | "FanOutImageFolders" >> _FanOut(spec)
                  # Source per image glob, or per subfolder of a glob with a wildcard folder
                  | "MatchImages" >> beam.ParDo(DiscoverFn(spec)))
                  # (mask path, image path), relative to the root
        masks = (pbegin
                 | "ListMaskGlob" >> beam.Create([s for s in sources if s.kind == pairs.MASKS])
                 | "FanOutMaskFolders" >> _FanOut(spec)
                 | "MatchMasks" >> beam.ParDo(DiscoverFn(spec)))
                 # (mask path, mask path)
        outputs = ({"images": images, "masks": masks}
                   | "JoinOnMaskPath" >> beam.CoGroupByKey()
                   # (mask path, {"images": [...], "masks": [...]})
                   | "PairImagesWithMasks" >> beam.ParDo(JoinOnMaskPathFn(spec)).with_outputs(
                       REJECTED_TAG, main="pairs"))
                   # PairRef | rejected Outcome
        return outputs.pairs, outputs[REJECTED_TAG]
