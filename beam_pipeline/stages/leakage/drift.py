"""ProfileVersion: this version's profile (its classes' shares, image sizes and brightness) and its comparison with
the parent version's, as a manifest section with its warnings (core/leakage/drift.py).

Input: the pairs in their final splits, before balancing (each image once). Output: one dict for PublishOutputs:
``{"profile": ..., "drift": ... or None, "warnings": [...]}``.
"""

import apache_beam as beam

from beam_pipeline.core.leakage import drift
from beam_pipeline.core.records import ValidPair
from beam_pipeline.stages.specs import DriftSpec


class ProfileFn(beam.CombineFn):
    def __init__(self, num_classes: int):
        self._num_classes = num_classes

    def create_accumulator(self):
        return drift.empty_profile(self._num_classes)

    def add_input(self, profile, pair: ValidPair):
        return drift.add_image(profile, pair.height, pair.width, pair.present_classes, pair.class_pixels,
                               pair.channel_sum)

    def merge_accumulators(self, profiles):
        merged = self.create_accumulator()
        for profile in profiles:
            merged = drift.merged(merged, profile)
        return merged

    def extract_output(self, profile):
        return profile


def _section(profile: dict, spec: DriftSpec) -> dict:
    published = drift.published(profile, spec.task)
    names = spec.class_names or tuple(str(c) for c in range(spec.num_classes))
    compared = drift.compare(spec.parent, published, spec.threshold, names)
    return {"profile": published, "drift": compared, "warnings": drift.warnings(compared, spec.parent_run_id)}


class ProfileVersion(beam.PTransform):
    """``section = pairs | ProfileVersion(DriftSpec(task, num_classes, threshold, parent_profile))``."""

    def __init__(self, spec: DriftSpec):
        super().__init__()
        self._spec = spec

    def expand(self, pairs):
        return (pairs
                | "Profile" >> beam.CombineGlobally(ProfileFn(self._spec.num_classes))
                # the profile of every pair the version holds
                | "CompareWithParent" >> beam.Map(_section, spec=self._spec))
