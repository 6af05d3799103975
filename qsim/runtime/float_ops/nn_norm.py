"""`nn` activations, normalizations, softmax and LSTM (NNEF 2.0 4.4.3-4.4.6) as numpy."""
from __future__ import annotations

import math

import numpy as np

from ...numerics import ceil_div
from .base import fail, norm_axes, norm_axis, pack, register
from ...kernels.extensions import extension
from ...threads import split_count
from .bounds import bounded
from .math import erf
from .nn_pool import avg_pool_array

_float_ops = extension("_float_ops")   # raises KernelsUnavailableError when missing or broken


# ---- 4.4.3 activations ----------------------------------------------------------------------

@register("nn.relu")
def relu(ins, at):
    x = np.asarray(ins[0])
    alpha, mx = at.get("alpha"), at.get("max")
    if alpha is not None and not 0.0 <= alpha <= 1.0:
        fail("nn.relu", f"'alpha' must be between 0 and 1 (inclusive); got {alpha}")
    if mx is not None and mx <= 0.0:
        fail("nn.relu", f"'max' must be positive; got {mx}")
    if alpha is None:           # max(x, 0) and min(., max): numpy's values, one pass
        return [bounded(x, x.dtype.type(0), None if mx is None else x.dtype.type(mx))]
    lo = x * x.dtype.type(alpha)
    if mx is None:
        return [np.maximum(x, lo)]
    t = np.minimum(x, x.dtype.type(mx))
    return [np.maximum(t, lo, out=t)]                 # t is ours: no second fresh array


@register("nn.prelu")
def prelu(ins, at):
    x, alpha = np.asarray(ins[0]), np.asarray(ins[1])
    axis = norm_axis(at.get("axis", 1), x.ndim, "nn.prelu")
    a = alpha.reshape([-1 if d == axis else 1 for d in range(x.ndim)])
    return [np.where(x < 0, a * x, x)]


def _act(name, fn):
    register("nn." + name)(lambda ins, at: [fn(np.asarray(ins[0]), at)])


def _t(x, v):
    return x.dtype.type(v)


_act("thresholded_relu", lambda x, at: np.where(x > _t(x, at.get("theta", 0.0)), x, _t(x, 0)))
_act("elu", lambda x, at: np.where(x < 0, _t(x, at.get("alpha", 1.0)) * np.expm1(x), x))
_act("selu", lambda x, at: _t(x, at.get("lambda", 1.05070102)) *
     np.where(x < 0, _t(x, at.get("alpha", 1.67326319)) * np.expm1(x), x))
_act("silu", lambda x, at: x / (1 + np.exp(-x)))
_act("sigmoid", lambda x, at: 1 / (1 + np.exp(-x)))
_act("softplus", lambda x, at: np.logaddexp(x, _t(x, 0)))
_act("erf", lambda x, at: erf(x))


@register("nn.gelu")
def gelu(ins, at):
    x = np.asarray(ins[0])
    mode = at.get("approximate")
    if mode == "TANH":
        return [0.5 * x * (1 + np.tanh(_t(x, np.sqrt(2 / np.pi)) * (x + _t(x, 0.044715) * x ** 3)))]
    if mode == "SIGMOID":
        return [x / (1 + np.exp(_t(x, -1.702) * x))]
    if mode is not None:
        fail("nn.gelu", f"'approximate' must be one of ['TANH', 'SIGMOID']; got {mode!r}")
    return [0.5 * x * (1 + erf(x / _t(x, np.sqrt(2.0))))]


# ---- 4.4.4 normalization --------------------------------------------------------------------

def _along(v, axis, rank):
    return v.reshape([-1 if d == axis else 1 for d in range(rank)])


