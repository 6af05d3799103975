"""Per-layer precision plans (qsim/quant/tosa/mixed_precision.py) and their search
(qsim/quant/precision_plan/): a uniform plan lowers exactly as --precision does, every plan
replays bit-exactly (TOSA reference = kernels on every tensor) with the widths the plan says,
the RESCALEs between widths are exact at the corners, and the search meets a target that
all-int8 misses on a small residual CNN built in code, or says it cannot."""
from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

from qsim import ir
from qsim.quant.calibration.data import Samples
from qsim.quant.calibration.observers import ObserverKind
from qsim.quant.evaluation.evaluate import quantize_feed
from qsim.quant.options import QuantizeOptions
from qsim.quant.params import Precision, PrecisionPlan, QuantConfig
from qsim.quant.pipeline import calibrate_each_width, calibrate_model, load_float_model
from qsim.quant.precision_plan.scoring import AccuracyTarget, PlanAccuracy, PlanScorer
from qsim.quant.precision_plan.search import search_plan, upgraded_plan
from qsim.quant.tosa.mixed_precision import mac_layers, op_precisions
from qsim.quant.tosa.scale import fixed_point_scale
from qsim.quant.tosa.target import TosaTarget
from qsim.errors import UsageError
from qsim.runtime.executor import execute
from qsim.tosa.run import run as tosa_run

from .onnx_quantize import init, node, onnx_model

INT8, WIDE = Precision.INT8, Precision.INT16X8
OPTIONS = QuantizeOptions(observer=ObserverKind.MINMAX, show_progress=False)


