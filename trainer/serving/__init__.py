"""``python -m trainer.serve``'s parts: the predict handler (TensorFlow Serving's REST API on one SavedModel)
and the bounded HTTP server under it."""
