/* isa.h - which x86-64 instruction set this process runs its vector code
 * on. */
#ifndef SQ_ISA_H
#define SQ_ISA_H

/* The instruction set a shaped kernel (one written per register file, not
 * cloned: rowwise.c) runs on. With clones: the widest the processor has,
 * as the clones' resolvers choose (libgcc's cpu model, which checks that
 * the OS saves the registers). Without (SQ_NO_CLONES, or not x86-64): the
 * one the compiler targets, so `make ISA=avx2` builds an AVX2 machine's
 * code whole on any host (Makefile). */
typedef enum { SQ_ISA_BASE, SQ_ISA_AVX2, SQ_ISA_AVX512 } sq_isa;

/* 1 where kernels are built for several sets and one is chosen at run
 * time (vec.h SQ_VEC's target_clones, rowwise.c's shaped tiles). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__CUDACC__) && \
    !defined(SQ_NO_CLONES)
#define SQ_HAVE_CLONES 1
#else
#define SQ_HAVE_CLONES 0
#endif

static inline sq_isa sq_isa_detect(void)
{
#if SQ_HAVE_CLONES
    if (__builtin_cpu_supports("avx512f"))
        return SQ_ISA_AVX512;
    if (__builtin_cpu_supports("avx2"))
        return SQ_ISA_AVX2;
    return SQ_ISA_BASE;
#elif defined(__AVX512F__)
    return SQ_ISA_AVX512;
#elif defined(__AVX2__)
    return SQ_ISA_AVX2;
#else
    return SQ_ISA_BASE;
#endif
}

/* "avx512f", "avx2", "x86-64" (SSE2) or, elsewhere, the architecture. */
static inline const char *sq_isa_name(sq_isa isa)
{
#if defined(__x86_64__)
    return isa == SQ_ISA_AVX512 ? "avx512f" : isa == SQ_ISA_AVX2 ? "avx2" : "x86-64";
#elif defined(__aarch64__)
    return (void)isa, "arm64";
#else
    return (void)isa, "generic";
#endif
}

/* isa, or the widest this process can run when isa is wider. */
static inline sq_isa sq_isa_clamp(sq_isa isa)
{
    sq_isa top = sq_isa_detect();
    return isa > top ? top : isa;
}

#endif
