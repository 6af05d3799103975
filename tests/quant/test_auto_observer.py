"""The auto observer (the default): per tensor, the candidate range that costs the network's
outputs the least error on the calibration samples (qsim/quant/calibration/choose.py)."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from qsim.quant.calibration.calibrate import calibrate
from qsim.quant.calibration.choose import (IMPROVES, PlanRunner, better, candidate_params, fused_away, log_errors,
                                          plan_error, plan_score, reached_outputs, refinement_groups)
from qsim.quant.calibration.observers import AutoObserver, ObserverKind
from qsim.quant.options import QuantizeOptions
from qsim.quant.params import QuantScheme
from qsim.quant.pipeline import load_float_model
from qsim.runtime.executor import execute

FIXED = (ObserverKind.MINMAX, ObserverKind.PERCENTILE, ObserverKind.MSE)


def gemm_model(tmp_path, k: int = 512, n: int = 16, seed: int = 0):
    """x [1, k] -> Gemm -> relu -> Gemm -> y [1, n]: the input tensor's range decides."""
    rng = np.random.default_rng(seed)
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], transB=1, name="fc1"),
             helper.make_node("Relu", ["h"], ["r"], name="relu"),
             helper.make_node("Gemm", ["r", "w2", "b2"], ["y"], transB=1, name="fc2")]
    inits = [numpy_helper.from_array((rng.standard_normal((64, k)) / np.sqrt(k)).astype(np.float32), "w1"),
             numpy_helper.from_array(np.zeros(64, np.float32), "b1"),
             numpy_helper.from_array((rng.standard_normal((n, 64)) / 8).astype(np.float32), "w2"),
             numpy_helper.from_array(np.zeros(n, np.float32), "b2")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, n])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    onnx.save(model, tmp_path / "m.onnx")
    return load_float_model(tmp_path / "m.onnx")


def feeds_of(x):
    return [{"x": x[i:i + 1]} for i in range(len(x))]


def output_error(graph, params, feeds) -> float:
    """The outputs' noise / signal with the materialized activations on their grids."""
    refs = [execute(graph, f, keep=graph.outputs) for f in feeds]
    hidden = fused_away(graph)
    return plan_error(graph, {n: q for n, q in params.items() if n not in hidden}, feeds, refs)


def with_outlier(rng, count, k, outlier: float = 40.0):
    """Gaussian activations with one far outlier (in the first sample, which the choice is scored
    on): over 2^18 values the min-max grid's rounding noise (2^18 * (2 * 40 / 255)^2 / 12, about
    2150) costs more than clipping the one value to ~4 sigma ((40 - 4)^2, about 1300)."""
    x = rng.standard_normal((count, k)).astype(np.float32)
    x[0, 7] = outlier
    return x


def heavy_tailed(rng, count, k):
    """Student-t (2 degrees of freedom): many values far out, whose energy clipping would lose."""
    return rng.standard_t(2, size=(count, k)).astype(np.float32)


def test_auto_clips_an_outlier_and_is_no_worse_than_any_fixed_observer(tmp_path):
    graph = gemm_model(tmp_path, k=8192)
    feeds = feeds_of(with_outlier(np.random.default_rng(1), 32, 8192))
    choices = {}
    auto = calibrate(graph, iter(feeds), observer=ObserverKind.AUTO, show_progress=False, choices=choices)
    # the input's range is a clipping, not the min-max range the outlier stretches
    assert choices["x"] != ObserverKind.MINMAX.value
    assert auto["x"].scale < calibrate(graph, iter(feeds), observer=ObserverKind.MINMAX,
                                       show_progress=False)["x"].scale
    got = output_error(graph, auto, feeds)
    fixed = {kind: output_error(graph, calibrate(graph, iter(feeds), observer=kind, show_progress=False), feeds)
             for kind in FIXED}
    # clipping pays here: less error than min-max's full range and than the 99.99th percentile's
    # too-tight clipping; no fixed observer does better (MSE's clipping is the one auto keeps)
    assert got < 0.8 * fixed[ObserverKind.MINMAX] and got < fixed[ObserverKind.PERCENTILE]
    assert got <= fixed[ObserverKind.MSE]


