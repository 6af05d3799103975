"""`qsim check MODEL`: parse and compose a model, and summarize it (or fail with located errors).

The summary lists each composed graph: its inputs and outputs, the operators by kind, every tensor
with its type and shape (dynamic extents as `?<=bound`), where the data of variables is missing,
and the quantization annotations.
"""
from __future__ import annotations

import os
from collections import Counter
from typing import Iterable

from .. import ir
from ..errors import UsageError


def _shape(t: ir.Tensor) -> str:
    dims = []
    for k, d in enumerate(t.shape):
        if d is None:
            bound = t.max_shape[k] if t.max_shape and t.max_shape[k] >= 0 else "?"
            dims.append(f"?<={bound}")
        else:
            dims.append(str(d))
    return f"{t.dtype}[{', '.join(dims)}]"


def _quant(q: ir.QuantInfo) -> str:
    if q.per_channel:
        scales = q.scales()
        text = f"per-channel axis {q.axis}, {len(scales)} scales in [{scales.min():.6g}, {scales.max():.6g}]"
    else:
        text = f"scale {float(q.scales()[0]):.6g}, zero point {int(q.zero_points()[0])}"
    sign = "signed" if q.signed else "unsigned"
    sym = ", symmetric" if q.symmetric else ""
    return f"{text}, {q.bits}-bit {sign}{sym} ({q.source})"


def summarize(graph: ir.Graph, missing_data: Iterable[str] = (), indent: str = "") -> list[str]:
    lines = [f"{indent}graph {graph.name}: {len(graph.ops)} operators, {len(graph.tensors)} tensors"]
    for name in graph.inputs:
        lines.append(f"{indent}  input   {name}: {_shape(graph.tensors[name])}")
    for name in graph.outputs:
        lines.append(f"{indent}  output  {name}: {_shape(graph.tensors[name])}")
    kinds = Counter(op.kind.name for op in graph.ops)
    lines.append(f"{indent}  operators: " + ", ".join(f"{k} x{n}" for k, n in sorted(kinds.items())))
    lines.append(f"{indent}  tensors:")
    for name, t in graph.tensors.items():
        role = "const" if t.is_constant else ("input" if name in graph.inputs else "")
        extra = f"  [{role}]" if role else ""
        lines.append(f"{indent}    {name}: {_shape(t)}{extra}")
    quant = [(n, t.quant) for n, t in graph.tensors.items() if t.quant is not None]
    if quant:
        lines.append(f"{indent}  quantization:")
        for name, q in quant:
            lines.append(f"{indent}    {name}: {_quant(q)}")
    missing = list(missing_data)
    if missing:
        lines.append(f"{indent}  variables without data ({len(missing)}): " + ", ".join(missing[:8])
                     + (" ..." if len(missing) > 8 else ""))
    for op in graph.ops:
        for role, sub in op.subgraphs.items():
            lines.append(f"{indent}  subgraph {role} of {op.kind.name} '{op.label}':")
            lines.extend(summarize(sub, (), indent + "    "))
    return lines


def _compose_each(path: str, names: list[str], keep: Iterable[str]) -> list:
    """`--all`: every graph is composed even when others fail; failures are reported together, each
    with its location (the error's location is the first failure's)."""
    from ..errors import QsimError, SemanticError
    from .model import compose_graphs
    results, failures = [], []
    for name in names:
        try:
            results.extend(compose_graphs(path, graph=name, keep=keep, require_data=False))
        except QsimError as err:
            failures.append((name, err))
    if failures:
        listing = "\n".join(f"  graph '{name}': {err.format()}".replace("\n", "\n    ") for name, err in failures)
        raise SemanticError(f"{len(failures)} of {len(names)} graphs do not compose "
                            f"({len(results)} do):\n{listing}", location=failures[0][1].location,
                            hint="compose one with --graph NAME to see its summary")
    return results


def check_model(path: str, *, all_graphs: bool = False, graph: str | None = None,
                keep: Iterable[str] = ()) -> str:
    """Composes the model at `path` and returns the summary text; raises QsimError when invalid."""
    from ..loader import model_kind
    if model_kind(path) == "skriptnd":
        from .model import compose_graphs, open_model
        modules, main = open_model(path)
        if not modules.modules[main].graphs:
            # a module of operators (e.g. a library module): check every definition statically
            from .validate import validate_module
            count = validate_module(modules, main)
            return f"{path}: valid SkriptND module without graphs, {count} operator definition(s) checked"
        if all_graphs:
            results = _compose_each(path, [g.name for g in modules.modules[main].graphs], keep)
        else:
            results = compose_graphs(path, graph=graph, keep=keep, require_data=False)
        lines = [f"{path}: valid SkriptND model, {len(results)} graph(s) composed"]
        lines.extend(f"note: {n}" for n in results[0].notes)
        for r in results:
            lines.extend(summarize(r.graph, r.missing_data))
        return "\n".join(lines)
    from ..loader import load
    g = load(path)
    form = "ONNX" if model_kind(path) == "onnx" else "NNEF 1.0"
    # an NNEF 1.0 document holds exactly one graph (1.0 spec 3.1), so --graph can only name it;
    # --keep would keep compound operators whole, which NNEF 1.0 fragments do not have
    if graph is not None and graph != g.name:
        raise UsageError(f"{os.fspath(path)} has one graph, '{g.name}'; there is no graph '{graph}'",
                         hint=f"an {form} model holds one graph: leave out --graph or use --graph {g.name}")
    if list(keep):
        raise UsageError(f"--keep applies to SkriptND models; an {form} model has no compound "
                         "operators to keep", hint="leave out --keep")
    return "\n".join([f"{os.fspath(path)}: valid {form} model"] + summarize(g))
