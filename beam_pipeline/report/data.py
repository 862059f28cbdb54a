"""What the report shows, as plain data, and the pure choices behind it (no I/O, no Beam, no TF).

Everything here works on the published manifest (a dict), rows of the rejects
files and the few features of sampled records. ``read.py`` fills these
structures from files; ``render.py`` turns them into HTML.
"""

import collections
import dataclasses
import hashlib
import heapq
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

_PICK_SALT = b"beam_pipeline.report/gallery"


@dataclasses.dataclass(frozen=True)
class ReportLimits:
    """Caps that keep the report a few MB and its reading time bounded, whatever the corpus size."""
    gallery_per_class: int = 6          # examples shown per class (fewer when there are many classes)
    max_gallery_items: int = 600        # examples kept in memory for the gallery, all classes together
    thumbnail_px: int = 224             # longest side of a gallery image
    gallery_bytes: int = 2_500_000      # encoded images in the report (near pairs ≤ 1/4, then the gallery)
    max_shards: int = 8                 # shards read for the gallery and the image-size sample
    max_shard_bytes: int = 512 << 20    # record bytes read from those shards, in all
    reject_examples: int = 5            # example paths shown per reject reason
    max_reject_bytes: int = 256 << 20   # bytes of the rejects files read for those examples
    max_chart_classes: int = 120        # classes drawn in a per-class chart (rarest and commonest kept)
    max_heatmap_shards: int = 120       # shards drawn in the class-presence-per-shard chart
    max_pending_bytes: int = 256 << 20  # encoded images the gallery holds undecoded; beyond, it decodes them
    near_pairs: int = 8                 # the closest cross-split near-duplicate pairs shown side by side
    near_pair_px: int = 160             # longest side of their thumbnails


@dataclasses.dataclass(frozen=True)
class ShardRef:
    """A published shard as listed in manifest.json."""
    split: str
    path: str
    records: int
    bytes: int
    class_images: Tuple[int, ...]
    deleted: Tuple[int, ...] = ()        # record indices the version does not hold (docs/incremental.md)


@dataclasses.dataclass
class GalleryItem:
    class_id: int
    source_id: str
    split: str
    shard: str
    height: int                          # of the original image
    width: int
    share: float                         # the class's share of the mask's pixels (segmentation), else 0
    image: Optional[np.ndarray]          # (h, w, 3) uint8, downscaled; None while only ``source`` is held
    mask: Optional[np.ndarray] = None    # (h, w) uint8 class ids, same size as image (segmentation)
    source: Optional[object] = None      # the encoded record, while the picker may still displace the item


@dataclasses.dataclass
class ShardSample:
    """What was read from the shards: which ones, how much, and the image sizes seen."""
    shards: List[str] = dataclasses.field(default_factory=list)
    records: int = 0                     # records read (repeat copies included)
    originals: int = 0                   # of which original images (copy 0)
    bytes_read: int = 0
    complete: bool = True                # False when the byte cap stopped a shard early
    sizes: collections.Counter = dataclasses.field(default_factory=collections.Counter)  # (w, h) -> originals


@dataclasses.dataclass
class ReportData:
    manifest: dict
    stats: Optional[dict]
    class_names: List[str]
    rejects: Dict[Tuple[str, str], List[dict]]   # (status, reason) -> up to N rows of the rejects files
    rejects_complete: bool                       # False when the byte cap stopped reading early
    sample: ShardSample
    gallery: Dict[int, List[GalleryItem]]        # class -> examples, best first
    near_pairs: List[tuple] = dataclasses.field(default_factory=list)   # (pair, thumbnail a, b): report/leakage.py


def class_names(manifest: dict, stats: Optional[dict]) -> List[str]:
    names = list(manifest.get("class_names") or (stats or {}).get("class_names") or [])
    num_classes = manifest["num_classes"]
    return names if len(names) == num_classes else [str(c) for c in range(num_classes)]


def display_name(c: int, names: Sequence[str]) -> str:
    """``"class 3"`` when the class has no name of its own, else ``"3 cat"``."""
    return f"class {c}" if names[c] == str(c) else f"{c} {names[c]}"


def manifest_shards(manifest: dict) -> List[ShardRef]:
    return [ShardRef(split, shard["path"], shard["records"], shard["bytes"], tuple(shard["class_images"]),
                     tuple(shard.get("deleted") or ()))
            for split, entry in sorted(manifest["splits"].items()) for shard in entry["shards"]]


