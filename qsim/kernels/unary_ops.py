"""RESCALE, TABLE and CLAMP (one output element per input element) on the C kernels (qunary.h).

Inputs are validated by qsim.tosa before they get here. REQUIRE conditions the kernels can meet
(apply_scale range, table slope) come back as a flag and are raised here with the spec's
condition text.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..errors import UnpredictableError
from .cache import PerAttrs
from .cpu_features import current_isa
from .extensions import extension
from ..threads import split_count, split_rows

_tosa_ops = extension("_tosa_ops")   # raises KernelsUnavailableError when missing or broken

# elements per thread at least (RESCALE, CLAMP; window_ops' depthwise outputs): a smaller part
# costs more to hand to a thread than it saves. Each element is computed alone, so any split
# gives the same integers.
MIN_PART_ELEMENTS = 1 << 15

TYPE_RANGE = {np.dtype(t): (int(np.iinfo(t).min), int(np.iinfo(t).max))
              for t in (np.int8, np.uint8, np.int16, np.uint16, np.int32)}


def unpredictable(op: str, condition: str, tensor: str) -> UnpredictableError:
    """The error of a failed TOSA REQUIRE (the result would be unpredictable)."""
    return UnpredictableError(f"{op}: REQUIRE({condition}) fails for tensor '{tensor}'",
                              hint="the result is unpredictable (TOSA 3.1); rescale the "
                                   "operands or change the attributes so it holds")


def _out_dtype(out_t) -> np.dtype:
    return np.dtype(np.int64) if out_t in ("int48", "i48") else np.dtype(out_t)


@lru_cache(maxsize=256)
def _rescale_params(mult_bytes: bytes, shift_bytes: bytes, double_round: bool, block: int):
    """Per-channel kernel parameters (mult, shift, round, dround as int64 arrays) from the
    attributes' bytes (int64), each repeated `block` times (per-tensor: block > 1); or the
    violated REQUIRE as a string. Keyed by value: ops with equal scales share the arrays (the
    per-op plans, _requants and _rescales, are what saves the per-call work)."""
    mult = np.frombuffer(mult_bytes, dtype=np.int64)
    shift = np.frombuffer(shift_bytes, dtype=np.int64)
    if np.any(mult < 0):
        return "multiplier >= 0", "multiplier"
    if np.any((shift < 2) | (shift > 62)):
        return "2 <= shift && shift <= 62", "shift"
    if block > 1:
        mult, shift = np.repeat(mult[:1], block), np.repeat(shift[:1], block)
    rnd = np.left_shift(np.int64(1), shift - 1)
    dround = np.where(double_round & (shift > 31), np.int64(1) << 30, np.int64(0))
    arrays = tuple(np.ascontiguousarray(a, dtype=np.int64) for a in (mult, shift, rnd, dround))
    for a in arrays:
        a.flags.writeable = False
    return arrays


def _params_of(attrs, block: int):
    """_rescale_params of RESCALE attributes `attrs`."""
    return _rescale_params(np.asarray(attrs["multiplier"], dtype=np.int64).reshape(-1).tobytes(),
                           np.asarray(attrs["shift"], dtype=np.int64).reshape(-1).tobytes(),
                           bool(attrs["double_round"]), block)


def requant_args(attrs, clamp, channels: int):
    """(output dtype, requant) for a kernel to apply RESCALE `attrs` and then, when `clamp` is
    (min_val, max_val), a CLAMP to its int32 accumulators of `channels` channels (the last
    axis): requant = (mult, shift, rnd, dround, scale32, input_zp, output_zp, lo, hi) as
    tosa_ops.gemm and depthwise take it, one parameter per channel. None when the fused
    kernels do not compute the pair (the caller runs the ops apart): int48 output, a violated
    REQUIRE on the attributes (the RESCALE kernel raises it), CLAMP bounds outside the
    RESCALE's range.
    The CLAMP folds into the RESCALE's final clip: clipping to [lo, hi], then to [a, b], is
    clipping to [max(lo, a), min(hi, b)] when that interval is not empty."""
    return _requants.get(attrs, (clamp, channels), lambda: _requant_args(attrs, clamp, channels))


# per RESCALE attribute mapping (and clamp, channels / input shape): what requant_args and
# rescale work out from the attributes alone, once per op instead of on every call (the
# parameter arrays, their REQUIRE checks, the dtypes; docs/runtime.md, per-call costs)
_requants = PerAttrs(1024)
_rescales = PerAttrs(1024)


def _requant_args(attrs, clamp, channels: int):
    out_dtype = _out_dtype(attrs["out_t"])
    if out_dtype not in TYPE_RANGE:
        return None
    per_channel = bool(attrs["per_channel"])
    if per_channel and np.size(attrs["multiplier"]) != channels:
        return None
    params = _params_of(attrs, 1 if per_channel else channels)
    if len(params) == 2:
        return None
    lo, hi = TYPE_RANGE[out_dtype]
    if clamp is not None:
        lo, hi = max(lo, int(clamp[0])), min(hi, int(clamp[1]))
        if lo > hi:
            return None
    return out_dtype, (*params, bool(attrs["scale32"]), int(attrs["input_zp"]), int(attrs["output_zp"]), lo, hi)


def _rescale_plan(attrs, shape: tuple):
    """(out_dtype, params, lo, hi, scale32, input_zp, output_zp) of RESCALE `attrs` on an input
    of `shape`; params is _rescale_params' (4 arrays, or the violated REQUIRE)."""
    out_dtype = _out_dtype(attrs["out_t"])
    block = 1
    if not bool(attrs["per_channel"]):
        # per-tensor: repeat the one scale over a block of trailing elements so the kernel's
        # inner loop is long enough to vectorize; the block divides the input's size.
        for d in reversed(shape):
            if block >= 64:
                break
            block *= d
        block = max(block, 1)
    lo, hi = TYPE_RANGE[out_dtype] if out_dtype != np.int64 else (-(1 << 31), (1 << 31) - 1)
    return (out_dtype, _params_of(attrs, block), lo, hi, bool(attrs["scale32"]), int(attrs["input_zp"]),
            int(attrs["output_zp"]))


