"""The precision-plan part of `qsim quantize --target-sqnr/--max-drop`'s report: the plan
(layer -> precision), the accuracy it reached, its NPU cost against all-int8 and all-16x8,
and the layers that mattered most (sensitivity.png, layers sorted by sensitivity). It goes
into report.json (key "precision_plan") and report.html (a section) next to the accuracy
report of the final plan's real evaluation."""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from ..npu.plan_cost import PlanCost
from ..quant.precision_plan.scoring import AccuracyTarget, PlanAccuracy, describe
from ..quant.precision_plan.search import SearchResult
from ..atomic import atomic_write_bytes
from .html import Page
from .layer_plots import png

SENSITIVITY_PLOT = "sensitivity.png"


@dataclass(frozen=True)
class PlanChoice:
    """A finished search: the result, the NPU costs of the plan and the two uniform plans,
    and what they were measured with."""
    model: str
    target: AccuracyTarget
    search: SearchResult
    costs: dict[str, PlanCost]      # "plan", "int8", "16x8"
    measure: str                    # "cycles" or "energy": what the search minimized
    config: str                     # NPU configuration name
    tech: str
    eval_samples: int
    labels: dict[str, str]          # MAC layer -> float op label (the NPU stages' names)

    def saving(self, against: str) -> float:
        """The plan's cost as a fraction of `against`'s (0.8: 20 % cheaper)."""
        base = self.costs[against].value(self.measure)
        return self.costs["plan"].value(self.measure) / base if base else math.nan


def plan_json(choice: PlanChoice) -> dict:
    s = choice.search
    return {
        "target": choice.target.to_json(), "met": s.met, "measure": choice.measure,
        "npu_config": choice.config, "tech": choice.tech, "eval_samples": choice.eval_samples,
        "plan": {"default": s.plan.default.value, "layers": {x: s.plan.of(x).value for x in s.layers}},
        "accuracy": s.accuracy.to_json(),
        "baselines": {"int8": s.int8.to_json(), "16x8": s.wide.to_json()},
        "cost": {k: v.to_json() for k, v in choice.costs.items()},
        "cost_vs_int8": choice.saving("int8"), "cost_vs_16x8": choice.saving("16x8"),
        "sensitivity": [{"layer": x.layer, "sqnr_loss_db": _finite(x.sqnr_loss_db),
                         "top1_drop_points": x.drop_points, "extra_cost": x.extra_cost}
                        for x in _by_sensitivity(s)],
        "tried": [{"upgraded": k, **a.to_json()} for k, a in s.tried],
    }


def summary_line(choice: PlanChoice) -> str:
    s = choice.search
    what = f"{len(s.upgraded)} of {len(s.layers)} MAC layers 16x8"
    unit = "cycles" if choice.measure == "cycles" else "pJ"
    c = {k: v.value(choice.measure) for k, v in choice.costs.items()}
    head = "precision plan" if s.met else "precision target NOT met; best plan"
    return (f"{head} ({choice.target.describe()}): {what}, {describe(s.accuracy)} "
            f"(all-int8 {describe(s.int8)}, all-16x8 {describe(s.wide)}); {choice.measure} on "
            f"{choice.config}: {c['plan']:.4g} {unit} = {100 * choice.saving('int8'):.1f} % of all-int8 "
            f"({c['int8']:.4g}), {100 * choice.saving('16x8'):.1f} % of all-16x8 ({c['16x8']:.4g}); "
            f"NPU run {'verified' if choice.costs['plan'].verified else 'NOT verified'}")


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _by_sensitivity(s: SearchResult):
    return sorted(s.sensitivities, key=lambda x: x.sqnr_loss_db if math.isfinite(x.sqnr_loss_db) else 1e9,
                  reverse=True)


def sensitivity_plot(choice: PlanChoice, path: Path) -> None:
    """Horizontal bars, most sensitive layer on top; the plan's 16x8 layers in blue."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = _by_sensitivity(choice.search)
    upgraded = set(choice.search.upgraded)
    fig, ax = plt.subplots(figsize=(8, max(2.5, 0.3 * len(rows) + 1.2)))
    ax.barh([-i for i in range(len(rows))],
            [x.sqnr_loss_db if math.isfinite(x.sqnr_loss_db) else 0.0 for x in rows],
            color=["#3b7dd8" if x.layer in upgraded else "#bbb" for x in rows], tick_label=[x.layer for x in rows])
    ax.tick_params(axis="y", labelsize=8)
    ax.set(xlabel="output SQNR lost (dB) when this layer alone is int8 in the all-16x8 plan",
           title=f"{choice.model}: layer sensitivity (blue: 16x8 in the chosen plan)")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()                  # room for the axis label under the bars
    atomic_write_bytes(path, png(fig))


def plan_section(choice: PlanChoice, page: Page, out_dir: Path) -> None:
    """Adds the plan section to `page` and writes its plot into `out_dir`."""
    s = choice.search
    page.heading("Precision plan")
    page.paragraph(summary_line(choice), css="" if s.met else "bad")
    wide = choice.costs["16x8"].value(choice.measure)
    page.table(["plan", "output SQNR (dB)", "top-1 drop (points)", "NPU cycles", "NPU energy (pJ)",
                f"{choice.measure} vs all-16x8 (minimized)"],
               [[name, _cell_db(a.sqnr_db), "n/a" if a.drop_points is None else round(a.drop_points, 2),
                 choice.costs[key].cycles, round(choice.costs[key].energy_pj, 1),
                 f"{100 * choice.costs[key].value(choice.measure) / wide:.1f} %" if wide else "n/a"]
                for name, key, a in (("chosen", "plan", s.accuracy), ("all-int8", "int8", s.int8),
                                     ("all-16x8", "16x8", s.wide))])
    page.paragraph("Cycles and energy are the compiled NPU programs' (cycle model): 16x8 layers run "
                   "on the array as two byte-plane passes into int48 accumulators (docs/npu.md).",
                   css="note")
    if s.sensitivities:
        sensitivity_plot(choice, out_dir / SENSITIVITY_PLOT)
        page.image(SENSITIVITY_PLOT, "layer sensitivity")
    rows = [[x.layer, s.plan.of(x.layer).value, _cell_db(x.sqnr_loss_db),
             "n/a" if x.drop_points is None else round(x.drop_points, 2), x.extra_cost]
            for x in _by_sensitivity(s)]
    page.table(["layer", "precision", "SQNR lost alone at int8 (dB)", "top-1 points lost",
                f"extra {choice.measure} at 16x8"], rows)


def _cell_db(x: float) -> object:
    return "exact" if not math.isfinite(x) else round(x, 2)


@dataclass(frozen=True)
class PlanSection:
    """The plan as a report.accuracy.ReportSection."""
    choice: PlanChoice

    def json(self) -> dict:
        return {"precision_plan": plan_json(self.choice)}

    def render(self, page: Page, out_dir: Path) -> None:
        plan_section(self.choice, page, out_dir)
