"""Models: a functional U-Net and DeepLabV3+ for segmentation, a compact CNN for classification.

The U-Net is trained from scratch, or has a keras.applications encoder (``backbone``); DeepLabV3+ (Chen
et al. 2018) always has one. A pretrained encoder gets its own preprocessing inside the model
(trainer/models/backbones.py), so every model takes the pixels the trainer feeds and the served model applies:
normalised by the dataset's mean and std.

Every head ends in a float32 layer, so they stay numerically safe under a
mixed-precision policy. The classification head uses global average pooling,
never a Flatten -> Dense over the whole feature map (which would hold almost
all the parameters).
"""

import dataclasses
from typing import Optional, Tuple

import keras
import tensorflow as tf

from trainer.models.backbones import BackbonePreprocessing, ModelError, build_backbone, feature_model

BACKBONE_LAYER = "backbone"        # the encoder's name in the model: its variables get --backbone_learning_rate


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    name: str = "unet"             # unet | deeplabv3plus | cnn | a keras.applications model name
    depth: int = 4                 # U-Net from scratch: down-sampling steps.
    width: int = 32                # Filters of the first block, doubled at every step down; DeepLabV3+: 8x this
                                   # in ASPP and the decoder (256 for 32, the paper's).
    recompute: bool = False        # Recompute encoder activations in the backward pass (saves memory).
    backbone: Optional[str] = None  # A keras.applications encoder (U-Net, DeepLabV3+).
    weights: Optional[str] = None  # keras.applications: None/"none", "imagenet" (Keras's download) or a file.
    mean: Tuple[float, ...] = (0.0, 0.0, 0.0)   # The dataset normalisation a pretrained encoder undoes.
    std: Tuple[float, ...] = (1.0, 1.0, 1.0)
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


def _norm(config: ModelConfig, name: Optional[str] = None) -> keras.layers.BatchNormalization:
    return keras.layers.BatchNormalization(momentum=config.bn_momentum, synchronized=config.sync_batch_norm,
                                           name=name)


def _conv_block(filters: int, name: str, config: ModelConfig) -> keras.Sequential:
    """Two 3x3 convolutions, each with batch norm and ReLU."""
    def norm():
        return _norm(config)
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


def input_multiple(task: str, config: ModelConfig) -> int:
    """What a segmentation input's sides must be multiples of: the deepest stride the model uses."""
    if task != "segmentation":
        return 1
    if config.name == "deeplabv3plus":
        return 16
    return 32 if config.backbone else 2 ** config.depth


def _encoder(config: ModelConfig, inputs, strides) -> list:
    """The backbone's feature maps at ``strides`` for ``inputs`` (normalised pixels), preprocessing included."""
    backbone = build_backbone(config.backbone, config.weights)
    for layer in backbone.layers:                 # several replicas: statistics over the global batch
        if isinstance(layer, keras.layers.BatchNormalization):
            layer.synchronized = config.sync_batch_norm
    features = feature_model(backbone, config.backbone, strides, name=BACKBONE_LAYER)
    x = BackbonePreprocessing(config.backbone, config.mean, config.std, name="backbone_preprocessing")(inputs)
    outputs = RecomputedBlock(features, name=f"{BACKBONE_LAYER}_recomputed")(x) if config.recompute else features(x)
    return list(outputs)


def _conv_bn_relu(x, filters: int, kernel: int, name: str, config: ModelConfig, rate: int = 1):
    x = keras.layers.Conv2D(filters, kernel, padding="same", dilation_rate=rate, use_bias=False, name=name)(x)
    return keras.layers.ReLU(name=f"{name}_relu")(_norm(config, f"{name}_bn")(x))


class UpsampleBilinear(keras.layers.Layer):
    """Bilinear up-sampling by ``factor`` for inputs of any size (UpSampling2D needs static sides in a
    served graph)."""

    def __init__(self, factor: int, **kwargs):
        super().__init__(**kwargs)
        self.factor = factor

    def call(self, inputs):
        size = tf.shape(inputs)[1:3] * self.factor
        return tf.cast(tf.image.resize(inputs, size, method="bilinear"), inputs.dtype)

    def compute_output_shape(self, input_shape):
        scale = [None if side is None else side * self.factor for side in input_shape[1:3]]
        return (input_shape[0], *scale, input_shape[3])

    def get_config(self):
        return {**super().get_config(), "factor": self.factor}


class BroadcastLike(keras.layers.Layer):
    """[B, 1, 1, C] repeated to the height and width of a reference map (ASPP's image pooling, any size)."""

    def call(self, inputs):
        pooled, reference = inputs
        return pooled * keras.ops.ones_like(reference[..., :1])


