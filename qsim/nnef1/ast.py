"""NNEF 1.0 abstract syntax tree (3.2). Frozen dataclasses; every node carries `loc`.

parser.py builds these from nnef1.lark; compose.py evaluates them. Nothing else constructs
them except tests.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from ..errors import Location


@dataclass(frozen=True)
class Node:
    loc: Location


class Expr(Node):
    """Base of expression nodes."""


@dataclass(frozen=True)
class Literal(Expr):
    value: Union[int, float, bool, str]


@dataclass(frozen=True)
class Name(Expr):
    name: str


@dataclass(frozen=True)
class ArrayExpr(Expr):
    items: tuple[Expr, ...]


@dataclass(frozen=True)
class TupleExpr(Expr):
    items: tuple[Expr, ...]


@dataclass(frozen=True)
class Unary(Expr):
    op: str            # '+', '-', '!'
    operand: Expr


@dataclass(frozen=True)
class Binary(Expr):
    op: str            # '+', '-', '*', '/', '^', '<', ..., '&&', '||', 'in'
    left: Expr
    right: Expr


@dataclass(frozen=True)
class IfElse(Expr):
    condition: Expr
    then: Expr
    otherwise: Expr


@dataclass(frozen=True)
class Index(Expr):
    target: Expr
    index: Expr


@dataclass(frozen=True)
class Slice(Expr):
    target: Expr
    begin: Expr | None
    end: Expr | None


@dataclass(frozen=True)
class Builtin(Expr):
    name: str          # shape_of, length_of, range_of, integer, scalar, logical, string
    arg: Expr


@dataclass(frozen=True)
class Argument(Node):
    name: str | None   # None for positional
    value: Expr


@dataclass(frozen=True)
class Invocation(Expr):
    op: str
    generic: str | None   # '?', 'scalar', ... from `op<T>(...)`
    args: tuple[Argument, ...]


@dataclass(frozen=True)
class Comprehension(Expr):
    iterators: tuple[tuple[str, Expr], ...]
    condition: Expr | None
    body: Expr


# ---- types (3.3.1)

@dataclass(frozen=True)
class TypeSpec:
    """kind: 'prim' (name = integer|scalar|logical|string|?), 'tensor' (name = item type or
    None for the unbound tensor<>), 'array' (item), 'tuple' (items)."""
    kind: str
    name: str | None = None
    item: "TypeSpec | None" = None
    items: tuple["TypeSpec", ...] = ()

    def __str__(self) -> str:
        if self.kind == "prim":
            return self.name
        if self.kind == "tensor":
            return f"tensor<{self.name or ''}>"
        if self.kind == "array":
            return f"{self.item}[]"
        return "(" + ", ".join(str(i) for i in self.items) + ")"

    @property
    def is_attribute(self) -> bool:
        """No tensor inside (3.3.1): a compile-time value."""
        if self.kind == "tensor":
            return False
        if self.kind == "array":
            return self.item.is_attribute
        if self.kind == "tuple":
            return all(i.is_attribute for i in self.items)
        return True


@dataclass(frozen=True)
class Param(Node):
    name: str
    type: TypeSpec
    default: Expr | None


@dataclass(frozen=True)
class Result(Node):
    name: str
    type: TypeSpec


# ---- statements and definitions

@dataclass(frozen=True)
class LValue(Node):
    """kind: 'id' (name), 'array' or 'tuple' (items)."""
    kind: str
    name: str | None = None
    items: tuple["LValue", ...] = ()

    def names(self) -> list[str]:
        if self.kind == "id":
            return [self.name]
        return [n for item in self.items for n in item.names()]


@dataclass(frozen=True)
class Assignment(Node):
    target: LValue
    value: Expr


@dataclass(frozen=True)
class Fragment(Node):
    name: str
    generic: bool
    generic_default: str | None
    params: tuple[Param, ...]
    results: tuple[Result, ...]
    body: tuple[Assignment, ...] | None   # None: a declaration (primitive)


@dataclass(frozen=True)
class GraphDef(Node):
    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    body: tuple[Assignment, ...]


@dataclass(frozen=True)
class Document(Node):
    version: str
    extensions: tuple[str, ...]
    fragments: tuple[Fragment, ...]
    graph: GraphDef


@dataclass(frozen=True)
class QuantEntry(Node):
    tensor: str
    invocation: Invocation
