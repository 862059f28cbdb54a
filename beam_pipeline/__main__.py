"""``python -m beam_pipeline``: parse options, run, print the summary."""

import logging
import os
import sys
import warnings

# TensorFlow's C++ start-up notices (CPU features, missing CUDA) are not about this run.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# Google Cloud client libraries (pulled in by apache-beam[gcp]) warn about their own
# future requirements at import time; that says nothing about this run.
warnings.filterwarnings("ignore", category=FutureWarning, module=r"google\..*")

from beam_pipeline.options import CorpusOptionsError, help_parser  # noqa: E402


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if any(arg in ("-h", "--help") for arg in argv):
        help_parser().print_help()
        return 0
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s", force=True)
    logging.getLogger("beam_pipeline").setLevel(logging.INFO)
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