def class_presence(manifest: dict) -> List[int]:
    """Images holding each class over all splits, originals only where the manifest says (train before balancing)."""
    num_classes = manifest["num_classes"]
    before = (manifest.get("balance") or {}).get("before")
    totals = [0] * num_classes
    for split, entry in manifest["splits"].items():
        counts = before["class_images"] if split == "train" and before else entry["class_images"]
        totals = [a + b for a, b in zip(totals, counts)]
    return totals


def rarest_first(manifest: dict) -> List[int]:
    presence = class_presence(manifest)
    return sorted(range(len(presence)), key=lambda c: (presence[c], c))


def per_class_quota(num_classes: int, limits: ReportLimits) -> int:
    return max(1, min(limits.gallery_per_class, limits.max_gallery_items // max(num_classes, 1)))


def thumbnail_size(num_classes: int, limits: ReportLimits) -> int:
    """Longest side of gallery images: full size up to 40 classes, then smaller so more classes fit the budget."""
    if num_classes <= 40:
        return limits.thumbnail_px
    return max(96, int(limits.thumbnail_px * (40 / num_classes) ** 0.5))


def choose_shards(shards: Sequence[ShardRef], order: Sequence[int], per_class: int, max_shards: int,
                  max_bytes: int) -> List[ShardRef]:
    """Few shards that together hold ``per_class`` images of as many classes as they can, rarest first.

    For each class in ``order`` not yet covered, add the shard holding the most images of it
    (then the smaller, then by path) while the shard and byte budgets allow; the first shard is
    always taken so that even a huge shard yields a sample.
    """
    chosen: List[ShardRef] = []
    used = 0
    for c in order:
        while sum(s.class_images[c] for s in chosen) < per_class and len(chosen) < max_shards:
            candidates = [s for s in shards if s not in chosen and s.class_images[c] > 0
                          and (not chosen or used + s.bytes <= max_bytes)]
            if not candidates:
                break
            best = min(candidates, key=lambda s: (-s.class_images[c], s.bytes, s.path))
            chosen.append(best)
            used += best.bytes
    if not chosen and shards:
        chosen.append(min(shards, key=lambda s: (s.bytes, s.path)))
    return chosen


def pick_key(source_id: str) -> bytes:
    """A stable pseudo-random order among equally good examples (never Python's hash())."""
    return hashlib.sha256(_PICK_SALT + source_id.encode("utf-8")).digest()


class GalleryPicker:
    """Keeps, per class, the ``k`` examples where the class is most visible (then by stable hash).

    ``wants`` says whether an example would be kept, before anyone pays for decoding it; ``add``
    keeps it and returns the one it displaces. The result does not depend on the order of offers.
    """

    def __init__(self, k: int):
        self._k = k
        self._heaps: Dict[int, list] = collections.defaultdict(list)  # class -> [(rank, item)], worst first
        self._last = ("", b"")              # (source id, its order): an example is offered once per class it holds

    def _rank(self, share: float, source_id: str) -> Tuple[float, bytes]:
        # Bigger is better: a larger share, then a smaller hash.
        if self._last[0] != source_id or not self._last[1]:
            self._last = (source_id, bytes(255 - b for b in pick_key(source_id)))
        return share, self._last[1]

    def wants(self, class_id: int, share: float, source_id: str) -> bool:
        heap = self._heaps[class_id]
        if len(heap) >= self._k and share < heap[0][0]:
            return False                    # worse than the worst held, whatever the hash (most offers)
        if any(item.source_id == source_id for _, _, item in heap):
            return False
        return len(heap) < self._k or self._rank(share, source_id) > heap[0][:2]

    def add(self, item: GalleryItem) -> Optional[GalleryItem]:
        heap = self._heaps[item.class_id]
        entry = (*self._rank(item.share, item.source_id), item)
        if len(heap) < self._k:
            heapq.heappush(heap, entry)
            return None
        return heapq.heapreplace(heap, entry)[2]

    def held(self) -> List[GalleryItem]:
        return [item for heap in self._heaps.values() for _, _, item in heap]

    def result(self) -> Dict[int, List[GalleryItem]]:
        return {c: [item for _, _, item in sorted(heap, key=lambda e: e[:2], reverse=True)]
                for c, heap in self._heaps.items() if heap}


def mask_shares(pixel_counts: Sequence[int], ignore_pixels: int) -> List[float]:
    """Each class's share of an image's labelled-or-ignored pixels."""
    total = sum(pixel_counts) + ignore_pixels
    return [n / total if total else 0.0 for n in pixel_counts]


class RejectExamples:
    """Up to ``n`` rows of the rejects files per (status, reason), in file order."""

    def __init__(self, n: int, expected: Dict[Tuple[str, str], int]):
        self._n = n
        self._expected = expected       # (status, reason) -> count in the manifest
        self.rows: Dict[Tuple[str, str], List[dict]] = collections.defaultdict(list)

    def add(self, row: dict) -> None:
        key = (row.get("status", "rejected"), row.get("reason", "duplicate"))
        if len(self.rows[key]) < self._n:
            self.rows[key].append(row)

    def full(self) -> bool:
        """Every reason in the manifest has its examples (or all it has): reading can stop."""
        return all(len(self.rows.get(key, ())) >= min(self._n, count) for key, count in self._expected.items())


def expected_rejects(manifest: dict) -> Dict[Tuple[str, str], int]:
    """(status, reason) -> count for what the rejects files hold: rejected inputs and duplicates."""
    counts = manifest["counts"]
    expected = {("rejected", reason): n for reason, n in counts["rejected"]["by_reason"].items()}
    if counts["duplicates"]:
        expected[("duplicate", "duplicate")] = counts["duplicates"]
    return expected


def funnel(manifest: dict) -> List[Tuple[str, str, int]]:
    """(stage, reason or "", count) rows from discovered to written; the stages add up to discovered."""
    counts = manifest["counts"]
    rows = [("discovered", "", counts["discovered"])]
    for stage, key in (("filtered out", "filtered_out"), ("rejected", "rejected")):
        rows.append((stage, "", counts[key]["total"]))
        rows += [(stage, reason, n) for reason, n in sorted(counts[key]["by_reason"].items())]
    rows.append(("duplicates", "", counts["duplicates"]))
    rows.append(("written", "", counts["written"]))
    return rows


def shares(counts: Sequence[float], total: float) -> List[float]:
    return [c / total if total else 0.0 for c in counts]


def class_distributions(manifest: dict, kind: str) -> Dict[str, List[float]]:
    """Per series ("train before balancing", "train as written", "val", ...): each class's share.

    ``kind`` is "images" (share of a split's examples that hold the class) or "pixels"
    (share of the split's labelled pixels). Train "before" comes from the statistics
    the balancing used; "after" is what the shards hold (or the strata's expected mix).
    """
    series: Dict[str, List[float]] = {}
    balance = manifest.get("balance") or {}
    field = "class_image_share" if kind == "images" else "class_pixel_share"
    if field in balance.get("before", {}):
        series["train before balancing"] = balance["before"][field]
        if field in balance.get("after", {}):
            sampling = {"strata": " (strata sampling)", "training": " (the trainer's repeat factors)"}.get(
                balance["after"].get("sampling"), "")
            series["train after balancing" + sampling] = balance["after"][field]
    balanced_train = len(series) == 2
    for split, entry in sorted(manifest["splits"].items()):
        if split == "train" and balanced_train:
            continue
        if kind == "images":
            series[split] = shares(entry["class_images"], entry["num_examples"])
        elif entry["class_pixels"]:
            series[split] = shares(entry["class_pixels"], sum(entry["class_pixels"]))
    return series


def chart_classes(num_classes: int, order: Sequence[int], cap: int) -> List[int]:
    """All classes, or the ``cap // 2`` rarest and commonest when there are more than ``cap``."""
    if num_classes <= cap:
        return list(range(num_classes))
    keep = set(order[:cap // 2]) | set(order[-(cap - cap // 2):])
    return sorted(keep)


def evenly_spaced(items: Sequence, cap: int) -> List:
    if len(items) <= cap:
        return list(items)
    return [items[round(i * (len(items) - 1) / (cap - 1))] for i in range(cap)]


def size_quantiles(sizes: collections.Counter, quantiles: Sequence[float]) -> Dict[str, List]:
    """Width, height (px) and megapixels at each quantile, over images counted by (width, height)."""
    widths = np.repeat([w for w, _ in sizes], list(sizes.values()))
    heights = np.repeat([h for _, h in sizes], list(sizes.values()))
    megapixels = widths * heights / 1e6
    pick = {"width (px)": widths, "height (px)": heights, "megapixels": megapixels}
    return {name: [values[int(round(q * (len(values) - 1)))].item() for q in quantiles]
            for name, values in ((n, np.sort(v)) for n, v in pick.items())}
