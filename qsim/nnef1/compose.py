"""NNEF 1.0 document → ir.Graph: compile-time evaluation and fragment expansion (3.3, 6).

The graph body is evaluated statement by statement. Attribute expressions are computed in
Python (3.3.3); an operator applied to a tensor invokes its fragment (table 1). An invocation
binds its arguments (3.3.2 Invocations), checks their types (3.3.1), then either converts the
operation to NNEF 2.0 operators (convert.py: every primitive, and the compounds kept whole) or
expands the fragment's body in a fresh scope. Tensors get static shapes as they are made, so
`shape_of` is a compile-time value.
"""
from __future__ import annotations

import contextlib
import functools
import importlib.resources
import math
from dataclasses import dataclass, field
from typing import Callable, Iterable

import numpy as np

from .. import ir
from ..errors import Location, SemanticError, UnsupportedError
from ..limits import MAX_NESTING_DEPTH
from . import ast
from .builder import ITEM_DTYPE, DocumentGraphBuilder, TensorValue
# each conversion family registers its conversions (convert_base.py) when imported
from . import convert, convert_index, convert_nn  # noqa: F401
from .convert_base import COMPOUND_KEPT, CONVERSIONS
from .convert_context import ConvertContext
from .parser import parse_fragments
from .values import (Value, cast_primitive, compile_time_binary, deep_equal, describe, primitive_type,
                     type_name)


# operators of table 1 (3.3.3) and the fragments they map to when an argument is a tensor
BINARY_FRAGMENTS = {"+": "add", "-": "sub", "*": "mul", "/": "div", "^": "pow", "<": "lt",
                    "<=": "le", ">": "gt", ">=": "ge", "==": "eq", "!=": "ne", "&&": "and",
                    "||": "or"}
UNARY_FRAGMENTS = {"-": "neg", "+": "copy", "!": "not"}


@functools.lru_cache(maxsize=None)
def standard_fragments() -> dict[str, ast.Fragment]:
    """The chapter 4 operations (stdlib.nnef), parsed once."""
    text = importlib.resources.files(__package__).joinpath("stdlib.nnef").read_text()
    return {f.name: f for f in parse_fragments(text, "qsim/nnef1/stdlib.nnef")}


# a data source: (label, shape, item type, location) → (array or None, QuantInfo or None)
VariableLoader = Callable[[str, tuple, str, Location], tuple]


@dataclass
class Scope:
    values: dict[str, Value]
    fragment: ast.Fragment | None      # None in the graph body
    generic: str | None                # the bound `?` of a generic fragment
    hint: str                          # name prefix for tensors made here
    params: frozenset = frozenset()


