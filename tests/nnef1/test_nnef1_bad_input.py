"""Hostile graph.nnef and graph.quant texts (issue 11): each ends in a located QsimError, never a
traceback, and never because of Python's recursion limit or an allocation. Columns are counted
by hand from the texts built here."""
import sys

import numpy as np
import pytest

from nnef1_helpers import compose_text
from qsim.errors import DataError, SemanticError, SyntaxError_
from qsim.limits import MAX_NESTING_DEPTH
from qsim.nnef1 import load_nnef1
from qsim.nnef1.parser import parse_document


def doc(body, fragments=""):
    """A graph whose statement `body` is on line 5 (line 4 with no fragments before the graph)."""
    return ("version 1.0;\n" + fragments + "graph g( input ) -> ( output )\n{\n"
            "    input = external(shape = [1]);\n" + body + "\n}\n")


def error_at(cls, text, line, column):
    with pytest.raises(cls) as err:
        compose_text(text)
    loc = err.value.location
    assert (loc.file, loc.line, loc.column) == ("test.nnef", line, column), str(err.value)
    return err.value


# ------------------------------------------------------------------ nesting

def test_long_flat_operator_chain_loads():
    """`input + input + ...` nests to the left in the tree, 2,000 deep (past Python's recursion
    limit); it is one level."""
    graph = compose_text(doc("    output = input" + " + input" * 2000 + ";"))
    assert [op.kind.name for op in graph.ops] == ["math.add"] * 2000


def test_deep_parentheses_are_no_nesting():
    graph = compose_text(doc("    output = " + "(" * 5000 + "input * 2.0" + ")" * 5000 + ";"))
    assert [op.kind.name for op in graph.ops] == ["math.mul"]


@pytest.mark.parametrize("depth", [MAX_NESTING_DEPTH, MAX_NESTING_DEPTH + 1, 5000])
def test_unary_nesting_is_limited_with_its_location(depth):
    text = doc("    output = " + "-" * depth + "input;", )
    if depth <= MAX_NESTING_DEPTH:
        assert len(compose_text(text).ops) == depth
        return
    # levels are counted from the inside: the 201st '-' from the right is the first too deep;
    # the first '-' is in column 14
    err = error_at(SyntaxError_, text, 5, 14 + depth - (MAX_NESTING_DEPTH + 1))
    assert err.message == f"expression nests deeper than {MAX_NESTING_DEPTH} levels"
    assert "qsim.limits.MAX_NESTING_DEPTH" in err.hint


@pytest.mark.parametrize("body, line, column, what", [
    # a right-associative power chain nests: 'input ^ ' is 8 characters from column 14
    ("    output = input" + " ^ input" * 300 + ";", 5, 14 + 8 * (300 - 201), "expression"),
    ("    output = add(input, " + "[" * 300 + "1.0" + "]" * 300 + "[0]);", 5, 25 + 300 - 201, "expression"),
    ("    " + "[" * 300 + "output" + "]" * 300 + " = [input];", 5, 5 + 300 - 201, "left-hand side"),
], ids=["power-chain", "array", "lvalue"])
def test_other_nestings_are_limited(body, line, column, what):
    err = error_at(SyntaxError_, doc(body), line, column)
    assert err.message == f"{what} nests deeper than {MAX_NESTING_DEPTH} levels"


def test_type_nesting_is_limited():
    fragment = ("fragment f( x: tensor<scalar>, n: integer" + "[]" * 300
                + " = [] ) -> ( y: tensor<scalar> ) { y = x; }\n")
    err = error_at(SyntaxError_, doc("    output = f(input);", fragment), 2, 35)
    assert err.message == f"type nests deeper than {MAX_NESTING_DEPTH} levels"


def test_recursive_fragment_is_stopped_with_its_location():
    fragment = "fragment f( x: tensor<scalar> ) -> ( y: tensor<scalar> ) { y = f(x); }\n"
    # the innermost invocation `f(x)` is in column 64 of line 2
    err = error_at(SemanticError, doc("    output = f(input);", fragment), 2, 64)
    assert f"evaluation nests deeper than {MAX_NESTING_DEPTH} levels (expanding f → f" in err.message
    assert "recursive fragment" in err.hint


