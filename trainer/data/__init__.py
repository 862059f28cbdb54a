"""What the trainer reads: manifest.json and the files it names (checked by size and SHA-256), the tf.Transform
graph loaded with TensorFlow alone, records decoded to its values, class balancing, and the tf.data input
(crops, augmentation, whole-image batches padded as the served model pads them)."""