@dataclass
class Composer:
    document: ast.Document
    load_variable: VariableLoader
    keep: frozenset[str] | None = None     # compound fragments kept whole; None = all convertible
    builder: DocumentGraphBuilder = field(default_factory=DocumentGraphBuilder)
    # the first extent of every external input declared with extent 1 becomes this (None:
    # as declared): the same model on a batch of samples (qsim.loader.load's `batch`)
    external_batch: int | None = None

    def __post_init__(self):
        self.fragments = dict(standard_fragments())
        for frag in self.document.fragments:
            if frag.name in self.fragments:
                raise SemanticError(f"fragment '{frag.name}' is already defined"
                                    + (" as a standard operation" if frag.name in standard_fragments() else ""),
                                    location=frag.loc, hint="fragment names must be unique (3.3.2)")
            self.fragments[frag.name] = frag
        self.labels: dict[str, TensorValue] = {}
        self.env: dict[str, Value] = {}
        self.graph_named: set[str] = set()   # tensor names already bound to graph identifiers
        self.updates: dict[str, tuple] = {}   # variable tensor name → (label, new value) (4.8)
        self.depth = 0                        # evaluation levels open now (nesting())
        self.expanding: list[str] = []        # fragments being expanded, outermost first

    # ------------------------------------------------------------------ graph
    def compose(self) -> ir.Graph:
        graph = self.document.graph
        scope = Scope(self.env, None, None, "")
        externals: set[str] = set()
        for stmt in graph.body:
            names = stmt.target.names()
            scope.hint = names[0] if names else "_"   # `[] = ...` fails in assign()
            is_external = isinstance(stmt.value, ast.Invocation) and stmt.value.op == "external"
            value = self.eval(stmt.value, scope)
            self.assign(stmt.target, value, scope, stmt.loc, new=True)
            if is_external:
                externals.update(names)
        for name in graph.inputs:
            if name not in externals:
                raise SemanticError(f"graph input '{name}' is not defined by an 'external' operation",
                                    location=graph.loc, hint=f"add `{name} = external(shape = [...]);`")
        for name in graph.outputs:
            if name not in self.env:
                raise SemanticError(f"graph output '{name}' is never assigned", location=graph.loc)
        self.builder.inputs = [self.env[n].name for n in graph.inputs]
        outputs = [self.env[n].name for n in graph.outputs] + self._updated_outputs()
        return self.builder.finish(graph.name, outputs)

    def _updated_outputs(self) -> list[str]:
        """Variable updates (4.8) as the SkriptND composer represents @update: the new values are
        extra graph outputs after the declared ones. qsim runs a graph as one stateless cycle, so
        each is a copy named `<label>.updated` after the variable's label (4.1.3) that it replaces."""
        names = []
        for label, value in self.updates.values():
            copy = self.builder.op("math.iden", [value], {}, [(f"{label}.updated", value.item, value.shape)],
                                   label=f"{label}.updated")[0]
            names.append(copy.name)
        return names

    # ------------------------------------------------------------------ statements
    def assign(self, target: ast.LValue, value: Value, scope: Scope, loc: Location, new: bool) -> None:
        if target.kind == "id":
            name = target.name
            if name in scope.params:
                raise SemanticError(f"parameter '{name}' of fragment '{scope.fragment.name}' is assigned",
                                    location=target.loc, hint="fragment parameters are read-only (3.3.2)")
            if name in scope.values:
                raise SemanticError(f"identifier '{name}' is assigned twice", location=target.loc,
                                    hint="each identifier is assigned once (3.3.2)")
            if scope.fragment is None:
                if not isinstance(value, TensorValue):
                    raise SemanticError(f"identifier '{name}' in the graph body is a {type_name(value)}, "
                                        "not a tensor", location=target.loc,
                                        hint="graph-body identifiers must be tensors (3.3.2)")
                if value.name not in self.graph_named:
                    value = self.builder.rename(value, name, loc)
                self.graph_named.add(value.name)
            scope.values[name] = value
            return
        if not isinstance(value, (list, tuple)) or len(value) != len(target.items):
            raise SemanticError(f"cannot unpack {type_name(value)} into {len(target.items)} identifiers",
                                location=target.loc)
        for item, v in zip(target.items, value):
            self.assign(item, v, scope, loc, new)

    # ------------------------------------------------------------------ expressions
    def eval(self, e: ast.Expr, scope: Scope) -> Value:
        method = getattr(self, "eval_" + type(e).__name__)
        if isinstance(e, (ast.Literal, ast.Name)):
            return method(e, scope)   # leaves: no level (as the parser counts them)
        with self.nesting(e.loc):
            return method(e, scope)

    @contextlib.contextmanager
    def nesting(self, loc: Location):
        """One level of evaluation (an expression, or a fragment expansion): the levels open at
        once are bounded by MAX_NESTING_DEPTH, so recursive fragments end in a located error
        long before Python's recursion limit (each level takes two or three frames)."""
        if self.depth >= MAX_NESTING_DEPTH:
            chain = " → ".join(self.expanding[-6:])
            raise SemanticError(f"evaluation nests deeper than {MAX_NESTING_DEPTH} levels"
                                + (f" (expanding {chain})" if chain else ""), location=loc,
                                hint="a recursive fragment that does not stop, or nesting too deep "
                                     "(the limit is qsim.limits.MAX_NESTING_DEPTH)")
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1

    def eval_Literal(self, e: ast.Literal, scope: Scope) -> Value:
        return e.value

    def eval_Name(self, e: ast.Name, scope: Scope) -> Value:
        if e.name in scope.values:
            return scope.values[e.name]
        raise SemanticError(f"undefined identifier '{e.name}'", location=e.loc,
                            hint="identifiers must be assigned before they are used (3.3.2)")

    def eval_ArrayExpr(self, e: ast.ArrayExpr, scope: Scope) -> Value:
        return [self.eval(item, scope) for item in e.items]

    def eval_TupleExpr(self, e: ast.TupleExpr, scope: Scope) -> Value:
        return tuple(self.eval(item, scope) for item in e.items)

    def eval_IfElse(self, e: ast.IfElse, scope: Scope) -> Value:
        cond = self.eval(e.condition, scope)
        if not isinstance(cond, bool):
            raise SemanticError(f"if-else condition is a {type_name(cond)}, expected logical",
                                location=e.condition.loc, hint="compile-time branching needs a logical value")
        # lazy: only the chosen branch is evaluated (3.3.3 Compile-time Branching)
        return self.eval(e.then if cond else e.otherwise, scope)

    def eval_Unary(self, e: ast.Unary, scope: Scope) -> Value:
        x = self.eval(e.operand, scope)
        if isinstance(x, TensorValue):
            return self.invoke_values(UNARY_FRAGMENTS[e.op], [x], {}, e.loc, scope)
        if e.op == "!":
            if not isinstance(x, bool):
                raise SemanticError(f"operator '!' needs a logical, got {type_name(x)}", location=e.loc)
            return not x
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            raise SemanticError(f"operator '{e.op}' needs a number, got {type_name(x)}", location=e.loc)
        return -x if e.op == "-" else x

    def eval_Binary(self, e: ast.Binary, scope: Scope) -> Value:
        # a chain `a + b + c + ...` nests to the left: walk it with a loop, not recursion
        chain = [e]
        while isinstance(chain[-1].left, ast.Binary):
            chain.append(chain[-1].left)
        x = self.eval(chain[-1].left, scope)
        for node in reversed(chain):
            x = self.binary(node, x, self.eval(node.right, scope), scope)
        return x

    def binary(self, e: ast.Binary, x: Value, y: Value, scope: Scope) -> Value:
        if e.op == "in":
            if not isinstance(y, list):
                raise SemanticError(f"right side of 'in' is a {type_name(y)}, expected an array",
                                    location=e.right.loc)
            return any(deep_equal(x, item) for item in y)
        if isinstance(x, TensorValue) or isinstance(y, TensorValue):
            return self.invoke_values(BINARY_FRAGMENTS[e.op], [x, y], {}, e.loc, scope)
        return compile_time_binary(e.op, x, y, e.loc)

    def eval_Index(self, e: ast.Index, scope: Scope) -> Value:
        target = self.eval(e.target, scope)
        index = self.eval(e.index, scope)
        if not isinstance(target, (list, tuple, str)):
            raise SemanticError(f"cannot subscript a {type_name(target)}", location=e.loc)
        if isinstance(index, bool) or not isinstance(index, int):
            raise SemanticError(f"subscript is a {type_name(index)}, expected integer", location=e.index.loc)
        if not 0 <= index < len(target):
            raise SemanticError(f"index {index} is out of range for a {type_name(target)} of length "
                                f"{len(target)}", location=e.index.loc)
        return target[index]

    def eval_Slice(self, e: ast.Slice, scope: Scope) -> Value:
        target = self.eval(e.target, scope)
        if not isinstance(target, (list, str)):
            raise SemanticError(f"cannot take a range of a {type_name(target)}", location=e.loc)
        begin = 0 if e.begin is None else self.eval(e.begin, scope)
        end = len(target) if e.end is None else self.eval(e.end, scope)
        for v, part in ((begin, e.begin), (end, e.end)):
            if isinstance(v, bool) or not isinstance(v, int):
                raise SemanticError(f"range bound is a {type_name(v)}, expected integer",
                                    location=(part or e).loc)
        return target[max(begin, 0):max(end, 0)]

    def eval_Builtin(self, e: ast.Builtin, scope: Scope) -> Value:
        x = self.eval(e.arg, scope)
        name = e.name
        if name == "shape_of":
            return list(x.shape) if isinstance(x, TensorValue) else []
        if name in ("length_of", "range_of"):
            if not isinstance(x, (list, str)):
                raise SemanticError(f"{name} needs an array or string, got {type_name(x)}", location=e.loc)
            return len(x) if name == "length_of" else list(range(len(x)))
        return cast_primitive(name, x, e.loc)

    def eval_Comprehension(self, e: ast.Comprehension, scope: Scope) -> Value:
        iterated = []
        for var, expr in e.iterators:
            seq = self.eval(expr, scope)
            if not isinstance(seq, list):
                raise SemanticError(f"loop iterator '{var}' runs over a {type_name(seq)}, expected an array",
                                    location=expr.loc)
            iterated.append((var, seq))
        lengths = {len(seq) for _, seq in iterated}
        if len(lengths) > 1:
            raise SemanticError(f"iterated arrays have different lengths {sorted(lengths)}", location=e.loc)
        out = []
        for i in range(lengths.pop() if lengths else 0):
            inner = Scope(dict(scope.values), scope.fragment, scope.generic, scope.hint, scope.params)
            for var, seq in iterated:
                inner.values[var] = seq[i]
            if e.condition is not None:
                keep = self.eval(e.condition, inner)
                if not isinstance(keep, bool):
                    raise SemanticError("comprehension condition is not logical", location=e.condition.loc)
                if not keep:
                    continue
            out.append(self.eval(e.body, inner))
        return out

    def eval_Invocation(self, e: ast.Invocation, scope: Scope) -> Value:
        positional, named = [], {}
        seen_named = False
        for arg in e.args:
            if arg.name is None:
                if seen_named:
                    raise SemanticError(f"positional argument after named arguments in '{e.op}'",
                                        location=arg.loc, hint="positional arguments come first (3.3.2)")
                positional.append(self.eval(arg.value, scope))
            else:
                seen_named = True
                if arg.name in named:
                    raise SemanticError(f"argument '{arg.name}' of '{e.op}' is given twice", location=arg.loc)
                named[arg.name] = self.eval(arg.value, scope)
        generic = e.generic
        if generic == "?":
            if scope.generic is None:
                raise SemanticError(f"'{e.op}<?>' outside a generic fragment", location=e.loc)
            generic = scope.generic
        if e.op == "external" and scope.fragment is not None:
            raise SemanticError("'external' is used inside fragment "
                                f"'{scope.fragment.name}'", location=e.loc,
                                hint="only the graph body declares external inputs (3.3.2)")
        return self.invoke_values(e.op, positional, named, e.loc, scope, generic)

    # ------------------------------------------------------------------ invocation
    def invoke_values(self, op: str, positional: list, named: dict, loc: Location, scope: Scope,
                      generic: str | None = None) -> Value:
        frag = self.fragments.get(op)
        if frag is None:
            raise SemanticError(f"unknown operation '{op}'", location=loc,
                                hint="define it with a fragment (KHR_enable_fragment_definitions) "
                                     "or use a chapter 4 operation")
        args, generic = bind_arguments(frag, positional, named, loc, generic, self)
        hint = scope.hint or op
        convert = CONVERSIONS.get(op)
        keep_whole = frag.body is None or (op in COMPOUND_KEPT and (self.keep is None or op in self.keep))
        if convert is not None and keep_whole:
            ctx = ConvertContext(self, op, loc, hint, generic)
            results = convert(ctx, args)
            return results[0] if len(frag.results) == 1 else tuple(results)
        if frag.body is None:
            raise UnsupportedError(f"operation '{op}' has no NNEF 2.0 equivalent in qsim", location=loc,
                                   hint="see docs/nnef1.md for the supported operations")
        return self.expand(frag, args, generic, loc, hint)

    def expand(self, frag: ast.Fragment, args: dict, generic: str | None, loc: Location, hint: str) -> Value:
        inner = Scope(dict(args), frag, generic, hint, frozenset(args))
        with self.nesting(loc):
            self.expanding.append(frag.name)
            for stmt in frag.body:
                value = self.eval(stmt.value, inner)
                self.assign(stmt.target, value, inner, stmt.loc, new=True)
            self.expanding.pop()
        results = []
        for res in frag.results:
            if res.name not in inner.values:
                raise SemanticError(f"fragment '{frag.name}' never assigns its result '{res.name}'",
                                    location=frag.loc, hint=f"called at {loc}")
            results.append(check_type(inner.values[res.name], res.type, generic, frag.name, res.name,
                                      res.loc, self, is_input=False))
        return results[0] if len(results) == 1 else tuple(results)

    # ------------------------------------------------------------------ helpers for convert.py
    def literal_tensor(self, value: Value, item: str, hint: str) -> TensorValue:
        """A primitive substituted for a tensor parameter: a constant of singleton shape (3.3.1)."""
        dtype = ITEM_DTYPE[item].numpy
        return self.builder.constant(hint + ".const", item, np.asarray(value, dtype=dtype))


