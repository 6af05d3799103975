# cython: language_level=3
"""Which SIMD paths this CPU can run (detected at load time, not at build time)."""

cdef extern from "cpu_features.h":
    int qsim_cpu_has_avx2()
    int qsim_cpu_has_avx512_vnni()
    int qsim_cpu_has_amx_int8()


def features():
    """Dict of the instruction-set extensions qsim's kernels may use on this CPU. `amx_int8`
    also asks Linux for this process's AMX tile permission (and is False if refused)."""
    return {"avx2": bool(qsim_cpu_has_avx2()),
            "avx512_vnni": bool(qsim_cpu_has_avx512_vnni()),
            "amx_int8": bool(qsim_cpu_has_amx_int8())}
