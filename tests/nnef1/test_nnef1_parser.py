"""NNEF 1.0 parsing: every code example of the spec text (fixtures), syntax forms, and located
syntax errors."""
import pathlib
import re

import pytest

from qsim.errors import SyntaxError_
from qsim.nnef1 import ast
from qsim.nnef1.compose import standard_fragments
from qsim.nnef1.parser import parse_document, parse_fragments, parse_quant

SPEC_DIR = pathlib.Path(__file__).parent.parent / "fixtures" / "nnef1" / "spec"
SPEC_EXAMPLES = sorted(SPEC_DIR.iterdir())
STATEMENT = re.compile(r"^[A-Za-z_][\w ,\[\]()]*=[^=]", re.M)


def as_document(text: str) -> str:
    """Wraps an example the way a document holds it: statements go into a graph body."""
    if re.search(r"^\s*graph\s+\w+\s*\(", text, re.M):
        return text if text.lstrip().startswith(("version", "#")) and "version" in text else "version 1.0;\n" + text
    body_start = None
    for match in STATEMENT.finditer(text):
        # the first statement at column 0 that is outside every fragment (brace depth 0)
        before = text[:match.start()]
        if before.count("{") == before.count("}") and not re.search(r"fragment[^{}]*$", before):
            body_start = match.start()
            break
    fragments, statements = (text, "") if body_start is None else (text[:body_start], text[body_start:])
    return f"version 1.0;\n{fragments}\ngraph G() -> ()\n{{\n{statements}}}\n"


def test_fixtures_cover_the_spec_examples():
    # 97 NNEF code blocks in chapters 3-7 (BNF listings and one pseudo-code line excluded)
    assert len(SPEC_EXAMPLES) == 97
    assert sum(p.suffix == ".quant" for p in SPEC_EXAMPLES) == 2


@pytest.mark.parametrize("path", SPEC_EXAMPLES, ids=lambda p: p.stem)
def test_every_spec_example_parses(path):
    text = path.read_text()
    if path.suffix == ".quant":
        entries = parse_quant(text, str(path))
        assert entries and all(isinstance(e, ast.QuantEntry) for e in entries)
        return
    doc = parse_document(as_document(text), str(path))
    names = set(re.findall(r"fragment\s+(\w+)", text))
    assert {f.name for f in doc.fragments} == names


def test_standard_library_parses_with_every_chapter_4_operation():
    fragments = standard_fragments()
    for name in ("conv", "deconv", "box", "debox", "max_pool", "avg_pool", "softmax", "linear",
                 "batch_normalization", "linear_quantize", "add_n", "moments", "_unsqueeze_shape"):
        assert name in fragments
    assert fragments["conv"].body is None and fragments["relu"].body is not None
    assert fragments["external"].generic and fragments["external"].generic_default == "scalar"


def test_flat_and_compositional_forms():
    doc = parse_document("""version 1.0;
extension KHR_enable_fragment_definitions KHR_enable_operator_expressions;
fragment f<?>( x: tensor<?>, s: (integer,scalar)[] = [(1, 2.5)], t: string = "a\\"b" ) -> ( y: tensor<?> )
{
    y = x if s[0][0] > -1 && !false else f<?>(x);
}
graph g( a ) -> ( b, c )
{
    a = external<scalar>(shape = [1, -2e3]);
    b, [c] = (a, [a]);
}
""", "t.nnef")
    f = doc.fragments[0]
    assert doc.version == "1.0" and len(doc.extensions) == 2
    assert f.generic and f.generic_default is None
    assert str(f.params[1].type) == "(integer, scalar)[]"
    assert f.params[2].default == ast.Literal(f.params[2].default.loc, 'a"b')
    body = f.body[0].value
    assert isinstance(body, ast.IfElse) and body.otherwise.generic == "?"
    assert doc.graph.inputs == ("a",) and doc.graph.outputs == ("b", "c")
    target = doc.graph.body[1].target
    assert target.kind == "tuple" and target.items[1].kind == "array"
    shape = doc.graph.body[0].value.args[0].value
    assert isinstance(shape.items[1], ast.Unary) and shape.items[1].operand.value == -2e3 * -1


