/* Run-time CPU feature detection for choosing SIMD paths.
 * Every fast path has a portable twin giving the same bits; these flags only
 * pick which one runs. GCC/Clang builtins; other compilers get the portable path. */
#ifndef QSIM_CPU_FEATURES_H
#define QSIM_CPU_FEATURES_H

#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

static inline int qsim_cpu_has_avx2(void) {
#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2");
#else
    return 0;
#endif
}

static inline int qsim_cpu_has_avx512_vnni(void) {
#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")
        && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
#else
    return 0;
#endif
}

/* AMX int8 tiles usable by this process: the CPU reports amx_tile and amx_int8 (and the
 * AVX-512 VNNI path the AMX GEMM's epilogue and every other kernel use), and Linux grants the
 * tile data state. Linux enables AMX per process on request (Documentation/arch/x86/xstate.rst):
 * arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) before the first tile instruction, or the
 * thread gets SIGILL. The permission covers every thread of the process, those started later
 * (qsim's task pool) included, and is inherited by fork(); a repeated request is harmless.
 * Other systems: no AMX path. */
static inline int qsim_cpu_has_amx_int8(void) {
#if defined(__linux__) && defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    enum { ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };
    __builtin_cpu_init();
    if (!qsim_cpu_has_avx512_vnni() || !__builtin_cpu_supports("amx-tile")
        || !__builtin_cpu_supports("amx-int8"))
        return 0;
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
#else
    return 0;
#endif
}

#endif
