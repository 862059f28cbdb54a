"""report.html in a real browser: headless Chromium (Debian's package) loads it from file://.

Under CI (CI=true) a missing Chromium or Playwright fails the test instead of skipping it:
``make test`` installs Chromium (tools/install_chromium.sh) and requirements.txt pins Playwright.
"""

import importlib.util
import io
import json
import os

import numpy as np
import pytest
from PIL import Image

from beam_pipeline.report import render_report
from test_end_to_end import BROKEN, MANIFEST_ROWS, VALID_PAIRS
from test_report import CLS_REJECTED
from tools.browser import chromium_path, visit

pytestmark = pytest.mark.integration

FIXED = {  # the sample corpus's design: discovered, written, rejected reasons
    "segmentation_run": (MANIFEST_ROWS, VALID_PAIRS, sorted(BROKEN.values())),
    "classification_run": (403, 401, sorted(CLS_REJECTED.values())),
}


def need_browser():
    missing = []
    if chromium_path() is None:
        missing.append("chromium (tools/install_chromium.sh)")
    if importlib.util.find_spec("playwright") is None:
        missing.append("playwright (requirements.txt)")
    if missing:
        message = "missing " + ", ".join(missing)
        if os.environ.get("CI") == "true":
            pytest.fail(message + ": under CI the browser test must run")
        pytest.skip(message)


def as_int(text: str) -> int:
    return int(text.replace(",", ""))


@pytest.fixture(scope="module", params=["segmentation_run", "classification_run"])
def page_visit(request):
    need_browser()
    out = request.getfixturevalue(request.param)[0]
    manifest = json.loads((out / "manifest.json").read_text())
    html_path = out / manifest["data_dir"] / "report.html"      # the page the run published
    assert html_path.read_bytes() == render_report(manifest, str(out))            # paths relative to the output folder
    return request.param, manifest, visit(str(html_path)), html_path


def test_no_request_leaves_the_page(page_visit):
    _, _, seen, html_path = page_visit
    assert seen.requests[0] == "file://" + str(html_path)
    assert all(url.startswith(("file:", "data:")) for url in seen.requests), seen.requests


def test_no_console_error(page_visit):
    assert page_visit[2].console_errors == []


def test_every_image_rendered_with_a_size(page_visit):
    task, _, seen, _ = page_visit
    images = [g for g in seen.graphics if g["tag"] == "img"]
    charts = [g for g in images if g["src"].startswith("data:image/svg+xml")]
    photos = [g for g in images if g["src"].startswith("data:image/jpeg")]
    assert len(charts) >= 6 and photos, (len(charts), len(photos))
    bad = [g for g in seen.graphics if not (g["decoded"] and g["width"] > 0 and g["height"] > 0)]
    assert bad == []
    # The photographs are the gallery's and the near-duplicate pairs' (two per pair, side by side).
    assert seen.data["near_pair_figures"] % 2 == 0
    assert seen.data["figures"] + seen.data["near_pair_figures"] == len(photos)


def test_screenshot_is_not_blank(page_visit):
    pixels = np.asarray(Image.open(io.BytesIO(page_visit[2].screenshot)).convert("RGB"))
    assert pixels.shape[0] > 2000 and pixels.shape[1] >= 1280
    assert pixels.std() > 20
    assert len(np.unique(pixels[::4, ::4].reshape(-1, 3), axis=0)) > 500


def test_counts_shown_equal_the_manifest(page_visit):
    fixture, manifest, seen, _ = page_visit
    counts = manifest["counts"]
    rows = {(row["stage"], row["reason"]): as_int(row["text"].split()[-1]) for row in seen.data["funnel"]}
    assert rows[("discovered", "")] == counts["discovered"]
    assert rows[("filtered out", "")] == counts["filtered_out"]["total"]
    assert rows[("rejected", "")] == counts["rejected"]["total"]
    assert rows[("duplicates", "")] == counts["duplicates"]
    assert rows[("written", "")] == counts["written"]
    reasons = {reason: n for (stage, reason), n in rows.items() if stage == "rejected" and reason}
    assert reasons == counts["rejected"]["by_reason"]
    discovered, written, fixed_reasons = FIXED[fixture]
    assert (rows[("discovered", "")], rows[("written", "")], sorted(reasons)) == (discovered, written, fixed_reasons)
    splits = {row["split"]: [as_int(cell) for cell in row["text"].split()[1:5]] for row in seen.data["splits"]}
    assert splits == {split: [e["num_examples"], e["num_images"], e["num_examples"] - e["num_images"], e["num_bytes"]]
                      for split, e in manifest["splits"].items()}


def test_gallery_and_strata_shown(page_visit):
    fixture, manifest, seen, _ = page_visit
    assert sorted(int(row["galleryClass"]) for row in seen.data["gallery"]) == list(range(manifest["num_classes"]))
    strata = manifest["splits"]["train"].get("strata")
    assert bool(strata) == (fixture == "classification_run")
    if strata:
        shown = {int(row["stratum"]): float(row["text"].split()[2]) for row in seen.data["strata"]}
        assert shown == pytest.approx({s["class"]: s["weight"] for s in strata}, abs=5e-5)


def test_the_checks_see_a_request_a_console_error_and_a_broken_image(tmp_path):
    """The same visit on a page that breaks each rule: the checks above can fail."""
    need_browser()
    page = tmp_path / "bad.html"
    page.write_text('<!DOCTYPE html><html><body><img alt="far" src="http://report-test.invalid/x.png">'
                    '<img alt="broken" src="data:image/png;base64,AAAA"><script>console.error("boom")</script>'
                    "</body></html>")
    seen = visit(str(page))
    assert "http://report-test.invalid/x.png" in seen.requests
    assert "boom" in seen.console_errors
    assert {g["alt"] for g in seen.graphics if not g["decoded"]} == {"far", "broken"}
