"""What a run says about its masks and labels, so that nothing is mislabelled silently.

* :func:`mask_values_table`: the source values (or colours) the written masks hold, with their pixels
  and images, next to the class each became (manifest.json ``mask_values``; the summary, report.html
  and ``--plan`` show it);
* :func:`class_warnings`: a line for every class with no pixels (classification: no images) in the train
  split, and for a run whose ignore label covers more than half of the mask pixels, each naming its likely
  cause (manifest.json ``warnings``; the summary prints them as ``warning: ...``, the report marks them);
* :func:`border_warnings`: a line for a class that lies only on object edges (nearly all of its pixels within
  BORDER_RADIUS of another class, over a sample of the written masks): a border band between objects, such as
  Oxford-IIIT Pet's trimap value 3 or VOC's 255, is usually meant as ignore, and trains as a class silently when
  a map, ``--reduce_zero_label`` or ``--num_classes`` makes it one.

Pure: the splits' tallies (manifest.json's shape), sampled masks and the maps in, JSON-ready values out.
"""

from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from beam_pipeline.core.masks import maps as lm
from beam_pipeline.core.masks import values as mv
from beam_pipeline.core.selection import TRAIN

IGNORE_SHARE_LIMIT = 0.5          # a run whose ignore label covers more of the mask pixels gets a warning
BORDER_RADIUS = 2                 # a pixel is on an edge when another value (a class, the ignore label) is this near
BORDER_SHARE = 0.9                # a class with this share of its pixels on edges lies only on object borders
BORDER_MIN_MASKS = 3              # ... in at least this many sampled masks (docs/validation.md measures both)
SPECIAL = {mv.OTHER_UNMAPPED: "other unlisted values", mv.TRANSPARENT: "transparent (alpha 0)"}


def map_description(mask: Optional[lm.MaskMap], labels: Optional[lm.LabelMap]) -> Optional[dict]:
    """The map a run used, for manifest.json (None: no map)."""
    if mask is not None:
        return {"source": mask.source, "kind": mask.kind, "sha256": mask.sha256,
                "reduce_zero_label": mask.reduce_zero_label, "unmapped": mask.unmapped, "entries": len(mask.entries)}
    if labels is not None:
        return {"source": labels.source, "kind": lm.LABELS, "sha256": labels.sha256, "unmapped": labels.unmapped,
                "entries": len(labels.entries)}
    return None


def sum_mask_values(per_shard: Iterable[Iterable[Sequence[int]]]) -> Dict[int, Tuple[int, int]]:
    """``{source: (pixels, images)}`` over the shards' ``mask_values``."""
    out: Dict[int, List[int]] = {}
    for shard in per_shard:
        for source, pixels, images in shard:
            tally = out.setdefault(source, [0, 0])
            tally[0] += pixels
            tally[1] += images
    return {source: (pixels, images) for source, (pixels, images) in sorted(out.items())}


def class_of_source(mask: lm.MaskMap, source: int, num_classes: int, ignore_label: Optional[int]) -> Optional[int]:
    """The class id a source value or colour became; None for the ignore label."""
    if source in SPECIAL:
        return None
    if mask.kind == lm.COLORS:
        cls = dict(mask.entries).get(source, lm.IGNORE)
    else:
        cls = int(mv.value_table(mask, num_classes, ignore_label)[source])
    return None if cls < 0 or cls == ignore_label else cls


def mask_values_table(mask: lm.MaskMap, totals: Dict[int, Tuple[int, int]], class_names: Sequence[str],
                      num_classes: int, ignore_label: Optional[int]) -> List[dict]:
    """One row per source value found: ``{"source", "text", "class", "class_name", "pixels", "images"}``."""
    rows = []
    for source, (pixels, images) in totals.items():
        cls = class_of_source(mask, source, num_classes, ignore_label)
        rows.append({"source": source, "text": SPECIAL.get(source) or lm.source_text(mask, source),
                     "class": "ignore" if cls is None else cls,
                     "class_name": "ignore" if cls is None else class_names[cls],
                     "pixels": pixels, "images": images})
    return rows


