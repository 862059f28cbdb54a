"""One training run: its config (``python -m trainer``'s options), where it runs (the cluster from TF_CONFIG,
the strategy), the loop (resume, checkpoints, export), batch-norm re-estimation and validation after each
epoch."""
