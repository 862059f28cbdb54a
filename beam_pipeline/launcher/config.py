"""The checked options: CorpusConfig, and the small per-stage specs built from it.

:func:`to_config` checks the command line's CorpusOptions and turns them into
the frozen :class:`CorpusConfig`; each stage gets only its spec (stages/specs.py).
"""

import dataclasses
from typing import Optional, Tuple

from apache_beam.options.pipeline_options import PipelineOptions

from beam_pipeline.core import layout, paths
from beam_pipeline.core.coco import CROWD_IGNORE, Annotations
from beam_pipeline.core.pixels import Limits
from beam_pipeline.core.filter_expr import FilterExpression, parse_filter
from beam_pipeline.core.masks.maps import LabelMap, MaskMap
from beam_pipeline.core.gates import DEFAULT_MAX_REJECT_FRACTION
from beam_pipeline.core.layouts import AUTO, NONE, parse_split_names
from beam_pipeline.core.selection import SplitSpec, parse_split
from beam_pipeline.core.rerun.verdicts import fingerprint
from beam_pipeline.core.rerun.versions import COMPACT_ALL, ParentSpec, parent_shards, record_layout, reuse_refusal
from beam_pipeline.core.leakage.drift import DEFAULT_THRESHOLD
from beam_pipeline.core.leakage.components import ONE_WORKER_PAIRS
from beam_pipeline.core.leakage.groups import SplitGroupSpec
from beam_pipeline.core.leakage.phash import DEFAULT_RADIUS
from beam_pipeline.launcher import leakage
from beam_pipeline.launcher.options import CorpusOptions, CorpusOptionsError, csv_list
from beam_pipeline.stages.specs import (CLASS_FOLDERS, LAYOUT, LISTING, PAIRED, AdoptSpec, BalanceSpec, CacheSpec,
                                        CheckSpec, DiscoverSpec, PublishSpec, SelectSpec, StatsSpec, WriteSpec)

LISTING_SUFFIXES = (".csv", ".jsonl", ".json", ".parquet")
MASK_FORMATS = ("png", "tiff")
INPUT_FORMAT_ALIASES = {"manifest": LISTING}     # the command line's older name for a listing file
NUM_CLASSES_REQUIRED = ("--num_classes is required, except for one folder per class (the folders are counted) and "
                        "with a map that names the classes")


@dataclasses.dataclass(frozen=True)
class MapOptions:
    """The map options as given; launcher/maps.py reads the files into the config's mask_map or label_map."""
    label_map: Optional[str] = None          # a file, or the name of a shipped map
    color_map: Optional[str] = None
    reduce_zero_label: bool = False
    unmapped: str = "reject"

    @property
    def any(self) -> bool:
        return bool(self.label_map or self.color_map or self.reduce_zero_label)


