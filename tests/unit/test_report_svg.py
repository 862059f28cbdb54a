"""The report's charts drawn as SVG text (beam_pipeline/report/svg.py, charts.py): round ticks, log axes, text
kept as escaped text, well-formed and deterministic SVG that a browser can size."""

import collections
import xml.etree.ElementTree as ET

import pytest

from beam_pipeline.report import charts, svg

pytestmark = pytest.mark.unit
NS = "{http://www.w3.org/2000/svg}"


def test_ticks_are_round_numbers_covering_the_range():
    assert svg.nice_ticks(0, 1) == [0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert svg.nice_ticks(0, 264.6) == [0, 100, 200]
    assert svg.nice_ticks(0, 12) == [0, 2.5, 5, 7.5, 10]
    assert svg.nice_ticks(340, 500) == [350, 400, 450, 500]
    assert svg.Linear(0, 3, integer=True).ticks() == [(0, "0"), (1, "1"), (2, "2"), (3, "3")]


def test_a_log_axis_has_a_tick_per_decade_labelled_plainly():
    scale = svg.value_scale([0.0, 0.00005, 0.35], log=True)             # zero has no place on a log axis
    assert [label for _, label in scale.ticks()] == ["1e-05", "0.0001", "0.001", "0.01", "0.1", "1"]
    assert scale(1e-5) == 0.0 and scale(1.0) == 1.0 and scale(0.0) != scale(0.0)   # NaN: not drawn


def test_a_linear_value_axis_starts_at_zero_and_ends_on_a_tick_above_the_largest_value():
    scale = svg.value_scale([252, 240, 10])
    assert (scale.low, scale.high) == (0.0, 300)
    assert svg.value_scale([]).high == 1.0


def test_labels_and_colours():
    assert [svg.plain(v) for v in (0, 0.25, 2000, 1e-05, 12.5)] == ["0", "0.25", "2,000", "1e-05", "12.5"]
    assert svg.viridis(0.0) == "#440154" and svg.viridis(1.0) == "#fde725" and svg.viridis(float("nan")) == "#440154"


def _parse(text: str) -> ET.Element:
    root = ET.fromstring(text)
    assert root.tag == NS + "svg"
    assert float(root.get("width")) > 0 and float(root.get("height")) > 0     # an <img> needs its size
    return root


def test_every_chart_is_well_formed_svg_with_its_labels_as_text_and_the_same_bytes_twice():
    names = ["road", "<sky & \"cloud\">", "car", "person"]
    series = {"train": [0.9, 0.5, 0.0, 0.01], "val": [1.0, 0.25, 0.0, 0.0]}
    drawn = {
        "funnel": lambda: charts.funnel_chart([("discovered", 252), ("rejected", 10), ("written", 240)]),
        "shares": lambda: charts.class_share_chart(series, [0, 1, 2, 3], names, "share"),
        "log": lambda: charts.class_share_chart(series, [0, 1, 2, 3], names, "pixels (log)", log=True),
        "many": lambda: charts.class_share_chart({"train": [i / 40 for i in range(40)]}, list(range(40)),
                                                 [f"class {i}" for i in range(40)], "share"),
        "sizes": lambda: charts.size_chart(collections.Counter({(480, 360): 113, (512, 384): 67})),
        "rgb": lambda: charts.rgb_chart([102.5, 116.2, 123.6], [41.2, 50.5, 67.0]),
        "heatmap": lambda: charts.presence_heatmap(["train-00000-of-00002.tfrecord", "val-00000-of-00001.tfrecord"],
                                                   [[1.0, 0.5, 0.0, 0.1], [0.9, 0.0, 0.2, 1.0]], [0, 1, 2, 3], names),
        "strata": lambda: charts.strata_chart([{"class": 3, "weight": 0.3}, {"class": 1, "weight": 0.05}], names,
                                              [(10, 20, 30)] * 4),
        "distances": lambda: charts.distance_chart([0, 0, 1, 4, 6], 256),
        "no pairs": lambda: charts.distance_chart([0] * 15, 256),
    }
    for name, draw in drawn.items():
        text = draw()
        assert draw() == text, name
        root = _parse(text)
        words = [t.text for t in root.iter(NS + "text")]
        if name in ("shares", "log", "heatmap"):
            assert '1 <sky & "cloud">' in words, (name, words)          # escaped in the file, the name on screen
            assert "<sky &" not in text
    shares = _parse(drawn["shares"]())
    log = _parse(drawn["log"]())
    bars = {root: [r.find(NS + "title").text for r in root.iter(NS + "rect") if r.find(NS + "title") is not None]
            for root in (shares, log)}
    assert sorted(bars[shares]) == sorted(bars[log])                    # a bar per class and split above 0
    assert sorted(bars[log]) == ["0 road, train: 0.9", "0 road, val: 1", "1 <sky & \"cloud\">, train: 0.5",
                                 "1 <sky & \"cloud\">, val: 0.25", "3 person, train: 0.01"]   # no bar for 0 on log
    assert "train" in [t.text for t in shares.iter(NS + "text")]        # the legend
    heatmap = _parse(drawn["heatmap"]())
    cells = [i.get("href") for i in heatmap.iter(NS + "image")]
    assert len(cells) == 1 and cells[0].startswith("data:image/png;base64,")   # a pixel a cell
    from PIL import Image
    import base64
    import io
    import numpy as np
    pixels = np.asarray(Image.open(io.BytesIO(base64.b64decode(cells[0].split(",", 1)[1]))))
    assert pixels.shape == (2, 4, 3)
    assert [f"#{r:02x}{g:02x}{b:02x}" for r, g, b in pixels[0]] == ["#fde725", "#21918c", "#440154", "#472d7b"]
    funnel = [t.text for t in _parse(drawn["funnel"]()).iter(NS + "text")]
    assert {"discovered", "252", "rejected", "10", "written", "240", "inputs"} <= set(funnel)
