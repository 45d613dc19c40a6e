/* The CUDA attention kernels (cuda/k_attn.cu) against the CPU's
 * (ops.c sq_attention_*) through the CPU API on a CUDA context
 * (cuda_check.h); skipped without a backend.
 *
 * Packed segments of odd lengths (1, 7, 33, 50, 70, 96), heads of 16,
 * 24, 32 and 64 dimensions, q, k, v as column slices of one [T, 3C]
 * array (ld = 3C), causal and bidirectional. Gradient buffers start
 * non-zero (the backward ADDS). Tolerance 2e-5 absolute + 1e-4 relative:
 * the online softmax rescales its sums as the maximum grows and the
 * backward recomputes the probabilities from the log-sum-exp, so the GPU
 * rounds differently from the CPU's two-pass softmax; a wrong mask or a
 * missing term is off by 1e-2 or more. Two runs give the same bits. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_check.h"
#include "attn_linear.h"
#include "ops.h"
#include "ref_ops.h"
#include "rng.h"

/* q|k|v [T, 3C], the initial gradients g0 (0.1 scale) and dout [T, C],
 * drawn from r in that order */
static void draw_inputs(sq_rng *r, size_t n3, size_t tc, float **qkv, float **dout, float **g0)
{
    *qkv = malloc(n3 * sizeof **qkv);
    *dout = malloc(tc * sizeof **dout);
    *g0 = malloc(n3 * sizeof **g0);
    for (size_t i = 0; i < n3; i++) {
        (*qkv)[i] = (float)sq_rng_normal(r);
        (*g0)[i] = (float)(0.1 * sq_rng_normal(r));
    }
    for (size_t i = 0; i < tc; i++)
        (*dout)[i] = (float)sq_rng_normal(r);
}

/* tol: the absolute and the relative tolerance (fp32: 2e-5 and 1e-4);
 * first: the GPU's output of the first run, for the caller (or NULL) */
static void attn_case_tol(unit_ctx *t, cuda_env *g, const int *len, int B, int H, int C,
                          int causal, double tol_a, double tol_r, float *first)
{
    int off[16];
    int T = sq_pack_offsets(off, len, B), ld = 3 * C;
    size_t n3 = (size_t)T * ld, tc = (size_t)T * C;
    sq_rng r;
    sq_rng_seed(&r, (uint64_t)(T * 131 + H * 7 + causal), 0);
    float *qkv, *dout, *g0;
    draw_inputs(&r, n3, tc, &qkv, &dout, &g0);
    size_t na = sq_attention_cache_size(off, B, H);
    float *att = malloc(na * sizeof *att), *out = malloc(tc * sizeof *out);
    float *dqkv = malloc(n3 * sizeof *dqkv), *gout = malloc(tc * sizeof *gout);
    float *gd = malloc(n3 * sizeof *gd);
    sq_ctx c = sq_ctx_cpu();
    sq_attention_forward(&c, out, att, qkv, qkv + C, qkv + 2 * C, ld, off, B, H, C, causal);
    memcpy(dqkv, g0, n3 * sizeof *dqkv);
    sq_attention_backward(&c, dqkv, dqkv + C, dqkv + 2 * C, dout, out, qkv, qkv + C,
                          qkv + 2 * C, att, ld, off, B, H, C, causal);
    CHECK_EQ(cuda_stage_off(g, off, B), 0);
    float *x = cuda_up(g, qkv, n3), *dd = cuda_up(g, dout, tc);
    /* the GPU keeps a log-sum-exp a row and head, T H floats (the mixer's
     * GPU cache size; under SANITIZE=1 the arena's red zones catch more) */
    float *datt = cuda_zeros(g, (size_t)T * H), *dout_g = cuda_zeros(g, tc);
    float *prev = malloc(n3 * sizeof *prev);
    for (int rep = 0; rep < 2; rep++) {
        float *dg = cuda_up(g, g0, n3);
        sq_attention_forward(&g->cx, dout_g, datt, x, x + C, x + 2 * C, ld, off, B, H, C,
                             causal);
        sq_attention_backward(&g->cx, dg, dg + C, dg + 2 * C, dd, dout_g, x, x + C, x + 2 * C,
                              datt, ld, off, B, H, C, causal);
        CHECK(cuda_down(g, gout, dout_g, tc) == 0);
        CHECK(cuda_close_to(gout, out, tc, tol_a, tol_r, "attention out"));
        CHECK(cuda_down(g, gd, dg, n3) == 0);
        CHECK(cuda_close_to(gd, dqkv, n3, tol_a, tol_r, "attention dq|dk|dv"));
        if (first && !rep)
            memcpy(first, gout, tc * sizeof *gout);
        if (rep)
            CHECK(memcmp(prev, gd, n3 * sizeof *gd) == 0);
        memcpy(prev, gd, n3 * sizeof *gd);
    }
    /* the _to form writes dq|dk|dv over g0: on the CPU the bits of adding
     * to zeros, on the GPU those within the tolerance */
    float *cto = malloc(n3 * sizeof *cto), *czero = calloc(n3, sizeof *czero);
    CHECK(cto && czero);
    if (cto && czero) {
        memcpy(cto, g0, n3 * sizeof *cto);
        sq_attention_backward_to(&c, cto, cto + C, cto + 2 * C, dout, out, qkv, qkv + C,
                                 qkv + 2 * C, att, ld, off, B, H, C, causal);
        sq_attention_backward(&c, czero, czero + C, czero + 2 * C, dout, out, qkv, qkv + C,
                              qkv + 2 * C, att, ld, off, B, H, C, causal);
        CHECK(memcmp(cto, czero, n3 * sizeof *cto) == 0);
        float *dg = cuda_up(g, g0, n3);
        sq_attention_backward_to(&g->cx, dg, dg + C, dg + 2 * C, dd, dout_g, x, x + C, x + 2 * C,
                                 datt, ld, off, B, H, C, causal);
        CHECK(cuda_down(g, gd, dg, n3) == 0);
        CHECK(cuda_close_to(gd, cto, n3, tol_a, tol_r, "attention dq|dk|dv written"));
    }
    free(cto); free(czero);
    /* the GPU's output against the definition (tests/ref) too */
    double *xd = cuda_to_double(qkv, n3), *ref = malloc(tc * sizeof *ref);
    CHECK(xd && ref);
    if (xd && ref) {
        ref_attention(ref, xd, xd + C, xd + 2 * C, ld, off, B, H, C, causal);
        CHECK(cuda_close_to_ref(gout, ref, tc, tol_a, tol_r, "attention out vs tests/ref"));
    }
    free(xd); free(ref);
    free(qkv); free(dout); free(g0); free(att); free(out); free(dqkv); free(gout); free(gd);
    free(prev);
}

