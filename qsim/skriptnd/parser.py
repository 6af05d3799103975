"""SkriptND text → ast.Module (NNEF 2.0 draft chapter 2; grammar in skriptnd.lark).

`parse(text, filename)` is the entry point. The LALR parser runs with the transformer inline
(no intermediate parse tree), and every failure is a qsim.errors.SyntaxError_ carrying
file:line:col, the offending text and what was expected there.
"""
from __future__ import annotations

import math
import os
import re

from lark import Lark, Token, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

from ..errors import Location, SyntaxError_
from ..limits import MAX_NESTING_DEPTH
from . import ast
from ..textfile import decode_utf8

# Python converts at most 4300 digits between int and str (sys.get_int_max_str_digits); a longer
# literal could be read but never printed again (messages, the writer), so it is refused.
MAX_INT_LITERAL_DIGITS = 4300
BUILTIN_FUNCS = frozenset("""abs sign sqrt exp log sin cos tan asin acos atan sinh cosh tanh
    asinh acosh atanh round floor ceil frac""".split())
CAST_TYPES = frozenset({"int", "real", "bool", "str"})
BLOCK_FIELDS = {"dtype": "dtypes", "attrib": "attribs", "input": "inputs", "output": "outputs",
                "constant": "constants", "variable": "variables", "using": "usings",
                "assert": "asserts", "lower": "lowers", "compose": "compose", "update": "update",
                "quantize": "quantize"}

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


