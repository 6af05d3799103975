"""Differential harness: every kernel call is checked against the TOSA reference on every
instruction-set path this CPU can run (portable, avx2, avx512vnni)."""
import importlib

import numpy as np
import pytest

from qsim.errors import UnpredictableError
from qsim.kernels.cpu_features import forced_isa, supported_isas

# the operator definitions register themselves with qsim.tosa when their module is imported
for _module in ("convolution", "pooling", "type_conversion", "activation", "elementwise_binary",
                "reduction"):
    importlib.import_module(f"qsim.tosa.ops.{_module}")

from qsim.tosa import run as tosa_run  # noqa: E402

ISAS = [isa.value for isa in supported_isas()]


def check_all_paths(op, inputs, attrs):
    """Runs `op` on the reference and on each ISA path; asserts the same dtype and bits.
    Returns the reference outputs."""
    want = tosa_run(op, inputs, attrs, backend="reference")
    assert_kernels_give(op, inputs, attrs, want)
    return want


def differential(op, inputs, attrs):
    """Reference vs every ISA path for a call that passes the spec's ERROR_IF: the same dtype
    and bits, or, where a REQUIRE fails, the same error kind from both backends. Returns the
    reference outputs, or None when the reference raised."""
    try:
        want = tosa_run(op, inputs, attrs, backend="reference")
    except UnpredictableError:
        for isa in ISAS:
            with forced_isa(isa), pytest.raises(UnpredictableError, match="REQUIRE"):
                tosa_run(op, inputs, attrs, backend="kernels")
        return None
    assert_kernels_give(op, inputs, attrs, want)
    return want


def assert_kernels_give(op, inputs, attrs, want):
    """Every ISA path's outputs have the dtype, shape and values of `want`."""
    for isa in ISAS:
        with forced_isa(isa):
            got = tosa_run(op, inputs, attrs, backend="kernels")
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype, f"{op} on {isa}: dtype {g.dtype} != {w.dtype}"
            assert g.shape == w.shape, f"{op} on {isa}: shape {g.shape} != {w.shape}"
            if not np.array_equal(g, w):
                idx = tuple(int(i) for i in np.argwhere(g != w)[0])
                pytest.fail(f"{op} on {isa}: element {list(idx)} is {g[idx]}, reference {w[idx]} "
                            f"({int((g != w).sum())} of {w.size} differ)")


def ints(rng, shape, dtype, lo=None, hi=None):
    info = np.iinfo(dtype)
    lo = info.min if lo is None else lo
    hi = info.max if hi is None else hi
    return rng.integers(lo, hi, size=shape, endpoint=True).astype(dtype)
