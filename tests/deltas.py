"""A changed listing for the re-run tests on other engines and stores (D + Δ − R), and a version's live records.

``write_delta(folder)`` writes, beside a corpus's ``manifest.csv`` (D), ``delta.csv``: D without every 7th row (R),
with one kept pair moved to another split, and with Δ: new pairs under ``delta/``, flipped copies of some of D's
pairs (new bytes, so new content). Nothing of D is changed, so the corpus stays what the other tests of the
session expect; the files are written once per folder, under a file lock (the session's test processes share
its corpora: tests/shared_outputs.py).

``live_records(out)``: per split, the SHA-256 of each record the version holds, read with tf.data, the deleted
ones skipped (docs/incremental.md): what a version must share with a fresh full run on the same listing.
``uncacheable(manifest)``: the rejects a re-run validates again, whatever the verdict cache holds.
"""

import collections
import csv
import hashlib
import itertools
import json
from pathlib import Path
from typing import List, NamedTuple

LISTING = "delta.csv"
ADDED_DIR = "delta"
REMOVE_EVERY = 7


class Delta(NamedTuple):
    listing: Path
    added: List[str]            # the new files, relative to the corpus folder (an image and a mask per pair)


def _opens(folder: Path, row: dict) -> bool:
    from PIL import Image
    try:
        with Image.open(folder / row["image"]) as image, Image.open(folder / row["mask"]) as mask:
            image.load()
            mask.load()
            return image.size == mask.size and "broken" not in row["image"] and "escape" not in row["image"]
    except Exception:           # noqa: BLE001 - any file PIL refuses (broken, a decompression bomb) is not copied
        return False


def write_delta(folder: Path, added: int = 3) -> Delta:
    import fcntl
    folder = Path(folder)
    with open(folder.parent / f".{folder.name}-{LISTING}.lock", "w") as lock:      # outside the corpus folder
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _write_delta(folder, added)


def _write_delta(folder: Path, added: int) -> Delta:
    from PIL import Image
    with open(folder / "manifest.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    listed = collections.Counter(row["image"] for row in rows)
    kept = [index % REMOVE_EVERY != REMOVE_EVERY - 1 for index in range(len(rows))]
    # pairs listed once whose files open, in listing order, decoded only as far as needed
    decodable = (index for index, row in enumerate(rows) if listed[row["image"]] == 1 and _opens(folder, row))
    copied = [rows[index] for index in itertools.islice(decodable, added)]
    moved = next(index for index in decodable if kept[index] and rows[index].get("split") == "train")
    new_rows, new_files = [], []
    for number, row in enumerate(copied):
        names = {}
        for column in ("image", "mask"):
            source = folder / row[column]
            relative = f"{ADDED_DIR}/{column}s/added_{number}{source.suffix}"
            target = folder / relative
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                with Image.open(source) as picture:
                    picture.transpose(Image.Transpose.FLIP_TOP_BOTTOM).save(target, format=picture.format)
            names[column] = relative
            new_files.append(relative)
        new_rows.append({**row, **names})
    listing = folder / LISTING
    if not listing.exists():
        with open(listing, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows([dict(row, split="val") if index == moved else row
                              for index, row in enumerate(rows) if kept[index]] + new_rows)
    return Delta(listing, new_files)


def uncacheable(manifest: dict) -> int:
    """The rejects that never enter the verdict cache (no file to take a version of)."""
    from beam_pipeline.core import reasons
    by_reason = manifest["counts"]["rejected"]["by_reason"]
    return sum(by_reason.get(reason, 0) for reason in
               (reasons.MISSING_FILE, reasons.EMPTY_FILE, reasons.UNREADABLE, reasons.FILE_TOO_LARGE))


def live_records(out, manifest=None):
    """{split: Counter of the SHA-256 of each live record}, read with tf.data, skipping the deleted ones."""
    import tensorflow as tf
    out = Path(out)
    manifest = manifest or json.loads((out / "manifest.json").read_text())
    found = {}
    for split, entry in manifest["splits"].items():
        digests = collections.Counter()
        for shard in entry["shards"]:
            deleted = set(shard.get("deleted", ()))
            for index, record in enumerate(tf.data.TFRecordDataset(str(out / shard["path"]))):
                if index not in deleted:
                    digests[hashlib.sha256(record.numpy()).hexdigest()] += 1
        found[split] = digests
    return found


def records_changed(out) -> tuple:
    """(records the version holds that its parent did not, records of the parent it no longer holds)."""
    out = Path(out)
    manifest = json.loads((out / "manifest.json").read_text())
    parent = json.loads((out / "runs" / manifest["lineage"]["parent_run_id"] / "manifest.json").read_text())
    before, after = live_records(out, parent), live_records(out, manifest)
    new = sum(sum((after[s] - before.get(s, collections.Counter())).values()) for s in after)
    gone = sum(sum((before[s] - after.get(s, collections.Counter())).values()) for s in before)
    return new, gone
