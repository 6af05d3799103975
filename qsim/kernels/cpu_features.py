"""The host CPU's SIMD features and which instruction-set path the compiled kernels run on them:
detected once, forcible for tests. (Not the NPU's instruction set: that is qsim.hw.isa.)

Every path computes the same integers (see kernels/isa_paths.h); forcing one is how the tests
prove it. The default is the best path this CPU supports, or the one the environment variable
QSIM_ISA names.
"""
from __future__ import annotations

import contextlib
import enum
import functools
import os
from typing import Iterator

from ..errors import UsageError
from .extensions import extension


class Isa(enum.Enum):
    PORTABLE = "portable"        # plain C, any x86-64 (or other) CPU
    AVX2 = "avx2"                # exact vpmaddwd path (no vpmaddubsw: it saturates)
    AVX512VNNI = "avx512vnni"    # vpdpbusd u8 x s8 micro-kernel
    AVX512AMX = "avx512amx"      # avx512vnni with the int8 GEMM on AMX tiles (TDPBUSD)

    @property
    def code(self) -> int:
        """The QSIM_ISA_* constant of kernels/isa_paths.h the kernels other than the int8 GEMM
        take (AMX only changes the GEMM: the rest runs its AVX-512 VNNI code)."""
        return _codes()[Isa.AVX512VNNI if self is Isa.AVX512AMX else self]

    @property
    def gemm_code(self) -> int:
        """The QSIM_ISA_* constant of the int8 GEMM (packing and qsim_gemm, kernels/qgemm.h)."""
        return _codes()[self]


_CODES: dict[Isa, int] = {}


def _codes() -> dict[Isa, int]:
    if not _CODES:     # filled on first use: loading _tosa_ops here would make it eager
        _tosa_ops = extension("_tosa_ops")
        _CODES.update({Isa.PORTABLE: _tosa_ops.ISA_PORTABLE, Isa.AVX2: _tosa_ops.ISA_AVX2,
                       Isa.AVX512VNNI: _tosa_ops.ISA_AVX512VNNI,
                       Isa.AVX512AMX: _tosa_ops.ISA_AVX512AMX})
    return _CODES


@functools.lru_cache(maxsize=1)
def detected_features() -> dict[str, bool]:
    """The SIMD features the kernels detected on this CPU (kernels/cpu_features.h); the first
    call also obtains the process's AMX permission where the CPU has AMX."""
    return dict(extension("_cpu").features())


def supported_isas() -> list[Isa]:
    """The paths this CPU can run, slowest first."""
    feats = detected_features()
    found = [Isa.PORTABLE]
    if feats["avx2"]:
        found.append(Isa.AVX2)
    if feats["avx512_vnni"]:
        found.append(Isa.AVX512VNNI)
    if feats.get("amx_int8"):
        found.append(Isa.AVX512AMX)
    return found


_current: Isa | None = None


def current_isa() -> Isa:
    global _current
    if _current is None:
        named = os.environ.get("QSIM_ISA", "").strip()
        try:
            _current = supported_isas()[-1] if not named else _checked(named)
        except UsageError as err:
            raise UsageError(f"QSIM_ISA: {err.message}",
                             hint=f"{err.hint}, or unset QSIM_ISA for the best path") from None
    return _current


def _checked(name: str | Isa) -> Isa:
    """The Isa called `name`, which this CPU must run (UsageError otherwise)."""
    try:
        isa = name if isinstance(name, Isa) else Isa(name)
    except ValueError:
        raise UsageError(f"unknown kernel ISA {name!r}",
                         hint="use one of: " + ", ".join(i.value for i in Isa)) from None
    if isa not in supported_isas():
        raise UsageError(f"this CPU cannot run the {isa.value} kernels",
                         hint="supported here: " + ", ".join(i.value for i in supported_isas()))
    return isa


def set_isa(name: str | Isa) -> Isa:
    """Forces the kernels onto one path ("portable", "avx2", "avx512vnni", "avx512amx");
    returns the old one."""
    global _current
    isa = _checked(name)
    old = current_isa()
    _current = isa
    return old


@contextlib.contextmanager
def forced_isa(name: str | Isa) -> Iterator[Isa]:
    """`with forced_isa("avx2"): ...` runs the block on one path, then restores the previous one."""
    old = set_isa(name)
    try:
        yield current_isa()
    finally:
        set_isa(old)
