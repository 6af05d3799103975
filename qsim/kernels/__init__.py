"""Compiled Cython kernels (built by setup.py from the top-level kernels/ folder).

`qsim.kernels._<name>` are the extension modules; this package holds their
Python-side dispatch.
"""
from __future__ import annotations


def cpu_features() -> dict[str, bool]:
    """The SIMD features the kernels detected on this CPU."""
    from . import _cpu
    return _cpu.features()