@register("nn.batch_norm")
def batch_norm(ins, at):
    x, mean, var = (np.asarray(v) for v in ins[:3])
    bias = ins[3] if len(ins) > 3 else None
    scale = ins[4] if len(ins) > 4 else None
    axis = norm_axis(at.get("channel_axis", 1), x.ndim, "nn.batch_norm")
    eps = at.get("epsilon", 1e-5)
    if x.shape[axis] != mean.shape[0]:
        fail("nn.batch_norm", f"input shape {list(x.shape)} at channel axis {axis} must match "
             f"size of mean and variance ({mean.shape[0]})")
    denom = np.sqrt(var + _t(var, eps))
    if _affine_in_one_pass(x, mean, denom, scale, bias):
        return [_channel_affine(x, axis, mean, denom, scale, bias)]
    y = x - _along(mean, axis, x.ndim)           # a new array: the steps below may reuse it
    y = _into(np.divide, y, _along(denom, axis, x.ndim))
    if scale is not None:
        y = _into(np.multiply, y, _along(scale, axis, x.ndim))
    if bias is not None:
        y = _into(np.add, y, _along(bias, axis, x.ndim))
    return [y]


def _affine_in_one_pass(x, mean, denom, scale, bias) -> bool:
    """Whether batch_norm's four float32 passes may run as one compiled pass: every operand
    float32 (so numpy computes each step in float32 too) and each channel vector 1-D of the
    channel count (numpy would broadcast anything else differently, or fail)."""
    vectors = [mean, denom] + [np.asarray(v) for v in (scale, bias) if v is not None]
    return x.dtype == np.float32 and x.size > 0 and all(
        v.dtype == np.float32 and v.ndim == 1 and v.shape[0] == mean.shape[0] for v in vectors)


