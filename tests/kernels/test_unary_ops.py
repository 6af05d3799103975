"""RESCALE, TABLE and CLAMP kernels (qsim/kernels/unary_ops.py) vs the TOSA reference."""
import numpy as np
import pytest

from kernel_harness import check_all_paths, ints, tosa_run
from qsim.errors import UnpredictableError
from qsim.kernels.registry import KERNELS


RESCALE_PAIRS = [("int8", "int8"), ("int8", "int16"), ("int8", "int32"), ("int8", "uint8"),
                 ("int16", "int8"), ("int16", "int16"), ("int16", "int32"), ("int16", "uint8"),
                 ("int16", "uint16"), ("int32", "int8"), ("int32", "int16"), ("int32", "int32"),
                 ("int48", "int8"), ("int48", "int16"), ("int48", "int32"), ("uint8", "int8"),
                 ("uint8", "int16"), ("uint16", "int16")]


def _zero_point(rng, dtype_name):
    if dtype_name in ("int8", "uint8"):
        info = np.iinfo(dtype_name)
        return int(rng.integers(info.min, info.max + 1))
    if dtype_name == "uint16":
        return int(rng.choice([0, 32768]))
    return 0


@pytest.mark.parametrize("in_t,out_t", RESCALE_PAIRS)
def test_rescale_type_pairs(rng, in_t, out_t):
    storage = np.int64 if in_t == "int48" else np.dtype(in_t)
    for per_channel in (False, True):
        for scale32 in ((False,) if in_t == "int48" else (True, False)):
            for double_round in ((False, True) if scale32 else (False,)):
                shape = (3, 5, 37)
                nc = shape[-1] if per_channel else 1
                if in_t == "int48":
                    x = rng.integers(-(1 << 40), 1 << 40, shape, dtype=np.int64)
                else:
                    x = ints(rng, shape, storage)
                if scale32:
                    mult = rng.integers(1 << 30, 1 << 31, nc).astype(np.int32)
                    shift = rng.integers(33 if in_t == "int32" else 20, 63, nc).astype(np.int32)
                else:
                    mult = rng.integers(1 << 14, 1 << 15, nc).astype(np.int32)
                    # result within int32: |value| * 2^15 >> shift < 2^31
                    low = {"int48": 32, "int32": 16}.get(in_t, 8)
                    shift = rng.integers(low, 47, nc).astype(np.int32)
                attrs = dict(input_zp=_zero_point(rng, in_t), output_zp=_zero_point(rng, out_t),
                             multiplier=mult, shift=shift, scale32=scale32,
                             double_round=double_round, per_channel=per_channel, out_t=out_t)
                check_all_paths("RESCALE", [x], attrs)


@pytest.mark.parametrize("double_round", [False, True])
def test_rescale_rounding_ties_and_shift_extremes(double_round):
    # multiplier 2^30 with shift 31 halves: odd values are exact ties (rounded up, +inf-ward);
    # shift 62 and 2 are the extremes of the allowed range.
    x = np.array([-7, -5, -3, -1, 1, 3, 5, 7, -2147483648, 2147483647], dtype=np.int32)
    for mult, shift in ((1 << 30, 31), (1 << 30, 33), (1 << 30, 62), (1, 2), (0, 2), ((1 << 31) - 1, 62)):
        m = np.array([mult], dtype=np.int32)
        s = np.array([shift], dtype=np.int32)
        # REQUIRE |value| < 2^(shift-2): shift 2 allows only -1 and 0
        xs = x if shift > 33 else (x[:8] if shift > 2 else np.array([-1, 0], dtype=np.int32))
        attrs = dict(input_zp=0, output_zp=0, multiplier=m, shift=s, scale32=True,
                     double_round=double_round, per_channel=False, out_t="int32")
        check_all_paths("RESCALE", [xs], attrs)
    out = KERNELS["RESCALE"]([x[:8]], dict(input_zp=0, output_zp=0, multiplier=np.array([1 << 30]),
                                            shift=np.array([31]), scale32=True, double_round=False,
                                            per_channel=False, out_t="int32"))[0]
    assert out.tolist() == [-3, -2, -1, 0, 1, 2, 3, 4]     # (v + 1) >> 1: ties go up


def test_rescale_double_round_hand_worked():
    # shift 33 > 31: double round adds +/- 2^30 before >> 33. value 3, multiplier 2^31-1:
    # 3*(2^31-1) = 6442450941; + 2^32 + 2^30 = 11811160061 >> 33 = 1 (single round: 10737418237 >> 33 = 1)
    # value -3: -6442450941 + 2^32 - 2^30 = -3221225469 >> 33 = -1 ; single: -2147483645 >> 33 = -1
    # value 5: 10737418235 + 2^32 + 2^30 = 16106127355 >> 33 = 1; single: 15032385531 >> 33 = 1
    # value 7 (2^33 * 1.75 / (2^31-1) ...): 15032385529 + 5368709120 = 20401094649 >> 33 = 2 both
    x = np.array([3, -3, 5, 7, -1], dtype=np.int32)
    base = dict(input_zp=0, output_zp=0, multiplier=np.array([(1 << 31) - 1], dtype=np.int32),
                shift=np.array([33], dtype=np.int32), scale32=True, per_channel=False, out_t="int32")
    got = KERNELS["RESCALE"]([x], {**base, "double_round": True})[0]
    # -1: -2147483647 + 2^32 - 2^30 = 1073741825 >> 33 = 0 (single round: 2147483649 >> 33 = 0)
    assert got.tolist() == [1, -1, 1, 2, 0]
    check_all_paths("RESCALE", [x], {**base, "double_round": True})