def build_deeplabv3plus(num_classes: int, config: ModelConfig) -> keras.Model:
    """DeepLabV3+: ASPP over the encoder's stride-16 features, a decoder that joins its stride-4 features."""
    filters = 8 * config.width
    inputs = keras.Input(shape=(None, None, 3), name="image")
    low, high = _encoder(config, inputs, (4, 16))
    # ASPP: a 1x1 branch, three atrous 3x3 branches (rates 6, 12, 18 at output stride 16), image pooling.
    branches = [_conv_bn_relu(high, filters, 1, "aspp_1x1", config)]
    branches += [_conv_bn_relu(high, filters, 3, f"aspp_rate{rate}", config, rate) for rate in (6, 12, 18)]
    pooled = keras.layers.GlobalAveragePooling2D(keepdims=True, name="aspp_pool")(high)
    pooled = _conv_bn_relu(pooled, filters, 1, "aspp_pool_conv", config)
    branches.append(BroadcastLike(name="aspp_pool_broadcast")([pooled, high]))
    x = _conv_bn_relu(keras.layers.Concatenate(name="aspp")(branches), filters, 1, "aspp_project", config)
    if config.dropout:
        x = keras.layers.Dropout(config.dropout)(x)
    # Decoder: up to stride 4, join the low-level features (reduced to 48 channels), two 3x3 convolutions.
    x = UpsampleBilinear(4, name="up_to_stride4")(x)
    low = _conv_bn_relu(low, 48, 1, "low_level", config)
    x = keras.layers.Concatenate(name="decoder_join")([x, low])
    x = _conv_bn_relu(x, filters, 3, "decoder_conv1", config)
    x = _conv_bn_relu(x, filters, 3, "decoder_conv2", config)
    # Head: class logits at stride 4, up-sampled to the input, in float32 whatever the precision policy.
    logits = keras.layers.Conv2D(num_classes, 1, dtype="float32", name="logits_stride4")(x)
    logits = UpsampleBilinear(4, dtype="float32", name="logits")(logits)
    return keras.Model(inputs, logits, name="deeplabv3plus")


def build_backbone_unet(num_classes: int, config: ModelConfig) -> keras.Model:
    """A U-Net whose encoder is a keras.applications backbone (skips at strides 2 to 16, bottom at 32)."""
    inputs = keras.Input(shape=(None, None, 3), name="image")
    *skips, x = _encoder(config, inputs, (2, 4, 8, 16, 32))
    for level in reversed(range(len(skips))):          # stride 16, 8, 4, 2: up, join the skip, conv block
        x = keras.layers.Conv2DTranspose(config.width * 2 ** level, 2, strides=2, padding="same",
                                         name=f"up_{level}")(x)
        x = keras.layers.Concatenate(name=f"skip_{level}")([x, skips[level]])
        x = _conv_block(config.width * 2 ** level, f"decoder_{level}", config)(x)
    x = keras.layers.Conv2DTranspose(max(config.width // 2, 8), 2, strides=2, padding="same", name="up_input")(x)
    x = _conv_block(max(config.width // 2, 8), "decoder_input", config)(x)
    logits = keras.layers.Conv2D(num_classes, 1, dtype="float32", name="logits")(x)
    return keras.Model(inputs, logits, name=f"unet_{config.backbone}")


def build_application(num_classes: int, config: ModelConfig, input_shape) -> keras.Model:
    """A keras.applications classifier without its top, its preprocessing inside, and a pooled head."""
    backbone = build_backbone(config.name, config.weights, input_shape, name=BACKBONE_LAYER)
    inputs = keras.Input(shape=tuple(input_shape), name="image")
    x = BackbonePreprocessing(config.name, config.mean, config.std, name="backbone_preprocessing")(inputs)
    x = keras.layers.GlobalAveragePooling2D(name="pool")(backbone(x))
    logits = keras.layers.Dense(num_classes, dtype="float32", name="logits")(x)
    return keras.Model(inputs, logits, name=config.name)


def backbone_of(model: keras.Model) -> Optional[keras.Model]:
    """The model's pretrained encoder (inside its RecomputedBlock with --recompute), or None."""
    for layer in model.layers:
        if layer.name == BACKBONE_LAYER:
            return layer
        if layer.name == f"{BACKBONE_LAYER}_recomputed":
            return layer.block
    return None


def build_model(task: str, num_classes: int, config: ModelConfig, input_shape=(None, None, 3)) -> keras.Model:
    if config.name in ("unet", "deeplabv3plus") and task != "segmentation":
        raise ModelError(f"--model {config.name} is for segmentation")
    if config.name == "unet":
        return build_backbone_unet(num_classes, config) if config.backbone else build_unet(num_classes, config)
    if config.name == "deeplabv3plus":
        if not config.backbone:
            raise ModelError("--model deeplabv3plus needs --backbone")
        return build_deeplabv3plus(num_classes, config)
    if config.name == "cnn":
        if task != "classification":
            raise ModelError("--model cnn is for classification")
        return build_cnn(num_classes, config)
    if task != "classification":
        raise ModelError(f"--model {config.name}: for segmentation, give --model unet or deeplabv3plus with "
                         f"--backbone {config.name}")
    return build_application(num_classes, config, input_shape)
