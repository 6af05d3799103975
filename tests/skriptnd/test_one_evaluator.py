"""One expression evaluator and one binder for composition and @lower (qsim.skriptnd.evaluate,
compose/instance.py): the language's corner rules give the same results in both uses, and the
values are the spec's (NNEF 2.0 draft 2.4, worked by hand from its definitions), not read back
from the code; an invocation binds alike composed and run.

Each case is evaluated three ways: composing (compile-time Python values), in a @lower formula
on the same Python values, and in a @lower formula on a run-time index grid holding the same
numbers (numpy arrays, element by element).
"""
from __future__ import annotations

import numpy as np
import pytest

import qsim
from qsim.errors import SemanticError
from qsim.skriptnd.evaluate import Evaluator
from qsim.skriptnd.lower.access import Lowering
from qsim.skriptnd.lower.interpreter import run_lower
from qsim.skriptnd.parser import parse, parse_expr
from qsim.skriptnd.values import Dyn


def composing(text: str, env: dict):
    return Evaluator(dict(env), "test").eval(parse_expr(text))


def lowering(text: str, env: dict):
    return Evaluator(dict(env), lowering=Lowering()).eval(parse_expr(text))


def on_grids(text: str, env: dict):
    """The expression with every number of `env` held as a one-element run-time grid."""
    grids = {k: np.array([v]) if isinstance(v, (int, float)) and not isinstance(v, bool) else v
             for k, v in env.items()}
    value = lowering(text, grids)
    return value.tolist()[0] if isinstance(value, np.ndarray) else value


def same_in_both_uses(text: str, env: dict, want):
    got = composing(text, env), lowering(text, env)
    assert got == (want, want), text
    assert type(got[0]) is type(want) and type(got[1]) is type(want), text
    return got


# ---- integer division and modulo (2.4: '/' rounds downwards, '\' upwards, '%' modulo) ----------

@pytest.mark.parametrize("a,b,floor,ceil,mod", [
    (7, 2, 3, 4, 1), (-7, 2, -4, -3, 1), (7, -2, -4, -3, -1), (-7, -2, 3, 4, -1),
    (6, 3, 2, 2, 0), (-6, 3, -2, -2, 0), (0, 5, 0, 0, 0), (1, 2 ** 40, 0, 1, 1),
])
def test_integer_division_rounds_down_up_and_modulo_has_the_divisors_sign(a, b, floor, ceil, mod):
    env = {"a": a, "b": b}
    same_in_both_uses("a / b", env, floor)
    same_in_both_uses("a \\ b", env, ceil)
    same_in_both_uses("a % b", env, mod)
    assert floor * b + mod == a                          # the modulo of the rounded-down division
    assert [on_grids(t, env) for t in ("a / b", "a \\ b", "a % b")] == [floor, ceil, mod]


def test_real_division_and_the_real_forms_of_ceil_division_and_modulo():
    # '/' on reals is the real quotient; '\' on reals (chapter 4's layout.range) the quotient
    # rounded up; '%' on reals (chapter 4's math.mod, T: num) the remainder of the rounded-down
    # quotient, with the divisor's sign
    env = {"r": 7.0, "s": 2.0, "m": -5.5}
    same_in_both_uses("r / s", env, 3.5)
    same_in_both_uses("r \\ s", env, 4.0)
    same_in_both_uses("r % s", env, 1.0)
    same_in_both_uses("m % s", env, 0.5)
    same_in_both_uses("m % -s", env, -1.5)
    assert on_grids("m % s", env) == 0.5 and on_grids("r \\ s", env) == 4.0


def test_division_by_zero_is_refused_in_both_uses():
    for text in ("a / b", "a \\ b", "a % b"):
        for use in (composing, lowering):
            with pytest.raises(SemanticError, match="division by zero"):
                use(text, {"a": 3, "b": 0})


# ---- powers (2.4 '**': int ** int is an int; 2.12's example raises a real to an int power) -----

