"""The exported SavedModel's ``serving_default`` signature: encoded images of any size in, each decoded with the
tf.Transform graph, padded for the network and its answer cropped back."""
