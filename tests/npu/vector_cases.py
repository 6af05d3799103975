"""Vector-unit operator cases shared by the cycle-model tests (tests/npu/test_vector_ops.py) and
the RTL tests (tests/hw/test_vector_npu.py): (name, op, inputs, attrs), each small enough for
the Amaranth simulator. Expected values always come from qsim.tosa's reference run."""
import numpy as np

from qsim.tosa import run

I8, I16, I32 = np.int8, np.int16, np.int32


def reference(op, inputs, attrs):
    return run(op, inputs, attrs, backend="reference")[0]


def _rescale(multiplier, shift, **kw):
    attrs = dict(input_zp=0, output_zp=0, scale32=True, double_round=False, per_channel=False, out_t="int8")
    attrs.update(kw)
    dtype = np.int32 if attrs["scale32"] else np.int16
    attrs.update(multiplier=np.asarray(multiplier, dtype), shift=np.asarray(shift, np.int8))
    return attrs


def _resize(in_hw, stride, offset, border, shift, mode):
    """RESIZE attributes with the output size the spec derives (2.12.1)."""
    size = [int(np.trunc(((n - 1) * (1 << shift) - o) / s)) + 1 + b
            for n, s, o, b in zip(in_hw, stride, offset, border)]
    return {"output_size": size, "stride": list(stride), "offset": list(offset), "border": list(border),
            "shift": shift, "mode": mode}


