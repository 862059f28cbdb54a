"""Balancing maths on hand-worked values."""

import numpy as np
import pytest

from beam_pipeline.core.balance import (class_repeat_factors, copies_for, expected_growth, image_repeat_factor,
                                        inverse_sqrt_weights, median_frequency_weights)
from beam_pipeline.core.points import flatten_points, sample_points, unflatten_points


def test_median_frequency_weights_hand_worked():
    # freq = [10/100, 30/100, absent, 5/50] = [0.1, 0.3, -, 0.1]; median 0.1.
    weights = median_frequency_weights([10, 30, 0, 5], [100, 100, 0, 50])
    assert weights == pytest.approx([1.0, 1.0 / 3.0, 0.0, 1.0])


def test_inverse_sqrt_weights_hand_worked():
    # shares 0.75, 0.25 -> raw 1/sqrt(.75) = 1.1547, 1/sqrt(.25) = 2; pixel-weighted mean 1.3660.
    weights = inverse_sqrt_weights([75, 25, 0])
    assert weights == pytest.approx([0.845299, 1.464102, 0.0], rel=1e-5)
    assert 0.75 * weights[0] + 0.25 * weights[1] == pytest.approx(1.0)


def test_lvis_repeat_factors_hand_worked():
    # t = 0.1 over 100 images: f = [1, 0.1, 0.01, absent] -> r = [1, 1, sqrt(10), 1].
    factors = class_repeat_factors([100, 10, 1, 0], 100, 0.1)
    assert factors == pytest.approx([1.0, 1.0, 3.16227766, 1.0])
    assert image_repeat_factor([0, 2], factors) == pytest.approx(3.16227766)
    assert image_repeat_factor([], factors) == 1.0
    assert expected_growth([1.0, 3.0]) == 2.0


def test_copies_resolve_the_fraction_by_stable_hash():
    assert {copies_for(f"k{i}", 2.0) for i in range(100)} == {2}
    copies = [copies_for(f"k{i}", 1.25) for i in range(8000)]
    assert set(copies) == {1, 2}
    assert abs(np.mean(copies) - 1.25) < 0.02
    assert copies == [copies_for(f"k{i}", 1.25) for i in range(8000)]


def test_sample_points_lie_on_their_class_and_are_stable():
    mask = np.array([[0, 0, 1], [2, 0, 1], [2, 2, 255]], dtype=np.uint8)
    points = sample_points(mask, "key", num_classes=3, per_class=2)
    assert sorted(points) == [0, 1, 2]
    for c, yx in points.items():
        assert len(yx) == 2
        assert all(mask[y, x] == c for y, x in yx)
        assert len({tuple(p) for p in yx.tolist()}) == 2
    again = sample_points(mask, "key", num_classes=3, per_class=2)
    assert all(np.array_equal(points[c], again[c]) for c in points)
    classes, coords = (a.tolist() for a in unflatten_points(*flatten_points(points, 3)))
    assert classes == [0, 0, 1, 1, 2, 2]
    assert coords == np.concatenate([points[0], points[1], points[2]]).ravel().tolist()
