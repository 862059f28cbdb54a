"""The end-of-run summary, rendered from manifest.json: short enough to read at a glance.

Counts, rejects by reason, splits, statistics and balancing take a line each;
one table has a row per class (images, pixel share, class weight, train
presence before and after balancing). With many classes the table keeps the
rarest; every class is in report.html and manifest.json.
"""

from typing import List

from beam_pipeline.core.leakage.summary import summary_line as leakage_lines
from beam_pipeline.core.tasks import units
from beam_pipeline.report.data import class_presence

MAX_CLASS_ROWS = 12         # the rarest classes shown when there are more
MAX_VALUE_ROWS = 16         # the source values with the most pixels shown when there are more
MAX_DAMAGE_LINES = 3        # damaged parent shards named, one warning line each
MAX_CLASS_WARNINGS = 3      # more classes without train pixels than this share one warning line


def _reasons(table: dict) -> str:
    return ", ".join(f"{reason} {count}" for reason, count in sorted(table["by_reason"].items()))


def _wrapped(head: str, text: str, width: int = 100) -> List[str]:
    """``head`` + ``text``, broken at ", " so that no line is longer than ``width``."""
    lines, line = [], head
    for part in text.split(", "):
        piece = part if line == head else f", {part}"
        if len(line) + len(piece) > width and line != head:
            lines.append(line + ",")
            line = "  " + part
        else:
            line += piece
    return lines + [line]


def unchanged_lines(manifest: dict) -> List[str]:
    """What a re-run that found nothing changed says (launcher/rerun/unchanged.py)."""
    found = manifest["unchanged"]
    started = (manifest.get("timing") or {}).get("started")
    listing = ", listing" if ((manifest.get("lineage") or {}).get("inputs") or {}).get("listing") else ""
    return _wrapped("unchanged: ", f"nothing changed since this version{f' of {started}' if started else ''}: "
                    f"its options, code{listing}, {found['files']} files and the files of its {found['pairs']:,} "
                    f"{units(manifest.get('task', ''))} are as they were") + [
        "  Nothing was written. --skip_unchanged never runs the pipeline all the same"]


def render_summary(manifest: dict, output: str) -> str:
    counts = manifest["counts"]
    elapsed = manifest.get("elapsed_seconds")
    lines = ["=== beam_pipeline summary ===", f"output: {output}"]
    if manifest.get("data_dir"):
        lines.append(f"published: version {manifest['data_dir']} (report: {manifest['data_dir']}/report.html)")
    if manifest.get("unchanged"):
        lines += unchanged_lines(manifest)
    lines += [f"counts: discovered: {counts['discovered']}, written: {counts['written']}, "
              f"rejected: {counts['rejected']['total']}, duplicates: {counts['duplicates']}, "
              f"filtered out: {counts['filtered_out']['total']}"]
    for title, table in (("rejected", counts["rejected"]), ("filtered out", counts["filtered_out"])):
        if table["by_reason"]:
            lines += _wrapped(f"  {title}: ", _reasons(table))
    lineage = lineage_line(manifest.get("lineage"), units(manifest.get("task", "")))
    if lineage:
        lines.append(lineage)
    splits = [f"{split} {entry['num_examples']} in {len(entry['shards'])} ({entry['num_bytes'] / 1e6:.1f} MB)"
              for split, entry in sorted(manifest["splits"].items())]
    nothing = f"none: no {units(manifest.get('task', ''))[:-1]} was written"
    lines += _wrapped("splits (records in shards): ", ", ".join(splits) or nothing)
    stats = manifest.get("statistics")
    if stats:
        mean = " ".join(f"{v:.1f}" for v in stats["image_mean"])
        std = " ".join(f"{v:.1f}" for v in stats["image_std"])
        lines.append(f"statistics (train, tf.Transform): {stats['num_images']} images, mean RGB {mean}, std {std}"
                     if stats["num_images"] else "statistics (train, tf.Transform): none, the train split is empty")
    lines.append(_balance_line(manifest.get("balance") or {}))
    lines += leakage_lines(manifest.get("leakage"))
    lines += _class_table(manifest)
    lines += mask_values_lines(manifest)
    tail = []
    if elapsed and manifest.get("unchanged"):
        tail.append(f"time: {elapsed:.1f} s")
    elif elapsed:
        tail.append(f"time: {elapsed:.1f} s, {counts['discovered'] / elapsed:.1f} inputs/s, "
                    f"{counts['written'] / elapsed:.1f} written/s")
    if manifest.get("shuffle_value_bytes") is not None:
        tail.append(f"shuffle: {manifest['shuffle_value_bytes'] / 1e6:.2f} MB of metadata")
    if tail:
        lines.append("; ".join(tail))
    lines += warning_lines(manifest)
    lines += damaged_parent_lines(manifest.get("lineage") or {})
    return "\n".join(lines)


