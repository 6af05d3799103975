"""SkriptND abstract syntax tree (NNEF 2.0 draft, chapter 2).

Every node is a frozen dataclass whose first field is `loc` (qsim.errors.Location: file, line,
column, 1-based) so that any later stage can point at the source. The parser (parser.py) builds
these from the lark grammar in skriptnd.lark; nothing else constructs them except tests.

Expressions are shared by all blocks. Which expressions are allowed where (for example tensor
access only in @lower, invocations only in @compose/@update) is checked by the semantic stages,
not here. docs/skriptnd.md ("AST") documents the classes for other stages.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from ..errors import Location


@dataclass(frozen=True)
class Node:
    loc: Location


# ---------------------------------------------------------------- expressions (2.4)

@dataclass(frozen=True)
class Expr(Node):
    """Base of all expression nodes."""


@dataclass(frozen=True)
class IntLit(Expr):
    value: int


@dataclass(frozen=True)
class RealLit(Expr):
    value: float            # `inf` and `pi` are RealLit too; `text` keeps the spelling
    text: str = ""


@dataclass(frozen=True)
class BoolLit(Expr):
    value: bool


@dataclass(frozen=True)
class StrLit(Expr):
    """A (possibly concatenated) string; `parts` mixes text and `{expr}` format fields (2.4)."""
    parts: tuple[Union[str, Expr], ...]

    @property
    def is_plain(self) -> bool:
        return all(isinstance(p, str) for p in self.parts)

    @property
    def text(self) -> str:
        """The literal text with format fields shown as `{...}`."""
        return "".join(p if isinstance(p, str) else "{...}" for p in self.parts)


@dataclass(frozen=True)
class Name(Expr):
    """An identifier. Dotted forms are split: `x.shape` is Member(Name('x'), 'shape')."""
    name: str


@dataclass(frozen=True)
class Member(Expr):
    """`x.shape`, `x.rank` (non-packed tensors) or `x.size` (packs), 2.4 implicit identifiers.
    Any other dotted name in an expression is kept as Member too and rejected semantically."""
    target: Expr
    member: str


@dataclass(frozen=True)
class ListExpr(Expr):
    """`[a, b.., c:d, (e,f)..]`: items are Expr, Expand or Range."""
    items: tuple[Expr, ...]


@dataclass(frozen=True)
class Expand(Expr):
    """`x..` / `x...` expansion of a pack, or `x..(n)` repetition / length hint (2.4 Lists).
    Also used in tensor-access indices (`i..`), invocation arguments and yields."""
    operand: Expr
    count: Expr | None = None


@dataclass(frozen=True)
class Range(Expr):
    """`b:e:s` as a list item, or a slice `[b:e:s]` with omitted parts None (2.4 Ranges/Indexing)."""
    begin: Expr | None
    end: Expr | None
    step: Expr | None = None


@dataclass(frozen=True)
class Tuple(Expr):
    """`(a, b)`: only meaningful expanded in a list, as a zip `[(a, b)..]` (2.4 Zip)."""
    items: tuple[Expr, ...]


@dataclass(frozen=True)
class Subscript(Expr):
    """Pack or string indexing `a[i]`, slicing `a[i:j:k]` (index is a Range), masking `a[m]`."""
    target: Expr
    index: Expr


@dataclass(frozen=True)
class TensorAccess(Expr):
    """`x[i, j]`, `x[i,]`, `x[]`, `x[i..]`, `x[|i|]` (2.4 Tensor access, 2.12).

    Written as subscript syntax with a comma (or no index at all); each index is an Expr,
    Expand, Range (a `:` slice for packed assignment) or Guard."""
    target: Expr
    indices: tuple[Expr, ...]


@dataclass(frozen=True)
class Guard(Expr):
    """`|i|` (skip out of bounds) or `|i <> lo : hi|` (remap out-of-bounds indices), 2.12."""
    index: Expr
    low: Expr | None = None
    high: Expr | None = None


@dataclass(frozen=True)
class Substitute(Expr):
    """`a[i] <- b`: the pack `a` with the items at `i` replaced by `b` (2.4 Substitution)."""
    target: Expr
    index: Expr
    value: Expr


@dataclass(frozen=True)
class Unary(Expr):
    op: str                 # '-', '+', '!', '?' (null test)
    operand: Expr


@dataclass(frozen=True)
class Binary(Expr):
    """op: + - * / \\ % ** < <= > >= == != && || ^ => <? >? is in"""
    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Coalesce(Expr):
    """`a ?? b` (2.4 Null coalescing)."""
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Select(Expr):
    """`c ? a : b`, or `c ? a` (null when c is false) with `otherwise` None."""
    cond: Expr
    then: Expr
    otherwise: Expr | None


@dataclass(frozen=True)
class Fold(Expr):
    """`x + ..` (fold) and `x + ...` (cumulative fold, `cumulative`); op also ':=' (uniform value)."""
    op: str
    operand: Expr
    cumulative: bool = False


@dataclass(frozen=True)
class Cast(Expr):
    """`real(x)`, `int(x)`, `bool(x)`; `int()` (operand None) is the type's default value."""
    type_name: str
    operand: Expr | None


