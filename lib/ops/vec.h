/* vec.h - element-wise kernels at the processor's vector width.
 *
 * One binary must be fast on AVX2 and AVX-512 machines and still run on
 * baseline x86-64 and on arm64. A function marked SQ_VEC is compiled once
 * per target below and the dynamic loader picks the widest the processor
 * has (GCC/clang target_clones, an ifunc); elsewhere it is one plain
 * function. Its loops carry `#pragma omp simd`, so they vectorise at -O2.
 *
 * target_clones does not reach into an OpenMP region's outlined body, so
 * the pattern is: a parallel loop over fixed chunks calls an SQ_VEC kernel
 * on each chunk (see adam.c). In a file built in float and double (real.h)
 * an SQ_VEC function takes an R() name even when static: clang names the
 * clones' resolver after the function, and the two builds' resolvers would
 * clash when libseqrec.a is linked.
 *
 * Same bits on every target: the kernels use no FMA contraction
 * (-ffp-contract=off in the Makefile), IEEE division and square root are
 * exact in any width, and every reduction keeps SQ_LANES partial sums
 * combined in a fixed order (sq_lanes_sum), so a 4-, 8- or 16-wide
 * machine adds the same numbers in the same order. */
#ifndef SQ_VEC_H
#define SQ_VEC_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ctx.h" /* sq_ctx_team, sq_ctx_threads: the loops' teams */
#include "isa.h" /* sq_isa_detect: the set the clones run */

#if SQ_HAVE_CLONES
#define SQ_VEC __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define SQ_VEC
#endif

/* Element-wise work is split into chunks of SQ_CHUNK elements for the
 * threads (a power of two, so a chunk never straddles 2^32 elements: the
 * counter of sq_counter_uniform stays 32 bits inside one). */
#define SQ_CHUNK 16384

static inline long sq_chunks(size_t n)
{
    return (long)((n + SQ_CHUNK - 1) / SQ_CHUNK);
}

/* The first element of chunk c of n, and (in *len) its length. */
static inline size_t sq_chunk(size_t n, long c, size_t *len)
{
    size_t i0 = (size_t)c * SQ_CHUNK;
    *len = n - i0 < SQ_CHUNK ? n - i0 : SQ_CHUNK;
    return i0;
}

/* SQ_PAR_FOR(type, i, n, step, BODY): for (type i = 0; i < n; i += step)
 * BODY, on the threads of the context `cx` in scope (a static schedule:
 * iterations must not depend on one another) when it has more than one
 * thread to run on (sq_ctx_team) and the loop more than one iteration,
 * and inline otherwise. libgomp builds a team even for one thread: its
 * set-up and two futex calls at the barriers, 0.6-0.8 us measured, which
 * the ops of a micro-batch part (one thread inside the step's team,
 * lib/train/micro.c) paid about 150 times a step. Either branch runs the
 * same iterations, so the bits do not depend on which one ran. */
#define SQ_PAR_FOR(type, i, n, step, ...)                                         \
    SQ_PAR_LOOP(static, 1, type, i, n, step, __VA_ARGS__)

/* SQ_PAR_LOOP(sched, cond, type, i, n, step, BODY): SQ_PAR_FOR with the
 * schedule `sched` (static, or dynamic: one iteration at a time, for
 * iterations of uneven cost that write disjoint outputs) and a team only
 * when cond holds too (enough work to be worth one). */
#define SQ_PRAGMA(x) _Pragma(#x)
#define SQ_PAR_LOOP(sched, cond, type, i, n, step, ...)                            \
    do {                                                                           \
        type sq_n_ = (n), sq_s_ = (step);                                          \
        if ((cond) && sq_n_ > sq_s_ && sq_ctx_team(cx) > 1) {                      \
            SQ_PRAGMA(omp parallel for schedule(sched) num_threads(sq_ctx_threads(cx))) \
            for (type i = 0; i < sq_n_; i += sq_s_)                                \
                __VA_ARGS__                                                        \
        } else {                                                                   \
            for (type i = 0; i < sq_n_; i += sq_s_)                                \
                __VA_ARGS__                                                        \
        }                                                                          \
    } while (0)

/* SQ_PAR_EACH(i, n, type, scratch, count, BODY): BODY for int i in [0, n)
 * with a dynamic schedule (for iterations of uneven cost that write
 * disjoint outputs, so the bits do not depend on which thread ran which),
 * each thread with its own `type *scratch` of count elements (NULL when
 * there is no memory for it: BODY must then do without). Inline, with no
 * team, for one thread, as SQ_PAR_FOR. */
