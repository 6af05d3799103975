"""The parser's rules for expressions (NNEF 2.0 draft 2.4): lark rule → ast node, literals and
formatted strings, and the base every rule class shares (locations, errors). parser.py drives
lark with these and the definitions' rules (syntax_definitions.py) as one transformer.
"""
from __future__ import annotations

import math
from typing import Callable

from lark import Token

from ..errors import Location, SyntaxError_
from . import ast

# Python converts at most 4300 digits between int and str (sys.get_int_max_str_digits); a longer
# literal could be read but never printed again (messages, the writer), so it is refused.
MAX_INT_LITERAL_DIGITS = 4300
BUILTIN_FUNCS = frozenset("""abs sign sqrt exp log sin cos tan asin acos atan sinh cosh tanh
    asinh acosh atanh round floor ceil frac""".split())
CAST_TYPES = frozenset({"int", "real", "bool", "str"})


class RuleBase:
    """What every rule method needs: the file, its text, locations and located errors. One
    builder per parse; `parse_fragment` parses a format field's expression (the driver's)."""

    def __init__(self, filename: str, text: str, parse_fragment: Callable):
        self.filename = filename
        self.text = text
        self.parse_fragment = parse_fragment
        self.parenthesized: set[int] = set()    # ids of expressions written inside ( )
        self.depth = 0                          # nesting depth of the node being built

    # -- helpers
    def loc(self, meta_or_tok) -> Location:
        line = getattr(meta_or_tok, "line", None)
        col = getattr(meta_or_tok, "column", None)
        return Location(self.filename, line, col)

    def source(self, meta) -> str:
        if getattr(meta, "empty", True) or meta.start_pos is None:
            return ""
        return " ".join(self.text[meta.start_pos:meta.end_pos].split())

    def error(self, message: str, where, hint: str | None = None) -> SyntaxError_:
        return SyntaxError_(message, location=self.loc(where), hint=hint)

    @staticmethod
    def _exprs(children):
        return [c for c in children if isinstance(c, ast.Expr)]

    def __default__(self, data, children, meta):
        raise SyntaxError_(f"internal: grammar rule {data!r} has no AST mapping",
                           location=self.loc(meta))


