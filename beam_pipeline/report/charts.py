"""The report's charts, as SVG text drawn by beam_pipeline.report.svg.

Every chart is a function of its arguments alone (the same input gives the same bytes), 760 px wide, its
text kept as text. Bars are drawn in the order of their labels, top to bottom or left to right.
"""

import collections
import math
from typing import Dict, List, Sequence

import numpy as np

from beam_pipeline.report.data import display_name
from beam_pipeline.report.images import RGB, hex_colour, png_data_uri
from beam_pipeline.report.svg import TEXT, VIRIDIS, Linear, Plot, label_room, plain, text_width, value_scale, viridis

_SERIES_COLOURS = ("#9aa5b1", "#1f4e79", "#e07b39", "#3a9e6f", "#8e5ea2", "#c0504d")
WIDTH = 760
_ROW = 24                   # a horizontal bar's row, px
_SMALL = 9                  # tick labels of crowded axes, px


def _hbars(rows: Sequence[tuple], axis_label: str, size: float = 11, integer: bool = False) -> str:
    """Horizontal bars top to bottom: ``rows`` is [(label, value, colour, text at the bar's end)]."""
    values = [value for _, value, _, _ in rows]
    left = label_room([label for label, *_ in rows], size) + 16
    right = max((text_width(end, 10) for *_, end in rows), default=0) + 16
    x = value_scale(values, integer=integer)
    plot = Plot(WIDTH, _ROW * len(rows) + 56, left, right, 10, 46, x=x, y=Linear(0, max(len(rows), 1)))
    plot.x_axis(x.ticks(), axis_label, grid=True)
    plot.line(plot.x0, plot.y0, plot.x0, plot.y1, top=True)
    for i, (label, value, colour, end) in enumerate(rows):
        top = plot.y0 + i * _ROW + 4
        plot.rect(plot.x0, top, plot.px(value) - plot.x0, _ROW - 8, colour)
        middle = top + (_ROW - 8) / 2
        plot.text(plot.x0 - 7, middle, label, size, anchor="end")
        plot.text(plot.px(value) + 4, middle, end, 10)
    return plot.svg()


def funnel_chart(stages: Sequence[tuple]) -> str:
    """Horizontal bars, one per stage: ``stages`` is [(label, count)] from discovered to written."""
    colour = {"written": "#3a9e6f", "rejected": "#c0504d"}
    return _hbars([(label, value, colour.get(label, "#1f4e79"), f"{value:,}") for label, value in stages], "inputs",
                  integer=True)


def class_share_chart(series: Dict[str, List[float]], classes: Sequence[int], names: Sequence[str],
                      axis_label: str, log: bool = False) -> str:
    """Grouped bars, one group per class and one bar per series: vertical up to 30 classes, else horizontal."""
    labels = [display_name(c, names) for c in classes]
    values = [values[c] for values in series.values() for c in classes]
    scale = value_scale(values, log=log)
    if not log and 0 < max(values, default=0) <= 1:
        scale = Linear(0.0, 1.0)                                # shares: the axis ends at the whole
    n = max(len(series), 1)
    width = 0.8 / n
    legend = [(label, _SERIES_COLOURS[s % len(_SERIES_COLOURS)]) for s, label in enumerate(series)]
    legend = legend if any(v > 0 for v in values) else []      # no split with a bar (nothing written): no legend
    if len(classes) <= 30:
        crowded = sum(len(label) for label in labels) > 70
        rotate = 30 if crowded else 0
        bottom = (label_room(labels, 11, rotate) if crowded else 18) + 34
        left = label_room([name for _, name in scale.ticks()], 11) + 34
        plot = Plot(WIDTH, 300 + bottom, left, 16, 34, bottom, x=Linear(-0.5, len(classes) - 0.5), y=scale)
        plot.y_axis(scale.ticks(), axis_label, grid=True)
        plot.x_axis(list(zip(range(len(classes)), labels)), rotate=rotate)
        for s, (label, shares) in enumerate(series.items()):
            colour = _SERIES_COLOURS[s % len(_SERIES_COLOURS)]
            for i, c in enumerate(classes):
                if log and not shares[c] > 0:                    # no bar for 0 on a log axis
                    continue
                x = plot.px(i - 0.4 + s * width)
                y = plot.py(shares[c]) if shares[c] > 0 else plot.y1
                y = max(y, plot.y0)
                plot.rect(x, y, plot.px(i - 0.4 + (s + 1) * width) - x, plot.y1 - y, colour,
                          f"{labels[i]}, {label}: {plain(shares[c])}")
    else:
        row = 0.09 * 96 * n
        left = label_room(labels, _SMALL) + 16
        plot = Plot(WIDTH, row * len(classes) + 86, left, 16, 40, 46, x=scale, y=Linear(-0.5, len(classes) - 0.5))
        plot.x_axis(scale.ticks(), axis_label, grid=True)
        plot.line(plot.x0, plot.y0, plot.x0, plot.y1, top=True)
        step = (plot.y1 - plot.y0) / len(classes)
        for i, label in enumerate(labels):
            plot.text(plot.x0 - 6, plot.y0 + (i + 0.5) * step, label, _SMALL, anchor="end")
        for s, (label, shares) in enumerate(series.items()):
            colour = _SERIES_COLOURS[s % len(_SERIES_COLOURS)]
            for i, c in enumerate(classes):
                if log and not shares[c] > 0:
                    continue
                y = plot.y0 + (i + 0.1 + s * width) * step
                x = min(plot.px(shares[c]), plot.x1) if shares[c] > 0 else plot.x0
                plot.rect(plot.x0, y, x - plot.x0, width * step, colour, f"{labels[i]}, {label}: {plain(shares[c])}")
    if legend:
        plot.legend(legend, 14)
    return plot.svg()


