"""``python -m tools.sample_corpus``: the command line of the sample corpus generator."""

import sys

from tools.sample_corpus.segmentation import main

sys.exit(main())
