"""Spec 2.16 control flow: COND_IF (2.16.1) and WHILE_LOOP (2.16.2); their graphs are
ir.Graph attributes (Op.subgraphs in an ir graph: then_graph/else_graph, cond_graph/body_graph).

Input order follows the argument tables: COND_IF takes (input_list..., condition),
WHILE_LOOP takes (input_list...). Running a subgraph needs the graph executor, a later stage
(qsim.runtime): `cond_if` and `while_loop` take its `run_graph(graph, inputs) -> outputs`
callable. `qsim.tosa.run` validates these two operators (ERROR_IF) but cannot compute them.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ...errors import UnsupportedError
from ...ir import Graph
from ..signature import BOOL, Arg, Attr, AttrKind, Call, Mode, OperatorDef, define, spec_type_name

RunGraph = Callable[[Graph, list[np.ndarray]], list[np.ndarray]]


def _sigs(graph: Graph, names) -> list[tuple]:
    return [(tuple(graph.tensor(n).shape), graph.tensor(n).dtype) for n in names]


def _fmt(sigs) -> str:
    return "[" + ", ".join(f"{spec_type_name(dt)}{list(shape)}" for shape, dt in sigs) + "]"


def _list_sigs(call: Call, count: int) -> list[tuple]:
    return [(tuple(s), t) for s, t in zip(call.shapes[:count], call.in_types[:count])]


def _check_cond_if(call: Call):
    inputs = _list_sigs(call, len(call.shapes) - 1)
    then_g, else_g = call.attrs["then_graph"], call.attrs["else_graph"]
    for name, g in (("then_graph", then_g), ("else_graph", else_g)):
        g.verify()
        call.error_if(_sigs(g, g.inputs) != inputs, f"tensor_list_shape(input_list) != tosa_input_shape({name})",
                      f"input_list {_fmt(inputs)} vs {name} inputs {_fmt(_sigs(g, g.inputs))}")
    outs = _sigs(then_g, then_g.outputs)
    call.error_if(_sigs(else_g, else_g.outputs) != outs,
                  "tosa_output_shape(then_graph) != tosa_output_shape(else_graph)",
                  f"then_graph outputs {_fmt(outs)} vs else_graph outputs {_fmt(_sigs(else_g, else_g.outputs))}")
    call.out_types = [dt for _, dt in outs]
    return [shape for shape, _ in outs]


def cond_if(inputs: list[np.ndarray], attrs: dict, run_graph: RunGraph) -> list[np.ndarray]:
    *input_list, condition = inputs
    graph = attrs["then_graph"] if bool(condition) else attrs["else_graph"]
    return list(run_graph(graph, list(input_list)))


def _check_while(call: Call):
    inputs = _list_sigs(call, len(call.shapes))
    cond_g, body_g = call.attrs["cond_graph"], call.attrs["body_graph"]
    cond_g.verify()
    body_g.verify()
    for cond, text, what in (
            (_sigs(cond_g, cond_g.inputs) != inputs, "tensor_list_shape(input_list) != tosa_input_shape(cond_graph)",
             f"cond_graph inputs {_fmt(_sigs(cond_g, cond_g.inputs))}"),
            (_sigs(body_g, body_g.inputs) != inputs, "tensor_list_shape(input_list) != tosa_input_shape(body_graph)",
             f"body_graph inputs {_fmt(_sigs(body_g, body_g.inputs))}"),
            (_sigs(body_g, body_g.outputs) != inputs,
             "tensor_list_shape(input_list) != tosa_output_shape(body_graph)",
             f"body_graph outputs {_fmt(_sigs(body_g, body_g.outputs))}")):
        call.error_if(cond, text, f"input_list {_fmt(inputs)} vs {what}")
    call.error_if(_sigs(cond_g, cond_g.outputs) != [((), BOOL)],
                  "tosa_output_shape(cond_graph) != tosa_list_shape([bool_t])",
                  f"cond_graph outputs {_fmt(_sigs(cond_g, cond_g.outputs))}")
    call.out_types = [dt for _, dt in inputs]
    return [shape for shape, _ in inputs]


def while_loop(inputs: list[np.ndarray], attrs: dict, run_graph: RunGraph) -> list[np.ndarray]:
    values = list(inputs)                               # list[0] = input_list
    while bool(run_graph(attrs["cond_graph"], values)[0]):
        values = list(run_graph(attrs["body_graph"], values))
    return values


def _needs_executor(name: str):
    def ref(inputs: list[np.ndarray], attrs: dict) -> list[np.ndarray]:
        raise UnsupportedError(f"{name}: a control-flow operator runs its graphs, so it runs inside a "
                               "graph, not as one operator",
                               hint="run the graph with qsim.runtime.execute (or one op of it with "
                                    "qsim.runtime.executor.run_op)")
    return ref


COND_IF = define(OperatorDef(
    "COND_IF", "2.16.1",
    inputs=(Arg("input_list", "any", variadic=True), Arg("condition", "cond_t", (0,))),
    attrs=(Attr("then_graph", AttrKind.GRAPH), Attr("else_graph", AttrKind.GRAPH)),
    outputs=(Arg("output_list", "any", variadic=True),),
    modes=(Mode("any", {"cond_t": BOOL}),),
    check=_check_cond_if, ref=_needs_executor("COND_IF")))

WHILE_LOOP = define(OperatorDef(
    "WHILE_LOOP", "2.16.2",
    inputs=(Arg("input_list", "any", variadic=True),),
    attrs=(Attr("cond_graph", AttrKind.GRAPH), Attr("body_graph", AttrKind.GRAPH)),
    outputs=(Arg("output_list", "any", variadic=True),),
    modes=(Mode("any", {}),),
    check=_check_while, ref=_needs_executor("WHILE_LOOP")))
