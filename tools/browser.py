"""Open a local HTML file in headless Chromium (Debian's ``chromium``) and record what the page did.

Used by the report's browser test and by ``tools/report_screenshot.py``. Playwright drives the
browser; it is given Debian's binary (``executable_path``), so nothing is downloaded. The flags
stop Chromium's own background traffic (component updates, sync, field trials), which would
otherwise try to reach the network from an air-gapped machine.
"""

import dataclasses
import os
import re
import shutil
import tempfile
from typing import List, Optional

CHROMIUM_FLAGS = (
    "--no-sandbox",                      # Chromium refuses to run as root with its sandbox (CI runs as root)
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-gpu",
    "--disable-quic",
    "--disable-features=Translate,MediaRouter,OptimizationHints",
    "--metrics-recording-only",
)
_CANDIDATES = ("chromium", "chromium-browser")
_REMOTE = re.compile(r"^(?!file:|data:)")


def chromium_path() -> Optional[str]:
    """Debian's Chromium, or None when it is not installed (``tools/install_chromium.sh`` installs it)."""
    for name in _CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


@dataclasses.dataclass
class PageVisit:
    requests: List[str]            # every URL the page asked for, the page itself included
    console_errors: List[str]      # console messages of type error, and uncaught page errors
    graphics: List[dict]           # every <img> and <svg>: tag, alt, rendered width/height, decoded
    tables: dict                   # table id -> rows of cell texts
    data: dict                     # element attributes the test reads (data-stage, data-reason, ...)
    screenshot: bytes              # full-page PNG


_INSPECT = """() => {
  const graphics = [...document.querySelectorAll('img, svg')].map(el => {
    const box = el.getBoundingClientRect();
    return {tag: el.tagName.toLowerCase(), alt: el.getAttribute('alt') || '', width: box.width,
            height: box.height, decoded: el.tagName === 'IMG' ? (el.complete && el.naturalWidth > 0) : true,
            src: el.tagName === 'IMG' ? el.currentSrc.slice(0, 30) : ''};
  });
  const tables = {};
  for (const table of document.querySelectorAll('table[id]')) {
    tables[table.id] = [...table.querySelectorAll('tbody tr')].map(
      tr => [...tr.querySelectorAll('td')].map(td => td.innerText.trim()));
  }
  const rows = sel => [...document.querySelectorAll(sel)].map(el => ({...el.dataset, text: el.innerText.trim()}));
  return {graphics, tables, data: {funnel: rows('tr[data-stage]'), splits: rows('tr[data-split]'),
          gallery: rows('[data-gallery-class]'), strata: rows('tr[data-stratum]'),
          figures: document.querySelectorAll('#gallery figure').length,
          near_pair_figures: document.querySelectorAll('#leakage figure').length}};
}"""


def visit(html_path: str, width: int = 1280, height: int = 900) -> PageVisit:
    """Load ``html_path`` from file:// and return what was requested, logged and drawn."""
    from playwright.sync_api import sync_playwright

    executable = chromium_path()
    if executable is None:
        raise FileNotFoundError("chromium is not installed (tools/install_chromium.sh)")
    requests: List[str] = []
    errors: List[str] = []
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile, sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            profile, executable_path=executable, headless=True, args=list(CHROMIUM_FLAGS),
            viewport={"width": width, "height": height}, offline=True)
        try:
            page = context.pages[0] if context.pages else context.new_page()
            page.on("request", lambda request: requests.append(request.url))
            # Belt and braces with offline=True: any request that is not file: or data: is aborted here.
            context.route(_REMOTE, lambda route: route.abort())
            page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.goto("file://" + os.path.abspath(html_path), wait_until="load")
            found = page.evaluate(_INSPECT)
            screenshot = page.screenshot(full_page=True)
        finally:
            context.close()
    return PageVisit(requests=requests, console_errors=errors, graphics=found["graphics"],
                     tables=found["tables"], data=found["data"], screenshot=screenshot)


def screenshot(html_path: str, out_png: str, width: int = 1280, height: int = 900, selector: str = "",
               max_height: int = 0) -> None:
    """A PNG of the page (or of the element ``selector``), cut at ``max_height`` pixels when given."""
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile, sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            profile, executable_path=chromium_path(), headless=True, args=list(CHROMIUM_FLAGS),
            viewport={"width": width, "height": height}, offline=True)
        try:
            page = context.pages[0] if context.pages else context.new_page()
            page.goto("file://" + os.path.abspath(html_path), wait_until="load")
            target = page.locator(selector).first if selector else page
            box = target.bounding_box() if selector else {"x": 0, "y": 0, "width": width,
                                                          "height": page.evaluate("document.body.scrollHeight")}
            clip = dict(box, height=min(box["height"], max_height) if max_height else box["height"])
            page.screenshot(path=out_png, clip=clip, full_page=True)
        finally:
            context.close()
