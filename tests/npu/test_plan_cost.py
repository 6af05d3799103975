"""qsim/npu/plan_cost.py: a plan's NPU cost is its compiled programs' cycles and the energy
table's figures, stage by stage; 16x8 layers run on the array (no modelled cost), and an
arithmetic stage left on the host is named, never silently free."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from qsim.npu.config import load_config
from qsim.npu.energy import load_tech
from qsim.npu.engines import Engine
from qsim.npu.plan_cost import plan_cost, stage_cost
from qsim.npu.program import GraphRun, Stage, Unit
from qsim.npu.simulate import simulate_one
from qsim.quant.evaluation.evaluate import quantize_feed
from qsim.quant.params import Precision, PrecisionPlan, QuantConfig
from qsim.quant.tosa.target import TosaTarget

from quant.test_precision_plan import calibrated_residual_cnn   # the plan tests' residual CNN


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    rng = np.random.default_rng(7)
    _, graph, _, cal = calibrated_residual_cnn(tmp_path_factory.mktemp("cost"), rng, samples=8)
    x = {"x": rng.normal(0, 1, (1, 3, 8, 8)).astype(np.float32)}
    out = {}
    for key, plan in (("int8", PrecisionPlan()), ("16x8", PrecisionPlan(default=Precision.INT16X8)),
                      ("mixed", PrecisionPlan((("c2", Precision.INT16X8),)))):
        model = TosaTarget(QuantConfig(plan=plan)).lower(graph, cal)
        out[key] = simulate_one(model, quantize_feed(model, x), load_config("8x8"), Engine.MODEL, show_progress=False)
    return out


def test_cost_is_the_run_itself(runs):
    tech = load_tech(None)
    for run in runs.values():
        cost = plan_cost(run, tech)
        assert cost.cycles == run.total_cycles and cost.host_layers == () and cost.verified
        assert cost.energy_pj == pytest.approx(sum(stage_cost(s, tech, run).energy_pj for s in run.stages), rel=1e-12)


def test_16x8_layers_run_on_the_array_and_cost_more_than_int8(runs):
    tech = load_tech(None)
    c8, c16, mixed = (plan_cost(runs[k], tech) for k in ("int8", "16x8", "mixed"))
    convs = [s for s in runs["16x8"].stages if s.stage.ops[0].kind.short_name == "CONV2D"]
    assert len(convs) >= 3 and all(s.stage.unit is Unit.ARRAY and s.verified for s in convs)
    assert c8.cycles < mixed.cycles < c16.cycles and c8.energy_pj < c16.energy_pj
    # the 16x8 layer streams every fold once per byte plane of its activations
    label = "nn.conv 'c2'"
    assert c8.by_layer[label].cycles < mixed.by_layer[label].cycles < 3 * c8.by_layer[label].cycles


def test_arithmetic_left_on_the_host_is_named(runs):
    run = runs["int8"]
    conv = next(i for i, s in enumerate(run.stages) if s.stage.ops[0].kind.short_name == "CONV2D")
    stages = list(run.stages)
    stages[conv] = dataclasses.replace(stages[conv], stage=Stage(stages[conv].stage.ops[:1], Unit.HOST))
    cost = plan_cost(GraphRun(run.config, run.engine, stages), load_tech(None))
    assert cost.host_layers == (stages[conv].stage.ops[0].name,)
