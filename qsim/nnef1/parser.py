"""NNEF 1.0 text → AST (qsim.nnef1.ast): graph.nnef documents and graph.quant files.

The grammar is nnef1.lark (LALR). Syntax errors become SyntaxError_ located at
file:line:col, quoting the offending text and listing what the grammar expected there.

Bad input never reaches Python's limits: the parse tree is transformed without recursion,
expressions, types and left-hand sides nested deeper than qsim.limits.MAX_NESTING_DEPTH are
refused with their location (a chain `a + b + c + ...` is flat: its left operand does not
count as a level), integer literals must fit 64-bit signed integers and real literals
must be finite float64 values (docs/nnef1.md).
"""
from __future__ import annotations

import functools
import math
import re
import sys

import lark
from lark import Lark, Token, Transformer_NonRecursive, v_args

from ..errors import Location, QsimError, SyntaxError_, UnsupportedError
from ..limits import MAX_NESTING_DEPTH
from . import ast

# readable names of grammar terminals for "expected ..." lists
_TERMINAL_TEXT = {
    "SEMICOLON": "';'", "COMMA": "','", "LPAR": "'('", "RPAR": "')'", "LSQB": "'['", "RSQB": "']'",
    "LBRACE": "'{'", "RBRACE": "'}'", "EQUAL": "'='", "COLON": "':'", "SLICE_COLON": "':'",
    "IDENT": "an identifier", "NUMBER": "a number", "STRING": "a string", "GENERIC": "'<type>'",
    "TYPE_NAME": "a type name", "BUILTIN": "a built-in function", "TYPE_CAST": "a type cast",
    "LOGIC_OP": "'&&' or '||'", "CMP_OP": "a comparison", "ADD_OP": "'+' or '-'",
    "MUL_OP": "'*' or '/'", "POW_OP": "'^'", "UNARY_OP": "'!'", "LESSTHAN": "'<'",
    "MORETHAN": "'>'", "QMARK": "'?'", "__ANON_0": "'->'", "$END": "end of file",
}


# 3.1 Lexical Elements: these must not be identifiers
KEYWORDS = frozenset({"version", "extension", "graph", "fragment", "tensor", "integer", "scalar",
                      "logical", "string", "shape_of", "length_of", "range_of", "for", "in", "yield",
                      "if", "else", "true", "false"})


# 3.2: the two Khronos extensions of the compositional syntax. qsim always accepts fragment
# definitions and operator expressions (spec examples and converters omit the directives).
KNOWN_EXTENSIONS = frozenset({"KHR_enable_fragment_definitions", "KHR_enable_operator_expressions"})


@functools.lru_cache(maxsize=None)
def _lark() -> Lark:
    return Lark.open("nnef1.lark", rel_to=__file__, parser="lalr", start=["start", "quant_file"],
                     propagate_positions=True, maybe_placeholders=True, cache=False)


@functools.lru_cache(maxsize=4)
def parse_document(text: str, filename: str = "graph.nnef") -> ast.Document:
    """Parses a whole graph.nnef document (flat or compositional syntax). The document is
    immutable (frozen dataclasses and tuples), so the same text and name give the same object:
    the last few are kept, and a model loaded again (at another batch size, for the batched
    evaluation: quant/pipeline.py batched_models) is composed without parsing it again
    (EfficientNet-Lite0: 0.15 s CPU, 0.1 of it the parse). A syntax error is raised each time."""
    tree = _parse(text, filename, "start")
    return _transform(tree, filename).children[0]


def parse_fragments(text: str, filename: str) -> tuple[ast.Fragment, ...]:
    """Parses fragment definitions only (the standard library file): a document without a graph."""
    doc = parse_document("version 1.0; " + text + "\ngraph _stdlib_() -> () { }", filename)
    return doc.fragments


def parse_quant(text: str, filename: str = "graph.quant") -> tuple[ast.QuantEntry, ...]:
    tree = _parse(text, filename, "quant_file")
    return tuple(_transform(tree, filename).children)


def _transform(tree: lark.Tree, filename: str):
    try:
        return _ToAst(filename).transform(tree)
    except lark.exceptions.VisitError as err:
        if isinstance(err.orig_exc, QsimError):
            raise err.orig_exc from None
        raise


