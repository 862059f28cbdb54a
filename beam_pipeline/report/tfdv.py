"""The dataset statistics as TFDV / Facets Overview read them: a ``DatasetFeatureStatisticsList`` per split.

File layout and format: ``<output>/stats/<split>.tfrecord``, a TFRecord file
holding one record, the serialized ``DatasetFeatureStatisticsList`` with one
dataset named after the split. That is what ``tfdv.load_statistics(path)``
reads; ``tfdv.visualize_statistics(train, rhs_statistics=val)`` compares two
splits, and Facets Overview takes the protos' datasets side by side.

Only exact figures are written, all derived from manifest.json and stats.json
(never from a sample): per split the number of examples, the valency of every
feature, the label distribution (classification: full numeric statistics and a
histogram per class), class pixel and presence counts (segmentation, as rank
histograms in ``custom_stats``), the ignore-pixel total, originals against
repeat copies, and for train the RGB mean and std that tf.Transform computed.
"""

import math
from typing import Dict, List, Optional

from apache_beam.io.filesystems import FileSystems
from tensorflow_metadata.proto.v0 import statistics_pb2

from beam_pipeline.core import features as f
from beam_pipeline.core import paths
from beam_pipeline.core.example import frame_record
from beam_pipeline.core.layout import STATISTICS_DIR
from beam_pipeline.report.data import class_names

_FNS = statistics_pb2.FeatureNameStatistics
_BINARY = (f.IMAGE_ENCODED, f.MASK_ENCODED)
_VARIABLE = (f.POINT_CLASSES, f.POINT_YX)   # how many values each example holds is not recorded


def statistics_path(split: str) -> str:
    """Where a split's statistics go, relative to the output folder."""
    return f"{STATISTICS_DIR}/{split}.tfrecord"


def _valency(name: str, num_classes: int) -> Optional[int]:
    if name in _VARIABLE:
        return None
    if name in (f.CHANNEL_SUM, f.CHANNEL_SUM_SQUARES):
        return 3
    if name == f.CLASS_PIXELS:
        return num_classes
    return 1


def _feature_type(name: str, description: str):
    if description.startswith("int64"):
        return _FNS.INT
    return _FNS.BYTES if name in _BINARY else _FNS.STRING


def _common(common: statistics_pb2.CommonStatistics, num_examples: int, valency: Optional[int]) -> None:
    common.num_non_missing = num_examples
    common.num_missing = 0
    if valency is not None:
        common.min_num_values = common.max_num_values = valency
        common.avg_num_values = float(valency)
        common.tot_num_values = valency * num_examples


def _rank_histogram(stat: statistics_pb2.CustomStatistic, name: str, labels: List[str], counts) -> None:
    stat.name = name
    for rank, (label, count) in enumerate(zip(labels, counts)):
        stat.rank_histogram.buckets.add(low_rank=rank, high_rank=rank, label=label, sample_count=float(count))


def _label_stats(feature: _FNS, counts: List[int], names: List[str]) -> None:
    """Exact numeric statistics of an int label from its count per value."""
    total = sum(counts)
    numeric = feature.num_stats
    _common(numeric.common_stats, total, 1)
    present = [c for c, n in enumerate(counts) if n]
    if total:
        mean = sum(c * n for c, n in enumerate(counts)) / total
        numeric.mean = mean
        numeric.std_dev = math.sqrt(sum(n * (c - mean) ** 2 for c, n in enumerate(counts)) / total)
        numeric.min, numeric.max = float(present[0]), float(present[-1])
        numeric.median = float(_median(counts, total))
    numeric.num_zeros = counts[0] if counts else 0
    histogram = numeric.histograms.add(type=statistics_pb2.Histogram.STANDARD)
    for c, n in enumerate(counts):
        histogram.buckets.add(low_value=c - 0.5, high_value=c + 0.5, sample_count=float(n))
    _rank_histogram(feature.custom_stats.add(), "label_counts", names, counts)


def _median(counts: List[int], total: int) -> int:
    """The lower median of the labels (the value at position (total - 1) // 2 in sorted order)."""
    position = (total - 1) // 2
    seen = 0
    for c, n in enumerate(counts):
        seen += n
        if seen > position:
            return c
    return len(counts) - 1


def _custom_num(feature: _FNS, name: str, value: float) -> None:
    feature.custom_stats.add(name=name, num=float(value))


def split_statistics(manifest: dict, split: str,
                     stats: Optional[dict] = None) -> statistics_pb2.DatasetFeatureStatistics:
    """One split's DatasetFeatureStatistics, from manifest.json (and stats.json for the train RGB figures)."""
    entry = manifest["splits"][split]
    names = class_names(manifest, stats)
    num_examples = entry["num_examples"]
    dataset = statistics_pb2.DatasetFeatureStatistics(name=split, num_examples=num_examples)
    for name, description in sorted(manifest["features"].items()):
        feature = dataset.features.add(type=_feature_type(name, description))
        feature.path.step.append(name)
        if name == f.CLASS_LABEL:
            _label_stats(feature, entry["class_images"], names)
            continue
        common = feature.num_stats.common_stats if feature.type == _FNS.INT else (
            feature.bytes_stats.common_stats if feature.type == _FNS.BYTES else feature.string_stats.common_stats)
        _common(common, num_examples, _valency(name, manifest["num_classes"]))
        if name == f.CLASS_PIXELS:
            _rank_histogram(feature.custom_stats.add(), "class_pixels", names, entry["class_pixels"])
            _rank_histogram(feature.custom_stats.add(), "class_images", names, entry["class_images"])
        elif name == f.IGNORE_PIXELS:
            _custom_num(feature, "total", entry["ignore_pixels"])
        elif name == f.REPEAT_COPY:
            _custom_num(feature, "original_images", entry["num_images"])
            _custom_num(feature, "repeat_copies", num_examples - entry["num_images"])
        elif name == f.IMAGE_ENCODED:
            _custom_num(feature, "total_shard_bytes", entry["num_bytes"])
            statistics = manifest.get("statistics")
            if split == "train" and statistics:
                for channel, mean, std in zip(("red", "green", "blue"), statistics["image_mean"],
                                              statistics["image_std"]):
                    _custom_num(feature, f"mean_{channel}", mean)
                    _custom_num(feature, f"std_{channel}", std)
    return dataset


def statistics_list(manifest: dict, split: str,
                    stats: Optional[dict] = None) -> statistics_pb2.DatasetFeatureStatisticsList:
    return statistics_pb2.DatasetFeatureStatisticsList(datasets=[split_statistics(manifest, split, stats)])


def statistics_files(manifest: dict, stats: Optional[dict] = None) -> Dict[str, bytes]:
    """Relative path -> file bytes (a one-record TFRecord) for every split; deterministic."""
    return {statistics_path(split): frame_record(statistics_list(manifest, split, stats).SerializeToString(
        deterministic=True)) for split in sorted(manifest["splits"])}


def write_statistics(manifest: dict, folder: str, stats: Optional[dict] = None) -> List[str]:
    """Write every split's statistics under ``folder`` (FileSystems: local, gs://, s3://); returns the paths."""
    written = []
    for relative, content in statistics_files(manifest, stats).items():
        path = paths.join(folder, relative)
        with FileSystems.create(path) as handle:
            handle.write(content)
        written.append(path)
    return written