class ExpressionRules(RuleBase):
    """Grammar rules of expressions → ast.Expr nodes."""

    def select(self, meta, children):
        e = self._exprs(children)
        return ast.Select(self.loc(meta), e[0], e[1], e[2] if len(e) > 2 else None)

    def coalesce(self, meta, children):
        return ast.Coalesce(self.loc(meta), children[0], children[-1])

    def substitute(self, meta, children):
        target, value = children[0], children[-1]
        if isinstance(target, ast.TensorAccess):
            raise self.error("substitution '<-' needs a pack index 'a[i] <- b', not a tensor access",
                             meta)
        return ast.Substitute(self.loc(meta), target.target, target.index, value)

    def implication(self, meta, children):
        return ast.Binary(self.loc(meta), "=>", children[0], children[-1])

    def binary(self, meta, children):
        left, op, right = children
        return ast.Binary(self.loc(meta), str(op), left, right)

    def fold(self, meta, children):
        operand, op_tok, dots = children
        op = str(op_tok)
        if op in ("-", "/", "\\", "%"):
            raise self.error(f"'{op}' has no fold; folds are + * && || < <= > >= == != <? >? :=", op_tok)
        # 2.4: three dots make a cumulative fold. Operators without a cumulative form (comparisons,
        # ':=') accept '...' as a plain fold, as chapter 4 writes e.g. `perm != ...`.
        cumulative = len(dots) == 3 and op in ("+", "*", "&&", "||", "<?", ">?")
        return ast.Fold(self.loc(meta), op, operand, cumulative)

    def unary(self, meta, children):
        return ast.Unary(self.loc(meta), str(children[0]), children[1])

    def null_test(self, meta, children):
        return ast.Unary(self.loc(meta), "?", children[-1])

    def power(self, meta, children):
        return ast.Binary(self.loc(meta), "**", children[0], children[-1])

    def subscript(self, meta, children):
        target, (items, trailing) = children
        single = len(items) == 1 and not trailing
        if single and not isinstance(items[0], (ast.Guard, ast.Expand)):
            return ast.Subscript(self.loc(meta), target, items[0])
        return ast.TensorAccess(self.loc(meta), target, tuple(items))

    def index_list(self, meta, children):
        trailing = any(isinstance(c, Token) and c.type == "TRAILING_COMMA" for c in children)
        items = [c for c in children if isinstance(c, ast.Expr)]
        return (items, trailing)

    def expand(self, meta, children):
        operand = children[0]
        count = next((c for c in children[1:] if isinstance(c, ast.Expr)), None)
        return ast.Expand(self.loc(meta), operand, count)

    def pack_len(self, meta, children):
        return children[0]

    def guard(self, meta, children):
        e = self._exprs(children)
        return ast.Guard(self.loc(meta), e[0], e[1] if len(e) > 1 else None, e[2] if len(e) > 2 else None)

    def guard_lt(self, meta, children):
        cond, high = children
        if not (isinstance(cond, ast.Binary) and cond.op == "<"):
            raise self.error("a remapped index is written '|i <> low : high|'", meta)
        return ast.Guard(self.loc(meta), cond.left, cond.right, high)

    def slice(self, meta, children):
        parts: list = [None, None, None]
        k = 0
        for c in children:
            if isinstance(c, Token) and c.type == "COLON":
                k += 1
            elif isinstance(c, ast.Expr):
                parts[k] = c
        return ast.Range(self.loc(meta), *parts)

    def range(self, meta, children):
        e = self._exprs(children)
        return ast.Range(self.loc(meta), e[0], e[1], e[2] if len(e) > 2 else None)

    def call(self, meta, children):
        callee = children[0]
        generics = next((c[1] for c in children if isinstance(c, tuple) and c[0] == "generics"), ())
        attrs = next((c[1] for c in children if isinstance(c, tuple) and c[0] == "attrs"), None)
        args = tuple(c for c in children[1:] if isinstance(c, ast.Expr))
        name = str(callee)
        loc = self.loc(meta)
        if generics or attrs is not None or "." in name:
            return ast.Invocation(loc, name, args, attrs or (), generics)
        if isinstance(callee, Token) and callee.type == "TYPE_KW":
            if name not in CAST_TYPES:
                raise self.error(f"'{name}' is an abstract type and cannot be used as a cast", meta)
            if len(args) > 1 or any(isinstance(a, (ast.Omitted, ast.Expand)) for a in args):
                raise self.error(f"cast '{name}(...)' takes one argument", meta)
            return ast.Cast(loc, name, args[0] if args else None)
        if name in BUILTIN_FUNCS and len(args) == 1 and not isinstance(args[0], (ast.Omitted, ast.Expand)):
            return ast.Builtin(loc, name, args[0])
        return ast.Call(loc, name, args)

    def generic_args(self, meta, children):
        return ("generics", tuple(str(c) for c in children if not isinstance(c, Token)))

    def attr_args(self, meta, children):
        return ("attrs", tuple(c for c in children if isinstance(c, ast.AttrAssign)))

    def attr_assign(self, meta, children):
        return ast.AttrAssign(self.loc(meta), str(children[0]), children[-1])

    def omitted_arg(self, meta, children):
        return ast.Omitted(self.loc(meta))

    def int_lit(self, meta, children):
        digits = str(children[0])
        if len(digits) > MAX_INT_LITERAL_DIGITS:
            raise self.error(f"integer literal of {len(digits)} digits; qsim reads integer literals "
                             f"of at most {MAX_INT_LITERAL_DIGITS} digits", meta,
                             hint="no tensor or extent can hold such a value; check the literal")
        return ast.IntLit(self.loc(meta), int(digits))

    def real_lit(self, meta, children):
        text = str(children[0])
        value = float(text)
        if math.isinf(value):
            # reals are evaluated as 64-bit floats at compile time (2.3 leaves precision open):
            # a literal past their range would silently become infinity
            raise self.error(f"real literal {_abbreviate(text)} is beyond the range of 64-bit floats "
                             f"(about 1.8e308)", meta,
                             hint="write 'inf' if infinity is meant, or a smaller value")
        return ast.RealLit(self.loc(meta), value, text)

    def true_lit(self, meta, children):
        return ast.BoolLit(self.loc(meta), True)

    def false_lit(self, meta, children):
        return ast.BoolLit(self.loc(meta), False)

    def inf_lit(self, meta, children):
        return ast.RealLit(self.loc(meta), math.inf, "inf")

    def pi_lit(self, meta, children):
        return ast.RealLit(self.loc(meta), math.pi, "pi")

    def strings(self, meta, children):
        parts: list = []
        for tok in children:
            for p in _string_parts(tok, self):
                if isinstance(p, str) and parts and isinstance(parts[-1], str):
                    parts[-1] += p
                else:
                    parts.append(p)
        return ast.StrLit(self.loc(meta), tuple(parts))

    def qualname(self, meta, children):
        return ".".join(str(c) for c in children)

    def name(self, meta, children):
        parts = str(children[0]).split(".")
        node: ast.Expr = ast.Name(self.loc(meta), parts[0])
        for p in parts[1:]:
            node = ast.Member(self.loc(meta), node, p)
        return node

    def paren(self, meta, children):
        node = children[0]
        self.parenthesized.add(id(node))
        return node

    def tuple(self, meta, children):
        return ast.Tuple(self.loc(meta), tuple(children))

    def list(self, meta, children):
        return ast.ListExpr(self.loc(meta), tuple(c for c in children if isinstance(c, ast.Expr)))


