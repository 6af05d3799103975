"""Float execution of a composed ir.Graph of SkriptND standard operators.

`run_graph(graph, inputs)` executes the ops in order with the fast numpy paths of
fastops*.py and returns every tensor's value. `run_op_node` is the runner the executor
(qsim.runtime) calls for the dialects layout, math, linalg, nn, image, quant, algo.

Flat op inputs map onto the operator's declared inputs: an omitted optional input is the
empty name "", and the one packed input of concat/stack/*_n takes all remaining names;
packed outputs (split, unstack) are the op's outputs in order (the pack signatures below are
those of the stdlib modules; tests hold the two together).
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ..errors import DataError, InvalidGraphError, MismatchError, QsimError, UnsupportedError
from .. import ir
from . import dynattr
from .control import MAX_LOOP_STEPS     # a loop that runs longer is taken to be endless
from .fastops import OPS, run_op

STDLIB_DIALECTS = ("layout", "math", "linalg", "nn", "image", "quant", "algo")

# Operators with a packed input: (index of the packed input, number of declared inputs).
PACKED_INPUTS = {
    "layout.concat": (0, 1), "layout.stack": (0, 1),
    **{f"math.{n}": (0, 1) for n in ("sum_n", "prod_n", "min_n", "max_n", "argmin_n",
                                     "argmax_n", "any_n", "all_n")},
}


def register_stdlib_kinds() -> None:
    """Registers an ir.OpKind for every standard operator (idempotent)."""
    for name in OPS:
        ir.register_op_kind(name, doc="NNEF 2.0 standard operator (stdlib/"
                            f"{name.split('.')[0]}.sknd)")


def group_inputs(kind: str, values: list) -> list:
    """Flat input values → the operator's declared inputs (a packed one becomes a list)."""
    spec = PACKED_INPUTS.get(kind)
    if spec is None:
        return values
    index, declared = spec
    extra = len(values) - declared + 1
    return values[:index] + [list(values[index:index + extra])] + values[index + extra:]


def run_op_node(op: ir.Op, inputs: list, backend: str = "reference") -> list[np.ndarray]:
    """Runner for qsim.runtime: executes one standard op (float; `backend` is irrelevant)."""
    try:
        return run_op(op.kind.name, group_inputs(op.kind.name, list(inputs)), dict(op.attrs))
    except QsimError as err:
        prefix = f"{op.kind.name}: "
        text = err.message[len(prefix):] if err.message.startswith(prefix) else err.message
        raise type(err)(f"{op.kind.name} '{op.label}': {text}", hint=err.hint,
                        location=err.location) from None
    except (ValueError, IndexError, TypeError, KeyError) as err:
        raise InvalidGraphError(f"{op.kind.name} '{op.label}': cannot execute with input shapes "
                                f"{[list(np.shape(v)) if v is not None else None for v in inputs]} "
                                f"and attributes {dict(op.attrs)}: {err}") from None


def run_own_operator(op: ir.Op, inputs: list) -> list[np.ndarray]:
    """An operator the model defines itself, run by its @lower body (qsim.skriptnd.lower);
    packed inputs are regrouped into lists, packed outputs flattened again."""
    from .lower import run_lower
    d = op.definition
    if d is None:
        raise UnsupportedError(f"{op.kind.name} '{op.label}': neither a standard operator nor one "
                               "the model defines; float execution covers the chapter 4 modules "
                               "and the model's own operators",
                               hint="integer TOSA/CVM graphs run with qsim.runtime.execute "
                                    "(qsim run on a quantized folder)")
    if not d.lowers:
        raise UnsupportedError(f"{op.kind.name} '{op.label}': operator '{d.name}' has no @lower "
                               "body, so qsim cannot execute it", location=d.loc,
                               hint="give the operator a @lower block, or a @compose block of "
                                    "standard operators")
    grouped = regroup(op, d.inputs, list(inputs), "inputs")
    try:
        outs = run_lower(d, grouped, dict(op.attrs))
    except QsimError as err:
        raise type(err)(f"{op.kind.name} '{op.label}': {err.message}", hint=err.hint,
                        location=err.location) from None
    flat = []
    for decl, value in zip(d.outputs, outs):
        flat.extend(value if decl.type.pack is not None else [value])
    return [np.asarray(v) for v in flat]