def _parse(text: str, filename: str, start: str) -> lark.Tree:
    try:
        return _lark().parse(text, start=start)
    except lark.exceptions.UnexpectedInput as err:
        raise _syntax_error(err, text, filename) from None


def _syntax_error(err: lark.exceptions.UnexpectedInput, text: str, filename: str) -> SyntaxError_:
    line, column = getattr(err, "line", None), getattr(err, "column", None)
    if line is None or line < 1:
        lines = text.splitlines() or [""]
        line, column = len(lines), len(lines[-1]) + 1
    if isinstance(err, lark.exceptions.UnexpectedToken):
        found = "end of file" if err.token.type == "$END" else repr(str(err.token))
        expected = sorted({_TERMINAL_TEXT.get(t, repr(t.lower()) if t.isupper() else t)
                           for t in err.expected if not t.startswith("__")} or {"something else"})
    elif isinstance(err, lark.exceptions.UnexpectedCharacters):
        found = repr(text[err.pos_in_stream]) if err.pos_in_stream < len(text) else "end of file"
        allowed = getattr(err, "allowed", None) or ()
        expected = sorted({_TERMINAL_TEXT.get(t, t) for t in allowed if not t.startswith("__")})
    else:
        found, expected = "end of file", ["more input"]
    source_line = text.splitlines()[line - 1] if 0 < line <= len(text.splitlines()) else ""
    message = f"unexpected {found}; expected {', '.join(expected[:8])}"
    if len(expected) > 8:
        message += ", ..."
    hint = None
    if source_line:
        hint = f"{source_line.strip()}"
    if found.startswith("'-'") or found == "'-'":
        hint = (hint or "") + "  (compositional syntax writes negative numbers with unary minus)"
    return SyntaxError_(message, location=Location(filename, line, column), hint=hint)


def _unquote(token: str) -> str:
    body = token[1:-1]
    return re.sub(r"\\(.)", r"\1", body)


# 3.1 leaves the range of numeric literals open; qsim holds integers as int64 and reals as
# float64, so a literal outside those is refused where it is written.
MAX_INTEGER_LITERAL = 2 ** 63 - 1


def _number(text: str, loc: Location):
    if re.fullmatch(r"[0-9]+", text):
        digits = text.lstrip("0")
        # length first: int() of a 5,000-digit text is refused by Python itself
        if len(digits) > 19 or int(text) > MAX_INTEGER_LITERAL:
            shown = text if len(text) <= 30 else f"{text[:12]}...{text[-6:]} ({len(text)} digits)"
            raise SyntaxError_(f"integer literal {shown} is out of range", location=loc,
                               hint=f"integer literals are at most {MAX_INTEGER_LITERAL} (2^63 - 1)")
        return int(text)
    value = float(text)
    if not math.isfinite(value):
        shown = text if len(text) <= 30 else f"{text[:12]}...{text[-6:]}"
        raise SyntaxError_(f"real literal {shown} is out of range", location=loc,
                           hint=f"real literals are at most {sys.float_info.max:.17g} in magnitude")
    return value


def _generic_name(token: Token | None) -> str | None:
    if token is None:
        return None
    return token[1:-1].strip()


def _nested(method):
    """Wraps a rule method: the node it returns is one level deeper than its deepest child
    (Binary: than its right operand, so operator chains stay flat); past MAX_NESTING_DEPTH the
    document is refused at the node's location."""
    @functools.wraps(method)
    def rule(self, meta, children):
        node = method(self, meta, children)
        inner = children[1:] if isinstance(node, ast.Binary) else children
        depth = max((self._depth_of(c) for c in inner), default=0) + 1
        if isinstance(node, ast.Binary):
            depth = max(depth, self._depth_of(node.left))
        if depth > MAX_NESTING_DEPTH:
            what = {ast.TypeSpec: "type", ast.LValue: "left-hand side"}.get(type(node), "expression")
            raise SyntaxError_(f"{what} nests deeper than {MAX_NESTING_DEPTH} levels",
                               location=self._loc(meta),
                               hint="the limit is qsim.limits.MAX_NESTING_DEPTH; split deep "
                                    "expressions into several assignments")
        self._depths[id(node)] = (node, depth)
        return node
    return rule


