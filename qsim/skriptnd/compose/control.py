"""Right-hand sides other than a single invocation (NNEF 2.0 draft 2.10, 2.10.1).

- a plain expression: a tensor alias (`y = x`), a pack of tensors, or a compile-time value (which
  becomes a constant tensor);
- a block `{ ...; yield a, b; }`;
- `if ... then ... elif ... else ...`: a compile-time condition (no tensors involved) selects the
  branch statically, with null-tested optionals promoted; a tensor condition makes a dynamic
  branch, an op of kind `control.if` with one subgraph per branch;
- loops: `unroll` (and any loop whose count is a compile-time value and that is written with
  `unroll`) is expanded statically, a fresh tensor per step; `do` loops become an op of kind
  `control.loop` whose body (and condition) are subgraphs. Loop-carried values are the first
  outputs of the body, the rest are scan outputs (packed over the iterations).

Subgraphs list the outer tensors they read (captures) after their own inputs, and the control op
lists the same tensors as its trailing inputs, so every ir.Graph stays self-contained.
"""
from __future__ import annotations

import numpy as np

from ... import ir
from ...errors import UnsupportedError
from .. import ast
from . import dynattr
from .composed_graph import ComposedGraphBuilder, Frame
from .dynpack import DynPack
from ..evaluate import Evaluator
from .instance import eval_shape
from ..values import Dyn, TensorValue, error, is_pack, require_static, show, type_of

IF_KIND = "control.if"
LOOP_KIND = "control.loop"

# An unrolled loop copies its body, and a scan makes one output tensor per step, into the composed
# graph: past this many steps the graph is refused rather than built (and the text's count is
# surely a mistake: real models unroll a few hundred steps at most).
MAX_COMPOSED_STEPS = 100_000
# A loop that runs longer is taken to be endless (the executor stops condition loops there; a
# compile-time count past it is refused when composing).
MAX_LOOP_STEPS = 1_000_000


def compose_rhs(c, frame, b, value, hints, n_targets):
    if isinstance(value, ast.Block):
        return compose_block(c, frame, b, value)
    if isinstance(value, ast.If):
        return compose_if(c, frame, b, value, hints, n_targets)
    if isinstance(value, ast.Loop):
        return compose_loop(c, frame, b, value, hints, n_targets)
    return [c.eval_arg(frame, b, value, value.loc)]


def compose_part(c, frame, b, part, hints, label_hint):
    """An invocation, block or expression in a branch or loop body → list of results."""
    if isinstance(part, ast.Invocation):
        label = part.label or label_hint
        return c.invoke(frame, b, part, hints, label)
    if isinstance(part, ast.Block):
        return compose_block(c, frame, b, part)
    value = c.eval_arg(frame, b, part, part.loc)
    return list(value) if is_pack(value) and not isinstance(value, TensorValue) and len(hints) > 1 else [value]


def compose_block(c, frame, b, block: ast.Block):
    scope = frame.scope + (block.label + "." if block.label else "")
    env = dict(frame.env)
    env["__assigned__"] = set()
    inner = Frame(frame.module, frame.op, frame.qualname, scope, env, frame.public, frame.where)
    c.enter(frame.where, block.loc)
    try:
        for comp in block.components:
            c.component(inner, b, comp)
    finally:
        c.depth -= 1
    out = []
    for y in block.yields:
        v = c.eval_arg(inner, b, y.operand if isinstance(y, ast.Expand) else y, y.loc)
        if v is None:
            raise error(f"{frame.where}: a block must not yield a null value (2.10.1)", y.loc)
        if isinstance(y, ast.Expand) and is_pack(v):
            out.extend(v)
        else:
            out.append(v)
    return out


# ---------------------------------------------------------------- branching

def _static_condition(frame, cond):
    """The compile-time value of a condition, or None when it involves tensors (dynamic)."""
    if isinstance(cond, (ast.Invocation, ast.Block)):
        return None
    value = Evaluator(frame.env, frame.where).eval(cond)
    if isinstance(value, TensorValue):
        return None
    if type_of(value) != "bool" or is_pack(value) or isinstance(value, Dyn):
        raise error(f"{frame.where}: a branch condition must be a bool value or a bool tensor, got {show(value)}",
                    cond.loc)
    return bool(value)


