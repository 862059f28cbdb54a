"""Building ``manifest.json``: splits, shards and counts that reconcile exactly."""

from collections import defaultdict
from typing import Dict, Iterable, List, Tuple

from beam_pipeline.core import features

FORMAT_VERSION = 1


class CountsDoNotReconcile(RuntimeError):
    """discovered != filtered out + rejected + duplicates + written: a bug, never bad input."""


def count_outcomes(counted: Iterable[Tuple[Tuple[str, str], int]]) -> Dict[str, Dict[str, int]]:
    """``{status: {reason: n}}`` from ``((status, reason), n)`` pairs."""
    table: Dict[str, Dict[str, int]] = defaultdict(dict)
    for (status, reason), n in counted:
        table[status][reason] = table[status].get(reason, 0) + n
    return {status: dict(sorted(reasons.items())) for status, reasons in sorted(table.items())}


def build_manifest(*, task: str, num_classes: int, ignore_label, class_names, shards: List[dict],
                   outcome_counts: Dict[str, Dict[str, int]], discovered: int, options: dict,
                   versions: Dict[str, str], rejects_files: List[str]) -> dict:
    """The manifest as a JSON-ready dict; raises CountsDoNotReconcile when the books do not balance."""
    splits: Dict[str, dict] = {}
    for shard in sorted(shards, key=_shard_order):
        entry = splits.setdefault(shard["split"], {
            "num_examples": 0, "num_bytes": 0, "class_images": [0] * num_classes,
            "class_pixels": [0] * num_classes if task == "segmentation" else [], "ignore_pixels": 0,
            "shards": []})
        entry["num_examples"] += shard["records"]
        entry["num_bytes"] += shard["bytes"]
        entry["class_images"] = _add(entry["class_images"], shard["class_images"])
        entry["class_pixels"] = _add(entry["class_pixels"], shard["class_pixels"])
        entry["ignore_pixels"] += shard["ignore_pixels"]
        entry["shards"].append({k: _plain(shard[k]) for k in _SHARD_FIELDS})
    filtered = outcome_counts.get("filtered", {})
    rejected = outcome_counts.get("rejected", {})
    duplicates = sum(outcome_counts.get("duplicate", {}).values())
    written = sum(entry["num_examples"] for entry in splits.values())
    accounted = sum(filtered.values()) + sum(rejected.values()) + duplicates + written
    if accounted != discovered:
        raise CountsDoNotReconcile(
            f"discovered {discovered} but accounted for {accounted}: filtered {filtered}, "
            f"rejected {rejected}, duplicates {duplicates}, written {written}")
    return {
        "format_version": FORMAT_VERSION,
        "task": task,
        "num_classes": num_classes,
        "ignore_label": ignore_label,
        "class_names": list(class_names),
        "counts": {
            "discovered": discovered,
            "filtered_out": {"total": sum(filtered.values()), "by_reason": filtered},
            "rejected": {"total": sum(rejected.values()), "by_reason": rejected},
            "duplicates": duplicates,
            "written": written,
        },
        "splits": splits,
        "features": feature_description(task),
        "rejects": sorted(rejects_files),
        "options": options,
        "versions": versions,
    }


_SHARD_FIELDS = ("path", "records", "bytes", "sha256", "class_images")


def _shard_order(shard: dict):
    return shard["split"], shard["index"]


def _add(totals: List[int], values) -> List[int]:
    return [a + b for a, b in zip(totals, values)] if values else totals


def _plain(value):
    return list(value) if isinstance(value, tuple) else value


def feature_description(task: str) -> Dict[str, str]:
    """What each feature of the written examples holds, for readers of the manifest."""
    common = {
        features.IMAGE_ENCODED: "bytes: the source file's bytes; PNG when the image was converted to RGB",
        features.IMAGE_FORMAT: "bytes: jpeg or png",
        features.IMAGE_HEIGHT: "int64",
        features.IMAGE_WIDTH: "int64",
        features.IMAGE_SOURCE_ID: "bytes: image path relative to the input root",
        features.IMAGE_KEY_SHA256: "bytes: hex SHA-256 of the source image file",
    }
    if task == "classification":
        common[features.CLASS_LABEL] = "int64: class id"
        return common
    common.update({
        features.MASK_ENCODED: "bytes: single-channel 8-bit PNG of class ids",
        features.MASK_FORMAT: "bytes: png",
        features.CLASS_PIXELS: "int64[num_classes]: pixels of each class in the mask",
        features.IGNORE_PIXELS: "int64: pixels equal to the ignore label",
    })
    return common
