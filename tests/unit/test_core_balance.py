"""Balancing maths on hand-worked values."""

import numpy as np
import pytest

from beam_pipeline.core.balance import (class_repeat_factors, copies_for, expected_growth, growth_refusal,
                                        image_repeat_factor, inverse_sqrt_weights, median_frequency_weights)


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


def test_growth_above_the_limit_is_a_refusal_with_one_line():
    assert growth_refusal(1.0, 2.0) is None
    assert growth_refusal(2.0, 2.0) is None
    refusal = growth_refusal(1.234, 1.05)
    assert refusal.gate == "max_growth"
    assert refusal.message == ("repeat-factor balancing would grow the train split 1.23x, above --max_growth 1.05; "
                               "raise --max_growth or lower --balance_threshold")