static void attn_case(unit_ctx *t, cuda_env *g, const int *len, int B, int H, int C, int causal)
{
    attn_case_tol(t, g, len, B, H, C, causal, 2e-5, 1e-4, NULL);
}

UNIT_TEST(cuda_attention_softmax)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    /* the simulated device switches fibers at every shuffle: there the
     * short set, on a GPU all. The kernels take 32 rows a tile from each
     * segment's start: segments of 1 to 12 (one partial tile), 33 (a
     * tile and a row), 70 and 96 (two tiles and a part, three whole) */
    static const int lens[][4] = {{1, 7, 12, 5}, {9, 0, 0, 0}, {1, 33, 70, 2},
                                  {1, 7, 33, 50}, {50, 1, 2, 3}, {96, 64, 0, 0}};
    static const int nb[] = {4, 1, 4, 4, 4, 2};
    static const int heads[][2] = {{2, 32}, {1, 64}, {3, 24}, {1, 32}, {4, 64}, {2, 16}, {8, 64}};
    char name[256] = "";
    int sim = sq_gpu_probe(name, sizeof name) && strstr(name, "simulated") != NULL;
    for (int s = 0; s < (sim ? 3 : 6); s++)
        for (int h = 0; h < (sim ? 3 : 7); h++)
            for (int causal = 0; causal < 2; causal++)
                attn_case(t, &g, lens[s], nb[s], heads[h][0], heads[h][1], causal);
    cuda_close(&g);
}

/* Under --precision tf32 (the GPU's default) the tensor cores' kernels
 * (k_attn_tc.cu): q, k, v, the probabilities and dS rounded to tf32's 10
 * mantissa bits, the products' sums in fp32. Tolerance 3e-3 absolute and
 * relative: tf32's rounding (2^-11 relative an input) through dot products
 * of up to 64 terms and the softmax; a wrong mask or a missing term is off
 * by 1e-2 or more. Two runs give the same bits, and not the fp32 kernels'
 * (the tensor cores ran). */
