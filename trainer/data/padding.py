"""How a whole image is padded to a size the U-Net takes, in serving and in validation alike.

A U-Net with ``depth`` down-sampling steps needs both sides to be multiples of
``2**depth``: a 360-row image gives 45 rows after three halvings and 22 after
four, and the decoder's skip connection cannot join 44 rows to 45. So each
image is padded at the bottom and on the right to the next multiple (at least
one multiple), the network runs, and its output is cropped back to the image.

Border mode: **symmetric mirroring** (numpy's ``mode="symmetric"``): the rows
below the image are the image's last rows in reverse order, edge row included,
and likewise for the columns; an image smaller than the padding it needs (a
17 x 23 image padded to 32 x 32) is mirrored again and again, so any size,
down to 1 x 1, works. Mirroring gives the pixels near the bottom and right
edges a context that looks like the scene rather than a flat band; the padded
pixels themselves never reach the output (serving crops them off, validation
labels them with the ignore label).
"""

import tensorflow as tf


def padded_extent(size, multiple: int):
    """The smallest multiple of ``multiple`` that is >= size (and >= multiple); works on ints and tensors."""
    return tf.maximum((size + multiple - 1) // multiple, 1) * multiple


def symmetric_indices(size, target):
    """Source indices 0, 1, ..., size-1, size-1, ..., 0, 0, 1, ... of length ``target`` (numpy 'symmetric')."""
    period = 2 * size
    position = tf.range(target) % period
    return tf.where(position < size, position, period - 1 - position)


def mirror_pad(image, height, width):
    """Pad ``image`` [h, w, ...] at the bottom and right to [height, width, ...] by symmetric mirroring."""
    shape = tf.shape(image)
    rows = tf.gather(image, symmetric_indices(shape[0], height), axis=0)
    return tf.gather(rows, symmetric_indices(shape[1], width), axis=1)


def pad_for_network(image, multiple: int):
    """A decoded, normalised image [h, w, 3] mirrored at the bottom and right to sides that are multiples of
    ``multiple``; the image itself is the top-left [h, w] window of the result."""
    shape = tf.shape(image)
    return mirror_pad(image, padded_extent(shape[0], multiple), padded_extent(shape[1], multiple))


def pad_labels(mask, height, width, fill: int):
    """Pad a label map [h, w] at the bottom and right to [height, width] with ``fill`` (the ignore label)."""
    shape = tf.shape(mask)
    return tf.pad(mask, [[0, height - shape[0]], [0, width - shape[1]]], constant_values=fill)
