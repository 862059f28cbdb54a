"""Keras trainer that reads the pipeline's shards, manifest.json and tf.Transform output.

It never imports apache_beam: the two packages are coupled through artifacts only.
"""
