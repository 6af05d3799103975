"""Padded AVG_POOL2D and RESIZE as runs of vector jobs (qsim/npu/vector/windows.py) on the cycle
model against the TOSA 0.30 reference, over random geometries (the RTL runs the fixed cases of
vector_cases.py in tests/hw/test_vector_npu.py), and the run cutting worked by hand."""
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from qsim.errors import UnpredictableError
from qsim.hw.params import Dataflow, Geometry
from qsim.npu.engines import run_program
from qsim.npu.vector.ops import compile_vector_op
from qsim.npu.vector.windows import Run, axis_runs

from .vector_cases import _resize, reference

GEOM = Geometry(4, 4, Dataflow.WEIGHT_STATIONARY, 256, 256, 1024, 4)


def _model(op, x, attrs):
    want = reference(op, [x], attrs)
    program = compile_vector_op(GEOM, op, attrs, [x], want.shape, want.dtype)
    got = run_program(GEOM, program, "model").output
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    return program


def test_axis_runs_by_hand():
    # pooling, kernel 3, stride 2, pad 1 on 6 inputs -> 3 outputs: windows [-1, 2) -> [0, 2) (2 taps),
    # [1, 4), [3, 6): the border window is its own run, the other two advance by 2
    starts, ends = np.array([0, 1, 3]), np.array([2, 4, 6])
    assert axis_runs(starts, [(int(n),) for n in ends - starts], 1) == [
        Run(0, 1, 1, 0, 0, (2,)), Run(1, 2, 1, 1, 2, (3,))]
    # nearest x2 on 3 inputs: sources 0 0 1 1 2 2 -> residues 0 and 1 of period 2, each advancing by 1
    assert axis_runs(np.array([0, 0, 1, 1, 2, 2]), [()] * 6, 2) == [Run(0, 3, 2, 0, 1, ()), Run(1, 3, 2, 0, 1, ())]
    # a break in the source step starts a new run: 0 1 2 2 (clamped at the border)
    assert axis_runs(np.array([0, 1, 2, 2]), [()] * 4, 1) == [Run(0, 3, 1, 0, 1, ()), Run(3, 1, 1, 2, 0, ())]


@settings(derandomize=True, deadline=None, max_examples=40)
@given(kernel=st.tuples(st.integers(1, 4), st.integers(1, 4)), stride=st.tuples(st.integers(1, 3), st.integers(1, 3)),
       out_hw=st.tuples(st.integers(1, 4), st.integers(1, 4)), pads=st.tuples(*[st.integers(0, 3)] * 4),
       channels=st.integers(1, 6), int16=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_padded_avg_pool_equals_the_reference(kernel, stride, out_hw, pads, channels, int16, seed):
    pt, pb, pl, pr = (p % k for p, k in zip(pads, (kernel[0], kernel[0], kernel[1], kernel[1])))
    h = (out_hw[0] - 1) * stride[0] + kernel[0] - pt - pb
    w = (out_hw[1] - 1) * stride[1] + kernel[1] - pl - pr
    assume(h >= 1 and w >= 1)
    rng = np.random.default_rng(seed)
    dtype = np.int16 if int16 else np.int8
    info = np.iinfo(dtype)
    x = rng.integers(info.min, int(info.max) + 1, (2, h, w, channels)).astype(dtype)
    zps = (0, 0) if int16 else tuple(int(v) for v in rng.choice([-128, 127, int(rng.integers(-128, 128))], 2))
    _model("AVG_POOL2D", x, {"kernel": list(kernel), "stride": list(stride), "pad": [pt, pb, pl, pr],
                             "input_zp": zps[0], "output_zp": zps[1]})


@settings(derandomize=True, deadline=None, max_examples=60)
@given(in_hw=st.tuples(st.integers(1, 6), st.integers(1, 6)), shift=st.integers(1, 11),
       stride_frac=st.tuples(st.floats(0.2, 3.0), st.floats(0.2, 3.0)),
       offset_frac=st.tuples(st.floats(-0.9, 0.9), st.floats(-0.9, 0.9)),
       border=st.tuples(st.integers(-1, 2), st.integers(-1, 2)), bilinear=st.booleans(), int16=st.booleans(),
       seed=st.integers(0, 2**32 - 1))
def test_resize_equals_the_reference(in_hw, shift, stride_frac, offset_frac, border, bilinear, int16, seed):
    unit = 1 << shift
    stride = tuple(max(1, int(f * unit)) for f in stride_frac)
    offset = tuple(int(f * unit) for f in offset_frac)
    attrs = _resize(in_hw, stride, offset, border, shift, "BILINEAR" if bilinear else "NEAREST")
    assume(all(1 <= n <= 12 for n in attrs["output_size"]))
    dtype = np.int16 if int16 and not bilinear else np.int8
    info = np.iinfo(dtype)
    x = np.random.default_rng(seed).integers(info.min, int(info.max) + 1, (1, *in_hw, 3)).astype(dtype)
    x.flat[:2] = info.min, info.max                 # both rails
    try:
        reference("RESIZE", [x], attrs)
    except UnpredictableError:              # a sample position outside the input (REQUIRE i0 <= i1)
        assume(False)
    _model("RESIZE", x, attrs)


def test_resize_x2_takes_few_jobs_and_skips_zero_weight_taps():
    """A x2 bilinear resize (half-pixel: stride 2^shift / 2, offset -2^shift / 4) cuts each axis
    into its two phases plus the clamped borders; the 16-lane 16x16 preset holds 8 channels per
    beat, so the job count is the run count."""
    x = np.random.default_rng(5).integers(-128, 128, (1, 8, 8, 8)).astype(np.int8)
    program = _model("RESIZE", x, _resize((8, 8), (2, 2), (-1, -1), (1, 1), 2, "BILINEAR"))
    jobs = sum(1 for i in program.instrs if i.opcode.name == "VRUN")
    assert jobs == 16            # rows and columns: first (clamped), phase 1, phase 0, last (clamped)
    nearest = _model("RESIZE", x, _resize((8, 8), (1, 1), (0, 0), (1, 1), 1, "NEAREST"))
    # nearest at phase 1/2 rounds up (d >= 2^shift / 2 picks i1): sources 0 1 1 2 2 ... 7 7 7, so
    # the odd phase clamps at its last output: 3 runs per axis
    assert sum(1 for i in nearest.instrs if i.opcode.name == "VRUN") == 9


@pytest.mark.parametrize("pad", [[1, 1, 1, 1], [0, 2, 2, 0]])
def test_padded_avg_pool_divides_border_windows_by_their_valid_taps(pad):
    """A constant input c with zero points 0 averages to c everywhere only if every window
    divides by its own count of valid taps (dividing a border window by 9 would shrink it)."""
    x = np.full((1, 4, 4, 3), 90, np.int8)
    attrs = {"kernel": [3, 3], "stride": [1, 1], "pad": pad, "input_zp": 0, "output_zp": 0}
    want = reference("AVG_POOL2D", [x], attrs)
    assert (want == 90).all()
    _model("AVG_POOL2D", x, attrs)
