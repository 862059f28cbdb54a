"""The report's sections on splits you can trust (docs/leakage.md): the near duplicates found (the distance
histogram, the components, the cross-split pairs, the closest ones side by side) and the drift since the parent
version, as a table in the manner of TFDV's anomalies view."""

from typing import List

from beam_pipeline.report import charts, data
from beam_pipeline.report.html import cell, chart, esc, number, section, table
from beam_pipeline.report.images import jpeg_data_uri


def _facts(leakage: dict) -> str:
    hashing, components, cross = leakage["hash"], leakage["components"], leakage["cross_split_pairs"]
    rows = [("hash", f"{hashing['name']}, {hashing['bits']} bits, radius {hashing['radius']} "
                     f"({hashing['bands']} bands)"),
            ("policy", f"--near_duplicates {leakage['policy']}: {leakage['applied']}"),
            ("split groups", f"--split_group {leakage['split_group']}" if leakage.get("split_group") else "none"),
            ("near-duplicate pairs", number(leakage["pairs"])),
            ("components (2 or more split units)", f"{number(components['count'])}, the largest "
                                                   f"{number(components['largest'])} images"),
            ("pairs across splits before grouping", number(cross["before"])),
            ("pairs across splits after grouping", number(cross["after"])),
            ("pairs moved to another split", number(leakage.get("moved_pairs", 0))),
            ("split groups per split", ", ".join(f"{split} {number(n)}"
                                                 for split, n in leakage["groups_per_split"].items())),
            ("pairs file", leakage["pairs_file"])]
    body = "".join(f'<tr data-fact="{esc(name)}">{cell(name)}{cell(value)}</tr>' for name, value in rows)
    return table(["", ""], [body], "leakage-facts")


def _sizes(leakage: dict) -> str:
    sizes = leakage["components"]["sizes"]
    if not sizes:
        return ""
    rows = [f"<tr>{cell(size)}{cell(number(n), True)}</tr>" for size, n in sizes.items()]
    return table(["images in the component", "components"], rows, "component-sizes")


def _figure(pair: dict, uri: str, thumb, which: int) -> str:
    before, after = pair["splits_before"][which], pair["splits_after"][which]
    moved = "" if before == after else f" → {esc(after)}"
    name = pair["a"] if which == 0 else pair["b"]
    return (f'<figure><img alt="{esc(name)}" src="{uri}" width="{thumb.shape[1]}" '
            f'height="{thumb.shape[0]}"><figcaption><code>{esc(name)}</code><br>{esc(before)}{moved}'
            f"</figcaption></figure>")


def _pairs(report: data.ReportData, leakage: dict, budget: int) -> str:
    """The closest cross-split pairs side by side, closest first, while their images fit ``budget`` bytes."""
    if not report.near_pairs:
        return '<p class="note">No near-duplicate pair lay across splits.</p>'
    rows, spent = [], 0
    for pair, thumb_a, thumb_b in report.near_pairs:
        uris = (jpeg_data_uri(thumb_a), jpeg_data_uri(thumb_b))
        if spent + len(uris[0]) + len(uris[1]) > budget:
            break
        spent += len(uris[0]) + len(uris[1])
        rows.append(f'<div class="gallery" data-near-pair="{pair["distance"]}">{_figure(pair, uris[0], thumb_a, 0)}'
                    f'{_figure(pair, uris[1], thumb_b, 1)}<p class="note">{pair["distance"]} bits apart</p></div>')
    what = ("before grouping, and the split each went to" if leakage["applied"].startswith("grouped")
            else "now (the splits are kept)")
    left = len(report.near_pairs) - len(rows)
    more = f'<p class="note">{left} more pair(s) left out: the report\'s image budget is spent.</p>' if left else ""
    return f'<h3>The closest pairs across splits, {what}</h3>' + "".join(rows) + more


def leakage_section(report: data.ReportData, image_bytes: int) -> str:
    """The near-duplicate section; its thumbnails take at most ``image_bytes`` of the report's image budget."""
    leakage = report.manifest.get("leakage")
    if not leakage:
        return ""
    body = ('<p class="note">Near duplicates are images whose perceptual hashes differ in at most the radius '
            "(docs/leakage.md): re-encodes, resizes, small crops, brightness changes, frames of one video. In two "
            "splits, the test score measures memory.</p>" + _facts(leakage))
    if leakage["pairs"]:
        body += chart(charts.distance_chart(leakage["distance_histogram"], leakage["hash"]["bits"]),
                      "near-duplicate pairs per distance")
    body += _sizes(leakage) + _pairs(report, leakage, image_bytes)
    return section("leakage", "Near duplicates and split groups", body)


def _drift_rows(drift: dict) -> List[str]:
    rows = []
    for row in drift["rows"]:
        mark = "&#9888; " if row["moved"] else ""
        rows.append(f'<tr data-drift="{esc(row["feature"])}"{" class=warning" if row["moved"] else ""}>'
                    f'<td>{mark}{esc(row["feature"])}</td>{cell(row["statistic"])}{cell(format(row["value"], ".4f"), True)}'
                    f'{cell(row["threshold"], True)}{cell("moved" if row["moved"] else "within")}{cell(row["detail"])}</tr>')
    return rows


def drift_section(manifest: dict) -> str:
    drift = manifest.get("drift")
    if not manifest.get("profile"):
        return ""
    if not drift:
        return section("drift", "Drift since the previous version",
                       '<p class="note">No previous version with a profile to compare with.</p>')
    body = (f'<p class="note">This version ({number(drift["images"])} images) against the one it replaced '
            f'({number(drift["parent_images"])}): the largest change of a class share (L-infinity) and the '
            "Jensen-Shannon divergence of the image-size and brightness histograms, as TFDV's drift comparators; "
            "a row above its threshold (--drift_threshold) is flagged.</p>"
            + table(["feature", "statistic", "value", "threshold", "", "detail"], _drift_rows(drift), "drift"))
    return section("drift", "Drift since the previous version", body)