def _sum(splits: Dict[str, dict], key: str, num_classes: int) -> List[int]:
    total = [0] * num_classes
    for entry in splits.values():
        for c, value in enumerate(entry.get(key) or []):
            total[c] += value
    return total


def ignore_share(splits: Dict[str, dict]) -> float:
    """The ignore label's share of every mask pixel written (records, all splits)."""
    ignore = sum(entry.get("ignore_pixels", 0) for entry in splits.values())
    pixels = sum(sum(entry.get("class_pixels") or []) for entry in splits.values()) + ignore
    return ignore / pixels if pixels else 0.0


def class_warnings(*, task: str, num_classes: int, class_names: Sequence[str], ignore_label: Optional[int],
                   splits: Dict[str, dict], mask: Optional[lm.MaskMap] = None, labels: Optional[lm.LabelMap] = None,
                   values: Sequence[dict] = ()) -> List[dict]:
    """The warnings of a run (module docstring): ``{"class": class id or None, "message": one line}``;
    ``values``: :func:`mask_values_table`'s rows."""
    train = splits.get(TRAIN)
    if not train or not train.get("num_images", train.get("num_examples", 0)):
        held = ", ".join(f"{name} {entry.get('num_images', entry.get('num_examples', 0)):,}"
                         for name, entry in sorted(splits.items()) if name != TRAIN)
        return [{"class": None, "message": "the train split is empty: no class can be learned from this version "
                                           f"(its splits: {held or 'none, no pair was written'})"}]
    names = list(class_names) or [str(c) for c in range(num_classes)]
    lines = []
    share = ignore_share(splits) if task == "segmentation" else 0.0
    key = "class_pixels" if task == "segmentation" else "class_images"
    counts = train.get(key) or [0] * num_classes
    for c in range(num_classes):
        if counts[c] == 0:
            what = "pixels" if task == "segmentation" else "images"
            cause = _absent_cause(c, task, num_classes, ignore_label, share, mask, labels, values)
            lines.append({"class": c, "message": f"class {c} ({names[c]}) has no {what} in the train split: {cause}"})
    if share > IGNORE_SHARE_LIMIT:
        lines.append({"class": None, "message": f"the ignore label {ignore_label} covers {100 * share:.1f}% of all "
                                                f"mask pixels: {_ignore_cause(num_classes, ignore_label, mask, values)}"})
    return lines


def _absent_cause(c: int, task: str, num_classes: int, ignore_label, share: float, mask, labels, values) -> str:
    if task == "classification":
        if labels is not None:
            sources = [label for label, cls in labels.entries if cls == c]
            return (f"{labels.source} maps {_few(sources)} to it, and no train image has them" if sources
                    else f"{labels.source} maps no label to it")
        return "no train image has this label (an empty class folder, or the split left it out)"
    if mask is None:
        if ignore_label == 255 and share > 0 and (num_classes == 2 or share > IGNORE_SHARE_LIMIT):
            return ("likely masks stored as 0/255 with --ignore_label 255, which makes every foreground pixel "
                    "ignore: give --label_map binary255 (0 is class 0, 255 class 1), or a map of your own")
        return f"no train mask holds the value {c}; check --num_classes and what the masks store (a --label_map)"
    if mask.kind == lm.IDENTITY:
        return f"no train mask holds the value {c + 1} (--reduce_zero_label makes it class {c})"
    sources = [source for source, cls in mask.entries if cls == c]
    if not sources:
        return f"{mask.source} maps no value to it"
    found = [row["text"] for row in values if row["class"] == c]
    named = _few([_named(mask, s) for s in sources])
    return (f"{mask.source} maps {named} to it, and no train mask holds them" if not found
            else f"{mask.source} maps {named} to it; they are only in other splits")


