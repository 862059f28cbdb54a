"""The values each stage uses: small frozen specs, built from the checked options by launcher/config.py,
and the tag of every composite's output of inputs it does not pass on (``REJECTED_TAG``).

A composite takes its spec, not the whole configuration, so a test builds one
in a line: ``ValidatePairs(CheckSpec("segmentation", Limits(num_classes=2)))``.
Picklable; no Beam, no TensorFlow.
"""

import dataclasses
from typing import Optional, Tuple

from beam_pipeline.core import paths
from beam_pipeline.core.coco import Annotations
from beam_pipeline.core.pixels import Limits
from beam_pipeline.core.filter_expr import FilterExpression
from beam_pipeline.core.masks.maps import LabelMap, MaskMap
from beam_pipeline.core.leakage.groups import SplitGroupSpec
from beam_pipeline.core.leakage.index import ParentIndex
from beam_pipeline.core.leakage.phash import DEFAULT_RADIUS
from beam_pipeline.core.leakage.splits import Policy
from beam_pipeline.core.runners import MAX_SHUFFLE_BUCKETS
from beam_pipeline.core.selection import SplitSpec

# Input kinds (--input_format; "manifest" is accepted on the command line for LISTING).
LISTING = "listing"                  # a listing file (.csv, .jsonl, .parquet): one row per pair
PAIRED = "paired"                    # image and mask folders joined by --mask_template
CLASS_FOLDERS = "class_folders"      # one sub-folder per class (classification)
LAYOUT = "layout"                    # a public dataset's folder as it ships (--layout: core/layouts.py)
DEFAULT_MAX_FILE_BYTES = 256 * 1024 * 1024
STATISTICS_ROWS_STEP = "TrainRows"   # ComputeStats' part that runs where the pairs are made (launcher/runners.py)
REJECTED_TAG = "rejected"            # every composite's output of Outcomes (rejects, duplicates, filtered)


@dataclasses.dataclass(frozen=True)
class DiscoverSpec:
    """Where the inputs are and how they form pairs (ReadCorpus, --plan)."""
    input: str                               # the listing file, or the folder
    input_format: str = LISTING
    task: str = "segmentation"
    image_globs: Tuple[str, ...] = ("images/*",)   # paired folders, relative to the folder
    mask_template: Optional[str] = None            # paired folders
    allow_outside_root: bool = False               # listing rows may leave the listing's folder
    root: str = ""                                 # filled in: the folder paths and globs are relative to
    layout: str = ""                               # LAYOUT: the layout's name (core/layouts.LAYOUTS)
    annotations: Optional[Annotations] = None      # COCO layouts: the annotation files, drawing rules (core/coco.py)

    def __post_init__(self):
        if not self.root:
            root = paths.dirname(self.input) if self.input_format == LISTING else self.input.rstrip("/")
            object.__setattr__(self, "root", root)


@dataclasses.dataclass(frozen=True)
class SelectSpec:
    """The user's subset and where splits come from (SelectSubset, --plan)."""
    split: SplitSpec
    include: Tuple[str, ...] = ()
    exclude: Tuple[str, ...] = ()
    filter: Optional[FilterExpression] = None
    sample_fraction: float = 1.0
    max_examples: Optional[int] = None
    label_map: Optional[LabelMap] = None     # classification: labels it sends to ignore are filtered out
    split_names: Tuple[Tuple[str, str], ...] = ()   # a split's name in the input -> the name it is published under
    split_group: Optional[SplitGroupSpec] = None    # --split_group: pairs of one group share a split (core/leakage)


@dataclasses.dataclass(frozen=True)
class CheckSpec:
    """What a valid pair is and how its files are read (ValidatePairs, WriteShards, --plan)."""
    task: str
    limits: Limits
    class_names: Tuple[str, ...] = ()        # classification labels may be names
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    sample_points_per_class: int = 8
    mask_map: Optional[MaskMap] = None       # how stored mask values become class ids; None: they are class ids
    label_map: Optional[LabelMap] = None     # classification: how source labels become class ids; None: names or ids

    def check_options(self) -> dict:
        """Every option that can change a check, as the verdict cache's fingerprint takes them (core/rerun/verdicts.py):
        one shape that outputs and caches of earlier releases share, the maps beside the limits."""
        options = dataclasses.asdict(self)
        options["limits"].update(mask_map=options.pop("mask_map"), label_map=options.pop("label_map"))
        return options


