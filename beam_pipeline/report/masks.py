"""The report's warnings (every class the train split lacks, an ignore label that covers most pixels) and the
table of the source mask values a map read, next to the classes they became (core/masks/report.py)."""

from typing import Set

from beam_pipeline.report.html import cell, esc, number, percent, section, table


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