def test_powers():
    same_in_both_uses("a ** b", {"a": -3, "b": 3}, -27)
    same_in_both_uses("a ** b", {"a": 2, "b": 0}, 1)
    same_in_both_uses("x ** 2", {"x": 1.5}, 2.25)
    same_in_both_uses("x ** y", {"x": 4.0, "y": 0.5}, 2.0)
    assert on_grids("x ** 2", {"x": 1.5}) == 2.25
    for use in (composing, lowering):        # an int power with a negative exponent is no int
        with pytest.raises(SemanticError, match="negative exponent"):
            use("a ** b", {"a": 2, "b": -1})


# ---- comparisons: operands of the same type (2.4), the result a bool --------------------------

@pytest.mark.parametrize("text,want", [
    ("1 < 2", True), ("2 <= 2", True), ("-1 > 0", False), ("1.5 >= 1.5", True), ("1 == 1", True),
    ("1 != 1", False), ("'ab' < 'b'", True), ("true == false", False), ("[1, 2] == [1, 3]", (True, False)),
])
def test_comparisons(text, want):
    same_in_both_uses(text, {}, want)


@pytest.mark.parametrize("text", ["1 < 1.0", "1 == true", "1.0 != 'a'", "2 <? 2.5"])
def test_comparing_or_combining_values_of_mixed_types_is_refused_in_both_uses(text):
    for use in (composing, lowering):
        with pytest.raises(SemanticError, match="same type|two ints or two reals"):
            use(text, {})


def test_mixed_int_and_real_arithmetic_is_refused_on_run_time_grids_too():
    with pytest.raises(SemanticError, match="two ints or two reals, got int and real"):
        lowering("i + x", {"i": np.arange(3), "x": np.ones(3)})


# ---- conditional expressions (2.4 Select): c ? a : b, c ? a (null), packed conditions ----------

@pytest.mark.parametrize("text,want", [
    ("t ? 1 : 2", 1), ("f ? 1 : 2", 2), ("t ? 1", 1), ("f ? 1", None),
    ("[t, f, t] ? [1, 2, 3] : 0", (1, 0, 3)), ("f ? 1 : t ? 2 : 3", 2),
    ("(f ? 1) ?? 4", 4), ("?(f ? 1)", False),
])
def test_conditional_expressions(text, want):
    same_in_both_uses(text, {"t": True, "f": False}, want)


def test_a_condition_on_run_time_grids_selects_per_element():
    i = np.arange(5)
    got = lowering("i % 2 == 0 ? i : -i", {"i": i})
    assert got.tolist() == [0, -1, 2, -3, 4]


def test_the_guarded_side_of_a_short_circuit_is_not_evaluated_in_either_use():
    same_in_both_uses("b != 0 && a / b > 1", {"a": 4, "b": 0}, False)
    same_in_both_uses("b == 0 || a / b > 1", {"a": 4, "b": 0}, True)


# ---- ranges (2.4 [b:e:s], end exclusive) ----------------------------------------------------

@pytest.mark.parametrize("text,want", [
    ("[0:5]", (0, 1, 2, 3, 4)), ("[0:5:2]", (0, 2, 4)), ("[5:0:-2]", (5, 3, 1)), ("[3:3]", ()),
    ("[-2:2]", (-2, -1, 0, 1)), ("[0, 3:5, 9]", (0, 3, 4, 9)),
])
def test_ranges(text, want):
    same_in_both_uses(text, {}, want)


def test_a_zero_range_stride_is_refused_in_both_uses():
    for use in (composing, lowering):
        with pytest.raises(SemanticError, match="stride is zero"):
            use("[0:4:0]", {})


# ---- folds (2.4: sum of the empty pack 0, product 1; <? .. of the empty pack undefined) -------

def test_folds():
    same_in_both_uses("a + ..", {"a": (1, 2, 3)}, 6)
    same_in_both_uses("a * ..", {"a": ()}, 1)
    same_in_both_uses("a + ...", {"a": (1, 2, 3)}, (1, 3, 6))
    same_in_both_uses("a <? ..", {"a": (4, -2, 7)}, -2)
    for use in (composing, lowering):
        with pytest.raises(SemanticError, match="empty pack"):
            use("a >? ..", {"a": ()})
    # on run-time grids a fold of a pack of grids is per element
    got = lowering("[i, j, k] >? ..", {"i": np.array([1, 9]), "j": np.array([5, 2]), "k": np.array([3, 3])})
    assert got.tolist() == [5, 9]


