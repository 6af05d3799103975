/* Run-time CPU feature detection for choosing SIMD paths.
 * Every fast path has a portable twin giving the same bits; these flags only
 * pick which one runs. GCC/Clang builtins; other compilers get the portable path. */
#ifndef QSIM_CPU_FEATURES_H
#define QSIM_CPU_FEATURES_H

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

#endif