# ---------------------------------------------------------------------- argument binding
def bind_arguments(frag: ast.Fragment, positional: list, named: dict, loc: Location,
                   generic: str | None, composer: Composer) -> tuple[dict, str | None]:
    params = frag.params
    if len(positional) > len(params):
        raise SemanticError(f"'{frag.name}' takes {len(params)} arguments, {len(positional)} positional given",
                            location=loc)
    args: dict[str, Value] = {}
    for param, value in zip(params, positional):
        if param.type.is_attribute:
            raise SemanticError(f"attribute '{param.name}' of '{frag.name}' is passed by position",
                                location=loc, hint=f"write {param.name} = ... (attributes are named, 3.3.2)")
        args[param.name] = value
    by_name = {p.name: p for p in params}
    for name, value in named.items():
        if name not in by_name:
            raise SemanticError(f"'{frag.name}' has no parameter '{name}'", location=loc,
                                hint="parameters: " + ", ".join(by_name))
        if name in args:
            raise SemanticError(f"parameter '{name}' of '{frag.name}' is given by position and by name",
                                location=loc)
        args[name] = value
    for param in params:
        if param.name not in args:
            if param.default is None:
                raise SemanticError(f"'{frag.name}' needs argument '{param.name}' ({param.type})",
                                    location=loc)
            args[param.name] = composer.eval(param.default, Scope({}, None, None, ""))
    if frag.generic:
        generic = generic or _deduce_generic(frag, args) or frag.generic_default
        if generic is None:
            raise SemanticError(f"cannot deduce the generic type of '{frag.name}'", location=loc,
                                hint=f"write {frag.name}<scalar>(...)")
    elif generic is not None:
        raise SemanticError(f"'{frag.name}' is not generic but is invoked as {frag.name}<{generic}>",
                            location=loc)
    for param in params:
        args[param.name] = check_type(args[param.name], param.type, generic, frag.name, param.name,
                                      loc, composer, is_input=True)
    return args, generic


