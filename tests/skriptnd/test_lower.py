"""The @lower interpreter on the examples of NNEF 2.0 section 2.12 (fixtures kept by the
parser's tests) and on its error paths. Expected values are computed here with numpy."""
from pathlib import Path

import numpy as np
import pytest

from qsim.errors import QsimError, SemanticError
from qsim.skriptnd.lower.interpreter import run_lower
from qsim.skriptnd.parser import parse

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "skriptnd"


def fixture(n: int, wrap_head: str = ""):
    text = (FIX / f"ch2_{n:02d}.sknd").read_text()
    if "operator" not in text:
        text = "operator fragment {\n" + wrap_head + text + "\n}\n"
    return parse(text, f"ch2_{n:02d}.sknd").definitions[0]


def sk(text: str):
    return parse(text, "test.sknd").definitions[0]


R = np.random.default_rng(7)


def test_matmul_accumulates_from_implicit_zero():
    A, B = R.standard_normal((3, 4)), R.standard_normal((4, 2))
    for n in (2, 58):
        np.testing.assert_allclose(run_lower(fixture(n), [A, B])[0], A @ B, rtol=1e-12)


def test_matmul_with_optional_initial_value():
    A, B, Z = R.standard_normal((3, 4)), R.standard_normal((4, 2)), R.standard_normal((3, 2))
    op = fixture(59)
    np.testing.assert_allclose(run_lower(op, [A, B, Z])[0], A @ B + Z, rtol=1e-12)
    np.testing.assert_allclose(run_lower(op, [A, B])[0], A @ B, rtol=1e-12)


def test_add_to_all_pack_forms():
    xs = [R.standard_normal((2, 3)) for _ in range(4)]
    z = R.standard_normal((2, 3))
    want = [x + z for x in xs]
    for n in (60, 67):     # pack-index loop, unrolled pack index
        for got, w in zip(run_lower(fixture(n), [xs, z])[0], want):
            np.testing.assert_allclose(got, w)
    head = "@input { xs: real[n,m]..(k); z: real[n,m]; } @output { ys: real[n,m]..(k); }\n"
    for got, w in zip(run_lower(fixture(61, head), [xs, z])[0], want):   # packed assignment
        np.testing.assert_allclose(got, w)


def test_add_to_all_range_index_forms():
    xs, z = R.standard_normal((2, 3, 4)), R.standard_normal((2, 3))
    np.testing.assert_allclose(run_lower(fixture(62), [xs, z])[0], xs + z[..., None])
    head = "@input { xs: real[n,m,k]; z: real[n,m]; } @output { ys: real[n,m,k]; }\n"
    np.testing.assert_allclose(run_lower(fixture(63, head), [xs, z])[0], xs + z[..., None])


def test_argmax_scans_keep_the_first_maximum():
    x = np.array([1.0, 7.0, 3.0, 7.0, 2.0])
    assert run_lower(fixture(64), [x])[0] == 1
    x2 = np.array([[1.0, 9, 2], [9, 0, 9]])
    np.testing.assert_array_equal(run_lower(fixture(65), [x2])[0], [0, 1])
    head = "@input { x: real[m,n]; } @output { idx: int[]..(2); }\n"
    got = run_lower(fixture(66, head), [x2])[0]
    assert [int(v) for v in got] == [0, 1]


def test_loop_local_values():
    head = ""
    x = R.standard_normal((2, 3))
    np.testing.assert_allclose(run_lower(fixture(68, head), [x])[0], x ** 2 * np.sin(x ** 2))


def test_guarded_window_skips_out_of_bounds():
    x = np.arange(1.0, 6.0)
    got = run_lower(fixture(69), [x], {"w": 3})[0]
    # y[i] = sum_{j<3} x[i+j-1]/3 over in-range entries
    want = np.array([(x[max(i - 1, 0):i + 2]).sum() / 3 for i in range(5)])
    np.testing.assert_allclose(got, want)


def test_remapped_index_replicates_borders():
    op = sk("""operator edge { @attrib { n: int; } @input { x: real[s]; } @output { y: real[s + 2 * n]; }
               @lower { y[i,] = x[|i - n <> 0 : s - 1|,], i < s + 2 * n; } }""")
    np.testing.assert_array_equal(run_lower(op, [np.array([1.0, 2, 3])], {"n": 2})[0], [1, 1, 1, 2, 3, 3, 3])


