"""The Pareto front of explored points: the points no other point dominates. A point dominates
another when it is at least as good in every objective and strictly better in one; points equal
in every objective do not dominate each other, so ties are all on the front."""
from __future__ import annotations

from typing import Sequence

# (point key, direction): accuracy up, latency, energy and area down
OBJECTIVES = (("accuracy", "max"), ("latency_ms", "min"), ("energy_per_inference_pj", "min"),
              ("area_mm2", "min"))


def usable_objectives(points: Sequence[dict], objectives=OBJECTIVES) -> tuple[tuple[str, str], ...]:
    """The objectives every point has a number for (area is None without a synthesis: it then
    takes no part in the dominance, and the report says so)."""
    return tuple((k, d) for k, d in objectives if all(isinstance(p.get(k), (int, float)) for p in points))


def dominates(a: dict, b: dict, objectives) -> bool:
    better = False
    for key, direction in objectives:
        x, y = (a[key], b[key]) if direction == "max" else (b[key], a[key])
        if x < y:
            return False
        better = better or x > y
    return better


def pareto_indices(points: Sequence[dict], objectives=None) -> list[int]:
    """Indices of the non-dominated points, in input order (O(n^2): spaces are small)."""
    objectives = usable_objectives(points) if objectives is None else tuple(objectives)
    return [i for i, p in enumerate(points)
            if not any(dominates(q, p, objectives) for j, q in enumerate(points) if j != i)]
