"""The gallery: examples per class, rarest class first, masks over images, within a byte budget."""

import html
from typing import Dict, List

from beam_pipeline.report import data
from beam_pipeline.report.images import IGNORE_COLOUR, RGB, hex_colour, jpeg_data_uri, overlay


def _esc(value) -> str:
    return html.escape(str(value), quote=True)


def _encode(item: data.GalleryItem, task: str, colours: List[RGB], ignore_label) -> str:
    if task == "segmentation" and item.mask is not None:
        return jpeg_data_uri(overlay(item.image, item.mask, colours, ignore_label))
    return jpeg_data_uri(item.image)


def encode_within_budget(gallery: Dict[int, List[data.GalleryItem]], order: List[int], task: str,
                         colours: List[RGB], ignore_label, budget: int) -> Dict[int, List[tuple]]:
    """class -> [(item, data URI)], taken round-robin (every class's best first) until ``budget`` bytes."""
    chosen: Dict[int, List[tuple]] = {c: [] for c in order if gallery.get(c)}
    spent = 0
    depth = max((len(items) for items in gallery.values()), default=0)
    for rank in range(depth):
        for c in order:
            items = gallery.get(c, [])
            if rank >= len(items):
                continue
            uri = _encode(items[rank], task, colours, ignore_label)
            if spent + len(uri) > budget:
                return chosen
            spent += len(uri)
            chosen[c].append((items[rank], uri))
    return chosen


def _legend(names: List[str], colours: List[RGB], ignore_label) -> str:
    entries = [f'<span><span class="swatch" style="background:{hex_colour(colours[c])}"></span>'
               f"{_esc(data.display_name(c, names))}</span>" for c in range(len(names))]
    if ignore_label is not None:
        entries.append(f'<span><span class="swatch" style="background:{hex_colour(IGNORE_COLOUR)}"></span>'
                       f"ignore ({_esc(ignore_label)})</span>")
    return f'<div class="legend" id="legend">{"".join(entries)}</div>'


def _figure(item: data.GalleryItem, uri: str, task: str) -> str:
    share = f" · {100 * item.share:.2f} % of pixels" if task == "segmentation" else ""
    return (f'<figure><img alt="{_esc(item.source_id)}" src="{uri}" width="{item.image.shape[1]}" '
            f'height="{item.image.shape[0]}"><figcaption><code>{_esc(item.source_id)}</code><br>{_esc(item.split)}'
            f" · {item.width}×{item.height}{share}</figcaption></figure>")


def gallery_section(report: data.ReportData, colours: List[RGB], limits: data.ReportLimits) -> str:
    manifest = report.manifest
    task = manifest["task"]
    ignore_label = manifest.get("ignore_label") if task == "segmentation" else None
    order = data.rarest_first(manifest)
    chosen = encode_within_budget(report.gallery, order, task, colours, ignore_label, limits.gallery_bytes)
    what = ("the image with its mask blended in (class colours below), the images where the class covers the "
            "most pixels first" if task == "segmentation" else "thumbnails per class")
    parts = [f'<p class="note">Rarest class first; {what}. Examples come from the '
             f"{len(report.sample.shards)} shard(s) read for this report; the caption gives the source path "
             f"relative to the input root.</p>"]
    if task == "segmentation":
        parts.append(_legend(report.class_names, colours, ignore_label))
    for c in order:
        swatch = f'<span class="swatch" style="background:{hex_colour(colours[c])}"></span>'
        figures = "".join(_figure(item, uri, task) for item, uri in chosen.get(c, []))
        body = f'<div class="gallery">{figures}</div>' if figures else \
            '<p class="note">No example of this class in the shards read.</p>'
        title = _esc(data.display_name(c, report.class_names))
        parts.append(f'<h3 data-gallery-class="{c}">{swatch}{title}</h3>{body}')
    return f'<section id="gallery"><h2>Gallery</h2>{"".join(parts)}</section>'