def regroup(op: ir.Op, params, flat: list, what: str) -> list:
    """The op's flat tensor list → one entry per declared parameter, a packed one as a list.

    The composer flattens packs into consecutive names (compose._emit). Lengths come from the
    definition: `..(n)` with n an attribute evaluates; the one remaining pack takes the rest."""
    from .evaluate import Evaluator, free_names
    packed = [p for p in params if p.type.pack is not None]
    if not packed:
        return flat
    lengths = {}
    for p in packed:
        length = p.type.pack.length
        if length is not None and free_names(length) <= op.attrs.keys():
            try:
                n = Evaluator(dict(op.attrs)).eval(length)
            except QsimError:
                continue
            if isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 0:
                lengths[p.name] = int(n)      # else (null, run-time): the one unknown pack
    unknown = [p.name for p in packed if p.name not in lengths]
    rest = len(flat) - (len(params) - len(packed)) - sum(lengths.values())
    if len(unknown) > 1 or rest < 0 or (not unknown and rest != 0):
        raise UnsupportedError(f"{op.kind.name} '{op.label}': cannot tell which of its {len(flat)} "
                               f"{what} belong to the packs {', '.join(p.name for p in packed)}",
                               location=op.definition.loc if op.definition is not None else None,
                               hint="give all but one packed parameter a length of attributes, as in ..(n)")
    if unknown:
        lengths[unknown[0]] = rest
    grouped, pos = [], 0
    for p in params:
        n = lengths.get(p.name) if p.type.pack is not None else None
        if n is None:
            grouped.append(flat[pos])
            pos += 1
        else:
            items = flat[pos:pos + n]
            grouped.append(None if n == 1 and items[0] is None else list(items))
            pos += n
    return grouped


def _check_input(graph: ir.Graph, name: str, value: Any) -> np.ndarray:
    t = graph.tensor(name)
    arr = np.asarray(value)
    if arr.ndim != t.rank or any(d is not None and d != e for d, e in zip(t.shape, arr.shape)):
        raise DataError(f"input '{name}' has shape {list(arr.shape)}, the graph declares "
                        f"{[d if d is not None else '?' for d in t.shape]}",
                        hint="give an array of the declared shape")
    bounds = t.max_shape or ()
    for k, (d, e) in enumerate(zip(t.shape, arr.shape)):
        if d is None and k < len(bounds) and bounds[k] >= 0 and e > bounds[k]:
            # 2.6.1: the upper bound of a dynamic input extent is checked when the graph runs
            raise DataError(f"input '{name}' has extent {e} at dimension {k}, above its upper bound "
                            f"{bounds[k]}", hint=f"the graph declares at most {bounds[k]} there")
    if arr.dtype.kind != t.dtype.numpy.kind and not (arr.dtype.kind in "iuf" and t.dtype.numpy.kind in "iuf"):
        raise DataError(f"input '{name}' has dtype {arr.dtype}, the graph declares {t.dtype}")
    return arr.astype(t.dtype.numpy, copy=False)


