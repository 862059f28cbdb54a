"""Crop sample points on a hand-made mask."""

import numpy as np

from beam_pipeline.core.points import flatten_points, sample_points, unflatten_points


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
