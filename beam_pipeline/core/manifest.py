"""Building ``manifest.json``: splits, shards, statistics, balance, and counts that reconcile exactly."""

from collections import defaultdict
from typing import Dict, Iterable, List, Optional, Tuple

from beam_pipeline.core import features
from beam_pipeline.core.masks import report as mask_report
from beam_pipeline.core.layout import ADOPTED_DIR
from beam_pipeline.core.balance import class_repeat_factors, presence_counts
from beam_pipeline.core.repeat_weights import weight_of
from beam_pipeline.core.rerun import unchanged
from beam_pipeline.core.records import DUPLICATE, FILTERED, REJECTED
from beam_pipeline.core.selection import TRAIN

FORMAT_VERSION = 3               # 2: versions in runs/<run_id>/, data_dir and a files table; 3: every path
                                 # relative to the output folder, shards of several runs, deleted records
_SHARD_FIELDS = ("path", "records", "bytes", "sha256", "class_images")
_SHARD_FILES = ("keys", "class_index")            # the files written beside a shard, when it has them


class CountsDoNotReconcile(RuntimeError):
    """discovered != filtered out + rejected + duplicates + written: a bug, never bad input."""


def count_outcomes(counted: Iterable[Tuple[Tuple[str, str], int]]) -> Dict[str, Dict[str, int]]:
    """``{status: {reason: n}}`` from ``((status, reason), n)`` pairs."""
    table: Dict[str, Dict[str, int]] = defaultdict(dict)
    for (status, reason), n in counted:
        table[status][reason] = table[status].get(reason, 0) + n
    return {status: dict(sorted(reasons.items())) for status, reasons in sorted(table.items())}


def _shard_order(shard: dict):
    return shard["split"], shard["group"], shard["path"]        # a kept shard's path names its run


def _add(totals: List[int], values) -> List[int]:
    return [a + b for a, b in zip(totals, values)] if values else totals


def _plain(value):
    return list(value) if isinstance(value, tuple) else value


def _shares(counts: List[int], total: int) -> List[float]:
    return [c / total if total else 0.0 for c in counts]


def summarise_splits(shards: List[dict], task: str, num_classes: int) -> Dict[str, dict]:
    """Per split: records (with repeat copies), images, bytes, class tallies, shards and strata."""
    splits: Dict[str, dict] = {}
    for shard in sorted(shards, key=_shard_order):
        entry = splits.setdefault(shard["split"], {
            "num_examples": 0, "num_images": 0, "num_bytes": 0, "class_images": [0] * num_classes,
            "class_pixels": [0] * num_classes if task == "segmentation" else [], "ignore_pixels": 0,
            "repeat_weight": 0, "class_repeat_weight": [0] * num_classes, "shards": []})
        # repeat weights: exact integer sums (core/balance.weight_units), floats once every shard is in
        live = shard["records"] - len(shard.get("deleted") or ())
        entry["num_examples"] += live
        entry["num_images"] += shard["originals"]
        entry["num_bytes"] += shard["bytes"] if shard.get("live_bytes", -1) < 0 else shard["live_bytes"]
        entry["class_images"] = _add(entry["class_images"], shard["class_images"])
        entry["class_pixels"] = _add(entry["class_pixels"], shard["class_pixels"])
        entry["ignore_pixels"] += shard["ignore_pixels"]
        entry["repeat_weight"] += shard.get("repeat_weight", 0)
        entry["class_repeat_weight"] = _add(entry["class_repeat_weight"], shard.get("class_repeat_weight") or ())
        entry["shards"].append({**{k: _plain(shard[k]) for k in _SHARD_FIELDS},
                                **{k: shard[k] for k in _SHARD_FILES if shard.get(k)},
                                **({"deleted": list(shard["deleted"]), "live": live, "live_bytes": shard["live_bytes"]}
                                   if shard.get("deleted") else {})})
        if shard["stratum"] >= 0:
            strata = entry.setdefault("strata", {})
            stratum = strata.setdefault(shard["stratum"], {"class": shard["stratum"], "num_examples": 0,
                                                           "repeat_weight": 0, "shards": []})
            stratum["num_examples"] += live
            stratum["repeat_weight"] += shard["repeat_weight"]
            stratum["shards"].append(shard["path"])
    for entry in splits.values():
        entry["repeat_weight"] = weight_of(entry["repeat_weight"])
        entry["class_repeat_weight"] = [weight_of(units) for units in entry["class_repeat_weight"]]
        if "strata" in entry:
            entry["strata"] = _strata_weights(entry.pop("strata"))
    return splits


def _strata_weights(strata: Dict[int, dict]) -> List[dict]:
    """Sampling weights proportional to each stratum's summed repeat factors (sum to 1)."""
    total = sum(s["repeat_weight"] for s in strata.values())
    out = []
    for c in sorted(strata):
        stratum = strata[c]
        out.append({"class": c, "weight": stratum["repeat_weight"] / total if total else 0.0,
                    "num_examples": stratum["num_examples"], "shards": stratum["shards"]})
    return out