@dataclasses.dataclass(frozen=True)
class CorpusConfig:
    """The checked options, as used by the composites. Picklable."""
    input: str
    output: str
    task: str
    input_format: str                       # listing | paired | class_folders (stages/specs.py)
    limits: Limits
    class_names: Tuple[str, ...]
    image_globs: Tuple[str, ...]
    mask_template: Optional[str]
    allow_outside_root: bool
    filter: Optional[FilterExpression]
    include: Tuple[str, ...]
    exclude: Tuple[str, ...]
    sample_fraction: float
    max_examples: Optional[int]
    split: Optional[SplitSpec]              # None: decided from the listing's columns ("auto").
    max_file_bytes: int
    target_shard_bytes: int
    overwrite: bool
    sample_points_per_class: int = 8
    compute_stats: bool = True
    balance: str = "training"
    balance_threshold: float = 0.5
    max_growth: float = 2.0
    allow_local_paths: bool = False
    max_reject_fraction: float = DEFAULT_MAX_REJECT_FRACTION
    keep_versions: int = 1                  # earlier versions kept after a commit, for readers mid-epoch
    shuffle: str = "auto"                   # auto | beam | files (stages/shuffle.py; launch.shuffle_spec)
    use_cache: bool = True                  # the verdict cache (docs/cache.md); False: --no_cache
    cache_dir: Optional[str] = None         # None: OUTPUT/cache
    revalidate: bool = False
    cache_audit: float = 0.0
    spill: str = "auto"                     # auto | always | never (io/cache/spill.SpillRoom)
    maps: MapOptions = MapOptions()
    compact: str = "auto"                   # auto | never | all (core/rerun/versions.py)
    on_damaged_parent: str = "rebuild"      # rebuild | fail (core/rerun/parent.py)
    skip_unchanged: str = "auto"            # auto | always | never (core/rerun/unchanged.py)
    layout: str = ""                        # LAYOUT input: a name of core/layouts.LAYOUTS, or auto until launch
    split_names: Tuple[Tuple[str, str], ...] = ()   # --split_names, with the layout's own (launcher/layouts.py)
    allow_no_train: bool = False
    mask_map: Optional[MaskMap] = None      # the map read from ``maps`` (launcher/maps.py): mask values to classes
    label_map: Optional[LabelMap] = None    # ... or, for classification, labels to classes
    coco_crowd: str = CROWD_IGNORE          # --coco_crowd: COCO crowds drawn as ignore or as their category
    annotations: Optional[Annotations] = None   # COCO layouts: their files and drawing rules (launcher/coco.py)
    split_group: Optional[SplitGroupSpec] = None    # --split_group (launcher/leakage.py, docs/leakage.md)
    near_duplicates: Optional[str] = None   # --near_duplicates as given (None: the parent's, or group)
    near_duplicates_radius: int = DEFAULT_RADIUS
    near_duplicates_one_worker_pairs: int = ONE_WORKER_PAIRS
    drift_threshold: float = DEFAULT_THRESHOLD

    @property
    def num_classes(self) -> int:
        return self.limits.num_classes

    @property
    def input_root(self) -> str:
        """The folder that relative paths and globs are taken against."""
        return self.discover_spec().root

    def as_dict(self) -> dict:
        out = dataclasses.asdict(self)
        out["filter"] = self.filter.text if self.filter else None
        return out

    def discover_spec(self) -> DiscoverSpec:
        return DiscoverSpec(self.input, self.input_format, self.task, self.image_globs, self.mask_template,
                            allow_outside_root=self.allow_outside_root, layout=self.layout,
                            annotations=self.annotations)

    def select_spec(self, split: SplitSpec) -> SelectSpec:
        """``split``: where splits come from, as decided at launch (launch.resolve_inputs)."""
        return SelectSpec(split=split, include=self.include, exclude=self.exclude, filter=self.filter,
                          sample_fraction=self.sample_fraction, max_examples=self.max_examples,
                          label_map=self.label_map, split_names=self.split_names, split_group=self.split_group)

    def check_spec(self) -> CheckSpec:
        return CheckSpec(task=self.task, limits=self.limits, class_names=self.class_names,
                         max_file_bytes=self.max_file_bytes, sample_points_per_class=self.sample_points_per_class,
                         mask_map=self.mask_map, label_map=self.label_map)

    @property
    def cache_root(self) -> Optional[str]:
        """The verdict cache's folder (every fingerprint's under it), or None with --no_cache."""
        return (self.cache_dir or layout.cache_dir(self.output)) if self.use_cache else None

    def cache_spec(self, run_id: str, package_versions: dict, committed_run: str = "") -> CacheSpec:
        """The cache this run reads and writes: the folder of the fingerprint of its check options and decoders.
        ``committed_run``: the run of the output's published version, whose commit collected every spill."""
        if self.cache_root is None:
            return CacheSpec()
        # Every check option, --max_file_bytes too: a reused verdict's files are not read, so not measured.
        folder = paths.join(self.cache_root, fingerprint(self.check_spec().check_options(), package_versions))
        return CacheSpec(folder, run_id, self.revalidate, self.cache_audit, committed_run, self.spill, self.output,
                         spill_file_bytes=self.target_shard_bytes)

    def record_layout(self, package_versions: dict) -> str:
        """What the written records' bytes and groups depend on beyond the pairs (core/rerun/versions.record_layout)."""
        return record_layout(fingerprint(self.check_spec().check_options(), package_versions), self.balance)

    def parent_spec(self, previous: Optional[dict], package_versions: dict) -> Tuple[Optional[ParentSpec], Optional[str]]:
        """(what this run keeps from the published version, or None; why it keeps nothing, or None)."""
        refusal = reuse_refusal(previous, self.record_layout(package_versions))
        if refusal is not None:
            return None, refusal
        return ParentSpec(run_id=previous["run_id"], shards=parent_shards(previous), balance=self.balance,
                          compact=self.compact, target_shard_bytes=self.target_shard_bytes), None

    def stats_spec(self, data_dir: str) -> StatsSpec:
        """``data_dir``: this run's version folder (core/layout.py)."""
        return StatsSpec(data_dir=data_dir, task=self.task, num_classes=self.num_classes,
                         ignore_label=self.limits.ignore_label, class_names=self.class_names)

    def balance_spec(self) -> BalanceSpec:
        return BalanceSpec(method=self.balance, threshold=self.balance_threshold, max_growth=self.max_growth)

    def write_spec(self, data_dir: str) -> WriteSpec:
        return WriteSpec(data_dir=data_dir, check=self.check_spec(), target_shard_bytes=self.target_shard_bytes,
                         version=layout.version_entry(data_dir))

    def adopt_spec(self, data_dir: str, cache: CacheSpec) -> AdoptSpec:
        """Adopting a killed run's spill (stages/rerun/adopt.py): the cache and output local, and not --compact all."""
        local = cache.folder is not None and not any(paths.split_scheme(f)[0] for f in (cache.folder, data_dir))
        return AdoptSpec(data_dir, layout.version_entry(data_dir), cache.run_id, self.num_classes, self.balance,
                         self.compact, enabled=local and self.compact != COMPACT_ALL)

    def publish_spec(self, data_dir: str, cache: CacheSpec = CacheSpec(), record_layout_digest: str = "",
                     rewritten: Optional[str] = None) -> PublishSpec:
        return PublishSpec(data_dir=data_dir, task=self.task, num_classes=self.num_classes,
                           ignore_label=self.limits.ignore_label, class_names=self.class_names,
                           balance=self.balance_spec(), cache_folder=cache.folder,
                           mask_map=self.mask_map, label_map=self.label_map,
                           version=layout.version_entry(data_dir), record_layout=record_layout_digest,
                           rewritten=rewritten)


