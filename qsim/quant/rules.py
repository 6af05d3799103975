"""The lowering rules, one registry keyed by target: RULES[TargetKind][float op kind].

A rule is `fn(ctx, op)`: it lowers float op `op` with the target's context (which owns the
shared float side, `ctx.f`) and binds the integer counterparts of the op's outputs. Rule
modules register with `@rule(TargetKind.X, "nn.conv", ...)` when imported: the TOSA rules
live in tosa/rules_*.py, the CVM rules in cvm/rules.py; each target imports its own.

A pattern rule (`@pattern_rule(TargetKind.X)`) is tried on every op before its kind's rule:
`fn(ctx, op) -> bool` lowers a group of float ops starting at `op` (marking the others
fused) and returns True, or returns False and leaves `op` to its kind's rule (e.g. a chain
of element-wise ops of one tensor becoming one TABLE, tosa/rules_activation.py).
"""
from __future__ import annotations

from typing import Any, Callable

from .. import ir
from ..errors import UnsupportedError
from .target import Rule, TargetKind

RULES: dict[TargetKind, dict[str, Rule]] = {kind: {} for kind in TargetKind}
PATTERN_RULES: dict[TargetKind, list[Callable[[Any, ir.Op], bool]]] = {kind: [] for kind in TargetKind}

# how the error for an op without a rule names the operator set
_RULE_SET_NAME = {TargetKind.TOSA: "integer", TargetKind.CVM: "CVM"}


def rule(target: TargetKind, *kinds: str):
    """Registers a lowering rule of `target` for float op kinds (qualified names, "nn.conv")."""
    def register(fn: Rule) -> Rule:
        for kind in kinds:
            if kind in RULES[target]:
                raise ValueError(f"two {target.value} lowering rules for {kind}")
            RULES[target][kind] = fn
        return fn
    return register


def pattern_rule(target: TargetKind):
    """Registers a pattern rule of `target` (module doc), tried in registration order."""
    def register(fn: Callable[[Any, ir.Op], bool]) -> Callable[[Any, ir.Op], bool]:
        PATTERN_RULES[target].append(fn)
        return fn
    return register


def apply_rules(ctx, target: TargetKind) -> None:
    """Quantizes the graph inputs, then lowers each float op (in graph order) by its rule;
    ops a rule folded into an earlier one are skipped."""
    f = ctx.f
    rules = RULES[target]
    for name in f.graph.inputs:
        ctx.quantize_input(name)
    for op in f.graph.ops:
        if id(op) in f.fused:
            continue
        f.op = op
        enter, leave = getattr(ctx, "enter_op", None), getattr(ctx, "leave_op", None)
        if enter is not None:       # a target whose ops' widths vary (a per-layer plan)
            enter(op)
        try:
            _lower_op(ctx, op, rules, target)
        finally:
            if leave is not None:
                leave()
    f.op = None


def _lower_op(ctx, op: ir.Op, rules: dict[str, Rule], target: TargetKind) -> None:
    f = ctx.f
    if any(pattern(ctx, op) for pattern in PATTERN_RULES[target]):
        return
    fn = rules.get(op.kind.name)
    if fn is None:
        defined = op.definition is not None     # the model's own operator: where it is defined
        raise UnsupportedError(
            f"cannot lower {op.kind.name} {op.label!r}: no {_RULE_SET_NAME[target]} lowering "
            f"for {op.kind.name}"
            + (f" (operator '{op.definition.name}' is defined by the model)" if defined else ""),
            location=op.definition.loc if defined else None,
            hint=("define it with a @compose block of standard operators; " if defined else "")
                 + ("control flow is lowered only once composed away: write a loop of "
                    "compile-time count with 'unroll' instead of 'do'; " if op.subgraphs else "")
                 + "operators with a rule: " + ", ".join(sorted(rules)))
    fn(ctx, op)
    for out in op.outputs:
        if out not in f.values and out in f.graph.outputs:
            raise f.unsupported(f"output {out!r} was not produced")
