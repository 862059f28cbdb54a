"""The report's warnings (every class the train split lacks, an ignore label that covers most pixels) and the
table of the source mask values a map read, next to the classes they became (core/masks/report.py); and the
written masks a run samples to find a class that lies only on object edges (:func:`sampled_masks`)."""

import io
from typing import Iterator, Set

import numpy as np
from apache_beam.io.filesystems import FileSystems
from PIL import Image

from beam_pipeline.core import features, layout
from beam_pipeline.core.example import example_bytes_values
from beam_pipeline.report.html import cell, esc, number, percent, section, table
from beam_pipeline.report.tfrecord import read_records

SAMPLED_MASKS = 32            # masks read from the train shards for core/masks/report.border_warnings


def warned_classes(manifest: dict) -> Set[int]:
    return {w["class"] for w in manifest.get("warnings") or () if w.get("class") is not None}


def warnings_section(manifest: dict) -> str:
    """A box above everything else, one line per warning of manifest.json; empty when there is none."""
    warnings = manifest.get("warnings") or ()
    if not warnings:
        return ""
    items = "".join(f'<li class="warning" data-class="{esc(w.get("class", ""))}">&#9888; {esc(w["message"])}</li>'
                    for w in warnings)
    return (f'<section id="warnings" class="warning"><h2>Warnings</h2><ul>{items}</ul><p class="note">The same '
            "lines end the console summary. Each names the likely cause; docs/validation.md, Label maps.</p></section>")


def mask_values_section(manifest: dict) -> str:
    """Every source value (or colour) the written masks hold, its pixels and masks, and the class it became."""
    rows = manifest.get("mask_values")
    if not rows:
        return ""
    maps = manifest.get("maps") or {}
    total = sum(row["pixels"] for row in rows) or 1
    body_rows = [f'<tr data-source="{esc(row["source"])}">{cell(row["text"])}'
                 f'{cell(row["class"] if row["class"] == "ignore" else str(row["class"]) + " " + row["class_name"])}'
                 f'{cell(number(row["pixels"]), True)}{cell(percent(row["pixels"] / total), True)}'
                 f'{cell(number(row["images"]), True)}</tr>' for row in rows]
    note = (f'<p class="note">Read through <code>{esc(maps.get("source", ""))}</code> (SHA-256 '
            f'<code>{esc((maps.get("sha256") or "")[:16])}</code>, --unmapped {esc(maps.get("unmapped", ""))}'
            f'{", --reduce_zero_label first" if maps.get("reduce_zero_label") else ""}): every value the written '
            "masks hold, over their original images (not repeat copies).</p>")
    return section("mask-values", "Mask values and the classes they became",
                   note + table(["source value", "class", "pixels", "share", "masks"], body_rows, "mask-values"))


def sampled_masks(output: str, manifest: dict, limit: int = SAMPLED_MASKS) -> Iterator[np.ndarray]:
    """Up to ``limit`` masks of the train split as written (class ids), the shards in name order, each read from its
    start until the masks are found; deleted records are passed over."""
    shards = sorted((manifest.get("splits") or {}).get("train", {}).get("shards") or (), key=lambda s: s["path"])
    found = 0
    for shard in shards:
        deleted = set(shard.get("deleted") or ())
        with FileSystems.open(layout.resolve(output, manifest, shard["path"])) as handle, \
                io.BufferedReader(handle, 1 << 20) as buffered:
            for index, record in enumerate(read_records(buffered)):
                if index in deleted:
                    continue
                encoded = example_bytes_values(record, (features.MASK_ENCODED,)).get(features.MASK_ENCODED)
                if encoded is None:
                    return
                yield np.asarray(Image.open(io.BytesIO(bytes(encoded))))
                found += 1
                if found >= limit:
                    return