UNIT_TEST(cuda_attention_tf32)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    static const int lens[][4] = {{1, 7, 12, 5}, {1, 33, 70, 2}, {96, 64, 0, 0}};
    static const int nb[] = {4, 4, 2};
    static const int heads[][2] = {{2, 32}, {1, 64}, {3, 24}, {2, 16}};
    char name[256] = "";
    int sim = sq_gpu_probe(name, sizeof name) && strstr(name, "simulated") != NULL;
    for (int s = 0; s < (sim ? 2 : 3); s++)
        for (int h = 0; h < 4; h++)
            for (int causal = 0; causal < 2; causal++) {
                int off[8], T = sq_pack_offsets(off, lens[s], nb[s]);
                size_t tc = (size_t)T * heads[h][1];
                float *o32 = malloc(tc * sizeof *o32), *otf = malloc(tc * sizeof *otf);
                CHECK(sq_gpu_set_precision(g.gpu, 0, &g.e) == 0);
                attn_case_tol(t, &g, lens[s], nb[s], heads[h][0], heads[h][1], causal, 2e-5,
                              1e-4, o32);
                CHECK(sq_gpu_set_precision(g.gpu, 1, &g.e) == 0);
                attn_case_tol(t, &g, lens[s], nb[s], heads[h][0], heads[h][1], causal, 3e-3,
                              3e-3, otf);
                CHECK(memcmp(o32, otf, tc * sizeof *o32) != 0);
                free(o32);
                free(otf);
            }
    cuda_close(&g);
}

/* The linear kinds (k_lattn.cu): every sq_lattn_kind, causal and
 * bidirectional, against attn_linear.c. The GPU runs the CPU's sweeps
 * statement for statement (expf for vec.h's exp): 1e-5 absolute + 1e-4
 * relative. */
static void lattn_case_k(unit_ctx *t, cuda_env *g, int kind, const int *len, int B, int H,
                         int C, int causal, float kscale)
{
    int off[40];
    if (B >= 40)
        abort(); /* a test's own slip */
    int T = sq_pack_offsets(off, len, B), ld = 3 * C;
    size_t n3 = (size_t)T * ld, tc = (size_t)T * C;
    sq_rng r;
    sq_rng_seed(&r, (uint64_t)(kind * 977 + T * 13 + causal), 0);
    float *qkv, *dout, *g0;
    draw_inputs(&r, n3, tc, &qkv, &dout, &g0);
    for (int i = 0; i < T; i++)
        for (int c = 0; c < C; c++)
            qkv[(size_t)i * ld + C + c] *= kscale;
    size_t nc = sq_lattn_cache_size(kind, off, B, H, C);
    size_t ns = sq_lattn_scratch_size(kind, off, B, H, C);
    float *cache = malloc(nc * sizeof *cache), *scr = malloc(ns * sizeof *scr);
    float *out = malloc(tc * sizeof *out), *dqkv = malloc(n3 * sizeof *dqkv);
    float *gout = malloc(tc * sizeof *gout), *gd = malloc(n3 * sizeof *gd);
    sq_ctx c = sq_ctx_cpu();
    sq_lattn_forward(&c, kind, out, cache, scr, qkv, qkv + C, qkv + 2 * C, ld, off, B, H, C,
                     causal);
    memcpy(dqkv, g0, n3 * sizeof *dqkv);
    sq_lattn_backward(&c, kind, dqkv, dqkv + C, dqkv + 2 * C, scr, dout, qkv, qkv + C,
                      qkv + 2 * C, cache, ld, off, B, H, C, causal);
    CHECK_EQ(cuda_stage_off(g, off, B), 0);
    float *x = cuda_up(g, qkv, n3), *dd = cuda_up(g, dout, tc), *dg = cuda_up(g, g0, n3);
    /* the GPU's scratch: room for a state per piece (attn_linear.h) */
    size_t nsg = sq_lattn_gpu_scratch_size(kind, off, B, H, C);
    CHECK(nsg >= ns);
    float *dc = cuda_zeros(g, nc), *ds = cuda_zeros(g, nsg), *dy = cuda_zeros(g, tc);
    sq_lattn_forward(&g->cx, kind, dy, dc, ds, x, x + C, x + 2 * C, ld, off, B, H, C, causal);
    sq_lattn_backward(&g->cx, kind, dg, dg + C, dg + 2 * C, ds, dd, x, x + C, x + 2 * C, dc, ld,
                      off, B, H, C, causal);
    char what[64];
    snprintf(what, sizeof what, "lattn kind %d causal %d out", kind, causal);
    CHECK(cuda_down(g, gout, dy, tc) == 0 && cuda_close_to(gout, out, tc, 1e-5, 1e-4, what));
    snprintf(what, sizeof what, "lattn kind %d causal %d grads", kind, causal);
    CHECK(cuda_down(g, gd, dg, n3) == 0 && cuda_close_to(gd, dqkv, n3, 1e-5, 1e-4, what));
    /* the GPU's output against the definition (tests/ref) too, for
     * segments of up to 128 rows: its long-double sums are O(L^2 hs)
     * exponentials (most of a run's time over longer ones, which the CPU
     * twin, checked against it in test_attn_linear, vouches for) */
    int longest = 0;
    for (int b = 0; b < B; b++)
        longest = len[b] > longest ? len[b] : longest;
    double *xd = cuda_to_double(qkv, n3), *ref = malloc(tc * sizeof *ref);
    CHECK(xd && ref);
    if (xd && ref && longest <= 128) {
        ref_lattn((sq_lattn_kind)kind, ref, xd, xd + C, xd + 2 * C, ld, off, B, H, C, causal);
        snprintf(what, sizeof what, "lattn kind %d causal %d out vs tests/ref", kind, causal);
        CHECK(cuda_close_to_ref(gout, ref, tc, 1e-5, 1e-4, what));
    }
    free(xd); free(ref);
    free(qkv); free(dout); free(g0); free(cache); free(scr); free(out); free(dqkv);
    free(gout); free(gd);
}