def compose_if(c, frame, b, node: ast.If, hints, n_targets):
    label_hint = _label_hint(hints)
    statics = []
    for cond, body in node.branches:
        s = _static_condition(frame, cond)
        if s is None:
            break
        statics.append(s)
        if s:
            return compose_part(c, frame, b, body, hints, label_hint)
    else:
        return compose_part(c, frame, b, node.otherwise, hints, label_hint)
    # dynamic from the first non-static condition on
    k = len(statics)
    cond, body = node.branches[k]
    rest = ast.If(node.loc, node.branches[k + 1:], node.otherwise) if k + 1 < len(node.branches) else node.otherwise
    cond_values = compose_part(c, frame, b, cond, [None], label_hint and label_hint + "_cond")
    cv = cond_values[0]
    if not isinstance(cv, TensorValue) or cv.dtype != "bool":
        raise error(f"{frame.where}: a dynamic branch condition must be a bool tensor", cond.loc)
    then_g, then_out, then_caps = _subgraph(c, frame, b, f"{label_hint or 'if'}.then", body, n_targets, ())
    else_g, else_out, else_caps = _subgraph(c, frame, b, f"{label_hint or 'if'}.else", rest, n_targets, ())
    if len(then_out) != len(else_out):
        raise error(f"{frame.where}: the branches yield {len(then_out)} and {len(else_out)} results", node.loc)
    caps = list(dict.fromkeys(then_caps + else_caps))
    then_g = _with_inputs(then_g, caps, b)
    else_g = _with_inputs(else_g, caps, b)
    results = []
    for j, (tv, ev) in enumerate(zip(then_out, else_out)):
        if tv.dtype != ev.dtype or tv.rank != ev.rank:
            raise error(f"{frame.where}: branch results {j} differ in type or rank ({tv} vs {ev})", node.loc)
        shape = tuple(x if _same_dim(x, y) else _join(x, y) for x, y in zip(tv.shape, ev.shape))
        name = hints[j] if j < len(hints) and isinstance(hints[j], str) else frame.scope + f"if_{j}"
        results.append(b.tensor(name, tv.dtype, shape, loc=node.loc))
    kind = ir.register_op_kind(IF_KIND, doc="dynamic if-then-else (SkriptND 2.10.1)")
    b.ops.append(ir.Op(kind, (cv.name,) + tuple(caps), tuple(r.name for r in results), {},
                       {"then_graph": then_g, "else_graph": else_g}, name=label_hint or results[0].name))
    return results


def _same_dim(x, y):
    return (not isinstance(x, Dyn) and not isinstance(y, Dyn) and x == y) or (
        isinstance(x, Dyn) and isinstance(y, Dyn) and x.key == y.key)


def _join(x, y):
    his = [d.hi if isinstance(d, Dyn) else d for d in (x, y)]
    return Dyn(f"({_k(x)} | {_k(y)})", 0, None if None in his else max(his))


def _k(d):
    return d.key if isinstance(d, Dyn) else str(d)


def _label_hint(hints):
    """The label a single target gives a branch or loop: the last part of its tensor name, as
    an invocation is labelled by its target's plain name (2.10). The hint itself is scoped, and
    prefixing a scope with it again would double the names at every nesting level."""
    if len(hints) != 1 or not isinstance(hints[0], str):
        return None
    return hints[0].rsplit(".", 1)[-1]