def test_auto_keeps_the_range_when_clipping_would_lose_energy(tmp_path):
    """Heavy tails (Student-t, 2 degrees of freedom): the far values carry the outputs' energy;
    the 99.9th percentile's clipping costs 40x min-max's error there, and auto does not take it."""
    graph = gemm_model(tmp_path)
    feeds = feeds_of(heavy_tailed(np.random.default_rng(1), 16, 512))
    choices = {}
    auto = calibrate(graph, iter(feeds), observer=ObserverKind.AUTO, show_progress=False, choices=choices)
    assert choices["x"] != "percentile99.9"
    got = output_error(graph, auto, feeds)
    for kind in FIXED:
        assert got <= output_error(graph, calibrate(graph, iter(feeds), observer=kind, show_progress=False),
                                   feeds), kind


def test_auto_keeps_min_max_where_nothing_should_be_clipped(tmp_path):
    """Uniform data: every clipping loses values, min-max is the least error."""
    graph = gemm_model(tmp_path)
    feeds = feeds_of(np.random.default_rng(2).uniform(-1, 1, size=(16, 512)).astype(np.float32))
    choices = {}
    auto = calibrate(graph, iter(feeds), observer=ObserverKind.AUTO, show_progress=False, choices=choices)
    minmax = calibrate(graph, iter(feeds), observer=ObserverKind.MINMAX, show_progress=False)
    assert output_error(graph, auto, feeds) <= output_error(graph, minmax, feeds)


def test_candidates_are_the_fixed_observers_ranges():
    """min-max and the 99.99th percentile are exactly the fixed observers' ranges; the MSE
    candidate searches coarser bins, so it may differ by a bin at most."""
    rng = np.random.default_rng(3)
    x = rng.standard_t(3, size=20000).astype(np.float32)
    scheme = QuantScheme(bits=8, signed=True)
    auto = AutoObserver(name="t")
    auto.update(x)
    cands = auto.candidates(scheme)
    assert list(cands) == AutoObserver.labels()
    from qsim.quant.calibration.observers import make_observer
    for kind in (ObserverKind.MINMAX, ObserverKind.PERCENTILE):
        fixed = make_observer(kind, name="t")
        fixed.update(x)
        lo, hi = fixed.value_range(scheme)
        assert np.array_equal(cands[kind.value][0], lo) and np.array_equal(cands[kind.value][1], hi)
    mse = make_observer(ObserverKind.MSE, name="t")
    mse.update(x)
    lo, hi = mse.value_range(scheme)
    coarse_bin = (x.max() - x.min()) / AutoObserver.MSE_BINS
    assert abs(cands["mse"][1][0] - hi[0]) <= 2 * coarse_bin and abs(cands["mse"][0][0] - lo[0]) <= 2 * coarse_bin


def test_auto_is_the_default_and_repeatable(tmp_path):
    assert QuantizeOptions().observer is ObserverKind.AUTO
    graph = gemm_model(tmp_path)
    x = heavy_tailed(np.random.default_rng(4), 12, 512)
    a = calibrate(graph, iter(feeds_of(x)), observer="auto", show_progress=False)
    b = calibrate(graph, iter(feeds_of(x)), observer="auto", show_progress=False)
    assert a == b


@pytest.mark.parametrize("count", [1, 2])
def test_auto_works_on_a_single_sample(tmp_path, count):
    graph = gemm_model(tmp_path)
    x = heavy_tailed(np.random.default_rng(5), count, 512)
    choices = {}
    params = calibrate(graph, iter(feeds_of(x)), observer="auto", show_progress=False, choices=choices)
    assert set(choices) == set(params) and all(c in AutoObserver.labels() for c in choices.values())


def test_plans_are_scored_per_output_not_by_the_noisiest_one():
    """Two outputs, one at 20 dB and one at 50 dB: a sum of noise / signal would take plan b
    (it gains 1 dB on the noisy output and loses 20 dB on the other); per output, b loses 20 dB
    against the best candidate there and a loses 1 dB, so a wins."""
    a = log_errors([10 ** -2.0, 10 ** -5.0])
    b = log_errors([10 ** -2.1, 10 ** -3.0])
    assert sum(10 ** b) < sum(10 ** a)                 # what the old sum would have kept
    reference = np.minimum(a, b)
    assert better(plan_score(a, reference), plan_score(b, reference))
    assert not better(plan_score(b, reference), plan_score(a, reference))
    # a non-finite output never wins; a gain below IMPROVES is not a gain
    assert plan_score(log_errors([np.inf, 1e-3]), reference)[0] == np.inf
    assert not better((0.0, -3.0 - IMPROVES / 2), (0.0, -3.0))