def _fail(message: str):
    raise CorpusOptionsError(message)


def _detect_input_format(opts: CorpusOptions) -> str:
    if opts.layout not in (AUTO, NONE):
        return LAYOUT
    if opts.input_format != "auto":
        return INPUT_FORMAT_ALIASES.get(opts.input_format, opts.input_format)
    if opts.input.lower().endswith(".json") and opts.layout == AUTO and opts.task == "segmentation":
        return LAYOUT                 # a COCO annotation file, or a JSON-lines listing: told apart at launch
    if opts.input.lower().endswith(LISTING_SUFFIXES):
        return LISTING
    if opts.mask_template:
        return PAIRED
    if opts.task == "classification":
        return CLASS_FOLDERS
    if opts.layout == AUTO:
        return LAYOUT                 # recognised at launch (launcher/layouts.py), or refused there in one line
    _fail("--input is a folder: give --mask_template for paired image/mask folders, --layout for a public "
          "dataset's folder, or a listing file (.csv, .jsonl, .parquet)")


def to_config(opts: PipelineOptions) -> CorpusConfig:
    """Check the options and build the config; raises CorpusOptionsError with one clear line."""
    o = opts.view_as(CorpusOptions)
    if not o.input:
        _fail("--input is required")
    if not o.output:
        _fail("--output is required")
    maps = MapOptions(o.label_map, o.color_map, o.reduce_zero_label, o.unmapped)
    _check_maps(maps, o.task)
    input_format = _detect_input_format(o)
    if o.num_classes is None and not maps.any and input_format not in (CLASS_FOLDERS, LAYOUT):
        _fail(NUM_CLASSES_REQUIRED)
    ignore = None if o.ignore_label == -1 else o.ignore_label
    class_names = csv_list(o.class_names) if o.class_names else ()
    if o.num_classes is not None:        # else the map or the class folders give it (maps.py, launch.py check it)
        check_classes(o.num_classes, ignore, class_names)
    elif ignore is not None and not 0 <= ignore <= 255:
        _fail(f"--ignore_label must be 0..255 or -1, got {o.ignore_label}")
    if o.task == "segmentation" and input_format == CLASS_FOLDERS:
        _fail("--input_format class_folders is for --task classification")
    if input_format == PAIRED and o.task == "classification":
        _fail("paired folders (--mask_template) are for --task segmentation")
    if input_format == LAYOUT and o.task == "classification":
        _fail(f"--layout {o.layout} is a segmentation dataset: give --task segmentation")
    if input_format == PAIRED:
        if not o.mask_template:
            _fail("paired folders need --mask_template, e.g. masks/{stem}.png")
        try:
            paths.check_template(o.mask_template)
        except ValueError as error:
            _fail(f"--mask_template: {error}")
    if not 0.0 < o.sample_fraction <= 1.0:
        _fail(f"--sample_fraction must be in (0, 1], got {o.sample_fraction}")
    if o.max_examples is not None and o.max_examples < 1:
        _fail(f"--max_examples must be at least 1, got {o.max_examples}")
    if o.target_shard_bytes < 1024:
        _fail(f"--target_shard_bytes must be at least 1024, got {o.target_shard_bytes}")
    if o.max_pixels < 1 or o.max_file_bytes < 1:
        _fail("--max_pixels and --max_file_bytes must be positive")
    if o.sample_points_per_class < 0:
        _fail("--sample_points_per_class must be 0 or more")
    if not 0.0 < o.balance_threshold <= 1.0:
        _fail(f"--balance_threshold must be in (0, 1], got {o.balance_threshold}")
    if o.max_growth < 1.0:
        _fail(f"--max_growth must be at least 1, got {o.max_growth}")
    if not 0.0 <= o.max_reject_fraction <= 1.0:
        _fail(f"--max_reject_fraction must be between 0 and 1, got {o.max_reject_fraction}")
    if not 0.0 <= o.cache_audit <= 1.0:
        _fail(f"--cache_audit must be between 0 and 1, got {o.cache_audit}")
    if o.keep_versions < 0:
        _fail(f"--keep_versions must be 0 or more, got {o.keep_versions}")
    formats = tuple(f.lower() for f in csv_list(o.image_formats))
    if not formats:
        _fail("--image_formats is empty")
    mask_formats = tuple(f.lower() for f in csv_list(o.mask_formats))
    unknown_formats = [f for f in mask_formats if f not in MASK_FORMATS]
    if not mask_formats or unknown_formats:
        _fail(f"--mask_formats takes {' and '.join(MASK_FORMATS)}, got {o.mask_formats!r}")
    try:
        expression = parse_filter(o.filter_expression) if o.filter_expression else None
        split = None if o.split == "auto" else parse_split(o.split)
        split_names = parse_split_names(o.split_names)
        split_group, radius = leakage.checked(o.split_group, o.near_duplicates, o.near_duplicates_radius,
                                              o.drift_threshold, o.near_duplicates_one_worker_pairs)
    except ValueError as error:
        _fail(str(error))
    return CorpusConfig(
        input=o.input.rstrip("/") if input_format != LISTING else o.input,
        output=o.output.rstrip("/"),
        task=o.task,
        input_format=input_format,
        limits=Limits(num_classes=o.num_classes or 0, ignore_label=ignore, max_pixels=o.max_pixels,
                      image_formats=formats, mask_formats=mask_formats, channel_sums=o.compute_stats),
        class_names=class_names,
        image_globs=csv_list(o.image_glob),
        mask_template=o.mask_template,
        allow_outside_root=o.allow_outside_root,
        filter=expression,
        include=tuple(o.include or ()),
        exclude=tuple(o.exclude or ()),
        sample_fraction=o.sample_fraction,
        max_examples=o.max_examples,
        split=split,
        max_file_bytes=o.max_file_bytes,
        target_shard_bytes=o.target_shard_bytes,
        overwrite=o.overwrite,
        sample_points_per_class=o.sample_points_per_class,
        compute_stats=o.compute_stats,
        balance=o.balance if o.compute_stats else "none",
        balance_threshold=o.balance_threshold,
        max_growth=o.max_growth,
        allow_local_paths=o.allow_local_paths,
        max_reject_fraction=o.max_reject_fraction,
        keep_versions=o.keep_versions,
        shuffle=o.shuffle,
        use_cache=o.use_cache,
        cache_dir=o.cache_dir.rstrip("/") if o.cache_dir else None,
        revalidate=o.revalidate,
        cache_audit=o.cache_audit,
        spill=o.spill,
        maps=maps,
        compact=o.compact,
        on_damaged_parent=o.on_damaged_parent,
        skip_unchanged=o.skip_unchanged,
        layout=o.layout if input_format == LAYOUT else "",
        split_names=split_names,
        allow_no_train=o.allow_no_train,
        coco_crowd=o.coco_crowd,
        split_group=split_group,
        near_duplicates=o.near_duplicates,
        near_duplicates_radius=radius,
        near_duplicates_one_worker_pairs=o.near_duplicates_one_worker_pairs,
        drift_threshold=o.drift_threshold,
    )


def check_classes(num_classes: int, ignore: Optional[int], class_names: Tuple[str, ...]) -> None:
    """The class count, the ignore label and the class names agree; else one line."""
    if not 1 <= num_classes <= 255:
        _fail(f"--num_classes must be between 1 and 255, got {num_classes}")
    if ignore is not None and not 0 <= ignore <= 255:
        _fail(f"--ignore_label must be 0..255 or -1, got {ignore}")
    if ignore is not None and ignore < num_classes:
        _fail(f"--ignore_label {ignore} is also a class id (num_classes {num_classes})")
    if class_names and len(class_names) != num_classes:
        _fail(f"--class_names lists {len(class_names)} names but --num_classes is {num_classes}")


def _check_maps(maps: MapOptions, task: str) -> None:
    if maps.label_map and maps.color_map:
        _fail("--label_map and --color_map exclude each other: a mask is read as values or as colours")
    if task == "classification" and (maps.color_map or maps.reduce_zero_label):
        _fail(f"{'--color_map' if maps.color_map else '--reduce_zero_label'} is for --task segmentation")
    if maps.color_map and maps.reduce_zero_label:
        _fail("--reduce_zero_label reads mask values; a --color_map gives each colour its class directly")


