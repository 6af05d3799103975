"""The int16 softmax of the 16x8 recipe (qsim/quant/tosa/rules_softmax.py, `_softmax16_tail`): scores
int16 → probabilities on the 1/32767 grid (zero point 0), replayed on the TOSA reference and
the kernels bit for bit, checked against the exact softmax of the quantized scores; corners
(both rails, a single row value, rows long enough to need the exp right shift, a mask with a
fully masked row) included."""
from __future__ import annotations

import numpy as np
import pytest

from qsim import ir
from qsim.quant.calibration.calibrate import calibrate
from qsim.quant.calibration.observers import ObserverKind
from qsim.quant.params import Precision, QuantConfig, dequantize
from qsim.quant.lowering.softmax_mask import masked_tensors
from qsim.quant.tosa.rules_softmax import EXP16_RANGE, softmax_exp_table16
from qsim.quant.tosa.target import lower_graph
from qsim.runtime.executor import execute

from .lowering_models import FloatGraph, calibrate_minmax

CONFIG = QuantConfig(precision=Precision.INT16X8)
# |p_int - 32767 p_exact| in steps of 1/32767: the table's interpolation (within 2.4 steps of
# exp(0) over [-R, 0], tosa/rules_softmax.py's doc) moves each e_i and the sum; measured <= 4
TOLERANCE_STEPS = 6


def _softmax_graph(rng, shape, mask: np.ndarray | None = None):
    g = FloatGraph(rng)
    x = g.input("x", shape)
    s = g.op("math.mul", [x, g.const("k", 1.0)], "scores", shape)
    if mask is not None:
        # -1e9: with -inf a fully masked row is NaN in float (0/0), which calibration refuses
        s = g.op("math.add", [s, g.const("mask", np.where(mask, -1e9, 0.0))], "masked", shape)
    g.op("nn.softmax", [s], "p", shape, axes=(len(shape) - 1,))
    return g.graph(["p"])


def _lowered(graph, calib):
    model = lower_graph(graph, calibrate_minmax(graph, calib, CONFIG), CONFIG)
    assert model.graph.tensors["p"].dtype is ir.DType.I16
    return model


def _run_both(model, q: np.ndarray) -> dict:
    ref = execute(model.graph, {"x": q}, backend="reference")
    fast = execute(model.graph, {"x": q}, backend="kernels")
    for t in ref:
        assert np.array_equal(ref[t], fast[t]), f"kernels and reference differ on {t}"
    return ref


def _exact(model, ints, masked=None) -> np.ndarray:
    v = model.tensor_map["scores"]
    s = dequantize(ints[v.name].transpose(np.argsort(v.perm)), v.quant)
    if masked is not None:
        s = np.where(masked, -np.inf, s)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True) * 32767


def test_exp_table_holds_exp_over_minus_r_to_zero():
    t = softmax_exp_table16().astype(np.int64)
    assert t.shape == (513,) and t[511] == 32767 and t[512] == 32767      # x = 0 at entry 511
    assert t[0] == 0                                                        # 32767 exp(-12) rounds to 0
    assert np.all(np.diff(t) >= 0)
    x = EXP16_RANGE * (128.0 * np.arange(511) - 32768 - 32640) / (32640 + 32768)
    assert np.abs(t[:511] - 32767 * np.exp(x)).max() <= 0.5


@pytest.mark.parametrize("shape, spread", [((1, 6, 9), 2.0), ((1, 2, 5, 7), 4.0), ((1, 3, 300), 1.0),
                                           ((1, 1, 1), 1.0)])
def test_int16_softmax_within_a_few_steps_of_exact(rng, shape, spread):
    """(1, 3, 300): L = 300 needs the exp right shift (L · 2^22 >= 2^30); (1, 1, 1): p = 1."""
    graph = _softmax_graph(rng, shape)
    calib = [rng.normal(0, spread, shape).astype(np.float32) for _ in range(4)]
    model = _lowered(graph, calib)
    kinds = [op.kind.name for op in model.graph.ops]
    assert kinds.count("tosa.TABLE") == 2 and "tosa.INTDIV" not in kinds   # exp, reciprocal seed
    for x in calib[:2]:
        q = np.clip(np.round(x / model.input_quant["x"].scales()[0]), -32768, 32767).astype(np.int16)
        ints = _run_both(model, q)
        p = ints["p"].astype(np.int64)
        assert p.min() >= 0 and np.abs(p - _exact(model, ints)).max() <= TOLERANCE_STEPS
        if shape[-1] == 1:
            assert np.all(p == 32767)


@pytest.mark.parametrize("fill", ["rails", "zeros", "top_tie"])
def test_int16_softmax_corners(rng, fill):
    shape = (1, 4, 16)
    graph = _softmax_graph(rng, shape)
    model = _lowered(graph, [rng.normal(0, 3, shape).astype(np.float32) for _ in range(3)])
    q = {"rails": np.tile(np.array([-32768, 32767] * 8, np.int16), (1, 4, 1)),
         "zeros": np.zeros(shape, np.int16),
         "top_tie": np.array([[[32767, 32767] + [-32768] * 14] * 4], np.int16)}[fill]
    ints = _run_both(model, q)
    p = ints["p"].astype(np.int64)
    assert np.abs(p - _exact(model, ints)).max() <= TOLERANCE_STEPS
    if fill == "zeros":                       # 16 equal scores: 32767 / 16 = 2047.9
        assert np.all(np.abs(p - 2048) <= 1)
    if fill == "top_tie":
        assert np.all(np.abs(p[..., :2] - 16384) <= 1) and np.all(p[..., 2:] == 0)


def test_int16_masked_softmax_zeroes_masked_positions_and_fully_masked_rows(rng):
    shape = (1, 5, 5)
    masked = np.triu(np.ones((5, 5), bool), 1)
    masked[3] = True                           # a row with nothing kept
    graph = _softmax_graph(rng, shape, masked)
    calib = [rng.normal(0, 2, shape).astype(np.float32) for _ in range(4)]
    qparams = calibrate(graph, ({"x": c} for c in calib), CONFIG, ObserverKind.MINMAX, show_progress=False,
                        skip=masked_tensors(graph))
    assert "masked" not in qparams
    model = lower_graph(graph, qparams, CONFIG)
    kinds = [op.kind.name for op in model.graph.ops]
    assert kinds.count("tosa.SELECT") == 2
    q = np.clip(np.round(calib[0] / model.input_quant["x"].scales()[0]), -32768, 32767).astype(np.int16)
    ints = _run_both(model, q)
    p = ints["p"].astype(np.int64)
    assert np.all(p[0][masked] == 0) and np.all(p[0, 3] == 0)
    keep_rows = [0, 1, 2, 4]
    with np.errstate(invalid="ignore"):
        exact = _exact(model, ints, masked)
    assert np.abs(p[0, keep_rows] - exact[0, keep_rows]).max() <= TOLERANCE_STEPS
