"""Instantiating an operator for one invocation (NNEF 2.0 draft 2.5, 2.6.2, 2.8, 2.9, 2.13, ch. 3).

`instantiate(...)` runs the evaluation sequence of 2.6.2 "Evaluation and binding during an actual
invocation" and chapter 3:
 1. generic types given explicitly (`op<real>`), attribute values given by the invocation and
    constant defaults;
 2. inputs bound in the definition's binding order (types deduced for generics);
 3. deferred (non-constant) attribute defaults;
 4. packed attribute lengths checked or deduced, single values made uniform;
then @using and @assert interleaved as 2.9 prescribes, and the output types and shapes.
The result is an `Instance`: the symbol environment and the outputs' element types and shapes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...errors import Location
from .. import ast
from ..binding import ShapeBinder, binding_order
from ..evaluate import Evaluator, free_names
from ..values import (ABSTRACT_TYPES, CONCRETE_TYPES, Dyn, TensorValue, TypeValue, Uniform, error, is_pack,
                      show, type_of)

# Extents are ints without a size (2.3), but every executor indexes with signed 64 bits, and
# numpy arrays have at most 64 dimensions.
MAX_EXTENT = 2 ** 63 - 1
MAX_RANK = 64


def check_extent(d, name: str, where: str, loc, what: str = "extent") -> None:
    """An extent (or an extent's upper bound) of a declared shape: an int in [0, 2**63)."""
    if isinstance(d, Dyn):
        return
    if isinstance(d, (bool, TensorValue)) or type_of(d) != "int" or is_pack(d):
        raise error(f"{where}: {what} of '{name}' must be an int, got {show(d)}", loc)
    if d < 0:
        raise error(f"{where}: {what} of '{name}' is negative ({d})", loc)
    if d > MAX_EXTENT:
        raise error(f"{where}: {what} {d} of '{name}' is larger than any tensor can have "
                    f"(at most 2**63 - 1)", loc)


def check_rank(n, name: str, where: str, loc) -> None:
    """The length of a pack of extents (a rank): an int in [0, MAX_RANK]."""
    if isinstance(n, bool) or type_of(n) != "int" or is_pack(n) or isinstance(n, Dyn):
        raise error(f"{where}: the rank of '{name}' must be a compile-time int, got {show(n)}", loc)
    if not 0 <= n <= MAX_RANK:
        raise error(f"{where}: '{name}' would have {n} dimensions; tensors have 0 to {MAX_RANK}",
                    loc)


@dataclass
class OutputType:
    """A declared output resolved for one invocation: element type and shape (pack: one per item)."""
    decl: ast.ParamDecl
    dtype: str
    shapes: list = field(default_factory=list)     # one shape tuple per tensor
    packed: bool = False
    bounds: list = field(default_factory=list)     # per tensor: upper bounds of dynamic extents


@dataclass
class Instance:
    op: ast.OperatorDef
    env: dict
    attrs: dict                    # attribute name → final value (packs as tuples, null as None)
    outputs: list                  # OutputType per declared output
    where: str


def resolve_type(base: str, env: dict, loc: Location, where: str) -> str | None:
    """A declared element type as a concrete type name, or None if a generic is still unbound."""
    if base in CONCRETE_TYPES:
        return base
    value = env.get(base)
    if isinstance(value, TypeValue):
        return value.name
    if base in ABSTRACT_TYPES:
        return None
    if base not in env:
        raise error(f"{where}: unknown type '{base}'", loc,
                    hint="declare generic types in the @dtype block (2.13)")
    if not (value is None and base in env):
        raise error(f"{where}: '{base}' is not a type (it names {show(value)})", loc,
                    hint="declare generic types in the @dtype block (2.13)")
    return None


def _bind_type(env: dict, dtypes: dict, name: str, concrete: str, loc, where: str, what: str):
    decl = dtypes[name]
    allowed = ABSTRACT_TYPES.get(decl.base, (decl.base,))
    if concrete not in allowed:
        raise error(f"{where}: type '{name}' must be {decl.base} ({', '.join(allowed)}), but {what} "
                    f"is {concrete}", loc)
    current = env.get(name)
    if isinstance(current, TypeValue):
        if current.name != concrete:
            raise error(f"{where}: type '{name}' is {current.name} but {what} is {concrete}", loc)
        return
    env[name] = TypeValue(concrete)


def _convert(value, declared: str, loc, where: str, what: str):
    """Checks a compile-time value against a declared element type (int widens to real)."""
    if value is None:
        return None
    if is_pack(value):
        converted = tuple(_convert(v, declared, loc, where, what) for v in value)
        return Uniform(converted[0], len(value)) if isinstance(value, Uniform) and value else converted
    t = type_of(value)
    if t == declared or declared is None:
        return value
    if declared == "real" and t == "int" and not isinstance(value, Dyn):
        return float(value)
    raise error(f"{where}: {what} must be {declared}, got {t} {show(value)}", loc)


def instantiate(op: ast.OperatorDef, qualname: str, attr_values: dict, attr_locs: dict,
                inputs: list, generics: tuple, call_loc: Location, where: str) -> Instance:
    env: dict[str, Any] = {}
    dtypes = {d.name: d for d in op.dtypes}
    # -- generic types given explicitly, in declaration order (2.13)
    if len(generics) > len(op.dtypes):
        raise error(f"{where}: {len(generics)} generic types given, '{qualname}' declares "
                    f"{len(op.dtypes)}", call_loc)
    for decl, given in zip(op.dtypes, generics):
        if given not in CONCRETE_TYPES:
            raise error(f"{where}: generic type argument '{given}' is not a concrete type", call_loc)
        _bind_type(env, dtypes, decl.name, given, call_loc, where, "the explicit type argument")
    for decl in op.dtypes:
        env.setdefault(decl.name, None)     # placeholder: known name, type not bound yet
    # -- 1. attribute values given, and constant defaults
    declared = {a.name: a for a in op.attribs}
    for name in attr_values:
        if name not in declared:
            names = ", ".join(declared) or "none"
            raise error(f"{where}: '{qualname}' has no attribute '{name}' (attributes: {names})",
                        attr_locs.get(name, call_loc))
    deferred = []
    for decl in op.attribs:
        if decl.name in attr_values:
            value = attr_values[decl.name]
            if value is None and not decl.type.optional:
                raise error(f"{where}: attribute '{decl.name}' is not optional but its value is null",
                            attr_locs[decl.name])
            if is_pack(value) and decl.type.pack is None:
                raise error(f"{where}: attribute '{decl.name}' is not packed; got {show(value)}",
                            attr_locs[decl.name])
            env[decl.name] = value
        elif decl.default is not None and not free_names(decl.default):
            env[decl.name] = Evaluator(env, where).eval(decl.default)
        elif decl.default is not None:
            deferred.append(decl)
        elif decl.type.optional:
            env[decl.name] = None
        else:
            raise error(f"{where}: attribute '{decl.name}' of '{qualname}' has no default and must be given",
                        call_loc, hint=f"write {qualname}{{{decl.name}=...}}(...)")
    # -- 2. inputs in binding order
    decls = list(op.inputs)
    if len(inputs) > len(decls):
        raise error(f"{where}: '{qualname}' takes {len(decls)} inputs, {len(inputs)} given", call_loc)
    values = dict(zip((d.name for d in decls), list(inputs) + [None] * (len(decls) - len(inputs))))
    binder = ShapeBinder(env, where, call_loc)
    for decl in binding_order(op, where):
        value = values[decl.name]
        _check_input_type(decl, value, env, dtypes, where, call_loc)
        binder.bind_input(decl, value, decl.name)
    for decl in decls:
        env[decl.name] = values[decl.name]
    # -- 3. deferred attribute defaults
    for decl in deferred:
        missing = free_names(decl.default) - env.keys()
        if missing:
            raise error(f"{where}: the default of attribute '{decl.name}' uses {', '.join(sorted(missing))}, "
                        "which is not known after binding the inputs", decl.loc)
        value = Evaluator(env, where).eval(decl.default)
        if value is None and not decl.type.optional:
            raise error(f"{where}: attribute '{decl.name}' must be given: its default "
                        f"evaluates to null for this invocation", call_loc)
        env[decl.name] = value
    # -- 4. packed attribute lengths, uniform values; types of attributes (generics deduced)
    for decl in op.attribs:
        env[decl.name] = _finish_attribute(decl, env[decl.name], binder, dtypes, where,
                                           attr_locs.get(decl.name, decl.loc))
    for decl in op.dtypes:
        if env.get(decl.name) is None:
            if decl.default is None:
                raise error(f"{where}: generic type '{decl.name}' cannot be deduced; give it explicitly "
                            f"as {qualname}<...>(...)", call_loc)
            env[decl.name] = TypeValue(decl.default)
    # -- @using and @assert, interleaved (2.9)
    run_usings_and_asserts(op, env, where, call_loc)
    outputs = [output_type(decl, env, where) for decl in op.outputs]
    attrs = {d.name: env[d.name] for d in op.attribs}
    return Instance(op, env, attrs, outputs, where)


def _check_input_type(decl, value, env, dtypes, where, call_loc):
    if value is None:
        return
    tensors = value if is_pack(value) else (value,)
    for tv in tensors:
        if not isinstance(tv, TensorValue):
            continue
        base = decl.type.base
        if base in dtypes:
            _bind_type(env, dtypes, base, tv.dtype, call_loc, where, f"input '{decl.name}' ({tv.name})")
        elif base in CONCRETE_TYPES and tv.dtype != base:
            raise error(f"{where}: input '{decl.name}' must be a {base} tensor, got {tv.dtype} tensor "
                        f"'{tv.name}'", call_loc)


def _finish_attribute(decl, value, binder: ShapeBinder, dtypes, where, loc):
    t = decl.type
    base = t.base
    if base in dtypes:
        if value is not None and type_of(value) is not None and binder.env.get(base) is None:
            _bind_type(binder.env, dtypes, base, type_of(value), loc, where, f"attribute '{decl.name}'")
        declared = binder.env[base].name if isinstance(binder.env.get(base), TypeValue) else None
    else:
        declared = base if base in CONCRETE_TYPES else None
    value = _convert(value, declared, loc, where, f"attribute '{decl.name}'")
    if t.pack is None or value is None:
        return value
    length = t.pack.length
    if not is_pack(value):
        if length is None or not binder.known(length):
            raise error(f"{where}: attribute '{decl.name}' is packed and its length is not known, so the "
                        f"single value {show(value)} cannot be made uniform", loc,
                        hint="give a list of values")
        n = binder.eval(length)
        if not isinstance(n, int) or isinstance(n, bool):
            raise error(f"{where}: pack length of attribute '{decl.name}' is {show(n)}", loc)
        return Uniform(value, n)
    if length is not None:
        binder.solve(length, len(value), f"the length of attribute '{decl.name}'", loc)
    return value


def run_usings_and_asserts(op: ast.OperatorDef, env: dict, where: str, call_loc: Location):
    """2.9: before each helper symbol, check every not yet checked assertion whose identifiers are
    all known; after the last helper symbol, check the rest."""
    pending = list(op.asserts)

    def check_ready(final: bool):
        for a in list(pending):
            if final or free_names(a) <= env.keys():
                pending.remove(a)
                check_assertion(a, env, where, call_loc)

    for using in op.usings:
        check_ready(False)
        value = Evaluator(env, where).eval(using.value)
        bind_pattern(using.target, value, env, where)
    check_ready(True)


def check_assertion(a: ast.Assertion, env: dict, where: str, call_loc: Location):
    ev = Evaluator(env, where)
    cond = ev.eval(a.cond)
    if cond is None:
        return                       # null conditions are skipped (2.8)
    items = cond if is_pack(cond) else (cond,)
    if any(item is None or isinstance(item, Dyn) for item in items):
        return                       # run-time extents: checked at run time (2.6.1)
    if any(type_of(item) != "bool" for item in items):
        raise error(f"{where}: assertion condition must be bool, got {show(cond)}", a.loc)
    if all(items):
        return
    message = ev.eval(a.message) if a.message is not None else f"assertion failed: {a.text}"
    lines = [f"{where}: {message}"]
    for arg in a.args:
        lines.append(f"    {arg.label} = {show(ev.eval(arg.value))}")
    lines.append(f"    (assertion at {a.loc})")
    raise error("\n".join(lines), call_loc or a.loc)


def bind_pattern(p: ast.Pattern, value, env: dict, where: str):
    """@using left-hand sides: a name (with optional length hint), a list destructuring, an unzip."""
    if isinstance(p, ast.PatName):
        if p.pack is not None and p.pack.length is not None:
            if value is not None and not is_pack(value):
                raise error(f"{where}: '{p.name}' is declared packed but its value {show(value)} is not",
                            p.loc)
            n = Evaluator(env, where).eval(p.pack.length) if free_names(p.pack.length) <= env.keys() else None
            if value is not None and n is not None and n != len(value):
                raise error(f"{where}: '{p.name}' has length {len(value)}, the hint says {show(n)}", p.loc)
            if value is not None and n is None and isinstance(p.pack.length, ast.Name):
                env[p.pack.length.name] = len(value)
        env[p.name] = value
        return
    if value is None:
        for name in _pattern_names(p):
            env[name] = None
        return
    if not is_pack(value):
        raise error(f"{where}: cannot destructure the non-packed value {show(value)}", p.loc)
    if isinstance(p, ast.PatZip):
        k = len(p.names)
        if len(value) % k:
            raise error(f"{where}: cannot unzip {len(value)} items into {k} packs", p.loc)
        for i, name in enumerate(p.names):
            env[name] = tuple(value[i::k])
        return
    items = p.items
    flexible = [i for i, it in enumerate(items) if _is_flexible(it)]
    if len(flexible) > 1:
        raise error(f"{where}: at most one packed item may take the rest of the list", p.loc)
    fixed = len(items) - len(flexible)
    if (not flexible and fixed != len(value)) or (flexible and fixed > len(value)):
        raise error(f"{where}: cannot destructure {len(value)} items into {len(items)} names", p.loc)
    pos = 0
    for i, it in enumerate(items):
        if i in flexible:
            n = len(value) - fixed
            part = tuple(value[pos:pos + n])
            pos += n
            if isinstance(it, ast.PatZip):
                bind_pattern(it, part, env, where)
            else:
                bind_pattern(it, part, env, where)
        else:
            bind_pattern(it, value[pos], env, where)
            pos += 1


def _is_flexible(p) -> bool:
    return isinstance(p, ast.PatZip) or (isinstance(p, ast.PatName) and p.pack is not None)


def _pattern_names(p) -> list[str]:
    if isinstance(p, ast.PatName):
        return [p.name]
    if isinstance(p, ast.PatZip):
        return list(p.names)
    return [n for it in p.items for n in _pattern_names(it)]


def output_type(decl: ast.ParamDecl, env: dict, where: str) -> OutputType:
    t = decl.type
    dtype = resolve_type(t.base, env, decl.loc, where)
    if dtype is None:
        raise error(f"{where}: the type of output '{decl.name}' is not determined", decl.loc)
    count = None
    if t.pack is not None:
        if t.pack.length is None or not free_names(t.pack.length) <= env.keys():
            raise error(f"{where}: the pack length of output '{decl.name}' is not known", decl.loc)
        count = Evaluator(env, where).eval(t.pack.length)
    result = OutputType(decl, dtype, packed=t.pack is not None)
    for k in range(count if count is not None else 1):
        shape, bounds = eval_shape(t, env, where, decl, k if count is not None else None)
        result.shapes.append(shape)
        result.bounds.append(bounds)
    return result


def eval_shape(t: ast.TypeSpec, env: dict, where: str, decl, pack_index=None):
    """Evaluates a declared shape; `s|ub` with unknown `s` and `~|ub` become run-time extents."""
    if t.shape is None:
        raise error(f"{where}: '{decl.name}' has no shape; it cannot be derived here", decl.loc)
    shape: list = []
    ev = Evaluator(env, where)
    for item in t.shape:
        bound = ev.eval(item.bound) if item.bound is not None else None
        if isinstance(item.extent, ast.Omitted) or (
                isinstance(item.extent, ast.Name) and item.extent.name not in env and item.bound is not None):
            n = 1
            if item.pack is not None:
                n = ev.eval(item.pack.length) if item.pack.length is not None else None
                if n is None:
                    raise error(f"{where}: the rank of '{decl.name}' must be given", item.loc)
            key = item.extent.name if isinstance(item.extent, ast.Name) else f"{decl.name}.{len(shape)}"
            if isinstance(item.extent, ast.Name):
                env.setdefault(item.extent.name, Dyn(key, 0, bound))
            for j in range(n):
                d = env[item.extent.name] if isinstance(item.extent, ast.Name) else Dyn(f"{key}.{j}", 0, bound)
                shape.append(d)
            continue
        value = ev.eval(item.extent)
        if value is None:
            continue                   # a null extent is omitted (2.6)
        if item.per_item:
            if not is_pack(value) or pack_index is None:
                raise error(f"{where}: per-item extent of '{decl.name}' needs a pack of extents", item.loc)
            value = value[pack_index]
        if item.pack is not None and item.pack.length is not None and not is_pack(value):
            count = ev.eval(item.pack.length)    # `1 ..(n)`, `c..(flag)`: one extent repeated (2.4)
            if isinstance(count, int):
                check_rank(int(count), decl.name, where, item.loc)
                value = (value,) * int(count)
        if item.pack is not None and item.pack.length is not None and is_pack(value):
            n = ev.eval(item.pack.length)
            if n is not None and n != len(value):
                raise error(f"{where}: packed extent of '{decl.name}' has {len(value)} items, the length "
                            f"says {show(n)}", item.loc)
        items = value if is_pack(value) else (value,)
        for d in items:
            check_extent(d, decl.name, where, item.loc)
            if isinstance(d, Dyn) and bound is not None:
                d = Dyn(d.key, d.lo, bound if d.hi is None else min(d.hi, bound))
            shape.append(d if isinstance(d, Dyn) else int(d))
    return tuple(shape), None