def test_data_dependent_output_counts_in_loop_order():
    cond = np.array([[True, False, True], [False, True, False]])
    got = run_lower(fixture(71), [cond])[0]
    np.testing.assert_array_equal(got, np.stack(np.nonzero(cond)))
    assert run_lower(fixture(71), [np.zeros((2, 2), bool)])[0].shape == (2, 0)


def test_accumulation_identities():
    op = sk("""operator r { @input { x: real[n]; b: bool[n]; } @output { lo: real[]; hi: real[]; p: real[];
               all: bool[]; any: bool[]; }
               @lower { lo[] <?= x[i,], i < n; hi[] >?= x[i,], i < n; p[] *= x[i,], i < n;
                        all[] &= b[i,], i < n; any[] |= b[i,], i < n; } }""")
    x = np.array([2.0, -1.0, 4.0])
    b = np.array([True, False, True])
    lo, hi, p, al, an = run_lower(op, [x, b])
    assert (lo, hi, p, bool(al), bool(an)) == (-1.0, 4.0, -8.0, False, True)


def test_scatter_updates_repeated_targets_in_order():
    op = sk("""operator sc { @input { d: real[n]; i: int[m]; u: real[m]; } @output { y: real[n]; }
               @lower { y[k,] = d[k,], k < n; y[i[j,],] += u[j,], j < m; } }""")
    got = run_lower(op, [np.zeros(3), np.array([2, 0, 2]), np.array([1.0, 2.0, 3.0])])[0]
    np.testing.assert_array_equal(got, [2.0, 0.0, 4.0])


def test_unguarded_out_of_bounds_write_is_an_error():
    op = sk("""operator bad { @input { x: real[n]; } @output { y: real[n]; }
               @lower { y[i + 1,] = x[i,], i < n; } }""")
    with pytest.raises(SemanticError, match=r"index out of bounds .* guard it"):
        run_lower(op, [np.zeros(3)])


def test_update_without_initialization_is_an_error():
    op = sk("""operator bad { @input { x: real[n]; } @output { y: int[]; }
               @lower { y[] := i, i < n | x[i,] > 0.0; } }""")
    with pytest.raises(SemanticError, match="needs an initialization"):
        run_lower(op, [np.zeros(3)])


def test_null_right_hand_side_is_an_error():
    op = sk("""operator m { @input { Z: optional real[n]; x: real[n]; } @output { C: real[n]; }
               @lower { C[i,] = Z[i,], i < n; } }""")
    with pytest.raises(SemanticError, match="null"):
        run_lower(op, [None, np.zeros(2)])


def test_binding_errors_are_located():
    # the binding is composition's (compose/instance.py): the same messages as when composing
    op = fixture(69)
    with pytest.raises(QsimError, match=r"ch2_69.sknd:\d+:\d+: .*attribute 'w' of 'fragment' has no "
                                        r"default and must be given"):
        run_lower(op, [np.zeros(3)])
    mm = fixture(58)
    with pytest.raises(QsimError, match=r"ch2_58.sknd:\d+:\d+: .*'k' is 3 but 4 from dimension 0 of "
                                        r"input 'B'"):
        run_lower(mm, [np.zeros((2, 3)), np.zeros((4, 2))])


def test_failed_assertion_prints_message_and_values():
    op = sk("""operator a { @attrib { k: int; } @input { x: real[n]; } @output { y: real[n]; }
               @assert { k > 0: "'k' must be positive; got {k}", n; }
               @lower { y[i,] = x[i,], i < n; } }""")
    with pytest.raises(SemanticError, match=r"'k' must be positive; got -2\n +n = 3\n"):
        run_lower(op, [np.zeros(3)], {"k": -2})


def test_inputs_the_interpreter_cannot_bind_are_refused_with_the_reason():
    op = sk("""operator f { @dtype { T: num; U: num; } @input { x: T[n]; ys: T[m]..(k); }
               @output { y: T[n]; } @lower { y[i,] = x[i,], i < n; } }""")
    with pytest.raises(SemanticError, match="input 'x' is a complex128 array; @lower computes on real, "
                                            "int and bool tensors"):
        run_lower(op, [np.zeros(3, complex), [np.zeros(2)]])
    with pytest.raises(SemanticError, match="input 'ys' is a pack; give a list of tensors"):
        run_lower(op, [np.zeros(3), np.zeros(2)])
    with pytest.raises(SemanticError, match=r"generic types are given in declaration order \(T, U\)"):
        run_lower(op, [np.zeros(3), [np.zeros(2)]], generics={"U": "real"})