# ---- dynamic extents (2.6.1): composing holds an interval, the run-time value lies in it -------

@pytest.mark.parametrize("text", ["(s + 1) / 2", "2 * s - 3", "s \\ 4", "s <? 5", "(s >? 2) + 1"])
def test_a_dynamic_extent_composes_to_an_interval_that_holds_every_run_time_value(text):
    bound = composing(text, {"s": Dyn("s", 0, 10)})
    assert isinstance(bound, Dyn)
    for s in range(11):
        value = lowering(text, {"s": s})
        assert bound.lo <= value <= bound.hi, (text, s)


def test_comparisons_of_dynamic_extents_are_decided_only_at_run_time():
    assert isinstance(composing("s < 4", {"s": Dyn("s", 0, 10)}), Dyn)
    assert lowering("s < 4", {"s": 3}) is True


# ---- the one evaluator inside a whole @lower run ----------------------------------------------

def test_a_lowering_computes_the_corner_rules_per_element():
    module = parse("operator corner {\n"
                   "  @input { a: int[n]; b: int[n]; }\n"
                   "  @output { q: int[n]; c: int[n]; r: int[n]; p: real[n]; }\n"
                   "  @lower {\n"
                   "    q[i] = a[i] / b[i], i < n;\n"
                   "    c[i] = a[i] \\ b[i], i < n;\n"
                   "    r[i] = a[i] % b[i], i < n;\n"
                   "    p[i] = real(a[i]) ** 2, i < n;\n"
                   "  }\n"
                   "}\n", "corner.sknd")
    a, b = np.array([7, -7, 7, -7]), np.array([2, 2, -2, -2])
    q, c, r, p = run_lower(module.get("corner"), [a, b])
    assert q.tolist() == [3, -4, -4, 3]
    assert c.tolist() == [4, -3, -3, 4]
    assert r.tolist() == [1, 1, -1, -1]
    assert p.tolist() == [49.0, 49.0, 49.0, 49.0]


# ---- one binder: a @lower run binds an invocation as composition does -------------------------

OWN = """operator f {
    @attrib { w: int..(r); }
    @input { a: real[k, s..(r)]; b: real[k]; }
    @output { y: real[k]; }
    @using { total = w + ..; }
    @assert { total > 0: "weights sum to {total}", w; }
    @lower { y[i] = a[i, 0..(r)] * 0.0 + b[i] + real(total), i < k; }
}
"""


def _graph(a_shape: str, b_shape: str, attrs: str) -> str:
    return OWN + ("graph G {\n    @input { a: real[" + a_shape + "]; b: real[" + b_shape + "]; }\n"
                  "    @output { y: real[~]; }\n    @compose { y = f{" + attrs + "}(a, b); }\n}\n")


@pytest.mark.parametrize("a_shape,b_shape,weights,arrays,message", [
    ("3, 2", "4", 1, [np.zeros((3, 2)), np.zeros(4)], "'k' is 3 but 4 from dimension 0 of input 'b'"),
    ("3, 2, 2", "3", (1, 2), [np.zeros((3, 2, 2)), np.zeros(3)], None),
    ("3, 2", "3", -1, [np.zeros((3, 2)), np.zeros(3)], "weights sum to -1\n    w = [-1]"),
])
def test_composing_and_running_bind_an_invocation_alike(tmp_path, a_shape, b_shape, weights, arrays, message):
    text = "w = " + (f"[{', '.join(map(str, weights))}]" if isinstance(weights, tuple) else str(weights))
    (tmp_path / "main.sknd").write_text(_graph(a_shape, b_shape, text))
    op = parse(OWN, "main.sknd").get("f")
    if message is None:      # a single weight is made uniform over the pack length r (2.5)
        graph = qsim.load(tmp_path)
        assert graph.outputs
        assert run_lower(op, arrays, {"w": weights})[0].tolist() == [3.0, 3.0, 3.0]
        return
    with pytest.raises(SemanticError) as composing_error:
        qsim.load(tmp_path)
    with pytest.raises(SemanticError) as running_error:
        run_lower(op, arrays, {"w": weights})
    assert message in composing_error.value.message and message in running_error.value.message
