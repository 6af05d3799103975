"""Every standard operator: shape inference (binding its declaration), the @lower formulas
run by the interpreter against numpy formulas written here, and the fast numpy paths against
the @lower interpreter (or against the formulas here for composed and intrinsic operators)."""
import math
import re
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from qsim.runtime.float_ops import run_op
from qsim.skriptnd.lower.interpreter import run_lower
from qsim.skriptnd.lower.bind import bind
from qsim.skriptnd.parser import parse

from float_reference import naive_conv, naive_deconv, naive_pool

STDLIB = Path(__file__).resolve().parents[2] / "stdlib"
MODULES = ("layout", "math", "linalg", "nn", "image", "quant", "algo")


@lru_cache(None)
def module(name):
    return parse((STDLIB / f"{name}.sknd").read_text(), f"stdlib/{name}.sknd")


def definition(qualified):
    m, n = qualified.split(".")
    d = module(m).get(n)
    assert d is not None, qualified
    return d


R = np.random.default_rng(2024)


def u(*shape, lo=-1.0, hi=1.0):
    return R.uniform(lo, hi, shape)


def b(*shape):
    return R.uniform(0, 1, shape) > 0.5


erf = np.vectorize(math.erf)

# (operator, inputs, attributes, numpy formula(inputs) -> outputs, generics)
CASES = []


def case(op, inputs, attrs, formula, generics=None, id=None):
    CASES.append(pytest.param(op, inputs, attrs, formula, generics, id=id or op))


# -- math: unary ------------------------------------------------------------------------------
X = u(2, 3, lo=0.1, hi=0.9)
UNARY = {
    "iden": lambda x: x, "neg": lambda x: -x, "rcp": lambda x: 1 / x, "sqr": lambda x: x ** 2,
    "sqrt": np.sqrt, "rsqr": lambda x: x ** -2.0, "rsqrt": lambda x: x ** -0.5, "exp": np.exp,
    "log": np.log, "log2": np.log2, "sin": np.sin, "cos": np.cos, "tan": np.tan,
    "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh, "asin": np.arcsin, "acos": np.arccos,
    "atan": np.arctan, "asinh": np.arcsinh, "atanh": np.arctanh, "floor": np.floor,
    "ceil": np.ceil,
}
for _n, _f in UNARY.items():
    case(f"math.{_n}", [X], {}, lambda i, f=_f: [f(i[0])])
case("math.acosh", [X + 1], {}, lambda i: [np.arccosh(i[0])])
SIGNED = np.array([[-2.5, 0.0, 1.5], [0.5, -0.5, 3.0]])
case("math.abs", [SIGNED], {}, lambda i: [np.abs(i[0])])
case("math.sign", [SIGNED], {}, lambda i: [np.sign(i[0])])
case("math.round", [SIGNED], {}, lambda i: [np.array([[-2.0, 0, 2], [1, 0, 3]])])   # halves up
case("math.not", [b(2, 3)], {}, lambda i: [~i[0]])

# -- math: binary, select, n-ary, misc --------------------------------------------------------
A3, B2 = u(2, 3, 4, lo=0.5, hi=2), u(3, 4, lo=0.5, hi=2)
BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
          "mod": np.mod, "pow": np.power, "min": np.minimum, "max": np.maximum, "lt": np.less,
          "gt": np.greater, "le": np.less_equal, "ge": np.greater_equal, "eq": np.equal,
          "ne": np.not_equal}
for _n, _f in BINARY.items():
    case(f"math.{_n}", [A3, B2], {}, lambda i, f=_f: [f(i[0], i[1])])
case("math.add", [A3, u(2, 3)], {"rhs_align": 0}, lambda i: [i[0] + i[1][:, :, None]], id="math.add-rhs_align")
case("math.sub", [u(3), u(2, 3, 1)], {"lhs_align": -1}, lambda i: [i[0][:, None] - i[1]], id="math.sub-lhs_align")
case("math.eq", [np.array([1, 2, 3]), np.array([[1], [3]])], {}, lambda i: [i[0] == i[1]], id="math.eq-int")
for _n, _f in {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}.items():
    case(f"math.{_n}", [b(2, 3), b(3)], {}, lambda i, f=_f: [f(i[0], i[1])])
