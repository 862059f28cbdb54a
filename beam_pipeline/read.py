"""ReadCorpus: discover every input pair, from a manifest or from folders.

Output: a PCollection of PairRef (main) and one of Outcome (``rejected``) for
inputs that cannot form a pair: bad manifest rows, paths outside the root,
orphan images and orphan masks. Only paths and metadata travel; no file
content is read here.
"""

from typing import Iterator, Union

import apache_beam as beam
from apache_beam.metrics import Metrics

from beam_pipeline import io_utils, manifest_input
from beam_pipeline.core import paths
from beam_pipeline.core.pairing import class_folder_ref, pair_by_mask_path, row_to_pair
from beam_pipeline.core.records import Outcome, PairRef
from beam_pipeline.options import CorpusConfig

REJECTED = "rejected"
CLASS_FOLDER_GLOB = "*/*"      # one folder per class, relative to the input folder


def manifest_items(manifest_path: str, config: CorpusConfig) -> Iterator[Union[PairRef, Outcome]]:
    """A PairRef per manifest row, or a rejected Outcome for a bad row, streamed."""
    root = paths.dirname(manifest_path)
    for row in manifest_input.iter_rows(manifest_path):
        ref, outcome = row_to_pair(row, root, config.task, config.allow_outside_root)
        yield ref if outcome is None else outcome


def relative_matches(root: str, pattern: str) -> Iterator[str]:
    """The path relative to ``root`` of every file matching ``pattern`` (itself relative to ``root``)."""
    for path, _ in io_utils.match_files(paths.join(root, pattern)):
        relative = paths.relative_to(root, path)
        if relative is not None:
            yield relative


class ReadManifestRowsFn(beam.DoFn):
    """manifest path -> PairRef per row, or a rejected Outcome for a bad row."""

    def __init__(self, config: CorpusConfig):
        self._config = config
        self._rows = Metrics.counter("ReadCorpus", "manifest_rows")

    def process(self, manifest_path: str):
        for item in manifest_items(manifest_path, self._config):
            self._rows.inc()
            if isinstance(item, Outcome):
                yield beam.pvalue.TaggedOutput(REJECTED, item)
            else:
                yield item


class MatchRelativeFn(beam.DoFn):
    """glob (relative to root) -> path relative to root of every matching file."""

    def __init__(self, root: str):
        self._root = root

    def process(self, pattern: str):
        yield from relative_matches(self._root, pattern)


def _keyed_by_mask_path(image_rel: str, template: str):
    return paths.render_template(template, image_rel), image_rel


def _keyed_by_itself(mask_rel: str):
    return mask_rel, mask_rel


class PairByMaskPathFn(beam.DoFn):
    """(mask path, {images: [...], masks: [...]}) -> PairRef, or orphan Outcomes."""

    def __init__(self, root: str):
        self._root = root

    def process(self, element):
        mask_rel, grouped = element
        for item in pair_by_mask_path(mask_rel, grouped["images"], grouped["masks"], self._root):
            if isinstance(item, Outcome):
                yield beam.pvalue.TaggedOutput(REJECTED, item)
            else:
                yield item


class ReadCorpus(beam.PTransform):
    """Discover pairs: ``pairs, rejected = pipeline | ReadCorpus(config)``."""

    def __init__(self, config: CorpusConfig):
        super().__init__()
        self._config = config

    def expand(self, pbegin):
        config = self._config
        if config.input_format == "manifest":
            outputs = (pbegin
                       | "ListManifest" >> beam.Create([config.input])
                       # manifest path
                       | "ReadManifestRows" >> beam.ParDo(ReadManifestRowsFn(config)).with_outputs(
                           REJECTED, main="pairs"))
                       # PairRef | rejected Outcome
            return outputs.pairs, outputs[REJECTED]
        root = config.input_root
        if config.input_format == "class_folders":
            pairs = (pbegin
                     | "ListClassGlob" >> beam.Create([CLASS_FOLDER_GLOB])
                     | "MatchImages" >> beam.ParDo(MatchRelativeFn(root))
                     # "<class>/<file>"
                     | "LabelByFolder" >> beam.Map(class_folder_ref, root=root))
                     # PairRef
            return pairs, pbegin | "NoRejects" >> beam.Create([])
        images = (pbegin
                  | "ListImageGlobs" >> beam.Create(list(config.image_globs))
                  | "MatchImages" >> beam.ParDo(MatchRelativeFn(root))
                  # image path relative to root
                  | "KeyImageByMaskPath" >> beam.Map(_keyed_by_mask_path, template=config.mask_template))
                  # (mask path, image path)
        masks = (pbegin
                 | "ListMaskGlob" >> beam.Create([paths.template_glob(config.mask_template)])
                 | "MatchMasks" >> beam.ParDo(MatchRelativeFn(root))
                 | "KeyMaskByPath" >> beam.Map(_keyed_by_itself))
                 # (mask path, mask path)
        outputs = ({"images": images, "masks": masks}
                   | "JoinOnMaskPath" >> beam.CoGroupByKey()
                   # (mask path, {"images": [...], "masks": [...]})
                   | "PairImagesWithMasks" >> beam.ParDo(PairByMaskPathFn(root)).with_outputs(
                       REJECTED, main="pairs"))
                   # PairRef | rejected Outcome
        return outputs.pairs, outputs[REJECTED]

