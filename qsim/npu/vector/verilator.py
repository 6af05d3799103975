"""The vector unit (hw/vector.py) under Verilator: the exported Verilog and a C++ cycle loop.

Same protocol and results as the Amaranth testbench and the numpy model
(model.VectorRun): one instruction per call, cycle 0 = the cycle it is
accepted. The build reuses the NPU engine's flags and cache (sim_verilator.py),
keyed by the Verilog, the harness, the flags and Verilator's version.
"""
from __future__ import annotations

import ctypes
import hashlib
from importlib import resources
from pathlib import Path

import numpy as np

from ...errors import MismatchError
from ...hw.vector import VectorUnit
from ...hw.vector_isa import DEFAULT_MAX_POOL_COUNT
from ...hw.vector_isa import INSTR_BITS, LANE_BITS, VectorInstr
from ..sim_verilator import (CXX_FLAGS, MAKE_OPTS, VERILATOR_FLAGS, _ZERO_MEMORY_INIT, _build_into, _verilator,
    _version, cache_root, cached_build_is_usable)
from .model import VectorRun

TOP = "qsim_vector"


def _bytes_of(bits: int) -> int:
    return -(-bits // 8)


def build_vector(lanes: int, max_pool_count: int = DEFAULT_MAX_POOL_COUNT, jobs: int = 2) -> Path:
    """The shared library of a `lanes`-wide vector unit, built once per distinct Verilog."""
    from amaranth.back import verilog as amaranth_verilog

    cmd, env = _verilator()
    verilog = _ZERO_MEMORY_INIT.sub("", amaranth_verilog.convert(VectorUnit(lanes, max_pool_count), name=TOP))
    harness = resources.files("qsim.npu.vector").joinpath("harness.cpp").read_text()
    defines = (f"-DCFG_BYTES={_bytes_of(INSTR_BITS + LANE_BITS * lanes)} "
               f"-DBEAT_BYTES={_bytes_of(64 * lanes + 1)} -DOUT_BYTES={4 * lanes}")
    key = hashlib.sha256("\0".join([verilog, harness, " ".join(VERILATOR_FLAGS), " ".join(MAKE_OPTS),
                                    CXX_FLAGS, defines, _version(cmd, env)]).encode()).hexdigest()[:24]
    final = cache_root() / f"vector-{key}"
    lib = final / f"lib{TOP}.so"
    if not cached_build_is_usable(lib):
        _build_into(final, cmd, env, verilog, harness, VERILATOR_FLAGS, defines, jobs, top=TOP)
    return lib


class VerilatedVectorUnit:
    """A verilated vector unit. The library holds one unit per process: every instance of
    the same build drives (and shares the table memories of) that one unit."""

    def __init__(self, lanes: int, max_pool_count: int = DEFAULT_MAX_POOL_COUNT):
        self.lanes = lanes
        dll = ctypes.CDLL(str(build_vector(lanes, max_pool_count)))
        dll.qsim_vector_run.restype = ctypes.c_int64
        dll.qsim_vector_run.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int64,
                                        ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int64,
                                        ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                        ctypes.c_void_p, ctypes.c_int64]
        self._run = dll.qsim_vector_run

    def run(self, instr: VectorInstr, a, b=None, last=None, source_valid=None, sink_ready=None,
            max_cycles: int = 1 << 40) -> VectorRun:
        lanes, n = self.lanes, instr.count
        a = np.asarray(a, np.int64).reshape(n, lanes)
        b = np.zeros_like(a) if b is None else np.asarray(b, np.int64).reshape(n, lanes)
        last = np.zeros(n, bool) if last is None else np.asarray(last, bool)
        scalar, lane_word = instr.encode(lanes)
        cfg = (scalar | (lane_word << INSTR_BITS)).to_bytes(_bytes_of(INSTR_BITS + LANE_BITS * lanes), "little")
        beat_bytes = _bytes_of(64 * lanes + 1)
        beats = np.zeros((n, beat_bytes), np.uint8)
        beats[:, :4 * lanes] = a.astype("<i4").view(np.uint8).reshape(n, -1)
        beats[:, 4 * lanes:8 * lanes] = b.astype("<i4").view(np.uint8).reshape(n, -1)
        beats[:, 8 * lanes] = last
        patterns = [np.ones(0, np.uint8) if p is None else np.asarray(p, np.uint8)
                    for p in (source_valid, sink_ready)]
        length = max(len(p) for p in patterns)
        padded = [np.concatenate([p, np.ones(length - len(p), np.uint8)]) for p in patterns]
        results = np.zeros((n, lanes), "<i4")
        result_cycles, accept_cycles = np.zeros(n, np.int64), np.zeros(n, np.int64)
        n_results = np.zeros(1, np.int64)
        end = self._run(cfg, beats.tobytes(), n, padded[0].tobytes(), padded[1].tobytes(), length,
                        results.ctypes.data, result_cycles.ctypes.data, accept_cycles.ctypes.data,
                        n_results.ctypes.data, max_cycles)
        if end < 0:
            raise MismatchError(f"vector unit did not finish {instr.op.name} within {max_cycles} cycles "
                                f"on the verilator engine" if end == -1 else
                                "vector unit busy when an instruction was offered")
        r = int(n_results[0])
        return VectorRun(results[:r].astype(np.int32), accept_cycles, result_cycles[:r], int(end))
