"""Static checks of operator definitions, before any invocation (NNEF 2.0 draft 2.2-2.6, 2.10, 2.14).

`validate_module(modules, name)` checks every definition of a parsed module without composing it:
- the binding order of its inputs is valid (2.6.2; binding.binding_order rejects definitions the
  spec calls invalid);
- every type name is a concrete or abstract type or one of the operator's @dtype names (2.3, 2.13);
- every operator its @compose/@update bodies invoke (in blocks, branches, loop bodies and
  conditions) and every @quantize operator resolves to a definition of an imported module, with
  attributes that definition declares and no more arguments than it has inputs (2.10, 2.15).
Composition checks the rest (types of values, shapes, assertions) per invocation. `qsim check`
runs this on a module without graphs; benchmarks/frontend.py runs it on the whole stdlib.
"""
from __future__ import annotations

from . import ast
from .binding import binding_order
from .modules import ModuleSet
from .values import ABSTRACT_TYPES, CONCRETE_TYPES, error


def validate_module(modules: ModuleSet, name: str) -> int:
    """Checks every definition of module `name` (loaded or loadable); returns how many."""
    module = modules.module(name, None)
    for imp in module.imports:
        modules.module(imp.module, imp.loc)
    for op in module.definitions:
        validate_definition(modules, name, op)
    return len(module.definitions)


def validate_definition(modules: ModuleSet, module: str, op: ast.OperatorDef) -> None:
    kind = "graph" if op.is_graph else "operator"
    where = f"{kind} '{op.name}' of module '{module}'"
    dtypes = {d.name for d in op.dtypes}
    known_types = set(CONCRETE_TYPES) | set(ABSTRACT_TYPES) | dtypes
    for d in op.dtypes:
        for t in (d.base, d.default):
            if t is not None and t not in set(CONCRETE_TYPES) | set(ABSTRACT_TYPES):
                raise error(f"{where}: generic type '{d.name}' names unknown type '{t}'", d.loc)
    for decl in op.attribs + op.inputs + op.outputs + op.constants + op.variables:
        if decl.type.base not in known_types:
            raise error(f"{where}: '{decl.name}' has unknown type '{decl.type.base}'", decl.loc,
                        hint="types are int, real, bool, str (or type, arith, num) and @dtype names")
    if not op.is_graph:
        binding_order(op, where)
    for comp in (op.compose or ()) + op.update:
        _walk(modules, module, comp.value, where)
    for entry in op.quantize:
        _, target = modules.resolve(entry.op, module, entry.loc)
        _check_attrs(entry.attrs, target, entry.op, where)


def _walk(modules: ModuleSet, module: str, node, where: str) -> None:
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Invocation):
            _, target = modules.resolve(n.name, module, n.loc)
            _check_attrs(n.attrs, target, n.name, where)
            if len(n.args) > len(target.inputs):
                raise error(f"{where}: '{n.name}' takes {len(target.inputs)} inputs, {len(n.args)} given",
                            n.loc)
            if len(n.generics) > len(target.dtypes):
                raise error(f"{where}: {len(n.generics)} generic types given, '{n.name}' declares "
                            f"{len(target.dtypes)}", n.loc)
        elif isinstance(n, ast.Block):
            stack.extend(c.value for c in n.components)
        elif isinstance(n, ast.If):
            for cond, body in n.branches:
                stack.extend((cond, body))
            stack.append(n.otherwise)
        elif isinstance(n, ast.Loop):
            stack.extend(x for x in (n.body, n.pre_condition, n.post_condition) if x is not None)


def _check_attrs(attrs, target: ast.OperatorDef, name: str, where: str) -> None:
    declared = {a.name for a in target.attribs}
    for a in attrs:
        if a.name not in declared:
            raise error(f"{where}: '{name}' has no attribute '{a.name}' (attributes: "
                        f"{', '.join(sorted(declared)) or 'none'})", a.loc)
