"""Property tests of the SkriptND front end against generated and mutated texts (issue 11).

(a) generated valid documents: random integer expression trees evaluate at compile time to the
    value a small independent Python evaluator (below) gives them; random operator chains compose,
    and the writer round-trips them byte for byte with identical results;
(b) mutated documents (token deletions, duplications, insertions, extreme numbers) never raise
    anything but a QsimError from parsing, composition or `qsim check`;
(c) extreme numbers, extents and axes give a QsimError located in the document, or a model
    that composes.
All seeded (derandomize=True) and a few seconds each.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import qsim
from qsim.errors import QsimError
from qsim.commands.check import check_model
from qsim.runtime import execute
from qsim.skriptnd.writer import write_model

SETTINGS = dict(derandomize=True, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def write(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "main.sknd"
    path.write_text(text)
    return path


# ---------------------------------------------------------------- (a) integer expression trees

def _leaf():
    return st.integers(-50, 50).map(lambda v: (str(v) if v >= 0 else f"({v})", v))


def _combine(children):
    def binary(op, fn):
        return st.tuples(children, children).map(
            lambda ab: (f"({ab[0][0]} {op} {ab[1][0]})", fn(ab[0][1], ab[1][1])))
    select = st.tuples(children, children, children, children).map(
        lambda t: (f"({t[0][0]} < {t[1][0]} ? {t[2][0]} : {t[3][0]})",
                   t[2][1] if t[0][1] < t[1][1] else t[3][1]))
    negate = children.map(lambda a: (f"-{a[0]}", -a[1]))
    return st.one_of(binary("+", lambda a, b: a + b), binary("-", lambda a, b: a - b),
                     binary("*", lambda a, b: a * b), binary("<?", min), binary(">?", max),
                     select, negate)


INT_EXPRESSIONS = st.recursive(_leaf(), _combine, max_leaves=24)


@settings(max_examples=60, **SETTINGS)
@given(expr=INT_EXPRESSIONS)
def test_generated_int_expressions_compose_to_their_value(tmp_path_factory, expr):
    text, value = expr
    doc = ("import math;\ngraph G {\n"
           f"    @attrib {{ a: int = {text}; }}\n"
           "    @input { x: real[4]; }\n    @output { y: real[4]; }\n"
           f"    @assert {{ a == {value if value >= 0 else f'({value})'}: 'wrong value', a; }}\n"
           "    @compose { y = math.neg(x); }\n}\n")
    check_model(str(write(tmp_path_factory.mktemp("expr"), doc)))


# ---------------------------------------------------------------- (a) operator chains, writer

UNARY = ["nn.relu", "math.neg", "math.abs", "math.tanh", "nn.sigmoid", "math.sqr", "math.floor"]


@st.composite
def op_chains(draw):
    """A chain of unary and layout operators on a rank-3 input, tracking the shape."""
    shape = [2, 3, 4]
    lines, current, kinds = [], "x", []
    for k in range(draw(st.integers(1, 6))):
        choice = draw(st.sampled_from(["unary", "transpose", "tile", "sum", "pad"]))
        out = f"t{k}"
        if choice == "unary":
            op = draw(st.sampled_from(UNARY))
            lines.append(f"{out} = {op}({current});")
        elif choice == "transpose":
            perm = draw(st.permutations(range(3)))
            lines.append(f"{out} = layout.transpose{{perm = {list(perm)}}}({current});")
            shape = [shape[p] for p in perm]
        elif choice == "tile":
            axis, reps = draw(st.integers(0, 2)), draw(st.integers(1, 3))
            lines.append(f"{out} = layout.tile{{axes = [{axis}], repeats = [{reps}]}}({current});")
            shape[axis] *= reps
        elif choice == "sum":
            axis = draw(st.integers(0, 2))
            lines.append(f"{out} = math.sum_reduce{{axes = [{axis}]}}({current});")
            shape[axis] = 1
        else:
            axis, lo, hi = draw(st.integers(0, 2)), draw(st.integers(0, 2)), draw(st.integers(0, 2))
            lines.append(f"{out} = layout.pad{{axes = [{axis}], padding = [{lo}, {hi}]}}({current});")
            shape[axis] += lo + hi
        kinds.append(choice)
        current = out
    lines[-1] = "y" + lines[-1][len(current):]
    return lines, shape


@settings(max_examples=25, **SETTINGS)
@given(chain=op_chains(), seed=st.integers(0, 2 ** 16))
def test_generated_op_chains_compose_and_round_trip(tmp_path_factory, chain, seed):
    lines, shape = chain
    body = "\n        ".join(lines)
    doc = ("import nn;\nimport math;\nimport layout;\ngraph G {\n"
           "    @input { x: real[2, 3, 4]; }\n"
           f"    @output {{ y: real[{', '.join(map(str, shape))}]; }}\n"
           f"    @compose {{\n        {body}\n    }}\n}}\n")
    folder = tmp_path_factory.mktemp("chain")
    graph = qsim.load(write(folder / "src", doc))
    assert list(graph.tensors[graph.outputs[0]].shape) == shape
    write_model(graph, folder / "a")
    again = qsim.load(folder / "a")
    write_model(again, folder / "b")
    for path in (folder / "a").iterdir():
        assert path.read_bytes() == (folder / "b" / path.name).read_bytes(), path.name
    x = np.random.default_rng(seed).standard_normal((2, 3, 4)).astype(np.float32)
    first = execute(graph, {"x": x})[graph.outputs[0]]
    second = execute(again, {"x": x})[again.outputs[0]]
    assert first.shape == tuple(shape) and np.array_equal(first, second)


# ---------------------------------------------------------------- (b) mutated documents

CORPUS = [
    """import nn;
