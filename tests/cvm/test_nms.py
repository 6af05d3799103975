"""get_valid_count and non_max_suppression: hand-worked cases, properties, attribute checks."""
from fractions import Fraction

import numpy as np
import pytest

from qsim.cvm import run, run_with_precision
from qsim.errors import InvalidGraphError

NEG = [-1] * 6
R0 = [0, 50, 0, 0, 10, 10]
R1 = [0, 90, 1, 1, 11, 11]     # overlaps R0: inter 81, union 119 -> floor(8100 / 119) = 68
R2 = [1, 70, 0, 0, 10, 10]     # R0's box, other class
R3 = [0, 90, 20, 20, 30, 30]   # R1's score, later row: sorts after R1
R4 = [-1, 95, 0, 0, 1, 1]      # negative class id: never kept
X = np.array([[R0, R1, R2, R3, R4]], np.int32)


def nms(attrs, valid=5, x=X):
    return run("non_max_suppression", [x, np.array([valid], np.int32)], attrs)[0][0].tolist()


def test_get_valid_count_hand_example():
    x = np.array([[[0, 5, 1], [1, 2, 2], [2, 9, 3], [3, 3, 4]],
                  [[0, 1, 1], [1, 1, 1], [2, 1, 1], [3, 1, 1]]], np.int32)
    res = run_with_precision("get_valid_count", [x], {"score_threshold": 3})
    count, y = res.outputs
    assert count.tolist() == [2, 0]
    assert y[0].tolist() == [[0, 5, 1], [2, 9, 3], [-1, -1, -1], [-1, -1, -1]]
    assert y[1].tolist() == [[-1, -1, -1]] * 4
    assert res.precisions == [4, 5]        # count <= N = 4 needs 4 bits; X's precision 5 (9 <= 15)


def test_nms_ordering_classes_and_threshold():
    assert nms({"iou_threshold": 50}) == [R1, R3, R2, NEG, NEG]
    assert nms({"iou_threshold": 50, "force_suppress": True}) == [R1, R3, NEG, NEG, NEG]
    assert nms({"iou_threshold": 68}) == [R1, R3, R2, NEG, NEG]       # iou 68 >= 68 suppresses
    assert nms({"iou_threshold": 69}) == [R1, R3, R2, R0, NEG]
    assert nms({"iou_threshold": 101}) == [R1, R3, R2, R0, NEG]


def test_nms_top_k_max_output_size_valid_count():
    assert nms({"iou_threshold": 101, "top_k": 2}) == [R1, NEG, NEG, NEG, NEG]   # R4 is one of the 2
    assert nms({"iou_threshold": 101, "max_output_size": 2}) == [R1, R3, NEG, NEG, NEG]
    assert nms({"iou_threshold": 101, "max_output_size": 0}) == [NEG] * 5
    assert nms({"iou_threshold": 50}, valid=3) == [R1, R2, NEG, NEG, NEG]          # rows 0..2 only
    assert nms({"iou_threshold": 50}, valid=-2) == [NEG] * 5
    assert nms({"iou_threshold": 50}, valid=99) == [R1, R3, R2, NEG, NEG]          # T = min(N, vc)


def test_full_overlap_is_100_and_101_never_suppresses():
    box = [3, 10, 5, 5, 9, 9]
    x = np.array([[box, box]], np.int32)
    assert nms({"iou_threshold": 100}, 2, x) == [box, NEG]
    assert nms({"iou_threshold": 101}, 2, x) == [box, box]
    assert nms({"iou_threshold": 5000}, 2, x) == [box, box]


def test_degenerate_boxes_have_zero_overlap():
    flat = [0, 10, 4, 4, 4, 9]       # zero area
    x = np.array([[flat, flat]], np.int32)
    assert nms({"iou_threshold": 1}, 2, x) == [flat, flat]


def _iou(a, b):
    total = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1])
    w = max(0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0, min(a[3], b[3]) - max(a[1], b[1]))
    if total <= 0 or total - w * h <= 0:
        return 0
    return int(Fraction(100 * w * h, total - w * h))     # floor of a non-negative fraction


def test_nms_properties_on_random_boxes(rng):
    for trial in range(30):
        b, n = 2, 12
        x = np.zeros((b, n, 6), np.int64)
        x[:, :, 0] = rng.integers(-1, 3, (b, n))
        x[:, :, 1] = rng.integers(0, 6, (b, n))            # many equal scores
        x[:, :, 2:4] = rng.integers(0, 20, (b, n, 2))
        x[:, :, 4:6] = x[:, :, 2:4] + rng.integers(0, 12, (b, n, 2))
        x = x.astype(np.int32)
        vc = rng.integers(0, n + 2, b).astype(np.int32)
        attrs = {"iou_threshold": int(rng.integers(1, 102)), "force_suppress": bool(trial % 2),
                 "top_k": int(rng.integers(-1, n)), "max_output_size": int(rng.integers(-1, n))}
        y = run("non_max_suppression", [x, vc], attrs)[0]
        for bi in range(b):
            t = max(min(n, int(vc[bi])), 0)
            rows = [r for r in y[bi].tolist() if r != [-1] * 6]
            assert y[bi, len(rows):].tolist() == [[-1] * 6] * (n - len(rows))
            if attrs["max_output_size"] >= 0:
                assert len(rows) <= attrs["max_output_size"]
            # kept rows come from the first t input rows, in stable score-descending order
            order = sorted(range(t), key=lambda i: (-int(x[bi, i, 1]), i))
            pos = [next(k for k, i in enumerate(order) if x[bi, i].tolist() == r) for r in rows]
            assert pos == sorted(pos)
            for k, r in enumerate(rows):
                assert r[0] >= 0
                for q in rows[:k]:
                    if attrs["force_suppress"] or q[0] == r[0]:
                        assert _iou(r[2:], q[2:]) < attrs["iou_threshold"]


@pytest.mark.parametrize("xs, vcs, attrs, text", [
    ((1, 3, 5), (1,), {"iou_threshold": 50}, "K = 5 must be 6"),
    ((1, 3, 6), (2,), {"iou_threshold": 50}, r"valid_count has shape \[2\]; it must be \[1\]"),
    ((1, 3, 6), (1,), {"iou_threshold": 0}, r"'iou_threshold' = 0 is outside \[1, \+inf\)"),
    ((1, 3, 6), (1,), {"iou_threshold": 50, "force_suppress": 1}, "not a boolean"),
    ((3, 6), (1,), {"iou_threshold": 50}, "rank 3"),
])
def test_nms_errors(xs, vcs, attrs, text):
    with pytest.raises(InvalidGraphError, match=text) as e:
        run("non_max_suppression", [np.zeros(xs, np.int32), np.zeros(vcs, np.int32)], attrs)
    assert "cvm.non_max_suppression" in str(e.value)


def test_get_valid_count_errors():
    with pytest.raises(InvalidGraphError, match="K = 1 must be >= 2"):
        run("get_valid_count", [np.zeros((1, 3, 1), np.int32)])
    with pytest.raises(InvalidGraphError, match="not an integer"):
        run("get_valid_count", [np.zeros((1, 3, 2), np.int32)], {"score_threshold": 0.5})
