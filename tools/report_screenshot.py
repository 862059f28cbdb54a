"""A PNG of a report.html for the README: ``python tools/report_screenshot.py REPORT OUT.png``.

The README's pictures (docs/report-*.png) come from the sample outputs of ``make run``:

    python tools/report_screenshot.py build/out/segmentation/runs/RUN_ID/report.html docs/report-overview.png --max_height 1800
    python tools/report_screenshot.py build/out/segmentation/runs/RUN_ID/report.html docs/report-gallery.png \\
        --selector '#gallery' --max_height 1200
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tools.browser import screenshot  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", help="a report.html")
    parser.add_argument("out", help="the PNG to write")
    parser.add_argument("--selector", default="", help="CSS selector of the element to show (default: the page)")
    parser.add_argument("--max_height", type=int, default=0, help="cut the picture at this many pixels")
    parser.add_argument("--width", type=int, default=1280, help="browser window width (default: %(default)s)")
    args = parser.parse_args(argv)
    screenshot(args.report, args.out, width=args.width, selector=args.selector, max_height=args.max_height)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
