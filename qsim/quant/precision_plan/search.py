"""The cheapest per-layer precision plan found to meet an accuracy target.

1. Baselines (both scored, for the report): all-int8 (the cheapest plan: if it meets the
   target it is the answer) and all-16x8 (the most accurate: if it misses, the target is unreachable; SearchResult.met is
   False and the caller says so).
2. Sensitivity of each MAC layer: the output SQNR lost when that layer alone is int8 in the
   all-16x8 plan (and the top-1 points lost, reported).
3. Greedy by value for money: layers sorted by SQNR lost per unit of extra cost (cost of the
   layer at 16x8 minus at int8, from the caller's cost model); the plan upgrades the first k
   of them from int8 to 16x8. The least k that meets the target is found by bisection over
   k (accuracy grows with k up to measurement noise; every plan tried is kept, and the answer
   is the least k measured to meet the target).
4. Pruning: each upgraded layer, costliest first, is tried back at int8; it stays there when
   the target still holds.
The plans are scored by the caller (`score(plan) -> PlanAccuracy`, a real lowering run on the
evaluation samples), so the accuracy of the result is measured, not predicted.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

from ..params import Precision, PrecisionPlan
from .scoring import AccuracyTarget, PlanAccuracy

INT8, WIDE = Precision.INT8, Precision.INT16X8


@dataclass(frozen=True)
class LayerSensitivity:
    layer: str
    sqnr_loss_db: float             # all-16x8 SQNR minus SQNR with this layer alone int8
    drop_points: float | None       # top-1 points lost the same way (class outputs)
    extra_cost: float               # cost at 16x8 minus cost at int8 (caller's unit)


@dataclass(frozen=True)
class SearchResult:
    plan: PrecisionPlan
    accuracy: PlanAccuracy
    met: bool
    int8: PlanAccuracy
    wide: PlanAccuracy
    sensitivities: tuple[LayerSensitivity, ...] = ()
    layers: tuple[str, ...] = ()    # every MAC layer, graph order
    tried: tuple[tuple[int, PlanAccuracy], ...] = field(default_factory=tuple)   # (k upgraded, accuracy)

    @property
    def upgraded(self) -> tuple[str, ...]:
        """The layers at 16x8 (every one under an all-16x8 plan)."""
        return tuple(layer for layer in self.layers if self.plan.of(layer) is WIDE)


def upgraded_plan(layers, chosen) -> PrecisionPlan:
    """int8 everywhere but `chosen` (16x8); every layer named, in `layers` order."""
    chosen = set(chosen)
    return PrecisionPlan(tuple((layer, WIDE if layer in chosen else INT8) for layer in layers), INT8)


def search_plan(layers: list[str], score: Callable[[PrecisionPlan], PlanAccuracy],
                extra_cost: dict[str, float], target: AccuracyTarget) -> SearchResult:
    """The plan of module doc for MAC `layers` (graph order)."""
    a8, a16 = score(PrecisionPlan(default=INT8)), score(PrecisionPlan(default=WIDE))
    if target.met(a8):
        return SearchResult(PrecisionPlan(default=INT8), a8, True, a8, a16, layers=tuple(layers))
    if not target.met(a16):
        return SearchResult(PrecisionPlan(default=WIDE), a16, False, a8, a16, layers=tuple(layers))
    sens = []
    for layer in layers:
        acc = score(PrecisionPlan(((layer, INT8),), WIDE))
        drop = (None if acc.drop_points is None or a16.drop_points is None
                else acc.drop_points - a16.drop_points)
        sens.append(LayerSensitivity(layer, _loss(a16.sqnr_db, acc.sqnr_db), drop,
                                     float(extra_cost.get(layer, 0.0))))
    order = sorted(sens, key=_value_for_money, reverse=True)
    tried: dict[int, PlanAccuracy] = {}

    def at(k: int) -> PlanAccuracy:
        if k not in tried:
            tried[k] = score(upgraded_plan(layers, [s.layer for s in order[:k]]))
        return tried[k]

    lo, hi = 0, len(order)              # invariant: k = lo misses (all-int8), k = hi is tried last
    if not target.met(at(hi)):          # every MAC layer 16x8 but the non-MAC tail int8: fall back
        return SearchResult(PrecisionPlan(default=WIDE), a16, True, a8, a16, tuple(sens), tuple(layers),
                            _listed(tried))
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if target.met(at(mid)):
            hi = mid
        else:
            lo = mid
    chosen = [s.layer for s in order[:hi]]
    accuracy = at(hi)
    for s in sorted(order[:hi], key=lambda s: s.extra_cost, reverse=True):
        if len(chosen) == 1:
            break
        trial = [c for c in chosen if c != s.layer]
        acc = score(upgraded_plan(layers, trial))
        if target.met(acc):
            chosen, accuracy = trial, acc
    return SearchResult(upgraded_plan(layers, chosen), accuracy, True, a8, a16, tuple(sens), tuple(layers),
                        _listed(tried))


def _loss(base: float, other: float) -> float:
    if math.isinf(base) and math.isinf(other):
        return 0.0
    return base - other


def _value_for_money(s: LayerSensitivity) -> float:
    """SQNR lost per unit of extra cost (a layer that costs nothing more comes first)."""
    loss = s.sqnr_loss_db if math.isfinite(s.sqnr_loss_db) else 1e9
    return loss / s.extra_cost if s.extra_cost > 0 else loss * 1e12


def _listed(tried: dict[int, PlanAccuracy]) -> tuple[tuple[int, PlanAccuracy], ...]:
    return tuple(sorted(tried.items()))
