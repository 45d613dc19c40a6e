/* The CUDA depthwise convolution (cuda/k_dwconv.cu) and HSTU's SiLU
 * attention (cuda/k_silu.cu) against their CPU twins (dwconv.c,
 * attn_silu.c) through the CPU API on a CUDA context (cuda_check.h), and
 * their forwards against the definitions (tests/ref, in double, from the
 * same float inputs); skipped without a backend. Gradient buffers start
 * non-zero (the backwards ADD); every op runs twice: the same bits.
 *
 * dwconv: K in {1, 2, 3, 5, 9} (9: longer than most segments), causal and
 * bidirectional, with and without a bias, x a plain [T, C] array or the V
 * slice of a fused [T, 3C] buffer, C = 40 (not a multiple of a warp),
 * segments of 1 to 12 rows. The forward and dx are a thread per element
 * summing its taps in the CPU's order, built with --fmad=false: the CPU's
 * bits (tolerance 0). dw and db sum the rows in 16 interleaved groups (the
 * CPU: one sum): 1e-5 absolute + 1e-5 relative (measured: 3e-6 at most
 * over these sums of up to 25 products of O(1)). Against tests/ref: 1e-5
 * absolute + 1e-5 relative (float against double, up to 10 roundings of
 * O(1) terms; measured 4e-7).
 *
 * attn_silu: heads (H, qk_dim, v_dim) = (2, 8, 6), (1, 40, 33) and (1, 128,
 * 128) (the kernel's widest: four dimensions a lane), segments of 1 to 12
 * rows, max_len two more than the longest (distances nobody uses: drab
 * stays), q, k, v column slices of one [T, ld] buffer with padding
 * columns that must not move. 1e-5 absolute + 1e-4 relative against the
 * CPU and the reference: expf here and warp trees for the dot products,
 * the CPU's 8 partial sums (measured: 5e-7 on out, 7e-7 against tests/ref,
 * 2e-6 on the gradients); a wrong mask, distance or missing term is off by
 * 1e-2 or more. With dq and drab NULL the backward writes the full run's
 * dk and dv bit for bit. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attn_silu.h"
#include "cuda_check.h"
#include "dwconv.h"
#include "gradcheck.h"
#include "ops.h"
#include "ref_ops.h"
#include "rng.h"

#define DC_C 40
#define DW_ATOL 1e-5 /* dw, db against the CPU */
#define DW_RTOL 1e-5
#define REF_ATOL 1e-5 /* forwards against tests/ref */
#define REF_RTOL 1e-5
#define SL_ATOL 1e-5 /* attn_silu against the CPU and tests/ref */
#define SL_RTOL 1e-4

/* ------------------------------------------------------------------------ */
/* dwconv                                                                    */

typedef struct {
    double fwd_ref, dw_cpu; /* the largest differences measured */
} dc_worst;