def balance_summary(balance: dict, stats: Optional[dict], train: Optional[dict], task: str) -> dict:
    """The class distribution of the train split before and after balancing, by presence and by pixels."""
    summary = dict(balance)
    if not stats or not train:
        return summary
    images = stats["num_images"]
    before_presence = list(presence_counts(stats))
    summary["class_repeat_factors"] = list(class_repeat_factors(before_presence, images, balance["threshold"]))
    summary["growth"] = train["num_examples"] / train["num_images"] if train["num_images"] else 1.0
    summary["before"] = {"images": images, "class_images": before_presence,
                         "class_image_share": _shares(before_presence, images)}
    summary["after"] = {"records": train["num_examples"], "class_images": train["class_images"],
                        "class_image_share": _shares(train["class_images"], train["num_examples"])}
    if task == "segmentation":
        summary["before"]["class_pixel_share"] = stats["class_pixel_share"]
        summary["after"]["class_pixel_share"] = _shares(train["class_pixels"], sum(train["class_pixels"]))
    if "strata" in train:
        expected = [0.0] * len(before_presence)
        for stratum in train["strata"]:
            members = [s for s in train["shards"] if s["path"] in stratum["shards"]]
            n = sum(s["records"] for s in members)
            for c in range(len(expected)):
                expected[c] += stratum["weight"] * sum(s["class_images"][c] for s in members) / max(n, 1)
        summary["after"] = {"sampling": "strata", "class_image_share": expected}
    if balance.get("method") == "training":          # the trainer repeats each image r times per epoch
        weight = train["repeat_weight"]
        summary["growth"] = weight / train["num_images"] if train["num_images"] else 1.0
        summary["after"] = {"sampling": "training", "records_per_epoch": weight,
                            "class_image_share": _shares(train["class_repeat_weight"], weight)}
    return summary


def statistics_summary(stats: Optional[dict], version: str = "") -> Optional[dict]:
    """The statistics' summary; ``version`` (``runs/<run_id>``) is where stats.json and transform/ are."""
    if not stats:
        return None
    keys = ("num_images", "image_mean", "image_std", "class_image_share", "class_pixel_share", "ignore_share",
            "label_share", "class_weights")
    summary = {key: stats[key] for key in keys if key in stats}
    prefix = f"{version}/" if version else ""
    summary.update(stats_file=f"{prefix}stats.json", transform_dir=f"{prefix}transform")
    return summary


def build_manifest(*, task: str, num_classes: int, ignore_label, class_names, shards: List[dict],
                   outcome_counts: Dict[str, Dict[str, int]], discovered: int, options: dict,
                   versions: Dict[str, str], rejects_files: List[str], stats: Optional[dict] = None,
                   balance: Optional[dict] = None, class_index_files: Iterable[str] = (),
                   lineage: Optional[dict] = None, mask_map=None, label_map=None, version: str = "",
                   record_layout: str = "") -> dict:
    """The manifest as a JSON-ready dict; raises CountsDoNotReconcile when the books do not balance.

    ``mask_map`` / ``label_map`` (core/masks/maps.py): the map the run read its masks or labels through.
    ``version``: the run's version folder (``runs/<run_id>``); every path is relative to the output folder.
    """
    splits = summarise_splits(shards, task, num_classes)
    filtered = outcome_counts.get(FILTERED, {})
    rejected = outcome_counts.get(REJECTED, {})
    duplicates = sum(outcome_counts.get(DUPLICATE, {}).values())
    written = sum(entry["num_images"] for entry in splits.values())
    accounted = sum(filtered.values()) + sum(rejected.values()) + duplicates + written
    if accounted != discovered:
        raise CountsDoNotReconcile(
            f"discovered {discovered} but accounted for {accounted}: filtered {filtered}, "
            f"rejected {rejected}, duplicates {duplicates}, written {written}")
    names = list(class_names) or [str(c) for c in range(num_classes)]
    maps = {}
    if mask_map is not None or label_map is not None:
        maps["maps"] = mask_report.map_description(mask_map, label_map)
    if mask_map is not None:
        totals = mask_report.sum_mask_values(shard.get("mask_values") or () for shard in shards)
        maps["mask_values"] = mask_report.mask_values_table(mask_map, totals, names, num_classes, ignore_label)
    warnings = mask_report.class_warnings(task=task, num_classes=num_classes, class_names=names,
                                          ignore_label=ignore_label, splits=splits, mask=mask_map, labels=label_map,
                                          values=maps.get("mask_values", ()))
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
            "records_written": sum(entry["num_examples"] for entry in splits.values()),
        },
        "splits": splits,
        "statistics": statistics_summary(stats, version),
        "balance": balance_summary(balance or {"method": "none"}, stats, splits.get(TRAIN), task),
        "class_index": sorted(class_index_files),
        "features": feature_description(task),
        "rejects": sorted(rejects_files),
        "options": options,
        "versions": versions,
        "lineage": lineage or lineage_summary({}, None),
        "record_layout": record_layout,
        **maps,
        "warnings": warnings,
    }