def test_precedence_and_comprehension_if():
    doc = parse_document("""version 1.0;
graph g( a ) -> ( a ) { a = f(x = 1 + 2 * 3 ^ 2 ^ 1 < 4 in [true], y = [for i in a if i > 0 yield i]); }""")
    args = doc.graph.body[0].value.args
    e = args[0].value
    assert e.op == "in" and e.left.op == "<"
    add = e.left.left
    assert add.op == "+" and add.right.op == "*" and add.right.right.op == "^"
    assert add.right.right.right.op == "^"          # right-associative
    comp = args[1].value
    assert isinstance(comp, ast.Comprehension) and comp.condition.op == ">"


def test_quant_file():
    entries = parse_quant('"a": linear_quantize(min = -1.0, max = 1.0, bits = 8);\n'
                          "'b': zero_point_linear_quantize(zero_point = 3, scale = 0.5, bits = 8);\n")
    assert [e.tensor for e in entries] == ["a", "b"]
    assert entries[1].loc.line == 2 and entries[0].invocation.op == "linear_quantize"


# ------------------------------------------------------------------ syntax errors

@pytest.mark.parametrize("text, line, column, fragments", [
    ("version 1.0;\ngraph g( a ) -> ( a )\n{\n    a = external(shape = [1])\n}\n", 5, 1,
     ["unexpected '}'", "';'"]),
    ("version 1.0;\ngraph g( a ) -> ( a )\n{\n    a = external(shape = [1,]);\n}\n", 4, 29,
     ["unexpected ']'"]),
    ("version 1.0;\ngraph g( a ) -> ( a )\n{\n    a = $;\n}\n", 4, 9, ["unexpected '$'"]),
    ("graph g( a ) -> ( a ) { a = external(shape = [1]); }\n", 1, 1, ["unexpected 'graph'", "'version'"]),
    ("version 1.0;\ngraph g( a ) -> ( a )\n{\n    a = external(shape = [1]);\n", 4, 30,
     ["unexpected end of file"]),
    ("version 1.0;\nfragment f( x: tensor<float> ) -> ( y: tensor<scalar> )\n{ y = x; }\n"
     "graph g( a ) -> ( a ) { a = f(a); }", 2, 23, ["unexpected 'float'"]),
    ("version 1.0;\ngraph g( a ) -> ( a ) { a = external(shape = 'abc); }", 2, 46, ["unexpected"]),
    ("version 1.0;\ngraph g( for ) -> ( a ) { a = b; }", 2, 10, ["'for' is a keyword"]),
])
def test_syntax_errors_are_located(text, line, column, fragments):
    with pytest.raises(SyntaxError_) as err:
        parse_document(text, "bad.nnef")
    loc = err.value.location
    assert (loc.file, loc.line, loc.column) == ("bad.nnef", line, column), str(err.value)
    for fragment in fragments:
        assert fragment in err.value.message, err.value.message
    assert str(err.value).startswith(f"bad.nnef:{line}:{column}: syntax error")


def test_the_same_text_gives_the_same_document_and_errors_every_time():
    """A document is kept by its text and file name (a model loaded again at another batch size
    is not parsed again): the same object for the same text and name, a new one for another
    name (locations name the file) or text; a syntax error is raised on every call."""
    text = "version 1.0;\ngraph g( a ) -> ( b )\n{\n    a = external(shape = [1]);\n    b = relu(a);\n}\n"
    doc = parse_document(text, "one.nnef")
    assert parse_document(text, "one.nnef") is doc
    assert parse_document(text, "two.nnef") is not doc
    assert parse_document(text.replace("relu", "sigmoid"), "one.nnef") != doc
    bad = text.replace("relu(a);", "relu(a) a;")
    for _ in range(2):
        with pytest.raises(SyntaxError_):
            parse_document(bad, "one.nnef")


def test_syntax_error_quotes_the_source_line():
    with pytest.raises(SyntaxError_) as err:
        parse_document("version 1.0;\ngraph g( a ) -> ( a )\n{\n    a = external(shape = [1]) b;\n}\n")
    assert "a = external(shape = [1]) b;" in err.value.hint


def test_quant_file_syntax_error():
    with pytest.raises(SyntaxError_) as err:
        parse_quant('"a": linear_quantize(min = 0.0, max = 1.0, bits = 8)\n"b": x();', "graph.quant")
    assert (err.value.location.line, err.value.location.column) == (2, 1)


def test_fragments_only_helper():
    frags = parse_fragments("fragment a( x: tensor<scalar> ) -> ( y: tensor<scalar> );", "lib.nnef")
    assert frags[0].name == "a" and frags[0].body is None