/* One case: K taps, x at column `xo` of rows of stride ld (C or 3 C). */
static void dwconv_case(unit_ctx *t, cuda_env *g, const int *len, int B, int K, int causal,
                        int bias, int fused, dc_worst *wst)
{
    int off[16], C = DC_C, ld = fused ? 3 * C : C, xo = fused ? 2 * C : 0;
    int T = sq_pack_offsets(off, len, B);
    size_t nx = (size_t)T * ld, no = (size_t)T * C, nw = (size_t)K * C;
    sq_rng r;
    sq_rng_seed(&r, (uint64_t)(T * 31 + K * 7 + causal * 3 + bias), (uint64_t)fused);
    float *x = cuda_randn(nx, 1, &r), *w = cuda_randn(nw, 0.5, &r), *b = cuda_randn(C, 0.5, &r);
    float *out0 = cuda_randn(no, 0.1, &r), *dout = cuda_randn(no, 1, &r);
    float *gx0 = cuda_randn(nx, 0.1, &r), *gw0 = cuda_randn(nw, 0.1, &r);
    float *gb0 = cuda_randn(C, 0.1, &r);
    /* the CPU */
    sq_ctx c = sq_ctx_cpu();
    const float *bb = bias ? b : NULL;
    float *out = cuda_host_dup(out0, no), *gx = cuda_host_dup(gx0, nx);
    float *gw = cuda_host_dup(gw0, nw), *gb = cuda_host_dup(gb0, C);
    sq_dwconv_forward(&c, out, x + xo, ld, w, bb, K, off, B, C, causal);
    sq_dwconv_backward(&c, gx + xo, gw, bias ? gb : NULL, dout, x + xo, ld, w, K, off, B, C,
                       causal);
    /* the GPU, twice */
    CHECK_EQ(cuda_stage_off(g, off, B), 0);
    float *dx = cuda_up(g, x, nx), *dw = cuda_up(g, w, nw), *db = cuda_up(g, b, C);
    float *dd = cuda_up(g, dout, no);
    float *hout = malloc(no * sizeof *hout), *hgx = malloc(nx * sizeof *hgx);
    float *hgw = malloc(nw * sizeof *hgw), *hgb = malloc(C * sizeof *hgb);
    float *prev[4] = {malloc(no * sizeof(float)), malloc(nx * sizeof(float)),
                      malloc(nw * sizeof(float)), malloc(C * sizeof(float))};
    char what[96];
    for (int rep = 0; rep < 2; rep++) {
        float *dy = cuda_up(g, out0, no), *dgx = cuda_up(g, gx0, nx);
        float *dgw = cuda_up(g, gw0, nw), *dgb = cuda_up(g, gb0, C);
        sq_dwconv_forward(&g->cx, dy, dx + xo, ld, dw, bias ? db : NULL, K, off, B, C, causal);
        sq_dwconv_backward(&g->cx, dgx + xo, dgw, bias ? dgb : NULL, dd, dx + xo, ld, dw, K,
                           off, B, C, causal);
        CHECK(cuda_down(g, hout, dy, no) == 0 && cuda_down(g, hgx, dgx, nx) == 0 &&
              cuda_down(g, hgw, dgw, nw) == 0 && cuda_down(g, hgb, dgb, C) == 0);
        snprintf(what, sizeof what, "dwconv K %d causal %d bias %d fused %d", K, causal, bias,
                 fused);
        CHECK(cuda_same_bits(hout, out, no, what));                   /* out */
        CHECK(cuda_same_bits(hgx, gx, nx, what));                     /* dx, and nothing else */
        /* dw, db: sums over T rows in other orders, their rounding growing
         * with T (1e-5 up to 32 rows; 601 rows missed it by 1.8e-5 on a
         * value of 0.2); a wrong tap or segment is off by O(1) */
        double dtol = DW_ATOL * (1 + T / 32);
        CHECK(cuda_close_to(hgw, gw, nw, dtol, DW_RTOL, what)); /* dw */
        CHECK(cuda_close_to(hgb, gb, C, dtol, DW_RTOL, what));  /* db */
        if (!bias)
            CHECK(cuda_same_bits(hgb, gb0, C, "dwconv: db NULL left alone"));
        cuda_keep_max(&wst->dw_cpu, cuda_max_diff(hgw, gw, NULL, nw));
        cuda_keep_max(&wst->dw_cpu, cuda_max_diff(hgb, gb, NULL, C));
        if (rep) {
            CHECK(memcmp(prev[0], hout, no * sizeof(float)) == 0);
            CHECK(memcmp(prev[1], hgx, nx * sizeof(float)) == 0);
            CHECK(memcmp(prev[2], hgw, nw * sizeof(float)) == 0);
            CHECK(memcmp(prev[3], hgb, C * sizeof(float)) == 0);
        }
        memcpy(prev[0], hout, no * sizeof(float));
        memcpy(prev[1], hgx, nx * sizeof(float));
        memcpy(prev[2], hgw, nw * sizeof(float));
        memcpy(prev[3], hgb, C * sizeof(float));
    }
    /* the GPU's forward against the definition: it adds onto out0 */
    double *xd = cuda_to_double(x, nx), *wd = cuda_to_double(w, nw);
    double *bd = cuda_to_double(b, C), *ref = cuda_to_double(out0, no);
    CHECK(xd && wd && bd && ref);
    if (xd && wd && bd && ref) {
        ref_dwconv(ref, xd + xo, ld, wd, bias ? bd : NULL, K, off, B, C, causal);
        snprintf(what, sizeof what, "dwconv K %d causal %d vs tests/ref", K, causal);
        CHECK(cuda_close_to_ref(hout, ref, no, REF_ATOL, REF_RTOL, what));
        cuda_keep_max(&wst->fwd_ref, cuda_max_diff(hout, NULL, ref, no));
    }
    free(xd); free(wd); free(bd); free(ref);
    for (int i = 0; i < 4; i++)
        free(prev[i]);
    free(x); free(w); free(b); free(out0); free(dout); free(gx0); free(gw0); free(gb0);
    free(out); free(gx); free(gw); free(gb); free(hout); free(hgx); free(hgw); free(hgb);
}