def test_rescale_require_failures():
    x = np.array([1 << 20], dtype=np.int32)
    attrs = dict(input_zp=0, output_zp=0, multiplier=np.array([1 << 30], dtype=np.int32),
                 shift=np.array([20], dtype=np.int32), scale32=True, double_round=False,
                 per_channel=False, out_t="int8")
    # |value| = 2^20 >= 2^(shift-2) = 2^18
    for backend in ("reference", "kernels"):
        with pytest.raises(UnpredictableError, match="shift-2"):
            tosa_run("RESCALE", [x], attrs, backend=backend)
    x48 = np.array([(1 << 47) - 1], dtype=np.int64)
    attrs16 = dict(input_zp=0, output_zp=0, multiplier=np.array([(1 << 15) - 1], dtype=np.int32),
                   shift=np.array([14], dtype=np.int32), scale32=False, double_round=False,
                   per_channel=False, out_t="int32")
    for backend in ("reference", "kernels"):
        with pytest.raises(UnpredictableError, match="maximum<int32_t>"):
            tosa_run("RESCALE", [x48], attrs16, backend=backend)


def test_table_int8(rng):
    table = ints(rng, (256,), np.int8)
    x = np.arange(-128, 128, dtype=np.int8).reshape(4, 64)
    out = check_all_paths("TABLE", [x], dict(table=table))[0]
    assert out.reshape(-1).tolist() == table.tolist()


def test_table_int16_interpolation_extremes(rng):
    table = ints(rng, (513,), np.int16, -16000, 16000)
    x = np.array([-32768, -32767, -32641, -32640, -1, 0, 1, 127, 128, 32639, 32640, 32766, 32767],
                 dtype=np.int16)
    out = check_all_paths("TABLE", [x], dict(table=table))[0]
    # hand check at the ends: x=-32768 -> index 0, fraction 0: table[0] << 7
    assert int(out[0]) == int(table[0]) * 128
    # x=32767 -> index 511, fraction 127: (table[511] << 7) + (table[512] - table[511]) * 127
    assert int(out[-1]) == int(table[511]) * 128 + (int(table[512]) - int(table[511])) * 127
    check_all_paths("TABLE", [ints(rng, (3, 50), np.int16)], dict(table=table))


def test_table_int16_slope_require():
    table = np.zeros(513, dtype=np.int16)
    table[10] = -32768
    table[11] = 32767            # slope 65535 leaves int16
    x = np.array([10 * 128 - 32768], dtype=np.int16)
    for backend in ("reference", "kernels"):
        with pytest.raises(UnpredictableError, match="slope"):
            tosa_run("TABLE", [x], dict(table=table), backend=backend)
    # an index away from the bad slope is fine
    check_all_paths("TABLE", [np.array([0], dtype=np.int16)], dict(table=table))


def test_table_wrong_length_is_unpredictable():
    with pytest.raises(UnpredictableError, match="TABLE_SIZE"):
        tosa_run("TABLE", [np.zeros(4, dtype=np.int8)], dict(table=np.zeros(255, dtype=np.int8)))


@pytest.mark.parametrize("dtype", [np.int8, np.int16])
def test_clamp(rng, dtype):
    info = np.iinfo(dtype)
    x = ints(rng, (3, 7, 33), dtype)
    for lo, hi in ((info.min, info.max), (-5, 9), (0, 0), (info.min, info.min)):
        out = check_all_paths("CLAMP", [x], dict(min_val=lo, max_val=hi))[0]
        assert out.min() >= lo and out.max() <= hi


@pytest.mark.parametrize("dtype", [np.int8, np.int16])
def test_clamp_covering_the_type_is_a_read_only_view_of_the_input(dtype):
    """Bounds equal to the type's range change no value: the kernel hands back the input's
    values as a read-only view (no pass, no buffer); the reference's values are the same."""
    info = np.iinfo(dtype)
    x = np.arange(-300, 300).astype(np.int64).clip(info.min, info.max).astype(dtype).reshape(20, 30)
    x[0, :2] = info.min, info.max
    attrs = dict(min_val=int(info.min), max_val=int(info.max))
    out = KERNELS["CLAMP"]([x], attrs)[0]
    assert np.shares_memory(out, x) and not out.flags.writeable
    assert np.array_equal(out, tosa_run("CLAMP", [x], attrs)[0])
    assert np.array_equal(check_all_paths("CLAMP", [x], attrs)[0], x)
    narrower = KERNELS["CLAMP"]([x], dict(min_val=int(info.min) + 1, max_val=int(info.max)))[0]
    assert not np.shares_memory(narrower, x) and narrower.min() == info.min + 1
