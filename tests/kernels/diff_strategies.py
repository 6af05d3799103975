"""hypothesis strategies shared by the differential tests (kernels vs reference).

Arrays come from a drawn style and seed (numpy fills them): drawing every element through
hypothesis would be slow, and the styles put the values where the kernels have edges (both
ends of the type, one end only, a narrow range around 0)."""
import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

RANGES = {"int4": (-7, 7), "int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767),
          "uint16": (0, 65535), "int32": (-(1 << 31), (1 << 31) - 1),
          "int48": (-(1 << 47), (1 << 47) - 1)}
STORAGE = {"int4": np.int8, "int8": np.int8, "uint8": np.uint8, "int16": np.int16,
           "uint16": np.uint16, "int32": np.int32, "int48": np.int64}
STYLES = ("uniform", "uniform", "extremes", "low", "high", "narrow")


def diff_settings(max_examples: int):
    """Seeded, no deadline (CI load varies), a few seconds per test."""
    return settings(derandomize=True, deadline=None, max_examples=max_examples, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def fill(style: str, seed: int, shape, type_name: str, lo: int | None = None, hi: int | None = None):
    """An array of `type_name` values in [lo, hi] (default: the type's range) in `style`."""
    tlo, thi = RANGES[type_name]
    lo = tlo if lo is None else lo
    hi = thi if hi is None else hi
    rng = np.random.default_rng(seed)
    if style == "extremes":
        v = np.where(rng.integers(0, 2, shape).astype(bool), hi, lo)
    elif style == "low":
        v = np.full(shape, lo)
    elif style == "high":
        v = np.full(shape, hi)
    elif style == "narrow":
        mid = min(max(0, lo), hi)
        v = rng.integers(max(lo, mid - 3), min(hi, mid + 3), shape, endpoint=True)
    else:
        v = rng.integers(lo, hi, shape, endpoint=True, dtype=np.int64)
    return np.asarray(v, dtype=np.int64).astype(STORAGE[type_name])


@st.composite
def arrays(draw, shape, type_name: str, lo: int | None = None, hi: int | None = None):
    return fill(draw(st.sampled_from(STYLES)), draw(st.integers(0, 2**32 - 1)), shape, type_name, lo, hi)


def zero_point(type_name: str):
    """A zero point the spec allows for `type_name` (ERROR_IF: only int8 has one in the
    convolutions and pools), both ends of the range more often than the rest."""
    if type_name != "int8":
        return st.just(0)
    return st.one_of(st.sampled_from((-128, 127, 0)), st.integers(-128, 127))


# (in_t, weight_t, out_t) of CONV2D, CONV3D, DEPTHWISE_CONV2D, TRANSPOSE_CONV2D, FULLY_CONNECTED
CONV_MODES = (("int8", "int8", "int32"), ("int8", "int4", "int32"), ("int16", "int8", "int48"))


@st.composite
def conv_operands(draw, x_shape, w_shape, bias_len):
    """(x, weight, bias, attrs) of a convolution-like operator in a drawn spec mode."""
    in_t, weight_t, out_t = draw(st.sampled_from(CONV_MODES))
    x = draw(arrays(x_shape, in_t))
    w = draw(arrays(w_shape, weight_t))
    wzp = draw(zero_point(weight_t))
    blo, bhi = RANGES[out_t]
    bias_span = draw(st.sampled_from((0, 1000, 1 << 20, bhi)))
    bias = draw(arrays((bias_len,), out_t, max(blo, -bias_span), min(bhi, bias_span)))
    attrs = dict(weight=w, bias=bias, input_zp=draw(zero_point(in_t)), weight_zp=wzp)
    if weight_t == "int4":
        attrs["weight_t"] = "int4"
    return x, attrs


def fit_padding(size: int, pad0: int, pad1: int, kernel: int, dilation: int, stride: int) -> int:
    """The smallest pad1' >= pad1 with (size - 1 + pad0 + pad1' - (kernel - 1) * dilation) a
    non-negative multiple of stride (the ERROR_IF on the output size)."""
    num = size - 1 + pad0 + pad1 - (kernel - 1) * dilation
    if num < 0:
        pad1 -= num
        num = 0
    return pad1 + (-num) % stride
