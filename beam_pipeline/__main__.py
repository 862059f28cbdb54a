"""``python -m beam_pipeline``: parse options, run, print the summary."""

import logging
import sys

from beam_pipeline.options import CorpusOptionsError, help_parser


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if any(arg in ("-h", "--help") for arg in argv):
        help_parser().print_help()
        return 0
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    from beam_pipeline.pipeline import run
    from beam_pipeline.summary import render_summary
    try:
        manifest = run(argv)
    except CorpusOptionsError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    output = manifest["options"]["output"]
    print(render_summary(manifest, output))
    return 0


if __name__ == "__main__":
    sys.exit(main())