class _Builder:
    """Maps grammar rules to ast nodes; used as lark's inline transformer (one per parse)."""

    def __init__(self, filename: str, text: str):
        self.filename = filename
        self.text = text
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

    # -- documents
    def module(self, meta, children):
        version = None
        exts, imports, defs = [], [], []
        for c in children:
            if isinstance(c, tuple) and c and c[0] == "version":
                version = c[1]
            elif isinstance(c, tuple) and c and c[0] == "extension":
                exts.extend(c[1])
            elif isinstance(c, list):
                imports.extend(c)
            elif isinstance(c, ast.OperatorDef):
                defs.append(c)
        name = os.path.splitext(os.path.basename(self.filename))[0]
        seen: dict[str, ast.OperatorDef] = {}
        for d in defs:
            if d.name in seen:
                raise self.error(f"{'graph' if d.is_graph else 'operator'} {d.name!r} is defined twice "
                                 f"(first at line {seen[d.name].loc.line})", d.loc)
            seen[d.name] = d
        return ast.Module(Location(self.filename, 1, 1), name, tuple(imports), tuple(defs), version,
                          tuple(exts))

    def version(self, meta, children):
        return ("version", str(children[0]))

    def extension(self, meta, children):
        return ("extension", [c for c in children if isinstance(c, str) and not isinstance(c, Token)])

    def import_stmt(self, meta, children):
        return [ast.Import(self.loc(meta), c) for c in children
                if isinstance(c, str) and not isinstance(c, Token)]

    def _definition(self, meta, children, is_graph: bool):
        name_tok = next(c for c in children if isinstance(c, Token) and c.type == "IDENT")
        public = any(isinstance(c, Token) and c.type == "PUBLIC" for c in children)
        fields: dict[str, object] = {}
        order = []
        for c in children:
            if isinstance(c, tuple) and len(c) == 3 and c[0] == "block":
                _, kind, items = c
                key = BLOCK_FIELDS[kind]
                if key in fields:
                    raise self.error(f"block @{kind} appears twice in {name_tok.value!r}", items[1],
                                     hint="merge the two blocks into one")
                fields[key] = tuple(items[0])
                order.append(kind)
        return ast.OperatorDef(self.loc(meta), name_tok.value, is_graph, public, blocks=tuple(order),
                               **fields)

    def operator_def(self, meta, children):
        return self._definition(meta, children, False)

    def graph_def(self, meta, children):
        return self._definition(meta, children, True)

    def _block(kind):  # noqa: N805 - a factory for the twelve block callbacks
        def build(self, meta, children):
            items = [c for c in children if not isinstance(c, Token)]
            return ("block", kind, (items, meta))
        return build

    dtype_block = _block("dtype")
    attrib_block = _block("attrib")
    input_block = _block("input")
    output_block = _block("output")
    constant_block = _block("constant")
    variable_block = _block("variable")
    using_block = _block("using")
    assert_block = _block("assert")
    lower_block = _block("lower")
    compose_block = _block("compose")
    update_block = _block("update")
    quantize_block = _block("quantize")

    # -- types
    def type_name(self, meta, children):
        return str(children[0])

    def dtype_decl(self, meta, children):
        names = [c for c in children if isinstance(c, str) and not isinstance(c, Token)]
        ident = children[0]
        return ast.DtypeDecl(self.loc(meta), str(ident), names[0], names[1] if len(names) > 1 else None)

    def param_decl(self, meta, children):
        ident = children[0]
        tspec = children[1]
        default = next((c for c in children[2:] if isinstance(c, ast.Expr)), None)
        bounds = tuple(c for c in children if isinstance(c, ast.Bound))
        if bounds and default is None:
            raise self.error("index bounds need an initializer expression", meta)
        return ast.ParamDecl(self.loc(meta), str(ident), tspec, default, bounds)

    def type_spec(self, meta, children):
        optional = False
        base = None
        rank = None
        shape = None
        pack = None
        for c in children:
            if isinstance(c, Token) and c.type == "OPTIONAL":
                optional = True
            elif isinstance(c, tuple) and c[0] == "rank":
                rank = c[1]
            elif isinstance(c, tuple) and c[0] == "shape":
                shape = c[1]
            elif isinstance(c, ast.PackSpec):
                pack = c
            elif isinstance(c, str):
                base = str(c)
        return ast.TypeSpec(self.loc(meta), base, optional, rank, shape, pack)

    def rank_capture(self, meta, children):
        return ("rank", str(next(c for c in children if isinstance(c, Token) and c.type == "IDENT")))

    def shape_spec(self, meta, children):
        return ("shape", tuple(c for c in children if isinstance(c, ast.ShapeItem)))

    def shape_item(self, meta, children):
        per_item = isinstance(children[0], Token) and children[0].type == "DOTS"
        exprs = self._exprs(children)
        pack = next((c for c in children if isinstance(c, ast.PackSpec)), None)
        extent = exprs[0]
        bound = exprs[1] if len(exprs) > 1 else None
        return ast.ShapeItem(self.loc(meta), extent, per_item, bound, pack)

    def omitted_extent(self, meta, children):
        return ast.Omitted(self.loc(meta))

    def pack_spec(self, meta, children):
        exprs = self._exprs(children)
        return ast.PackSpec(self.loc(meta), exprs[0] if exprs else None, exprs[1] if len(exprs) > 1 else None)

    # -- using / assert / lower / quantize
    def using_decl(self, meta, children):
        return ast.UsingDecl(self.loc(meta), children[0], children[1])

    def pat_name(self, meta, children):
        pack = children[1] if len(children) > 1 else None
        return ast.PatName(self.loc(meta), str(children[0]), pack)

    def pat_list(self, meta, children):
        return ast.PatList(self.loc(meta), tuple(children))

    def pat_zip(self, meta, children):
        names = tuple(str(c) for c in children if isinstance(c, Token))
        return ast.PatZip(self.loc(meta), names, children[-1])

    def assertion(self, meta, children):
        cond = children[0]
        message = next((c for c in children[1:] if isinstance(c, ast.StrLit)), None)
        args = tuple(c for c in children if isinstance(c, ast.AssertArg))
        return ast.Assertion(self.loc(meta), cond, message, args, self.source(meta).rstrip(";").strip())

    def assert_arg(self, meta, children):
        value = children[-1]
        if len(children) == 2:
            label = children[0]
            label = label.text if isinstance(label, ast.StrLit) else str(label)
        else:
            label = self.source(meta)
        return ast.AssertArg(self.loc(meta), label, value)

    def lowering(self, meta, children):
        unroll = None
        local_defs = ()
        exprs = []
        op = None
        bounds = []
        for c in children:
            if isinstance(c, tuple) and c and c[0] == "unroll":
                unroll = c[1]
            elif isinstance(c, tuple) and c and c[0] == "locals":
                local_defs = c[1]
            elif isinstance(c, tuple) and c and c[0] == "op":
                op = c[1]
            elif isinstance(c, ast.Bound):
                bounds.append(c)
            elif isinstance(c, ast.Expr):
                exprs.append(c)
        target, value = exprs[0], exprs[1]
        condition = exprs[2] if len(exprs) > 2 else None
        if not isinstance(target, (ast.TensorAccess, ast.Subscript)):
            raise self.error("the left-hand side of a lowering formula must be a tensor access such as "
                             "'y[i, j]' or 'y[i,]'", target.loc)
        return ast.Lowering(self.loc(meta), target, op, value, tuple(bounds), condition, local_defs, unroll)

    def lower_op(self, meta, children):
        return ("op", str(children[0]))

    def plain_assign(self, meta, children):
        return ("op", "=")

    def unroll_prefix(self, meta, children):
        return ("unroll", children[-1])

    def local_defs(self, meta, children):
        return ("locals", tuple(c for c in children if isinstance(c, ast.LocalDef)))

    def local_def(self, meta, children):
        return ast.LocalDef(self.loc(meta), str(children[0]), children[1])

    def bound(self, meta, children):
        return ast.Bound(self.loc(meta), str(children[0]), children[-1])

    def quant_entry(self, meta, children):
        names = [c for c in children if isinstance(c, str) and not isinstance(c, Token)]
        generics = next((c[1] for c in children if isinstance(c, tuple) and c[0] == "generics"), ())
        attrs = next((c[1] for c in children if isinstance(c, tuple) and c[0] == "attrs"), ())
        return ast.QuantEntry(self.loc(meta), names[0], names[1], generics, attrs)

    # -- composition
    def component(self, meta, children):
        targets, value = children[0], children[1]
        has_semi = any(isinstance(c, Token) and c.type == "SEMI" for c in children[2:])
        if not has_semi and not self.text[:meta.end_pos].rstrip().endswith("}"):
            raise SyntaxError_("missing ';' after the assignment",
                               location=Location(self.filename, meta.end_line, meta.end_column),
                               hint="only an assignment ending with a '}' block may omit the ';'")
        return ast.Component(self.loc(meta), tuple(targets), self._invocation_position(value))

    def yield_stmt(self, meta, children):
        return ("yield", tuple(c for c in children if isinstance(c, ast.Expr)), meta)

    def lvalues(self, meta, children):
        return list(children)

    def lv_name(self, meta, children):
        tspec = children[1] if len(children) > 1 else None
        return ast.LName(self.loc(meta), str(children[0]), tspec, None)

    def lv_pack(self, meta, children):
        return ast.LName(self.loc(meta), str(children[0]), None, children[1])

    def lv_list(self, meta, children):
        return ast.LList(self.loc(meta), tuple(children))

    def lv_zip(self, meta, children):
        names = tuple(str(c) for c in children if isinstance(c, Token) and c.type == "IDENT")
        return ast.LZip(self.loc(meta), names, children[-1])

    def lv_omit(self, meta, children):
        return ast.LOmit(self.loc(meta))

    def yield_expand(self, meta, children):
        return ast.Expand(self.loc(meta), children[0], None)

    def _invocation_position(self, node):
        """At a place where the spec expects an invocation (right-hand side, branch, loop body), a
        call written without parentheses around it is an operator invocation (2.4 Built-in
        functions: 'the operator invocation interpretation takes precedence')."""
        if id(node) in self.parenthesized:
            return node
        if isinstance(node, ast.Builtin):
            return ast.Invocation(node.loc, node.func, (node.operand,))
        if isinstance(node, ast.Cast) and node.type_name in CAST_TYPES:
            return node          # `real(x)` can never name an operator: type names are keywords
        if isinstance(node, ast.Call):
            return ast.Invocation(node.loc, node.name, node.args)
        return node

    def if_expr(self, meta, children):
        parts = [c for c in children if not isinstance(c, Token)]
        parts = [self._invocation_position(p) for p in parts]
        branches = tuple((parts[i], parts[i + 1]) for i in range(0, len(parts) - 1, 2))
        return ast.If(self.loc(meta), branches, parts[-1])

    def labeled_call(self, meta, children):
        label = str(children[0])
        call = self._invocation_position(children[1])
        if not isinstance(call, ast.Invocation):
            raise self.error(f"label {label!r} must be followed by an operator invocation", meta)
        return ast.Invocation(call.loc, call.name, call.args, call.attrs, call.generics, label)

    def block_body(self, meta, children):
        comps = []
        yields = None
        for c in children:
            if isinstance(c, tuple) and c[0] == "yield":
                if yields is not None:
                    raise self.error("a block has a single 'yield', as its last statement", c[2])
                yields = c[1]
                yield_meta = c[2]
            elif isinstance(c, ast.Component):
                if yields is not None:
                    raise self.error("'yield' must be the last statement of the block", yield_meta)
                comps.append(c)
        if yields is None:
            raise self.error("a block must end with 'yield' naming its results", meta,
                             hint="write e.g. 'yield y;' before the closing '}'")
        return ast.Block(self.loc(meta), tuple(comps), yields)

    def labeled_block(self, meta, children):
        b = children[1]
        return ast.Block(b.loc, b.components, b.yields, str(children[0]))

    def loop(self, meta, children):
        carried, scans = (), ()
        pre = post = None
        count = None
        unroll = False
        body = None
        for c in children:
            if isinstance(c, tuple) and c[0] == "with":
                carried = c[1]
            elif isinstance(c, tuple) and c[0] == "for":
                scans = c[1]
            elif isinstance(c, tuple) and c[0] == "while":
                pre = self._invocation_position(c[1])
            elif isinstance(c, tuple) and c[0] == "post_while":
                post = self._invocation_position(c[1])
            elif isinstance(c, tuple) and c[0] == "kw":
                unroll = c[1] == "unroll"
            elif isinstance(c, ast.IterCount):
                count = c
            elif isinstance(c, ast.Expr):
                body = self._invocation_position(c)
        if unroll and (pre is not None or post is not None):
            raise self.error("'unroll' needs a compile-time loop count; it cannot be combined with "
                             "a 'while' condition (2.10.1 Loop unrolling)", meta)
        return ast.Loop(self.loc(meta), body, carried, scans, pre, post, count, unroll)

    def with_clause(self, meta, children):
        return ("with", tuple(c for c in children if isinstance(c, ast.CarriedVar)))

    def carried(self, meta, children):
        tspec = next((c for c in children if isinstance(c, ast.TypeSpec)), None)
        return ast.CarriedVar(self.loc(meta), str(children[0]), tspec, children[-1])

    def for_clause(self, meta, children):
        return ("for", tuple(c for c in children if isinstance(c, ast.ScanInput)))

    def scan(self, meta, children):
        return ast.ScanInput(self.loc(meta), str(children[0]), children[1])

    def while_clause(self, meta, children):
        return ("while", children[-1])

    def post_while(self, meta, children):
        return ("post_while", children[-1])

    def loop_kw(self, meta, children):
        return ("kw", str(children[0]))

    def iter_count(self, meta, children):
        index = None
        for i, c in enumerate(children):
            if isinstance(c, Token) and c.type == "ARROW":
                index = str(children[i - 1])
        exprs = self._exprs(children)
        return ast.IterCount(self.loc(meta), index, exprs[0] if exprs else None)

    # -- expressions
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


