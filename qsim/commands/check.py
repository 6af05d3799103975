"""`qsim check`: parse and compose a model and print a summary of its graph (or located errors).

The summary lists each composed graph: its inputs and outputs, the operators by kind, every tensor
with its type and shape (dynamic extents as `?<=bound`), where the data of variables is missing,
and the quantization annotations.
"""
from __future__ import annotations

import argparse
import os
from collections import Counter
from typing import Iterable

from .. import ir
from ..errors import UsageError
from ..loader import load, model_kind, require_outputs
from ..skriptnd.check import check_skriptnd

NAME = "check"
HELP = "parse and compose a model (.sknd, model folder, graph.nnef, .tgz) and summarize it, or report located errors"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", help="a .sknd file, a folder with main.sknd or graph.nnef, a .tgz/.tar, or a .onnx file")
    parser.add_argument("--all", action="store_true", help="compose every graph of the main module")
    parser.add_argument("--graph", help="compose the graph of this name (default: the first)")
    parser.add_argument("--keep", help="comma-separated compound operators to keep whole, e.g. nn.softmax")


def run(args: argparse.Namespace) -> int:
    keep = [k.strip() for k in (args.keep or "").split(",") if k.strip()]
    if args.keep is not None and not keep:
        raise UsageError(f"--keep {args.keep!r} names no operator",
                         hint="give comma-separated operator names, e.g. --keep nn.softmax,nn.conv")
    print(check_model(args.model, all_graphs=args.all, graph=args.graph, keep=keep))
    return 0


def check_model(path: str, *, all_graphs: bool = False, graph: str | None = None,
                keep: Iterable[str] = ()) -> str:
    """Composes the model at `path` and returns the summary text; raises QsimError when invalid."""
    if model_kind(path) == "skriptnd":
        checked = check_skriptnd(path, all_graphs=all_graphs, graph=graph, keep=keep)
        if checked.operator_count is not None:
            return (f"{path}: valid SkriptND module without graphs, {checked.operator_count} operator "
                    "definition(s) checked")
        for composed in checked.composed:
            require_outputs(composed.graph, path)
        lines = [f"{path}: valid SkriptND model, {len(checked.composed)} graph(s) composed"]
        lines.extend(f"note: {n}" for n in checked.composed[0].notes)
        for r in checked.composed:
            lines.extend(summarize(r.graph, r.missing_data))
        return "\n".join(lines)
    g = load(path)
    form = {"onnx": "ONNX", "tflite": "TFLite"}.get(model_kind(path), "NNEF 1.0")
    # an NNEF 1.0 document holds exactly one graph (1.0 spec 3.1), so --graph can only name it;
    # --keep would keep compound operators whole, which NNEF 1.0 fragments do not have
    if graph is not None and graph != g.name:
        raise UsageError(f"{os.fspath(path)} has one graph, '{g.name}'; there is no graph '{graph}'",
                         hint=f"an {form} model holds one graph: leave out --graph or use --graph {g.name}")
    if list(keep):
        raise UsageError(f"--keep applies to SkriptND models; an {form} model has no compound "
                         "operators to keep", hint="leave out --keep")
    return "\n".join([f"{os.fspath(path)}: valid {form} model"] + summarize(g))


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
