"""qsim/npu/plan_cost.py: a plan's NPU cost. Stages the NPU runs cost what the cycle model and
the energy table say; a 16-bit array layer, which runs on the host path, costs its int8 array
stage once per 8-bit plane (2 for 16x8), never nothing."""
from __future__ import annotations

import numpy as np
import pytest

from qsim.npu.config import load_config
from qsim.npu.energy import load_tech
from qsim.npu.engines import Engine
from qsim.npu.plan_cost import array_layer_costs, plan_cost, stage_cost
from qsim.npu.program import Unit
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
        run = simulate_one(model, quantize_feed(model, x), load_config("8x8"), Engine.MODEL, show_progress=False)
        out[key] = (run, {n: t.dtype for n, t in model.graph.tensors.items()})
    return out


def test_all_int8_is_the_cycle_model_itself(runs):
    run, dtypes = runs["int8"]
    tech = load_tech(None)
    cost = plan_cost(run, dtypes, tech, array_layer_costs(run, tech))
    assert cost.cycles == run.total_cycles and cost.modelled_cycles == 0 and cost.host_layers == ()
    assert cost.energy_pj == pytest.approx(sum(stage_cost(s, tech, run).energy_pj for s in run.stages), rel=1e-12)
    assert cost.verified


def test_a_16x8_layer_costs_two_int8_passes(runs):
    tech = load_tech(None)
    base = array_layer_costs(runs["int8"][0], tech)
    run, dtypes = runs["mixed"]
    cost = plan_cost(run, dtypes, tech, base)
    assert cost.host_layers == ("nn.conv 'c2'",)
    assert cost.modelled_cycles == 2 * base["nn.conv 'c2'"].cycles > 0
    assert cost.modelled_energy_pj == pytest.approx(2 * base["nn.conv 'c2'"].energy_pj, rel=1e-12)
    simulated = sum(s.cycles for s in run.stages)        # host stages: 0 in the run itself
    assert cost.cycles == simulated + cost.modelled_cycles
    assert any(s.stage.unit is Unit.HOST and s.stage.ops[0].kind.short_name == "CONV2D" for s in run.stages)


def test_all_16x8_costs_more_than_all_int8_and_every_stage_verifies(runs):
    tech = load_tech(None)
    base = array_layer_costs(runs["int8"][0], tech)
    c8 = plan_cost(*runs["int8"], tech, base)
    c16 = plan_cost(*runs["16x8"], tech, base)
    assert len(c16.host_layers) == 4 and c16.verified
    assert c16.cycles > c8.cycles and c16.energy_pj > c8.energy_pj
    assert c16.modelled_cycles == 2 * sum(c.cycles for c in base.values())
