"""Choosing and forcing the kernels' instruction-set path."""
import pytest

from qsim.errors import UsageError
from qsim.kernels import cpu_features as cpu_features_mod
from qsim.kernels.cpu_features import Isa, current_isa, forced_isa, set_isa, supported_isas


def test_portable_always_supported_and_default_is_best():
    found = supported_isas()
    assert found[0] is Isa.PORTABLE
    assert current_isa() is found[-1]


def test_forced_isa_restores_previous():
    before = current_isa()
    with forced_isa("portable") as now:
        assert now is Isa.PORTABLE and current_isa() is Isa.PORTABLE
    assert current_isa() is before


def test_unknown_isa_is_a_usage_error():
    with pytest.raises(UsageError, match="unknown kernel ISA 'sse9'") as err:
        set_isa("sse9")
    assert "avx512vnni" in err.value.hint


def test_unsupported_isa_is_refused(monkeypatch):
    monkeypatch.setattr(cpu_features_mod, "supported_isas", lambda: [Isa.PORTABLE])
    with pytest.raises(UsageError, match="cannot run the avx2 kernels"):
        set_isa("avx2")


def test_qsim_isa_environment_variable_picks_the_default(monkeypatch):
    monkeypatch.setattr(cpu_features_mod, "_current", None)
    monkeypatch.setenv("QSIM_ISA", "portable")
    assert current_isa() is Isa.PORTABLE


def test_qsim_isa_naming_an_unknown_path_is_a_usage_error(monkeypatch):
    monkeypatch.setattr(cpu_features_mod, "_current", None)
    monkeypatch.setenv("QSIM_ISA", "sse9")
    with pytest.raises(UsageError, match="QSIM_ISA: unknown kernel ISA 'sse9'") as err:
        current_isa()
    assert "unset QSIM_ISA" in err.value.hint


def test_amx_changes_only_the_gemm_code():
    # on an AMX CPU every kernel but the int8 GEMM runs its AVX-512 VNNI code
    assert Isa.AVX512AMX.code == Isa.AVX512VNNI.code
    assert Isa.AVX512AMX.gemm_code != Isa.AVX512VNNI.gemm_code
    assert [i.gemm_code for i in (Isa.PORTABLE, Isa.AVX2, Isa.AVX512VNNI)] == \
        [i.code for i in (Isa.PORTABLE, Isa.AVX2, Isa.AVX512VNNI)]
