"""The end-of-run summary table, rendered from manifest.json."""

from typing import List


def _rows(title: str, table: dict) -> List[str]:
    lines = [f"  {title}: {table['total']}"]
    lines += [f"    {reason:<28} {count:>8}" for reason, count in sorted(table["by_reason"].items())]
    return lines


def render_summary(manifest: dict, output: str) -> str:
    counts = manifest["counts"]
    elapsed = manifest.get("elapsed_seconds")
    lines = ["", "=== beam_pipeline summary ===", f"output: {output}"]
    if manifest.get("data_dir"):
        lines.append(f"published: version {manifest['data_dir']} (report: {manifest['data_dir']}/report.html)")
    lines += ["counts:", f"  discovered: {counts['discovered']}"]
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
    lines += _statistics_lines(manifest.get("statistics"), names)
    lines += _balance_lines(manifest.get("balance") or {}, names)
    if manifest.get("shuffle_value_bytes") is not None:
        lines.append(f"shuffle: {manifest['shuffle_value_bytes'] / 1e6:.2f} MB of metadata values (no pixels)")
    if elapsed:
        rate = counts["discovered"] / elapsed
        lines.append(f"time: {elapsed:.1f} s, {rate:.1f} inputs/s, {counts['written'] / elapsed:.1f} written/s")
    return "\n".join(lines)


def _statistics_lines(stats, names) -> List[str]:
    if not stats:
        return []
    mean = ", ".join(f"{v:.1f}" for v in stats["image_mean"])
    std = ", ".join(f"{v:.1f}" for v in stats["image_std"])
    lines = [f"statistics (train, tf.Transform): {stats['num_images']} images, mean RGB [{mean}], std [{std}]"]
    weights = stats["class_weights"]
    lines.append(f"  {'class':<24} {'median_freq':>12} {'inv_sqrt':>10}")
    for c, name in enumerate(names):
        lines.append(f"  {c:>3} {name:<20} {weights['median_freq'][c]:>12.3f} {weights['inv_sqrt'][c]:>10.3f}")
    return lines


def _balance_lines(balance: dict, names) -> List[str]:
    if "before" not in balance:
        return [f"balance: {balance.get('method', 'none')}"]
    after = balance["after"]
    header = f"balance: {balance['method']} (t={balance['threshold']:g})"
    if "growth" in balance and after.get("sampling") != "strata":
        header += f", train grows {balance['growth']:.2f}x ({after['records']} records)"
    lines = [header, f"  {'class':<24} {'images before':>14} {'after':>8} {'pixels before':>14} {'after':>8}"]
    pixels_before = balance["before"].get("class_pixel_share")
    pixels_after = after.get("class_pixel_share")
    for c, name in enumerate(names):
        row = (f"  {c:>3} {name:<20} {100 * balance['before']['class_image_share'][c]:>13.2f}% "
               f"{100 * after['class_image_share'][c]:>7.2f}%")
        if pixels_before and pixels_after:
            row += f" {100 * pixels_before[c]:>13.3f}% {100 * pixels_after[c]:>7.3f}%"
        lines.append(row)
    return lines
