"""Pure building blocks of the pipeline: no apache_beam and no tensorflow imports.

Everything here works on bytes, numpy arrays and frozen dataclasses, so it is
unit-tested on hand-made inputs without a pipeline, and the Beam composites in
beam_pipeline/stages only wire these functions together (tests/unit/test_layers.py
checks the imports).
"""