def run_graph(graph: ir.Graph, inputs: Mapping[str, Any] | list) -> dict[str, np.ndarray]:
    """Executes `graph` and returns the values of all its tensors by name.

    `inputs` maps graph input names to arrays (or lists them in graph input order)."""
    if not isinstance(inputs, Mapping):
        inputs = list(inputs)
        if len(inputs) != len(graph.inputs):
            raise DataError(f"graph '{graph.name}' has {len(graph.inputs)} inputs "
                            f"({', '.join(graph.inputs)}); got {len(inputs)} arrays")
        inputs = dict(zip(graph.inputs, inputs))
    missing = [n for n in graph.inputs if n not in inputs]
    if missing:
        raise DataError(f"graph '{graph.name}': no value for input(s) {', '.join(missing)}")
    values: dict[str, np.ndarray] = {n: t.data for n, t in graph.tensors.items() if t.is_constant}
    for name in graph.inputs:
        values[name] = _check_input(graph, name, inputs[name])
    for op in graph.ops:
        if any(dynattr.has_runtime(v) for v in op.attrs.values()):
            op = _with_runtime_attrs(op, values)
        if op.subgraphs:
            results = run_control(op, values)
        elif op.kind.dialect not in STDLIB_DIALECTS:
            results = run_own_operator(op, [values[n] if n else None for n in op.inputs])
        else:
            results = run_op_node(op, [values[n] if n else None for n in op.inputs])
        if len(results) != len(op.outputs):
            raise InvalidGraphError(f"{op.kind.name} '{op.label}' produced {len(results)} outputs, "
                                    f"the graph names {len(op.outputs)}")
        for name, value in zip(op.outputs, results):
            t = graph.tensor(name)
            value = np.asarray(value)
            if value.ndim != t.rank or any(d is not None and d != e for d, e in zip(t.shape, value.shape)):
                raise MismatchError(f"{op.kind.name} '{op.label}': output '{name}' has shape "
                                    f"{list(value.shape)}, the graph declares {list(t.shape)}")
            values[name] = value.astype(t.dtype.numpy, copy=False)
    return values


def _with_runtime_attrs(op: ir.Op, values: Mapping[str, np.ndarray]) -> ir.Op:
    """`op` with its attributes that depend on dynamic extents evaluated from the actual shapes."""
    import dataclasses
    shapes = {n: np.shape(v) for n, v in values.items()}
    what = f"{op.kind.name} '{op.label}'"
    return dataclasses.replace(op, attrs={k: dynattr.resolve(v, shapes, what) for k, v in op.attrs.items()})


