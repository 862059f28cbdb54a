"""Pretrained encoders (trainer/models/backbones.py, trainer/models/networks.py, trainer/models/fine_tuning.py) on hand-made inputs.

Expected values come from the published preprocessing rules and Adam's first step written out here, not
from the code under test. Weights files are saved by the tests (nothing is downloaded).
"""

import numpy as np
import pytest

import keras
from trainer.models.backbones import BackbonePreprocessing, ModelError, build_backbone, feature_layers, feature_model
from trainer.models.fine_tuning import BackboneAdam
from trainer.models.networks import ModelConfig, backbone_of, build_model, input_multiple

REQUIRED = ("MobileNetV2", "ResNet50", "EfficientNetV2S")


@pytest.mark.parametrize("name", REQUIRED)
def test_feature_maps_have_their_strides_at_any_input_size(name):
    backbone = build_backbone(name)
    strides = (2, 4, 8, 16, 32)
    features = feature_model(backbone, name, strides)
    for height, width in ((64, 96), (96, 32)):
        outputs = features(np.zeros((1, height, width, 3), np.float32))
        assert [tuple(o.shape[1:3]) for o in outputs] == [(height // s, width // s) for s in strides]
    assert set(feature_layers(name)) == set(strides)


@pytest.mark.parametrize("model,backbone", [("deeplabv3plus", "MobileNetV2"), ("unet", "ResNet50"),
                                            ("deeplabv3plus", "EfficientNetV2S")])
def test_segmentation_models_give_a_logit_per_pixel_at_any_multiple(model, backbone):
    config = ModelConfig(name=model, backbone=backbone, width=8)
    network = build_model("segmentation", 5, config)
    multiple = input_multiple("segmentation", config)
    assert multiple == (16 if model == "deeplabv3plus" else 32)
    for height, width in ((2 * multiple, 3 * multiple), (4 * multiple, multiple)):
        logits = network(np.zeros((2, height, width, 3), np.float32), training=False)
        assert tuple(logits.shape) == (2, height, width, 5) and logits.dtype == "float32"
    assert backbone_of(network) is not None and backbone_of(network).trainable_variables


def _preprocessed(backbone, pixels, mean, std):
    layer = BackbonePreprocessing(backbone, mean, std)
    normalised = (pixels - np.array(mean, np.float32)) / np.array(std, np.float32)
    return keras.ops.convert_to_numpy(layer(normalised))


def test_each_backbone_gets_its_own_input_from_normalised_pixels():
    pixels = np.array([[[[0, 127.5, 255], [10, 20, 30]]]], np.float32)          # [1, 1, 2, 3] RGB
    mean, std = (100.0, 110.0, 120.0), (50.0, 60.0, 70.0)
    # MobileNetV2 ("tf" mode): [-1, 1].
    np.testing.assert_allclose(_preprocessed("MobileNetV2", pixels, mean, std), pixels / 127.5 - 1, atol=1e-5)
    # ResNet50 ("caffe" mode): BGR, less the ImageNet means of B, G, R.
    caffe = pixels[..., ::-1] - np.array([103.939, 116.779, 123.68], np.float32)
    np.testing.assert_allclose(_preprocessed("ResNet50", pixels, mean, std), caffe, atol=1e-4)
    # EfficientNetV2: raw [0, 255] pixels; its rescaling layer is inside the application.
    np.testing.assert_allclose(_preprocessed("EfficientNetV2S", pixels, mean, std), pixels, atol=1e-4)


def test_a_weights_file_loads_and_one_that_does_not_fit_is_one_line(tmp_path):
    keras.utils.set_random_seed(3)
    saved = build_backbone("MobileNetV2")
    saved.save_weights(tmp_path / "mobilenet_v2_notop.weights.h5")
    loaded = build_backbone("MobileNetV2", str(tmp_path / "mobilenet_v2_notop.weights.h5"))
    assert all(np.array_equal(a, b) for a, b in zip(saved.get_weights(), loaded.get_weights()))
    build_backbone("ResNet50").save_weights(tmp_path / "resnet50.weights.h5")
    (tmp_path / "text.weights.h5").write_text("not weights")
    prefix = "--weights {}: not the weights of MobileNetV2 without its top (include_top=False): "
    for name in ("resnet50.weights.h5", "text.weights.h5"):
        with pytest.raises(ModelError) as error:
            build_backbone("MobileNetV2", str(tmp_path / name))
        assert str(error.value).startswith(prefix.format(tmp_path / name)) and "\n" not in str(error.value)
    with pytest.raises(ModelError, match=r"^--weights .*missing.h5: no such file$"):
        build_backbone("MobileNetV2", str(tmp_path / "missing.h5"))


def test_backbone_variables_move_at_the_backbone_learning_rate():
    """Adam's first step moves a variable by lr * g / (|g| + eps) ~ lr * sign(g): 0.1 for the head, 0.01 for
    the backbone when --backbone_learning_rate is a tenth of --learning_rate."""
    inputs = keras.Input((2,))
    backbone = keras.Sequential([keras.layers.Dense(2, kernel_initializer="ones")], name="backbone")
    outputs = keras.layers.Dense(1, kernel_initializer="ones", name="head")(backbone(inputs))
    model = keras.Model(inputs, outputs)
    optimizer = BackboneAdam(0.1, 0.01, epsilon=1e-12)
    model.compile(optimizer=optimizer, loss="mse")
    optimizer.build_for(model.trainable_variables, backbone.trainable_variables)
    before = [np.array(v) for v in model.trainable_variables]
    model.fit(np.ones((4, 2), np.float32), np.full((4, 1), 100.0, np.float32), epochs=1, batch_size=4, verbose=0)
    moved = {v.path: np.abs(np.array(v) - b) for v, b in zip(model.trainable_variables, before)}
    backbone_paths = {v.path for v in backbone.trainable_variables}
    for path, change in moved.items():
        np.testing.assert_allclose(change, 0.01 if path in backbone_paths else 0.1, rtol=1e-3)


def test_a_keras_applications_classifier_has_its_preprocessing_and_a_pooled_head():
    model = build_model("classification", 3, ModelConfig(name="MobileNetV2", mean=(1.0,) * 3, std=(2.0,) * 3),
                        input_shape=(32, 32, 3))
    assert tuple(model(np.zeros((2, 32, 32, 3), np.float32)).shape) == (2, 3)
    assert backbone_of(model) is not None and model.get_layer("backbone_preprocessing").mean == [1.0] * 3
    with pytest.raises(ModelError, match="for segmentation, give --model unet or deeplabv3plus with --backbone"):
        build_model("segmentation", 3, ModelConfig(name="MobileNetV2"))
