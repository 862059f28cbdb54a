"""The exported model run over a split of the pipeline's output (``python -m trainer.evaluate``), and the
figures (confusion matrices, IoU, accuracy) that evaluation and the per-epoch validation report."""