#define SQ_PAR_EACH(i, n, type, scratch, count, ...)                               \
    do {                                                                           \
        int sq_n_ = (n);                                                           \
        size_t sq_b_ = (size_t)(count) * sizeof(type) + 1;                         \
        if (sq_n_ > 1 && sq_ctx_team(cx) > 1) {                                    \
            _Pragma("omp parallel num_threads(sq_ctx_threads(cx))")                \
            {                                                                      \
                type *scratch = malloc(sq_b_);                                     \
                _Pragma("omp for schedule(dynamic, 1)")                            \
                for (int i = 0; i < sq_n_; i++)                                    \
                    __VA_ARGS__                                                    \
                free(scratch);                                                     \
            }                                                                      \
        } else {                                                                   \
            type *scratch = malloc(sq_b_);                                         \
            for (int i = 0; i < sq_n_; i++)                                        \
                __VA_ARGS__                                                        \
            free(scratch);                                                         \
        }                                                                          \
    } while (0)

/* Runs CALL (an SQ_VEC kernel on elements [i0, i0 + len)) over the chunks
 * of n elements, on the threads of the context `cx` in scope. */
#define SQ_FOR_CHUNKS(n, CALL)                                                     \
    do {                                                                           \
        size_t n_ = (n);                                                           \
        SQ_PAR_FOR(long, c_, sq_chunks(n_), 1, {                                   \
            size_t len, i0 = sq_chunk(n_, c_, &len);                               \
            CALL;                                                                  \
        });                                                                        \
    } while (0)

/* Partial sums of a vectorised reduction: a multiple of every vector
 * width (16 floats = one AVX-512 register). */
#define SQ_LANES 16

/* The partial sums added pairwise in a fixed tree: the same on every
 * target. */
static inline float sq_lanes_sum(const float *acc)
{
    float s8[8], s4[4];
    for (int l = 0; l < 8; l++)
        s8[l] = acc[l] + acc[l + 8];
    for (int l = 0; l < 4; l++)
        s4[l] = s8[l] + s8[l + 4];
    return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}

/* e^x in float without a libm call, so that it vectorises: x = n ln2 + r
 * with |r| <= ln2 / 2, e^r by its Taylor series to r^6 (truncation error
 * below 1.3e-7 relative), 2^n put into the exponent bits. Within 3 ulp of
 * e^x (test_vec measures 2.5e-7 relative); e^x for x < -87.3 is 2^-126 instead of 0 (a softmax term
 * of about 1e-38, never visible in a sum), NaN stays NaN. */
static inline float sq_vexpf(float x)
{
    float y = x > 88.0f ? 88.0f : x;
    y = y < -87.3f ? -87.3f : y;
    y = y == y ? y : 0.0f;                    /* NaN: computed as 0, see end */
    /* round y log2(e) to the nearest integer by the 1.5 * 2^23 shift */
    float n = (y * 1.44269504f + 12582912.0f) - 12582912.0f;
    float r = (y - n * 0.693145752f) - n * 1.42860677e-06f; /* ln2 in two parts */
    float p = 1.0f + r * (1.0f + r * (0.5f + r * (1.66666672e-01f +
              r * (4.16666679e-02f + r * (8.33333377e-03f + r * 1.38888892e-03f)))));
    int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    float e = p * scale;
    return x == x ? e : x;
}

/* erf(x) for GELU, vectorisable: Abramowitz and Stegun 7.1.26 (absolute
 * error 1.5e-7), evaluated in float: within 6e-7 of erf (a few float ulp
 * of the 1 + erf that GELU uses; test_vec measures it). */
static inline float sq_verff(float x)
{
    float a = x < 0 ? -x : x;
    float t = 1.0f / (1.0f + 0.3275911f * a);
    float poly = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f +
                 t * (-1.453152027f + t * 1.061405429f))));
    float v = 1.0f - poly * sq_vexpf(-a * a);
    return x < 0 ? -v : v;
}

/* A counter-based uniform in [0, 1): a pure function of (key, i), so a
 * dropout mask is the same for any thread count and any vector width,
 * and a whole vector of them is computed at once (32-bit multiplies and
 * shifts only). Two rounds of a 32-bit avalanche hash (the "lowbias32"
 * constants), keyed by the two halves of a 64-bit key. */
static inline uint32_t sq_hash32(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

static inline float sq_counter_uniform(uint64_t key, uint32_t i)
{
    uint32_t x = sq_hash32(i ^ (uint32_t)key);
    x = sq_hash32(x + (uint32_t)(key >> 32));
    return (float)(x >> 8) * (1.0f / 16777216.0f);
}

#endif
