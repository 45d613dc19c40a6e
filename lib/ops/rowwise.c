/* rowwise.c - the batch-invariant linear layer (rowwise.h): tiles of rows
 * x outputs shaped per instruction set (rowwise_tile.h), each output summed
 * over the channels in order. Compiled as float and as double (real.h). */
#ifndef SQ_REAL
#define SQ_REAL float
#endif

#include "rowwise.h"
#include "real.h"
#include "vec.h"
#include "isa.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define SQ_RBLK 256  /* rows per task */
#define SQ_CBLK 256  /* outputs per task (the packed copy of w: SQ_CBLK x C) */

/* A tile kernel for one register file (rowwise_tile.h): pack a block of w
 * into panels of `cols` outputs, and score rows [t0, t1) against it in
 * tiles of `rows` x `cols`. */
typedef struct {
    void (*pack)(real *wt, const real *w, int C, int o0, int n);
    void (*task)(real *out, const real *inp, const real *wt, const real *b, int t0, int t1,
                 int C, int OC, int o0, int n);
    int rows, cols;
} R(row_kernel);

/* The shapes, measured (issue 33: the scoring GEMM, 256 users x 12102
 * items x 64, one core of an AMD EPYC family 25 model 17 (Zen 4), float,
 * GFLOP/s): AVX-512 16 rows x 16 outputs (16 of 32 zmm for accumulators;
 * 95, against 88-90 for 8 x 16, 69 for 8 x 32, 41 for 24 x 16), AVX2 6 x 16
 * (12 of 16 ymm; 90, against 78 for 4 x 16, 70 for 8 x 16 and 6-8 for the
 * 8 x 16 of 16-float vectors that spilled), SSE2 4 x 8 (8 of 16 xmm; 35).
 * OpenBLAS's sgemm on that shape: 90 (its AVX-512 kernels), 92-98 (its
 * Haswell ones). With clones each is built for its set and chosen at run
 * time (sq_isa_detect); without, only the compiler's own. */
#if SQ_HAVE_CLONES || defined(__AVX512F__)
#define TILE_SUFFIX avx512
#define TILE_TARGET __attribute__((target("avx512f")))
#define TILE_BYTES 64
#define TILE_R 16
#define TILE_K 1
#include "rowwise_tile.h"
#endif
#if SQ_HAVE_CLONES || (defined(__AVX2__) && !defined(__AVX512F__))
#define TILE_SUFFIX avx2
#define TILE_TARGET __attribute__((target("avx2")))
#define TILE_BYTES 32
#define TILE_R 6
#define TILE_K 2
#include "rowwise_tile.h"
#endif
#if SQ_HAVE_CLONES || !defined(__AVX2__)
#define TILE_SUFFIX base
#define TILE_TARGET
#define TILE_BYTES 16
#define TILE_R 4
#define TILE_K 2
#include "rowwise_tile.h"
#endif

static const R(row_kernel) *R(row_kernel_for)(sq_isa isa)
{
#if SQ_HAVE_CLONES
    return isa == SQ_ISA_AVX512 ? &R(kernel_avx512) : isa == SQ_ISA_AVX2 ? &R(kernel_avx2)
                                                                        : &R(kernel_base);
#elif defined(__AVX512F__)
    return (void)isa, &R(kernel_avx512);
#elif defined(__AVX2__)
    return (void)isa, &R(kernel_avx2);
#else
    return (void)isa, &R(kernel_base);
#endif
}

/* The same sums without the copy of w (no memory for it): one element at
 * a time, in the same order. */
static void R(row_plain)(const sq_ctx *cx, real *out, const real *inp, const real *w,
                         const real *b, int T, int C, int OC)
{
    SQ_PAR_FOR(int, t, T, 1, {
        for (int o = 0; o < OC; o++) {
            real s = 0;
            for (int c = 0; c < C; c++)
                s += inp[(size_t)t * C + c] * w[(size_t)o * C + c];
            out[(size_t)t * OC + o] = b ? s + b[o] : s + (real)0;
        }
    });
}

void R(sq_rowwise_linear)(const sq_ctx *cx, real *out, const real *inp, const real *w,
                          const real *b, int T, int C, int OC)
{
    R(sq_rowwise_linear_isa)(cx, sq_isa_detect(), out, inp, w, b, T, C, OC);
}

void R(sq_rowwise_linear_isa)(const sq_ctx *cx, sq_isa isa, real *out, const real *inp,
                              const real *w, const real *b, int T, int C, int OC)
{
    if (T <= 0 || OC <= 0)
        return;
    const R(row_kernel) *k = R(row_kernel_for)(sq_isa_clamp(isa));
    int n_cblk = (OC + SQ_CBLK - 1) / SQ_CBLK, n_rblk = (T + SQ_RBLK - 1) / SQ_RBLK;
    int nt = sq_ctx_threads(cx);
    real *wt_all = malloc((size_t)nt * C * SQ_CBLK * sizeof *wt_all);
    if (!wt_all) {
        R(row_plain)(cx, out, inp, w, b, T, C, OC);
        return;
    }
    /* tasks in output-block-major order: a thread's packed block of w
     * serves the row blocks that follow it */
    #pragma omp parallel num_threads(nt)
    {
        real *wt = wt_all + (size_t)omp_get_thread_num() * C * SQ_CBLK;
        int have = -1;
        #pragma omp for schedule(dynamic, 1)
        for (long t = 0; t < (long)n_cblk * n_rblk; t++) {
            int kb = (int)(t / n_rblk), kr = (int)(t % n_rblk);
            int o0 = kb * SQ_CBLK, n = OC - o0 < SQ_CBLK ? OC - o0 : SQ_CBLK;
            if (kb != have) {
                k->pack(wt, w, C, o0, n);
                have = kb;
            }
            int t0 = kr * SQ_RBLK, t1 = t0 + SQ_RBLK < T ? t0 + SQ_RBLK : T;
            k->task(out, inp, wt, b, t0, t1, C, OC, o0, n);
        }
    }
    free(wt_all);
}
