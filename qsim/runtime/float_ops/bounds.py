"""relu, relu6 and clamp to constant bounds: y = minimum(maximum(x, lo), hi), numpy's values.

numpy makes two passes over memory (maximum into a new array, minimum over it); float32 goes
through one compiled pass instead (kernels/float_ops.pyx bounded_f32: the same comparisons,
a NaN stays NaN, two equal zeros give the bound, as numpy's maximum/minimum do; tested
against them bit for bit), split over qsim's threads. Other dtypes keep numpy's two passes.
"""
from __future__ import annotations

import numpy as np

from ...kernels.extensions import extension
from ...threads import split_count

_float_ops = extension("_float_ops")   # raises KernelsUnavailableError when missing or broken

# The attribute by which the executor's fusion (fusion.py) asks nn.conv for its output and the
# bounded output of the relu/clamp after it: (lo, hi), hi None for a plain relu. Not a name a
# model can spell (':' is no identifier character in SkriptND or NNEF).
THEN_BOUND = "qsim:then_bound"
# With THEN_BOUND: nobody reads the conv's own output (the executor keeps only some tensors and
# no other op reads it), so nn.conv computes only the bounded one, in its own output buffer
# (one write of the activations instead of two), and returns None in the conv output's place.
BOUND_ONLY = "qsim:bound_only"

MIN_PER_THREAD = 1 << 16   # elements: below this a thread hand-off costs more than it saves


def bounded(x: np.ndarray, lo, hi) -> np.ndarray:
    """minimum(maximum(x, lo), hi) (hi None: maximum only) for scalars lo, hi of x's dtype,
    into a new C-contiguous array."""
    if x.dtype != np.float32:
        y = np.maximum(x, lo)
        return y if hi is None else np.minimum(y, hi, out=y)
    x = np.ascontiguousarray(x)
    out = np.empty_like(x)
    flat_x, flat_out = x.reshape(-1), out.reshape(-1)
    has_hi = hi is not None
    lo_f, hi_f = float(lo), float(hi) if has_hi else 0.0
    _float_ops.bounded_f32(flat_x, flat_out, lo_f, hi_f, has_hi, 0, flat_x.size,
                           split_count(flat_x.size, min_rows=MIN_PER_THREAD))
    return out