def _string_parts(tok: Token, builder: _Builder) -> list:
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
                raise _located_error("unclosed '{' in formatted string", tok, i + 1,
                                     "close the format field with '}' or escape a literal brace as '\\{'")
            if buf:
                parts.append("".join(buf))
                buf = []
            field = body[i + 1:j]
            if not field.strip():
                raise _located_error("empty format field '{}' in string", tok, i + 1,
                                     "put an expression inside the braces or escape them as '\\{\\}'")
            line, col = _offset_position(tok, i + 2)
            parts.append(_parse_fragment(field, builder.filename, line, col, builder.depth))
            i = j + 1
            continue
        if ch == "}":
            raise _located_error("unmatched '}' in formatted string", tok, i + 1,
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


def _located_error(message: str, tok: Token, offset: int, hint: str) -> SyntaxError_:
    line, col = _offset_position(tok, offset)
    return SyntaxError_(message, location=Location(_CURRENT_FILE[-1] if _CURRENT_FILE else "<string>",
                                                    line, col), hint=hint)


_CURRENT_FILE: list[str] = []
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
    builder = _Builder(filename, text)
    _CURRENT_FILE.append(filename)
    try:
        tree = _lark().parse(text, start=start, on_error=None)
        return _build(tree, builder, depth)
    except UnexpectedInput as err:
        raise _syntax_error(err, text, filename) from None
    except VisitError as err:
        if isinstance(err.orig_exc, SyntaxError_):
            raise err.orig_exc from None
        raise
    finally:
        _CURRENT_FILE.pop()


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
