"""Vector-unit programs (qsim/npu/vector/ops.py) on the cycle model against the TOSA reference,
the closed-form VRUN timing against a step-by-step replay, and the host fallbacks' reasons."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qsim.errors import UnsupportedError
from qsim.hw.params import Dataflow, Geometry
from qsim.npu.engines import run_program
from qsim.npu.vector.model import vrun_issue_cycles
from qsim.npu.vector.ops import compile_vector_op

from .vector_cases import cases, reference

GEOMS = [Geometry(4, 4, Dataflow.WEIGHT_STATIONARY, 256, 256, 1024, 4),
         Geometry(2, 3, Dataflow.OUTPUT_STATIONARY, 128, 128, 512, 7)]


@pytest.mark.parametrize("geom", GEOMS, ids=["4x4-ws-B4", "2x3-os-B7"])
@pytest.mark.parametrize("name,op,inputs,attrs", cases(), ids=[c[0] for c in cases()])
def test_operator_on_the_cycle_model_equals_the_reference(geom, name, op, inputs, attrs):
    want = reference(op, inputs, attrs)
    program = compile_vector_op(geom, op, attrs, inputs, want.shape, want.dtype)
    got = run_program(geom, program, "model").output
    assert got.dtype == want.dtype and np.array_equal(got, want), name


def _replay(cost, B):
    """The vector DMA's credit rule cycle by cycle (hw/vdma.py): transaction j goes in the
    first cycle s after transaction j-1 with (s + 1) * B >= the bytes of transactions 0..j."""
    out, s, spent = [], 0, 0
    for c in cost:
        while (s + 1) * B < spent + c:
            s += 1
        out.append(s)
        spent += c
        s += 1
    return out


@settings(derandomize=True, deadline=None, max_examples=60)
@given(st.lists(st.integers(1, 80), min_size=1, max_size=40), st.integers(1, 64))
def test_issue_cycles_closed_form_equals_replay(cost, bandwidth):
    assert vrun_issue_cycles(np.array(cost), bandwidth).tolist() == _replay(cost, bandwidth)


def test_unsupported_operator_and_type_say_why():
    geom = GEOMS[0]
    x = np.zeros((2, 3), np.uint8)
    with pytest.raises(UnsupportedError, match="tosa.SCATTER has no vector-unit mapping"):
        compile_vector_op(geom, "SCATTER", {}, [x, x], (2, 3), np.int32)
    with pytest.raises(UnsupportedError, match=r"tosa.CLAMP input is uint8: the vector DMA streams signed"):
        compile_vector_op(geom, "CLAMP", {"min_val": 0, "max_val": 3}, [x], (2, 3), np.uint8)
    y = np.zeros((1, 4, 4, 2), np.int16)
    resize = {"output_size": [7, 7], "stride": [1, 1], "offset": [0, 0], "border": [0, 0], "shift": 1,
              "mode": "BILINEAR"}
    with pytest.raises(UnsupportedError, match="tosa.RESIZE output is int64: the vector DMA streams signed"):
        compile_vector_op(geom, "RESIZE", resize, [y], (1, 7, 7, 2), np.int64)
    # a scale whose phase never repeats within the output: one job per output pixel, too many
    big = np.zeros((1, 80, 80, 1), np.int8)
    odd = dict(resize, stride=[2047, 2047], shift=11, mode="NEAREST", output_size=[81, 81], border=[0, 0])
    with pytest.raises(UnsupportedError, match=r"RESIZE needs 81 x 81 vector jobs .* stops at 4096"):
        compile_vector_op(geom, "RESIZE", odd, [big], (1, 81, 81, 1), np.int8)


def test_too_many_loop_levels_is_unsupported():
    geom = GEOMS[0]
    x = np.zeros((2, 2, 2, 2, 2, 2, 3), np.int8)      # 6 outer dimensions + the lane tile
    with pytest.raises(UnsupportedError, match="7 loop levels; the vector DMA has 6"):
        compile_vector_op(geom, "CLAMP", {"min_val": 0, "max_val": 3}, [x], x.shape, np.int8)


def test_gather_runs_on_the_vector_unit_with_constant_and_computed_indices():
    """Constant indices are part of the program (an address pattern); indices computed at run
    time stream through the vector DMA's indirect mode (tests/npu/test_gather_indirect.py)."""
    from qsim import ir
    from qsim.npu.vector.ops import vector_support
    kind = ir.OpKind.get("tosa.GATHER")
    picks = np.array([[2, 0]], np.int32)
    for constant in (True, False):
        tensors = {"v": ir.Tensor("v", ir.DType.I8, (1, 3, 4)),
                   "i": ir.Tensor("i", ir.DType.I32, (1, 2), data=picks if constant else None),
                   "o": ir.Tensor("o", ir.DType.I8, (1, 2, 4))}
        graph = ir.Graph("g", ("v",) if constant else ("v", "i"), ("o",),
                         (ir.Op(kind, ("v", "i"), ("o",), {}, name="g"),), tensors).verify()
        assert vector_support(graph, graph.ops[0]) is None