def residual_cnn(rng) -> "onnx.ModelProto":  # noqa: F821
    """conv-relu, conv + skip ADD, relu, conv-relu, global pool, linear to 10 classes: MAC
    layers c1, c2, c3, fc (ONNX names the layers' outputs)."""
    inits = [init("k1", rng.normal(0, 0.5, (8, 3, 3, 3)).astype(np.float32)),
             init("k2", rng.normal(0, 0.3, (8, 8, 3, 3)).astype(np.float32)),
             init("k3", rng.normal(0, 0.3, (8, 8, 3, 3)).astype(np.float32)),
             init("b1", rng.normal(0, 0.1, 8).astype(np.float32)),
             init("fcw", rng.normal(0, 0.5, (10, 8)).astype(np.float32)),
             init("fcb", rng.normal(0, 0.1, 10).astype(np.float32))]
    nodes = [node("Conv", ["x", "k1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             node("Relu", ["c1"], ["r1"]),
             node("Conv", ["r1", "k2"], ["c2"], pads=[1, 1, 1, 1]),
             node("Add", ["c2", "r1"], ["s"]),
             node("Relu", ["s"], ["r2"]),
             node("Conv", ["r2", "k3"], ["c3"], pads=[1, 1, 1, 1]),
             node("Relu", ["c3"], ["r3"]),
             node("GlobalAveragePool", ["r3"], ["p"]),
             node("Flatten", ["p"], ["f"]),
             node("Gemm", ["f", "fcw", "fcb"], ["y"], transB=1)]
    return onnx_model(nodes, (1, 3, 8, 8), ["y"], inits)


def calibrated_residual_cnn(folder, rng, samples: int = 16):
    """residual_cnn written to folder/m.onnx and loaded; calibrated at both widths on `samples`
    normal inputs: (path, float graph, calibration samples, Calibration)."""
    import onnx
    path = folder / "m.onnx"
    onnx.save(residual_cnn(rng), path)
    graph = load_float_model(str(path))
    calib = Samples(rng.normal(0, 1, (samples, 3, 8, 8)).astype(np.float32))
    return path, graph, calib, calibrate_each_width(graph, calib, graph.inputs[0],
                                                    dataclasses.replace(OPTIONS, plan=PrecisionPlan()))


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    rng = np.random.default_rng(7)
    path, graph, calib, cal = calibrated_residual_cnn(tmp_path_factory.mktemp("mixed"), rng)
    feeds = [{graph.inputs[0]: rng.normal(0, 1, (1, 3, 8, 8)).astype(np.float32)} for _ in range(12)]
    return path, graph, calib, cal, feeds


def lower(setup, plan: PrecisionPlan):
    _, graph, _, cal, _ = setup
    return TosaTarget(QuantConfig(plan=plan)).lower(graph, cal)


def test_the_layers_a_plan_names(setup):
    assert mac_layers(setup[1]) == ["c1", "c2", "c3", "y"]


@pytest.mark.parametrize("precision", list(Precision))
def test_a_uniform_plan_lowers_exactly_as_the_precision_option(setup, precision):
    _, graph, calib, _, _ = setup
    options = dataclasses.replace(OPTIONS, precision=precision)
    plain = TosaTarget(options.config).lower(graph, calibrate_model(graph, calib, graph.inputs[0], options,
                                                                    TosaTarget(options.config)))
    planned = lower(setup, PrecisionPlan(default=precision))
    a, b = plain.graph, planned.graph
    assert [(o.kind.name, o.inputs, o.outputs) for o in a.ops] == [(o.kind.name, o.inputs, o.outputs) for o in b.ops]
    for x, y in zip(a.ops, b.ops):
        assert x.attrs.keys() == y.attrs.keys()
        for k in x.attrs:
            assert np.array_equal(np.asarray(x.attrs[k]), np.asarray(y.attrs[k])), (x.name, k)
    for name, t in a.tensors.items():
        u = b.tensors[name]
        assert (t.dtype, t.quant) == (u.dtype, u.quant), name
        if t.is_constant:
            assert np.array_equal(t.data, u.data)


def _layer_ops(model, kind: str) -> dict[str, ir.Op]:
    return {op.name.split("'")[1]: op for op in model.graph.ops if op.kind.short_name == kind}


@pytest.mark.parametrize("choice", list(itertools.product(list(Precision), repeat=4)))
def test_every_plan_is_honoured_and_replays_bit_exactly(setup, choice):
    """Each MAC operator runs in its plan's TOSA mode (int16 input and int48 accumulator for
    16x8), and the TOSA reference and the kernels agree on every tensor."""
    graph, feeds = setup[1], setup[4]
    plan = PrecisionPlan(tuple(zip(mac_layers(graph), choice)))
    model = lower(setup, plan)
    g = model.graph
    macs = {**_layer_ops(model, "CONV2D"), **_layer_ops(model, "FULLY_CONNECTED")}
    assert sorted(macs) == sorted(mac_layers(graph))
    for layer, op in macs.items():
        wide = plan.of(layer) is WIDE
        assert g.tensor(op.inputs[0]).dtype is (ir.DType.I16 if wide else ir.DType.I8), layer
        assert g.tensor(op.outputs[0]).dtype is (ir.DType.I48 if wide else ir.DType.I32), layer
    feed = quantize_feed(model, feeds[0])
    ref = execute(g, feed, backend="reference")
    ker = execute(g, feed, backend="kernels")
    for name, value in ref.items():
        assert ker[name].dtype == value.dtype and np.array_equal(ker[name], value), name


def test_a_tensor_is_as_wide_as_its_widest_reader(setup):
    """r1 feeds c2 and (through the ADD, r2) c3: with c3 alone 16x8 the ADD, r2 and r1 are
    int16, and c2, int8, reads r1 through one RESCALE to int8; c1 (int8 mode) writes int16."""
    graph = setup[1]
    plan = PrecisionPlan((("c3", WIDE),))
    widths = op_precisions(graph, plan)
    assert {n: widths.tensors[n] for n in ("x", "r1", "s", "r2", "c3", "y")} == {
        "x": INT8, "r1": WIDE, "s": WIDE, "r2": WIDE, "c3": INT8, "y": INT8}
    model = lower(setup, plan)
    g = model.graph
    conv = _layer_ops(model, "CONV2D")
    c2_input = g.tensor(conv["c2"].inputs[0])
    producer = next(op for op in g.ops if c2_input.name in op.outputs)
    assert producer.kind.short_name == "RESCALE" and c2_input.dtype is ir.DType.I8
    assert g.tensor(producer.inputs[0]).dtype is ir.DType.I16
    assert g.tensor(model.tensor_map["r1"].name).dtype is ir.DType.I16
    assert sum(op.kind.short_name == "RESCALE" and g.tensor(op.inputs[0]).dtype is ir.DType.I16
               and g.tensor(op.outputs[0]).dtype is ir.DType.I8 for op in g.ops) == 1


def _apply_scale_32(value: int, multiplier: int, shift: int) -> int:
    """TOSA 1.9.2 apply_scale_32 without double rounding, in Python integers."""
    return (value * multiplier + (1 << (shift - 1))) >> shift


@pytest.mark.parametrize("backend", ["reference", "kernels"])
def test_the_rescale_from_int16_to_int8_is_exact_at_the_corners(setup, backend):
    """The plan's int16 -> int8 conversion: the int16 rails, zero, +-1, and inputs that land on
    a rounding tie of the int8 grid; saturation at both int8 rails."""
    model = lower(setup, PrecisionPlan((("c3", WIDE),)))
    g = model.graph
    op = next(op for op in g.ops if op.kind.short_name == "RESCALE"
              and g.tensor(op.inputs[0]).dtype is ir.DType.I16 and g.tensor(op.outputs[0]).dtype is ir.DType.I8)
    a = op.attrs
    m, s, zo = int(a["multiplier"][0]), int(a["shift"][0]), int(a["output_zp"])
    ties = [x for x in range(-2000, 2000) if (x * m) % (1 << s) == 1 << (s - 1)][:4]
    x = np.array([-32768, -32767, -1, 0, 1, 32766, 32767] + ties, np.int16)
    (got,) = tosa_run("RESCALE", [x], dict(a, out_t="int8"), backend=backend)
    want = [min(127, max(-128, _apply_scale_32(int(v), m, s) + zo)) for v in x]
    assert got.tolist() == want
    assert got[0] == -128 and got[6] == 127          # the int16 rails saturate the int8 ones


@pytest.mark.parametrize("backend", ["reference", "kernels"])
@pytest.mark.parametrize("zp", [-128, 0, 127])
def test_the_rescale_from_int8_to_int16_is_exact_at_the_corners(backend, zp):
    """int8 (zero point at either extreme) onto a finer int16 grid: every int8 code, and
    the result is the real value within half an int16 step."""
    s8, s16 = 0.0371, 0.0371 * 127 / 32767
    fp = fixed_point_scale(s8 / s16)
    x = np.arange(-128, 128, dtype=np.int8)
    attrs = {"input_zp": zp, "output_zp": 0, "multiplier": fp.multiplier.astype(np.int32),
             "shift": fp.shift.astype(np.int8), "scale32": True, "double_round": False,
             "per_channel": False, "out_t": "int16"}
    (got,) = tosa_run("RESCALE", [x], attrs, backend=backend)
    m, s = int(fp.multiplier[0]), int(fp.shift[0])
    want = [min(32767, max(-32768, _apply_scale_32(int(v) - zp, m, s))) for v in x]
    assert got.tolist() == want
    real = (x.astype(np.float64) - zp) * s8
    inside = np.abs(real) <= 32767 * s16
    assert np.all(np.abs(got[inside] * s16 - real[inside]) <= 0.5 * s16 * (1 + 1e-6))


def test_the_search_meets_a_target_that_all_int8_misses(setup):
    graph, feeds = setup[1], setup[4]
    scorer = PlanScorer(graph, feeds)
    layers = mac_layers(graph)
    a8, a16 = scorer(lower(setup, PrecisionPlan())), scorer(lower(setup, PrecisionPlan(default=WIDE)))
    assert a16.sqnr_db > a8.sqnr_db + 1.0
    target = AccuracyTarget(sqnr_db=(a8.sqnr_db + a16.sqnr_db) / 2)
    cost = {"c1": 10.0, "c2": 40.0, "c3": 40.0, "y": 1.0}
    scored = []

    def score(plan):
        scored.append(plan)
        return scorer(lower(setup, plan))

    result = search_plan(layers, score, cost, target)
    assert result.met and not target.met(a8)
    again = scorer(lower(setup, result.plan))             # the plan, lowered and scored anew
    assert again == result.accuracy and again.sqnr_db >= target.sqnr_db
    assert 0 < len(result.upgraded) < len(layers)
    assert sum(cost[x] for x in result.upgraded) < sum(cost.values())
    assert len(result.sensitivities) == len(layers)
    assert {x.layer for x in result.sensitivities} == set(layers)


def test_a_cheaper_layer_with_the_same_gain_is_upgraded_first():
    """Scores in code: two layers, each worth 3 dB when 16x8; the target needs one of them:
    the search takes the cheaper one."""
    def score(plan):
        return PlanAccuracy(30.0 + 3.0 * sum(plan.of(x) is WIDE for x in ("a", "b")), None)

    result = search_plan(["a", "b"], score, {"a": 5.0, "b": 2.0}, AccuracyTarget(sqnr_db=32.0))
    assert result.met and result.upgraded == ("b",)
    assert result.plan == upgraded_plan(["a", "b"], ["b"])


def test_a_target_beyond_all_16x8_is_reported_unmet():
    result = search_plan(["a"], lambda plan: PlanAccuracy(40.0 if plan.of("a") is WIDE else 30.0, None),
                         {"a": 1.0}, AccuracyTarget(sqnr_db=50.0))
    assert not result.met and result.wide.sqnr_db == 40.0 and result.int8.sqnr_db == 30.0


def test_a_met_int8_plan_is_taken_as_it_is():
    calls = []

    def score(plan):
        calls.append(plan)
        return PlanAccuracy(45.0, 1.0)

    result = search_plan(["a", "b"], score, {}, AccuracyTarget(sqnr_db=40.0, max_drop_points=0.5))
    assert result.met and result.plan == PrecisionPlan() and calls == [PrecisionPlan(), PrecisionPlan(default=WIDE)]


@pytest.mark.parametrize("kwargs", [{}, {"sqnr_db": float("nan")}, {"max_drop_points": -1.0},
                                    {"max_drop_points": 100.0}])
def test_bad_targets_are_usage_errors(kwargs):
    with pytest.raises(UsageError):
        AccuracyTarget(**kwargs)


def test_scoring_a_batch_gives_the_figures_of_one_sample_at_a_time(setup):
    from qsim.quant.rebatch import rebatched_graph
    graph, feeds = setup[1], setup[4]
    model = lower(setup, PrecisionPlan((("c2", WIDE), ("y", WIDE))))
    assert rebatched_graph(model.graph, len(feeds)) is not None       # the batched path is taken
    assert PlanScorer(graph, feeds, rebatch=rebatched_graph)(model) == PlanScorer(graph, feeds)(model)


def test_scoring_in_several_batches_gives_the_same_figures(setup, monkeypatch):
    from qsim.quant.precision_plan import scoring
    from qsim.quant.rebatch import rebatched_graph
    graph, feeds = setup[1], setup[4]
    model = lower(setup, PrecisionPlan((("c1", WIDE),)))
    whole = PlanScorer(graph, feeds, rebatch=rebatched_graph)(model)
    monkeypatch.setattr(scoring, "BATCH", 5)                            # 5 + 5 + 2 samples
    assert PlanScorer(graph, feeds, rebatch=rebatched_graph)(model) == whole


def test_an_output_after_pooling_has_its_16x8_producer_width(tmp_path):
    """conv -> relu -> global pool -> flatten (the graph output): with the conv 16x8 nothing
    reads the output, so it keeps the conv's width, int16, as all-16x8 would give it."""
    import onnx
    rng = np.random.default_rng(5)
    model = onnx_model([node("Conv", ["x", "k"], ["c"], pads=[1, 1, 1, 1]), node("Relu", ["c"], ["r"]),
                        node("GlobalAveragePool", ["r"], ["p"]), node("Flatten", ["p"], ["y"])],
                       (1, 2, 6, 6), ["y"], [init("k", rng.normal(0, 0.5, (4, 2, 3, 3)).astype(np.float32))])
    onnx.save(model, tmp_path / "m.onnx")
    graph = load_float_model(str(tmp_path / "m.onnx"))
    assert op_precisions(graph, PrecisionPlan((("c", WIDE),))).tensors["y"] is WIDE
    assert op_precisions(graph, PrecisionPlan((("c", INT8),), WIDE)).tensors["y"] is INT8
    cal = calibrate_each_width(graph, Samples(rng.normal(0, 1, (8, 2, 6, 6)).astype(np.float32)), "x",
                               dataclasses.replace(OPTIONS, plan=PrecisionPlan()))
    lowered = TosaTarget(QuantConfig(plan=PrecisionPlan((("c", WIDE),)))).lower(graph, cal)
    assert lowered.graph.tensor(lowered.tensor_map["y"].name).dtype is ir.DType.I16


def test_a_plan_needs_both_calibrations_and_the_tosa_target(setup):
    from qsim.quant.cvm.context import CvmConfig
    from qsim.quant.cvm.target import CvmTarget
    from qsim.quant.target import Calibration
    graph, cal = setup[1], setup[3]
    with pytest.raises(UsageError, match="calibrated at each"):
        TosaTarget(QuantConfig(plan=PrecisionPlan())).lower(graph, Calibration(cal.qparams))
    with pytest.raises(UsageError, match="cvm"):
        CvmTarget(CvmConfig()).check_options(dataclasses.replace(OPTIONS, plan=PrecisionPlan()))