def _channel_affine(x, axis, mean, denom, scale, bias):
    """(x - mean) / denom * scale + bias along `axis`, numpy's float32 results bit for bit
    (kernels/float_ops.pyx channel_affine_f32: the same four roundings in the same order)."""
    channels = x.shape[axis]
    outer = math.prod(x.shape[:axis])
    x3 = np.ascontiguousarray(x).reshape(outer, channels, -1)
    out = np.empty(x.shape, np.float32)
    flat = lambda v: None if v is None else np.ascontiguousarray(v, np.float32)
    _float_ops.channel_affine_f32(x3, out.reshape(x3.shape), flat(mean), flat(denom), flat(scale), flat(bias),
                                  split_count(x3.shape[0] * channels, min_rows=max(1, (1 << 16) // max(1, x3.shape[2]))))
    return out


def _into(ufunc, y, v):
    """ufunc(y, v), written over y (an intermediate of the caller) when that keeps y's shape and
    dtype: the same values as the new array numpy would return, without a pass over fresh memory."""
    if np.result_type(y, v) == y.dtype and np.broadcast_shapes(y.shape, np.shape(v)) == y.shape:
        return ufunc(y, v, out=y)
    return ufunc(y, v)


@register("nn.mean_variance_norm")
def mean_variance_norm(ins, at):
    x = np.asarray(ins[0])
    bias = ins[1] if len(ins) > 1 else None
    scale = ins[2] if len(ins) > 2 else None
    axes = at.get("axes")
    axes = tuple(range(2, x.ndim)) if axes is None else norm_axes(axes, x.ndim, "nn.mean_variance_norm")
    mean = x.mean(axis=axes, keepdims=True, dtype=x.dtype)
    var = np.square(x - mean).mean(axis=axes, keepdims=True, dtype=x.dtype)
    y = (x - mean) / np.sqrt(var + _t(x, at.get("epsilon", 1e-5)))
    if scale is not None:
        y = y * _along(scale, 1, x.ndim)
    if bias is not None:
        y = y + _along(bias, 1, x.ndim)
    return [y]


@register("nn.local_response_norm")
def local_response_norm(ins, at):
    x = np.asarray(ins[0])
    axes = norm_axes(at.get("axes", [1]), x.ndim, "nn.local_response_norm")
    size = pack(at["size"], len(axes), "nn.local_response_norm", "size")
    padding = [(s - 1) // 2 for s in size] + [ceil_div(s - 1, 2) for s in size]
    mean = avg_pool_array("nn.local_response_norm", x * x,
                          {"axes": axes, "size": size, "padding": padding, "ignore_border": False})
    return [x / np.power(_t(x, at.get("bias", 1.0)) + _t(x, at.get("alpha", 1.0)) * mean,
                         _t(x, at.get("beta", 0.5)))]


def _lp_norm(name, reduce):
    def impl(ins, at):
        x = np.asarray(ins[0])
        axes = norm_axes(at["axes"], x.ndim, "nn." + name)
        s = reduce(x, axes)
        if at.get("bias") is not None:
            s = s + _t(x, at["bias"])
        if at.get("epsilon") is not None:
            s = np.maximum(s, _t(x, at["epsilon"]))
        return [x / s]
    return impl


register("nn.l1_norm")(_lp_norm("l1_norm", lambda x, a: np.abs(x).sum(axis=a, keepdims=True, dtype=x.dtype)))
register("nn.l2_norm")(_lp_norm("l2_norm", lambda x, a: np.sqrt((x * x).sum(axis=a, keepdims=True, dtype=x.dtype))))


@register("nn.softmax")
def softmax(ins, at):
    x = np.asarray(ins[0])
    axes = norm_axes(at.get("axes", [1]), x.ndim, "nn.softmax")
    e = np.exp(x - x.max(axis=axes, keepdims=True))
    return [e / e.sum(axis=axes, keepdims=True, dtype=x.dtype)]


# ---- 4.4.5 recurrent ------------------------------------------------------------------------

def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def lstm_step_arrays(h0, c0, x, W, R, B):
    s = x @ W.T + B + h0 @ R.T
    i, f, g, o = np.split(s, 4, axis=1)
    c1 = _sigmoid(f) * c0 + _sigmoid(i) * np.tanh(g)
    return _sigmoid(o) * np.tanh(c1), c1


@register("nn.lstm_step")
def lstm_step(ins, at):
    return list(lstm_step_arrays(*ins[:6]))


def _run_lstm(X, W, R, B, h, c, steps):
    ys = []
    for t in range(steps):
        h, c = lstm_step_arrays(h, c, X[t], W, R, B)
        ys.append(h)
    Y = np.stack(ys) if ys else np.zeros((0,) + h.shape, h.dtype)
    return Y, h, c


@register("nn.lstm_loop")
def lstm_loop(ins, at):
    X, W, R, B, h0, c0 = ins[:6]
    steps = ins[6] if len(ins) > 6 else None
    n = X.shape[0] if steps is None else int(np.asarray(steps).reshape(()))
    if not 0 <= n <= X.shape[0]:
        fail("nn.lstm_loop", f"'steps'={n} must be between 0 and the sequence length {X.shape[0]}")
    return list(_run_lstm(X, W, R, B, h0, c0, n))


@register("nn.lstm")
def lstm(ins, at):
    X, W, R, B = ins[:4]
    nh = R.shape[1]
    h0 = ins[4] if len(ins) > 4 and ins[4] is not None else np.zeros((X.shape[1], nh), X.dtype)
    c0 = ins[5] if len(ins) > 5 and ins[5] is not None else np.zeros((X.shape[1], nh), X.dtype)
    steps = ins[6] if len(ins) > 6 else None
    if steps is None:
        return list(_run_lstm(X, W, R, B, np.broadcast_to(h0, (X.shape[1], nh)),
                              np.broadcast_to(c0, (X.shape[1], nh)), X.shape[0]))
    # jagged: each batch item runs its own count; Y rows past an item's count stay 0 and
    # Y has max(steps) rows (the dynamic extent ~|s)
    steps = np.asarray(steps).reshape(-1)
    T = int(steps.max(initial=0))
    Y = np.zeros((T, X.shape[1], nh), X.dtype)
    hN = np.zeros((X.shape[1], nh), X.dtype)
    cN = np.zeros_like(hN)
    for bi in range(X.shape[1]):
        y, h, c = _run_lstm(X[:, bi:bi + 1], W, R, B, np.broadcast_to(h0, hN.shape)[bi:bi + 1],
                            np.broadcast_to(c0, hN.shape)[bi:bi + 1], int(steps[bi]))
        Y[:len(y), bi] = y[:, 0]
        hN[bi], cN[bi] = h[0], c[0]
    return [Y, hN, cN]


@register("nn._jagged_lstm_loops")
def jagged_lstm_loops(ins, at):
    if len(ins) < 7 or ins[6] is None:
        fail("nn._jagged_lstm_loops", "input 'steps' is required")
    return lstm(ins, at)
