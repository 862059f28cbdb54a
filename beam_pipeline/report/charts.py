"""The report's charts, drawn with matplotlib as SVG text.

Figures are built with the object API (no pyplot state), so charts can be
drawn from any thread. The SVG is deterministic: no date, fixed element ids,
text kept as text.
"""

import collections
import io
from typing import Dict, List, Sequence

import matplotlib
from matplotlib import ticker
from matplotlib.backends.backend_svg import FigureCanvasSVG
from matplotlib.figure import Figure

from beam_pipeline.report.data import display_name
from beam_pipeline.report.images import RGB, hex_colour

_RC = {"svg.hashsalt": "beam_pipeline.report", "svg.fonttype": "none", "font.size": 9,
       "font.family": "sans-serif", "axes.spines.top": False, "axes.spines.right": False}
_SERIES_COLOURS = ("#9aa5b1", "#1f4e79", "#e07b39", "#3a9e6f", "#8e5ea2", "#c0504d")
WIDTH_IN = 8.0


def _svg(figure: Figure) -> str:
    buffer = io.StringIO()
    with matplotlib.rc_context(_RC):
        FigureCanvasSVG(figure)
        figure.savefig(buffer, format="svg", metadata={"Date": None}, bbox_inches="tight")
    text = buffer.getvalue()
    return text[text.index("<svg"):]


class _PlainLogFormatter(ticker.LogFormatterSciNotation):
    """The log axis's labels on the same ticks as matplotlib's, as plain text ("0.01", "0.1125").

    matplotlib writes them as mathtext, which costs about 15 ms of parsing per distinct label at layout
    time (most of a log chart's time when minor ticks are labelled).
    """

    def __call__(self, x, pos=None):
        return f"{x:.4g}" if super().__call__(x, pos) else ""


def _plain_log(axis) -> None:
    axis.set_major_formatter(_PlainLogFormatter(10))
    axis.set_minor_formatter(_PlainLogFormatter(10, labelOnlyBase=False))


def _figure(height_in: float) -> Figure:
    with matplotlib.rc_context(_RC):
        return Figure(figsize=(WIDTH_IN, max(height_in, 1.6)), layout="constrained")


def funnel_chart(stages: Sequence[tuple]) -> str:
    """Horizontal bars, one per stage: ``stages`` is [(label, count)] from discovered to written."""
    with matplotlib.rc_context(_RC):
        figure = _figure(0.35 * len(stages) + 0.6)
        axes = figure.add_subplot()
        labels = [label for label, _ in stages][::-1]
        values = [value for _, value in stages][::-1]
        colours = ["#3a9e6f" if label == "written" else "#c0504d" if label == "rejected" else "#1f4e79"
                   for label in labels]
        bars = axes.barh(labels, values, color=colours)
        axes.bar_label(bars, labels=[f"{v:,}" for v in values], padding=3)
        axes.set_xlabel("inputs")
        axes.margins(x=0.12)
    return _svg(figure)


def class_share_chart(series: Dict[str, List[float]], classes: Sequence[int], names: Sequence[str],
                      axis_label: str, log: bool = False) -> str:
    """Grouped bars, one group per class and one bar per series: vertical up to 30 classes, else horizontal."""
    vertical = len(classes) <= 30
    with matplotlib.rc_context(_RC):
        n = max(len(series), 1)
        figure = _figure(3.4 if vertical else 0.09 * n * len(classes) + 0.9)
        axes = figure.add_subplot()
        width = 0.8 / n
        draw = axes.bar if vertical else axes.barh
        for s, (label, values) in enumerate(series.items()):
            positions = [i - 0.4 + (s + 0.5) * width for i in range(len(classes))]
            heights = [values[c] if values[c] > 0 or not log else float("nan") for c in classes]  # no bar for 0
            draw(positions, heights, width, label=label, color=_SERIES_COLOURS[s % len(_SERIES_COLOURS)])
        labels = [display_name(c, names) for c in classes]
        if vertical:
            crowded = sum(len(label) for label in labels) > 70
            axes.set_xticks(range(len(classes)), labels, rotation=30 if crowded else 0,
                            ha="right" if crowded else "center")
            axes.set_ylabel(axis_label)
            axes.set_yscale("log" if log else "linear")
            if log:
                _plain_log(axes.yaxis)
            axes.grid(axis="y", alpha=0.3)
        else:
            axes.set_yticks(range(len(classes)), labels, fontsize=7)
            axes.invert_yaxis()
            axes.set_xlabel(axis_label)
            axes.set_xscale("log" if log else "linear")
            if log:
                _plain_log(axes.xaxis)
            axes.grid(axis="x", alpha=0.3)
        if axes.get_legend_handles_labels()[0]:       # no split with a bar (nothing written): no legend
            axes.legend(fontsize=8, ncols=min(n, 3), loc="upper center", bbox_to_anchor=(0.5, 1.16), frameon=False)
    return _svg(figure)