SUM_OF = ("fragment sum_of( items: scalar[] ) -> ( sum: scalar )\n{\n"
          "    sum = items[0] + sum_of(items = items[1:]) if length_of(items) > 0 else 0.0;\n}\n")


def test_recursion_of_the_spec_example_loads_within_the_limit():
    """3.3.3's recursive sum_of takes four levels per item: 40 items fit in 200 levels."""
    graph = compose_text(doc(f"    output = mul(input, sum_of(items = [{', '.join(['1.5'] * 40)}]));", SUM_OF))
    constant = next(t for t in graph.tensors.values() if t.data is not None)
    assert constant.data.tolist() == 60.0


def test_the_nesting_limit_holds_however_deep_the_caller_is():
    """Near the recursion limit's headroom: 300 frames already on the stack, the limit still
    decides (each level takes about two frames)."""
    fragment = "fragment f( x: tensor<scalar> ) -> ( y: tensor<scalar> ) { y = f(x); }\n"
    text = doc("    output = f(input);", fragment)

    def nest(k):
        return nest(k - 1) if k else compose_text(text)

    assert sys.getrecursionlimit() <= 1000
    with pytest.raises(SemanticError, match="evaluation nests deeper"):
        nest(300)


def test_values_nested_by_statements_compare_without_recursion():
    statements = "".join(f"    a{i + 1} = [a{i}];\n" for i in range(1500))
    fragment = ("fragment f( x: tensor<scalar> ) -> ( y: tensor<scalar> )\n{\n    a0 = [1];\n" + statements
                + "    y = x if a1500 == a1500 else -x;\n}\n")
    # the comparison must hold (deep_equal walks 1,500 levels): the negation is taken
    fragment = fragment.replace("y = x if a1500 == a1500 else -x;", "y = -x if a1500 == a1500 else x;")
    graph = compose_text(doc("    output = f(input);", fragment))
    assert [op.kind.name for op in graph.ops] == ["math.neg"]


# ------------------------------------------------------------------ literals and compile-time values

def test_integer_literal_past_int64_is_refused_where_it_is_written():
    err = error_at(SyntaxError_, doc("    output = mul(input, " + "9" * 5000 + ");"), 5, 25)
    assert err.message == "integer literal 999999999999...999999 (5000 digits) is out of range"
    err = error_at(SyntaxError_, doc("    output = mul(input, 9223372036854775808);"), 5, 25)
    assert err.message == "integer literal 9223372036854775808 is out of range"
    fragment = "fragment f( x: tensor<scalar>, n: integer = 9223372036854775807 ) -> ( y: tensor<scalar> ) { y = x; }\n"
    compose_text(doc("    output = f(input);", fragment))


@pytest.mark.parametrize("literal", ["1e400", "1.8e308", "9" * 400 + ".0"])
def test_real_literal_that_overflows_is_refused(literal):
    err = error_at(SyntaxError_, doc(f"    output = mul(input, {literal});"), 5, 25)
    assert "real literal" in err.message and err.message.endswith("is out of range")


def test_real_literal_that_underflows_is_zero():
    graph = compose_text(doc("    output = mul(input, 1e-400);"))
    assert [t.data.tolist() for t in graph.tensors.values() if t.data is not None] == [0.0]


# the default value starts in column 45 of the fragment's line; its operator's location is
# where the operator's left operand starts
@pytest.mark.parametrize("expr, column, cls, message", [
    ("2 ^ 64", 45, SemanticError, "compile-time integer result of '^' is outside the 64-bit range"),
    ("2 ^ 100000000", 45, SemanticError, "compile-time integer result of '^' is outside the 64-bit range"),
    ("4611686018427387904 * 2", 45, SemanticError, "compile-time integer result of '*' is outside"),
    ("integer(1e300)", 45, SemanticError, "compile-time integer result of 'integer' is outside"),
    ("integer('" + "9" * 5000 + "')", 45, SemanticError, "compile-time integer result of 'integer' is outside"),
    ("integer(1e300 * 1e300)", 53, SemanticError, "compile-time real result of '*' is inf"),
    ("integer(2.0 ^ 2000.0)", 53, SemanticError, "compile-time real result of '^' is inf"),
    ("integer((-8.0) ^ 0.5)", 53, SemanticError, "is not real"),
    ("integer(scalar('inf'))", 53, SemanticError, "compile-time real result of 'scalar' is inf"),
    ("length_of([1] * 1000000000000)", 55, DataError,
     "compile-time array of shape [1000000000000] would take 7.28 TiB"),
], ids=["int-pow", "int-pow-huge", "int-mul", "cast-real", "cast-string", "real-mul", "real-pow", "complex",
        "cast-inf", "array-repeat"])
