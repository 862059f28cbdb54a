"""ReportData -> one self-contained HTML page (CSS and every image inline, no script, no network)."""

import dataclasses
import json
import re
from typing import Dict, Iterable, List

from beam_pipeline.report import charts, data
from beam_pipeline.report.gallery import gallery_section
from beam_pipeline.report.html import cell, chart, esc, number, percent, section, table
from beam_pipeline.report.masks import mask_values_section, warned_classes, warnings_section
from beam_pipeline.report.images import hex_colour, palette
from beam_pipeline.report.leakage import drift_section, leakage_section

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d2329;background:#f6f7f9}
main{max-width:1180px;margin:0 auto;padding:16px 24px 48px}
header{background:#1f4e79;color:#fff;padding:18px 24px}header h1{margin:0;font-size:22px}
header p{margin:4px 0 0;opacity:.85}
section{background:#fff;border:1px solid #dde1e6;border-radius:8px;padding:12px 18px;margin:16px 0}
h2{font-size:18px;margin:4px 0 10px}h3{font-size:15px;margin:14px 0 6px}
table{border-collapse:collapse;margin:6px 0 10px}th,td{padding:3px 10px;border-bottom:1px solid #eceff2;
text-align:left;vertical-align:top}th{background:#f0f2f5}
td.n{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}
tr.sub td:first-child{padding-left:28px;color:#555}tr.total td{font-weight:600}
.cards{display:flex;flex-wrap:wrap;gap:10px}.card{flex:1 1 130px;border:1px solid #dde1e6;border-radius:6px;
padding:8px 12px}.card b{display:block;font-size:20px}.card span{color:#555;font-size:12px}
img.chart{display:block;max-width:100%;height:auto;margin:6px 0}
.note{color:#555;font-size:12.5px}.swatch{display:inline-block;width:12px;height:12px;border-radius:2px;
vertical-align:-1px;margin-right:5px;border:1px solid #0003}
.examples{margin:2px 0 6px;font-size:12.5px}.examples code{word-break:break-all}
code{font-size:12px;background:#f0f2f5;padding:0 3px;border-radius:3px}
.legend{display:flex;flex-wrap:wrap;gap:4px 14px;margin:6px 0 12px}
.gallery{display:flex;flex-wrap:wrap;gap:10px}figure{margin:0;width:182px;font-size:11px}
figure img{display:block;width:182px;height:auto;border-radius:4px;border:1px solid #dde1e6}
figcaption{color:#444;margin-top:2px}figcaption code{word-break:break-all}
details summary{cursor:pointer;color:#1f4e79}
section.warning{border-color:#d9822b;background:#fff8ef}li.warning{color:#8a4b08}tr.warning td{background:#fff3e0}
"""


def _examples(rows: List[dict]) -> str:
    items = []
    for row in rows:
        second = row.get("mask") or (f"label {row['label']}" if row.get("label") is not None else "")
        second = f" · <code>{esc(second)}</code>" if second else ""
        path = esc(row.get("image") or row.get("key"))
        items.append(f"<li><code>{path}</code>{second}: {esc(row.get('detail'))}</li>")
    return f'<tr class="examples"><td colspan="2"><ul class="examples">{"".join(items)}</ul></td></tr>'


def funnel_section(report: data.ReportData, limits: data.ReportLimits) -> str:
    rows = []
    for stage, reason, count in data.funnel(report.manifest):
        sub = ' class="sub"' if reason else ""
        rows.append(f'<tr{sub} data-stage="{esc(stage)}" data-reason="{esc(reason)}">'
                    f"{cell(reason or stage)}{cell(number(count), True)}</tr>")
        status = {"rejected": "rejected", "duplicates": "duplicate"}.get(stage)
        key = (status, reason if reason else "duplicate")
        if status and (reason or stage == "duplicates") and report.rejects.get(key):
            rows.append(_examples(report.rejects[key]))
    counts = report.manifest["counts"]
    stages = [("discovered", counts["discovered"]), ("filtered out", counts["filtered_out"]["total"]),
              ("rejected", counts["rejected"]["total"]), ("duplicates", counts["duplicates"]),
              ("written", counts["written"])]
    note = "" if report.rejects_complete else \
        '<p class="note">The rejects files were read only in part (size cap): some reasons show no examples.</p>'
    body = (f'<p class="note">Every discovered input is written, filtered out by the selection, rejected with a '
            f"reason, or dropped as a duplicate of written content. Up to {limits.reject_examples} "
            f"examples per reason, from the rejects files.</p>"
            + chart(charts.funnel_chart(stages), "count funnel")
            + table(["stage / reason", "inputs"], rows, "funnel") + note)
    return section("funnel", "Inputs: from discovered to written", body)


def splits_section(manifest: dict) -> str:
    rows = []
    for split, entry in sorted(manifest["splits"].items()):
        values = [entry["num_examples"], entry["num_images"], entry["num_examples"] - entry["num_images"],
                  entry["num_bytes"]]
        megabytes = f"{entry['num_bytes'] / 1e6:,.1f}"
        rows.append(f'<tr data-split="{esc(split)}">{cell(split)}{"".join(cell(number(v), True) for v in values)}'
                    f'{cell(megabytes, True)}{cell(number(len(entry["shards"])), True)}</tr>')
    counts = manifest["counts"]
    headers = ["split", "examples", "images", "repeat copies", "bytes", "MB", "shards"]
    body = table(headers, rows, "splits") + (
        f'<p class="note">{number(counts["records_written"])} records hold {number(counts["written"])} distinct '
        f"images; train may repeat images of rare classes (balancing).</p>")
    return section("splits", "Splits", body)


def _class_rows(report: data.ReportData, colours) -> List[str]:
    manifest = report.manifest
    presence = data.class_distributions(manifest, "images")
    pixels = data.class_distributions(manifest, "pixels") if manifest["task"] == "segmentation" else {}
    factors = (manifest.get("balance") or {}).get("class_repeat_factors")
    weights = ((manifest.get("statistics") or {}).get("class_weights") or {}).get("median_freq")
    rows, warned = [], warned_classes(manifest)
    for c in data.rarest_first(manifest):
        mark = "&#9888; " if c in warned else ""
        cells = [f'<td>{mark}<span class="swatch" style="background:{hex_colour(colours[c])}"></span>{c}</td>',
                 cell(report.class_names[c])]
        cells += [cell(percent(values[c]), True) for values in presence.values()]
        cells += [cell(percent(values[c]), True) for values in pixels.values()]
        cells += [cell(f"{factors[c]:.2f}", True)] if factors else []
        cells += [cell(f"{weights[c]:.3f}", True)] if weights else []
        rows.append(f'<tr data-class="{c}"{" class=warning" if c in warned else ""}>{"".join(cells)}</tr>')
    return rows


def classes_section(report: data.ReportData, colours, limits: data.ReportLimits) -> str:
    manifest = report.manifest
    names = report.class_names
    order = data.rarest_first(manifest)
    shown = data.chart_classes(manifest["num_classes"], order, limits.max_chart_classes)
    presence = data.class_distributions(manifest, "images")
    pixels = data.class_distributions(manifest, "pixels") if manifest["task"] == "segmentation" else {}
    headers = ["class", "name"] + [f"images: {s}" for s in presence] + [f"pixels: {s}" for s in pixels]
    headers += ["repeat factor"] if (manifest.get("balance") or {}).get("class_repeat_factors") else []
    headers += ["loss weight (median freq.)"] if manifest.get("statistics") else []
    body = "<h3>Image presence</h3>" + chart(
        charts.class_share_chart(presence, shown, names, "share of the split's examples holding the class"),
        "class presence per split")
    if pixels:
        body += "<h3>Pixel share</h3>" + chart(charts.class_share_chart(
            pixels, shown, names, "share of the split's labelled pixels (log)",
                                               log=True), "class pixel share per split")
    if len(shown) < len(names):
        body += f'<p class="note">Charts show the {len(shown)} rarest and commonest of {len(names)} classes.</p>'
    body += ('<p class="note">Rarest class first. "train before balancing" is the statistics pass over the train '
             'images; "after" is what the train shards hold, repeat copies included.</p>')
    body += table(headers, _class_rows(report, colours), "classes")
    return section("classes", "Classes per split, before and after balancing", body)


def images_section(report: data.ReportData) -> str:
    body = ""
    statistics = report.manifest.get("statistics")
    if statistics:
        mean, std = statistics["image_mean"], statistics["image_std"]
        swatch = "#{:02x}{:02x}{:02x}".format(*(round(v) for v in mean))
        body += (f'<h3>RGB mean and standard deviation (train, {number(statistics["num_images"])} images, '
                 f'tf.Transform)</h3><p><span class="swatch" style="background:{swatch}"></span>mean '
                 f'<span id="rgb-mean">{", ".join(f"{v:.2f}" for v in mean)}</span>, std '
                 f'<span id="rgb-std">{", ".join(f"{v:.2f}" for v in std)}</span></p>'
                 + chart(charts.rgb_chart(mean, std), "RGB mean and std"))
    sample = report.sample
    if sample.sizes:
        total = len(data.manifest_shards(report.manifest))
        body += (f"<h3>Image sizes</h3><p class=\"note\">From {number(sample.originals)} images in "
                 f"{len(sample.shards)} of {total} shards{'' if sample.complete else ' (read in part)'}; "
                 f"{len(sample.sizes)} distinct sizes.</p>" + chart(charts.size_chart(sample.sizes), "image sizes"))
        body += _size_table(sample.sizes)
    return section("images", "Images", body or '<p class="note">No statistics and no shard was read.</p>')


def _size_table(sizes) -> str:
    """Each size with its count when there are few; else quantiles of width, height and megapixels."""
    if len(sizes) <= 12:
        rows = [f"<tr>{cell(f'{w} × {h}')}{cell(number(n), True)}</tr>"
                for (w, h), n in sorted(sizes.items(), key=lambda item: (-item[1], item[0]))]
        return table(["width × height", "images in the sample"], rows, "sizes")
    quantiles = (0.0, 0.1, 0.5, 0.9, 1.0)
    rows = []
    for name, values in data.size_quantiles(sizes, quantiles).items():
        rows.append(f"<tr>{cell(name)}{''.join(cell(number(v), True) for v in values)}</tr>")
    return table(["", "min", "10 %", "median", "90 %", "max"], rows, "sizes")


def shards_section(report: data.ReportData, limits: data.ReportLimits) -> str:
    shards = data.manifest_shards(report.manifest)
    names = report.class_names
    shown = data.evenly_spaced(shards, limits.max_heatmap_shards)
    if not shown:                       # every input filtered out or rejected: a dataset of no shard
        return section("shards", "Class presence per shard", '<p class="note">No shard was written.</p>')
    classes = data.chart_classes(len(names), data.rarest_first(report.manifest), limits.max_chart_classes)
    matrix = [[s.class_images[c] / s.records if s.records else 0.0 for c in classes] for s in shown]
    body = chart(charts.presence_heatmap([s.path for s in shown], matrix, classes, names), "class presence per shard")
    if len(shown) < len(shards):
        body += f'<p class="note">{len(shown)} of {len(shards)} shards, evenly spaced.</p>'
    rows = [f"<tr>{cell(s.path)}{cell(s.split)}{cell(number(s.records), True)}{cell(f'{s.bytes / 1e6:,.1f}', True)}"
            f"</tr>" for s in shown]
    body += f"<details><summary>Shards</summary>{table(['shard', 'split', 'records', 'MB'], rows)}</details>"
    return section("shards", "Class presence per shard", body)


def balance_section(report: data.ReportData, colours) -> str:
    manifest = report.manifest
    balance = manifest.get("balance") or {"method": "none"}
    facts = [f"method <b>{esc(balance['method'])}</b>"]
    facts += [f"{key.replace('_', ' ')} <b>{esc(balance[key])}</b>" for key in ("threshold", "max_growth")
              if key in balance]
    if (balance.get("after") or {}).get("sampling") == "training":
        facts.append(f"the trainer repeats images of rare classes: about <b>{balance['after']['records_per_epoch']:,.0f}"
                     f"</b> records per epoch (<b>{balance['growth']:.3f}×</b> the train images; the shards hold each "
                     "image once)")
    elif "growth" in balance:
        facts.append(f"train grows <b>{balance['growth']:.3f}×</b>")
    body = f"<p>{', '.join(facts)}</p>"
    strata = (manifest["splits"].get("train") or {}).get("strata")
    if strata:
        rows = [f'<tr data-stratum="{s["class"]}">{cell(s["class"])}{cell(report.class_names[s["class"]])}'
                f'{cell(format(s["weight"], ".4f"), True)}{cell(number(s["num_examples"]), True)}'
                f'{cell(number(len(s["shards"])), True)}</tr>' for s in strata]
        body += (chart(charts.strata_chart(strata, report.class_names, colours), "strata weights")
                 + table(["stratum (class)", "name", "sampling weight", "examples", "shards"], rows, "strata"))
    else:
        body += '<p class="note">No strata: the train split is one stream (see repeat factors per class above).</p>'
    return section("balance", "Balancing, strata and weights", body)


def _flatten(prefix: str, value) -> Iterable[tuple]:
    if isinstance(value, dict):
        for key, inner in sorted(value.items()):
            yield from _flatten(f"{prefix}.{key}" if prefix else key, inner)
    else:
        yield prefix, value


def run_section(manifest: dict) -> str:
    options = "".join(f"<tr>{cell(k)}<td><code>{esc(json.dumps(v))}</code></td></tr>"
                      for k, v in _flatten("", manifest.get("options") or {}))
    versions = "".join(f"<tr>{cell(k)}{cell(v)}</tr>" for k, v in sorted((manifest.get("versions") or {}).items()))
    timing = dict(manifest.get("timing") or {})
    if manifest.get("elapsed_seconds") is not None:
        timing.setdefault("elapsed_seconds", round(manifest["elapsed_seconds"], 1))
    if timing:
        timing_html = table(["timing", "value"], (f"<tr>{cell(k)}{cell(v)}</tr>" for k, v in _flatten("", timing)),
                            "timing")
    else:
        timing_html = '<p class="note" id="timing">This manifest records no timing.</p>'
    lineage = manifest.get("lineage")
    if lineage:
        timing_html += table(["lineage (docs/cache.md)", "value"],
                             (f"<tr>{cell(k)}{cell(v)}</tr>" for k, v in _flatten("", lineage)), "lineage")
    files = [("rejects", manifest.get("rejects")), ("class index", manifest.get("class_index")),
             ("statistics", [(manifest.get("statistics") or {}).get("stats_file")])]
    file_rows = "".join(f"<tr>{cell(kind)}<td>{'<br>'.join(f'<code>{esc(p)}</code>' for p in paths if p)}</td></tr>"
                        for kind, paths in files if paths and any(paths))
    return section("run", "The run: options, versions, timing, lineage",
                   timing_html + "<div class=cards style='align-items:flex-start'>"
                   + f"<div>{table(['option', 'value'], [options], 'options')}</div>"
                   + f"<div>{table(['package', 'version'], [versions], 'versions')}"
                   + f"{table(['files', ''], [file_rows])}</div></div>")


def _cards(manifest: dict) -> str:
    counts = manifest["counts"]
    items = [("discovered", counts["discovered"]), ("written", counts["written"]),
             ("rejected", counts["rejected"]["total"]), ("duplicates", counts["duplicates"]),
             ("filtered out", counts["filtered_out"]["total"]), ("records", counts["records_written"]),
             ("GB written", round(sum(e["num_bytes"] for e in manifest["splits"].values()) / 1e9, 3))]
    return "<div class=cards>" + "".join(f'<div class="card"><b>{number(v)}</b><span>{esc(k)}</span></div>'
                                         for k, v in items) + "</div>"


def _jpeg_bytes(html: str) -> int:
    """The bytes of the JPEG data URIs in ``html``."""
    return sum(len(uri) for uri in re.findall(r'src="(data:image/jpeg;[^"]*)"', html))


def render_html(report: data.ReportData, limits: data.ReportLimits = data.ReportLimits()) -> str:
    manifest = report.manifest
    colours = palette(manifest["num_classes"])
    output = (manifest.get("options") or {}).get("output", "")
    title = f"Dataset report: {output}" if output else "Dataset report"
    leakage = leakage_section(report, limits.gallery_bytes // 4)
    # One budget for the report's images: the near-duplicate pairs' thumbnails take at most a quarter of it, the
    # gallery gets the rest.
    gallery_limits = dataclasses.replace(limits, gallery_bytes=max(0, limits.gallery_bytes - _jpeg_bytes(leakage)))
    sections: Dict[str, str] = {
        "funnel": funnel_section(report, limits), "splits": splits_section(manifest),
        "classes": classes_section(report, colours, limits), "mask-values": mask_values_section(manifest),
        "images": images_section(report),
        "shards": shards_section(report, limits), "balance": balance_section(report, colours),
        "leakage": leakage, "drift": drift_section(manifest),
        "gallery": gallery_section(report, colours, gallery_limits), "run": run_section(manifest)}
    sections = {key: html for key, html in sections.items() if html}
    nav = " · ".join(f'<a href="#{key}">{key}</a>' for key in sections)
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
            f'<meta name="viewport" content="width=device-width,initial-scale=1"><style>{_CSS}</style></head><body>'
            f'<header><h1>{esc(title)}</h1><p>{esc(manifest["task"])}, {manifest["num_classes"]} classes, '
            f'manifest format {esc(manifest.get("format_version"))} · {nav}</p></header><main>'
            f'{_cards(manifest)}{warnings_section(manifest)}{"".join(sections.values())}</main></body></html>\n')
