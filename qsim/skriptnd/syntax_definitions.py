"""The parser's rules for everything but expressions (NNEF 2.0 draft 2.1-2.14): documents,
definitions and their blocks, declarations and types, @using/@assert/@lower/@quantize entries,
and @compose statements with their control flow (2.10). Expressions: syntax_expressions.py.
"""
from __future__ import annotations

import os

from lark import Token

from ..errors import Location, SyntaxError_
from . import ast
from .syntax_expressions import CAST_TYPES, RuleBase

BLOCK_FIELDS = {"dtype": "dtypes", "attrib": "attribs", "input": "inputs", "output": "outputs",
                "constant": "constants", "variable": "variables", "using": "usings",
                "assert": "asserts", "lower": "lowers", "compose": "compose", "update": "update",
                "quantize": "quantize"}


class DefinitionRules(RuleBase):
    """Grammar rules of documents, definitions, declarations and statements → ast nodes."""

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
