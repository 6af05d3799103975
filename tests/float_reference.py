"""Independent numpy references of the SkriptND convolution and pooling formulas (the stdlib
@lower bodies written out as plain loops), shared by the float operator tests
(tests/runtime/test_float_ops.py, tests/skriptnd/test_stdlib_ops.py); importable from any test
because tests/ (the conftest's folder) is on sys.path."""
import itertools

import numpy as np


def _ceil_div(a, b):
    return -((-a) // b)


def naive_conv(x, w, b, stride, dilation, padding, groups, align="UPPER", ceil_mode=False):
    """nn.conv @lower (NCX) as plain loops: output[b, g*m+mi, i] += input[b, g*fc+ci,
    |stride*i + dilation*j - offset|] * filter[g*m+mi, ci, j]."""
    d = x.ndim - 2
    n, fc = w.shape[:2]
    g = x.shape[1] if groups == 0 else groups
    m = n // g
    ix, fx = x.shape[2:], w.shape[2:]
    before, ox = [], []
    for a in range(d):
        fd = (fx[a] - 1) * dilation[a] + 1
        if padding is None:
            cnt = _ceil_div(ix[a], stride[a]) if ceil_mode else ix[a] // stride[a]
            total = (cnt - 1) * stride[a] + fd - ix[a]
            off = total // 2 if align == "UPPER" else _ceil_div(total, 2)
        else:
            total, off = padding[a] + padding[d + a], padding[a]
        span = ix[a] + total - fd
        ox.append((_ceil_div(span, stride[a]) if ceil_mode else span // stride[a]) + 1)
        before.append(off)
    out = np.zeros((x.shape[0], n) + tuple(ox))
    for bi, gi, mi, ci in itertools.product(range(x.shape[0]), range(g), range(m), range(fc)):
        for i in itertools.product(*[range(o) for o in ox]):
            for j in itertools.product(*[range(f) for f in fx]):
                p = [stride[a] * i[a] + dilation[a] * j[a] - before[a] for a in range(d)]
                if all(0 <= p[a] < ix[a] for a in range(d)):
                    out[(bi, gi * m + mi) + i] += x[(bi, gi * fc + ci) + tuple(p)] * w[(gi * m + mi, ci) + j]
    if b is not None:
        out += b.reshape((n,) + (1,) * d)
    return out


def naive_deconv(x, w, stride, dilation, padding, groups, output_size=None):
    d = x.ndim - 2
    n, fc = w.shape[:2]
    g = groups or x.shape[1]
    m = n // g
    ix, fx = x.shape[2:], w.shape[2:]
    off, ox = [], []
    for a in range(d):
        fd = (fx[a] - 1) * dilation[a] + 1
        if padding is None:
            total = (ix[a] - 1) * stride[a] + fd - ix[a] * stride[a]
            o = total // 2
        else:
            total, o = padding[a] + padding[d + a], padding[a]
        ox.append(output_size[a] if output_size else (ix[a] - 1) * stride[a] + fd - total)
        off.append(o)
    out = np.zeros((x.shape[0], fc * g) + tuple(ox))
    for bi, gi, mi, ci in itertools.product(range(x.shape[0]), range(g), range(m), range(fc)):
        for i in itertools.product(*[range(e) for e in ix]):
            for j in itertools.product(*[range(f) for f in fx]):
                q = tuple(stride[a] * i[a] + dilation[a] * j[a] - off[a] for a in range(d))
                if all(0 <= q[a] < ox[a] for a in range(d)):
                    out[(bi, gi * fc + ci) + q] += x[(bi, gi * m + mi) + i] * w[(gi * m + mi, ci) + j]
    return out


def naive_pool(x, axes, size, stride, padding, kind):
    ox = [(x.shape[a] + padding[i] + padding[len(axes) + i] - size[i]) // stride[i] + 1
          for i, a in enumerate(axes)]
    shape = list(x.shape)
    for i, a in enumerate(axes):
        shape[a] = ox[i]
    out = np.zeros(shape)
    for idx in itertools.product(*[range(e) for e in shape]):
        vals = []
        for j in itertools.product(*[range(s) for s in size]):
            src = list(idx)
            for i, a in enumerate(axes):
                src[a] = stride[i] * idx[a] + j[i] - padding[i]
            if all(0 <= src[a] < x.shape[a] for a in axes):
                vals.append(x[tuple(src)])
        out[idx] = {"max": max, "sum": sum, "avg": lambda v: sum(v) / len(v)}[kind](vals)
    return out
