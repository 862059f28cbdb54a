"""Keras trainer that reads the pipeline's shards, manifest.json and tf.Transform output.

It never imports apache_beam: the two packages are coupled through artifacts only. Its folders say their
role, and their imports run one way (tests/unit/test_layers.py):

    commands     __main__.py (python -m trainer), evaluate.py, serve.py
    serving/     the predict handler and the HTTP server under it      training/   config, strategy, loop, validation
    export/      the serving signature                                 evaluation/ the export over a split, metrics
    models/      networks, encoders, losses, fine-tuning               data/       artifacts, checks, decode, tf.data

Each may import the folders after it, never one before it; console.py, a leaf, from anywhere.
"""
