"""The `sknd-dynamic` fuzz target: every standard operator (stdlib/*.sknd: layout, math, linalg,
nn, image, quant, algo) invoked on inputs with dynamic extents (`real[n|8, 4]`), with attribute
values drawn from small ordinary and edge values, run as `qsim check` (composition: an operator
that needs a static extent must say so, located) or `qsim run` on an input of random extents
within the bounds (the float runtime on the actual shapes), sometimes with `--keep` the operator
(the float runtime's own implementation instead of its composition).

Operator signatures come from the parsed standard modules (qsim.skriptnd.modules), read once.
"""
from __future__ import annotations

import functools
import io
import random

import numpy as np

from .runner import Case

BOUND = 8
# attribute values by declared base type (a pack attribute gets a list of them)
ATTRIBUTE_VALUES = {
    "int": ("0", "1", "-1", "2", "3"),
    "real": ("0.0", "1.0", "0.5", "-1.0", "2.0"),
    "bool": ("true", "false"),
    "str": ('""', '"constant"', '"NEAREST"', '"LINEAR"', '"TANH"'),
}


@functools.lru_cache(maxsize=1)
def standard_operators() -> tuple:
    """(qualified name, OperatorDef) of every public standard operator without @dtype generics
    it cannot name (generic ones are invoked with their default types)."""
    from qsim.skriptnd.modules import STANDARD_MODULES, ModuleSet
    modules = ModuleSet()
    found = []
    for name in STANDARD_MODULES:
        module = modules.module(name, None)
        for op in module.definitions:
            if not op.is_graph and op.inputs and not op.name.startswith("_"):
                found.append((f"{name}.{op.name}", op))
    return tuple(found)


def _rank_of(spec) -> int | None:
    """The fixed rank a declared input shape has, or None when it has a variadic `s..` part."""
    if spec.shape is None:
        return None
    rank = 0
    for item in spec.shape:
        if item.pack is not None or item.per_item:
            return None
        rank += 1
    return rank


def _input_type(rng: random.Random, decl) -> tuple[str, list]:
    """(SkriptND type text, per-dimension extents with None for dynamic) of one graph input."""
    spec = decl.type
    base = spec.base if spec.base in ("int", "bool") else "real"
    rank = _rank_of(spec)
    if rank is None:
        rank = rng.randint(1, 4)
    extents = [None if rng.random() < 0.5 else rng.choice((1, 2, 3, 4)) for _ in range(rank)]
    if rank and all(e is not None for e in extents):
        extents[rng.randrange(rank)] = None       # at least one dynamic extent
    return base, extents


def _attribute(rng: random.Random, decl) -> str | None:
    base = decl.type.base if decl.type.base in ATTRIBUTE_VALUES else "int"
    values = ATTRIBUTE_VALUES[base]
    if decl.type.pack is not None or (decl.type.shape is not None and decl.type.base in ATTRIBUTE_VALUES):
        return "[" + ", ".join(rng.choice(values) for _ in range(rng.randint(0, 3))) + "]"
    return rng.choice(values)


def dynamic_graph(rng: random.Random) -> tuple[str, str, list]:
    """(operator name, graph text, [(input name, base, extents)]) invoking one standard operator."""
    qualname, op = rng.choice(standard_operators())
    module = qualname.split(".")[0]
    symbols = iter([f"d{i}" for i in range(64)])
    inputs, decls, args = [], [], []
    for decl in op.inputs:
        if decl.type.optional and rng.random() < 0.5:
            args.append("~")
            continue
        base, extents = _input_type(rng, decl)
        dims = []
        for e in extents:
            dims.append(f"{next(symbols)}|{BOUND}" if e is None else str(e))
        name = f"x{len(inputs)}"
        inputs.append((name, base, extents))
        if decl.type.pack is not None:
            decls.append(f"        {name}: {base}[{', '.join(dims)}];")
            args.append(f"[{name}]")
        else:
            decls.append(f"        {name}: {base}[{', '.join(dims)}];")
            args.append(name)
    attrs = []
    for decl in op.attribs:
        if decl.default is None or rng.random() < 0.4:
            value = _attribute(rng, decl)
            if value is not None:
                attrs.append(f"{decl.name}={value}")
    outputs = [f"y{i}" for i in range(len(op.outputs))] or ["y0"]
    # no shape: a graph output takes the shape its operator gives
    out_decls = [f"        {o}: {_output_base(decl)};" for o, decl in zip(outputs, op.outputs)] or ["        y0: real;"]
    text = (f"import {module};\n\ngraph G {{\n    @input {{\n" + "\n".join(decls) + "\n    }\n    @output {\n"
            + "\n".join(out_decls) + "\n    }\n    @compose {\n"
            + f"        {', '.join(outputs)} = {qualname}{{{', '.join(attrs)}}}({', '.join(args)});\n"
            + "    }\n}\n")
    return qualname, text, inputs


def _output_base(decl) -> str:
    return decl.type.base if decl.type.base in ("int", "bool") else "real"


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def gen_sknd_dynamic(rng: random.Random, corpus=None) -> Case:
    qualname, text, inputs = dynamic_graph(rng)
    files = {"g.sknd": text.encode()}
    if rng.random() < 0.6:
        argv = ["check", "g.sknd"]
    else:
        argv = ["run", "g.sknd"]
        data = np.random.default_rng(rng.randrange(2 ** 32))
        for name, base, extents in inputs:
            shape = [rng.randint(0, BOUND) if rng.random() < 0.1 else rng.randint(1, BOUND) if e is None else e
                     for e in extents]
            array = data.normal(size=shape).astype(np.float32)
            if base == "int":
                array = data.integers(-3, 4, size=shape).astype(np.int64)
            elif base == "bool":
                array = data.random(size=shape) < 0.5
            files[f"{name}.npy"] = _npy(array)
            argv += ["--input", f"{name}={name}.npy"]
    if argv[0] == "check" and rng.random() < 0.3:
        argv += ["--keep", qualname]
    return Case("sknd-dynamic", qualname, files, argv=argv)
