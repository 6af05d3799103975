"""Runner of SkriptND control flow: control.if and control.loop (2.10.1) as
qsim.skriptnd.compose.control composes them.

A subgraph's first inputs are its own (loop state, scan items, the index); the rest are outer
tensors it captures, under their own names, read from the values computed so far.
"""
from __future__ import annotations

import numpy as np

from ... import ir
from ...errors import DataError, UnsupportedError
from ...skriptnd.compose.control import MAX_LOOP_STEPS   # a loop that runs longer is taken to be endless


def _run_sub(g: ir.Graph, own: list, context) -> list[np.ndarray]:
    feeds = dict(zip(g.inputs, own))
    for name in g.inputs[len(own):]:
        feeds[name] = context.values[name]
    return context.run_subgraph(g, feeds)


def _truth(value) -> bool:
    return bool(np.asarray(value).reshape(-1)[0])


def run_control(op: ir.Op, inputs: list, context) -> list[np.ndarray]:
    if op.kind.name == "control.if":
        cond = np.asarray(inputs[0]).reshape(-1)
        if cond.size != 1:
            raise DataError(f"{op.kind.name} '{op.label}': the condition has {cond.size} values, "
                            "a branch needs one (2.10.1)")
        return _run_sub(op.subgraphs["then_graph" if bool(cond[0]) else "else_graph"], [], context)
    if op.kind.name != "control.loop":
        raise UnsupportedError(f"{op.kind.name} '{op.label}': unknown control-flow operator",
                               hint="control flow is control.if or control.loop (2.10.1)")
    return _run_loop(op, inputs, context)


def _run_loop(op: ir.Op, inputs: list, context) -> list[np.ndarray]:
    a = op.attrs
    n_carried, n_scans, length = a.get("carried", 0), a.get("scans", 0), a.get("scan_length", 0)
    state = list(inputs[:n_carried])
    pos = n_carried
    packs = []
    for _ in range(n_scans):
        packs.append(list(inputs[pos:pos + length]))
        pos += length
    count = a.get("count")
    if a.get("dynamic_count"):
        count = int(np.asarray(inputs[pos]).reshape(-1)[0])
    body = op.subgraphs["body_graph"]
    pre, post = op.subgraphs.get("cond_graph"), op.subgraphs.get("post_cond_graph")

    def own(step: int) -> list:
        return state + [p[step] for p in packs] + ([np.asarray(step, np.int64)] if a.get("index") else [])

    scan_out: list[list] = []
    step = 0
    while count is None or step < count:
        if pre is not None and not _truth(_run_sub(pre, own(step), context)[0]):
            break
        if step >= MAX_LOOP_STEPS:      # about to start one step more than a loop may take
            raise UnsupportedError(f"{op.kind.name} '{op.label}': more than {MAX_LOOP_STEPS} iterations; "
                                   "is the loop condition ever false?")
        results = _run_sub(body, own(step), context)
        state = results[:n_carried]
        for j, v in enumerate(results[n_carried:]):
            if j >= len(scan_out):
                scan_out.append([])
            scan_out[j].append(v)
        step += 1
        if post is not None and not _truth(_run_sub(post, own(step - 1), context)[0]):
            break
    return state + [v for lst in scan_out for v in lst]
