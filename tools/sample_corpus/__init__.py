"""The sample corpus generator, being split into modules (tools/sample_corpus/segmentation.py holds it for now)."""

from tools.sample_corpus.segmentation import *  # noqa: F401,F403  (temporary, until the split)
