"""Graph composition (NNEF 2.0 draft chapter 3, 2.7, 2.10, 2.11, 2.14) → ir.Graph.

`compose_graph(modules, graph_name, options)` builds the main graph: graph attributes, inputs,
variables and constants, then each @compose statement in order. An invocation of an operator is
instantiated (instance.py); a primitive operator (no @compose), or a compound one named in
`options.keep`, becomes one ir.Op of kind "<module>.<operator>"; other compound operators are
composed recursively into their primitives. Tensor names are scoped by invocation labels
(explicit `label:` or auto-generated, 2.10 "Labelling operator invocations").

Control flow (2.10.1) is in control.py; this module calls it for If/Loop right-hand sides. The
declared tensors (graph inputs and outputs, @constant, @variable) are declared.py's.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from ... import ir
from ...errors import UnsupportedError
from .. import ast
from ..evaluate import Evaluator, free_names
from .instance import instantiate, resolve_type, run_usings_and_asserts
from ..modules import ModuleSet, is_standard_location
from . import dynattr, dynpack
from .dynpack import DynPack, pack_tensors
from .composed_graph import ComposedGraphBuilder, Frame
from .declared import DeclaredTensors
from .control import compose_rhs
from .quantize import quant_info
from ..values import Dyn, TensorValue, error, is_pack, show

# Recurrences whose `steps` input (the 7th) is a run-time count: their bodies loop `..(steps)`
# times yielding per-step outputs, which a composed graph cannot hold (a scan needs a
# compile-time iteration count), so they stay whole and run by their fast paths
# (runtime/float_ops/nn_norm.py: per-step outputs stacked, extent ~|s).
WHOLE_WITH_RUNTIME_STEPS = ("nn.lstm_loop", "nn.lstm", "nn._jagged_lstm_loops")

# Operator invocations and control-flow blocks nest at most this deep while composing: a level
# takes up to ~12 Python frames (an invocation inside a branch or loop body), so 64 levels, with
# expressions nested to limits.MAX_NESTING_DEPTH inside the deepest, stay under Python's default
# recursion limit. Real models nest a handful (stdlib compounds: 4-6); deeper is a recursion.
MAX_COMPOSE_DEPTH = 64

VariableLoader = Callable[[str, TensorValue], "np.ndarray | None"]


@dataclass
class ComposeOptions:
    keep: frozenset = frozenset()           # qualified compound operators kept as one op
    attribs: Mapping[str, Any] = field(default_factory=dict)   # graph attribute values
    load_variable: VariableLoader | None = None


class Composer(DeclaredTensors):
    def __init__(self, modules: ModuleSet, options: ComposeOptions):
        self.modules = modules
        self.options = options
        self.depth = 0

    # ================================================================ the main graph
    def compose_graph(self, graph: ast.OperatorDef) -> ir.Graph:
        b = ComposedGraphBuilder(graph.name)
        where = f"graph '{graph.name}'"
        env: dict[str, Any] = {}
        for decl in graph.dtypes:
            raise UnsupportedError(f"{where}: generic graphs are not supported", location=decl.loc,
                                   hint="give the graph concrete types")
        for name in self.options.attribs:
            if name not in {a.name for a in graph.attribs}:
                raise error(f"{where} has no attribute '{name}'", graph.loc)
        for decl in graph.attribs:
            if decl.name in self.options.attribs:
                env[decl.name] = self.options.attribs[decl.name]
            elif decl.default is not None:
                env[decl.name] = Evaluator(env, where).eval(decl.default)
            elif decl.type.optional:
                env[decl.name] = None
            else:
                raise error(f"{where}: attribute '{decl.name}' has no default; give it a value", decl.loc)
        frame = Frame("main", graph, graph.name, "", env, True, where)
        inputs = []
        for decl in graph.inputs:
            if decl.type.pack is not None:
                env[decl.name] = self._packed_graph_input(decl, env, where, b)
                inputs.extend(t.name for t in pack_tensors(env[decl.name]))
                continue
            shape = self._graph_input_shape(decl, env, where)
            tv = b.tensor(decl.name, resolve_type(decl.type.base, env, decl.loc, where), shape, loc=decl.loc)
            dynattr.record_symbols(b.symbols, tv.name, tv.shape)
            env[decl.name] = tv
            b.accessible[decl.name] = tv.name
            inputs.append(tv.name)
        # a graph's @using symbols and @assert conditions, as an invoked operator's (2.8, 2.9);
        # a failed graph assertion points at itself (there is no invocation)
        run_usings_and_asserts(graph, env, where, None)
        self._locals(frame, b)
        for decl in graph.outputs:
            frame.output_names[decl.name] = decl.name
        self.compose_body(frame, b, graph.compose or ())
        outputs = []
        for decl in graph.outputs:
            value = env.get(decl.name)
            if decl.type.pack is not None and (isinstance(value, DynPack) or is_pack(value)):
                outputs.extend(self._packed_graph_output(decl, value, env, where))
                continue
            if isinstance(value, DynPack) or is_pack(value):
                raise error(f"{where}: output '{decl.name}' is declared as one tensor but is assigned "
                            f"{show_value(value)}", decl.loc, hint=f"declare it packed, as in "
                            f"{decl.name}: {decl.type.base}[...]..(n), or pick one item")
            if decl.type.pack is not None and isinstance(value, TensorValue):
                raise error(f"{where}: output '{decl.name}' is declared packed but is assigned the single "
                            f"tensor '{value.name}'", decl.loc, hint="declare it without '..(n)'")
            if not isinstance(value, TensorValue):
                raise error(f"{where}: output '{decl.name}' is never assigned in @compose", decl.loc)
            self._check_declared(decl, value, env, where)
            outputs.append(value.name)
        for comp in graph.update:
            self.component(frame, b, comp, update=True)
        for decl in graph.variables:
            if decl.name in frame.env.get("__updated__", {}):
                outputs.append(frame.env["__updated__"][decl.name])
        self._apply_quant(frame, b)
        return b.finish(inputs, outputs), list(b.missing_data)

    # ================================================================ statements
    def compose_body(self, frame: Frame, b: ComposedGraphBuilder, components):
        single = (len(components) == 1 and isinstance(components[0].value, ast.Invocation)
                  and components[0].value.label is None and not frame.op.variables
                  and not frame.op.constants and frame.scope != "")
        for comp in components:
            self.component(frame, b, comp, propagate_scope=single)

    def component(self, frame: Frame, b: ComposedGraphBuilder, comp: ast.Component, propagate_scope=False,
                  update=False):
        targets = comp.targets
        value = comp.value
        hints = [self._target_name(frame, t) for t in targets]
        if isinstance(value, ast.Invocation):
            label = value.label
            names = [t for t in targets if isinstance(t, ast.LName)]
            if label is None and propagate_scope:
                label = ""
            elif label is None:
                label = names[0].name if names else value.name.rsplit(".", 1)[-1]
            results = self.invoke(frame, b, value, hints, label)
        else:
            results = compose_rhs(self, frame, b, value, hints, len(targets))
        self._assign(frame, b, targets, results, comp, update)

    def _target_name(self, frame: Frame, t):
        """The tensor name a target asks for; for `[a, b] = ...` the names of the items (a pack
        output takes them item by item, see _emit)."""
        if isinstance(t, ast.LList):
            return tuple(self._target_name(frame, it) for it in t.items)
        if isinstance(t, ast.LName):
            if t.name in frame.output_names:
                return frame.output_names[t.name]
            return frame.scope + t.name
        return None

    def _assign(self, frame, b, targets, results, comp, update):
        flat_targets = list(targets)
        if len(results) != len(flat_targets):
            raise error(f"{frame.where}: {len(flat_targets)} names on the left but {len(results)} results",
                        comp.loc)
        for t, v in zip(flat_targets, results):
            self._assign_one(frame, b, t, v, comp, update)

    def _assign_one(self, frame, b, t, v, comp, update):
        if isinstance(t, ast.LOmit):
            return
        if isinstance(t, ast.LList):
            if not is_pack(v) or len(v) != len(t.items):
                raise error(f"{frame.where}: cannot unpack {show_value(v)} into {len(t.items)} names", t.loc)
            for it, item in zip(t.items, v):
                self._assign_one(frame, b, it, item, comp, update)
            return
        if isinstance(t, ast.LZip):
            raise UnsupportedError("unzip on the left of a @compose assignment is not supported", location=t.loc)
        name = t.name
        if update:
            var = next((d for d in frame.op.variables if d.name == name), None)
            if var is None and name in {d.name for d in frame.op.outputs + frame.op.inputs}:
                raise error(f"{frame.where}: only variables and intermediates can be assigned in @update",
                            t.loc)
            if var is not None:
                frame.env.setdefault("__updated__", {})[name] = v.name
                return
        elif any(d.name == name for d in frame.op.variables):
            raise error(f"{frame.where}: variable '{name}' can only be assigned in @update (2.11)", t.loc)
        if name in {d.name for d in frame.op.inputs} or (
                name in frame.env and name not in frame.output_names and isinstance(frame.env[name], TensorValue)
                and name in self._assigned(frame)):
            raise error(f"{frame.where}: '{name}' is already defined; intermediate tensors need unique names",
                        t.loc)
        if t.pack is not None and t.pack.length is not None:
            n = Evaluator(frame.env, frame.where).eval(t.pack.length) if free_names(t.pack.length) <= frame.env.keys() else None
            if not dynpack.check_length(v, n, f"{frame.where}: '{name}'", t.loc):
                raise error(f"{frame.where}: '{name}' is declared packed but the result is not a pack", t.loc,
                            hint=f"the right-hand side gives {show_value(v)}; write '{name} = ...' for one "
                                 "tensor (chapter 4 gives each operator's outputs)")
            if isinstance(v, DynPack):
                pass
            elif n is None and isinstance(t.pack.length, ast.Name):
                frame.env[t.pack.length.name] = len(v)
            elif n is not None and n != len(v):
                raise error(f"{frame.where}: '{name}' has {len(v)} items, {show(n)} written", t.loc)
        if t.type is not None and isinstance(v, TensorValue):
            self._check_declared(ast.ParamDecl(t.loc, name, t.type), v, frame.env, frame.where)
        frame.env[name] = v
        self._assigned(frame).add(name)
        if frame.public and isinstance(v, TensorValue):
            b.accessible.setdefault(frame.scope + name, v.name)

    @staticmethod
    def _assigned(frame) -> set:
        return frame.env.setdefault("__assigned__", set())

    # ================================================================ invocations
    def eval_arg(self, frame: Frame, b: ComposedGraphBuilder, e, loc):
        if isinstance(e, ast.Omitted):
            return None
        if isinstance(e, ast.ListExpr):
            items = []
            for it in e.items:
                if isinstance(it, ast.Expand):
                    v = Evaluator(frame.env, frame.where).eval(it.operand)
                    if not is_pack(v):
                        raise error(f"{frame.where}: '..' needs a pack here", it.loc)
                    items.extend(v)
                else:
                    items.append(self.eval_arg(frame, b, it, loc))
            return tuple(self._as_tensor(frame, b, v, it_loc(e)) for v in items)
        value = Evaluator(frame.env, frame.where).eval(e)
        if isinstance(value, DynPack):
            return value
        if is_pack(value):
            return tuple(self._as_tensor(frame, b, v, e.loc) for v in value)
        return self._as_tensor(frame, b, value, e.loc)

    def _as_tensor(self, frame, b, value, loc):
        if value is None or isinstance(value, TensorValue):
            return value
        return b.constant(frame.scope + "const", value, loc)

    def invoke(self, frame: Frame, b: ComposedGraphBuilder, inv: ast.Invocation, hints: list, label: str) -> list:
        module, op = self.modules.resolve(inv.name, frame.module, inv.loc)
        qual = f"{module}.{op.name}" if module != "main" else op.name
        attr_values, attr_locs = {}, {}
        ev = Evaluator(frame.env, frame.where)
        for a in inv.attrs:
            if a.name in attr_values:
                raise error(f"{frame.where}: attribute '{a.name}' is given twice", a.loc)
            attr_values[a.name] = ev.eval(a.value)
            attr_locs[a.name] = a.loc
        args = [self.eval_arg(frame, b, a, inv.loc) for a in inv.args]
        shown = f"'{label}'" if label else "(unlabelled)"
        where = f"{qual} invoked at {inv.loc} as {shown}"
        self.enter(where, inv.loc)
        try:
            if qual in dynpack.HANDLED or any(isinstance(a, DynPack) for a in args):
                results = dynpack.compose(frame, b, qual, attr_values, args, hints, label, inv)
                if results is not None:
                    return results
            inst = instantiate(op, qual, attr_values, attr_locs, args, inv.generics, inv.loc, where)
            primitive = (op.compose is None or qual in self.options.keep
                         or (qual in WHOLE_WITH_RUNTIME_STEPS and len(args) > 6 and args[6] is not None))
            if primitive:
                return self._emit(frame, b, inst, qual, args, hints, label, inv)
            return self._compose_compound(frame, b, inst, module, qual, op, args, hints, label, inv)
        finally:
            self.depth -= 1

    def enter(self, where: str, loc) -> None:
        """One more level of invocation or control-flow block (undone by `self.depth -= 1`)."""
        if self.depth >= MAX_COMPOSE_DEPTH:
            raise error(f"{where}: operator invocations and control-flow blocks nest deeper than "
                        f"{MAX_COMPOSE_DEPTH} levels", loc,
                        hint="is an operator invoking itself, directly or through others?")
        self.depth += 1

    def _emit(self, frame, b, inst, qual, args, hints, label, inv) -> list:
        # operators of the main module have no module prefix; their kind is `main.<name>`
        kind = ir.register_op_kind(qual if "." in qual else f"main.{qual}", doc="SkriptND operator")
        in_names = []
        for v in args + [None] * (len(inst.op.inputs) - len(args)):
            if v is None:
                in_names.append("")
            elif is_pack(v):
                in_names.extend(t.name for t in v)
            else:
                in_names.append(v.name)
        scope = frame.scope + label + "." if label else frame.scope
        results, out_names = [], []
        for k, out in enumerate(inst.outputs):
            hint = hints[k] if k < len(hints) and hints[k] else scope + out.decl.name
            items = hint if isinstance(hint, tuple) else ()
            hint = scope + out.decl.name if isinstance(hint, tuple) else hint
            tvs = []
            for j, shape in enumerate(out.shapes):
                name = hint if not out.packed else f"{hint}_{j}"
                if out.packed and j < len(items) and isinstance(items[j], str):
                    name = items[j]
                tvs.append(b.tensor(name, out.dtype, shape, loc=inv.loc))
            out_names.extend(t.name for t in tvs)
            results.append(tuple(tvs) if out.packed else tvs[0])
        attrs = {k: dynattr.bind(_plain(v), b.symbols) for k, v in inst.attrs.items() if v is not None}
        # a model's own operator carries its definition: float execution runs its @lower body
        own = not is_standard_location(inst.op.loc)
        b.ops.append(ir.Op(kind, tuple(in_names), tuple(out_names), attrs, name=(frame.scope + (label or "")) or
                           (out_names[0] if out_names else qual), definition=inst.op if own else None))
        return results

    def _compose_compound(self, frame, b, inst, module, qual, op, args, hints, label, inv) -> list:
        scope = frame.scope + label + "." if label else frame.scope
        env = dict(inst.env)
        env.pop("__assigned__", None)
        child = Frame(module, op, qual, scope, env, op.public, inst.where)
        for k, out in enumerate(op.outputs):
            if k < len(hints) and isinstance(hints[k], str):
                child.output_names[out.name] = hints[k]
            else:
                child.output_names[out.name] = scope + out.name
        if op.public:
            for decl in op.inputs:
                v = env.get(decl.name)
                if isinstance(v, TensorValue):
                    b.accessible.setdefault(scope + decl.name, v.name)
        self._locals(child, b)
        self.compose_body(child, b, op.compose)
        results = []
        for decl, out in zip(op.outputs, inst.outputs):
            v = child.env.get(decl.name)
            if v is None or (not isinstance(v, TensorValue) and not is_pack(v)):
                raise error(f"{inst.where}: output '{decl.name}' of '{qual}' is not assigned by its @compose",
                            decl.loc)
            got = v if is_pack(v) else (v,)
            for tv, shape in zip(got, out.shapes):
                if tv.dtype != out.dtype:
                    raise error(f"{inst.where}: output '{decl.name}' is declared {out.dtype} but composed as "
                                f"{tv.dtype}", decl.loc)
                if len(shape) != len(tv.shape) or any(
                        not isinstance(x, Dyn) and not isinstance(y, Dyn) and x != y
                        for x, y in zip(shape, tv.shape)):
                    raise error(f"{inst.where}: output '{decl.name}' is declared with shape {show(shape)} but "
                                f"its composition gives {show(tuple(tv.shape))}", decl.loc)
            results.append(v)
        self._apply_quant(child, b)
        return results

    # ================================================================ @quantize (2.14)
    def _apply_quant(self, frame: Frame, b: ComposedGraphBuilder):
        for entry in frame.op.quantize:
            scoped = frame.scope + entry.tensor
            name = b.accessible.get(scoped)
            if name is None:
                raise error(f"{frame.where}: @quantize names '{entry.tensor}', which is not an accessible tensor "
                            f"(scoped name '{scoped}')", entry.loc,
                            hint="only variables and constants of private operators are reachable by scoped "
                                 "names; make the operator 'public' to reach its other tensors (2.10)")
            module, op = self.modules.resolve(entry.op, frame.module, entry.loc)
            b.quant[name] = quant_info(entry, module, op, b.tensors[name], frame)


def it_loc(e):
    return e.loc


def show_value(v) -> str:
    if isinstance(v, TensorValue):
        return f"tensor '{v.name}'"
    if isinstance(v, DynPack):
        return f"a {v}"
    if is_pack(v) and all(isinstance(t, TensorValue) for t in v):
        return f"a pack of {len(v)} tensors"
    return show(v)


def _plain(v):
    """Attribute values as plain Python data for ir.Op.attrs (packs as tuples)."""
    if isinstance(v, tuple):
        return tuple(_plain(x) for x in v)
    if isinstance(v, np.generic):
        return v.item()
    return v
