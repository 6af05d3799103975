"""Elementwise operators (cvm-formalization, "Elemwise Operator") and relu.

Integer formulas (all exact in int64; inputs are at most 32-bit):
- cvm_right_shift: T = floor((floor(X / 2^(s-1)) + 1) / 2), i.e. round half up of
  X / 2^s (ties toward +inf, also for negatives: -3 >> 1 -> -1.5 -> -1); then clip
  to [-alpha, alpha] of the `precision` attribute. floor division is an arithmetic
  right shift.
- cvm_left_shift: T = X * 2^s, then the same clip. qsim requires input precision +
  shift_bit <= 32 (the CVM runtime's rule: X * 2^s must fit INT32 before the clip).
- cvm_precision: ceil(log2(|x| + 1)) for x != 0, 1 for x = 0. The formalization's
  text writes abs(x + 1), which is undefined at x = -1; the CVM source it transcribes
  defines precision(x) = precision(|x|) for x < 0 (docs/cvm.md).
- clip: a_min <= a_max required, both within +-(2^31 - 1).
"""
from __future__ import annotations

import numpy as np

from .opdef import REQUIRED, OpDef, define, same_precision
from .precision import alpha, magnitude_bits, required_precision

INT32_MAX = (1 << 31) - 1


def _same_shape(chk, shapes, attrs):
    return [shapes[0]]


def _pair_shape(chk, shapes, attrs):
    a, b = shapes
    chk.require(tuple(a) == tuple(b),
                f"{chk.tensor('A')} has shape {list(a)} but {chk.tensor('B')} has shape {list(b)}; "
                "elementwise operands must have the same shape",
                hint="use broadcast_add / broadcast_sub for operands of different shapes")
    return [a]


def _unary(name, ref, precision=same_precision, attrs=None, infer=_same_shape, doc=""):
    define(OpDef(name, ("X",), ("Y",), attrs or {}, infer, precision,
                 lambda inputs, a: [np.asarray(ref(inputs[0], a), dtype=np.int64)], doc=doc))


# ---- precision-preserving unary ops -------------------------------------------------
_unary("relu", lambda x, a: np.maximum(x, 0), doc="max(x, 0)")
_unary("abs", lambda x, a: np.abs(x), doc="|x| (symmetric ranges: precision unchanged)")
_unary("negative", lambda x, a: -x, doc="-x")


def _cvm_precision_rule(chk, precs, shapes, attrs):
    """Outputs are at most max(p - 1, 1) (an element of precision p has at most p - 1 bits)."""
    return [required_precision(max(precs[0] - 1, 1))]


_unary("cvm_precision", lambda x, a: magnitude_bits(x), precision=_cvm_precision_rule,
       doc="bits of |x|: ceil(log2(|x|+1)), 1 for 0")


# ---- clip ---------------------------------------------------------------------------
def _clip_infer(chk, shapes, attrs):
    lo = chk.int_attr(attrs, "a_min", -INT32_MAX, INT32_MAX + 1, bound_doc="INT32 without INT32_MIN")
    hi = chk.int_attr(attrs, "a_max", -INT32_MAX, INT32_MAX + 1, bound_doc="INT32 without INT32_MIN")
    chk.require(lo <= hi, f"attribute 'a_min' = {lo} is greater than 'a_max' = {hi}",
                hint="clip needs a_min <= a_max")
    return [shapes[0]]


def clip_values(x, lo, hi):
    """The formalization's three cases: >= a_max -> a_max, <= a_min -> a_min, else x."""
    return np.where(x >= hi, hi, np.where(x <= lo, lo, x))


def _clip_precision(chk, precs, shapes, attrs):
    """Exact bound: the largest |clip(x)| over x in [-alpha, alpha] of the input precision."""
    a = alpha(precs[0])
    lo, hi = attrs["a_min"], attrs["a_max"]
    ends = [min(max(v, lo), hi) for v in (-a, a)]
    return [required_precision(max(abs(e) for e in ends))]


_unary("clip", lambda x, a: clip_values(x, a["a_min"], a["a_max"]), precision=_clip_precision,
       attrs={"a_min": REQUIRED, "a_max": REQUIRED}, infer=_clip_infer, doc="clip to [a_min, a_max]")


# ---- precision-setting ops ------------------------------------------------------------
def _precision_attr_infer(with_shift):
    def infer(chk, shapes, attrs):
        chk.int_attr(attrs, "precision", 1, 33)
        if with_shift:
            chk.int_attr(attrs, "shift_bit", 1, 33)
        return [shapes[0]]
    return infer


def _attr_precision(chk, precs, shapes, attrs):
    return [attrs["precision"]]


def _left_shift_precision(chk, precs, shapes, attrs):
    s = attrs["shift_bit"]
    chk.require(precs[0] + s <= 32,
                f"{chk.tensor('X')} has precision {precs[0]} and shift_bit is {s}: X * 2^{s} needs "
                f"{precs[0] + s} bits, more than INT32 holds (input precision + shift_bit must be <= 32)",
                hint="clip or right-shift the input first, or shift by fewer bits")
    return [attrs["precision"]]


def cvm_clip_values(x, precision):
    a = alpha(precision)
    return clip_values(x, -a, a)


def right_shift_values(x, shift_bit, precision):
    t = ((x >> (shift_bit - 1)) + 1) >> 1
    return cvm_clip_values(t, precision)


def left_shift_values(x, shift_bit, precision):
    return cvm_clip_values(x << shift_bit, precision)


_unary("cvm_clip", lambda x, a: cvm_clip_values(x, a["precision"]), precision=_attr_precision,
       attrs={"precision": REQUIRED}, infer=_precision_attr_infer(False),
       doc="clip to [-alpha, alpha] of `precision`")
_unary("cvm_right_shift", lambda x, a: right_shift_values(x, a["shift_bit"], a["precision"]),
       precision=_attr_precision, attrs={"precision": REQUIRED, "shift_bit": REQUIRED},
       infer=_precision_attr_infer(True), doc="round-half-up shift right, then cvm_clip")
_unary("cvm_left_shift", lambda x, a: left_shift_values(x, a["shift_bit"], a["precision"]),
       precision=_left_shift_precision, attrs={"precision": REQUIRED, "shift_bit": REQUIRED},
       infer=_precision_attr_infer(True), doc="shift left, then cvm_clip")


# ---- binary same-shape ops ---------------------------------------------------------------
def _plus_one(chk, precs, shapes, attrs):
    return [max(precs[0], precs[1]) + 1]


define(OpDef("elemwise_add", ("A", "B"), ("Y",), {}, _pair_shape, _plus_one,
             lambda inputs, a: [inputs[0] + inputs[1]], doc="A + B, same shapes"))
define(OpDef("elemwise_sub", ("A", "B"), ("Y",), {}, _pair_shape, _plus_one,
             lambda inputs, a: [inputs[0] - inputs[1]], doc="A - B, same shapes"))
