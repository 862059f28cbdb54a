"""A small plotting kit that writes SVG text: scales with round ticks, axes, bars, markers, cells, a legend.

The report's seven charts need bars, a scatter and a heatmap on linear or log axes, nothing more. Drawn with
matplotlib they took about 60 % of the report's time (0.5 s of CPU a run on the sample corpus, every run
pays it); drawn here, a few milliseconds (docs/benchmarks.md, "Fast start"). The output is a function of the
input alone: no date, no random ids, numbers rounded to 0.1 px, text kept as text (a browser lays it out in
its own sans-serif font, so label widths below are estimates with a margin).
"""

import html
import math
from typing import List, Optional, Sequence, Tuple

FONT = "font-family:DejaVu Sans,Arial,Helvetica,sans-serif"
TEXT = "#222"
AXIS = "#555"
GRID = "#ddd"
_CHAR_WIDTH = 0.58           # an average glyph's width, in font sizes (sans-serif digits and letters: ~0.55)

VIRIDIS = ("#440154", "#48186a", "#472d7b", "#424086", "#3b528b", "#33638d", "#2c728e", "#26828e", "#21918c",
           "#1fa088", "#28ae80", "#3fbc73", "#5ec962", "#84d44b", "#addc30", "#d8e219", "#fde725")


def text_width(text: str, size: float) -> float:
    return len(text) * size * _CHAR_WIDTH


def _f(value: float) -> str:
    """A coordinate, to 0.1 px, without a needless ".0"."""
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text


def _esc(value) -> str:
    return html.escape(str(value), quote=True)


def plain(value: float) -> str:
    """A tick's label: 0.01, 0.25, 1, 2,000."""
    if value == 0:
        return "0"
    if abs(value) >= 1000 and float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:.4g}"


def viridis(share: float) -> str:
    """The viridis colour of ``share`` in [0, 1] (17 stops, the nearest one)."""
    share = min(max(share, 0.0), 1.0) if share == share else 0.0
    return VIRIDIS[round(share * (len(VIRIDIS) - 1))]