def size_chart(sizes: collections.Counter) -> str:
    """Image width against height, one marker per distinct size, its area growing with the count."""
    items = sorted(sizes.items())
    biggest = max((n for _, n in items), default=1)
    widths = [w for (w, _), _ in items] or [0]
    heights = [h for (_, h), _ in items] or [0]

    def padded(low, high):
        span = (high - low) or max(high, 1) * 0.5
        return Linear(low - 0.15 * span, high + 0.15 * span)

    x, y = padded(min(widths), max(widths)), padded(min(heights), max(heights))
    left = label_room([name for _, name in y.ticks()], 11) + 34
    plot = Plot(WIDTH, 300, left, 20, 14, 46, x=x, y=y)
    plot.x_axis(x.ticks(), "width (px)", grid=True)
    plot.y_axis(y.ticks(), "height (px)", grid=True)
    for (w, h), n in items:
        plot.circle(plot.px(w), plot.py(h), math.sqrt((20 + 400 * n / biggest) / math.pi) * 4 / 3, "#1f4e79", 0.6)
    for (w, h), n in items if len(items) <= 30 else ():
        plot.text(plot.px(w) + 8, plot.py(h) - 6, f"{n:,}", 9)
    return plot.svg()


def rgb_chart(mean: Sequence[float], std: Sequence[float]) -> str:
    y = Linear(0, 255)
    plot = Plot(WIDTH, 210, 64, 16, 12, 30, x=Linear(-0.5, 2.5), y=y)
    plot.y_axis([(v, str(v)) for v in (0, 50, 100, 150, 200, 250)], "pixel value (0-255)")
    plot.x_axis([(i, name) for i, name in enumerate(("red", "green", "blue"))])
    for i, (m, s, colour) in enumerate(zip(mean, std, ("#d62728", "#2ca02c", "#1f77b4"))):
        left, right = plot.px(i - 0.4), plot.px(i + 0.4)
        plot.rect(left, plot.py(m), right - left, plot.y1 - plot.py(m), colour)
        centre = plot.px(i)
        low, high = plot.py(max(m - s, 0)), plot.py(min(m + s, 255))
        plot.line(centre, low, centre, high, TEXT, top=True)
        for end in (low, high):
            plot.line(centre - 6, end, centre + 6, end, TEXT, top=True)
        plot.text(centre + 10, max(high - 8, plot.y0 + 6), f"{m:.1f} ± {s:.1f}", 10)
    return plot.svg()