static void lattn_case(unit_ctx *t, cuda_env *g, int kind, const int *len, int B, int H, int C,
                       int causal)
{
    lattn_case_k(t, g, kind, len, B, H, C, causal, 1.0f);
}

UNIT_TEST(cuda_lattn_kinds)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    static const int lens[] = {1, 7, 33, 12};
    for (int kind = SQ_LATTN_LINREC; kind <= SQ_LATTN_LINREC_NO_ELU_PAPER; kind++)
        for (int causal = 0; causal < 2; causal++) {
            int hydra = kind == SQ_LATTN_HYDRA;
            lattn_case(t, &g, kind, lens, 4, hydra ? 16 : 2, 16, causal);
        }
    cuda_close(&g);
}

/* The kinds' homes by head size. k_lchunk.cu (every kind but efficient)
 * and k_echunk.cu (efficient) take 32 rows a chunk for a head of 40 and
 * 16 for a head of 64 (the segment of 70 rows: four whole chunks and a
 * part; the kinds of cuda_lattn_kinds, heads of 8 and 1, take 32).
 * k_lattn.cu's sweep keeps heads over 70 dimensions: the state in shared
 * memory for a head of 80, in the scratch for a head of 136 (over 48 KiB:
 * more columns than the block's 128 threads), with 35 segments, so that a
 * slot sweeps segments b and b + 32. Efficient's keys once more 60 times
 * larger: its column softmax then turns over within a chunk, e^k
 * overflows float, and only a form whose exponents stay <= 0 is right. */
UNIT_TEST(cuda_lattn_shapes)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    static const int few[] = {5, 1, 3}, longer[] = {70, 17, 1};
    int many[35];
    for (int b = 0; b < 35; b++)
        many[b] = 1 + b % 3;
    for (int kind = SQ_LATTN_LINREC; kind <= SQ_LATTN_HYDRA; kind++)
        for (int causal = 0; causal < 2; causal++) {
            lattn_case(t, &g, kind, few, 3, 1, 40, causal);
            lattn_case(t, &g, kind, longer, 3, 1, 64, causal);
            lattn_case(t, &g, kind, few, 3, 1, 80, causal);
            lattn_case(t, &g, kind, kind == SQ_LATTN_LINREC ? many : few,
                       kind == SQ_LATTN_LINREC ? 35 : 3, 1, 136, causal);
        }
    /* the ablations and the paper's scaling over chunk boundaries */
    for (int kind = SQ_LATTN_LINREC_PAPER; kind <= SQ_LATTN_LINREC_NO_ELU_PAPER; kind++)
        if (kind != SQ_LATTN_LINEAR && kind != SQ_LATTN_EFFICIENT && kind != SQ_LATTN_HYDRA)
            for (int causal = 0; causal < 2; causal++)
                lattn_case(t, &g, kind, longer, 3, 2, 64, causal);
    for (int causal = 0; causal < 2; causal++)
        lattn_case_k(t, &g, SQ_LATTN_EFFICIENT, longer, 3, 2, 64, causal, 60.0f);
    cuda_close(&g);
}

