"""`verilator` engine for several cores: the multi-core top (hw/cores.py, with the array side
of each core, as single-core array programs run: qsim/npu/sim_verilator.py) compiled with
harness.cpp beside this module into a shared library, cached like the single-core builds
(keyed by the Verilog, the harness, the flags and Verilator's version)."""
from __future__ import annotations

import ctypes
import hashlib
from importlib import resources
from pathlib import Path

import numpy as np

from ...errors import MismatchError
from ...hw.isa import INSTR_BYTES, pack_program
from ...hw.params import Geometry, Units
from ..export import _lean_rtlil
from ..sim_verilator import (CXX_FLAGS, VERILATOR_FLAGS, _build_into, _exclusive, _verilator, _version,
                             cache_root, cached_build_is_usable, make_opts, runtime_objects)
from .memory import scatter, shared_image

TOP = "qsim_cores"
_LOADED: dict[tuple, ctypes.CDLL] = {}


def cores_verilog(geom: Geometry, cores: int, units: Units = Units.ARRAY) -> str:
    """The multi-core top as lean Verilog (qsim/npu/export.py's conversion of the single core)."""
    from ...hw.cores import MultiCore            # deferred: the HDL needs amaranth
    from amaranth.back.verilog import _convert_rtlil_text   # deferred: yosys
    return _convert_rtlil_text(_lean_rtlil(MultiCore(geom, cores, units), TOP))


def harness_source(cores: int) -> str:
    """harness.cpp with its port table for `cores` cores."""
    table = ",\n        ".join(f"{{&top.instr{k}___05Fvalid, &top.instr{k}___05Fready, &top.instr{k}___05Fpayload, "
                               f"&top.idle{k}, &top.base{k}}}" for k in range(cores))
    return resources.files("qsim.npu.cores").joinpath("harness.cpp").read_text().replace("CORE_PORTS", table)


def build_cores(geom: Geometry, cores: int, jobs: int = 2) -> Path:
    memo = (geom, cores)
    if memo in _LOADED:
        return Path(_LOADED[memo]._name)
    cmd, env = _verilator()
    verilog = cores_verilog(geom, cores)
    harness = harness_source(cores)
    opts = make_opts(Units.ARRAY)
    defines = f"-DCORES={cores} -DPORT_BYTES={geom.dram_port_bytes} -DINSTR_BYTES={INSTR_BYTES}"
    key = hashlib.sha256("\0".join([verilog, harness, " ".join(VERILATOR_FLAGS), " ".join(opts), CXX_FLAGS,
                                    defines, _version(cmd, env)]).encode()).hexdigest()[:24]
    final = cache_root() / f"cores-{key}"
    lib = final / f"lib{TOP}.so"
    if not cached_build_is_usable(lib):
        runtime = runtime_objects(cmd, env)
        with _exclusive(f"cores-{key}"):
            if not cached_build_is_usable(lib):
                _build_into(final, cmd, env, verilog, harness, VERILATOR_FLAGS, defines, jobs, top=TOP,
                            make=opts, runtime=runtime)
    return lib


def _load(geom: Geometry, cores: int) -> ctypes.CDLL:
    memo = (geom, cores)
    if memo not in _LOADED:
        dll = ctypes.CDLL(str(build_cores(geom, cores)))
        dll.qsim_cores_run.restype = ctypes.c_int64
        dll.qsim_cores_run.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                       ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p]
        _LOADED[memo] = dll
    return _LOADED[memo]


def run_verilator_cores(geom: Geometry, programs: list[tuple[list, np.ndarray]],
                        max_cycles: int = 1 << 40) -> list[int]:
    """Runs every core's (instructions, DRAM image) at once; the images are updated in place.
    Returns each core's cycle count."""
    n = len(programs)
    dll = _load(geom, n)
    blob = b"".join(pack_program(instrs) for instrs, _ in programs)
    counts = np.asarray([len(instrs) for instrs, _ in programs], np.int64)
    drams = [dram for _, dram in programs]
    memory, starts = shared_image(drams, geom.dram_port_bytes)
    bases = np.asarray(starts, np.int64)
    finish = np.zeros(n, np.int64)
    done = dll.qsim_cores_run(blob, counts.ctypes.data, memory.ctypes.data, memory.size, bases.ctypes.data,
                              max_cycles, finish.ctypes.data)
    if done < 0:
        raise MismatchError(f"the {n} cores did not finish within {max_cycles} cycles on the verilator engine")
    scatter(memory, starts, drams)
    return [int(f) for f in finish]
