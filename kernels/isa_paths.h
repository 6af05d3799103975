/* The instruction-set paths of the compiled kernels and how one C body becomes one copy per path.
 *
 * A kernel body is written once as plain C (`name_body`, always_inline) and compiled three
 * times by QSIM_VERSIONS: for AVX-512 (name_avx512), AVX2 (name_avx2) and the baseline x86-64
 * (name_base, SSE2 only), so the vector width the compiler picks follows the path the caller
 * chose (qsim/kernels/cpu_features.py). QSIM_DISPATCH calls the copy of one path. All copies
 * compute the same integers: only the instruction selection differs.
 */
#ifndef QSIM_ISA_PATHS_H
#define QSIM_ISA_PATHS_H

#include <stdint.h>

/* QSIM_ISA_AVX512AMX is the VNNI path with the int8 GEMM on AMX tiles (qgemm_amx.h): every
 * other kernel is called with QSIM_ISA_AVX512VNNI on such a CPU (qsim/kernels/cpu_features.py),
 * and QSIM_DISPATCH runs the AVX-512 copies for it. */
enum { QSIM_ISA_PORTABLE = 0, QSIM_ISA_AVX2 = 1, QSIM_ISA_AVX512VNNI = 2, QSIM_ISA_AVX512AMX = 3 };

#define QSIM_INLINE static inline __attribute__((always_inline))

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define QSIM_X86 1
#include <immintrin.h>
#define QSIM_TARGET_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))
#define QSIM_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#define QSIM_TARGET_AVX2 __attribute__((target("avx2,fma,bmi2")))
#define QSIM_DISPATCH(isa, fn, ...)                                             \
    do {                                                                        \
        if ((isa) >= QSIM_ISA_AVX512VNNI) fn##_avx512(__VA_ARGS__);             \
        else if ((isa) == QSIM_ISA_AVX2) fn##_avx2(__VA_ARGS__);                \
        else fn##_base(__VA_ARGS__);                                            \
    } while (0)
#define QSIM_VERSIONS(fn, params, args)                                         \
    static QSIM_TARGET_AVX512 void fn##_avx512 params { fn##_body args; }       \
    static QSIM_TARGET_AVX2 void fn##_avx2 params { fn##_body args; }           \
    static void fn##_base params { fn##_body args; }
#else
#define QSIM_X86 0
#define QSIM_DISPATCH(isa, fn, ...) fn##_base(__VA_ARGS__)
#define QSIM_VERSIONS(fn, params, args) static void fn##_base params { fn##_body args; }
#endif

#endif