@dataclass(frozen=True)
class Builtin(Expr):
    """`sqrt(x)`, `abs(x)`, ... (2.4 Built-in functions)."""
    func: str
    operand: Expr


@dataclass(frozen=True)
class Call(Expr):
    """`T(x)` / `T()` with a non-keyword name inside an expression: a cast to a generic type
    declared in @dtype (2.13) — anything else is a semantic error."""
    name: str
    args: tuple[Expr, ...]


@dataclass(frozen=True)
class Omitted(Expr):
    """`~`: an omitted optional argument, output or extent."""


# ---------------------------------------------------------------- types (2.3, 2.6)

@dataclass(frozen=True)
class PackSpec(Node):
    """`..` or `..(n)` after a type or extent; `length` None when not written; `bound` the static
    upper bound of a dynamic length, `..(s|5)` (2.6.1 bounds written like extents)."""
    length: Expr | None
    bound: Expr | None = None


@dataclass(frozen=True)
class ShapeItem(Node):
    """One extent in `[...]`: `extent` (Omitted for `~`), `per_item` for a leading `..` (`..t`,
    one extent per pack item), `bound` for `|ub` (2.6.1), `pack` for a trailing `..(n)`."""
    extent: Expr
    per_item: bool = False
    bound: Expr | None = None
    pack: PackSpec | None = None


@dataclass(frozen=True)
class TypeSpec(Node):
    """`optional real^(r)[m, s..(d)]..(k)`. `shape` None when no `[...]` was written."""
    base: str                       # int real bool str type arith num, or a @dtype name
    optional: bool = False
    rank_capture: str | None = None
    shape: tuple[ShapeItem, ...] | None = None
    pack: PackSpec | None = None


# ---------------------------------------------------------------- declarations and blocks

@dataclass(frozen=True)
class DtypeDecl(Node):
    """`T: num = real;` (2.13)."""
    name: str
    base: str
    default: str | None = None


@dataclass(frozen=True)
class Bound(Node):
    """`i < n`: an index symbol with exclusive upper bound (2.7 constants, 2.12 lowering)."""
    index: str
    limit: Expr


@dataclass(frozen=True)
class ParamDecl(Node):
    """An @attrib/@input/@output/@constant/@variable item: `name: type = default, i < n;`."""
    name: str
    type: TypeSpec
    default: Expr | None = None
    bounds: tuple[Bound, ...] = ()


@dataclass(frozen=True)
class Pattern(Node):
    """Left-hand side of a @using item."""


@dataclass(frozen=True)
class PatName(Pattern):
    name: str
    pack: PackSpec | None = None


@dataclass(frozen=True)
class PatList(Pattern):
    items: tuple[Pattern, ...]


@dataclass(frozen=True)
class PatZip(Pattern):
    """`(e, f)..` inside a list pattern: unzip (2.9)."""
    names: tuple[str, ...]
    pack: PackSpec | None = None


@dataclass(frozen=True)
class UsingDecl(Node):
    target: Pattern
    value: Expr


@dataclass(frozen=True)
class AssertArg(Node):
    """A value printed with a failed assertion; `label` is the source text unless overridden."""
    label: str
    value: Expr


@dataclass(frozen=True)
class Assertion(Node):
    cond: Expr
    message: StrLit | None = None
    args: tuple[AssertArg, ...] = ()
    text: str = ""                  # the condition's source text


@dataclass(frozen=True)
class IterCount(Node):
    """`..(i -> n)`, `..(n)`, `..(i ->)` after do/unroll (2.10.1, 2.12)."""
    index: str | None
    count: Expr | None


@dataclass(frozen=True)
class LocalDef(Node):
    name: str
    value: Expr


@dataclass(frozen=True)
class Lowering(Node):
    """`[unroll..(k -> n)] [with a = e: ] lhs op rhs, i < n, ... | cond;` (2.12)."""
    target: Expr                    # TensorAccess (possibly of a Subscript of a pack)
    op: str                         # = := += *= &= |= <?= >?=
    value: Expr
    bounds: tuple[Bound, ...] = ()
    condition: Expr | None = None
    locals: tuple[LocalDef, ...] = ()
    unroll: IterCount | None = None


