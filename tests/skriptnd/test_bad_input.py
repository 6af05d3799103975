"""Hostile or broken SkriptND texts end in a located QsimError, never a traceback (issue 11).

One regression test per site a fuzzing campaign found: nesting past limits.MAX_NESTING_DEPTH,
long operator chains, huge number literals, extents out of range, axes out of range, scans over
empty extents, texts that are not UTF-8, and tensors past the size limit (refused before any
allocation). Each asserts the error kind, what the message says, and the file:line:col it points
at (found from the document text, never from the code under test).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import qsim

from qsim import cli, limits
from qsim.errors import DataError, QsimError, SemanticError, SyntaxError_
from qsim.commands.check import check_model
from qsim.runtime import execute
from qsim.skriptnd.parser import parse
from qsim.skriptnd.syntax_expressions import MAX_INT_LITERAL_DIGITS

HEAD = "import math;\nimport layout;\nimport nn;\n"


def graph(compose: str = "y = x;", *, attribs: str = "", inputs: str = "x: real[4];",
          outputs: str = "y: real[4];", extra: str = "") -> str:
    return (HEAD + "graph G {\n"
            f"    @attrib {{ {attribs} }}\n"
            f"    @input {{ {inputs} }}\n"
            f"    @output {{ {outputs} }}\n"
            f"    {extra}\n"
            f"    @compose {{ {compose} }}\n"
            "}\n")


def position(text: str, needle: str, occurrence: int = 0) -> tuple[int, int]:
    """1-based line and column of the `occurrence`-th `needle` in `text`."""
    at = -1
    for _ in range(occurrence + 1):
        at = text.index(needle, at + 1)
    line = text.count("\n", 0, at) + 1
    return line, at - (text.rfind("\n", 0, at) + 1) + 1


def check_error(tmp_path, text, kind=QsimError, data: bytes | None = None,
                in_main: bool = True) -> QsimError:
    path = tmp_path / "main.sknd"
    path.write_bytes(data if data is not None else text.encode())
    with pytest.raises(kind) as info:
        check_model(str(path))
    err = info.value
    assert err.location is not None
    assert err.location.file.endswith("main.sknd") == in_main
    return err


def at(err: QsimError) -> tuple[int, int]:
    return err.location.line, err.location.column


# ---------------------------------------------------------------- nesting

def test_nesting_limit_is_200():
    assert limits.MAX_NESTING_DEPTH == 200


@pytest.mark.parametrize("attrib", [
    "a: int = " + "(" * 3000 + "1" + ")" * 3000 + ";",          # parentheses
    "a: int[] = " + "[" * 3000 + "1" + "]" * 3000 + ";",        # brackets
    "a: int = " + "-" * 5000 + "1;",                             # prefix operators
    "a: int = " + " ** ".join(["2"] * 5000) + ";",               # right-associative chain
    "a: int = " + "true ? " * 3000 + "1" + " : 2" * 3000 + ";",  # nested selects
])
def test_deep_nesting_is_refused_with_location(tmp_path, attrib):
    text = graph(attribs=attrib)
    err = check_error(tmp_path, text, SyntaxError_)
    assert "nests deeper than 200 levels" in err.message
    assert "MAX_NESTING_DEPTH" in err.message
    assert "split the expression" in err.hint
    line, _ = position(text, "a: ")
    assert err.location.line == line


@pytest.mark.parametrize("terms", [201, 10_000])
def test_long_flat_chain_is_refused_at_its_start(tmp_path, terms):
    # a left-associative chain of n terms is n - 1 levels deep in every later pass
    text = graph(attribs="a: int = " + " + ".join(["1"] * terms) + ";")
    err = check_error(tmp_path, text, SyntaxError_)
    assert "nests deeper than 200 levels" in err.message
    assert at(err) == position(text, "1 + 1")


def test_chain_just_under_the_limit_loads_in_every_pass(tmp_path):
    # nesting the limit allows must survive evaluation, binding, lowering and the parse cache
    chain = " + ".join(["1"] * 180)
    lower = " + ".join(["x[i]"] * 180)
    text = ("import math;\n"
            "operator Op { @input { x: real[n]; } @output { y: real[n]; }\n"
            f"  @lower {{ y[i] = {lower}, i < n; }} }}\n"
            "graph G {\n"
            f"  @attrib {{ a: int = {chain}; }}\n"
            f"  @input {{ x: real[{chain} - 176]; }}\n"
            "  @output { y: real[4]; }\n"
            f"  @assert {{ {chain} == 180; }}\n"
            "  @compose { y = Op(x); }\n}\n")
    path = tmp_path / "main.sknd"
    path.write_text(text)
    summary = check_model(str(path))
    assert "input   x: f32[4]" in summary


# ---------------------------------------------------------------- number literals

def test_integer_literal_past_python_conversion_limit(tmp_path):
    text = graph(attribs="a: int = " + "9" * (MAX_INT_LITERAL_DIGITS + 1) + ";")
    err = check_error(tmp_path, text, SyntaxError_)
    assert f"integer literal of {MAX_INT_LITERAL_DIGITS + 1} digits" in err.message
    assert at(err) == position(text, "999")


def test_integer_literal_at_the_limit_is_read():
    module = parse(graph(attribs="a: int = " + "7" * MAX_INT_LITERAL_DIGITS + ";"))
    assert module.graphs[0].attribs[0].default.value == (10 ** MAX_INT_LITERAL_DIGITS - 1) // 9 * 7


@pytest.mark.parametrize("literal", ["1e999", "9" * 400 + ".0", "1.5E+309"])
def test_real_literal_overflowing_to_infinity(tmp_path, literal):
    text = graph(attribs=f"a: real = {literal};")
    err = check_error(tmp_path, text, SyntaxError_)
    assert "beyond the range of 64-bit floats" in err.message
    assert "write 'inf'" in err.hint
    assert at(err) == position(text, literal[:5])


def test_tiny_real_literal_rounds_to_zero():
    module = parse(graph(attribs="a: real = 1e-999;"))
    assert module.graphs[0].attribs[0].default.value == 0.0


@pytest.mark.parametrize("expr,needle", [
    ("10 ** 10 ** 10", "more than 14280 bits"),
    ("2 ** 20000", "more than 14280 bits"),
])
def test_compile_time_int_growth_is_bounded(tmp_path, expr, needle):
    text = graph(attribs=f"a: int = {expr};")
    err = check_error(tmp_path, text, SemanticError)
    assert needle in err.message


@pytest.mark.parametrize("expr,needle", [("10.0 ** 400.0", "overflows 64-bit reals"),
                                         ("(0.0 - 8.0) ** 0.5", "undefined for reals"),
                                         ("0.0 ** (0.0 - 1.0)", "undefined for reals")])
def test_real_power_errors(tmp_path, expr, needle):
    text = graph(attribs=f"a: real = {expr};")
    err = check_error(tmp_path, text, SemanticError)
    assert needle in err.message
    assert at(err)[0] == position(text, expr)[0]


# ---------------------------------------------------------------- extents

@pytest.mark.parametrize("shape,kind,needle,where", [
    ("[inf, 0]", SemanticError, "must be an int, got inf", "inf"),
    ("[9223372036854775808]", SemanticError, "larger than any tensor can have", "9223372036854775808"),
    ("[2 ** 70, 0]", SemanticError, "larger than any tensor can have", "2 ** 70"),
    ("[-3]", SemanticError, "is negative (-3)", "-3"),
    ("[4294967296, 4294967296, 4294967296]", DataError, "over the 4 GiB limit", "c: real"),
    ("[100000, 100000]", DataError, "would take 37.3 GiB", "c: real"),
])
def test_constant_extents(tmp_path, monkeypatch, shape, kind, needle, where):
    monkeypatch.delenv(limits.MAX_TENSOR_BYTES_ENV, raising=False)
    text = graph(extra=f"@constant {{ c: real{shape} = 0.0; }}")
    err = check_error(tmp_path, text, kind)
    assert needle in err.message
    assert at(err) == position(text, where)


def test_constant_index_grid_counts_against_the_limit(tmp_path, monkeypatch):
    # the data (4 MiB) fits a 16 MiB limit, the two int64 index grids (16 MiB) do not
    monkeypatch.setenv(limits.MAX_TENSOR_BYTES_ENV, "10M")
    text = graph(extra="@constant { c: real[1024, 1024] = i == j ? 1.0 : 0.0, i < 1024, j < 1024; }")
    err = check_error(tmp_path, text, DataError)
    assert "index grid of constant 'c'" in err.message
    assert at(err) == position(text, "c: real")


def test_variable_past_the_limit_is_refused_before_reading_data(tmp_path, monkeypatch):
    monkeypatch.delenv(limits.MAX_TENSOR_BYTES_ENV, raising=False)
    text = graph(extra="@variable { v: real[4294967296, 3]; }")
    err = check_error(tmp_path, text, DataError)
    assert "tensor 'v' of shape [4294967296, 3] would take 48 GiB" in err.message
    assert "--max-tensor-bytes" in err.hint
    assert at(err) == position(text, "v: real")


def test_operator_result_past_the_limit_is_refused_at_the_invocation(tmp_path, monkeypatch):
    monkeypatch.delenv(limits.MAX_TENSOR_BYTES_ENV, raising=False)
    text = graph("y = layout.tile{repeats = [10000000000]}(x);", outputs="y: real[40000000000];")
    err = check_error(tmp_path, text, DataError)
    assert "tensor 'y' of shape [40000000000] would take 149 GiB" in err.message
    assert at(err) == position(text, "layout.tile")


def test_limit_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(limits.MAX_TENSOR_BYTES_ENV, "1K")
    text = graph(extra="@constant { c: real[257] = 0.0; }")
    err = check_error(tmp_path, text, DataError)
    assert "over the 1 KiB limit" in err.message
    monkeypatch.setenv(limits.MAX_TENSOR_BYTES_ENV, "2K")
    path = tmp_path / "main.sknd"
    assert "c: f32[257]" in check_model(str(path))


# ---------------------------------------------------------------- axes, empty extents

@pytest.mark.parametrize("axis,dims", [(-9209, -9208), (9209, 9209), (-2, -1)])
def test_axis_out_of_range_names_the_attribute(tmp_path, axis, dims):
    text = graph(f"y = math.argmin{{axis = {axis}}}(x);", outputs="y: int[1];")
    err = check_error(tmp_path, text, SemanticError)
    assert f"a packed extent would have {dims} dimensions (from axis = {axis}, rank = 1)" in err.message
    assert "between -rank (inclusive) and rank (exclusive)" in err.hint
    assert at(err) == position(text, "math.argmin")


def test_cumsum_over_an_empty_axis(tmp_path):
    text = graph("y = math.cumsum{axis = 0}(x);", inputs="x: real[0];", outputs="y: real[0];")
    err = check_error(tmp_path, text, SemanticError, in_main=False)
    assert "scans an empty pack" in err.message
    assert err.location.file == "stdlib/math.sknd"
    from qsim.skriptnd.modules import stdlib_text
    stdlib_math = stdlib_text("math")[0].split("\n")
    assert stdlib_math[err.location.line - 1][err.location.column - 1:].startswith("with sum")
    # the loop is in the standard module; the invocation that reached it is named with its place
    line, col = position(text, "math.cumsum")
    assert f"main.sknd:{line}:{col}" in err.message


def test_tensor_arithmetic_in_compose_names_the_operator_to_invoke(tmp_path):
    text = graph("y = x + x;")
    err = check_error(tmp_path, text, SemanticError)
    assert "'+' is applied to tensor 'x'" in err.message
    assert "math.add" in err.hint
    assert at(err) == position(text, "x + x")


# ---------------------------------------------------------------- encodings

def test_cli_exit_2_without_traceback_for_deep_text(tmp_path, capsys):
    path = tmp_path / "main.sknd"
    path.write_text(graph("y = " + "(" * 5000 + "x" + ")" * 5000 + ";"))
    assert cli.main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert "nests deeper than 200 levels" in err and "Traceback" not in err


def test_text_that_is_not_utf8_names_line_column_and_byte_offset(tmp_path):
    good = graph().encode()
    data = good.replace(b"@output", b"@outp\xffut")
    offset = data.index(b"\xff")
    err = check_error(tmp_path, None, SyntaxError_, data=data)
    assert f"not UTF-8 text: byte 0xff at byte offset {offset}" in err.message
    assert at(err) == position(good.decode(), "@output", 0)[:1] + (position(good.decode(), "@output")[1] + 5,)
    assert err.hint == "save the model as UTF-8"


def test_utf8_byte_order_mark_and_non_ascii_comments_are_read(tmp_path):
    path = tmp_path / "main.sknd"
    path.write_bytes(b"\xef\xbb\xbf# \xc3\xa9t\xc3\xa9\n" + graph().encode())
    assert "valid SkriptND model" in check_model(str(path))


# ---------------------------------------------------------------- float executor allocations

@pytest.mark.parametrize("op,inputs,attrs,what", [
    ("layout.tile", [np.zeros((4,), np.float32)], {"repeats": [10 ** 10]}, "layout.tile result of shape [40000000000]"),
    ("layout.broadcast", [np.zeros((1,), np.float32)], {"shape": [2 ** 40]}, "layout.broadcast result"),
    ("layout.pad", [np.zeros((2,), np.float32)], {"padding": [0, 2 ** 40]}, "layout.pad result"),
    ("layout.uniform", [np.float32(1)], {"shape": [2 ** 20, 2 ** 20]}, "layout.uniform result"),
    ("layout.tensor", [], {"shape": [2 ** 40], "value": 0.0}, "layout.tensor result"),
    ("image.nearest_upsample", [np.zeros((1, 1, 2), np.float32)], {"factor": [2 ** 40], "axes": [2]}, "image.nearest_upsample result"),
    ("image.linear_resize", [np.zeros((1, 1, 2), np.float32)], {"size": [2 ** 40], "axes": [2]}, "image.linear_resize result"),
    ("nn.conv", [np.zeros((1, 1, 64, 64), np.float32), np.zeros((1, 1, 33, 33), np.float32)],
     {"padding": [16, 16, 16, 16]}, "nn.conv im2col buffer of shape [1, 1, 1089, 64, 64]"),
])
def test_executor_refuses_oversized_results_before_allocating(monkeypatch, op, inputs, attrs, what):
    from qsim.runtime.float_ops import run_op
    # 1089 * 64 * 64 float32 = 17.0 MiB for the conv's im2col buffer, its output only 16 KiB
    monkeypatch.setenv(limits.MAX_TENSOR_BYTES_ENV, "16M")
    with pytest.raises(DataError) as info:
        run_op(op, inputs, attrs)
    assert what in info.value.message and "over the 16 MiB limit" in info.value.message


def test_executor_rescale_by_an_infinite_factor():
    from qsim.runtime.float_ops import run_op
    with pytest.raises(SemanticError, match="gives no finite size"):
        run_op("image.rescale", [np.zeros((1, 1, 2), np.float32)], {"factor": [1e308], "axes": [2]})


def test_lower_interpreter_refuses_an_oversized_index_grid(monkeypatch):
    from qsim.skriptnd.lower.interpreter import run_lower
    text = ("operator Outer { @input { a: real[m]; b: real[n]; } @output { y: real[m, n]; }\n"
            "  @lower { y[i, j] = a[i] * b[j], i < m, j < n; } }\n"
            "operator Dot { @input { a: real[m]; b: real[n]; } @output { y: real[m]; }\n"
            "  @lower { y[i] += a[i] * b[j], i < m, j < n; } }\n")
    outer, dot = parse(text).definitions
    monkeypatch.setenv(limits.MAX_TENSOR_BYTES_ENV, "1M")
    a, b = np.zeros(512, np.float32), np.zeros(1024, np.float32)
    with pytest.raises(DataError) as info:       # the output alone is past the limit
        run_lower(outer, [a, b])
    assert "output 'y' of shape [512, 1024]" in info.value.message
    assert at(info.value) == (1, 1)
    with pytest.raises(DataError) as info:       # the output fits, the index grid (4 MiB) not
        run_lower(dot, [a, b])
    assert "index grid of the formula of shape [512, 1024]" in info.value.message
    assert at(info.value) == position(text, "y[i] +=")


# ---------------------------------------------------------------- graph inputs, loops

@pytest.mark.parametrize("decl,needle,where", [
    ("x: real[inf];", "extent of 'x' must be an int, got inf", "inf"),
    ("x: real[s|[0]];", "upper bound of 'x' must be an int, got [0]", "[0]"),
    ("x: real[~|-1];", "upper bound of 'x' is negative (-1)", "-1"),
    ("x: real[2 ** 64];", "extent 18446744073709551616 of 'x' is larger than any tensor", "2 ** 64"),
    ("x: real[1 ..(100000000)];", "'x' would have 100000000 dimensions; tensors have 0 to 64", "100000000)"),
])
def test_graph_input_extents(tmp_path, decl, needle, where):
    text = graph(inputs=decl, outputs="y: real[~];")
    err = check_error(tmp_path, text, SemanticError)
    assert needle in err.message
    assert at(err) == position(text, where)


LOOP = "y = with acc: real[4] = x {kw} ..({count}) {{ next = math.add(acc, x); yield next; }};"


@pytest.mark.parametrize("kw", ["do", "unroll"])
@pytest.mark.parametrize("count,needle", [
    ("[]", "iteration count must be a non-negative int or an int tensor, got []"),
    ("inf", "got inf"), ("-1", "got -1"), ("true", "got true"),
    ("1000000000", "iteration count 1000000000 is more than the 1000000 steps"),
])
def test_loop_counts(tmp_path, kw, count, needle):
    text = graph(LOOP.format(kw=kw, count=count))
    err = check_error(tmp_path, text, SemanticError)
    assert needle in err.message
    assert at(err) == position(text, count + ")")


def test_unrolled_loop_past_the_composition_limit(tmp_path):
    text = graph(LOOP.format(kw="unroll", count="200000"))
    err = check_error(tmp_path, text, SemanticError)
    assert "would compose 200000 steps into the graph, more than qsim composes (100000)" in err.message
    assert at(err) == position(text, "with acc")


def test_nesting_error_points_into_the_nest_not_at_the_document_start(tmp_path):
    # 6 structural levels (module, definition, block, ...) plus a 195-term chain in a formula
    chain = " + ".join(["x[i]"] * 195)
    text = ("import math;\n"
            "operator Op { @input { x: real[n]; } @output { y: real[n]; }\n"
            f"  @lower {{ y[i] = {chain}, i < n; }} }}\n")
    err = check_error(tmp_path, text, SyntaxError_)
    line, col = position(text, "x[i] + x[i]")
    assert err.location.line == line and col <= err.location.column < col + len("x[i]")


# ---------------------------------------------------------------- recursive operators

RECURSIVE = {
    "direct": "@compose { y = A(x); }",
    "through a branch": "@input { c: bool[]; } @compose { y = if c then { z = A(x); yield z; } else { yield x; }; }",
    "through a loop": "@compose { y = with s: real[n] = x do ..(2) { z = A(s); yield z; }; }",
    "through an unrolled loop": "@compose { y = with s: real[n] = x unroll ..(1) { z = A(s); yield z; }; }",
}


@pytest.mark.parametrize("body", RECURSIVE.values(), ids=RECURSIVE.keys())
def test_recursive_operators_stop_at_the_composition_depth(tmp_path, body):
    # before: RecursionError (branches and loops take ~12 Python frames per level), and the
    # unrolled form doubled its scope names at every level (exponential time)
    inputs = "@input { x: real[n]; c: bool[]; }" if "c:" in body else "@input { x: real[n]; }"
    body = body.replace("@input { c: bool[]; } ", "")
    args = "x, c" if "c:" in inputs else "x"
    text = (f"import math;\noperator A {{ {inputs} @output {{ y: real[n]; }} {body.replace('A(x)', f'A({args})')} }}\n"
            f"graph G {{ {inputs.replace('[n]', '[4]')} @output {{ y: real[4]; }} @compose {{ y = A({args}); }} }}\n")
    err = check_error(tmp_path, text, SemanticError)
    assert "nest deeper than 64 levels" in err.message
    assert "invoking itself" in err.hint
    assert err.location.line == 2


def test_nested_unrolled_loops_keep_names_linear(tmp_path):
    text = ("import math;\n"
            "operator C { @input { x: real[n]; } @output { y: real[n]; }\n"
            "  @compose { y = with s: real[n] = x unroll ..(1) { t = math.neg(s); yield t; }; } }\n"
            "operator B { @input { x: real[n]; } @output { y: real[n]; }\n"
            "  @compose { y = with s: real[n] = x unroll ..(1) { t = C(s); yield t; }; } }\n"
            "graph G { @input { x: real[4]; } @output { y: real[4]; }\n"
            "  @compose { y = with s: real[4] = x unroll ..(1) { t = B(s); yield t; }; } }\n")
    path = tmp_path / "main.sknd"
    path.write_text(text)
    graph = qsim.load(path)
    # each level adds '<label>_<step>.<target>' once (graph: y_0.t, B: t_0.t, C: t_0.t); the
    # scoped name of the target was prepended again before: y_0.t.y_0.t_0.t.y_0.t.y_0.t_0.t_0.t
    assert list(graph.tensors) == ["x", "y_0.t.t_0.t.t_0.t"]


def test_deepest_composition_with_the_deepest_expression_loads(tmp_path):
    # 30 invocations each inside a branch block (61 levels of MAX_COMPOSE_DEPTH = 64), and at the
    # bottom an expression nested 185 deep: must compose under Python's default recursion limit
    assert sys.getrecursionlimit() <= 1000
    chain = " + ".join(["1"] * 185)
    text = ("import math;\n"
            "operator A { @attrib { k: int; } @input { x: real[n]; } @output { y: real[n]; }\n"
            "  @compose { y = if k > 0 then { z = A{k = k - 1}(x); yield z; } else {\n"
            f"    w = with s: real[n] = x unroll ..({chain} - 184) {{ t = math.neg(s); yield t; }};\n"
            "    yield w; }; } }\n"
            "graph G { @input { x: real[4]; } @output { y: real[4]; } @compose { y = A{k = 30}(x); } }\n")
    path = tmp_path / "main.sknd"
    path.write_text(text)
    graph = qsim.load(path)
    assert [op.kind.name for op in graph.ops] == ["math.neg"]
    out = execute(graph, {"x": np.array([1, -2, 3, -4], np.float32)})[graph.outputs[0]]
    assert out.tolist() == [-1, 2, -3, 4]


@pytest.mark.parametrize("attrib,where", [
    ("a: int[] = [0:100000000000];", "[0:"),
    ("a: int[] = [0:10000000000000000000000000000000:3];", "[0:"),
    ("a: int[] = [1 ..(1000000000000)];", "1000000000000)"),
])
def test_compile_time_packs_are_bounded_before_they_are_built(tmp_path, attrib, where):
    text = graph(attribs=attrib)
    err = check_error(tmp_path, text, SemanticError)
    assert "more than qsim builds at compile time (16777216)" in err.message
    line, col = position(text, where)
    assert err.location.line == line and err.location.column in (col, col + 1)


def test_range_lengths_match_python_ranges():
    from qsim.skriptnd.evaluate import Evaluator
    from qsim.skriptnd.parser import parse_expr
    for b, e, s in [(0, 5, 1), (5, 0, -2), (0, 7, 3), (3, 3, 1), (5, 0, 1), (0, -5, -1), (-7, 8, 4)]:
        value = Evaluator({}).eval(parse_expr(f"[({b}):({e}):({s})]"))
        assert value == tuple(range(b, e, s))


def test_format_fields_count_from_the_depth_of_their_string():
    # a field's expression hangs below its string in the AST, so its levels add to the string's
    chain = " + ".join(["1"] * 150)
    field = "'v{" + chain + "}'"
    shallow = "graph G { @attrib { a: str = " + "(" * 10 + field + ")" * 10 + "; } }"
    assert parse(shallow).graphs[0].attribs[0].default is not None
    deep = "graph G { @attrib { a: str = " + "(" * 100 + field + ")" * 100 + "; } }"
    with pytest.raises(SyntaxError_, match="nests deeper than 200 levels") as info:
        parse(deep, "main.sknd")
    # the field's own text holds the first node past the limit
    assert info.value.location.line == 1
    assert deep.index("{1 + 1") < info.value.location.column <= deep.index("}'")


def test_largest_compile_time_int_is_still_printable(tmp_path):
    # 2 ** 14279 is allowed (4299 digits); a message showing it must not hit Python's
    # int/str conversion limit of 4300 digits
    text = graph(attribs="a: int = 2 ** 14279;", extra="@assert { a < 0: 'a is {a}'; }")
    err = check_error(tmp_path, text, SemanticError)
    assert str(2 ** 14279)[:20] in err.message


def test_graph_assertions_and_usings_are_checked(tmp_path):
    # before, a graph's @using and @assert blocks were skipped (property tests relying on them
    # passed vacuously)
    text = graph(attribs="a: int = 2;", extra="@using { b = a * 3; } @assert { b == 7: 'b is {b}', a; }")
    err = check_error(tmp_path, text, SemanticError)
    assert "b is 6" in err.message and "a = 2" in err.message
    assert at(err) == position(text, "b == 7")
    path = tmp_path / "main.sknd"
    path.write_text(text.replace("b == 7", "b == 6"))
    assert "valid SkriptND model" in check_model(str(path))


@pytest.mark.parametrize("init,needle", [
    ("c: int[3] = 2 ** (i - 5), i < 3;", "int power with a negative exponent for some index"),
    ("c: int[3] = 10 / (i - 1), i < 3;", "division by zero in '/' for some index"),
    ("c: int[3] = 10 % (i - 1), i < 3;", "division by zero in '%' for some index"),
    ("c: int[3] = 3 ** (i * 100), i < 3;", "'**' gives ints past 64 bits for some index"),
    ("c: int[3] = int(real(i) / 0.0), i < 3;", "division by zero in '/' for some index"),
    ("c: int[3] = i ? 1 : 2, i < 3;", "select condition must be bool, got int"),
    ("c: int[3] = [1, 2, 3][i + 1], i < 3;", "index 3 is out of range for a pack of length 3"),
])
def test_per_element_initializers_keep_int_semantics(tmp_path, init, needle):
    # these wrapped silently, gave garbage or raised numpy's own errors
    text = graph(extra=f"@constant {{ {init} }}")
    err = check_error(tmp_path, text, SemanticError)
    assert needle in err.message
    assert err.location.line == position(text, "c: int")[0]


def test_per_element_initializer_indexes_a_pack(tmp_path):
    text = graph(extra="@constant { c: int[3] = [10, 20, 30][2 - i], i < 3; }")
    path = tmp_path / "main.sknd"
    path.write_text(text)
    graph_ = qsim.load(path)
    assert graph_.tensors["c"].data.tolist() == [30, 20, 10]


@pytest.mark.parametrize("extra,compose,needle,where", [
    ("", "y = math.mul(x, 999999999999999999999999999999);",
     "the int 999999999999999999999999999999 does not fit a 64-bit int tensor", "math.mul"),
    ("@constant { c: int[2] = [1, 9223372036854775808]; }", "y = x;",
     "constant 'c': the int 9223372036854775808 does not fit a 64-bit int tensor", "c: int"),
    ("@constant { c: real[3] = i == 0 ? [] : 0.0, i < 3; }", "y = x;",
     "an element-wise select gives a number or bool per index, not []", "[] :"),
    ("@constant { c: int[3] = [0, 1, 2][: -i], i < 3; }", "y = x;",
     "slice bounds must be compile-time ints", "-i]"),
    ("@constant { c: int[3] = i / 9223372036854775808, i < 3; }", "y = x;",
     "with the int 9223372036854775808, which is past 64 bits", "i / "),
])
def test_compile_time_values_meeting_tensors(tmp_path, extra, compose, needle, where):
    text = graph(compose, extra=extra)
    err = check_error(tmp_path, text, SemanticError)
    assert needle in err.message
    assert err.location.line == position(text, where)[0]


def test_a_value_name_used_as_a_type(tmp_path):
    text = graph(attribs="n: int = 3;", extra="@constant { e: n[2] = 0.0; }")
    err = check_error(tmp_path, text, SemanticError)
    assert "'n' is not a type (it names 3)" in err.message
    assert err.location.line == position(text, "e: n[2]")[0]


@pytest.mark.parametrize("formula,needle,where", [
    ("y[i, j] = x[i, j], i < n, j < x;", "a loop bound must be an int known before the formula runs, "
     "got a tensor of shape [3, 5]", "y[i, j]"),
    ("y[i, j] = x[i, j:], i < n, j < m;", "slice bounds in a tensor access must be ints", "j:]"),
])
def test_lower_formulas_with_tensors_where_ints_belong(tmp_path, formula, needle, where):
    text = ("operator Op { @input { x: real[n, m]; } @output { y: real[n, m]; }\n"
            f"  @lower {{ {formula} }} }}\n"
            "graph G { @input { x: real[3, 5]; } @output { y: real[3, 5]; } @compose { y = Op(x); } }\n")
    path = tmp_path / "main.sknd"
    path.write_text(text)
    graph_ = qsim.load(path)
    with pytest.raises(SemanticError) as info:
        execute(graph_, {"x": np.zeros((3, 5), np.float32)})
    assert needle in info.value.message
    assert info.value.location.line == 2


@pytest.mark.parametrize("argument", ["[x]", "[[1.0, x]]", "[[[[x]]]]"])
def test_a_list_holding_a_tensor_is_not_a_tensor_argument(tmp_path, argument):
    """Found by benchmarks/fuzz.py (a TypeError inside numpy before): a list around a tensor is
    a pack (one item) or, nested, a compile-time list that cannot hold a tensor."""
    text = graph(f"y = math.exp({argument});", outputs="y: real[s..];")
    err = check_error(tmp_path, text, SemanticError)
    assert ("a list holding a tensor is not a tensor argument" in err.message
            or "is a single tensor, got a pack of 1" in err.message), err.message
    assert at(err)[0] == position(text, argument)[0]
