"""The flat module names docs/cvm.md showed before quant/ was split by concern still import, give
the same objects as the new ones and warn (qsim/quant/data.py, cvm_context.py, target_cvm.py)."""
import importlib
import sys

import pytest

OLD_NAMES = {"qsim.quant.data": ("qsim.quant.calibration.data", "Samples"),
             "qsim.quant.cvm_context": ("qsim.quant.cvm.context", "CvmConfig"),
             "qsim.quant.target_cvm": ("qsim.quant.cvm.target", "CvmTarget")}


@pytest.mark.parametrize("old", sorted(OLD_NAMES))
def test_old_name_warns_and_gives_the_same_object(old, monkeypatch):
    new, name = OLD_NAMES[old]
    monkeypatch.delitem(sys.modules, old, raising=False)      # a first import, which warns
    with pytest.warns(DeprecationWarning, match=f"{old} is deprecated: import {new} instead"):
        module = importlib.import_module(old)
    assert getattr(module, name) is getattr(importlib.import_module(new), name)


def test_nothing_in_qsim_uses_an_old_name():
    import test_layering
    users = [imp.where for imp in test_layering.all_imports() if imp.target in OLD_NAMES]
    assert users == []