# ---------------------------------------------------------------- composition (2.10)

@dataclass(frozen=True)
class AttrAssign(Node):
    name: str
    value: Expr


@dataclass(frozen=True)
class Invocation(Expr):
    """`label: mod.op<real>{a=1}(x, ~, [y, z])`. Args are Expr (incl. Omitted, Expand)."""
    name: str                       # qualified as written: 'conv' or 'nn.conv'
    args: tuple[Expr, ...] = ()
    attrs: tuple[AttrAssign, ...] = ()
    generics: tuple[str, ...] = ()
    label: str | None = None


@dataclass(frozen=True)
class LValue(Node):
    """Left-hand side item of a @compose/@update assignment."""


@dataclass(frozen=True)
class LName(LValue):
    name: str
    type: TypeSpec | None = None
    pack: PackSpec | None = None


@dataclass(frozen=True)
class LList(LValue):
    items: tuple[LValue, ...]


@dataclass(frozen=True)
class LZip(LValue):
    names: tuple[str, ...]
    pack: PackSpec | None = None


@dataclass(frozen=True)
class LOmit(LValue):
    """`~` on the left: an output not given a name."""


@dataclass(frozen=True)
class Block(Expr):
    """`{ ...; yield a, b; }` — an embedded sub-graph (2.10.1)."""
    components: tuple["Component", ...]
    yields: tuple[Expr, ...]
    label: str | None = None


@dataclass(frozen=True)
class If(Expr):
    """`if c then a elif c2 then b else d`; each part is an Invocation, Block or Expr."""
    branches: tuple[tuple[Expr, Expr], ...]     # (condition, consequent) pairs
    otherwise: Expr


@dataclass(frozen=True)
class CarriedVar(Node):
    """`with x: real[n] = init` loop-carried dependency."""
    name: str
    type: TypeSpec | None
    init: Expr


@dataclass(frozen=True)
class ScanInput(Node):
    """`for x : xs`."""
    name: str
    pack: Expr


@dataclass(frozen=True)
class Loop(Expr):
    """All loop forms of 2.10.1: with/for/while-do/do-while, `..(i -> n)`, unroll."""
    body: Expr
    carried: tuple[CarriedVar, ...] = ()
    scans: tuple[ScanInput, ...] = ()
    pre_condition: Expr | None = None       # `while c do ...`
    post_condition: Expr | None = None      # `do ... while c`
    count: IterCount | None = None
    unroll: bool = False


@dataclass(frozen=True)
class Component(Node):
    """`a, [b, c..(k)], ~ = rhs;` in @compose / @update / a block."""
    targets: tuple[LValue, ...]
    value: Expr                     # Invocation, Block, If, Loop or a plain Expr


@dataclass(frozen=True)
class QuantEntry(Node):
    """`conv1.filter: quant.op<T>{a=1};` (2.14)."""
    tensor: str                     # scoped name
    op: str
    generics: tuple[str, ...] = ()
    attrs: tuple[AttrAssign, ...] = ()


# ---------------------------------------------------------------- definitions and modules

@dataclass(frozen=True)
class OperatorDef(Node):
    """`[public] operator name { ... }` or `graph name { ... }` (2.2)."""
    name: str
    is_graph: bool = False
    public: bool = False
    dtypes: tuple[DtypeDecl, ...] = ()
    attribs: tuple[ParamDecl, ...] = ()
    inputs: tuple[ParamDecl, ...] = ()
    outputs: tuple[ParamDecl, ...] = ()
    constants: tuple[ParamDecl, ...] = ()
    variables: tuple[ParamDecl, ...] = ()
    usings: tuple[UsingDecl, ...] = ()
    asserts: tuple[Assertion, ...] = ()
    lowers: tuple[Lowering, ...] = ()
    compose: tuple[Component, ...] | None = None     # None: no @compose block
    update: tuple[Component, ...] = ()
    quantize: tuple[QuantEntry, ...] = ()
    blocks: tuple[str, ...] = ()                     # block names in source order


@dataclass(frozen=True)
class Import(Node):
    module: str                     # dotted for nested modules: 'custom.ops'


@dataclass(frozen=True)
class Module(Node):
    name: str                       # module name (file stem), e.g. 'main', 'nn'
    imports: tuple[Import, ...] = ()
    definitions: tuple[OperatorDef, ...] = ()
    version: str | None = None
    extensions: tuple[str, ...] = ()

    def get(self, name: str) -> OperatorDef | None:
        for d in self.definitions:
            if d.name == name:
                return d
        return None

    @property
    def graphs(self) -> tuple[OperatorDef, ...]:
        return tuple(d for d in self.definitions if d.is_graph)