def _subgraph(c, frame, outer, name, part, n_results, inputs):
    """Composes `part` into a new builder whose parent is `outer`; returns (graph, results, captures).

    `inputs` are (local name, TensorValue template) pairs that become the subgraph's own inputs."""
    sub = ComposedGraphBuilder(name, parent=outer)
    env = dict(frame.env)
    env["__assigned__"] = set()
    own_inputs = []
    for local, template in inputs:
        tv = sub.tensor(f"{name}.{local}", template.dtype, template.shape)
        env[local] = tv
        own_inputs.append(tv.name)
    inner = Frame(frame.module, frame.op, frame.qualname, f"{name}.", env, frame.public, frame.where)
    results = compose_part(c, inner, sub, part, [None] * n_results, None)
    flat = []
    for r in results:
        flat.extend(r if is_pack(r) else (r,))
    for r in flat:
        if not isinstance(r, TensorValue):
            raise error(f"{frame.where}: a control-flow body must yield tensors", part.loc)
    caps = sub.captures([r.name for r in flat])
    graph = sub.finish(own_inputs, [r.name for r in flat])
    return graph, flat, caps


def _with_inputs(g: ir.Graph, caps, outer=None):
    """`g` taking the captured outer tensors `caps` as trailing inputs; captures another body of
    the same op needs (a branch, a loop condition) are copied in from `outer` (a ComposedGraphBuilder)."""
    inputs = list(g.inputs) + [n for n in caps if n not in g.inputs]
    tensors = dict(g.tensors)
    for n in caps:
        if n not in tensors:
            tensors[n] = outer.lookup(n)
    return ir.Graph(g.name, inputs, g.outputs, g.ops, tensors)


# ---------------------------------------------------------------- loops

_NUMPY = {"real": np.float32, "int": np.int64, "bool": np.bool_}


def _filled(b: ComposedGraphBuilder, name: str, dtype: str, shape: tuple, fill, loc, what: str) -> TensorValue:
    """A tensor of `shape` filled with the scalar `fill` (a loop variable's initial value, as in
    math.cumsum's running sum). With static extents it is a constant. With run-time extents
    (2.6.1) it is a constant of extent 1 there, broadcast to the actual extents when the graph
    runs (layout.broadcast whose `shape` holds run-time extents, dynattr); an extent that is not
    a graph input's dimension cannot be evaluated then, and is a located UnsupportedError now."""
    if not any(isinstance(d, Dyn) for d in shape):
        return b.tensor(name, dtype, shape, np.full(shape, fill, dtype=_NUMPY[dtype]), loc)
    target = dynattr.bind(tuple(shape), b.symbols)
    if any(isinstance(d, Dyn) for d in target):
        require_static(shape, what, loc, hint="its run-time extents are not dimensions of the graph's inputs, "
                                              "so they cannot be evaluated when the graph runs")
    ones = tuple(1 if isinstance(d, Dyn) else int(d) for d in shape)
    seed = b.tensor(name + "_fill", dtype, ones, np.full(ones, fill, dtype=_NUMPY[dtype]), loc)
    out = b.tensor(name, dtype, shape, loc=loc)
    kind = ir.register_op_kind("layout.broadcast", doc="NNEF 2.0 standard operator")
    b.ops.append(ir.Op(kind, (seed.name,), (out.name,), {"axes": tuple(range(len(shape))), "shape": target},
                       name=out.name))
    return out


