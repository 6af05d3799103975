"""The Pareto front of qsim explore: hand-made points (dominance, ties, a missing objective) and a
property over random points: no front point is dominated, every other point is dominated by a
front point."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from qsim.explore.pareto import OBJECTIVES, dominates, pareto_indices, usable_objectives

TWO = (("accuracy", "max"), ("latency_ms", "min"))


def p(acc, lat, energy=1.0, area=1.0):
    return {"accuracy": acc, "latency_ms": lat, "energy_per_inference_pj": energy, "area_mm2": area}


def test_dominance_directions():
    assert dominates(p(0.9, 1.0), p(0.8, 1.0), TWO)          # better accuracy, same latency
    assert dominates(p(0.9, 1.0), p(0.9, 2.0), TWO)          # same accuracy, lower latency
    assert not dominates(p(0.9, 2.0), p(0.8, 1.0), TWO)      # a trade-off: neither dominates
    assert not dominates(p(0.8, 1.0), p(0.9, 2.0), TWO)
    assert not dominates(p(0.9, 1.0), p(0.9, 1.0), TWO)      # equal: no strict gain


def test_front_by_hand():
    points = [p(0.90, 3.0, 5.0), p(0.92, 4.0, 6.0), p(0.90, 3.0, 6.0), p(0.85, 1.0, 9.0), p(0.85, 2.0, 9.0)]
    # 2 loses to 0 on energy; 4 loses to 3 on latency; 0, 1 and 3 trade off
    assert pareto_indices(points) == [0, 1, 3]


def test_ties_all_on_front():
    points = [p(0.9, 1.0), p(0.9, 1.0), p(0.8, 2.0)]
    assert pareto_indices(points) == [0, 1]


def test_missing_area_leaves_the_dominance():
    points = [p(0.9, 1.0, 1.0, None), p(0.9, 1.0, 2.0, None)]
    assert usable_objectives(points) == OBJECTIVES[:3]
    assert pareto_indices(points) == [0]
    with_area = [p(0.9, 1.0, 1.0, 5.0), p(0.9, 1.0, 2.0, 1.0)]
    assert pareto_indices(with_area) == [0, 1]              # area makes the second a trade-off


values = st.sampled_from([0.0, 1.0, 2.0, 3.0])          # few values: many ties and dominances
points_st = st.lists(st.builds(p, values, values, values, values), min_size=1, max_size=25)


@settings(max_examples=300, deadline=None)
@given(points_st)
def test_front_property(points):
    front = pareto_indices(points)
    assert front, "a non-empty set has a non-dominated point"
    for i in front:
        assert not any(dominates(q, points[i], OBJECTIVES) for q in points)
    for i in set(range(len(points))) - set(front):
        assert any(dominates(points[j], points[i], OBJECTIVES) for j in front)