def rescale(inputs, attrs):
    x, = inputs
    x = np.ascontiguousarray(x)
    out_dtype, params, lo, hi, scale32, izp, ozp = _rescales.get(attrs, x.shape, lambda: _rescale_plan(attrs, x.shape))
    if len(params) == 2:
        raise unpredictable("RESCALE", *params)
    mult, shift, rnd, dround = params
    y = np.empty(x.shape, dtype=out_dtype)
    C, isa = mult.size, current_isa().code
    # rows of C elements (whole channel groups) on the compiled pool's threads
    bad = x.size and _tosa_ops.rescale(isa, x.reshape(-1), C, izp, mult, shift, rnd, dround, scale32, ozp, lo, hi,
                                       y.reshape(-1), split_count(x.size // C, max(1, MIN_PART_ELEMENTS // C)))
    if bad:
        condition = ("value >= (-1<<(shift-2)) && value < (1<<(shift-2))" if scale32 else
                     "result >= minimum<int32_t> && result <= maximum<int32_t>")
        raise unpredictable("RESCALE", condition, "input")
    return [y]


def table(inputs, attrs):
    x, = inputs
    tab = np.ascontiguousarray(attrs["table"])
    size = 256 if x.dtype == np.int8 else 513
    if tab.shape != (size,):        # the kernels index the table unchecked
        raise unpredictable("TABLE", f"length(table) == TABLE_SIZE ({size})", "table")
    flat = np.ascontiguousarray(x).reshape(-1)
    if x.dtype == np.int8:
        y = np.empty(flat.shape, dtype=np.int8)
        if flat.size:
            _tosa_ops.table_i8(flat, tab.astype(np.int8, copy=False), y)
        return [y.reshape(x.shape)]
    y = np.empty(flat.shape, dtype=np.int32)
    if flat.size and _tosa_ops.table_i16(flat, tab.astype(np.int16, copy=False), y):
        raise unpredictable("TABLE", "slope >= minimum<int16_t> && slope <= maximum<int16_t>",
                             "table")
    return [y.reshape(x.shape)]


def clamp(inputs, attrs):
    x, = inputs
    x = np.ascontiguousarray(x)
    isa, lo, hi = current_isa().code, int(attrs["min_val"]), int(attrs["max_val"])
    bounds = TYPE_RANGE.get(x.dtype)
    if bounds is not None and lo <= bounds[0] and bounds[1] <= hi:
        # bounds covering the type (an int8 ReLU6 whose scale maps [0, 6] onto [-128, 127]:
        # every CLAMP of EfficientNet-Lite0) leave every value as it is: the input's values
        # without a pass or a new buffer, as a read-only view (no kernel writes into its
        # inputs, and a caller writing into it gets an error, not a changed input)
        y = x.view()
        y.flags.writeable = False
        return [y]
    y = np.empty_like(x)
    xf, yf = x.reshape(-1), y.reshape(-1)
    if x.size:
        split_rows(x.size, lambda a, b: _tosa_ops.clamp(isa, xf[a:b], lo, hi, yf[a:b]), min_rows=MIN_PART_ELEMENTS)
    return [y]