@dataclasses.dataclass(frozen=True)
class CacheSpec:
    """The verdict cache (ValidatePairs; core/rerun/verdicts.py, io/cache/verdicts.py): where, and how far to trust it."""
    folder: Optional[str] = None             # CACHE/<fingerprint>; None: no cache (--no_cache)
    run_id: str = ""                         # names this run's parts; salts the audit's draw
    revalidate: bool = False                 # hash every file, reuse a verdict only for the same bytes
    audit: float = 0.0                       # the share of pre-key hits hashed all the same
    committed_run: str = ""                  # the last run to commit: its spill, and older ones, are collected
    spill: str = "auto"                      # --spill: auto | always | never (io/cache/spill.SpillRoom)
    shards_folder: Optional[str] = None      # where the shards go: --spill auto keeps room for them there
    spill_file_bytes: int = 128 * 1024 * 1024   # a local spill file's size before the next (--target_shard_bytes)


@dataclasses.dataclass(frozen=True)
class ShuffleSpec:
    """How records cross the shuffles (stages/shuffle.py): Beam's own, or files in ``folder``."""
    folder: Optional[str] = None             # None: Beam's Reshuffle and GroupByKey; a folder: through files
    buckets: int = MAX_SHUFFLE_BUCKETS       # files per bundle and shuffle; a worker groups one bucket at a time
                                             # (fewer for a small corpus: core/runners.shuffle_buckets)


@dataclasses.dataclass(frozen=True)
class StatsSpec:
    """The statistics of the train split (ComputeStats)."""
    data_dir: str                            # the run's version folder: transform/ is written below it
    task: str
    num_classes: int
    ignore_label: Optional[int] = 255
    class_names: Tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class BalanceSpec:
    """Class balancing of the train split (BalanceTrainSplit, the growth check, manifest.json)."""
    method: str = "training"                 # training | none | repeat_factor | strata
    threshold: float = 0.5
    max_growth: float = 2.0

    def as_dict(self) -> dict:
        return {"method": self.method, "threshold": self.threshold, "max_growth": self.max_growth}


@dataclasses.dataclass(frozen=True)
class WriteSpec:
    """Sharding and writing the records (WriteShards)."""
    data_dir: str                            # the run's version folder: shards are written into it
    check: CheckSpec                         # the task and how files are read again
    target_shard_bytes: int = 128 * 1024 * 1024
    version: str = ""                        # that folder as manifests name it (runs/<run_id>): see layout.py


@dataclasses.dataclass(frozen=True)
class PublishSpec:
    """What manifest.json describes (PublishOutputs)."""
    data_dir: str                            # the run's version folder: its files are listed in the manifest
    task: str
    num_classes: int
    ignore_label: Optional[int] = 255
    class_names: Tuple[str, ...] = ()
    balance: BalanceSpec = BalanceSpec()
    cache_folder: Optional[str] = None       # the verdict cache's folder of this run's fingerprint (lineage)
    mask_map: Optional[MaskMap] = None       # the maps the run read masks or labels through (core/masks/maps.py)
    label_map: Optional[LabelMap] = None
    version: str = ""                        # data_dir as manifests name it (runs/<run_id>): see core/layout.py
    record_layout: str = ""                  # what the records' bytes depend on (core/rerun/versions.record_layout)
    rewritten: Optional[str] = None          # why no parent record is kept (None: the parent's are kept)


@dataclasses.dataclass(frozen=True)
class LeakageSpec:
    """Near duplicates and split groups (GroupNearDuplicates, docs/leakage.md): what is compared, and what becomes of
    the components found."""
    output: str                              # the output folder: every index path is relative to it
    data_dir: str                            # this run's version folder (its working parts)
    version: str                             # that folder as manifests name it (runs/<run_id>)
    policy: Policy = Policy()                # --near_duplicates as applied, and where the splits came from
    radius: int = DEFAULT_RADIUS             # --near_duplicates_radius
    split_group: str = ""                    # --split_group as given ("": none)
    rounds: int = 16                         # Hash-to-Min rounds unrolled (stages/leakage/components.py)
    parent: Optional[ParentIndex] = None     # the parent version's index, when this run may reuse it
    rebuilt: Optional[str] = None            # why it is not reused (None: reused, or no parent)
    note: Optional[str] = None               # a line for the summary (a policy kept from the parent)


@dataclasses.dataclass(frozen=True)
class DriftSpec:
    """This version's profile and its comparison with the parent's (ProfileVersion, core/leakage/drift.py)."""
    task: str
    num_classes: int
    threshold: float
    parent: Optional[dict] = None            # the parent manifest's ``profile`` (None: no parent, or none there)
    parent_run_id: Optional[str] = None
    class_names: Tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class AdoptSpec:
    """Whether and where a re-run adopts a killed run's spill files (AdoptKilledSpill)."""
    data_dir: str                            # the run's version folder (local)
    version: str                             # that folder as manifests name it (runs/<run_id>)
    run_id: str
    num_classes: int
    balance: str = "none"
    compact: str = "auto"                     # --compact: never adopts with all
    enabled: bool = True                     # the cache and the output on a local disk, and not --compact all
