"""The end-of-run summary table, rendered from manifest.json."""

from typing import List


def _rows(title: str, table: dict) -> List[str]:
    lines = [f"  {title}: {table['total']}"]
    lines += [f"    {reason:<28} {count:>8}" for reason, count in sorted(table["by_reason"].items())]
    return lines


def render_summary(manifest: dict, output: str) -> str:
    counts = manifest["counts"]
    elapsed = manifest.get("elapsed_seconds")
    lines = ["", "=== beam_pipeline summary ===", f"output: {output}", "counts:",
             f"  discovered: {counts['discovered']}"]
    lines += _rows("filtered out", counts["filtered_out"])
    lines += _rows("rejected", counts["rejected"])
    lines += [f"  duplicates: {counts['duplicates']}", f"  written: {counts['written']}"]
    names = manifest.get("class_names") or [str(c) for c in range(manifest["num_classes"])]
    lines.append("splits:")
    for split, entry in sorted(manifest["splits"].items()):
        lines.append(f"  {split:<8} {entry['num_examples']:>8} examples {entry['num_bytes'] / 1e6:>10.1f} MB "
                     f"in {len(entry['shards'])} shard(s)")
    lines.append("classes (examples containing each class, all splits):")
    totals = [0] * len(names)
    pixels = [0] * len(names)
    for entry in manifest["splits"].values():
        totals = [a + b for a, b in zip(totals, entry["class_images"])]
        if entry["class_pixels"]:
            pixels = [a + b for a, b in zip(pixels, entry["class_pixels"])]
    all_pixels = sum(pixels)
    for c, name in enumerate(names):
        share = f"{100.0 * pixels[c] / all_pixels:6.2f} % of pixels" if all_pixels else ""
        lines.append(f"  {c:>3} {name:<20} {totals[c]:>8} {share}")
    if elapsed:
        rate = counts["discovered"] / elapsed
        lines.append(f"time: {elapsed:.1f} s, {rate:.1f} inputs/s, {counts['written'] / elapsed:.1f} written/s")
    return "\n".join(lines)