def nice_ticks(low: float, high: float, count: int = 6) -> List[float]:
    """Round values from ``low`` to ``high``, a step of 1, 2, 2.5 or 5 × 10^k, about ``count`` of them."""
    if not high > low:
        high = low + 1.0
    raw = (high - low) / max(count - 1, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    first = math.ceil(low / step - 1e-9)
    ticks = []
    k = first
    while k * step <= high + step * 1e-9:
        ticks.append(round(k * step, 12))
        k += 1
    return ticks


class Linear:
    """``integer``: ticks on whole numbers only (counts)."""

    def __init__(self, low: float, high: float, integer: bool = False):
        self.low, self.high = low, high if high > low else low + 1.0
        self.integer = integer

    def __call__(self, value: float) -> float:
        return (value - self.low) / (self.high - self.low)

    def ticks(self) -> List[Tuple[float, str]]:
        return [(t, plain(t)) for t in nice_ticks(self.low, self.high)
                if self.low - 1e-12 <= t <= self.high + 1e-12 and (not self.integer or float(t).is_integer())]


class Log:
    def __init__(self, low: float, high: float):
        self.low, self.high = math.log10(low), math.log10(high) if high > low else math.log10(low) + 1.0

    def __call__(self, value: float) -> float:
        if not value > 0:
            return float("nan")
        return (math.log10(value) - self.low) / (self.high - self.low)

    def ticks(self) -> List[Tuple[float, str]]:
        return [(10.0 ** k, plain(10.0 ** k)) for k in range(math.ceil(self.low - 1e-9), math.floor(self.high + 1e-9) + 1)]


def value_scale(values: Sequence[float], log: bool = False, headroom: float = 1.05, integer: bool = False):
    """A scale from 0 (linear) or below the smallest positive value (log) to above the largest."""
    if log:
        positive = [v for v in values if v > 0]
        if not positive:
            return Log(1e-3, 1.0)
        # a decade boundary strictly below the smallest value, so that its bar shows
        return Log(10.0 ** (math.ceil(math.log10(min(positive))) - 1), 10.0 ** math.ceil(math.log10(max(positive))))
    top = max((v for v in values if v == v), default=0.0)
    top = top * headroom if top > 0 else 1.0
    ticks = nice_ticks(0.0, top)
    step = ticks[1] - ticks[0] if len(ticks) > 1 else top
    return Linear(0.0, math.ceil(top / step - 1e-9) * step, integer)


class Plot:
    """One chart: an SVG of ``width`` × ``height`` px whose plot area leaves the given margins for labels.

    ``x`` and ``y`` map data to [0, 1] across the area (Linear, Log); drawing methods take data coordinates.
    """

    def __init__(self, width: float, height: float, left: float, right: float, top: float, bottom: float,
                 x=None, y=None):
        self.width, self.height = width, height
        self.x0, self.x1 = left, width - right
        self.y0, self.y1 = top, height - bottom          # y0 is the top of the area
        self.x, self.y = x or Linear(0, 1), y or Linear(0, 1)
        self.items: List[str] = []
        self.on_top: List[str] = []

    # coordinates
    def px(self, value: float) -> float:
        return self.x0 + self.x(value) * (self.x1 - self.x0)

    def py(self, value: float) -> float:
        return self.y1 - self.y(value) * (self.y1 - self.y0)

    # primitives, in pixels
    def rect(self, x: float, y: float, w: float, h: float, fill: str, title: Optional[str] = None) -> None:
        if w <= 0 or h <= 0 or any(v != v for v in (x, y, w, h)):
            return
        tip = f"<title>{_esc(title)}</title>" if title else ""
        self.items.append(f'<rect x="{_f(x)}" y="{_f(y)}" width="{_f(w)}" height="{_f(h)}" fill="{fill}">{tip}'
                          f'</rect>' if tip else
                          f'<rect x="{_f(x)}" y="{_f(y)}" width="{_f(w)}" height="{_f(h)}" fill="{fill}"/>')

    def line(self, x1: float, y1: float, x2: float, y2: float, stroke: str = AXIS, width: float = 1.0,
             top: bool = False) -> None:
        (self.on_top if top else self.items).append(
            f'<line x1="{_f(x1)}" y1="{_f(y1)}" x2="{_f(x2)}" y2="{_f(y2)}" stroke="{stroke}" '
            f'stroke-width="{_f(width)}"/>')

    def circle(self, x: float, y: float, r: float, fill: str, opacity: float = 1.0) -> None:
        self.items.append(f'<circle cx="{_f(x)}" cy="{_f(y)}" r="{_f(r)}" fill="{fill}" '
                          f'fill-opacity="{opacity:g}"/>')

    def image(self, x: float, y: float, w: float, h: float, href: str) -> None:
        """A raster (a data: URI) stretched over the box, each pixel a sharp-edged cell (a heatmap)."""
        self.items.append(f'<image x="{_f(x)}" y="{_f(y)}" width="{_f(w)}" height="{_f(h)}" '
                          f'preserveAspectRatio="none" style="image-rendering:pixelated" href="{href}"/>')

    def text(self, x: float, y: float, text: str, size: float = 11, anchor: str = "start", rotate: float = 0,
             baseline: str = "middle", fill: str = TEXT) -> None:
        turn = f' transform="rotate({_f(rotate)} {_f(x)} {_f(y)})"' if rotate else ""
        self.on_top.append(f'<text x="{_f(x)}" y="{_f(y)}" font-size="{_f(size)}" text-anchor="{anchor}" '
                           f'dominant-baseline="{baseline}" fill="{fill}"{turn}>{_esc(text)}</text>')

    # axes
    def x_axis(self, ticks: Sequence[Tuple[float, str]], label: str = "", size: float = 11, rotate: float = 0,
               grid: bool = False) -> None:
        self.line(self.x0, self.y1, self.x1, self.y1, top=True)
        for value, name in ticks:
            x = self.px(value)
            if x != x:
                continue
            if grid:
                self.line(x, self.y0, x, self.y1, GRID)
            self.line(x, self.y1, x, self.y1 + 4, top=True)
            if rotate:
                self.text(x + 3, self.y1 + 8, name, size, anchor="end", rotate=-rotate, baseline="hanging")
            else:
                self.text(x, self.y1 + 7, name, size, anchor="middle", baseline="hanging")
        if label:
            self.text((self.x0 + self.x1) / 2, self.height - 6, label, 11, anchor="middle", baseline="auto")

    def y_axis(self, ticks: Sequence[Tuple[float, str]], label: str = "", size: float = 11,
               grid: bool = False) -> None:
        self.line(self.x0, self.y0, self.x0, self.y1, top=True)
        for value, name in ticks:
            y = self.py(value)
            if y != y:
                continue
            if grid:
                self.line(self.x0, y, self.x1, y, GRID)
            self.line(self.x0 - 4, y, self.x0, y, top=True)
            self.text(self.x0 - 7, y, name, size, anchor="end")
        if label:
            self.text(12, (self.y0 + self.y1) / 2, label, 11, anchor="middle", rotate=-90)

    def legend(self, entries: Sequence[Tuple[str, str]], y: float, size: float = 10) -> None:
        """Swatches and labels in one row, centred over the plot area at ``y``."""
        widths = [14 + text_width(label, size) + 16 for label, _ in entries]
        x = (self.x0 + self.x1) / 2 - sum(widths) / 2
        for (label, colour), width in zip(entries, widths):
            self.rect(x, y - 5, 10, 10, colour)
            self.text(x + 14, y, label, size)
            x += width

    def svg(self) -> str:
        body = "".join(self.items) + "".join(self.on_top)
        return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{_f(self.width)}" height="{_f(self.height)}" '
                f'viewBox="0 0 {_f(self.width)} {_f(self.height)}" style="{FONT}">'
                f'<rect width="100%" height="100%" fill="#fff"/>{body}</svg>')


def label_room(labels: Sequence[str], size: float, rotate: float = 0) -> float:
    """Pixels a row of tick labels needs below an axis (rotated by ``rotate`` degrees) or beside it."""
    longest = max((text_width(label, size) for label in labels), default=0.0)
    if rotate:
        return longest * math.sin(math.radians(rotate)) + size * 1.5
    return longest