/* Long segments in pieces of SQ_LATTN_GPU_PIECE (128) rows, each on its
 * own blocks from the sum of the other pieces' states: 300 rows (two whole
 * pieces and 44 rows), 129 (a piece and a row), 128 (one whole), beside a
 * short one; chunks of 32 (a head of 16) and of 16 (64) inside them. */
UNIT_TEST(cuda_lattn_pieces)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    static const int lens[] = {300, 5, 129, 128};
    for (int kind = SQ_LATTN_LINREC; kind <= SQ_LATTN_HYDRA; kind++)
        for (int causal = 0; causal < 2; causal++) {
            int hydra = kind == SQ_LATTN_HYDRA;
            lattn_case(t, &g, kind, lens, 4, hydra ? 32 : 2, 32, causal);
            lattn_case(t, &g, kind, lens, 4, 1, 64, causal);
        }
    for (int causal = 0; causal < 2; causal++) {
        lattn_case(t, &g, SQ_LATTN_LINREC_PAPER, lens, 4, 2, 32, causal);
        lattn_case_k(t, &g, SQ_LATTN_EFFICIENT, lens, 4, 2, 32, causal, 60.0f);
    }
    cuda_close(&g);
}

/* The GPU forward of the segment lens[1] of a batch (q|k|v rows [T, 3C]):
 * its output rows into y */
static void lattn_seg_out(unit_ctx *t, cuda_env *g, int kind, const float *qkv, const int *lens,
                          int B, int H, int C, int causal, float *y)
{
    int off[8];
    int T = sq_pack_offsets(off, lens, B), ld = 3 * C;
    size_t nc = sq_lattn_cache_size(kind, off, B, H, C);
    size_t ns = sq_lattn_gpu_scratch_size(kind, off, B, H, C);
    CHECK_EQ(cuda_stage_off(g, off, B), 0);
    float *x = cuda_up(g, qkv, (size_t)T * ld), *dc = cuda_zeros(g, nc);
    float *ds = cuda_zeros(g, ns), *dy = cuda_zeros(g, (size_t)T * C);
    sq_lattn_forward(&g->cx, kind, dy, dc, ds, x, x + C, x + 2 * C, ld, off, B, H, C, causal);
    CHECK(cuda_down(g, y, dy + (size_t)off[1] * C, (size_t)lens[1] * C) == 0);
}

/* Scoring's guarantee over pieces: a segment's outputs are the same bits
 * whatever shares its batch (pieces and chunks from its own start). The
 * 300-row segment after 5 rows and before 129, or after 77 rows alone. */
UNIT_TEST(cuda_lattn_pieces_batch)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    enum { C = 32, H = 2, LD = 3 * C };
    static const int a[] = {5, 300, 129}, b[] = {77, 300};
    sq_rng r;
    sq_rng_seed(&r, 2026, 0);
    float *xa = malloc((size_t)434 * LD * sizeof *xa), *xb = malloc((size_t)377 * LD * sizeof *xb);
    float *ya = malloc((size_t)300 * C * sizeof *ya), *yb = malloc((size_t)300 * C * sizeof *yb);
    CHECK(xa && xb && ya && yb);
    if (xa && xb && ya && yb) {
        for (size_t i = 0; i < (size_t)434 * LD; i++)
            xa[i] = (float)sq_rng_normal(&r);
        for (size_t i = 0; i < (size_t)377 * LD; i++)
            xb[i] = (float)sq_rng_normal(&r);
        memcpy(xb + (size_t)77 * LD, xa + (size_t)5 * LD, (size_t)300 * LD * sizeof *xa);
        static const int kinds[] = {SQ_LATTN_LINREC, SQ_LATTN_LINEAR, SQ_LATTN_EFFICIENT};
        for (int k = 0; k < 3; k++)
            for (int causal = 0; causal < 2; causal++) {
                lattn_seg_out(t, &g, kinds[k], xa, a, 3, H, C, causal, ya);
                lattn_seg_out(t, &g, kinds[k], xb, b, 2, H, C, causal, yb);
                CHECK(memcmp(ya, yb, (size_t)300 * C * sizeof *ya) == 0);
            }
    }
    free(xa); free(xb); free(ya); free(yb);
    cuda_close(&g);
}