def cases(seed: int = 0) -> list:
    rng = np.random.default_rng(seed)

    def ints(dtype, *shape, lo=None, hi=None):
        info = np.iinfo(dtype)
        x = rng.integers(info.min if lo is None else lo, (info.max if hi is None else hi) + 1, shape)
        return x.astype(dtype)

    rail8 = np.array([[-128, 127, 0, -1, 1, -128, 127]], I8)          # both rails of int8
    ties = np.array([[-6, -2, 2, 6, 10, -10, 0x7FFF, -0x8000]], I32)   # x * 2^30 >> 32: halves
    out = [
        ("add broadcast", "ADD", [ints(I32, 2, 3, 5, lo=-10**6, hi=10**6), ints(I32, 1, 1, 5, lo=-10**6, hi=10**6)], {}),
        ("sub broadcast inner", "SUB", [ints(I32, 2, 3, 5, lo=-10**6, hi=10**6), ints(I32, 2, 3, 1, lo=-10**6, hi=10**6)], {}),
        ("mul int32 shift", "MUL", [ints(I32, 2, 6, lo=-10**5, hi=10**5), ints(I32, 2, 6, lo=-10**5, hi=10**5)], {"shift": 10}),
        ("mul int8 rails", "MUL", [rail8, rail8[:, ::-1].copy()], {"shift": 0}),
        ("mul int32 shift 63", "MUL", [np.array([[-2**31, 2**31 - 1, 3]], I32), np.array([[-2**31, 2**31 - 1, 5]], I32)], {"shift": 63}),
        ("maximum", "MAXIMUM", [ints(I32, 2, 5), ints(I32, 2, 5)], {}),
        ("minimum scalar", "MINIMUM", [ints(I32, 3, 5), ints(I32, 1, 1)], {}),
        ("clamp", "CLAMP", [ints(I8, 3, 5)], {"min_val": -5, "max_val": 40}),
        ("clamp rails", "CLAMP", [rail8], {"min_val": -128, "max_val": 127}),
        ("rescale per-channel dr", "RESCALE", [ints(I32, 2, 2, 6, lo=-10**4, hi=10**4)],
         _rescale([1 << 30, 3 << 28, 1234567, 1 << 29, 5, 7 << 27], [20, 21, 22, 23, 16, 40],
                  output_zp=3, double_round=True, per_channel=True)),
        ("rescale zp extremes", "RESCALE", [rail8], _rescale([1 << 30], [31], input_zp=-128, output_zp=127)),
        ("rescale zp 127 to int32", "RESCALE", [rail8], _rescale([(1 << 31) - 1], [30], input_zp=127, out_t="int32")),
        ("rescale ties single", "RESCALE", [ties], _rescale([1 << 30], [32], out_t="int32")),
        ("rescale ties double", "RESCALE", [ties], _rescale([1 << 30], [32], out_t="int32", double_round=True)),
        ("rescale shift 62", "RESCALE", [np.array([[2**31 - 1, -2**31, 0, 1]], I32)],
         _rescale([(1 << 31) - 1], [62], out_t="int32")),
        ("rescale shift 2", "RESCALE", [np.array([[-1, 0, -1, 0, 0]], I32)],
         _rescale([(1 << 31) - 1], [2], out_t="int32")),
        ("rescale scale16", "RESCALE", [ints(I8, 9)], _rescale([12345], [16], scale32=False, input_zp=5, out_t="int16")),
        ("rescale int16 to int8", "RESCALE", [ints(I16, 3, 5)], _rescale([1 << 14], [16], scale32=False)),
        ("cast narrowing", "CAST", [ints(I32, 2, 5)], {"out_t": "int8"}),
        ("cast widening", "CAST", [rail8], {"out_t": "int32"}),
        ("table int8", "TABLE", [ints(I8, 3, 5)], {"table": ints(I8, 256)}),
        ("table int16", "TABLE", [np.concatenate([ints(I16, 2, 5), np.array([[-32768, 32767, 0, -1, 127]], I16)])],
         {"table": ints(I16, 513, lo=-2000, hi=2000)}),
        ("max pool padded", "MAX_POOL2D", [ints(I8, 1, 5, 5, 6)], {"kernel": [3, 3], "stride": [2, 2], "pad": [1, 1, 1, 1]}),
        ("max pool int16", "MAX_POOL2D", [ints(I16, 1, 4, 4, 3)], {"kernel": [2, 2], "stride": [2, 2], "pad": [0, 0, 0, 0]}),
        ("avg pool zp", "AVG_POOL2D", [ints(I8, 2, 4, 4, 5)],
         {"kernel": [2, 2], "stride": [2, 2], "pad": [0, 0, 0, 0], "input_zp": -3, "output_zp": 4}),
        ("avg pool zp extremes", "AVG_POOL2D", [ints(I8, 1, 3, 3, 5)],
         {"kernel": [3, 3], "stride": [1, 1], "pad": [0, 0, 0, 0], "input_zp": -128, "output_zp": 127}),
        ("reduce sum", "REDUCE_SUM", [ints(I32, 2, 3, 5, lo=-10**6, hi=10**6)], {"axis": 1}),
        ("reduce max last axis", "REDUCE_MAX", [ints(I32, 2, 3, 5)], {"axis": 2}),
        ("reduce min first axis", "REDUCE_MIN", [ints(I32, 4, 3)], {"axis": 0}),
        # booleans: a row of all true and one of all false, so both results occur
        ("reduce all", "REDUCE_ALL", [np.array([[1, 1, 1, 1, 1], [1, 0, 1, 1, 1], [0, 0, 0, 0, 0]], bool)], {"axis": 1}),
        ("reduce any first axis", "REDUCE_ANY", [np.array([[0, 1, 0], [0, 0, 0], [0, 1, 1]], bool)], {"axis": 0}),
        ("argmax ties", "ARGMAX", [np.array([[3, 7, 7, -1, 7], [-128, -128, -128, -128, -128]], I8)], {"axis": 1}),
        ("transpose", "TRANSPOSE", [ints(I8, 2, 3, 5)], {"perms": [2, 0, 1]}),
        ("slice", "SLICE", [ints(I8, 4, 6)], {"start": [1, 2], "size": [2, 3]}),
        ("concat", "CONCAT", [ints(I8, 2, 3), ints(I8, 2, 2)], {"axis": 1}),
        ("pad", "PAD", [ints(I8, 2, 3)], {"padding": [(1, 0), (2, 1)], "pad_const": -7}),
        ("reverse", "REVERSE", [ints(I8, 2, 5)], {"axis": 1}),
        ("tile", "TILE", [ints(I8, 2, 3)], {"multiples": [2, 3]}),
        ("tile int16 batch", "TILE", [ints(I16, 1, 2, 3, 4)], {"multiples": [3, 1, 1, 1]}),
        # runs of consecutive indices (0, 1, 2) become one copy; repeats and reversals their own
        ("gather constant indices", "GATHER", [ints(I8, 2, 5, 3), np.array([[4, 0, 1, 2, 4], [3, 3, 2, 1, 0]], I32)], {}),
    ]
    shifts8 = np.array([[0, 7, 1, 3, 7, 0, 6]], I8)
    rail32 = np.array([[-2**31, 2**31 - 1, -1, 1, 0, 5, -6]], I32)
    shifts32 = np.array([[31, 31, 0, 31, 5, 0, 1]], I32)
    cond = rng.integers(0, 2, (1, 3, 1)).astype(bool)
    out += [
        ("asr round int8 rails", "ARITHMETIC_RIGHT_SHIFT", [rail8, shifts8], {"round": True}),
        ("asr int32 shifts 0 31", "ARITHMETIC_RIGHT_SHIFT", [rail32, shifts32], {"round": False}),
        ("asr round int16 broadcast", "ARITHMETIC_RIGHT_SHIFT", [ints(I16, 2, 5), ints(I16, 1, 5, lo=0, hi=15)],
         {"round": True}),
        ("lsl int16", "LOGICAL_LEFT_SHIFT", [ints(I16, 2, 5), ints(I16, 2, 5, lo=0, hi=31)], {}),
        ("lsl int32 shift 31", "LOGICAL_LEFT_SHIFT", [rail32, shifts32], {}),
        ("lsr int8 rails", "LOGICAL_RIGHT_SHIFT", [rail8, shifts8], {}),
        ("lsr int32", "LOGICAL_RIGHT_SHIFT", [rail32, shifts32], {}),
        ("clz", "CLZ", [np.concatenate([rail32, ints(I32, 1, 7)])], {}),
        ("intdiv", "INTDIV", [np.concatenate([rail32, ints(I32, 2, 7)]),
                              np.concatenate([np.array([[1, -1, 1, -1, 3, 2, -4]], I32),
                                              ints(I32, 2, 7, lo=1, hi=1000) * np.int32(-1) ** ints(I32, 2, 7, lo=0, hi=1)])],
         {}),
        ("greater broadcast", "GREATER", [rail32.reshape(7, 1), rail32], {}),
        ("greater equal", "GREATER_EQUAL", [rail32, rail32[:, ::-1].copy()], {}),
        ("equal", "EQUAL", [rail32, np.array([[-2**31, 0, -1, 0, 0, 0, -6]], I32)], {}),
        ("select int8 broadcast", "SELECT", [cond, ints(I8, 2, 3, 4), ints(I8, 2, 1, 4)], {}),
        ("select int32 rails", "SELECT", [np.array([[True, False, True, False, True, False, True]]), rail32,
                                          rail32[:, ::-1].copy()], {}),
        ("logical and", "LOGICAL_AND", [cond.reshape(1, 3), np.array([[True, False, True]])], {}),
        ("logical or xor", "LOGICAL_XOR", [cond.reshape(3, 1), np.array([[True, False, True]])], {}),
        ("logical not", "LOGICAL_NOT", [cond], {}),
        ("bitwise and", "BITWISE_AND", [ints(I16, 2, 5), ints(I16, 2, 5)], {}),
        ("bitwise or xor", "BITWISE_XOR", [rail8, rail8[:, ::-1].copy()], {}),
        ("bitwise not", "BITWISE_NOT", [ints(I32, 2, 5)], {}),
        ("negate int8 zp extremes", "NEGATE", [rail8], {"input1_zp": -128, "output_zp": 127}),
        ("negate int32", "NEGATE", [np.array([[-2**31 + 1, 2**31 - 1, -1, 0]], I32)], {"input1_zp": 0, "output_zp": 0}),
        ("avg pool padded zp extremes", "AVG_POOL2D", [ints(I8, 1, 5, 5, 6)],
         {"kernel": [3, 3], "stride": [2, 2], "pad": [1, 1, 1, 1], "input_zp": -128, "output_zp": 127}),
        ("avg pool padded asymmetric int16", "AVG_POOL2D", [ints(I16, 2, 4, 5, 3)],
         {"kernel": [2, 3], "stride": [1, 2], "pad": [1, 0, 2, 0], "input_zp": 0, "output_zp": 0}),
        ("avg pool beyond the reciprocal rom", "AVG_POOL2D", [ints(I8, 1, 33, 33, 3)],
         {"kernel": [33, 33], "stride": [1, 1], "pad": [0, 0, 1, 0], "input_zp": -128, "output_zp": 127}),
        ("resize nearest x2", "RESIZE", [ints(I8, 1, 3, 4, 5)], _resize((3, 4), (1, 1), (0, 0), (1, 1), 1, "NEAREST")),
        ("resize bilinear half pixel x2", "RESIZE", [np.concatenate([rail8.reshape(1, 1, 7, 1).repeat(3, 3),
                                                                      ints(I8, 1, 2, 7, 3)], axis=1)],
         _resize((3, 7), (2, 2), (-1, -1), (1, 1), 2, "BILINEAR")),
        ("resize bilinear odd scale", "RESIZE", [ints(I8, 2, 4, 5, 3)],
         _resize((4, 5), (1365, 1500), (100, -300), (0, 1), 11, "BILINEAR")),
        ("resize nearest int16 down", "RESIZE", [ints(I16, 1, 7, 6, 2)],
         _resize((7, 6), (5, 3), (1, 0), (0, 0), 1, "NEAREST")),
        ("abs int32", "ABS", [np.array([[-2**31 + 1, 2**31 - 1, -1, 0, 7]], I32)], {}),
    ]
    return out
