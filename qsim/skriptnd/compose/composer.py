"""Graph composition (NNEF 2.0 draft chapter 3, 2.7, 2.10, 2.11, 2.14) → ir.Graph.

`compose_graph(modules, graph_name, options)` builds the main graph: graph attributes, inputs,
variables and constants, then each @compose statement in order. An invocation of an operator is
instantiated (instance.py); a primitive operator (no @compose), or a compound one named in
`options.keep`, becomes one ir.Op of kind "<module>.<operator>"; other compound operators are
composed recursively into their primitives. Tensor names are scoped by invocation labels
(explicit `label:` or auto-generated, 2.10 "Labelling operator invocations").

Control flow (2.10.1) is in control.py; this module calls it for If/Loop right-hand sides.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from ... import ir
from ...errors import QsimError, SemanticError, UnsupportedError
from ...limits import check_tensor_size
from .. import ast
from ..evaluate import Evaluator, free_names
from .instance import check_extent, check_rank, eval_shape, instantiate, resolve_type, run_usings_and_asserts
from ..modules import ModuleSet, is_standard_location
from . import dynattr, dynpack
from .dynpack import DynPack, pack_tensors
from .composed_graph import NUMPY, ComposedGraphBuilder, Frame, tensor_data
from .control import compose_rhs
from .quantize import quant_info
from ..values import Dyn, TensorValue, error, is_pack, show, type_of

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


class Composer:
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

    def _packed_graph_input(self, decl, env, where, b: ComposedGraphBuilder):
        """A packed graph input `xs: real[..]..(n)`: n graph inputs `xs_0 .. xs_{n-1}` when n is a
        compile-time count; with a new symbol and an upper bound, `..(s|5)`, a pack of run-time
        length held as one tensor of its items stacked along a leading extent s (dynpack.py)."""
        pack = decl.type.pack
        if pack.length is None:
            raise error(f"{where}: packed input '{decl.name}' of the main graph needs a length, as in "
                        "..(3) or ..(s|5)", pack.loc)
        dtype = resolve_type(decl.type.base, env, decl.loc, where)
        if isinstance(pack.length, ast.Name) and pack.length.name not in env:
            if pack.bound is None:
                raise error(f"{where}: the run-time length '{pack.length.name}' of packed input "
                            f"'{decl.name}' needs an upper bound, as in ..({pack.length.name}|5) (2.6.1)",
                            pack.loc)
            bound = Evaluator(env, where).eval(pack.bound)
            if type_of(bound) != "int" or isinstance(bound, Dyn) or bound < 0:
                raise error(f"{where}: the upper bound of a pack length must be a compile-time int >= 0, "
                            f"got {show(bound)}", pack.bound.loc)
            count = Dyn(pack.length.name, 0, bound)
            env[pack.length.name] = count
            item_shape = self._graph_input_shape(decl, env, where)
            tv = b.tensor(decl.name, dtype, (count,) + item_shape, loc=decl.loc)
            dynattr.record_symbols(b.symbols, tv.name, tv.shape)
            b.accessible[decl.name] = tv.name
            return DynPack(tv, count)
        count = Evaluator(env, where).eval(pack.length)
        if type_of(count) != "int" or isinstance(count, Dyn) or count < 0:
            raise error(f"{where}: the length of packed input '{decl.name}' must be a compile-time int >= 0 "
                        f"or a new symbol with an upper bound, got {show(count)}", pack.length.loc)
        if pack.bound is not None:
            bound = Evaluator(env, where).eval(pack.bound)
            if not isinstance(bound, int) or count > bound:
                raise error(f"{where}: packed input '{decl.name}' has length {count} above its upper bound "
                            f"{show(bound)}", pack.bound.loc)
        items = []
        for k in range(count):
            shape = self._graph_input_shape(decl, env, where)
            tv = b.tensor(f"{decl.name}_{k}", dtype, shape, loc=decl.loc)
            dynattr.record_symbols(b.symbols, tv.name, tv.shape)
            b.accessible[f"{decl.name}_{k}"] = tv.name
            items.append(tv)
        return tuple(items)

    def _packed_graph_output(self, decl, value, env, where) -> list:
        """Names of the tensors of a packed graph output: its items, or the stacked tensor of a pack
        of run-time length (dynpack.py), checked against the declared length and item shape."""
        length = decl.type.pack.length
        n = None
        if length is not None and free_names(length) <= env.keys():
            n = Evaluator(env, where).eval(length)
        item = ast.ParamDecl(decl.loc, decl.name, dataclasses.replace(decl.type, pack=None))
        if isinstance(value, DynPack):
            dynpack.check_length(value, n, f"{where}: output '{decl.name}'", decl.loc)
            self._check_declared(item, TensorValue(value.tensor.name, value.dtype, value.item_shape), env, where)
            return [value.tensor.name]
        if n is not None and not isinstance(n, Dyn) and n != len(value):
            raise error(f"{where}: output '{decl.name}' is declared with {show(n)} items but the composition "
                        f"gives {len(value)}", decl.loc)
        for tv in value:
            if not isinstance(tv, TensorValue):
                raise error(f"{where}: output '{decl.name}' holds {show(tv)}, not a tensor", decl.loc)
            self._check_declared(item, tv, env, where)
        return [tv.name for tv in value]

    def _graph_input_shape(self, decl, env, where):
        t = decl.type
        if t.shape is None:
            raise error(f"{where}: input '{decl.name}' of the main graph needs a shape (with upper bounds "
                        "where it is dynamic)", decl.loc)
        shape: list = []
        ev = Evaluator(env, where)
        for item in t.shape:
            bound = ev.eval(item.bound) if item.bound is not None else None
            if bound is not None:
                check_extent(bound, decl.name, where, item.bound.loc, "upper bound")
            n = 1
            if item.pack is not None:
                if item.pack.length is None:
                    raise error(f"{where}: the rank of input '{decl.name}' must be given", item.loc)
                n = ev.eval(item.pack.length)
                check_rank(n, decl.name, where, item.pack.length.loc)
            if isinstance(item.extent, ast.Omitted) or (isinstance(item.extent, ast.Name)
                                                        and item.extent.name not in env):
                if bound is None and isinstance(item.extent, ast.Omitted):
                    raise error(f"{where}: dynamic extent of main graph input '{decl.name}' needs an upper "
                                "bound, as in ~|10 (2.6.1)", item.loc)
                if isinstance(item.extent, ast.Name):
                    sym = item.extent.name
                    if n != 1:
                        env[sym] = tuple(Dyn(f"{sym}[{j}]", 0, bound) for j in range(n))
                    else:
                        env[sym] = Dyn(sym, 0, bound)
                    shape.extend(env[sym] if n != 1 else (env[sym],))
                else:
                    shape.extend(Dyn(f"{decl.name}.{len(shape) + j}", 0, bound) for j in range(n))
                continue
            value = ev.eval(item.extent)
            if value is None:
                continue
            for d in (value if is_pack(value) else (value,)):
                check_extent(d, decl.name, where, item.loc)
            shape.extend(value if is_pack(value) else (value,))
        for d in shape:
            if isinstance(d, Dyn) and d.hi is None:
                raise error(f"{where}: dynamic extent of main graph input '{decl.name}' needs an upper bound",
                            decl.loc)
        return tuple(shape)

    # ================================================================ local tensors
    def _locals(self, frame: Frame, b: ComposedGraphBuilder):
        """@constant and @variable tensors of a graph or an invoked operator (2.7)."""
        for decl in frame.op.constants:
            dtype = resolve_type(decl.type.base, frame.env, decl.loc, frame.where)
            values = self._constant_values(decl, dtype, frame)
            tvs = tuple(b.tensor(frame.scope + decl.name + (f"_{k}" if len(values) > 1 else ""), dtype,
                                 shape, data, decl.loc) for k, (shape, data) in enumerate(values))
            frame.env[decl.name] = tvs if decl.type.pack is not None else tvs[0]
            b.accessible[frame.scope + decl.name] = tvs[0].name
        for decl in frame.op.variables:
            dtype = resolve_type(decl.type.base, frame.env, decl.loc, frame.where)
            if decl.default is not None:
                raise error(f"{frame.where}: variable '{decl.name}' cannot have a value; variables are "
                            "loaded from data files (2.7)", decl.default.loc)
            if decl.type.pack is not None:
                raise UnsupportedError(f"{frame.where}: packed variables are not supported", location=decl.loc)
            shape, _ = eval_shape(decl.type, frame.env, frame.where, decl)
            if any(isinstance(d, Dyn) for d in shape):
                raise error(f"{frame.where}: variable '{decl.name}' must have a static shape", decl.loc)
            scoped = frame.scope + decl.name
            probe = TensorValue(scoped, dtype, shape)
            data = self.options.load_variable(scoped, probe) if self.options.load_variable else None
            if data is None:
                b.missing_data.append(scoped)
            else:
                data = np.asarray(data)
                if tuple(data.shape) != tuple(shape):
                    raise SemanticError(f"variable '{scoped}' is declared {dtype}{list(shape)} but its data "
                                        f"has shape {list(data.shape)}", location=decl.loc)
                data = data.astype(NUMPY[dtype], copy=False)
            tv = b.tensor(scoped, dtype, shape, data, decl.loc)
            frame.env[decl.name] = tv
            b.accessible[scoped] = tv.name

    def _constant_values(self, decl: ast.ParamDecl, dtype: str, frame: Frame) -> list:
        if decl.default is None:
            raise error(f"{frame.where}: constant '{decl.name}' needs a value after '='", decl.loc)
        env = frame.env
        count = None
        if decl.type.pack is not None:
            count = Evaluator(env, frame.where).eval(decl.type.pack.length) if decl.type.pack.length else None
            value = Evaluator(env, frame.where).eval(decl.default)
            if not is_pack(value) or (count is not None and len(value) != count):
                raise error(f"{frame.where}: a pack of constants needs a list of {show(count)} values", decl.loc)
            out = []
            for k, v in enumerate(value):
                shape, _ = eval_shape(decl.type, env, frame.where, decl, k)
                _check_constant_size(decl, shape, dtype)
                out.append((shape, np.full(shape, tensor_data(v, dtype, f"constant '{decl.name}'", decl.loc),
                                            dtype=NUMPY[dtype])))
            return out
        shape, _ = eval_shape(decl.type, env, frame.where, decl)
        _check_constant_size(decl, shape, dtype)
        if decl.bounds:
            limits = []
            for bnd in decl.bounds:
                limits.append(Evaluator(env, frame.where).eval(bnd.limit))
            if tuple(limits) != tuple(shape):
                raise error(f"{frame.where}: index bounds {show(tuple(limits))} of constant '{decl.name}' do not "
                            f"match its shape {show(tuple(shape))}", decl.loc)
            grid = np.indices(shape, dtype=np.int64) if shape else []
            local = dict(env)
            for bnd, g in zip(decl.bounds, grid):
                local[bnd.index] = g
            value = Evaluator(local, frame.where).eval(decl.default)
        else:
            value = Evaluator(env, frame.where).eval(decl.default)
        if value is None:
            raise error(f"{frame.where}: constant '{decl.name}' evaluates to null", decl.loc)
        vtype = type_of(value)
        if vtype != dtype and not (dtype == "real" and vtype == "int"):
            raise error(f"{frame.where}: constant '{decl.name}' is {dtype} but its value is {vtype}", decl.loc)
        if is_pack(value):
            volume = int(np.prod(shape, dtype=np.int64))
            if len(value) != volume:
                raise error(f"{frame.where}: constant '{decl.name}' has {len(value)} values for {volume} "
                            "elements (a flat, row-major list)", decl.loc)
            data = tensor_data(value, dtype, f"constant '{decl.name}'", decl.loc).reshape(shape)
        else:
            data = np.broadcast_to(tensor_data(value, dtype, f"constant '{decl.name}'", decl.loc),
                                   shape).copy()
        return [(shape, data)]

    def _check_declared(self, decl, value: TensorValue, env, where):
        t = decl.type
        dtype = resolve_type(t.base, env, decl.loc, where)
        if dtype is not None and dtype != value.dtype:
            raise error(f"{where}: output '{decl.name}' is declared {dtype} but composed as {value.dtype}",
                        decl.loc)
        if t.shape is None or any(isinstance(i.extent, ast.Omitted) for i in t.shape):
            return
        try:
            shape, _ = eval_shape(t, dict(env), where, decl)
        except QsimError:
            return
        if len(shape) != len(value.shape) or any(
                not isinstance(a, Dyn) and not isinstance(b2, Dyn) and a != b2 for a, b2 in zip(shape, value.shape)):
            raise error(f"{where}: output '{decl.name}' is declared with shape {show(shape)} but the composition "
                        f"gives {show(tuple(value.shape))}", decl.loc)

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


def _check_constant_size(decl: ast.ParamDecl, shape: tuple, dtype: str) -> None:
    """Before a @constant is materialised: its data, and for a per-element initializer the
    index grids (one int64 array per axis), must fit the tensor limit."""
    if any(isinstance(d, Dyn) for d in shape):
        raise error(f"constant '{decl.name}' must have a static shape", decl.loc)
    check_tensor_size(shape, NUMPY[dtype]().itemsize, f"constant '{decl.name}'", decl.loc)
    if decl.bounds:
        check_tensor_size((len(shape),) + tuple(shape), 8,
                          f"index grid of constant '{decl.name}'", decl.loc)


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