def compose_loop(c, frame, b, loop: ast.Loop, hints, n_targets):
    ev = Evaluator(frame.env, frame.where)
    carried = []
    for cv in loop.carried:
        value = c.eval_arg(frame, b, cv.init, cv.init.loc) if cv.type is None else None
        if cv.type is not None:
            init = ev.eval(cv.init)
            shape, _ = eval_shape(cv.type, frame.env, frame.where, cv)
            if isinstance(init, TensorValue):
                value = init
            else:
                value = _filled(b, frame.scope + cv.name + "_init", cv.type.base, shape, init, cv.loc,
                                f"{frame.where}: the initial value of loop variable '{cv.name}'")
        if not isinstance(value, TensorValue):
            raise error(f"{frame.where}: loop variable '{cv.name}' needs a tensor initial value", cv.loc)
        carried.append((cv.name, value))
    scans = []
    for s in loop.scans:
        pack = ev.eval(s.pack)
        if not is_pack(pack) or not all(isinstance(t, TensorValue) for t in pack):
            if isinstance(pack, DynPack):
                raise UnsupportedError(f"{frame.where}: 'for {s.name} : ...' scans a pack of run-time length "
                                       f"({pack}); loops scan packs of compile-time length", location=s.loc,
                                       hint="unstack a tensor of compile-time extent, or give the pack a "
                                            "compile-time length as in ..(3)")
            raise error(f"{frame.where}: 'for {s.name} : ...' needs a pack of tensors", s.loc)
        scans.append((s.name, pack))
    if scans and len({len(p) for _, p in scans}) > 1:
        raise error(f"{frame.where}: scanned packs have different lengths {[len(p) for _, p in scans]}", loop.loc)
    count = None
    if loop.count is not None and loop.count.count is not None:
        count = ev.eval(loop.count.count)
        if count is not None and not isinstance(count, TensorValue) and (isinstance(count, bool) or type_of(count) != "int"
                                                   or is_pack(count) or count < 0):
            raise error(f"{frame.where}: a loop's iteration count must be a non-negative int or an "
                        f"int tensor, got {show(count)}", loop.count.count.loc)
    if count is None and scans:
        count = len(scans[0][1])
    if scans and not scans[0][1]:
        # the body's scanned inputs take the type of the packs' items, and a pack of 0 tensors
        # has none (e.g. math.cumsum along an axis of extent 0)
        raise error(f"{frame.where}: 'for {scans[0][0]} : ...' scans an empty pack, so the loop body "
                    "has no item to compose with", loop.loc,
                    hint="the scanned extent is 0: give the axis a positive extent, or skip the "
                         "operator for empty tensors")
    if loop.pre_condition is None and loop.post_condition is None and count is None:
        raise error(f"{frame.where}: a loop needs a condition, a 'for' clause or an iteration count", loop.loc)
    static = count is not None and not isinstance(count, TensorValue)
    if static and count > MAX_LOOP_STEPS:
        raise error(f"{frame.where}: iteration count {count} is more than the {MAX_LOOP_STEPS} steps "
                    "qsim runs a loop for", loop.count.count.loc)
    if static and count > MAX_COMPOSED_STEPS and (loop.unroll or n_targets > len(carried)):
        raise error(f"{frame.where}: the loop would compose {count} steps into the graph, more than "
                    f"qsim composes ({MAX_COMPOSED_STEPS})", loop.loc,
                    hint="use a loop without 'unroll' and without scan outputs, or fewer steps")
    if loop.unroll:
        if not static:
            raise error(f"{frame.where}: 'unroll' needs a compile-time iteration count", loop.loc)
        return _unroll(c, frame, b, loop, carried, scans, int(count), hints)
    return _dynamic_loop(c, frame, b, loop, carried, scans, count, hints, n_targets)


def _unroll(c, frame, b, loop, carried, scans, count, hints):
    if scans and count > len(scans[0][1]):
        raise error(f"{frame.where}: iteration count {count} exceeds the scanned packs' length", loop.loc)
    state = [v for _, v in carried]
    scan_out: list[list] = []
    label = _label_hint(hints) or "loop"
    for i in range(count):
        env = dict(frame.env)
        env["__assigned__"] = set()
        for (name, _), v in zip(carried, state):
            env[name] = v
        for name, pack in scans:
            env[name] = pack[i]
        if loop.count is not None and loop.count.index:
            env[loop.count.index] = b.constant(f"{frame.scope}{label}.{loop.count.index}_{i}", i, loop.loc)
        inner = Frame(frame.module, frame.op, frame.qualname, f"{frame.scope}{label}_{i}.", env,
                      frame.public, frame.where)
        results = compose_part(c, inner, b, loop.body, _step_hints(hints, len(carried), i, count), "step")
        if len(results) < len(carried):
            raise error(f"{frame.where}: the loop body gives {len(results)} results for {len(carried)} loop "
                        "variables", loop.body.loc)
        state = results[:len(carried)]
        extra = results[len(carried):]
        if not scan_out:
            scan_out = [[] for _ in extra]
        for lst, v in zip(scan_out, extra):
            lst.append(v)
    return list(state) + [tuple(lst) for lst in scan_out]