case("math.select", [b(2, 1), u(2, 3), u(3)], {}, lambda i: [np.where(*i)])
XS = [u(2, 3), u(2, 3), u(2, 3)]
for _n, _f in {"sum_n": np.sum, "prod_n": np.prod, "min_n": np.min, "max_n": np.max,
               "argmin_n": np.argmin, "argmax_n": np.argmax}.items():
    case(f"math.{_n}", [XS], {}, lambda i, f=_f: [f(np.stack(i[0]), axis=0)])
BS = [b(2, 3), b(2, 3)]
case("math.any_n", [BS], {}, lambda i: [np.any(i[0], axis=0)])
case("math.all_n", [BS], {}, lambda i: [np.all(i[0], axis=0)])
case("math.axpb", [u(3), u(2, 3), u(1)], {}, lambda i: [i[0] * i[1] + i[2]])
case("math.axpy", [u(3), u(2, 3), u(2, 1), u(2, 3)], {}, lambda i: [i[0] * i[1] + i[2] * i[3]])
case("math.clamp", [u(2, 3), np.array(-0.5), np.array([0.1, 0.2, 0.3])], {},
     lambda i: [np.minimum(np.maximum(i[0], i[1]), i[2])])

# -- math: reductions -------------------------------------------------------------------------
Y = u(2, 3, 4)
for _n, _f in {"min_reduce": np.min, "max_reduce": np.max, "sum_reduce": np.sum,
               "prod_reduce": np.prod, "mean_reduce": np.mean}.items():
    case(f"math.{_n}", [Y], {"axes": [0, 2]}, lambda i, f=_f: [f(i[0], axis=(0, 2), keepdims=True)])
    case(f"math.{_n}", [Y], {"axes": [-1], "squeeze": True}, lambda i, f=_f: [f(i[0], axis=-1)],
         id=f"math.{_n}-squeeze")
case("math.any_reduce", [b(2, 3)], {"axes": [1]}, lambda i: [i[0].any(1, keepdims=True)])
case("math.all_reduce", [b(2, 3)], {}, lambda i: [i[0].all(keepdims=True)])
case("math.lp_reduce", [Y], {"axes": [1], "p": 3.0},
     lambda i: [(np.abs(i[0]) ** 3).sum(1, keepdims=True) ** (1 / 3)])
case("math.argmin", [Y], {"axis": 1}, lambda i: [i[0].argmin(1)[:, None]])
case("math.argmax", [Y], {"axis": -1, "squeeze": True}, lambda i: [i[0].argmax(-1)])


