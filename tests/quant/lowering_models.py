"""Small float ir.Graphs (NNEF operators, NCHW) for the lowering tests, with a calibrator.

The float graphs are executed by qsim's float executor (qsim.runtime); the
calibration here is plain min-max over the values that execution produces.
"""
from __future__ import annotations

import numpy as np

import qsim.runtime  # noqa: F401  (registers the stdlib op kinds)
from qsim import ir
from qsim.quant.params import QuantConfig, params_from_range
from qsim.runtime.executor import execute

F32 = ir.DType.F32


class FloatGraph:
    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.tensors: dict[str, ir.Tensor] = {}
        self.ops: list[ir.Op] = []
        self.inputs: list[str] = []

    def input(self, name, shape):
        self.tensors[name] = ir.Tensor(name, F32, tuple(shape))
        self.inputs.append(name)
        return name

    def const(self, name, data):
        data = np.asarray(data, dtype=np.float32)
        self.tensors[name] = ir.Tensor(name, F32, data.shape, data=data)
        return name

    def weights(self, name, shape, scale=0.3):
        return self.const(name, self.rng.normal(0, scale, size=shape))

    def op(self, kind, inputs, out, out_shape, **attrs):
        self.tensors[out] = ir.Tensor(out, F32, tuple(out_shape))
        self.ops.append(ir.Op(ir.OpKind.get(kind), tuple(inputs), (out,), attrs, name=out))
        return out

    def graph(self, outputs):
        return ir.Graph("float_model", tuple(self.inputs), tuple(outputs), tuple(self.ops),
                        self.tensors).verify()


def calibrate_minmax(graph: ir.Graph, batches, config: QuantConfig = QuantConfig()):
    """Per-tensor min-max QuantInfo for every non-constant tensor, from float execution."""
    lo: dict[str, float] = {}
    hi: dict[str, float] = {}
    for batch in batches:
        values = execute(graph, {graph.inputs[0]: batch})
        for name, v in values.items():
            if graph.tensors[name].is_constant:
                continue
            lo[name] = min(lo.get(name, np.inf), float(np.min(v)))
            hi[name] = max(hi.get(name, -np.inf), float(np.max(v)))
    scheme = config.activation_scheme()
    return {n: params_from_range(lo[n], hi[n], scheme, what=n) for n in lo}


def small_cnn(rng) -> ir.Graph:
    """conv+bn+relu, max pool, depthwise conv + relu6, residual add, grouped conv,
    global mean, flatten, linear: most lowering rules in one graph."""
    g = FloatGraph(rng)
    x = g.input("x", (1, 3, 12, 12))
    c1 = g.op("nn.conv", [x, g.weights("c1.w", (8, 3, 3, 3)), g.weights("c1.b", (8,), 0.1)],
              "c1", (1, 8, 12, 12), padding=(1, 1, 1, 1))
    bn = g.op("nn.batch_norm", [c1, g.const("bn.mean", rng.normal(0, 0.2, 8)),
                                g.const("bn.var", rng.uniform(0.5, 2.0, 8)),
                                g.const("bn.bias", rng.normal(0, 0.1, 8)),
                                g.const("bn.scale", rng.uniform(0.5, 1.5, 8))], "bn", (1, 8, 12, 12))
    r1 = g.op("nn.relu", [bn], "r1", (1, 8, 12, 12))
    p1 = g.op("nn.max_pool", [r1], "p1", (1, 8, 6, 6), size=(2, 2), stride=(2, 2), padding=(0, 0, 0, 0))
    dw = g.op("nn.conv", [p1, g.weights("dw.w", (8, 1, 3, 3)), g.weights("dw.b", (8,), 0.1)],
              "dw", (1, 8, 6, 6), groups=8, padding=(1, 1, 1, 1))
    r6 = g.op("math.clamp", [dw, g.const("zero", 0.0), g.const("six", 6.0)], "r6", (1, 8, 6, 6))
    add = g.op("math.add", [r6, p1], "add", (1, 8, 6, 6))
    gc = g.op("nn.conv", [add, g.weights("gc.w", (8, 4, 1, 1)), g.weights("gc.b", (8,), 0.1)],
              "gc", (1, 8, 6, 6), groups=2)
    gm = g.op("math.mean_reduce", [gc], "gm", (1, 8, 1, 1), axes=(2, 3))
    fl = g.op("layout.reshape", [gm], "fl", (1, 8), shape=(1, 8))
    fc = g.op("nn.linear", [fl, g.weights("fc.w", (5, 8)), g.weights("fc.b", (5,), 0.1)], "logits", (1, 5))
    return g.graph([fc])
