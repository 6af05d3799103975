# cython: language_level=3
"""Which SIMD paths this CPU can run (detected at load time, not at build time)."""

cdef extern from "cpu_features.h":
    int qsim_cpu_has_avx2()
    int qsim_cpu_has_avx512_vnni()


def features():
    """Dict of the instruction-set extensions qsim's kernels may use on this CPU."""
    return {"avx2": bool(qsim_cpu_has_avx2()),
            "avx512_vnni": bool(qsim_cpu_has_avx512_vnni())}