def _argnd(x, f):
    flat = x.transpose(1, 0, 2).reshape(3, -1)
    k = f(flat, axis=1)
    return [np.stack([k // 4, k % 4], -1).reshape(1, 3, 1, 2)]


case("math.argmin_nd", [Y], {"axes": [0, 2]}, lambda i: _argnd(i[0], np.argmin))
case("math.argmax_nd", [Y], {"axes": [0, 2]}, lambda i: _argnd(i[0], np.argmax))
case("math.moments", [Y], {"axes": [2]}, lambda i: [i[0].mean(2, keepdims=True), i[0].var(2, keepdims=True)])
case("math.cumsum", [u(2, 4)], {"axis": 1}, lambda i: [np.cumsum(i[0], 1)])

# -- linalg -----------------------------------------------------------------------------------
case("linalg.dot", [u(4), u(4), np.array(0.5)], {}, lambda i: [np.dot(i[0], i[1]) + 0.5])
case("linalg.matvec", [u(3, 4), u(3), None], {"transA": True}, lambda i: [i[0].T @ i[1]])
case("linalg.matmul", [u(2, 1, 3, 4), u(3, 5, 4), u(3, 5)], {"transB": True},
     lambda i: [i[0] @ np.swapaxes(i[1], -1, -2) + i[2]])
case("linalg.matmul", [u(4, 3), u(4, 2)], {"transA": True}, lambda i: [i[0].T @ i[1]], id="linalg.matmul-transA")
case("linalg.outer", [u(2), u(3, 1)], {}, lambda i: [np.multiply.outer(i[0], i[1])])

# -- layout -----------------------------------------------------------------------------------
Z = u(2, 3, 4)
case("layout.tensor", [], {"shape": [2, 2], "value": [1.0, 2.0, 3.0, 4.0]},
     lambda i: [np.array([[1.0, 2], [3, 4]])], generics={"T": "real"})
case("layout.uniform", [np.array(2.5)], {"shape": [2, 3]}, lambda i: [np.full((2, 3), 2.5)])
case("layout.range", [], {"first": 1, "last": 8, "stride": 3}, lambda i: [np.array([1, 4, 7])])
case("layout.shape", [Z], {}, lambda i: [np.array([2, 3, 4])])
case("layout.cast", [SIGNED], {}, lambda i: [np.trunc(i[0]).astype(int)], generics={"R": "int"})
case("layout.reshape", [Z], {"axis": 1, "shape": [2, -1]}, lambda i: [i[0].reshape(2, 2, 6)])
case("layout.flatten", [Z], {"axis": 1}, lambda i: [i[0].reshape(2, 12)])
case("layout.unflatten", [Z], {"axis": 2, "shape": [2, 2]}, lambda i: [i[0].reshape(2, 3, 2, 2)])
case("layout.squeeze", [u(2, 1, 3, 1)], {"axes": [1, -1]}, lambda i: [i[0].reshape(2, 3)])
case("layout.unsqueeze", [u(2, 3)], {"axes": [0, 2]}, lambda i: [i[0].reshape(1, 2, 1, 3)])
case("layout.concat", [[u(2, 1), u(2, 3), u(2, 2)]], {"axis": 1}, lambda i: [np.concatenate(i[0], 1)])
case("layout.split", [Z], {"axis": 2, "sizes": [1, 3]}, lambda i: np.split(i[0], [1], 2))
case("layout.split", [Z], {"axis": 2, "count": 2}, lambda i: np.split(i[0], 2, 2), id="layout.split-count")
case("layout.stack", [[u(2, 3), u(2, 3)]], {"axis": 1}, lambda i: [np.stack(i[0], 1)])
case("layout.stack", [[u(2, 1), u(2, 1)]], {"axis": 1, "squeeze": True},
     lambda i: [np.concatenate(i[0], 1)], id="layout.stack-squeeze")
case("layout.unstack", [Z], {"axis": 1}, lambda i: [i[0][:, k] for k in range(3)])
case("layout.tile", [u(2, 3)], {"axes": [1], "repeats": [2]}, lambda i: [np.tile(i[0], (1, 2))])
case("layout.broadcast", [u(2, 1)], {"axes": [1], "shape": [3]}, lambda i: [np.repeat(i[0], 3, 1)])
case("layout.slice", [Z], {"axes": [2, 1], "begin": [3, 0], "end": [-1, 3], "stride": [-2, 2]},
     lambda i: [i[0][:, 0:3:2, 3::-2]])
for _m, _np in {"CONSTANT": "constant", "REFLECT": "reflect", "REPLICATE": "edge", "SYMMETRIC": "symmetric"}.items():
    case("layout.pad", [u(2, 4), None], {"axes": [1], "padding": [2, 1], "method": _m},
         lambda i, m=_np: [np.pad(i[0], ((0, 0), (2, 1)), mode=m)], id=f"layout.pad-{_m}")
case("layout.pad", [u(2, 3), np.array(7.0)], {"padding": [1, 0, 0, 2]},
     lambda i: [np.pad(i[0], ((1, 0), (0, 2)), constant_values=7.0)], id="layout.pad-value")
case("layout.transpose", [Z], {"perm": [1, 2, 0]}, lambda i: [i[0].transpose(1, 2, 0)])
case("layout.transpose", [Z], {}, lambda i: [i[0].transpose(2, 1, 0)], id="layout.transpose-default")


def _s2d(x):
    b_, c, h, w = x.shape
    return x.reshape(b_, c, h // 2, 2, w // 2, 2).transpose(0, 3, 5, 1, 2, 4).reshape(b_, 4 * c, h // 2, w // 2)


S = u(1, 2, 4, 6)
case("layout.space_to_depth", [S], {"block_size": [2, 2]}, lambda i: [_s2d(i[0])])
case("layout.depth_to_space", [_s2d(S)], {"block_size": [2, 2]}, lambda i: [S])
case("layout.space_to_batch", [S], {"block_size": [2, 2]},
     lambda i: [i[0].reshape(1, 2, 2, 2, 3, 2).transpose(3, 5, 0, 1, 2, 4).reshape(4, 2, 2, 3)])
case("layout.batch_to_space", [u(4, 2, 2, 3)], {"block_size": [2, 2]},
     lambda i: [i[0].reshape(2, 2, 1, 2, 2, 3).transpose(2, 3, 4, 0, 5, 1).reshape(1, 2, 4, 6)])
case("layout.shuffle", [u(2, 6, 2)], {"axis": 1, "groups": 3},
     lambda i: [i[0].reshape(2, 3, 2, 2).transpose(0, 2, 1, 3).reshape(2, 6, 2)])
NZ = np.array([[0.0, 1.5, 0], [2, 0, 3]])
case("layout.nonzero", [NZ], {}, lambda i: [np.stack(np.nonzero(i[0]))], generics={"T": "real"})
case("layout.gather", [Z, np.array([[2, 0], [1, 1]])], {"axis": 1}, lambda i: [np.take(i[0], i[1], 1)])
case("layout.gather_nd", [Z, np.array([[0, 2], [1, 0]])], {}, lambda i: [i[0][i[1][:, 0], i[1][:, 1]]])
case("layout.gather_nd", [Z, np.array([[1], [2]])], {"batch_dims": 1},
     lambda i: [np.stack([i[0][0, 1], i[0][1, 2]])], id="layout.gather_nd-batch")


def _scatter(d, idx, up):
    out = d.copy()
    for s in range(idx.shape[0]):
        for m in range(idx.shape[1]):
            out[s, idx[s, m]] = up[s, m]
    return out


case("layout.scatter", [u(2, 4), np.array([[3, 0], [1, 2]]), u(2, 2)], {"axis": 1},
     lambda i: [_scatter(*i)])
case("layout.scatter_nd", [u(3, 2), np.array([[2], [0]]), u(2, 2)], {},
     lambda i: [np.stack([i[2][1], i[0][1], i[2][0]])])

# -- nn ---------------------------------------------------------------------------------------
IMG = u(2, 4, 5, 5)
W = u(6, 2, 3, 3)
case("nn.linear", [u(2, 4), u(3, 4), u(3)], {}, lambda i: [i[0] @ i[1].T + i[2]])
case("nn.conv", [IMG, W, u(6)], {"groups": 2, "stride": 2, "padding": [1, 0, 1, 1]},
     lambda i: [naive_conv(i[0], i[1], i[2], [2, 2], [1, 1], [1, 0, 1, 1], 2)])
case("nn.conv", [IMG, u(4, 1, 2, 2), None], {"groups": 0, "dilation": 2},
     lambda i: [naive_conv(i[0], i[1], None, [1, 1], [2, 2], None, 0)], id="nn.conv-depthwise")
case("nn.deconv", [u(1, 4, 3, 3), u(4, 3, 3, 3), None], {"stride": 2, "groups": 2},
     lambda i: [naive_deconv(i[0], i[1], [2, 2], [1, 1], None, 2)])
POOL = {"axes": [0, 1, 2, 3], "size": [1, 1, 3, 2], "stride": [1, 1, 2, 2], "padding": [0, 0, 1, 0, 0, 0, 1, 1]}
for _k in ("max", "sum", "avg"):
    case(f"nn.{_k}_pool", [IMG], POOL,
         lambda i, k=_k: [naive_pool(i[0], [0, 1, 2, 3], [1, 1, 3, 2], [1, 1, 2, 2], POOL["padding"], k)])
case("nn.rms_pool", [IMG], {"size": [2, 2], "stride": 2},
     lambda i: [np.sqrt((i[0] ** 2)[:, :, 1:, 1:].reshape(2, 4, 2, 2, 2, 2).mean((3, 5)))])  # offset -1 (auto padding -1)
case("nn.lp_pool", [IMG], {"size": [5, 5], "p": 2.0},
     lambda i: [np.sqrt(naive_pool(i[0] ** 2, [2, 3], [5, 5], [1, 1], [2, 2, 2, 2], "sum"))])
V = np.array([[-2.0, -0.5, 0.0, 0.3, 4.0]])
case("nn.relu", [V], {}, lambda i: [np.maximum(i[0], 0)])
case("nn.relu", [V], {"alpha": 0.1, "max": 1.0}, lambda i: [np.maximum(np.minimum(i[0], 1), 0.1 * i[0])],
     id="nn.relu-leaky-capped")
case("nn.prelu", [u(2, 3, 2), np.array([0.1, 0.2, 0.3])], {},
     lambda i: [np.where(i[0] < 0, i[0] * i[1][:, None], i[0])])
case("nn.thresholded_relu", [V], {"theta": 0.2}, lambda i: [np.where(i[0] > 0.2, i[0], 0)])
case("nn.elu", [V], {"alpha": 0.5}, lambda i: [np.where(i[0] < 0, 0.5 * (np.exp(i[0]) - 1), i[0])])
case("nn.selu", [V], {}, lambda i: [1.05070102 * np.where(i[0] < 0, 1.67326319 * (np.exp(i[0]) - 1), i[0])])
case("nn.gelu", [V], {}, lambda i: [0.5 * i[0] * (1 + erf(i[0] / np.sqrt(2)))])
case("nn.gelu", [V], {"approximate": "TANH"},
     lambda i: [0.5 * i[0] * (1 + np.tanh(np.sqrt(2 / np.pi) * (i[0] + 0.044715 * i[0] ** 3)))], id="nn.gelu-tanh")
case("nn.gelu", [V], {"approximate": "SIGMOID"}, lambda i: [i[0] / (1 + np.exp(-1.702 * i[0]))], id="nn.gelu-sigmoid")
case("nn.silu", [V], {}, lambda i: [i[0] / (1 + np.exp(-i[0]))])
case("nn.sigmoid", [V], {}, lambda i: [1 / (1 + np.exp(-i[0]))])
case("nn.softplus", [V], {}, lambda i: [np.log1p(np.exp(i[0]))])
case("nn.erf", [V], {}, lambda i: [erf(i[0])])
BN = [u(2, 3, 2), u(3), u(3, lo=0.5, hi=1), u(3), u(3)]
case("nn.batch_norm", BN, {"epsilon": 0.01},
     lambda i: [(i[0] - i[1][:, None]) / np.sqrt(i[2][:, None] + 0.01) * i[4][:, None] + i[3][:, None]])
case("nn.mean_variance_norm", [u(2, 3, 4), None, u(3)], {},
     lambda i: [(i[0] - i[0].mean(2, keepdims=True)) / np.sqrt(i[0].var(2, keepdims=True) + 1e-5) * i[2][:, None]])
case("nn.local_response_norm", [u(1, 5, 2)], {"size": [3], "alpha": 0.5, "beta": 0.75, "bias": 2.0},
     lambda i: [i[0] / (2.0 + 0.5 * np.stack([(np.pad(i[0] ** 2, ((0, 0), (1, 1), (0, 0)))[:, c:c + 3]).sum(1) / 3
                                              for c in range(5)], 1)) ** 0.75])
case("nn.l1_norm", [u(2, 3)], {"axes": [1], "bias": 0.5},
     lambda i: [i[0] / (np.abs(i[0]).sum(1, keepdims=True) + 0.5)])
case("nn.l2_norm", [u(2, 3)], {"axes": [1], "epsilon": 10.0}, lambda i: [i[0] / 10.0])
case("nn.softmax", [u(2, 3, 2)], {"axes": [1, 2]},
     lambda i: [np.exp(i[0]) / np.exp(i[0]).sum((1, 2), keepdims=True)])


def _lstm_ref(X, W, Rm, B, h, c, steps):
    sg = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    ys = []
    for t in range(steps):
        z = X[t] @ W.T + B + h @ Rm.T
        n = h.shape[1]
        c = sg(z[:, n:2 * n]) * c + sg(z[:, :n]) * np.tanh(z[:, 2 * n:3 * n])
        h = sg(z[:, 3 * n:]) * np.tanh(c)
        ys.append(h)
    return [np.stack(ys), h, c]


LSTM = [u(3, 2, 4), u(8, 4), u(8, 2), u(8), u(2, 2), u(2, 2)]
case("nn.lstm_step", [LSTM[4], LSTM[5], LSTM[0][0]] + LSTM[1:4], {},
     lambda i: _lstm_ref(i[2][None], i[3], i[4], i[5], i[0], i[1], 1)[1:])
case("nn.lstm", LSTM, {}, lambda i: _lstm_ref(*i, 3))
case("nn.lstm_loop", LSTM + [np.array(2)], {}, lambda i: _lstm_ref(*i[:6], 2))

# -- image ------------------------------------------------------------------------------------
IM = u(1, 2, 4, 6)
case("image.nearest_downsample", [IM], {"axes": [2, 3], "factor": [2, 3]}, lambda i: [i[0][:, :, ::2, ::3]])
case("image.nearest_upsample", [IM], {"axes": [3], "factor": [2]}, lambda i: [np.repeat(i[0], 2, 3)])
case("image.area_downsample", [IM], {"axes": [2, 3], "factor": [2, 2]},
     lambda i: [i[0].reshape(1, 2, 2, 2, 3, 2).mean((3, 5))])


def _lin_up(x, f=2):
    # half-pixel bilinear 2x upsampling with clamped borders (independent of the @lower)
    n = x.shape[-1]
    src = (np.arange(f * n) + 0.5) / f - 0.5
    lo = np.floor(src).astype(int)
    t = src - lo
    return x[..., np.clip(lo, 0, n - 1)] * (1 - t) + x[..., np.clip(lo + 1, 0, n - 1)] * t


case("image.linear_upsample", [u(2, 3)], {"axes": [1], "factor": [2]}, lambda i: [_lin_up(i[0])])
case("image.nearest_resize", [u(2, 5)], {"axes": [1], "size": [3]}, lambda i: [i[0][:, [0, 2, 4]]])
case("image.nearest_resize", [u(2, 3)], {"axes": [1], "size": [7], "rounding_method": "FLOOR",
                                         "coordinate_transform": "ASYMMETRIC"},
     lambda i: [i[0][:, np.floor(np.arange(7) * 3 / 7).astype(int)]], id="image.nearest_resize-floor")
case("image.linear_resize", [u(2, 3)], {"axes": [1], "size": [6]}, lambda i: [_lin_up(i[0])])
case("image.cubic_resize", [u(2, 6)], {"axes": [1], "size": [6]}, lambda i: [i[0]])
case("image.resize", [u(2, 3)], {"axes": [1], "size": [6], "mode": "LINEAR"}, lambda i: [_lin_up(i[0])])
case("image.rescale", [u(2, 3)], {"axes": [1], "factor": [2.0], "mode": "LINEAR"}, lambda i: [_lin_up(i[0])])
ROI_IN = np.arange(32.0).reshape(1, 2, 4, 4)
ROIS = np.array([[0.0, 0, 4, 4], [1, 1, 3, 3]])
case("image.max_roi_pool", [ROI_IN, ROIS, np.array([0, 0])], {"output_size": [2, 2]},
     lambda i: [np.stack([i[0][0].reshape(2, 2, 2, 2, 2).max((2, 4)),
                          i[0][0, :, 1:3, 1:3]])])
case("image.avg_roi_pool", [ROI_IN, ROIS, np.array([0, 0])], {"output_size": [2, 2]},
     lambda i: [np.stack([i[0][0].reshape(2, 2, 2, 2, 2).mean((2, 4)),
                          i[0][0, :, 1:3, 1:3]])])
GRID_IN = u(1, 2, 3, 4)
_gy, _gx = np.meshgrid(np.linspace(-1, 1, 3), np.linspace(-1, 1, 4), indexing="ij")
IDENTITY_GRID = np.stack([_gx, _gy], -1)[None]
for _n in ("_nearest_grid_sample", "_linear_grid_sample", "_cubic_grid_sample"):
    case(f"image.{_n}", [GRID_IN, IDENTITY_GRID], {"aligned": True}, lambda i: [i[0]])
case("image._linear_grid_sample", [GRID_IN, np.array([[[[0.0, 0.0], [2.0, 2.0]]]])], {},
     lambda i: [np.stack([i[0][0, :, 1, 1:3].mean(1), np.zeros(2)], -1)[None, :, None]],
     id="image._linear_grid_sample-zeros")
case("image.grid_sample", [GRID_IN, IDENTITY_GRID], {"aligned": True}, lambda i: [i[0]])

# -- quant, algo ------------------------------------------------------------------------------
Q = np.array([[-1.3, 0.26, 0.74, 9.0], [0.1, -0.2, 0.3, -9.0]])
case("quant.zero_point_linear_quantize", [Q], {"zero_point": [1, 0], "scale": [0.5, 0.1], "bits": 4,
                                               "channel_axis": 0},
     lambda i: [np.array([[-1.5, 0.5, 0.5, 3.0], [0.1, -0.2, 0.3, -0.8]])])
case("quant.min_max_linear_quantize", [Q], {"min": -1.0, "max": 1.0, "bits": 3, "channel_axis": 0},
     lambda i: [np.round((np.clip(i[0], -1, 1) + 1) / 2 * 7) / 7 * 2 - 1])
case("algo.top_k", [np.array([[1.0, 5, 3], [4, 2, 6]])], {"k": 2, "axis": 1},
     lambda i: [np.array([[5.0, 3], [6, 4]]), np.array([[1, 2], [2, 0]])])
case("algo.nonmax_suppress", [np.array([[[0.0, 0, 2, 2], [0, 0, 2, 2.2], [5, 5, 6, 6]]]),
                              np.array([[[0.5, 0.9, 0.7]]])], {"iou_threshold": 0.5},
     lambda i: [np.array([[0, 0, 1], [0, 0, 2]])])


def _close(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    if a.dtype.kind in "bi" or b.dtype.kind in "bi":
        np.testing.assert_array_equal(a, b)
    else:
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


def _flat(outs):
    return [x for o in outs for x in (o if isinstance(o, list) else [o])]


@pytest.mark.parametrize("op,inputs,attrs,formula,generics", CASES)
def test_shape_inference(op, inputs, attrs, formula, generics):
    binding = bind(definition(op), inputs, attrs, generics)
    shapes = [s for spec in binding.outputs for s in spec.shapes]
    want = [np.shape(v) for v in formula(inputs)]
    assert [tuple(s) for s in shapes if None not in s] == [w for s, w in zip(shapes, want) if None not in s]


@pytest.mark.parametrize("op,inputs,attrs,formula,generics", CASES)
def test_values(op, inputs, attrs, formula, generics):
    """@lower (interpreted) against the formula; fast path against @lower, or against the
    formula when the operator is composed or intrinsic."""
    want = formula(inputs)
    fast = run_op(op, inputs, {**attrs, **(generics or {})})   # a graph op carries its generics as attributes
    d = definition(op)
    if d.lowers:
        lowered = _flat(run_lower(d, inputs, attrs, generics))
        assert len(lowered) == len(want)
        for got, w in zip(lowered, want):
            _close(got, w)
        for got, low in zip(fast, lowered):
            _close(got, low)
    else:
        for got, w in zip(fast, want):
            _close(got, w)


def test_every_operator_has_a_case():
    covered = {p.values[0] for p in CASES}
    names = {f"{m}.{d.name}" for m in MODULES for d in module(m).definitions}
    assert names - covered - {"nn._jagged_lstm_loops"} == set()


@pytest.mark.parametrize("name", MODULES)
def test_stdlib_module_parses(name):
    m = module(name)
    declared = re.findall(r"^operator (\w+)", (STDLIB / f"{name}.sknd").read_text(), re.M)
    assert [d.name for d in m.definitions] == declared
