"""SkriptND text → ast.Module (NNEF 2.0 draft chapter 2; grammar in skriptnd.lark).

`parse(text, filename)` is the entry point. The LALR parser runs with the transformer inline
(no intermediate parse tree), and every failure is a qsim.errors.SyntaxError_ carrying
file:line:col, the offending text and what was expected there.
"""
from __future__ import annotations

from lark import Lark, Token
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

from ..errors import Location, SyntaxError_
from ..limits import MAX_NESTING_DEPTH
from . import ast
from ..textfile import decode_utf8
from .syntax_definitions import DefinitionRules
from .syntax_expressions import ExpressionRules


# Readable names for terminals in "expected ..." messages.
_TOKEN_TEXT = {
    "SEMI": "';'", "COLON": "':'", "COMMA": "','", "LPAR": "'('", "RPAR": "')'", "LSQB": "'['",
    "RSQB": "']'", "LBRACE": "'{'", "RBRACE": "'}'", "EQUAL": "'='", "IDENT": "identifier",
    "INT": "integer", "REAL": "real number", "STRING": "string", "DOTS": "'..'", "TILDE": "'~'",
    "TYPE_KW": "type name", "ASSIGN_OP": "assignment operator", "COLON_EQ": "':='",
    "VBAR": "'|'", "QMARK": "'?'", "MORETHAN": "'>'", "LT": "'<'", "GENERIC_LT": "'<'",
    "DOT": "'.'", "ADD_OP": "'+' or '-'", "MUL_OP": "'*', '/', '\\\\' or '%'", "CMP_OP": "comparison",
    "ARROW": "'->'", "TRAILING_COMMA": "','", "CIRCUMFLEX": "'^'", "XOR": "'^'",
}


def _token_text(name: str) -> str:
    if name in _TOKEN_TEXT:
        return _TOKEN_TEXT[name]
    if name.startswith("__ANON"):
        return name
    if name.isupper() and name.isalpha():
        return repr(name.lower())          # keywords: OPERATOR → 'operator'
    return name


def _describe_expected(expected) -> str:
    names = sorted({_token_text(n) for n in expected})
    if len(names) > 12:
        names = names[:12] + ["..."]
    return ", ".join(names)


class _Builder(DefinitionRules, ExpressionRules):
    """Maps grammar rules to ast nodes; used as lark's inline transformer (one per parse)."""


_LARK: dict[str, Lark] = {}


def _lark() -> Lark:
    parser = _LARK.get("lalr")
    if parser is None:
        parser = Lark.open("skriptnd.lark", rel_to=__file__, parser="lalr", lexer="contextual",
                           start=["module", "expr"], propagate_positions=True,
                           maybe_placeholders=True, cache=True)
        _LARK["lalr"] = parser
    return parser


def _parse_fragment(text: str, filename: str, line: int, column: int, depth: int = 0) -> ast.Expr:
    """Parses a format-field expression; locations are shifted to where it sits in the file."""
    shifted = "\n" * (line - 1) + " " * (column - 1) + text
    return _run(shifted, filename, "expr", depth)


def _run(text: str, filename: str, start: str, depth: int = 0):
    builder = _Builder(filename, text, _parse_fragment)
    try:
        tree = _lark().parse(text, start=start, on_error=None)
        return _build(tree, builder, depth)
    except UnexpectedInput as err:
        raise _syntax_error(err, text, filename) from None
    except VisitError as err:
        if isinstance(err.orig_exc, SyntaxError_):
            raise err.orig_exc from None
        raise


def _build(tree, builder: _Builder, depth: int = 0):
    """Bottom-up construction of ast nodes from the lark tree (iterative: no recursion limit).

    Refuses a tree nested deeper than limits.MAX_NESTING_DEPTH at the first node found below
    that depth (inside the offending nest or chain), before building anything: every later pass
    over the AST (evaluation, binding, lowering, the writer, the parse cache's pickling)
    recurses once or more per level, so this one check keeps all of them far below Python's
    recursion limit."""
    from lark import Tree
    # post-order traversal with an explicit stack; `depth` counts from the root (1)
    stack = [(tree, False, depth + 1)]      # a format field starts at its string's depth
    results: dict[int, object] = {}
    while stack:
        node, done, depth = stack.pop()
        if not isinstance(node, Tree):
            continue
        if not done:
            if depth > MAX_NESTING_DEPTH:
                raise _nesting_error(node, builder.filename)
            stack.append((node, True, depth))
            for child in reversed(node.children):     # leftmost first: errors at the earliest place
                if isinstance(child, Tree):
                    stack.append((child, False, depth + 1))
            continue
        children = [results.pop(id(c)) if isinstance(c, Tree) else c for c in node.children]
        children = [c for c in children if c is not None]
        method = getattr(builder, node.data, None)
        if method is None:
            builder.__default__(node.data, children, node.meta)
        builder.depth = depth
        results[id(node)] = method(node.meta, children)
    return results[id(tree)]


