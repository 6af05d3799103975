"""The planner's vector chains: the quantizer's residual ADD (RESCALE, RESCALE, ADD, RESCALE,
CLAMP) becomes one vector stage, and its values equal the kernels' run of the five operators."""
import numpy as np
import pytest

from qsim import ir
from qsim.hw.params import Dataflow
from qsim.npu.config import NpuConfig
from qsim.npu.program import Unit, plan, run_graph_on_npu


def _op(kind, inputs, outputs, attrs, name):
    return ir.Op(ir.OpKind.get(f"tosa.{kind}"), tuple(inputs), tuple(outputs), attrs, name=name)


def _rescale(in_zp, out_zp, mult, shift, out_t, per_channel=False, double_round=False):
    n = len(np.atleast_1d(mult))
    return {"input_zp": in_zp, "output_zp": out_zp, "multiplier": np.array(np.atleast_1d(mult), np.int32),
            "shift": np.array(np.atleast_1d(shift) if n > 1 else [shift], np.int8), "scale32": True,
            "double_round": double_round, "per_channel": per_channel, "out_t": out_t}


def residual_graph(shape=(1, 3, 3, 5), extra_reader=False):
    """y = clamp(rescale(rescale(a) + rescale(b))), a and b int8 with zero points at the rails;
    with `extra_reader`, the ADD's int32 sum is also a graph output (so it cannot be fused away)."""
    c = shape[-1]
    t = {"a": ir.Tensor("a", ir.DType.I8, shape), "b": ir.Tensor("b", ir.DType.I8, shape),
         "a32": ir.Tensor("a32", ir.DType.I32, shape), "b32": ir.Tensor("b32", ir.DType.I32, shape),
         "s": ir.Tensor("s", ir.DType.I32, shape), "r": ir.Tensor("r", ir.DType.I8, shape),
         "y": ir.Tensor("y", ir.DType.I8, shape)}
    ops = (_op("RESCALE", ["a"], ["a32"], _rescale(127, 0, 1 << 30, 19, "int32"), "ra"),
           _op("RESCALE", ["b"], ["b32"], _rescale(-128, 0, 1157652868, 21, "int32", double_round=True), "rb"),
           _op("ADD", ["a32", "b32"], ["s"], {}, "add"),
           _op("RESCALE", ["s"], ["r"], _rescale(0, -128, [1653474528 + k for k in range(c)],
                                                 [41 - k % 2 for k in range(c)], "int8", per_channel=True), "ro"),
           _op("CLAMP", ["r"], ["y"], {"min_val": -100, "max_val": 90}, "relu"))
    outputs = ("y", "s") if extra_reader else ("y",)
    return ir.Graph("residual", ("a", "b"), outputs, ops, t).verify()


def _config(dataflow="ws"):
    return NpuConfig(name="4x4", rows=4, cols=4, dataflow=Dataflow(dataflow), input_buffer_bytes=256,
                     weight_buffer_bytes=256, accumulator_buffer_bytes=1024, dram_bytes_per_cycle=4,
                     clock_mhz=1000)


def _feeds(shape=(1, 3, 3, 5)):
    rng = np.random.default_rng(5)
    a = rng.integers(-128, 128, shape).astype(np.int8)
    a.flat[:2] = (-128, 127)
    return {"a": a, "b": rng.integers(-128, 128, shape).astype(np.int8)}


def test_residual_add_is_one_vector_stage():
    stages = plan(residual_graph())
    assert [(s.op_text, s.unit) for s in stages] == [("RESCALE+RESCALE+ADD+RESCALE+CLAMP", Unit.VECTOR)]
    assert stages[0].output == "y"


def test_a_tensor_read_elsewhere_is_not_fused_away():
    stages = plan(residual_graph(extra_reader=True))
    assert [s.op_text for s in stages] == ["RESCALE+RESCALE+ADD", "RESCALE+CLAMP"]


@pytest.mark.parametrize("engine", ["model", "amaranth"])
@pytest.mark.parametrize("extra_reader", [False, True])
def test_fused_chain_is_bit_exact(engine, extra_reader):
    run = run_graph_on_npu(residual_graph(extra_reader=extra_reader), _feeds(), _config("os"), engine=engine)
    assert run.verified and all(s.verified for s in run.stages)
    assert all(s.rtl == (engine == "amaranth") for s in run.stages)