def _abbreviate(text: str, keep: int = 24) -> str:
    return text if len(text) <= keep else f"{text[:keep]}... ({len(text)} characters)"


_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", '"': '"', "'": "'", "{": "{", "}": "}"}


def _string_parts(tok: Token, builder: RuleBase) -> list:
    """Splits a string token into text and `{expr}` format fields (2.4 String formatting)."""
    body = tok.value[1:-1]
    parts: list = []
    buf: list[str] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            buf.append(_ESCAPES.get(body[i + 1], "\\" + body[i + 1]))
            i += 2
            continue
        if ch == "{":
            j = body.find("}", i)
            if j < 0:
                raise _located_error(builder.filename, "unclosed '{' in formatted string", tok, i + 1,
                                     "close the format field with '}' or escape a literal brace as '\\{'")
            if buf:
                parts.append("".join(buf))
                buf = []
            field = body[i + 1:j]
            if not field.strip():
                raise _located_error(builder.filename, "empty format field '{}' in string", tok, i + 1,
                                     "put an expression inside the braces or escape them as '\\{\\}'")
            line, col = _offset_position(tok, i + 2)
            parts.append(builder.parse_fragment(field, builder.filename, line, col, builder.depth))
            i = j + 1
            continue
        if ch == "}":
            raise _located_error(builder.filename, "unmatched '}' in formatted string", tok, i + 1,
                                 "escape a literal brace as '\\}'")
        buf.append(ch)
        i += 1
    if buf or not parts:
        parts.append("".join(buf))
    return parts


def _offset_position(tok: Token, offset: int) -> tuple[int, int]:
    """Line and column of character `offset` of the token's text."""
    prefix = tok.value[:offset]
    nl = prefix.count("\n")
    if nl == 0:
        return tok.line, tok.column + offset
    return tok.line + nl, offset - prefix.rfind("\n")


def _located_error(filename: str, message: str, tok: Token, offset: int, hint: str) -> SyntaxError_:
    line, col = _offset_position(tok, offset)
    return SyntaxError_(message, location=Location(filename, line, col), hint=hint)