def _deduce_generic(frag: ast.Fragment, args: dict) -> str | None:
    found = set()
    for param in frag.params:
        t, v = param.type, args.get(param.name)
        if t.kind == "tensor" and t.name == "?" and isinstance(v, TensorValue):
            found.add(v.item)
        elif t.kind == "array" and t.item.kind == "tensor" and t.item.name == "?" and isinstance(v, list):
            found.update(x.item for x in v if isinstance(x, TensorValue))
        elif t.kind == "prim" and t.name == "?" and v is not None:
            found.add(primitive_type(v))
    if len(found) > 1:
        return None
    return found.pop() if found else None


def check_type(value: Value, t: ast.TypeSpec, generic: str | None, op: str, param: str, loc: Location,
               composer: Composer, is_input: bool) -> Value:
    """Checks `value` against declared type `t` (3.3.1 casts); literals for tensor inputs become
    constant tensors."""
    def fail(expected: str):
        raise SemanticError(f"'{op}' argument '{param}' is {describe(value)}, expected {expected}",
                            location=loc)

    if t.kind == "tensor":
        item = generic if t.name == "?" else t.name
        if isinstance(value, TensorValue):
            if item is not None and value.item != item:
                fail(f"tensor<{item}>")
            return value
        if is_input and not isinstance(value, (list, tuple, str)):
            prim = primitive_type(value)
            target = item or prim
            if prim != target and not (prim == "integer" and target == "scalar"):
                fail(f"tensor<{target}>")
            return composer.literal_tensor(value, target, f"{op}.{param}")
        fail(str(t))
    if t.kind == "array":
        if not isinstance(value, list):
            fail(str(t))
        return [check_type(v, t.item, generic, op, param, loc, composer, is_input) for v in value]
    if t.kind == "tuple":
        if not isinstance(value, tuple) or len(value) != len(t.items):
            fail(str(t))
        return tuple(check_type(v, ti, generic, op, param, loc, composer, is_input)
                     for v, ti in zip(value, t.items))
    name = generic if t.name == "?" else t.name
    if isinstance(value, TensorValue):
        fail(name)
    prim = primitive_type(value)
    if prim == name:
        return value
    if prim == "integer" and name == "scalar":
        return float(value)  # the spec's own examples pass integers for scalars (3.2.1)
    fail(name)


# ---------------------------------------------------------------------- compile-time values


def compose_document(document: ast.Document, load_variable: VariableLoader,
                     keep: Iterable[str] | None = None) -> ir.Graph:
    composer = Composer(document, load_variable, None if keep is None else frozenset(keep))
    return composer.compose()
