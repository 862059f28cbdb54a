"""What changed between two versions: each version's profile, and the comparison with its parent's, in the manner of
TFDV's drift comparators (docs/leakage.md, "Drift").

A version's ``profile`` (manifest.json) holds, over every pair it holds: the images holding each class and each
class's pixels (segmentation), a histogram of image sizes (half-octaves of pixels) and one of brightness (each
image's mean luma, ITU-R BT.601, in 16 bins of 16 levels; none without channel sums, ``--no_stats``). The next
version compares its profile with it: the largest change of a class's share of the images and of the pixels
(L-infinity, as TFDV's categorical comparator) and the Jensen-Shannon divergence (base 2, 0..1, as TFDV's numeric
one) of the two histograms. A row above the threshold is flagged, and the run warns. Pure.
"""

import math
from typing import Dict, List, Optional, Sequence

DEFAULT_THRESHOLD = 0.05      # docs/leakage.md, "Drift": above a +10 % re-run of one source, below half-size images
BRIGHTNESS_BINS = 16
LUMA = (299, 587, 114)        # BT.601 weights, in thousandths


def empty_profile(num_classes: int) -> dict:
    return {"images": 0, "class_images": [0] * num_classes, "class_pixels": [0] * num_classes, "sizes": {},
            "brightness": [0] * BRIGHTNESS_BINS, "brightness_known": True}


def size_bin(height: int, width: int) -> int:
    """The half-octave of an image's pixels: 2 * log2(pixels), rounded down."""
    return int(2 * math.log2(max(1, height * width)))


def brightness_bin(channel_sum: Sequence[int], pixels: int) -> Optional[int]:
    """The bin of an image's mean luma, or None without channel sums."""
    if not pixels or not any(channel_sum):
        return None
    luma = sum(w * s for w, s in zip(LUMA, channel_sum)) / (1000 * pixels)
    return min(BRIGHTNESS_BINS - 1, int(luma // (256 // BRIGHTNESS_BINS)))


def add_image(profile: dict, height: int, width: int, classes: Sequence[int], class_pixels: Sequence[int],
              channel_sum: Sequence[int]) -> dict:
    """``profile`` with one more image: the classes it holds, its class pixels (segmentation), size and sums."""
    profile["images"] += 1
    for c in classes:
        if 0 <= c < len(profile["class_images"]):
            profile["class_images"][c] += 1
    for c, n in enumerate(class_pixels[:len(profile["class_pixels"])]):
        profile["class_pixels"][c] += n
    key = str(size_bin(height, width))
    profile["sizes"][key] = profile["sizes"].get(key, 0) + 1
    bin_ = brightness_bin(channel_sum, height * width)
    if bin_ is None:
        profile["brightness_known"] = False
    else:
        profile["brightness"][bin_] += 1
    return profile


def merged(a: dict, b: dict) -> dict:
    out = {"images": a["images"] + b["images"],
           "class_images": [x + y for x, y in zip(a["class_images"], b["class_images"])],
           "class_pixels": [x + y for x, y in zip(a["class_pixels"], b["class_pixels"])],
           "sizes": dict(a["sizes"]), "brightness": [x + y for x, y in zip(a["brightness"], b["brightness"])],
           "brightness_known": a["brightness_known"] and b["brightness_known"]}
    for key, n in b["sizes"].items():
        out["sizes"][key] = out["sizes"].get(key, 0) + n
    return out


def published(profile: dict, task: str) -> dict:
    """The profile as manifest.json holds it (sizes sorted; no pixels for classification, no brightness without
    channel sums)."""
    out = {"images": profile["images"], "class_images": profile["class_images"],
           "sizes": {key: profile["sizes"][key] for key in sorted(profile["sizes"], key=int)},
           "brightness": profile["brightness"] if profile["brightness_known"] and profile["images"] else None}
    if task == "segmentation":
        out["class_pixels"] = profile["class_pixels"]
    return out


def _shares(counts: Sequence[int], total: int) -> List[float]:
    return [c / total if total else 0.0 for c in counts]


def _linf(before: Sequence[float], after: Sequence[float]):
    """(the largest change, its index)."""
    pairs = list(zip(before, after))
    if not pairs:
        return 0.0, -1
    index = max(range(len(pairs)), key=lambda i: (abs(pairs[i][1] - pairs[i][0]), -i))
    return abs(pairs[index][1] - pairs[index][0]), index


def jensen_shannon(p: Dict[str, int], q: Dict[str, int]) -> float:
    """The Jensen-Shannon divergence (base 2) of two histograms with the same bins (missing bins are 0)."""
    keys = sorted(set(p) | set(q), key=str)
    tp, tq = sum(p.values()), sum(q.values())
    if not tp or not tq:
        return 0.0
    total = 0.0
    for key in keys:
        a, b = p.get(key, 0) / tp, q.get(key, 0) / tq
        m = (a + b) / 2
        total += (a * math.log2(a / m) if a else 0.0) + (b * math.log2(b / m) if b else 0.0)
    return max(0.0, total / 2)


def _row(feature: str, statistic: str, value: float, threshold: float, detail: str) -> dict:
    return {"feature": feature, "statistic": statistic, "value": round(value, 6), "threshold": threshold,
            "moved": value > threshold, "detail": detail}


def compare(parent: Optional[dict], profile: dict, threshold: float, class_names: Sequence[str]) -> Optional[dict]:
    """manifest.json's ``drift``: this version against its parent's profile (None: the parent has none)."""
    if not parent or not parent.get("images") or not profile.get("images"):
        return None
    names = list(class_names)
    rows = []
    for feature, key, total_of in (("class share of images", "class_images", lambda p: p["images"]),
                                   ("class share of pixels", "class_pixels", lambda p: sum(p["class_pixels"]))):
        if key not in profile or key not in parent:
            continue
        before = _shares(parent[key], total_of(parent))
        after = _shares(profile[key], total_of(profile))
        value, c = _linf(before, after)
        name = names[c] if 0 <= c < len(names) else str(c)
        rows.append(_row(feature, "L-infinity", value, threshold,
                         f"class {c} ({name}): {100 * before[c]:.1f} % -> {100 * after[c]:.1f} %" if c >= 0 else ""))
    rows.append(_row("image size", "Jensen-Shannon", jensen_shannon(parent["sizes"], profile["sizes"]), threshold,
                     "pixels per image, in half-octaves"))
    if parent.get("brightness") and profile.get("brightness"):
        p = {str(i): n for i, n in enumerate(parent["brightness"])}
        q = {str(i): n for i, n in enumerate(profile["brightness"])}
        rows.append(_row("brightness", "Jensen-Shannon", jensen_shannon(p, q), threshold,
                         "mean luma per image, 16 bins"))
    return {"parent_images": parent["images"], "images": profile["images"], "threshold": threshold, "rows": rows}


def warnings(drift: Optional[dict], parent_run_id: Optional[str]) -> List[dict]:
    """A ``warning:`` line per row of ``drift`` above its threshold."""
    if not drift:
        return []
    found = []
    for row in drift["rows"]:
        if row["moved"]:
            detail = f": {row['detail']}" if row["detail"] else ""
            found.append({"drift": row["feature"], "message": (
                f"{row['feature']} moved since version {parent_run_id} ({row['statistic']} {row['value']:.3f} > "
                f"--drift_threshold {row['threshold']:g}){detail}")})
    return found