def size_chart(sizes: collections.Counter) -> str:
    """Image width against height, one marker per distinct size, its area growing with the count."""
    with matplotlib.rc_context(_RC):
        figure = _figure(3.2)
        axes = figure.add_subplot()
        items = sorted(sizes.items())
        biggest = max((n for _, n in items), default=1)
        axes.scatter([w for (w, _), _ in items], [h for (_, h), _ in items],
                     s=[20 + 400 * n / biggest for _, n in items], alpha=0.6, color="#1f4e79")
        for (w, h), n in items if len(items) <= 30 else ():
            axes.annotate(f"{n:,}", (w, h), textcoords="offset points", xytext=(6, 4), fontsize=7)
        axes.set_xlabel("width (px)")
        axes.set_ylabel("height (px)")
        axes.margins(0.15)
        axes.grid(alpha=0.3)
    return _svg(figure)


def rgb_chart(mean: Sequence[float], std: Sequence[float]) -> str:
    with matplotlib.rc_context(_RC):
        figure = _figure(2.2)
        axes = figure.add_subplot()
        bars = axes.bar(["red", "green", "blue"], mean, yerr=std, capsize=6, color=["#d62728", "#2ca02c", "#1f77b4"])
        axes.bar_label(bars, labels=[f"{m:.1f} ± {s:.1f}" for m, s in zip(mean, std)], padding=2, fontsize=8)
        axes.set_ylim(0, 255)
        axes.set_ylabel("pixel value (0-255)")
    return _svg(figure)


def presence_heatmap(rows: Sequence[str], matrix: Sequence[Sequence[float]], classes: Sequence[int],
                     names: Sequence[str]) -> str:
    """Share of each shard's records that hold each class; shards down, classes across."""
    with matplotlib.rc_context(_RC):
        figure = _figure(0.18 * len(rows) + 1.6)
        axes = figure.add_subplot()
        image = axes.imshow(matrix, aspect="auto", cmap="viridis", vmin=0.0, vmax=1.0, interpolation="nearest")
        axes.set_xticks(range(len(classes)), [display_name(c, names) for c in classes], rotation=60, ha="right",
                        fontsize=7)
        axes.set_yticks(range(len(rows)), rows, fontsize=7)
        figure.colorbar(image, ax=axes, label="share of the shard's records holding the class", shrink=0.8)
    return _svg(figure)


def strata_chart(strata: Sequence[dict], names: Sequence[str], colours: Sequence[RGB]) -> str:
    with matplotlib.rc_context(_RC):
        figure = _figure(0.3 * len(strata) + 0.8)
        axes = figure.add_subplot()
        labels = [display_name(s["class"], names) for s in strata]
        bars = axes.barh(labels, [s["weight"] for s in strata],
                         color=[hex_colour(colours[s["class"]]) for s in strata])
        axes.bar_label(bars, labels=[f"{s['weight']:.3f}" for s in strata], padding=3, fontsize=8)
        axes.invert_yaxis()
        axes.set_xlabel("sampling weight of the stratum")
        axes.margins(x=0.12)
    return _svg(figure)


def distance_chart(histogram: Sequence[int], bits: int) -> str:
    """Near-duplicate pairs per Hamming distance of their hashes, 0 up to the radius."""
    with matplotlib.rc_context(_RC):
        figure = _figure(2.4)
        axes = figure.add_subplot()
        axes.bar(range(len(histogram)), histogram, color="#1f4e79", width=0.8)
        axes.set_xlabel(f"bits in which the two images' hashes differ (of {bits})")
        axes.set_ylabel("near-duplicate pairs")
        axes.set_xticks(range(len(histogram)))
        axes.grid(axis="y", alpha=0.3)
    return _svg(figure)
