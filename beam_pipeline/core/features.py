"""Feature names of the written examples, in one place.

Names follow TensorFlow Model Garden's decoders where one exists
(``official/vision/dataloaders/tf_example_decoder.py`` and
``segmentation_input.py``); the rest use the same ``image/...`` style.
"""

IMAGE_ENCODED = "image/encoded"                  # bytes: original file bytes (or PNG if converted)
IMAGE_FORMAT = "image/format"                    # bytes: b"jpeg" or b"png"
IMAGE_HEIGHT = "image/height"                    # int64
IMAGE_WIDTH = "image/width"                      # int64
IMAGE_SOURCE_ID = "image/source_id"              # bytes: path relative to the input root
IMAGE_KEY_SHA256 = "image/key/sha256"            # bytes: hex digest of the source image file
MASK_ENCODED = "image/segmentation/class/encoded"  # bytes: single-channel 8-bit PNG
MASK_FORMAT = "image/segmentation/class/format"  # bytes: b"png"
CLASS_PIXELS = "image/segmentation/class/pixel_count"  # int64[num_classes]: pixels per class
IGNORE_PIXELS = "image/segmentation/ignore/pixel_count"  # int64: pixels equal to the ignore label
CLASS_LABEL = "image/class/label"                # int64: classification label id
CHANNEL_SUM = "image/stats/channel_sum"          # int64[3]: sum of each RGB channel over the image
CHANNEL_SUM_SQUARES = "image/stats/channel_sum_squares"  # int64[3]: sum of squared channel values
POINT_CLASSES = "image/segmentation/class/sample_points/class"  # int64[n]: class of each sample point
POINT_YX = "image/segmentation/class/sample_points/yx"          # int64[2n]: (y, x) of each sample point
REPEAT_COPY = "image/repeat/copy"                # int64: 0 for the original, k for its k-th repeat