UNIT_TEST(cuda_dwconv)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    static const int lens[][4] = {{1, 7, 12, 5}, {3, 1, 6, 2}};
    static const int ks[] = {1, 2, 3, 5, 9};
    dc_worst w = {0, 0};
    for (int s = 0; s < 2; s++)
        for (int k = 0; k < 5; k++)
            for (int causal = 0; causal < 2; causal++)
                dwconv_case(t, &g, lens[s], 4, ks[k], causal, (k + s) % 2, (k + causal) % 2,
                            &w);
    /* 601 rows: dw and db over 5 groups of rows (common.cuh's two passes),
     * groups that start inside a segment */
    static const int long_lens[4] = {150, 90, 300, 61};
    for (int causal = 0; causal < 2; causal++)
        dwconv_case(t, &g, long_lens, 4, causal ? 3 : 9, causal, 1, causal, &w);
    gc_note("cuda_dwconv", "out vs tests/ref", w.fwd_ref);
    gc_note("cuda_dwconv", "dw, db vs cpu", w.dw_cpu);
    cuda_close(&g);
}

/* ------------------------------------------------------------------------ */
/* attn_silu                                                                 */

typedef struct {
    double out_cpu, out_ref, grad_cpu;
} sl_worst;

static void silu_case(unit_ctx *t, cuda_env *g, const int *len, int B, int H, int dqk, int dv,
                      sl_worst *wst)
{
    int off[16], maxl = 0;
    int T = sq_pack_offsets(off, len, B);
    for (int b = 0; b < B; b++)
        maxl = len[b] > maxl ? len[b] : maxl;
    int max_len = maxl + 2, ld = H * (2 * dqk + dv) + 3, qo = 0, ko = H * dqk, vo = 2 * H * dqk;
    size_t nx = (size_t)T * ld, no = (size_t)T * H * dv, nr = (size_t)H * max_len;
    size_t ns = sq_attn_silu_scratch_size(B, H, max_len);
    float scale = 1.0f / (float)max_len;
    sq_rng r;
    sq_rng_seed(&r, (uint64_t)(T * 17 + H * 5 + dqk), (uint64_t)dv);
    float *x = cuda_randn(nx, 0.7, &r), *rab = cuda_randn(nr, 0.5, &r);
    float *dout = cuda_randn(no, 1, &r);
    float *gx0 = cuda_randn(nx, 0.1, &r), *gr0 = cuda_randn(nr, 0.1, &r);
    /* the CPU */
    sq_ctx c = sq_ctx_cpu();
    float *out = malloc(no * sizeof *out), *gx = cuda_host_dup(gx0, nx);
    float *gr = cuda_host_dup(gr0, nr);
    float *scr = malloc(ns * sizeof *scr);
    sq_attn_silu_forward(&c, out, x + qo, x + ko, x + vo, ld, rab, off, B, H, dqk, dv, max_len,
                         scale);
    sq_attn_silu_backward(&c, gx + qo, gx + ko, gx + vo, gr, scr, dout, x + qo, x + ko, x + vo,
                          ld, rab, off, B, H, dqk, dv, max_len, scale);
    /* the GPU, twice */
    CHECK_EQ(cuda_stage_off(g, off, B), 0);
    float *dx = cuda_up(g, x, nx), *drab = cuda_up(g, rab, nr), *dd = cuda_up(g, dout, no);
    float *ds = cuda_zeros(g, ns);
    float *hout = malloc(no * sizeof *hout), *hgx = malloc(nx * sizeof *hgx);
    float *hgr = malloc(nr * sizeof *hgr), *pgx = malloc(nx * sizeof *pgx);
    float *pout = malloc(no * sizeof *pout), *pgr = malloc(nr * sizeof *pgr);
    char what[96];
    snprintf(what, sizeof what, "attn_silu H %d dqk %d dv %d", H, dqk, dv);
    for (int rep = 0; rep < 2; rep++) {
        float *dy = cuda_zeros(g, no), *dgx = cuda_up(g, gx0, nx), *dgr = cuda_up(g, gr0, nr);
        sq_attn_silu_forward(&g->cx, dy, dx + qo, dx + ko, dx + vo, ld, drab, off, B, H, dqk, dv,
                             max_len, scale);
        sq_attn_silu_backward(&g->cx, dgx + qo, dgx + ko, dgx + vo, dgr, ds, dd, dx + qo,
                              dx + ko, dx + vo, ld, drab, off, B, H, dqk, dv, max_len, scale);
        CHECK(cuda_down(g, hout, dy, no) == 0 && cuda_down(g, hgx, dgx, nx) == 0 &&
              cuda_down(g, hgr, dgr, nr) == 0);
        CHECK(cuda_close_to(hout, out, no, SL_ATOL, SL_RTOL, what));
        CHECK(cuda_close_to(hgx, gx, nx, SL_ATOL, SL_RTOL, what)); /* dq|dk|dv, padding */
        CHECK(cuda_close_to(hgr, gr, nr, SL_ATOL, SL_RTOL, what)); /* drab */
        cuda_keep_max(&wst->out_cpu, cuda_max_diff(hout, out, NULL, no));
        cuda_keep_max(&wst->grad_cpu, cuda_max_diff(hgx, gx, NULL, nx));
        cuda_keep_max(&wst->grad_cpu, cuda_max_diff(hgr, gr, NULL, nr));
        if (rep) {
            CHECK(memcmp(pout, hout, no * sizeof *hout) == 0);
            CHECK(memcmp(pgx, hgx, nx * sizeof *hgx) == 0);
            CHECK(memcmp(pgr, hgr, nr * sizeof *hgr) == 0);
        }
        memcpy(pout, hout, no * sizeof *hout);
        memcpy(pgx, hgx, nx * sizeof *hgx);
        memcpy(pgr, hgr, nr * sizeof *hgr);
    }
    /* the distances no segment reaches get nothing, the padding columns
     * neither */
    for (int h = 0; h < H; h++)
        for (int d = maxl; d < max_len; d++)
            CHECK(hgr[h * max_len + d] == gr0[h * max_len + d]);
    for (int row = 0; row < T; row++)
        for (int j = H * (2 * dqk + dv); j < ld; j++)
            CHECK(hgx[(size_t)row * ld + j] == gx0[(size_t)row * ld + j]);
    /* dq and drab NULL: dk and dv as in the full run, dq's columns alone */
    float *dgx = cuda_up(g, gx0, nx);
    sq_attn_silu_backward(&g->cx, NULL, dgx + ko, dgx + vo, NULL, NULL, dd, dx + qo, dx + ko,
                          dx + vo, ld, drab, off, B, H, dqk, dv, max_len, scale);
    CHECK(cuda_down(g, hgx, dgx, nx) == 0);
    for (int row = 0; row < T; row++) {
        size_t at = (size_t)row * ld;
        CHECK(memcmp(hgx + at, gx0 + at, (size_t)ko * sizeof *hgx) == 0);
        CHECK(memcmp(hgx + at + ko, pgx + at + ko, (size_t)(ld - ko) * sizeof *hgx) == 0);
    }
    /* the GPU's forward against the definition */
    double *xd = cuda_to_double(x, nx), *rd = cuda_to_double(rab, nr);
    double *ref = malloc(no * sizeof *ref);
    CHECK(xd && rd && ref);
    if (xd && rd && ref) {
        ref_attn_silu(ref, xd + qo, xd + ko, xd + vo, ld, rd, off, B, H, dqk, dv, max_len,
                      (double)scale);
        snprintf(what, sizeof what, "attn_silu H %d dqk %d dv %d vs tests/ref", H, dqk, dv);
        CHECK(cuda_close_to_ref(pout, ref, no, SL_ATOL, SL_RTOL, what));
        cuda_keep_max(&wst->out_ref, cuda_max_diff(pout, NULL, ref, no));
    }
    free(xd); free(rd); free(ref);
    free(x); free(rab); free(dout); free(gx0); free(gr0); free(out); free(gx); free(gr);
    free(scr); free(hout); free(hgx); free(hgr); free(pgx); free(pout); free(pgr);
}

UNIT_TEST(cuda_attn_silu)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    /* k_silu.cu's tiles: 8 rows of a segment a block, the other side 32
     * rows at a time from the segment's start: segments of 1 to 12 (one
     * key tile), 40 and 70 (two and three, the last partial) */
    static const int lens[][4] = {{1, 7, 12, 5}, {3, 1, 6, 2}, {40, 1, 70, 9}};
    static const int heads[][3] = {{2, 8, 6}, {1, 40, 33}, {1, 128, 128}};
    sl_worst w = {0, 0, 0};
    for (int s = 0; s < 3; s++)
        for (int h = 0; h < 3; h++)
            silu_case(t, &g, lens[s], 4, heads[h][0], heads[h][1], heads[h][2], &w);
    gc_note("cuda_attn_silu", "out vs cpu", w.out_cpu);
    gc_note("cuda_attn_silu", "out vs tests/ref", w.out_ref);
    gc_note("cuda_attn_silu", "dq, dk, dv, drab vs cpu", w.grad_cpu);
    cuda_close(&g);
}