def two_head_model(tmp_path):
    """x -> Gemm -> relu -> r; r -> Gemm -> y1 and r -> Gemm -> Relu -> y2."""
    rng = np.random.default_rng(0)
    w = lambda *s: numpy_helper.from_array((rng.standard_normal(s) / np.sqrt(s[-1])).astype(np.float32))  # noqa: E731
    inits = [w(32, 64), w(8, 32), w(8, 32)]
    for t, name in zip(inits, ("w1", "w2", "w3")):
        t.name = name
    nodes = [helper.make_node("Gemm", ["x", "w1"], ["h"], transB=1), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Gemm", ["r", "w2"], ["y1"], transB=1),
             helper.make_node("Gemm", ["r", "w3"], ["g"], transB=1), helper.make_node("Relu", ["g"], ["y2"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 8]) for n in ("y1", "y2")],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    onnx.save(model, tmp_path / "m.onnx")
    return load_float_model(tmp_path / "m.onnx")


def test_refinement_groups_split_by_the_outputs_reached(tmp_path):
    graph = two_head_model(tmp_path)
    reach = reached_outputs(graph)
    assert reach["x"] == reach["r"] == {"y1", "y2"} and reach["y1"] == {"y1"} and reach["y2"] == {"y2"}
    groups = refinement_groups(graph, ["x", "r", "y1", "y2"])
    assert sorted(map(sorted, (g for _, g in groups))) == [["r"], ["x"], ["y1"], ["y2"]]
    at = {n: i for i, op in enumerate(graph.ops) for n in op.outputs}
    assert all(cut == (0 if g == ["x"] else at[g[0]]) for cut, g in groups)


def test_a_rerun_from_a_cut_is_the_full_run(tmp_path):
    """PlanRunner: a plan run from a cut on another plan's live values there gives exactly the
    full run's errors, when the two plans agree before the cut."""
    graph = two_head_model(tmp_path)
    rng = np.random.default_rng(1)
    feeds = feeds_of(rng.standard_normal((4, 64)).astype(np.float32))
    refs = [execute(graph, f, keep=graph.outputs) for f in feeds]
    scheme = QuantScheme(bits=8, signed=True)
    observers = {}
    for name in ("x", "r", "y1", "y2"):
        observers[name] = AutoObserver(name=name)
    values = [execute(graph, f) for f in feeds]
    for name, obs in observers.items():
        for v in values:
            obs.update(v[name])
    cands = {n: candidate_params(o, scheme) for n, o in observers.items()}
    first = {n: c["minmax"] for n, c in cands.items()}
    second = dict(first, y2=cands["y2"]["percentile99.9"], r=cands["r"]["percentile99.9"])
    cut = min(i for i, op in enumerate(graph.ops) if "r" in op.outputs)
    runner = PlanRunner(graph, feeds, refs, cuts=[cut])
    _, snaps = runner.run(first)
    full, _ = runner.run(second)
    partial, _ = runner.run(second, cut, snaps)
    assert np.array_equal(full.noise, partial.noise) and np.array_equal(full.signal, partial.signal)
    assert not np.array_equal(full.noise, runner.run(first)[0].noise)    # the plans do differ there


def test_equal_infinities_are_no_error_and_a_finite_miss_is_infinite():
    # an attention mask's -inf scores stay -inf under every candidate: no error, not NaN
    from qsim.quant.calibration.choose import _squared_error
    want = np.array([-np.inf, 1.0, 2.0], np.float32)
    assert _squared_error(np.array([-np.inf, 1.5, 2.0]), want) == 0.25
    assert _squared_error(np.array([0.0, 1.0, 2.0]), want) == np.inf
    assert _squared_error(np.array([np.nan, 1.0, 2.0]), np.array([np.nan, 1.0, 2.0])) == 0.0