def warning_lines(manifest: dict) -> List[str]:
    """A ``warning:`` line per warning of manifest.json; the classes without train pixels (or images) share one
    line when there are more than a few (each one's cause is in report.html and manifest.json)."""
    warnings = manifest.get("warnings") or ()
    absent = [w for w in warnings if w.get("class") is not None and not w.get("border")]
    if len(absent) <= MAX_CLASS_WARNINGS:
        return [f"warning: {warning['message']}" for warning in warnings]
    names = manifest.get("class_names") or []
    listed = ", ".join(f"{w['class']}" + (f" {names[w['class']]}" if w["class"] < len(names) else "") for w in absent)
    what = "pixels" if manifest.get("task") == "segmentation" else "images"
    lines = _wrapped(f"warning: {len(absent)} classes have no {what} in the train split (each one's cause in "
                     f"report.html and manifest.json): ", listed)
    return lines + [f"warning: {warning['message']}" for warning in warnings if warning not in absent]


def damaged_parent_lines(lineage: dict) -> List[str]:
    """A warning line per damaged shard of the parent version (the first few), and what became of its records."""
    damaged = lineage.get("damaged_parent") or []
    if not damaged:
        return []
    records = lineage.get("records") or {}
    lines = [f"warning: the published version's shard {d['shard']} was damaged and not kept: {d['problem']}"
             for d in damaged[:MAX_DAMAGE_LINES]]
    if len(damaged) > MAX_DAMAGE_LINES:
        lines.append(f"warning: ... and {len(damaged) - MAX_DAMAGE_LINES} more damaged shards (manifest.json, "
                     "lineage.damaged_parent)")
    lost = records.get("lost", 0)
    lines.append(f"warning: {records.get('rebuilt', 0):,} of their records were written again from their sources"
                 + (f"; {lost:,} were lost with them, their pairs gone (rejected ones: parent_shard_missing)"
                    if lost else "") + "; python -m beam_pipeline.verify checks the new version (docs/recovery.md)")
    return lines


def mask_values_lines(manifest: dict, rest: str = "in report.html and manifest.json") -> List[str]:
    """The source values (or colours) the masks hold, with their share of the pixels and the class each became."""
    rows = manifest.get("mask_values")
    if not rows:
        return []
    total = sum(row["pixels"] for row in rows) or 1
    shown = rows if len(rows) <= MAX_VALUE_ROWS else sorted(
        sorted(rows, key=lambda row: -row["pixels"])[:MAX_VALUE_ROWS], key=lambda row: row["source"])
    source = (manifest.get("maps") or {}).get("source", "")
    lines = [f"mask values ({source}; value -> class, share of mask pixels, masks with it):"]
    for row in shown:
        cls = "ignore" if row["class"] == "ignore" else f"{row['class']} {row['class_name']}"
        lines.append(f"  {row['text']:<28} -> {cls:<22} {100 * row['pixels'] / total:7.2f}% {row['images']:>7}")
    if len(rows) > len(shown):
        lines.append(f"  ... {len(rows) - len(shown)} more values {rest}")
    return lines


