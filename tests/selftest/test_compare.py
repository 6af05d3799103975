"""selftest.compare: a mismatch names the first differing element, its two values and how many differ."""
import io

import numpy as np
import pytest

from qsim.errors import MismatchError
from qsim.selftest import runner
from qsim.selftest.compare import SelfCheck, assert_equal_arrays


def test_equal_arrays_count_their_elements():
    assert assert_equal_arrays("x", np.arange(6).reshape(2, 3), np.arange(6).reshape(2, 3)) == 6


def test_first_differing_element_is_named():
    want = np.zeros((2, 3), dtype=np.int32)
    got = want.copy()
    got[1, 0], got[1, 2] = 5, 7
    with pytest.raises(MismatchError) as info:
        assert_equal_arrays("CONV2D kernel", want, got)
    assert "CONV2D kernel: element [1, 0] is 5 but the reference gives 0 (2 of 6 elements differ)" \
        in str(info.value)


def test_shape_mismatch_is_named():
    with pytest.raises(MismatchError, match=r"shape \[3\] != expected \[2\]"):
        assert_equal_arrays("x", np.zeros(2), np.zeros(3))


def test_a_failing_check_is_reported_and_the_others_still_run(monkeypatch):
    def bad(rng):
        return assert_equal_arrays("bad", np.zeros(2), np.ones(2))
    monkeypatch.setattr(runner, "CHECKS", [SelfCheck("broken", bad), SelfCheck("fine", lambda rng: 4)])
    out = io.StringIO()
    assert runner.run_selftest(seed=1, out=out) is False
    lines = out.getvalue().splitlines()
    assert lines[1].startswith("  FAIL broken: bad: element [0] is 1.0 but the reference gives 0.0")
    assert lines[2].startswith("  ok   fine: 4 elements equal")
    assert lines[3] == "qsim selftest: FAILED"
