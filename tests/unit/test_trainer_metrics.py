"""Evaluation figures and serving padding on small hand-made arrays."""

import numpy as np
import pytest
import tensorflow as tf

from trainer.evaluation.metrics import (classification_report, format_segmentation_table, iou_line, per_class_iou,
                                        segmentation_report)
from trainer.data.padding import mirror_pad, pad_for_network, padded_extent


def test_segmentation_figures_hand_worked():
    # Rows: true class, columns: predicted. Class 2 is never labelled but predicted twice.
    confusion = np.array([[6, 2, 2],
                          [1, 3, 0],
                          [0, 0, 0]])
    report = segmentation_report(confusion, ["road", "car", "sign"])
    # IoU road = 6 / (10 + 7 - 6) = 6/11; car = 3 / (4 + 5 - 3) = 1/2; sign = 0 / (0 + 2 - 0) = 0
    assert [row["iou"] for row in report["per_class"]] == pytest.approx([6 / 11, 0.5, 0.0])
    assert report["mean_iou"] == pytest.approx((6 / 11 + 0.5) / 2)           # over the 2 classes present
    assert report["classes_present"] == 2
    assert report["pixel_accuracy"] == pytest.approx(9 / 14)
    assert report["frequency_weighted_iou"] == pytest.approx(10 / 14 * 6 / 11 + 4 / 14 * 0.5)
    assert report["mean_class_accuracy"] == pytest.approx((6 / 10 + 3 / 4) / 2)
    assert report["per_class"][2]["recall"] is None and report["per_class"][2]["predicted_pixels"] == 2
    assert report["confusion_matrix"] == confusion.tolist()


def test_a_class_neither_labelled_nor_predicted_has_no_iou():
    iou = per_class_iou(np.array([[4, 0], [0, 0]]))
    assert iou[0] == 1.0 and np.isnan(iou[1])
    report = segmentation_report(np.array([[4, 0], [0, 0]]), ["a", "b"])
    assert report["per_class"][1]["iou"] is None and report["mean_iou"] == 1.0


def test_classes_without_labelled_pixels_are_left_out_of_the_table_and_the_iou_line_but_named_in_the_json():
    """Issue 42: COCO's 80 classes printed a line for every class with 0 pixels, and the IoU line had no names."""
    confusion = np.array([[6, 2, 0], [1, 3, 0], [0, 0, 0]])
    report = segmentation_report(confusion, ["road", "car", "sign"])
    table = format_segmentation_table(report)
    assert "sign" not in table and "(1 class with no labelled pixel in this split left out; the JSON has every class)" \
        in table
    assert [row["name"] for row in report["per_class"]] == ["road", "car", "sign"]
    # road: 6 / (8 + 7 - 6); car: 3 / (4 + 5 - 3)
    assert iou_line(report) == "road 0.667, car 0.500 (1 class without val pixels left out)"


def test_table_lists_the_rarest_class_first():
    report = segmentation_report(np.array([[50, 0, 0], [0, 2, 0], [0, 0, 9]]), ["bg", "sign", "car"])
    lines = format_segmentation_table(report).splitlines()
    assert [line.split()[1] for line in lines[1:4]] == ["sign", "car", "bg"]


def test_classification_figures_hand_worked():
    confusion = np.array([[3, 1, 0], [0, 0, 2], [0, 0, 0]])
    report = classification_report(confusion, top5_correct=5, class_names=["a", "b", "c"])
    assert report["accuracy"] == pytest.approx(3 / 6)
    assert report["top5_accuracy"] == pytest.approx(5 / 6)
    assert [row["recall"] for row in report["per_class"]] == [pytest.approx(0.75), 0.0, None]
    assert report["mean_class_recall"] == pytest.approx(0.375)


@pytest.mark.parametrize("size,multiple,expected", [(360, 16, 368), (368, 16, 368), (17, 16, 32), (1, 16, 16),
                                                     (23, 8, 24), (480, 16, 480)])
def test_padded_extent(size, multiple, expected):
    assert int(padded_extent(tf.constant(size), multiple)) == expected


@pytest.mark.parametrize("height,width,target_h,target_w", [(3, 4, 8, 8), (1, 1, 16, 16), (2, 5, 16, 8),
                                                            (17, 23, 32, 32), (6, 6, 6, 6)])
def test_mirror_padding_is_numpys_symmetric_mode(height, width, target_h, target_w):
    image = np.arange(height * width * 3, dtype=np.float32).reshape(height, width, 3)
    expected = np.pad(image, ((0, target_h - height), (0, target_w - width), (0, 0)), mode="symmetric")
    np.testing.assert_array_equal(mirror_pad(tf.constant(image), target_h, target_w).numpy(), expected)


def test_pad_for_network_keeps_the_image_at_the_top_left():
    image = np.random.default_rng(0).normal(size=(17, 23, 3)).astype(np.float32)
    padded = pad_for_network(tf.constant(image), 16).numpy()
    assert padded.shape == (32, 32, 3)
    np.testing.assert_array_equal(padded[:17, :23], image)
