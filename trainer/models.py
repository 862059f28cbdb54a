"""Models: a functional U-Net for segmentation and a compact CNN for classification.

Both heads end in a float32 layer, so they stay numerically safe under a
mixed-precision policy. The classification head uses global average pooling,
never a Flatten -> Dense over the whole feature map (which would hold almost
all the parameters).
"""

import dataclasses
from typing import Optional

import keras
import tensorflow as tf


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    name: str = "unet"             # unet | cnn | a keras.applications model name
    depth: int = 4                 # U-Net: down-sampling steps.
    width: int = 32                # Filters of the first block; doubled at every step down.
    recompute: bool = False        # Recompute encoder activations in the backward pass (saves memory).
    weights: Optional[str] = None  # keras.applications: a local weights file; nothing is downloaded.
    dropout: float = 0.0
    sync_batch_norm: bool = False  # U-Net/CNN: batch statistics over all replicas (and workers), not per replica.
    bn_momentum: float = 0.99      # U-Net/CNN: batch norm moving statistics = momentum * old + (1 - momentum) * batch.


class RecomputedBlock(keras.layers.Layer):
    """A sub-model whose activations are recomputed in the backward pass (tf.recompute_grad)."""

    def __init__(self, block: keras.Model, **kwargs):
        super().__init__(**kwargs)
        self.block = block

    def build(self, input_shape):
        self.block.build(input_shape)
        super().build(input_shape)

    def call(self, inputs, training=None):
        @tf.recompute_grad
        def forward(x):
            return self.block(x, training=training)
        return forward(inputs)


def _conv_block(filters: int, name: str, config: ModelConfig) -> keras.Sequential:
    """Two 3x3 convolutions, each with batch norm and ReLU."""
    def norm():
        return keras.layers.BatchNormalization(momentum=config.bn_momentum, synchronized=config.sync_batch_norm)
    return keras.Sequential([
        keras.layers.Conv2D(filters, 3, padding="same", use_bias=False),
        norm(),
        keras.layers.ReLU(),
        keras.layers.Conv2D(filters, 3, padding="same", use_bias=False),
        norm(),
        keras.layers.ReLU(),
    ], name=name)


def build_unet(num_classes: int, config: ModelConfig) -> keras.Model:
    """U-Net (Ronneberger et al. 2015) with ``config.depth`` steps; input sides must be multiples of 2**depth."""
    inputs = keras.Input(shape=(None, None, 3), name="image")
    x = inputs
    skips = []
    # Encoder: conv block, remember it for the skip connection, then halve the resolution.
    for level in range(config.depth):
        block = _conv_block(config.width * 2 ** level, f"encoder_{level}", config)
        x = RecomputedBlock(block, name=f"encoder_{level}_recomputed")(x) if config.recompute else block(x)
        skips.append(x)
        x = keras.layers.MaxPooling2D(2, name=f"down_{level}")(x)
    # Bottleneck: the coarsest, widest features.
    x = _conv_block(config.width * 2 ** config.depth, "bottleneck", config)(x)
    if config.dropout:
        x = keras.layers.Dropout(config.dropout)(x)
    # Decoder: double the resolution, join the skip connection, conv block.
    for level in reversed(range(config.depth)):
        x = keras.layers.Conv2DTranspose(config.width * 2 ** level, 2, strides=2, padding="same",
                                         name=f"up_{level}")(x)
        x = keras.layers.Concatenate(name=f"skip_{level}")([x, skips[level]])
        x = _conv_block(config.width * 2 ** level, f"decoder_{level}", config)(x)
    # Head: per-pixel class logits, in float32 whatever the precision policy.
    logits = keras.layers.Conv2D(num_classes, 1, dtype="float32", name="logits")(x)
    return keras.Model(inputs, logits, name="unet")


def build_cnn(num_classes: int, config: ModelConfig) -> keras.Model:
    """A compact classifier: conv blocks, global average pooling, one Dense head."""
    inputs = keras.Input(shape=(None, None, 3), name="image")
    x = inputs
    for level in range(config.depth):
        block = _conv_block(config.width * 2 ** level, f"block_{level}", config)
        x = RecomputedBlock(block, name=f"block_{level}_recomputed")(x) if config.recompute else block(x)
        x = keras.layers.MaxPooling2D(2, name=f"down_{level}")(x)
    x = keras.layers.GlobalAveragePooling2D(name="pool")(x)
    if config.dropout:
        x = keras.layers.Dropout(config.dropout)(x)
    logits = keras.layers.Dense(num_classes, dtype="float32", name="logits")(x)
    return keras.Model(inputs, logits, name="cnn")


def build_application(num_classes: int, config: ModelConfig, input_shape) -> keras.Model:
    """A keras.applications backbone with weights from a local file (or none), and a pooled head."""
    constructor = getattr(keras.applications, config.name, None)
    if constructor is None:
        raise ValueError(f"--model {config.name!r}: not unet, cnn or a keras.applications model")
    backbone = constructor(include_top=False, weights=None, input_shape=tuple(input_shape))
    if config.weights:
        backbone.load_weights(config.weights)
    inputs = keras.Input(shape=tuple(input_shape), name="image")
    x = keras.layers.GlobalAveragePooling2D(name="pool")(backbone(inputs))
    logits = keras.layers.Dense(num_classes, dtype="float32", name="logits")(x)
    return keras.Model(inputs, logits, name=config.name)


def build_model(task: str, num_classes: int, config: ModelConfig, input_shape=(None, None, 3)) -> keras.Model:
    if config.name == "unet":
        if task != "segmentation":
            raise ValueError("--model unet is for segmentation")
        return build_unet(num_classes, config)
    if config.name == "cnn":
        if task != "classification":
            raise ValueError("--model cnn is for classification")
        return build_cnn(num_classes, config)
    return build_application(num_classes, config, input_shape)