def _nesting_error(node, filename: str) -> SyntaxError_:
    """The node at which nesting first exceeds the limit, located at its first token."""
    meta = node.meta
    where = node
    while getattr(meta, "empty", True) and where.children:
        where = next((c for c in where.children if hasattr(c, "meta") or isinstance(c, Token)),
                     None)
        if where is None or isinstance(where, Token):
            break
        meta = where.meta
    line = getattr(where if isinstance(where, Token) else meta, "line", None)
    column = getattr(where if isinstance(where, Token) else meta, "column", None)
    return SyntaxError_(
        f"the text nests deeper than {MAX_NESTING_DEPTH} levels here (parentheses, brackets, "
        f"blocks, calls and each operator of a chain such as 'a + b + c' count one level each); "
        f"qsim refuses deeper documents (qsim.limits.MAX_NESTING_DEPTH)",
        location=Location(filename, line, column),
        hint="split the expression into named parts (@using entries, intermediate tensors or "
             "attributes), or use a fold such as 'xs + ..' over a list instead of a long chain")


def _syntax_error(err: UnexpectedInput, text: str, filename: str) -> SyntaxError_:
    line, col = getattr(err, "line", None), getattr(err, "column", None)
    if isinstance(err, UnexpectedCharacters):
        ch = text[err.pos_in_stream] if err.pos_in_stream < len(text) else ""
        allowed = getattr(err, "allowed", None) or ()
        msg = f"unexpected character {ch!r}"
        if allowed:
            msg += f"; expected {_describe_expected(allowed)}"
        return SyntaxError_(msg, location=Location(filename, line, col))
    if isinstance(err, UnexpectedEOF) or (isinstance(err, UnexpectedToken) and err.token.type == "$END"):
        expected = getattr(err, "expected", None) or ()
        lines = text.rstrip().split("\n")
        return SyntaxError_(f"unexpected end of input; expected {_describe_expected(expected)}",
                            location=Location(filename, len(lines), len(lines[-1]) + 1),
                            hint="a '}' or ';' may be missing")
    tok = err.token
    expected = err.expected or ()
    msg = f"unexpected {tok.value!r}; expected {_describe_expected(expected)}"
    hint = None
    if "SEMI" in expected and len(expected) < 40:
        hint = "is a ';' missing before it?"
    return SyntaxError_(msg, location=Location(filename, tok.line, tok.column), hint=hint)


def decode_source(data: bytes, filename: str) -> str:
    """A .sknd file's bytes as text: UTF-8 (the draft names no encoding; identifiers are ASCII,
    2.4), a leading byte-order mark skipped. Bytes that are not UTF-8 are a SyntaxError_ at their line and column, naming the
    byte offset."""
    return decode_utf8(data, filename, kind=SyntaxError_, hint="save the model as UTF-8",
                       strip_bom=True)


def parse(text: str, filename: str = "<string>") -> ast.Module:
    """Parses one SkriptND module (a .sknd file's text). Raises SyntaxError_ with file:line:col."""
    return _run(text, filename, "module")


def parse_expr(text: str, filename: str = "<string>") -> ast.Expr:
    """Parses a single expression (tests, format fields, the command line)."""
    return _run(text, filename, "expr")


def _check_coverage() -> None:
    """Every rule/alias of the grammar has a builder method (the transformer's __default__ is the
    net for anything missed at run time)."""
    names = set()
    for rule in _lark().rules:
        if rule.options.expand1 and not rule.alias:
            continue
        names.add(str(rule.alias or rule.origin.name))
    missing = sorted(n for n in names if isinstance(n, str) and not n.startswith("_")
                     and not hasattr(_Builder, n))
    if missing:
        raise RuntimeError(f"skriptnd.lark rules without AST mapping: {missing}")