def test_compile_time_results_stay_in_range(expr, column, cls, message):
    fragment = f"fragment f( x: tensor<scalar>, n: integer = {expr} ) -> ( y: tensor<scalar> ) {{ y = x; }}\n"
    err = error_at(cls, doc("    output = f(input);", fragment), 2, column)
    assert message in err.message


def test_doubling_arrays_are_refused_at_the_limit(monkeypatch):
    monkeypatch.setenv("QSIM_MAX_TENSOR_BYTES", "1M")
    statements = "".join(f"    a{i + 1} = a{i} + a{i};\n" for i in range(40))
    fragment = ("fragment f( x: tensor<scalar> ) -> ( y: tensor<scalar> )\n{\n    a0 = [1];\n" + statements
                + "    y = x;\n}\n")
    # 2^17 items of 8 bytes are 1 MiB, 2^18 pass it: a18 (line 4 + 18) in column 11
    err = error_at(DataError, doc("    output = f(input);", fragment), 4 + 18, 11)
    assert err.message.startswith("compile-time array of shape [262144] would take 2 MiB")


@pytest.mark.parametrize("statement, item, message", [
    ("v = variable(shape = [4294967296, 3], label = 'v');", "variable 'v'", "48 GiB"),
    ("v = variable<integer>(shape = [65536, 65536], label = 'v');", "variable 'v'", "32 GiB"),
    ("v = constant(shape = [100000, 100000], value = [1.0]);", "constant 'v'", "37.3 GiB"),
])
def test_huge_tensors_are_refused_before_allocating(statement, item, message):
    err = error_at(DataError, doc(f"    {statement}\n    output = input;"), 5, 9)
    assert err.message.startswith(f"{item} of shape") and f"would take {message}, over the 4 GiB limit" in err.message


def test_non_utf8_graph_is_located(tmp_path):
    text = doc("    output = input; # caf\xe9").encode("latin-1")
    (tmp_path / "graph.nnef").write_bytes(text)
    with pytest.raises(DataError) as err:
        load_nnef1(str(tmp_path))
    loc = err.value.location
    assert (loc.file, loc.line, loc.column) == (str(tmp_path / "graph.nnef"), 5, 26)
    assert "is not UTF-8 text: byte 0xe9 at byte offset" in err.value.message


def test_parse_only_errors_are_qsim_errors():
    with pytest.raises(SyntaxError_):
        parse_document("version 1.0;\ngraph g( x ) -> ( x ) { x = external(shape = [" + "9" * 10000 + "]); }")


def test_empty_left_hand_side_in_the_graph_body():
    err = error_at(SemanticError, doc("    [] = relu(input);\n    output = input;"), 5, 5)
    assert err.message == "cannot unpack tensor<scalar> into 0 identifiers"


@pytest.mark.parametrize("statement, message", [
    ("i = argmax_pool(input, size = [1, 1, 1000, 1000]);",
     "window [1, 1, 1000, 1000] has 1000000 positions; qsim composes argmax_pool from one operator per position"),
    ("o = desample(input, i, size = [1, 1, 300, 300]);", "window [1, 1, 300, 300] has 90000 positions"),
])
def test_huge_windows_are_refused_before_composing(statement, message):
    from qsim.errors import UnsupportedError
    text = ("version 1.0;\ngraph g( input ) -> ( output )\n{\n    input = external(shape = [1, 1, 4, 4]);\n"
            "    i = external<integer>(shape = [1, 1, 4, 4]);\n    " + statement + "\n    output = input;\n}\n")
    with pytest.raises(UnsupportedError) as err:
        compose_text(text)
    assert message in err.value.message
    assert (err.value.location.line, err.value.location.column) == (6, 9)


