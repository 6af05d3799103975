"""A missing or broken compiled extension is an error on the kernels backend, never a silent
switch to the reference; the reference backend works without it; every TOSA operator has a
decided place (compiled kernel or reference by design) in qsim.kernels.registry."""
import sys
import types

import numpy as np
import pytest

import qsim.cvm as cvm
from qsim.cli import main
from qsim.errors import QsimError, UnsupportedError
from qsim.kernels import extensions
from qsim.kernels.extensions import KernelsUnavailableError
from qsim.kernels.registry import KERNELS, ON_REFERENCE, kernel_for
from qsim.tosa import run
from qsim.tosa import OPERATORS

FC = dict(weight=np.array([[1, 2, 3]], np.int8), bias=np.array([10], np.int32), input_zp=0, weight_zp=0)
X = np.array([[1, 1, 2]], np.int8)
# modules that load the extension when imported; removed so that the next use imports them again
_LOADERS = ("qsim.kernels.registry", "qsim.kernels.gemm_ops", "qsim.kernels.window_ops", "qsim.kernels.unary_ops",
            "qsim.kernels.elementwise_ops")


def _break(monkeypatch, name: str, replacement) -> None:
    """Makes `import qsim.kernels.<name>` give `replacement` (None: the import fails)."""
    monkeypatch.setattr(extensions, "_loaded", {})
    for module in _LOADERS:
        monkeypatch.delitem(sys.modules, module, raising=False)
    monkeypatch.setitem(sys.modules, f"qsim.kernels.{name}", replacement)


def _assert_unavailable(err: KernelsUnavailableError, *words: str) -> None:
    assert isinstance(err, UnsupportedError) and isinstance(err, QsimError)
    assert not isinstance(err, ImportError)       # no `except ImportError` may swallow it
    for word in words:
        assert word in err.message
    assert "pip install ." in err.hint and "python setup.py build_ext --inplace" in err.hint
    assert "backend='reference'" in err.hint


def test_missing_tosa_extension_fails_every_kernels_call(monkeypatch):
    assert run("FULLY_CONNECTED", [X], FC, backend="kernels")[0].tolist() == [[19]]
    _break(monkeypatch, "_tosa_ops", None)
    with pytest.raises(KernelsUnavailableError) as info:
        run("FULLY_CONNECTED", [X], FC, backend="kernels")
    _assert_unavailable(info.value, "missing or broken", "qsim.kernels._tosa_ops")
    # an operator that runs on the reference by design fails too: the backend is broken
    assert "ABS" in ON_REFERENCE
    with pytest.raises(KernelsUnavailableError):
        run("ABS", [np.array([-2], np.int32)], {}, backend="kernels")
    # the reference is chosen by name only, and works without the extension
    assert run("FULLY_CONNECTED", [X], FC, backend="reference")[0].tolist() == [[19]]


def test_stale_extension_names_the_missing_entry_points(monkeypatch):
    stale = types.ModuleType("qsim.kernels._tosa_ops")
    for entry in extensions.REQUIRED["_tosa_ops"]:
        if entry not in ("gemm_i16", "reduce"):
            setattr(stale, entry, 0)
    _break(monkeypatch, "_tosa_ops", stale)
    with pytest.raises(KernelsUnavailableError) as info:
        run("FULLY_CONNECTED", [X], FC, backend="kernels")
    _assert_unavailable(info.value, "out of date", "lacks gemm_i16, reduce")


def test_missing_cvm_extension_fails_the_cvm_kernels(monkeypatch):
    x = np.array([[1, -2, 3]], np.int32)
    w = np.array([[2, 2, 2], [1, 0, -1]], np.int32)
    assert cvm.run("dense", [x, w], backend="kernels")[0].tolist() == [[4, -2]]
    _break(monkeypatch, "_cvm_conv", None)
    with pytest.raises(KernelsUnavailableError) as info:
        cvm.run("dense", [x, w], backend="kernels")
    _assert_unavailable(info.value, "qsim.kernels._cvm_conv")
    assert cvm.run("dense", [x, w], backend="reference")[0].tolist() == [[4, -2]]


@pytest.mark.parametrize("name", ["_cpu", "_tosa_ops", "_cvm_conv"])
def test_selftest_with_a_missing_extension_is_a_clean_cli_error(monkeypatch, capsys, name):
    _break(monkeypatch, name, None)
    assert main(["selftest"]) == 2
    captured = capsys.readouterr()
    assert f"qsim.kernels.{name}" in captured.err and "build_ext --inplace" in captured.err
    assert "Traceback" not in captured.err
    assert " ok " not in captured.out           # fails before any check runs


def test_every_operator_has_a_decided_backend():
    assert not set(KERNELS) & set(ON_REFERENCE)
    assert set(KERNELS) | set(ON_REFERENCE) == set(OPERATORS)
    assert kernel_for("CONV2D") is KERNELS["CONV2D"]
    assert kernel_for("TRANSPOSE") is None
    with pytest.raises(LookupError, match="neither in KERNELS nor in ON_REFERENCE"):
        kernel_for("NO_SUCH_OP")
