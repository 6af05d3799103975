"""Grammar-aware generators of small model texts: SkriptND (NNEF 2.0) and NNEF 1.0 graphs.

Both generators build a chain of operators over one NCHW input, tracking the shape where the
operator's rule is simple (conv, pooling with explicit padding, reductions, transposes), so the
variables they declare match and most generated graphs are valid. With a small probability an
attribute gets a hostile value instead (0, -1, -9209, 2^63, a huge extent), which a valid
front end must refuse with a located error. Variables get `.dat` files (qsim's own writer).
"""
from __future__ import annotations

import io
import random

import numpy as np

from qsim.tensorfile import write_tensor

HOSTILE_INTS = (0, -1, -2, -9209, 9209, 2 ** 31, 2 ** 63, 10 ** 12, 10 ** 30)


def dat_bytes(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    write_tensor(buf, array)
    return buf.getvalue()


class _Chain:
    """Shared state of one generated graph: current tensor, its shape (None: unknown)."""

    def __init__(self, rng: random.Random, shape):
        self.rng = rng
        self.shape = list(shape)
        self.cur = "x"
        self.count = 0
        self.variables: dict[str, tuple[int, ...]] = {}
        self.same_shape: list[str] = ["x"]    # tensors with the current shape
        self.lines: list[str] = []

    def name(self, stem: str) -> str:
        self.count += 1
        return f"{stem}{self.count}"

    def num(self, value: int) -> int:
        return self.rng.choice(HOSTILE_INTS) if self.rng.random() < 0.04 else value

    def variable(self, stem: str, shape) -> str:
        name = self.name(stem)
        self.variables[name] = tuple(shape)
        return name

    def advance(self, out: str, shape) -> None:
        if shape is not None and not all(0 <= e <= 1 << 20 for e in shape):
            shape = None        # a hostile attribute made it meaningless; declare no more variables from it
        if shape is None or list(shape) != self.shape:
            self.same_shape = []
        self.shape = list(shape) if shape is not None else None
        self.same_shape.append(out)
        self.cur = out


def _conv_out(size, k, s, p):
    return (size + 2 * p - k) // s + 1


# Operators by role, as (SkriptND name, NNEF 1.0 name).
UNARY = (("nn.relu", "relu"), ("nn.sigmoid", "sigmoid"), ("math.exp", "exp"), ("math.abs", "abs"),
         ("math.neg", "neg"), ("math.tanh", "tanh"), ("nn.elu", "elu"), ("math.sqr", "sqr"),
         ("math.floor", "floor"), ("nn.softplus", "softplus"), ("math.sqrt", "sqrt"),
         ("math.log", "log"), ("math.rcp", "rcp"), ("math.round", "round"), ("nn.gelu", "copy"),
         ("nn.silu", "sign"))
BINARY = (("math.add", "add", "+"), ("math.sub", "sub", "-"), ("math.mul", "mul", "*"),
          ("math.div", "div", "/"), ("math.max", "max", None), ("math.min", "min", None),
          ("math.pow", "pow", "^"))
POOL = (("nn.max_pool", "max_pool"), ("nn.avg_pool", "avg_pool"), ("nn.sum_pool", "box"))
REDUCE = (("math.mean_reduce", "mean_reduce"), ("math.sum_reduce", "sum_reduce"),
          ("math.max_reduce", "max_reduce"), ("math.min_reduce", "min_reduce"))
LITERALS = ("2.0", "0.0", "-1.0", "1e38", "0.5")
SKND, NNEF1 = 0, 1


def _plan(c: _Chain) -> tuple[str, dict]:
    """Picks the next operator and its attributes, and advances the chain's shape.

    Returns (role, params); params hold dialect-neutral values (operator index into its role's
    table, extents, the operand names) that `_render` writes in either syntax.
    """
    r = c.rng
    shape = c.shape
    four = shape is not None and len(shape) == 4 and shape[2] >= 1 and shape[3] >= 1
    out = c.name("t")
    p = {"x": c.cur, "out": out}
    choice = r.random()
    if choice < 0.25 or shape is None:
        p["op"] = r.randrange(len(UNARY))
        role, new = "unary", shape
    elif choice < 0.40:
        p["op"] = r.randrange(len(BINARY))
        p["other"] = r.choice(LITERALS) if r.random() < 0.3 else (r.choice(c.same_shape) if c.same_shape else c.cur)
        p["infix"] = r.random() < 0.3
        role, new = "binary", shape
    elif choice < 0.55 and four:
        n, ch, h, w = shape
        k, s, pad = c.num(r.choice((1, 3, 3, 5))), c.num(r.choice((1, 1, 2))), c.num(r.choice((0, 1, 2)))
        o = r.choice((1, 2, 4, 8))
        p.update(k=k, s=s, p=pad, o=o, dilation=(c.num(1), c.num(2) if r.random() < 0.2 else 1),
                 groups=c.num(1) if r.random() < 0.1 else None,
                 filter=c.variable("f", (o, ch, k, k) if 0 < k < 64 else (o, ch, 3, 3)),
                 bias=c.variable("b", (o,)) if r.random() < 0.5 else None)
        role = "conv"
        try:
            new = (n, o, _conv_out(h, k, s, pad), _conv_out(w, k, s, pad))
        except ZeroDivisionError:
            new = None
    elif choice < 0.65 and four:
        n, ch, h, w = shape
        k, s = c.num(r.choice((1, 2, 3))), c.num(r.choice((1, 2)))
        p.update(op=r.randrange(len(POOL)), k=k, s=s,
                 border=r.choice(("ignore", "constant", "reflect", "replicate")))
        role = "pool"
        try:
            new = (n, ch, (h - k) // s + 1, (w - k) // s + 1)
        except ZeroDivisionError:
            new = None
    elif choice < 0.72 and four:
        ch = shape[1]
        p["vars"] = [c.variable(stem, (ch,)) for stem in ("mean", "var", "beta", "gamma")]
        p["eps"] = r.choice(("1e-05", "0.001", "0.0", "1e400"))
        role, new = "batch_norm", shape
    elif choice < 0.80:
        rank = len(shape)
        axes = sorted(r.sample(range(rank), r.randint(1, rank))) if rank else []
        if r.random() < 0.1:
            axes = [c.num(rank)]
        p.update(op=r.randrange(len(REDUCE)), axes=axes, squeeze=r.random() < 0.3)
        role = "reduce"
        new = [1 if i in axes else e for i, e in enumerate(shape)]
        if p["squeeze"]:
            new = [e for i, e in enumerate(shape) if i not in axes]
        new = new if all(0 <= a < rank for a in axes) else None
    elif choice < 0.86:
        rank = len(shape)
        perm = list(range(rank))
        r.shuffle(perm)
        if r.random() < 0.1 and perm:
            perm[r.randrange(rank)] = c.num(rank)
        p["perm"] = perm
        role = "transpose"
        new = [shape[i] for i in perm] if sorted(perm) == list(range(rank)) else None
    elif choice < 0.90:
        p["axis"] = c.num(r.randrange(len(shape)) if shape else 0)
        role, new = "softmax", shape
    elif choice < 0.95:
        total = int(np.prod(shape)) if shape else 1
        p["shape"] = [1, total] if r.random() < 0.7 else [c.num(total), 1]
        role = "reshape"
        new = p["shape"] if p["shape"][0] * p["shape"][1] == total else None
    elif len(shape) == 2:
        o = r.choice((1, 3, 10))
        p.update(w=c.variable("w", (o, shape[1])), b=c.variable("b", (o,)))
        role, new = "linear", (shape[0], o)
    else:
        axis = r.randrange(len(shape)) if shape else 0
        p["axis"] = c.num(axis)
        role = "concat"
        new = list(shape)
        if shape:
            new[axis] *= 2
    c.advance(out, new)
    return role, p


def _render_skriptnd(role: str, p: dict) -> str:
    x, out = p["x"], p["out"]
    if role == "unary":
        return f"{out} = {UNARY[p['op']][SKND]}({x});"
    if role == "binary":
        return f"{out} = {BINARY[p['op']][SKND]}({x}, {p['other']});"
    if role == "conv":
        k, s, pad = p["k"], p["s"], p["p"]
        attrs = f"stride=[{s}, {s}], padding=[{pad}, {pad}, {pad}, {pad}]"
        if p["dilation"] != (1, 1):
            attrs += f", dilation=[{p['dilation'][0]}, {p['dilation'][1]}]"
        if p["groups"] is not None:
            attrs += f", groups={p['groups']}"
        bias = f", {p['bias']}" if p["bias"] else ""
        return f"{out} = nn.conv{{{attrs}}}({x}, {p['filter']}{bias});"
    if role == "pool":
        k, s = p["k"], p["s"]
        return f"{out} = {POOL[p['op']][SKND]}{{size=[{k}, {k}], stride=[{s}, {s}], padding=[0, 0, 0, 0]}}({x});"
    if role == "batch_norm":
        return f"{out} = nn.batch_norm{{epsilon={p['eps']}}}({x}, {', '.join(p['vars'])});"
    if role == "reduce":
        squeeze = ", squeeze=true" if p["squeeze"] else ""
        return f"{out} = {REDUCE[p['op']][SKND]}{{axes={p['axes']}{squeeze}}}({x});"
    if role == "transpose":
        return f"{out} = layout.transpose{{perm={p['perm']}}}({x});"
    if role == "softmax":
        return f"{out} = nn.softmax{{axes=[{p['axis']}]}}({x});"
    if role == "reshape":
        return f"{out} = layout.reshape{{shape={p['shape']}}}({x});"
    if role == "linear":
        return f"{out} = nn.linear({x}, {p['w']}, {p['b']});"
    return f"{out} = layout.concat{{axis={p['axis']}}}([{x}, {x}]);"


def _nnef1_shape(name: str, shape: tuple) -> tuple:
    """NNEF 1.0 keeps per-channel vectors as [1, C] (biases, batch-norm statistics)."""
    return (1,) + tuple(shape) if len(shape) == 1 else tuple(shape)


def _render_nnef1(role: str, p: dict, c: _Chain, fragments: list[str]) -> list[str]:
    x, out = p["x"], p["out"]
    declared = [v for v in (p.get("filter"), p.get("bias"), p.get("w"), p.get("b")) if v] + p.get("vars", [])
    lines = [f"{v} = variable<scalar>(shape = [{', '.join(map(str, _nnef1_shape(v, c.variables[v])))}], "
             f"label = '{v}');" for v in declared]
    if role == "unary":
        names = [u[NNEF1] for u in UNARY] + fragments
        op = names[p["op"] % len(names)] if not fragments or c.rng.random() < 0.7 else c.rng.choice(fragments)
        lines.append(f"{out} = {op}({x});")
    elif role == "binary":
        _, name, infix = BINARY[p["op"]]
        lines.append(f"{out} = {x} {infix} {p['other']};" if p["infix"] and infix
                     else f"{out} = {name}({x}, {p['other']});")
    elif role == "conv":
        pad, s = p["p"], p["s"]
        lines.append(f"{out} = conv({x}, {p['filter']}, {p['bias'] or '0.0'}, border = 'constant', "
                     f"padding = [({pad}, {pad}), ({pad}, {pad})], stride = [{s}, {s}], "
                     f"dilation = [{p['dilation'][0]}, {p['dilation'][1]}]"
                     + (f", groups = {p['groups']}" if p["groups"] is not None else "") + ");")
    elif role == "pool":
        k, s = p["k"], p["s"]
        lines.append(f"{out} = {POOL[p['op']][NNEF1]}({x}, size = [1, 1, {k}, {k}], stride = [1, 1, {s}, {s}], "
                     f"border = '{p['border']}', padding = [(0, 0), (0, 0), (0, 0), (0, 0)]);")
    elif role == "batch_norm":
        lines.append(f"{out} = batch_normalization({x}, {', '.join(p['vars'])}, epsilon = {p['eps']});")
    elif role == "reduce":
        lines.append(f"{out} = {REDUCE[p['op']][NNEF1]}({x}, axes = {p['axes']});")
    elif role == "transpose":
        lines.append(f"{out} = transpose({x}, axes = {p['perm']});")
    elif role == "softmax":
        lines.append(f"{out} = softmax({x}, axes = [{p['axis']}]);")
    elif role == "reshape":
        lines.append(f"{out} = reshape({x}, shape = {p['shape']});")
    elif role == "linear":
        lines.append(f"{out} = linear({x}, {p['w']}, {p['b']});")
    else:
        lines.append(f"{out} = concat([{x}, {x}], axis = {p['axis']});")
    return lines


def random_input_shape(rng: random.Random) -> list[int]:
    if rng.random() < 0.05:
        return [rng.choice((0, 1, 100000)), rng.choice((1, 3, 100000)), 4, 4]
    return [1, rng.choice((1, 2, 3)), rng.choice((4, 5, 8)), rng.choice((4, 6, 8))]


def _dat_files(rng: random.Random, variables: dict[str, tuple], nnef1: bool) -> dict[str, bytes]:
    """Random data for each variable; variances positive (batch norm takes their square root)."""
    nprng = np.random.default_rng(rng.randrange(2 ** 32))
    files = {}
    for name, shape in variables.items():
        if not all(0 <= e for e in shape) or int(np.prod(shape)) > 1 << 16:
            continue            # no data: the model then fails on the missing file, as it should
        data = nprng.normal(size=_nnef1_shape(name, shape) if nnef1 else shape).astype(np.float32)
        files[name + ".dat"] = dat_bytes(np.abs(data) + np.float32(0.1) if name.startswith("var") else data)
    return files


def skriptnd_graph(rng: random.Random) -> tuple[str, dict[str, bytes], list[int]]:
    """A random SkriptND model: main.sknd text, its .dat files by name, and its input shape."""
    shape = random_input_shape(rng)
    c = _Chain(rng, shape)
    for _ in range(rng.choice((1, 2, 3, 4, 6, 10))):
        c.lines.append(_render_skriptnd(*_plan(c)))
    c.lines.append(f"y = {c.cur};")
    variables = "".join(f"        {n}: real[{', '.join(map(str, s))}];\n" for n, s in c.variables.items())
    text = ("import nn;\nimport math;\nimport layout;\n\n"
            f"graph g{rng.randrange(100)} {{\n"
            f"    @input {{\n        x: real[{', '.join(map(str, shape))}];\n    }}\n"
            "    @output {\n        y: real[s..];\n    }\n"
            + (f"    @variable {{\n{variables}    }}\n" if variables else "")
            + "    @compose {\n" + "".join(f"        {line}\n" for line in c.lines) + "    }\n}\n")
    return text, _dat_files(rng, c.variables, nnef1=False), shape


FRAGMENTS = {
    "twice": "fragment twice( x: tensor<scalar> ) -> ( y: tensor<scalar> )\n{\n    y = x * 2.0;\n}\n",
    "relu6": "fragment relu6( x: tensor<scalar> ) -> ( y: tensor<scalar> )\n{\n"
             "    y = clamp(x, 0.0, 6.0);\n}\n",
    "shifted": "fragment shifted( x: tensor<scalar>, by: scalar = 1.0 ) -> ( y: tensor<scalar> )\n{\n"
               "    z = x + by;\n    y = relu(z);\n}\n",
}


def nnef1_graph(rng: random.Random) -> tuple[str, dict[str, bytes], list[int], list[str]]:
    """A random NNEF 1.0 model: graph.nnef text, .dat files, input shape, tensor identifiers."""
    shape = random_input_shape(rng)
    c = _Chain(rng, shape)
    c.cur, c.same_shape = "input", ["input"]
    compositional = rng.random() < 0.4
    fragments = sorted(rng.sample(sorted(FRAGMENTS), rng.randint(1, 3))) if compositional else []
    for _ in range(rng.choice((1, 2, 3, 4, 6, 10))):
        c.lines += _render_nnef1(*_plan(c), c, fragments)
    body = [f"input = external<scalar>(shape = [{', '.join(map(str, shape))}]);"] + c.lines
    body.append(f"output = copy({c.cur});")
    head = "version 1.0;\n"
    if compositional:
        head += "extension KHR_enable_fragment_definitions, KHR_enable_operator_expressions;\n\n"
        head += "\n".join(FRAGMENTS[f] for f in fragments) + "\n"
    text = (head + f"graph G( input ) -> ( output )\n{{\n"
            + "".join(f"    {line}\n" for line in body) + "}\n")
    files = _dat_files(rng, c.variables, nnef1=True)
    idents = ["input", "output"] + [line.split(" =")[0] for line in c.lines if " = " in line]
    return text, files, shape, idents


def graph_quant(rng: random.Random, idents: list[str]) -> str:
    """graph.quant lines for some identifiers, with ordinary and extreme numbers."""
    nums = ("-1.0", "1.0", "0.0", "-0.0", "1e400", "-1e400", "5e-324", "nan", "inf", "-2.5", "6.0",
            "3.4028236e38", "1e-45", "100", "-100", "9223372036854775808")
    bits = ("8", "8", "16", "4", "1", "0", "-1", "32", "64", "65", "2147483648", "9223372036854775808")
    lines = []
    for ident in rng.sample(idents, rng.randint(1, len(idents))):
        if rng.random() < 0.5:
            lo, hi = ("-1.0", "1.0") if rng.random() < 0.5 else (rng.choice(nums), rng.choice(nums))
            b = "8" if rng.random() < 0.5 else rng.choice(bits)
            fn = rng.choice(("linear_quantize", "linear_quantize", "logarithmic_quantize",
                             "zero_point_linear_quantize", "unknown_quantize"))
            if fn == "logarithmic_quantize":
                args = f"max = {hi}, bits = {b}"
            elif fn == "zero_point_linear_quantize":
                args = (f"zero_point = {rng.choice(('0', '128', '-129', '255', '70000'))}, "
                        f"scale = {rng.choice(nums)}, bits = {b}, signed = {rng.choice(('true', 'false'))}, "
                        f"symmetric = {rng.choice(('true', 'false'))}")
            else:
                args = f"min = {lo}, max = {hi}, bits = {b}"
                if rng.random() < 0.3:
                    args += f", signed = {rng.choice(('true', 'false'))}, symmetric = {rng.choice(('true', 'false'))}"
            lines.append(f'"{ident}": {fn}({args});')
        else:
            lines.append(f'"{ident}": linear_quantize(min = {rng.choice(nums)}, max = {rng.choice(nums)}, '
                         f'bits = {rng.choice(bits)});')
    if rng.random() < 0.1:
        lines.append(f'"{rng.choice(idents)}": linear_quantize(min = -1.0, max = 1.0, bits = 8);')
    if rng.random() < 0.05:
        lines.append('"nosuch": linear_quantize(min = -1.0, max = 1.0, bits = 8);')
    return "\n".join(lines) + "\n"