def _ignore_cause(num_classes: int, ignore_label, mask, values) -> str:
    if mask is None:
        if ignore_label == 255 and num_classes == 2:
            return ("likely masks stored as 0/255 with --ignore_label 255: give --label_map binary255 "
                    "(0 is class 0, 255 class 1)")
        return (f"check what the masks store: every pixel of value {ignore_label} is ignored (a class stored "
                f"as {ignore_label}? give a --label_map)")
    ignored = sorted((row for row in values if row["class"] == "ignore"), key=lambda row: -row["pixels"])
    if not ignored:
        return f"check {mask.source}"
    total = sum(row["pixels"] for row in values) or 1
    parts = [f"{row['text']} ({100 * row['pixels'] / total:.1f}%)" for row in ignored[:4]]
    return f"{mask.source} makes these ignore: {', '.join(parts)}" + (", ..." if len(ignored) > 4 else "")


def _named(mask: lm.MaskMap, source: int) -> str:
    """``value 24 (person)``, ``colour (64,64,0) (Pedestrian)``."""
    text = lm.color_text(source) if mask.kind == lm.COLORS else str(source)
    name = dict(mask.names).get(source)
    return f"{'colour' if mask.kind == lm.COLORS else 'value'} {text}" + (f" ({name})" if name else "")


def _few(items: Sequence[str], limit: int = 4) -> str:
    shown = ", ".join(str(item) for item in items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def near_other(mask: np.ndarray, radius: int = BORDER_RADIUS) -> np.ndarray:
    """bool HxW: the pixels with a pixel of another value within ``radius`` (a square window; the image's own edges
    are not an edge)."""
    height, width = mask.shape
    padded = np.pad(mask, radius, mode="edge")
    near = np.zeros(mask.shape, dtype=bool)
    for dy in range(-radius, radius + 1):
        for dx in range(-radius, radius + 1):
            if dy or dx:
                near |= padded[radius + dy:radius + dy + height, radius + dx:radius + dx + width] != mask
    return near


def edge_tally(masks: Iterable[np.ndarray], num_classes: int) -> np.ndarray:
    """int[3, num_classes]: per class, its pixels, those on an edge (:func:`near_other`), and the masks holding it."""
    tally = np.zeros((3, num_classes), dtype=np.int64)
    for mask in masks:
        near = near_other(mask)
        pixels = np.bincount(mask.ravel(), minlength=256)[:num_classes]
        tally[0] += pixels
        tally[1] += np.bincount(mask[near].ravel(), minlength=256)[:num_classes]
        tally[2] += pixels > 0
    return tally


def border_warnings(tally: np.ndarray, class_names: Sequence[str], mask: Optional[lm.MaskMap] = None) -> List[dict]:
    """A warning per class that lies only on object edges (module docstring), naming it, the source values that
    become it, and the fix."""
    out = []
    pixels, edges, masks = tally
    for c in range(len(pixels)):
        if masks[c] < BORDER_MIN_MASKS or edges[c] < BORDER_SHARE * pixels[c]:
            continue
        name = class_names[c] if c < len(class_names) else str(c)
        if mask is None:
            source, row = f"value {c} of the masks", f"a --label_map row {c},ignore"
        elif mask.kind == lm.IDENTITY:
            source, row = f"value {c + 1} (--reduce_zero_label)", f"a --label_map row {c + 1},ignore"
        else:
            sources = [_named(mask, value) for value, cls in mask.entries if cls == c]
            source = f"{_few(sources)} ({mask.source})" if sources else mask.source
            row = f"a row that maps {'it' if len(sources) == 1 else 'them'} to ignore in the map"
        out.append({"class": c, "border": True, "message": (
            f"class {c} ({name}) lies only on object edges: {100 * edges[c] / pixels[c]:.0f}% of its pixels are within "
            f"{BORDER_RADIUS} px of another class, in {masks[c]} sampled masks; it is {source}. A border band (Pet's "
            f"trimap 3, VOC's 255) is usually meant as ignore: give {row} (--label_map pet, voc do), or keep it if "
            "it is a class to learn")})
    return out