def presence_heatmap(rows: Sequence[str], matrix: Sequence[Sequence[float]], classes: Sequence[int],
                     names: Sequence[str]) -> str:
    """Share of each shard's records that hold each class; shards down, classes across."""
    labels = [display_name(c, names) for c in classes]
    caption = "share of the shard's records holding the class"
    left = label_room(rows, _SMALL) + 14
    bottom = label_room(labels, _SMALL, 60) + 12
    right = 96                                                   # the colour bar and its caption
    area_height = max(14 * len(rows), text_width(caption, _SMALL) + 8)
    plot = Plot(max(WIDTH, left + right + 14 * len(classes)), area_height + bottom + 10, left, right, 10, bottom,
                x=Linear(-0.5, len(classes) - 0.5), y=Linear(len(rows) - 0.5, -0.5))
    cell_w = (plot.x1 - plot.x0) / max(len(classes), 1)
    cell_h = (plot.y1 - plot.y0) / max(len(rows), 1)
    if rows and classes:                # a pixel a cell, as an image: 120 × 120 cells stay a few kB
        plot.image(plot.x0, plot.y0, plot.x1 - plot.x0, plot.y1 - plot.y0, png_data_uri(_viridis_pixels(matrix)))
    for r, name in enumerate(rows):
        plot.text(plot.x0 - 6, plot.y0 + (r + 0.5) * cell_h, name, _SMALL, anchor="end")
    for i, label in enumerate(labels):
        x = plot.x0 + (i + 0.5) * cell_w
        plot.line(x, plot.y1, x, plot.y1 + 3, top=True)
        plot.text(x + 3, plot.y1 + 6, label, _SMALL, anchor="end", rotate=-60, baseline="hanging")
    bar_x, bar_top, bar_bottom = plot.x1 + 16, plot.y0, plot.y1
    steps = 32
    for k in range(steps):
        share = (k + 0.5) / steps
        y = bar_bottom - (k + 1) * (bar_bottom - bar_top) / steps
        plot.rect(bar_x, y, 12, (bar_bottom - bar_top) / steps + 0.05, viridis(share))
    for value in (0.0, 0.2, 0.4, 0.6, 0.8, 1.0):
        y = bar_bottom - value * (bar_bottom - bar_top)
        plot.line(bar_x + 12, y, bar_x + 15, y, top=True)
        plot.text(bar_x + 18, y, plain(value), _SMALL)
    plot.text(bar_x + 58, (bar_top + bar_bottom) / 2, caption, _SMALL, anchor="middle", rotate=-90)
    return plot.svg()


def _viridis_pixels(matrix: Sequence[Sequence[float]]) -> np.ndarray:
    table = np.array([[int(c[i:i + 2], 16) for i in (1, 3, 5)] for c in VIRIDIS], np.uint8)
    shares = np.nan_to_num(np.clip(np.asarray(matrix, np.float64), 0.0, 1.0))
    return table[np.rint(shares * (len(VIRIDIS) - 1)).astype(np.intp)]


def strata_chart(strata: Sequence[dict], names: Sequence[str], colours: Sequence[RGB]) -> str:
    return _hbars([(display_name(s["class"], names), s["weight"], hex_colour(colours[s["class"]]),
                    f"{s['weight']:.3f}") for s in strata], "sampling weight of the stratum")


def distance_chart(histogram: Sequence[int], bits: int) -> str:
    """Near-duplicate pairs per Hamming distance of their hashes, 0 up to the radius."""
    y = value_scale(histogram, integer=True)
    left = label_room([name for _, name in y.ticks()], 11) + 34
    plot = Plot(WIDTH, 230, left, 16, 12, 46, x=Linear(-0.5, len(histogram) - 0.5), y=y)
    plot.y_axis(y.ticks(), "near-duplicate pairs", grid=True)
    plot.x_axis([(d, str(d)) for d in range(len(histogram))], f"bits in which the two images' hashes differ (of {bits})")
    for d, count in enumerate(histogram):
        left_x, right_x = plot.px(d - 0.4), plot.px(d + 0.4)
        plot.rect(left_x, plot.py(count), right_x - left_x, plot.y1 - plot.py(count), "#1f4e79", f"{d}: {count:,}")
    return plot.svg()
