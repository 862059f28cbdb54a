"""Pretrained encoders: keras.applications backbones, their weights, their preprocessing, their feature maps.

A backbone is built without its top for inputs of any size, with ``--weights``:

- ``imagenet``: Keras's own download of the ImageNet weights (cached in ~/.keras/models); where the machine
  cannot reach it, one line says so;
- a local file: weights of the same application without its top (``include_top=False``), as Keras saves
  them (``.weights.h5``) or as keras.applications publishes them (``..._notop.h5``); a file that does not
  fit stops the run in one line, before training;
- ``none``: random initial weights (training from scratch).

The model takes what the trainer feeds it, pixels normalised by the dataset's mean and std (the
tf.Transform graph's values, trainer/data/decode.py). :class:`BackbonePreprocessing` undoes that inside the
model and applies the backbone's own ``preprocess_input`` (MobileNetV2: [-1, 1]; ResNet: BGR less the
ImageNet means; EfficientNetV2: its own rescaling layer, inside the application), so a served model still
takes raw image bytes.

:func:`feature_layers` finds, for each output stride, the last layer whose output has that stride (on a
64x64 input): the skips of a U-Net and the low- and high-level features of DeepLabV3+.
"""

import functools
import os
from typing import Dict, Optional, Sequence

import keras

# keras.applications name -> the module whose preprocess_input it takes.
BACKBONES = {
    "MobileNetV2": "mobilenet_v2",
    "ResNet50": "resnet",
    "ResNet101": "resnet",
    "EfficientNetV2B0": "efficientnet_v2",
    "EfficientNetV2S": "efficientnet_v2",
}
_PROBE_SIDE = 64


class ModelError(ValueError):
    """A model that cannot be built as asked (an unknown name, weights that do not fit); one line."""


def _first_line(error: Exception) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def _constructor(name: str):
    constructor = getattr(keras.applications, name, None)
    if constructor is None or not callable(constructor):
        raise ModelError(f"{name!r} is not a keras.applications model")
    return constructor


def build_backbone(application: str, weights: Optional[str] = None, input_shape: Sequence = (None, None, 3),
                   **kwargs) -> keras.Model:
    """The application without its top, with ``weights`` (None or "none", "imagenet", or a file); ``kwargs``
    go to its constructor (``name``)."""
    constructor = _constructor(application)
    if weights == "imagenet":
        try:
            return constructor(include_top=False, weights="imagenet", input_shape=tuple(input_shape), **kwargs)
        except Exception as error:     # get_file raises a bare Exception for a failed download
            raise ModelError(f"--weights imagenet: Keras could not get the ImageNet weights of {application} "
                             f"({_first_line(error)}); where the machine has no access to them, download them "
                             "elsewhere and pass --weights FILE") from None
    backbone = constructor(include_top=False, weights=None, input_shape=tuple(input_shape), **kwargs)
    if weights and weights != "none":
        load_weights_file(backbone, application, weights)
    return backbone


def load_weights_file(backbone: keras.Model, name: str, path: str) -> None:
    """Load ``path`` into ``backbone``, or ModelError naming the file and why it does not fit."""
    if not os.path.isfile(path):
        raise ModelError(f"--weights {path}: no such file")
    try:
        backbone.load_weights(path)
    except Exception as error:         # h5py's OSError, Keras's ValueError or KeyError for a mismatch
        raise ModelError(f"--weights {path}: not the weights of {name} without its top (include_top=False): "
                         f"{_first_line(error)}") from None


@functools.lru_cache(maxsize=None)
def feature_layers(name: str) -> Dict[int, str]:
    """{output stride: name of the last layer with that stride} for strides 2 to 32."""
    probe = _constructor(name)(include_top=False, weights=None, input_shape=(_PROBE_SIDE, _PROBE_SIDE, 3))
    found = {}
    for layer in probe.layers:
        shape = getattr(layer.output, "shape", None)
        if shape is None or len(shape) != 4 or shape[1] != shape[2] or not shape[1]:
            continue
        stride = _PROBE_SIDE // shape[1]
        if stride in (2, 4, 8, 16, 32) and _PROBE_SIDE % shape[1] == 0:
            found[stride] = layer.name
    missing = {2, 4, 8, 16, 32} - set(found)
    if missing:
        raise ModelError(f"--backbone {name}: no layer at output stride {sorted(missing)}")
    return found


def feature_model(backbone: keras.Model, application: str, strides: Sequence[int], **kwargs) -> keras.Model:
    """The backbone cut to the feature maps at ``strides`` (outputs in that order); ``kwargs``: ``name``."""
    layers = feature_layers(application)
    return keras.Model(backbone.input, [backbone.get_layer(layers[stride]).output for stride in strides], **kwargs)


def preprocess_function(name: str):
    """``preprocess_input`` of the keras.applications module that defines ``name``."""
    module = BACKBONES.get(name)
    if module is None:
        module = next((attribute for attribute, value in vars(keras.applications).items()
                       if hasattr(value, name) and hasattr(value, "preprocess_input")), None)
    if module is None:
        raise ModelError(f"no keras.applications module defines {name!r} and its preprocess_input")
    return getattr(keras.applications, module).preprocess_input


class BackbonePreprocessing(keras.layers.Layer):
    """Pixels normalised by the dataset's mean and std -> the backbone's own input (in float32)."""

    def __init__(self, backbone: str, mean: Sequence[float], std: Sequence[float], **kwargs):
        kwargs.setdefault("dtype", "float32")
        super().__init__(**kwargs)
        self.backbone = backbone
        self.mean = [float(value) for value in mean]
        self.std = [float(value) for value in std]
        self._preprocess = preprocess_function(backbone)

    def call(self, inputs):
        pixels = inputs * keras.ops.convert_to_tensor(self.std) + keras.ops.convert_to_tensor(self.mean)
        return self._preprocess(pixels)

    def get_config(self):
        return {**super().get_config(), "backbone": self.backbone, "mean": self.mean, "std": self.std}