def lineage_line(lineage, unit: str = "pairs") -> str:
    """``validation: 12 pairs validated, 228 from the verdict cache (3 after hashing); built on <run id>``
    (``unit``: core/tasks.py's units)."""
    if not lineage:
        return ""
    reused = lineage["from_cache"] + lineage["rehashed"]
    text = f"validation: {lineage['validated']} {unit} validated"
    if lineage.get("cache") is None:
        text += " (no verdict cache: --no_cache)"
    else:
        text += f", {reused} from the verdict cache"
        if lineage["rehashed"]:
            text += f" ({lineage['rehashed']} after hashing their files)"
        if lineage.get("not_spilled"):
            text += (f" ({lineage['not_spilled']} validated not kept in the spill, --spill: the writer read "
                     f"their files again)")
    if lineage.get("parent_run_id"):
        text += f"; built on version {lineage['parent_run_id']}"
    records = lineage.get("records")
    if records is not None:
        line = f"\nversion: {records['written']:,} records written ({lineage['bytes_written'] / 1e6:,.1f} MB)"
        if lineage.get("parent_run_id") and not lineage.get("rewritten"):
            line += (f", {records['kept']:,} kept in {len(lineage['reused_runs'])} earlier run(s)' shards, "
                     f"{records['deleted']:,} deleted")
            line += f", {records['compacted']:,} compacted" if records["compacted"] else ""
        elif lineage.get("parent_run_id"):
            line += f": all written again ({lineage['rewritten']})"
        if records.get("adopted"):
            line += (f"; {records['adopted']:,} adopted from the killed run's spill without a copy "
                     f"({lineage.get('bytes_adopted', 0) / 1e6:,.1f} MB)")
        text += line
    return text


def _balance_line(balance: dict) -> str:
    if "before" not in balance:
        return f"balance: {balance.get('method', 'none')}"
    line = f"balance: {balance['method']} (t={balance['threshold']:g})"
    after = balance["after"]
    if after.get("sampling") == "training":
        line += (f": the trainer repeats images of rare classes, about {after['records_per_epoch']:,.0f} records per "
                 f"epoch from {balance['before']['images']:,} train images ({balance['growth']:.2f}x)")
    elif "growth" in balance and after.get("sampling") != "strata":
        line += f", train grows {balance['growth']:.2f}x ({after['records']} records)"
    return line


def _class_table(manifest: dict) -> List[str]:
    names = manifest.get("class_names") or [str(c) for c in range(manifest["num_classes"])]
    images = class_presence(manifest)           # original images, as the report counts them
    records = [0] * len(names)                  # records in the shards, repeat copies included
    pixels = [0] * len(names)
    for entry in manifest["splits"].values():
        records = [a + b for a, b in zip(records, entry["class_images"])]
        if entry["class_pixels"]:
            pixels = [a + b for a, b in zip(pixels, entry["class_pixels"])]
    all_pixels = sum(pixels)
    stats = manifest.get("statistics") or {}
    weights = (stats.get("class_weights") or {}).get("median_freq")
    balance = manifest.get("balance") or {}
    before, after = balance.get("before"), balance.get("after")
    show_records = records != images
    header = f"  {'class':<24} {'images':>7}"
    header += f" {'records':>7}" if show_records else ""
    header += f" {'pixels':>7}" if all_pixels else ""
    header += f" {'weight':>7}" if weights else ""
    header += "  train images before -> after" if before else ""
    after = balance.get("after") or {}
    header += "  pixels before -> after" if before and before.get("class_pixel_share") and \
        after.get("class_pixel_share") else ""
    rows = range(len(names))
    if len(names) > MAX_CLASS_ROWS:
        rows = sorted(sorted(rows, key=lambda c: (images[c], c))[:MAX_CLASS_ROWS])
    counted = "images with each class, all splits" + ("; records: with repeat copies" if show_records else "")
    cut = "; the rarest first when cut" if len(names) > MAX_CLASS_ROWS else ""
    lines = [f"classes ({counted}; weight: median_freq{cut}):", header]
    for c in rows:
        row = f"  {c:>3} {names[c]:<20} {images[c]:>7}"
        row += f" {records[c]:>7}" if show_records else ""
        row += f" {100.0 * pixels[c] / all_pixels:6.2f}%" if all_pixels else ""
        row += f" {weights[c]:>7.3f}" if weights else ""
        if before:
            row += (f"  {100 * before['class_image_share'][c]:>10.2f}% -> "
                    f"{100 * after['class_image_share'][c]:>6.2f}%")
            if before.get("class_pixel_share") and after.get("class_pixel_share"):
                row += (f"  {100 * before['class_pixel_share'][c]:>7.3f}% -> "
                        f"{100 * after['class_pixel_share'][c]:>7.3f}%")
        lines.append(row)
    if len(names) > MAX_CLASS_ROWS:
        lines.append(f"  ... {len(names) - MAX_CLASS_ROWS} more classes in report.html and manifest.json")
    return lines