# ------------------------------------------------------------------ graph.quant

@pytest.mark.parametrize("line, cls, column, message", [
    ("'x': linear_quantize(min = -1e400, max = 1.0, bits = 8);", SyntaxError_, 29,
     "real literal 1e400 is out of range"),
    ("'x': linear_quantize(min = 0.0, max = 5e-324, bits = 8);", SemanticError, 1,
     "'x': range [0.0, 5e-324] over 255 levels gives scale 0.0, outside the normal float32 range"),
    ("'x': linear_quantize(min = 0.0, max = 1e-37, bits = 8);", SemanticError, 1,
     "gives scale 3.921568627450981e-40, outside the normal float32 range"),
    ("'x': linear_quantize(min = -1.7e308, max = 1.7e308, bits = 8);", SemanticError, 1,
     "gives scale inf, outside the normal float32 range"),
    ("'x': linear_quantize(min = 1.0, max = 0.5, bits = 8);", SemanticError, 1, "range [1.0, 0.5] is empty"),
    ("'x': linear_quantize(min = 0.0, max = 1.0, bits = 0);", SemanticError, 1, "bits is 0, expected 1..32"),
    ("'x': linear_quantize(min = 0.0, max = 1.0, bits = 99999999999999999999);", SyntaxError_, 51,
     "integer literal 99999999999999999999 is out of range"),
    ("'x': min_max_linear_quantize(min = -1.0, max = 1.0, bits = 1, signed = true, symmetric = true);",
     SemanticError, 1, "signed symmetric quantization needs at least 2 bits, got 1"),
    ("'x': linear_quantize(min = 1000000.0, max = 1000000.001, bits = 16);", SemanticError, 1,
     "outside 32 signed bits"),
    ("'x': zero_point_linear_quantize(zero_point = 300, scale = 0.5, bits = 8);", SemanticError, 1,
     "zero point 300 does not fit unsigned 8 bits [0, 255]"),
    ("'x': zero_point_linear_quantize(zero_point = 0, scale = 1e-300, bits = 8);", SemanticError, 1,
     "'x': scale 1e-300, outside the normal float32 range"),
], ids=["min-1e400", "denormal-range", "tiny-scale", "infinite-scale", "min-above-max", "bits-0", "bits-huge",
        "one-bit-symmetric", "zero-point-far", "zero-point-range", "scale-denormal"])
def test_graph_quant_ranges_are_checked(line, cls, column, message):
    from qsim.nnef1.quantfile import read_quant_file
    with pytest.raises(cls) as err:
        read_quant_file("# model quantization\n" + line, "graph.quant", lambda name: True)
    assert message in err.value.message, err.value.message
    loc = err.value.location
    assert (loc.file, loc.line, loc.column) == ("graph.quant", 2, column), str(err.value)


def test_non_utf8_graph_quant_is_located(tmp_path):
    (tmp_path / "graph.nnef").write_text(doc("    output = relu(input);"))
    (tmp_path / "graph.quant").write_bytes(b"'output': linear_quantize(min = 0.0, max = 1.0, bits = 8);\n'\xff'")
    with pytest.raises(DataError) as err:
        load_nnef1(str(tmp_path))
    loc = err.value.location
    assert (loc.file, loc.line, loc.column) == (str(tmp_path / "graph.quant"), 2, 2)


def test_rank_zero_local_response_normalization_is_refused():
    text = ("version 1.0;\ngraph g( input ) -> ( output )\n{\n    input = external(shape = []);\n"
            "    output = local_response_normalization(input, size = [], alpha = 1.0, beta = 0.5);\n}\n")
    err = error_at(SemanticError, text, 5, 14)
    assert "'input' has rank 0" in err.message
    one = text.replace("shape = []", "shape = [3]").replace("size = []", "size = [1]")
    assert [op.kind.name for op in compose_text(one).ops] == ["nn.local_response_norm"]