def _step_hints(hints, n_carried, i, count) -> list:
    """Names for the results of unrolled step i: the targets' names for the loop variables' final
    values (last step), `<target>_<i>` for the per-step items of a scan output (the naming of pack
    items), so that an unrolled loop's results are named as the loop written with `do` would be."""
    step = [hints[k] if i == count - 1 and k < len(hints) and isinstance(hints[k], str) else None
            for k in range(n_carried)]
    step += [f"{h}_{i}" if isinstance(h, str) else None for h in hints[n_carried:]]
    return step + [None] * (n_carried + 1 - len(step))


def _dynamic_loop(c, frame, b, loop, carried, scans, count, hints, n_targets):
    label = _label_hint(hints) or "loop"
    inputs = [(name, v) for name, v in carried]
    inputs += [(name, pack[0]) for name, pack in scans]
    if loop.count is not None and loop.count.index:
        inputs.append((loop.count.index, TensorValue("index", "int", ())))
    n_body = max(n_targets, len(carried))
    body_g, body_out, body_caps = _subgraph(c, frame, b, f"{label}.body", loop.body, n_body, inputs)
    if len(body_out) < len(carried):
        raise error(f"{frame.where}: the loop body gives {len(body_out)} results for {len(carried)} loop "
                    "variables", loop.body.loc)
    for (name, init), out in zip(carried, body_out):
        if init.dtype != out.dtype or init.rank != out.rank:
            raise error(f"{frame.where}: loop variable '{name}' is {init} but the body gives {out}", loop.loc)
    subgraphs = {"body_graph": _with_inputs(body_g, body_caps)}
    caps = list(body_caps)
    for role, cond in (("cond_graph", loop.pre_condition), ("post_cond_graph", loop.post_condition)):
        if cond is None:
            continue
        cg, cout, ccaps = _subgraph(c, frame, b, f"{label}.{role[:-6]}", cond, 1, inputs)
        if len(cout) != 1 or cout[0].dtype != "bool":
            raise error(f"{frame.where}: a loop condition must give one bool tensor", cond.loc)
        subgraphs[role] = _with_inputs(cg, ccaps)
        caps += [n for n in ccaps if n not in caps]
    for role in subgraphs:
        subgraphs[role] = _with_inputs(subgraphs[role], caps, b)
    attrs = {"carried": len(carried), "scans": len(scans)}
    op_inputs = [v.name for _, v in carried]
    for _, pack in scans:
        op_inputs += [t.name for t in pack]
    attrs["scan_length"] = len(scans[0][1]) if scans else 0
    if isinstance(count, TensorValue):
        op_inputs.append(count.name)
        attrs["dynamic_count"] = True
    elif count is not None:
        attrs["count"] = int(count)
    if loop.count is not None and loop.count.index:
        attrs["index"] = True
    results, out_names = [], []
    for j, (name, init) in enumerate(carried):
        hint = hints[j] if j < len(hints) and isinstance(hints[j], str) else frame.scope + f"{label}.{name}"
        tv = b.tensor(hint, init.dtype, init.shape, loc=loop.loc)
        results.append(tv)
        out_names.append(tv.name)
    for j, out in enumerate(body_out[len(carried):], start=len(carried)):
        if count is None or isinstance(count, TensorValue):
            raise UnsupportedError(f"{frame.where}: scan outputs need a compile-time iteration count",
                                   location=loop.loc)
        hint = hints[j] if j < len(hints) and isinstance(hints[j], str) else frame.scope + f"{label}.out{j}"
        pack = tuple(b.tensor(f"{hint}_{i}", out.dtype, out.shape, loc=loop.loc) for i in range(int(count)))
        results.append(pack)
        out_names += [t.name for t in pack]
    if loop.pre_condition is not None or loop.post_condition is not None:
        attrs["condition"] = "pre" if loop.pre_condition is not None else "post"
    kind = ir.register_op_kind(LOOP_KIND, doc="dynamic loop (SkriptND 2.10.1)")
    b.ops.append(ir.Op(kind, tuple(op_inputs) + tuple(caps), tuple(out_names), attrs, subgraphs, name=label))
    return results