@v_args(meta=True)
class _ToAst(Transformer_NonRecursive):
    """Maps each grammar rule to its AST class; an unhandled rule is an internal error.

    Non-recursive (lark visits the tree with an explicit stack), so a deep parse tree cannot
    exhaust Python's recursion; `_nested` rules count nesting levels instead."""

    def __init__(self, filename: str):
        super().__init__()
        self.filename = filename
        self._depths: dict[int, tuple] = {}   # id(node) → (node, depth); the node keeps the id unique

    def _depth_of(self, child) -> int:
        if isinstance(child, (list, tuple)) and not isinstance(child, Token):
            return max((self._depth_of(c) for c in child), default=0)
        entry = self._depths.get(id(child))
        return entry[1] if entry is not None and entry[0] is child else 0

    def IDENT(self, token: Token) -> Token:
        if str(token) in KEYWORDS:
            raise SyntaxError_(f"'{token}' is a keyword and cannot be an identifier",
                               location=Location(self.filename, token.line, token.column),
                               hint="keywords (3.1): " + ", ".join(sorted(KEYWORDS)))
        return token

    def _loc(self, meta) -> Location:
        if getattr(meta, "empty", True):
            return Location(self.filename)
        return Location(self.filename, meta.line, meta.column)

    def __default__(self, data, children, meta):
        raise AssertionError(f"nnef1 grammar rule {data!r} has no AST mapping")

    # ---- document
    def start(self, meta, children):
        return lark.Tree("start", children)

    def quant_file(self, meta, children):
        return lark.Tree("quant_file", children)

    def document(self, meta, children):
        version, *rest = children
        extensions = tuple(n for c in rest if isinstance(c, tuple) for n in c)
        fragments = tuple(c for c in rest if isinstance(c, ast.Fragment))
        graph = next(c for c in rest if isinstance(c, ast.GraphDef))
        return ast.Document(self._loc(meta), version, extensions, fragments, graph)

    def version(self, meta, children):
        # 3.1: "version" <numeric-literal>, major.minor; only major version 1 is this syntax
        text = str(children[0])
        if text.split(".")[0] != "1" or not re.fullmatch(r"\d+\.\d+", text):
            raise UnsupportedError(f"document version {text}: this reader reads NNEF 1.x graph.nnef",
                                   location=self._loc(meta),
                                   hint="NNEF 2.0 models are SkriptND folders with main.sknd")
        return text

    def extension(self, meta, children):
        names = tuple(str(c) for c in children)
        for token, name in zip(children, names):
            if name not in KNOWN_EXTENSIONS:
                raise UnsupportedError(f"extension '{name}' is not supported", location=Location(
                    self.filename, token.line, token.column),
                    hint="qsim implements " + ", ".join(sorted(KNOWN_EXTENSIONS)))
        return names

    def fragment(self, meta, children):
        name, *rest = children
        generic, default = False, None
        if rest and isinstance(rest[0], tuple) and rest[0] and rest[0][0] == "generic":
            generic, default = True, rest[0][1]
            rest = rest[1:]
        params = tuple(c for c in rest if isinstance(c, ast.Param))
        results = tuple(c for c in rest if isinstance(c, ast.Result))
        body = rest[-1] if rest and isinstance(rest[-1], list) else None
        return ast.Fragment(self._loc(meta), str(name), generic, default, params, results,
                            tuple(body) if body is not None else None)

    def generic_plain(self, meta, children):
        inner = _generic_name(children[0])
        return ("generic", None if inner == "?" else inner) if inner == "?" else ("generic", inner)

    def generic_default(self, meta, children):
        return ("generic", str(children[0]))

    def param(self, meta, children):
        name, type_, default = children
        return ast.Param(self._loc(meta), str(name), type_, default)

    def result(self, meta, children):
        name, type_ = children
        return ast.Result(self._loc(meta), str(name), type_)

    def type_prim(self, meta, children):
        return ast.TypeSpec("prim", str(children[0]))

    def type_tensor_unbound(self, meta, children):
        return ast.TypeSpec("tensor", None)

    def type_tensor(self, meta, children):
        return ast.TypeSpec("tensor", _generic_name(children[0]))

    @_nested
    def type_array(self, meta, children):
        return ast.TypeSpec("array", item=children[0])

    @_nested
    def type_tuple(self, meta, children):
        return ast.TypeSpec("tuple", items=tuple(children))

    def graph(self, meta, children):
        name, inputs, outputs, body = children
        return ast.GraphDef(self._loc(meta), str(name), inputs, outputs, tuple(body))

    def ident_list(self, meta, children):
        return tuple(str(c) for c in children)

    def body(self, meta, children):
        return list(children)

    def assignment(self, meta, children):
        target, value = children
        return ast.Assignment(self._loc(meta), target, value)

    def lvalue_top(self, meta, children):
        if len(children) == 1:
            return children[0]
        return self._lvalue_top(meta, children)

    @_nested
    def _lvalue_top(self, meta, children):
        return ast.LValue(self._loc(meta), "tuple", items=tuple(children))

    def lv_id(self, meta, children):
        return ast.LValue(self._loc(meta), "id", name=str(children[0]))

    @_nested
    def lv_array(self, meta, children):
        return ast.LValue(self._loc(meta), "array", items=tuple(c for c in children if c is not None))

    @_nested
    def lv_tuple(self, meta, children):
        return ast.LValue(self._loc(meta), "tuple", items=tuple(children))

    def rvalue_top(self, meta, children):
        if len(children) == 1:
            return children[0]
        return self._rvalue_top(meta, children)

    @_nested
    def _rvalue_top(self, meta, children):
        return ast.TupleExpr(self._loc(meta), tuple(children))

    # ---- expressions
    @_nested
    def if_else(self, meta, children):
        then, condition, otherwise = children
        return ast.IfElse(self._loc(meta), condition, then, otherwise)

    @_nested
    def contains(self, meta, children):
        return ast.Binary(self._loc(meta), "in", children[0], children[1])

    @_nested
    def binary(self, meta, children):
        left, op, right = children
        op = {"and": "&&", "or": "||"}.get(str(op), str(op))
        return ast.Binary(self._loc(meta), op, left, right)

    @_nested
    def unary(self, meta, children):
        op, operand = children
        return ast.Unary(self._loc(meta), str(op), operand)

    @_nested
    def index(self, meta, children):
        return ast.Index(self._loc(meta), children[0], children[1])

    @_nested
    def slice(self, meta, children):
        target, begin, _colon, end = children
        return ast.Slice(self._loc(meta), target, begin, end)

    def number(self, meta, children):
        return ast.Literal(self._loc(meta), _number(str(children[0]), self._loc(meta)))

    def string(self, meta, children):
        return ast.Literal(self._loc(meta), _unquote(str(children[0])))

    def true(self, meta, children):
        return ast.Literal(self._loc(meta), True)

    def false(self, meta, children):
        return ast.Literal(self._loc(meta), False)

    def name(self, meta, children):
        return ast.Name(self._loc(meta), str(children[0]))

    @_nested
    def invocation(self, meta, children):
        name, generic, *args = children
        return ast.Invocation(self._loc(meta), str(name), _generic_name(generic),
                              tuple(a for a in args if a is not None))

    @_nested
    def builtin(self, meta, children):
        return ast.Builtin(self._loc(meta), str(children[0]), children[1])

    @_nested
    def tuple(self, meta, children):
        return ast.TupleExpr(self._loc(meta), tuple(children))

    @_nested
    def array(self, meta, children):
        return ast.ArrayExpr(self._loc(meta), tuple(c for c in children if c is not None))

    @_nested
    def comprehension(self, meta, children):
        iterators = tuple(c for c in children[:-2])
        return ast.Comprehension(self._loc(meta), iterators, children[-2], children[-1])

    @_nested
    def loop_iter(self, meta, children):
        return (str(children[0]), children[1])

    @_nested
    def positional(self, meta, children):
        return ast.Argument(self._loc(meta), None, children[0])

    @_nested
    def named(self, meta, children):
        return ast.Argument(self._loc(meta), str(children[0]), children[1])

    def quant_entry(self, meta, children):
        tensor, op, generic, *args = children
        invocation = ast.Invocation(self._loc(meta), str(op), _generic_name(generic),
                                    tuple(a for a in args if a is not None))
        return ast.QuantEntry(self._loc(meta), _unquote(str(tensor)), invocation)
