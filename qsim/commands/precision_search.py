"""`qsim quantize --target-sqnr DB | --max-drop PT`: the cheapest per-layer precision plan
that meets the target, costed on the NPU (--config, --cost cycles|energy, --tech).

quantize.quantize_to_folder calls `choose_plan` once the model and data are loaded; the
search (qsim.quant.precision_plan) scores real lowerings on the evaluation samples and
costs the uniform plans with the NPU's cycle and energy model (qsim.npu.plan_cost); the
chosen plan is then quantized, evaluated and written like any other run, and its NPU run
(every stage compared with the kernels) costs it. A target that even all-16x8 misses is
a TargetUnreachable error (exit 2) naming the best figures reached."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .. import ir
from ..errors import UsageError
from ..npu.config import load_config
from ..npu.energy import load_tech
from ..npu.engines import Engine
from ..npu.plan_cost import PlanCost, StageCost, plan_cost
from ..npu.simulate import simulate_one
from ..quant.calibration.data import Samples
from ..quant.evaluation.evaluate import quantize_feed
from ..quant.fold_constants import fold_constant_ops
from ..quant.lowering.float_side import LoweredModel
from ..quant.options import QuantizeOptions
from ..quant.params import Precision, PrecisionPlan
from ..quant.pipeline import calibrate_each_width, input_feeds, single_input
from ..quant.rebatch import rebatched_graph
from ..quant.precision_plan.scoring import AccuracyTarget, PlanScorer, describe
from ..quant.precision_plan.search import search_plan
from ..quant.tosa.mixed_precision import MAC_KINDS, mac_layers
from ..quant.tosa.target import TosaTarget
from ..report.precision_plan import PlanChoice, PlanSection

COSTS = ("cycles", "energy")


class TargetUnreachable(UsageError):
    """The target is beyond even all-16x8 (exit 2, like any bad input)."""


@dataclass(frozen=True)
class PlanRequest:
    target: AccuracyTarget
    config: str = "16x16"
    cost: str = "cycles"
    tech: str | None = None

    def __post_init__(self):
        if self.cost not in COSTS:
            raise UsageError(f"--cost {self.cost}: unknown", hint="use cycles or energy")


def _labels(graph: ir.Graph) -> dict[str, str]:
    """MAC layer -> the label its integer ops carry (FloatSide.where)."""
    return {op.outputs[0]: f"{op.kind.name} {op.label!r}" for op in graph.ops if op.kind.name in MAC_KINDS}


def choose_plan(graph: ir.Graph, calib: Samples | None, evaluation: Samples | None,
                options: QuantizeOptions, request: PlanRequest, model_name: str,
                on_step=None) -> tuple[QuantizeOptions, PlanSection]:
    """The search; returns the options that quantize the chosen plan and its report section."""
    if calib is None:
        raise UsageError("a precision target needs calibration data", hint="pass --calib DATA")
    npu_config, tech = load_config(request.config), load_tech(request.tech)
    graph = fold_constant_ops(graph)
    input_name, _ = single_input(graph)
    samples = evaluation or calib
    # every plan is scored on the samples the final report evaluates (--eval-limit bounds both)
    limit = len(samples) if options.eval_limit is None else min(options.eval_limit, len(samples))
    feeds = [feed for feed, _ in input_feeds(graph, samples, input_name, limit)]
    scorer = PlanScorer(graph, feeds, options.backend, rebatched_graph)
    if request.target.max_drop_points is not None and scorer.classes is None:
        raise UsageError(f"--max-drop needs a class-vector output; {graph.name!r} has none "
                         f"(outputs: {', '.join(graph.outputs)})", hint="use --target-sqnr DB")
    layers = mac_layers(graph)
    if not layers:
        raise UsageError(f"{graph.name!r} has no MAC layer (conv, linear, matmul) to choose a "
                         "precision for", hint="quantize with --precision int8 or 16x8")
    calibration = calibrate_each_width(graph, calib, input_name,
                                       dataclasses.replace(options, plan=PrecisionPlan()))

    def lower(plan: PrecisionPlan) -> LoweredModel:
        return TosaTarget(dataclasses.replace(options.config, plan=plan)).lower(graph, calibration)

    def score(plan: PrecisionPlan):
        acc = scorer(lower(plan))
        if on_step is not None:
            on_step(f"  plan with {sum(p is Precision.INT16X8 for _, p in plan.layers) if plan.layers else plan.default.value} "
                    f"16x8 layers: {describe(acc)}")
        return acc

    def cost(model: LoweredModel) -> PlanCost:
        run = simulate_one(model, quantize_feed(model, feeds[0]), npu_config, Engine.MODEL, show_progress=False)
        return plan_cost(run, tech)

    c8 = cost(lower(PrecisionPlan(default=Precision.INT8)))
    c16 = cost(lower(PrecisionPlan(default=Precision.INT16X8)))
    labels = _labels(graph)
    zero = StageCost(0, 0.0)
    extra = {layer: _value(c16.by_layer.get(labels[layer], zero), request.cost)
             - _value(c8.by_layer.get(labels[layer], zero), request.cost) for layer in layers}
    result = search_plan(layers, score, extra, request.target)
    if not result.met:
        raise TargetUnreachable(
            f"{model_name}: the target ({request.target.describe()}) is out of reach: all-16x8, the "
            f"most accurate plan, reaches {describe(result.wide)} (all-int8: {describe(result.int8)}) "
            f"on {len(feeds)} evaluation samples",
            hint="relax the target, or improve the float-side recipe (--observer, more calibration data)")
    cp = cost(lower(result.plan))
    choice = PlanChoice(model_name, request.target, result, {"plan": cp, "int8": c8, "16x8": c16},
                        request.cost, npu_config.name, tech.name, len(feeds), labels)
    return dataclasses.replace(options, plan=result.plan), PlanSection(choice)


def _value(c, measure: str) -> float:
    return float(c.cycles) if measure == "cycles" else float(c.energy_pj)
