"""`qsim selftest` checks of the compiled kernels: seeded cases, every ISA path this CPU runs,
compared element by element with the TOSA numpy reference (qsim.tosa, backend="reference")."""
from __future__ import annotations

import numpy as np

from ..errors import MismatchError
from ..kernels.cpu_features import forced_isa, supported_isas
from ..tosa import run    # validated by qsim.tosa; backend="reference" is its oracle
from .compare import SelfCheck, assert_equal_arrays


def _compare(op: str, inputs: list, attrs: dict) -> int:
    want = run(op, inputs, attrs, backend="reference")
    n = 0
    for isa in supported_isas():
        with forced_isa(isa):
            got = run(op, inputs, attrs, backend="kernels")
        for g, w in zip(got, want):
            if g.dtype != w.dtype:
                raise MismatchError(f"{op} kernel ({isa.value}) returns {g.dtype}, the reference {w.dtype}")
            n += assert_equal_arrays(f"{op} kernel ({isa.value}) vs reference", w, g)
    return n


def _i8(rng, shape, lo=-128, hi=127):
    return rng.integers(lo, hi, size=shape, endpoint=True).astype(np.int8)


def check_conv2d_rescale(rng: np.random.Generator) -> int:
    x = _i8(rng, (1, 12, 10, 19))
    x[0, 0, 0, 0] = -128
    w = _i8(rng, (37, 3, 3, 19))
    w[0, 0, 0, 0] = -128
    bias = rng.integers(-5000, 5000, 37).astype(np.int32)
    attrs = dict(weight=w, bias=bias, pad=(1, 1, 2, 1), stride=(1, 2), dilation=(1, 1),
                 input_zp=-3, weight_zp=0)
    n = _compare("CONV2D", [x], attrs)
    acc = run("CONV2D", [x], attrs)[0]
    rescale = dict(input_zp=0, output_zp=-7, multiplier=rng.integers(1 << 30, 1 << 31, 37).astype(np.int32),
                   shift=rng.integers(38, 44, 37).astype(np.int32), scale32=True, double_round=True,
                   per_channel=True, out_t="int8")
    return n + _compare("RESCALE", [acc], rescale)


def check_rescale_sixteen_lanes(rng: np.random.Generator) -> int:
    """int32 -> int8/int16 with 32 channels and shifts >= 33 (the 16-lane AVX-512 path)."""
    acc = rng.integers(-(1 << 31), 1 << 31, (5, 7, 32)).astype(np.int32)
    acc[0, 0, :2] = (-(1 << 31), (1 << 31) - 1)
    n = 0
    for out_t, double_round in (("int8", True), ("int16", False)):
        mult = rng.integers(0, 1 << 31, 32).astype(np.int32)
        mult[0] = 0
        attrs = dict(input_zp=0, output_zp=-5 if out_t == "int8" else 0, multiplier=mult,
                     shift=rng.integers(33, 63, 32).astype(np.int32), scale32=True,
                     double_round=double_round, per_channel=True, out_t=out_t)
        n += _compare("RESCALE", [acc], attrs)
    return n


def check_depthwise(rng: np.random.Generator) -> int:
    x = _i8(rng, (1, 15, 13, 24))
    w = _i8(rng, (3, 3, 24, 2))
    attrs = dict(weight=w, bias=rng.integers(-999, 999, 48).astype(np.int32), pad=(1, 1, 1, 1),
                 stride=(2, 2), dilation=(1, 1), input_zp=127, weight_zp=-128)
    n = _compare("DEPTHWISE_CONV2D", [x], attrs)
    x16 = rng.integers(-32768, 32767, (1, 9, 21, 40), endpoint=True).astype(np.int16)
    w16 = _i8(rng, (3, 3, 40, 1))
    attrs16 = dict(weight=w16, bias=rng.integers(-999, 999, 40).astype(np.int64), pad=(1, 1, 1, 1),
                   stride=(1, 1), dilation=(2, 1), input_zp=0, weight_zp=0)
    return n + _compare("DEPTHWISE_CONV2D", [x16], attrs16)


def check_pools_and_clamp(rng: np.random.Generator) -> int:
    x = _i8(rng, (1, 11, 9, 21))
    x[0, 0, 0, 0] = -128
    pool = dict(kernel=(3, 3), stride=(2, 2), pad=(1, 1, 1, 1))
    n = _compare("MAX_POOL2D", [x], pool)
    n += _compare("AVG_POOL2D", [x], dict(pool, input_zp=-128, output_zp=127))
    return n + _compare("CLAMP", [x], dict(min_val=-100, max_val=90))


def check_fully_connected(rng: np.random.Generator) -> int:
    x = _i8(rng, (2, 203))
    w = _i8(rng, (77, 203))
    attrs = dict(weight=w, bias=rng.integers(-999, 999, 77).astype(np.int32), input_zp=-128,
                 weight_zp=5)
    return _compare("FULLY_CONNECTED", [x], attrs)


def check_matmul(rng: np.random.Generator) -> int:
    a = _i8(rng, (2, 9, 70))
    b = _i8(rng, (2, 70, 33))
    return _compare("MATMUL", [a, b], dict(A_zp=-128, B_zp=127))


def check_table(rng: np.random.Generator) -> int:
    t8 = _i8(rng, (256,))
    n = _compare("TABLE", [np.arange(-128, 128, dtype=np.int8)], dict(table=t8))
    t16 = rng.integers(-16000, 16000, 513).astype(np.int16)   # |slope| < 2^15 (REQUIRE)
    x16 = np.concatenate([np.array([-32768, 32767, 0, -1], dtype=np.int16),
                          rng.integers(-32768, 32767, 200, endpoint=True).astype(np.int16)])
    return n + _compare("TABLE", [x16], dict(table=t16))


def check_elementwise_and_reductions(rng: np.random.Generator) -> int:
    a = rng.integers(-(1 << 30), 1 << 30, (2, 5, 1, 7)).astype(np.int32)
    b = rng.integers(-(1 << 30), 1 << 30, (2, 1, 3, 7)).astype(np.int32)
    n = _compare("ADD", [a, b], {}) + _compare("MINIMUM", [a, b], {})
    n += _compare("MUL", [a >> 12, b >> 12], dict(shift=7))
    x8 = _i8(rng, (3, 1, 11))
    n += _compare("MUL", [x8, _i8(rng, (3, 4, 11))], dict(shift=0))
    return n + _compare("REDUCE_SUM", [a >> 4], dict(axis=1)) + _compare("REDUCE_MAX", [x8], dict(axis=2))


KERNEL_CHECKS = [
    SelfCheck("kernels vs reference: CONV2D + per-channel RESCALE", check_conv2d_rescale),
    SelfCheck("kernels vs reference: RESCALE int32 -> int8/int16, 32 channels",
              check_rescale_sixteen_lanes),
    SelfCheck("kernels vs reference: DEPTHWISE_CONV2D int8/int16", check_depthwise),
    SelfCheck("kernels vs reference: MAX_POOL2D, AVG_POOL2D, CLAMP", check_pools_and_clamp),
    SelfCheck("kernels vs reference: FULLY_CONNECTED", check_fully_connected),
    SelfCheck("kernels vs reference: MATMUL", check_matmul),
    SelfCheck("kernels vs reference: TABLE int8/int16", check_table),
    SelfCheck("kernels vs reference: ADD, MINIMUM, MUL (broadcasting), REDUCE_SUM/MAX",
              check_elementwise_and_reductions),
]