import math;
import layout;
graph A {
    @attrib { c: int = 3; k: int = 2; }
    @input { x: real[1, c, 8, 8]; }
    @output { y: real[1, 4, 4, 4]; z: real[1, 4]; }
    @constant { s: real[4] = [1.0, 2.0, 3.0, 4.0]; w: real[4, c, 3, 3] = 0.5; }
    @compose {
        h = nn.conv{padding = [1, 1, 1, 1]}(x, w);
        y = nn.max_pool{axes = [2, 3], size = [k, k], stride = [k, k]}(h);
        m = math.mean_reduce{axes = [2, 3], squeeze = true}(y);
        z = math.mul(m, s);
    }
}
""",
    """import math;
import layout;
operator Scale {
    @attrib { f: real = 2.0; }
    @input { x: real[n, m]; }
    @output { y: real[n, m]; }
    @lower { y[i, j] = f * x[i, j] + 1.0, i < n, j < m; }
}
graph B {
    @input { x: real[3, 5]; }
    @output { y: real[3, 5]; a: int[3]; c: real[3, 5]; }
    @compose {
        y = Scale{f = 0.5}(x);
        a = math.argmax{axis = 1, squeeze = true}(x);
        c = math.cumsum{axis = 1}(y);
    }
}
""",
    """import math;
graph C {
    @input { x: real[4]; }
    @output { y: real[4]; z: real[4]; }
    @using { n = 3; }
    @compose {
        y = with acc: real[4] = x do ..(n) {
            next = math.add(acc, x);
            yield next;
        };
        z = if n > 2 then { yield y; } else { yield x; };
    }
}
""",
]
TOKEN = re.compile(r"[0-9]+\.[0-9]+|[0-9]+|[A-Za-z_][A-Za-z0-9_.]*|\.\.|\S")
INSERTS = ["(", ")", "[", "]", "{", "}", ",", ";", ":", "=", "+", "*", "..", "?", "~", "if", "do",
           "yield", "real", "int", "x", "n", "-1", "0", "inf", "9223372036854775808", "1e999",
           "4294967296", "@compose", "math.add", "layout.tile"]


@st.composite
def mutants(draw):
    text = draw(st.sampled_from(CORPUS))
    for _ in range(draw(st.integers(1, 3))):
        tokens = [m.span() for m in TOKEN.finditer(text)]
        start, end = tokens[draw(st.integers(0, len(tokens) - 1))]
        kind = draw(st.sampled_from(["delete", "duplicate", "insert", "replace"]))
        if kind == "delete":
            text = text[:start] + text[end:]
        elif kind == "duplicate":
            text = text[:start] + text[start:end] + " " + text[start:end] + text[end:]
        else:
            new = draw(st.sampled_from(INSERTS))
            text = text[:start] + new + " " + (text[start:] if kind == "insert" else text[end:])
    return text


@settings(max_examples=150, **SETTINGS)
@given(text=mutants())
def test_mutated_documents_fail_only_with_qsim_errors(tmp_path_factory, text):
    path = write(tmp_path_factory.mktemp("mutant"), text)
    try:
        check_model(str(path))
    except QsimError as err:
        assert err.message and err.kind is not None


# ---------------------------------------------------------------- (c) extreme values

EXTREME_INTS = st.one_of(st.integers(-2 ** 70, 2 ** 70), st.sampled_from(
    [0, -1, 2 ** 31, 2 ** 32, 2 ** 63 - 1, 2 ** 63, -2 ** 63 - 1, 10 ** 40, -9209, 9209]))
EXTREME_LITERALS = st.one_of(EXTREME_INTS.map(lambda v: str(v) if v >= 0 else f"({v})"),
                             st.sampled_from(["inf", "-inf", "1e308", "1e-320", "0.0", "3.5",
                                              "9" * 5000, "1" + "0" * 400 + ".0", "true", "[]"]))

CASES = {
    "constant extent": "@constant {{ c: real[{v}, 2] = 0.0; }}",
    "input extent": None,
    "argmin axis": "@compose {{ y = math.argmin{{axis = {v}}}(x); }}",
    "tile repeats": "@compose {{ y = layout.tile{{repeats = [{v}]}}(x); }}",
    "attribute": "@attrib {{ a: int = {v}; }}",
    "loop count": "@compose {{ y = with s: real[4] = x do ..({v}) {{ t = math.add(s, x); yield t; }}; }}",
}


def extreme_document(case: str, v: str) -> str:
    inputs = f"x: real[{v}];" if case == "input extent" else "x: real[4];"
    block = CASES[case].format(v=v) if CASES[case] else ""
    compose = "" if "@compose" in block else "@compose { y = x; }"
    return ("import math;\nimport layout;\ngraph G {\n"
            f"    @input {{ {inputs} }}\n    @output {{ y: real[~]; }}\n"
            f"    {block}\n    {compose}\n}}\n")


@settings(max_examples=120, **SETTINGS)
@given(case=st.sampled_from(sorted(CASES)), v=EXTREME_LITERALS)
def test_extreme_values_give_located_errors(tmp_path_factory, case, v):
    text = extreme_document(case, v)
    path = write(tmp_path_factory.mktemp("extreme"), text)
    try:
        check_model(str(path))
    except QsimError as err:
        loc = err.location
        assert loc is not None and loc.line is not None and loc.column is not None, err.format()
        if loc.file == str(path):
            assert 1 <= loc.line <= text.count("\n") + 1