def _run_sub(g: ir.Graph, own: list, values: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """Runs a control-flow subgraph: its first inputs are `own`, the rest are captured outer
    tensors under their own names (qsim.skriptnd.control)."""
    feeds = dict(zip(g.inputs, own))
    for name in g.inputs[len(own):]:
        feeds[name] = values[name]
    out = run_graph(g, feeds)
    return [out[n] for n in g.outputs]


def run_control(op: ir.Op, values: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """control.if / control.loop (2.10.1) as control.py composes them."""
    if op.kind.name == "control.if":
        cond = np.asarray(values[op.inputs[0]]).reshape(-1)
        if cond.size != 1:
            raise DataError(f"{op.kind.name} '{op.label}': the condition has {cond.size} values, "
                            "a branch needs one (2.10.1)")
        g = op.subgraphs["then_graph" if bool(cond[0]) else "else_graph"]
        return _run_sub(g, [], values)
    a = op.attrs
    n_carried, n_scans, length = a.get("carried", 0), a.get("scans", 0), a.get("scan_length", 0)
    state = [values[n] for n in op.inputs[:n_carried]]
    pos = n_carried
    packs = []
    for _ in range(n_scans):
        packs.append([values[n] for n in op.inputs[pos:pos + length]])
        pos += length
    count = a.get("count")
    if a.get("dynamic_count"):
        count = int(np.asarray(values[op.inputs[pos]]).reshape(-1)[0])
    body = op.subgraphs["body_graph"]
    pre, post = op.subgraphs.get("cond_graph"), op.subgraphs.get("post_cond_graph")
    scan_out: list[list] = []
    step = 0
    while count is None or step < count:
        if step >= MAX_LOOP_STEPS:
            raise UnsupportedError(f"{op.kind.name} '{op.label}': more than {MAX_LOOP_STEPS} iterations; "
                                   "is the loop condition ever false?")
        own = state + [p[step] for p in packs] + ([np.asarray(step, np.int64)] if a.get("index") else [])
        if pre is not None and not bool(np.asarray(_run_sub(pre, own, values)[0]).reshape(-1)[0]):
            break
        results = _run_sub(body, own, values)
        state = results[:n_carried]
        for j, v in enumerate(results[n_carried:]):
            if j >= len(scan_out):
                scan_out.append([])
            scan_out[j].append(v)
        step += 1
        if post is not None:
            own = state + [p[step - 1] for p in packs] + ([np.asarray(step - 1, np.int64)] if a.get("index") else [])
            if not bool(np.asarray(_run_sub(post, own, values)[0]).reshape(-1)[0]):
                break
    return state + [v for lst in scan_out for v in lst]


def _register_with_runtime() -> None:
    """Plugs the stdlib dialects into qsim.runtime when that module offers register_dialect."""
    try:
        from ..runtime import register_dialect  # type: ignore[attr-defined]
    except ImportError:
        return
    for dialect in STDLIB_DIALECTS:
        register_dialect(dialect, run_op_node)


register_stdlib_kinds()
_register_with_runtime()


# ---- `qsim run MODEL --input x.npy` ---------------------------------------------------------

def load_model(path: str) -> ir.Graph:
    """The model at `path` as an ir.Graph, through the front end's qsim.load."""
    import qsim
    load = getattr(qsim, "load", None)
    if load is None:
        raise UnsupportedError("this qsim build cannot load models yet (qsim.load is missing)")
    return load(path)


def read_inputs(graph: ir.Graph, specs: list[str]) -> dict[str, np.ndarray]:
    """`--input` values: `file.npy` (graph input order) or `name=file.npy`."""
    from pathlib import Path
    named, positional = {}, []
    for spec in specs:
        name, sep, file = spec.partition("=")
        if sep and name in graph.inputs:
            named[name] = file
        elif sep and not Path(spec).exists():
            raise DataError(f"--input {spec}: graph '{graph.name}' has no input '{name}'",
                            hint="inputs are " + ", ".join(graph.inputs))
        else:
            positional.append(spec)
    free = [n for n in graph.inputs if n not in named]
    if len(positional) > len(free):
        raise DataError(f"{len(specs)} --input arrays for graph '{graph.name}' with inputs "
                        + ", ".join(graph.inputs))
    named.update(zip(free, positional))
    from ..userdata import check_finite, read_npy
    arrays = {}
    for name, file in named.items():
        arrays[name] = read_npy(file, "--input")
        check_finite(arrays[name], f"--input {file} (input '{name}')")
    return arrays


def _file_name(tensor_name: str) -> str:
    return tensor_name.replace("/", "_") + ".npy"


def write_outputs(graph: ir.Graph, values: Mapping[str, np.ndarray], output: str | None,
                  dump: str | None) -> None:
    """`--output` (one .npy array, or a .npz of several) and `--dump` (a folder of every
    tensor), each replacing its target only when complete (qsim.atomic)."""
    from ..atomic import atomic_directory, atomic_file
    if output:
        outs = {n: values[n] for n in graph.outputs}
        with atomic_file(output) as tmp, open(tmp, "wb") as f:
            if len(outs) == 1:
                np.save(f, next(iter(outs.values())))
            else:
                np.savez(f, **outs)
    if dump:
        with atomic_directory(dump) as tmpdir:
            for name, value in values.items():
                np.save(tmpdir / _file_name(name), value)


def summarize(graph: ir.Graph, values: Mapping[str, np.ndarray]) -> str:
    lines = []
    for name in graph.outputs:
        v = values[name]
        stats = (f" min {v.min():.6g} max {v.max():.6g} mean {v.mean():.6g}"
                 if v.size and v.dtype.kind in "iuf" else "")
        lines.append(f"{name}: {v.dtype}{list(v.shape)}{stats}")
    return "\n".join(lines)


def run_float_model(path: str, input_specs: list[str], output: str | None = None,
                    dump: str | None = None) -> str:
    """`qsim run` for a float model: load, read `--input` arrays, execute, write `--output` and
    `--dump`; returns the summary to print."""
    graph = load_model(path)
    values = run_graph(graph, read_inputs(graph, input_specs))
    write_outputs(graph, values, output, dump)
    return summarize(graph, values)