def lineage_summary(settled: Dict[str, int], cache_folder: Optional[str], shards: Iterable[dict] = (),
                    version: str = "", rewritten: Optional[str] = None) -> dict:
    """How the run's selected pairs were settled (ValidatePairs: ``validated`` afresh, ``from_cache`` on
    their files' versions, ``rehashed``: from the cache after their bytes were hashed; ``not_spilled``: of
    those validated afresh, how many the writer read again, their bytes not kept by ``--spill``) and the
    cache it used (docs/cache.md); which records it wrote into its own shards (``version``), kept from earlier runs'
    shards, deleted and compacted (``settled``'s ``kept``, ``deleted``, ``compacted``: stages/rerun/reuse.py), adopted
    from a killed run's spill files without a copy (``adopted``, in shards under ``<version>/resumed/``,
    ``bytes_adopted``: stages/rerun/adopt.py), written again in place of a damaged parent shard's (``rebuilt``) or
    lost with it, their pairs gone (``lost``: core/rerun/parent.py), the
    runs whose shards it keeps, the bytes it wrote, and why nothing was kept when nothing was (``rewritten``;
    docs/incremental.md); with a cache, what the version was made of (``inputs``: its pairs and the digest of their
    files' versions, core/rerun/unchanged.py, to which the launcher adds the listing's version and the code's). The launcher adds ``parent_run_id``, the version the output held before, and what its
    check of that version found (``parent_check``, ``damaged_parent``: launcher/rerun/parent.py)."""
    shards = list(shards)
    adopted = [s for s in shards if version and s["path"].startswith(f"{version}/{ADOPTED_DIR}/")]
    own = [s for s in shards if (not version or s["path"].startswith(version + "/")) and s not in adopted]
    reused = sorted({s["path"].split("/")[1] for s in shards if s not in own and s not in adopted})
    return {
        "validated": settled.get("validated", 0),
        "from_cache": settled.get("from_cache", 0),
        "rehashed": settled.get("rehashed", 0),
        "not_spilled": settled.get("not_spilled", 0),
        "cache": None if cache_folder is None else {"folder": cache_folder,
                                                     "fingerprint": cache_folder.rstrip("/").rsplit("/", 1)[-1]},
        "records": {"written": sum(s["records"] for s in own), "kept": settled.get("kept", 0),
                    "deleted": settled.get("deleted", 0), "compacted": settled.get("compacted", 0),
                    "adopted": settled.get("adopted", 0), "rebuilt": settled.get("rebuilt", 0),
                    "lost": settled.get("lost", 0)},
        "bytes_written": sum(s["bytes"] for s in own),
        "bytes_adopted": sum(s["bytes"] for s in adopted),
        "reused_runs": reused,
        "rewritten": rewritten,
        "inputs": None if cache_folder is None else unchanged.inputs_entry(settled),
    }


def feature_description(task: str) -> Dict[str, str]:
    """What each feature of the written examples holds, for readers of the manifest."""
    common = {
        features.IMAGE_ENCODED: "bytes: the source file's bytes; PNG when the image was converted to RGB",
        features.IMAGE_FORMAT: "bytes: jpeg or png",
        features.IMAGE_HEIGHT: "int64",
        features.IMAGE_WIDTH: "int64",
        features.IMAGE_SOURCE_ID: "bytes: image path relative to the input root",
        features.IMAGE_KEY_SHA256: "bytes: hex SHA-256 of the source image file",
        features.CHANNEL_SUM: "int64[3]: sum of each RGB channel's values",
        features.CHANNEL_SUM_SQUARES: "int64[3]: sum of each RGB channel's squared values",
        features.REPEAT_COPY: "int64: 0, or k for the k-th repeat copy of an image (--balance repeat_factor)",
    }
    if task == "classification":
        common[features.CLASS_LABEL] = "int64: class id"
        return common
    common.update({
        features.MASK_ENCODED: "bytes: single-channel 8-bit PNG of class ids",
        features.MASK_FORMAT: "bytes: png",
        features.CLASS_PIXELS: "int64[num_classes]: pixels of each class in the mask",
        features.IGNORE_PIXELS: "int64: pixels equal to the ignore label",
        features.POINT_CLASSES: "int64[n]: class of each stored sample point",
        features.POINT_YX: "int64[2n]: (y, x) of each sample point, chosen by stable hash",
    })
    return common
