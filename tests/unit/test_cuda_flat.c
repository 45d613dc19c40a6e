/* The CUDA ops of the flat models without attention: Caser's convolutions
 * (cuda/k_conv.cu) and GRU4Rec's GRU layer (cuda/k_gru.cu), against their
 * CPU twins (conv.c, gru.c) through the CPU API on a CUDA context
 * (cuda_check.h), and their forwards against the definitions (tests/ref,
 * in double, from the same float inputs); skipped without a backend.
 * Gradient buffers start non-zero (the backwards ADD); every op runs
 * twice: the same bits.
 *
 * conv: windows L in {1, 3, 5}, C = 20, F in {1, 3} horizontal and vertical
 * filters, n = 7 windows, outputs at a row stride wider than the filters
 * (Caser's concatenated features), with and without the vertical bias.
 * Every kernel adds in conv.c's order (real.h's 8-lane dot, then the
 * windows in order; --fmad=false), so the GPU gives the CPU's bits:
 * tolerance 0 for the outputs, the recorded maxima and every gradient.
 * Against tests/ref: 1e-5 absolute + 1e-5 relative (float sums of up to
 * 100 products of O(1) against double; measured 1e-6), and the maxima's
 * positions equal.
 *
 * gru: H in {5, 24}, In in {3, 24}, with and without biases, sequences of
 * 1 to 9 rows (so sequences end at different steps), dx NULL once. The
 * gates use CUDA's expf/tanhf and the GEMMs cuBLAS's order: 1e-5 absolute
 * + 1e-4 relative against the CPU (measured: 1e-6 on h, 4e-6 on the
 * gradients) and against tests/ref. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "conv.h"
#include "cuda_check.h"
#include "gradcheck.h"
#include "gru.h"
#include "ops.h"
#include "ref_ops.h"
#include "rng.h"

#define CV_C 20
#define CV_N 7
#define REF_ATOL 1e-5 /* forwards against tests/ref */
#define REF_RTOL 1e-5
#define GRU_ATOL 1e-5 /* gru against the CPU and tests/ref */
#define GRU_RTOL 1e-4

/* The GPU's run of the four conv ops twice (outputs and gradients into
 * hout..hgb), each checked against the CPU's (cpu[...]) bit for bit. */
typedef struct {
    float *out, *gx, *gwh, *gbh, *gwv, *gbv;
    int *arg;
} cv_run;

static void conv_case(unit_ctx *t, cuda_env *g, int L, int F, int vbias, double *worst)
{
    int n = CV_N, C = CV_C, ldo = F * C + L * F + 3; /* vertical, horizontal, 3 spare */
    size_t nx = (size_t)n * L * C, no = (size_t)n * ldo, nwh = sq_hconv_size(L, F, C);
    size_t nbh = (size_t)L * F, nwv = (size_t)F * L, na = (size_t)n * L * F;
    sq_rng r;
    sq_rng_seed(&r, (uint64_t)(L * 13 + F), (uint64_t)vbias);
    float *x = cuda_randn(nx, 1, &r), *wh = cuda_randn(nwh, 0.3, &r);
    float *bh = cuda_randn(nbh, 0.3, &r), *wv = cuda_randn(nwv, 0.5, &r);
    float *bv = cuda_randn(F, 0.5, &r), *dout = cuda_randn(no, 1, &r);
    float *out0 = cuda_randn(no, 0.1, &r), *gx0 = cuda_randn(nx, 0.1, &r);
    float *gwh0 = cuda_randn(nwh, 0.1, &r), *gbh0 = cuda_randn(nbh, 0.1, &r);
    float *gwv0 = cuda_randn(nwv, 0.1, &r), *gbv0 = cuda_randn(F, 0.1, &r);
    const float *vb = vbias ? bv : NULL;
    /* the CPU */
    sq_ctx c = sq_ctx_cpu();
    cv_run cpu = {cuda_host_dup(out0, no), cuda_host_dup(gx0, nx), cuda_host_dup(gwh0, nwh),
                  cuda_host_dup(gbh0, nbh), cuda_host_dup(gwv0, nwv), cuda_host_dup(gbv0, F),
                  malloc(na * sizeof(int))};
    sq_vconv_forward(&c, cpu.out, ldo, x, wv, vb, n, L, C, F);
    sq_hconv_forward(&c, cpu.out + F * C, ldo, cpu.arg, x, wh, bh, n, L, C, F);
    sq_vconv_backward(&c, cpu.gx, cpu.gwv, vbias ? cpu.gbv : NULL, dout, ldo, x, wv, n, L, C, F);
    sq_hconv_backward(&c, cpu.gx, cpu.gwh, cpu.gbh, dout + F * C, ldo, cpu.arg, x, wh, n, L, C,
                      F);
    /* the GPU, twice */
    float *dx = cuda_up(g, x, nx), *dwh = cuda_up(g, wh, nwh), *dbh = cuda_up(g, bh, nbh);
    float *dwv = cuda_up(g, wv, nwv), *dbv = cuda_up(g, bv, F), *dd = cuda_up(g, dout, no);
    int *darg = cuda_alloc(g, na * sizeof(int));
    cv_run gpu = {malloc(no * sizeof(float)), malloc(nx * sizeof(float)),
                  malloc(nwh * sizeof(float)), malloc(nbh * sizeof(float)),
                  malloc(nwv * sizeof(float)), malloc(F * sizeof(float)), malloc(na * sizeof(int))};
    char what[96];
    snprintf(what, sizeof what, "conv L %d F %d vbias %d", L, F, vbias);
    for (int rep = 0; rep < 2; rep++) {
        float *dy = cuda_up(g, out0, no), *dgx = cuda_up(g, gx0, nx);
        float *dgwh = cuda_up(g, gwh0, nwh), *dgbh = cuda_up(g, gbh0, nbh);
        float *dgwv = cuda_up(g, gwv0, nwv), *dgbv = cuda_up(g, gbv0, F);
        sq_vconv_forward(&g->cx, dy, ldo, dx, dwv, vbias ? dbv : NULL, n, L, C, F);
        sq_hconv_forward(&g->cx, dy + F * C, ldo, darg, dx, dwh, dbh, n, L, C, F);
        sq_vconv_backward(&g->cx, dgx, dgwv, vbias ? dgbv : NULL, dd, ldo, dx, dwv, n, L, C, F);
        sq_hconv_backward(&g->cx, dgx, dgwh, dgbh, dd + F * C, ldo, darg, dx, dwh, n, L, C, F);
        CHECK(cuda_down(g, gpu.out, dy, no) == 0 && cuda_down(g, gpu.gx, dgx, nx) == 0 &&
              cuda_down(g, gpu.gwh, dgwh, nwh) == 0 && cuda_down(g, gpu.gbh, dgbh, nbh) == 0 &&
              cuda_down(g, gpu.gwv, dgwv, nwv) == 0 && cuda_down(g, gpu.gbv, dgbv, F) == 0 &&
              cuda_down_bytes(g, gpu.arg, darg, na * sizeof(int)) == 0);
        CHECK(cuda_same_bits(gpu.out, cpu.out, no, what)); /* both features, spare columns */
        CHECK(memcmp(gpu.arg, cpu.arg, na * sizeof(int)) == 0);
        CHECK(cuda_same_bits(gpu.gx, cpu.gx, nx, what));
        CHECK(cuda_same_bits(gpu.gwh, cpu.gwh, nwh, what));
        CHECK(cuda_same_bits(gpu.gbh, cpu.gbh, nbh, what));
        CHECK(cuda_same_bits(gpu.gwv, cpu.gwv, nwv, what));
        CHECK(cuda_same_bits(gpu.gbv, cpu.gbv, F, what)); /* untouched without the bias */
    }
    /* the forwards against the definitions (ref_hconv/vconv overwrite their
     * columns) */
    double *xd = cuda_to_double(x, nx), *whd = cuda_to_double(wh, nwh);
    double *bhd = cuda_to_double(bh, nbh), *wvd = cuda_to_double(wv, nwv);
    double *bvd = cuda_to_double(bv, F), *ref = cuda_to_double(out0, no);
    int *rarg = malloc(na * sizeof(int));
    CHECK(xd && whd && bhd && wvd && bvd && ref && rarg);
    if (xd && whd && bhd && wvd && bvd && ref && rarg) {
        ref_vconv(ref, ldo, xd, wvd, vbias ? bvd : NULL, n, L, C, F);
        ref_hconv(ref + F * C, ldo, rarg, xd, whd, bhd, n, L, C, F);
        snprintf(what, sizeof what, "conv L %d F %d vs tests/ref", L, F);
        CHECK(cuda_close_to_ref(gpu.out, ref, no, REF_ATOL, REF_RTOL, what));
        CHECK(memcmp(gpu.arg, rarg, na * sizeof(int)) == 0);
        cuda_keep_max(worst, cuda_max_diff(gpu.out, NULL, ref, no));
    }
    free(xd); free(whd); free(bhd); free(wvd); free(bvd); free(ref); free(rarg);
    cv_run *runs[2] = {&cpu, &gpu};
    for (int i = 0; i < 2; i++) {
        free(runs[i]->out); free(runs[i]->gx); free(runs[i]->gwh); free(runs[i]->gbh);
        free(runs[i]->gwv); free(runs[i]->gbv); free(runs[i]->arg);
    }
    free(x); free(wh); free(bh); free(wv); free(bv); free(dout); free(out0); free(gx0);
    free(gwh0); free(gbh0); free(gwv0); free(gbv0);
}

UNIT_TEST(cuda_conv)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    static const int ls[] = {1, 3, 5}, fs[] = {1, 3};
    double worst = 0;
    for (int l = 0; l < 3; l++)
        for (int f = 0; f < 2; f++)
            conv_case(t, &g, ls[l], fs[f], (l + f) % 2, &worst);
    gc_note("cuda_conv", "out vs tests/ref", worst);
    cuda_close(&g);
}

/* ------------------------------------------------------------------------ */
/* gru                                                                       */

typedef struct {
    double h_cpu, h_ref, grad_cpu;
} gru_worst;

static void gru_case(unit_ctx *t, cuda_env *g, const int *len, int B, int In, int H, int bias,
                     int want_dx, gru_worst *wst)
{
    int off[16];
    int T = sq_pack_offsets(off, len, B), G = 3 * H;
    size_t nx = (size_t)T * In, nh = (size_t)T * H, nwi = (size_t)G * In, nwh = (size_t)G * H;
    size_t nc = sq_gru_cache_size(T, H), ns = sq_gru_scratch_size(B, T, H);
    sq_rng r;
    sq_rng_seed(&r, (uint64_t)(T * 7 + In * 3 + H), (uint64_t)bias);
    float *x = cuda_randn(nx, 1, &r), *wi = cuda_randn(nwi, 0.4, &r);
    float *wh = cuda_randn(nwh, 0.4, &r), *bi = cuda_randn(G, 0.3, &r);
    float *bh = cuda_randn(G, 0.3, &r), *dh = cuda_randn(nh, 1, &r);
    float *gx0 = cuda_randn(nx, 0.1, &r), *gwi0 = cuda_randn(nwi, 0.1, &r);
    float *gwh0 = cuda_randn(nwh, 0.1, &r), *gbi0 = cuda_randn(G, 0.1, &r);
    float *gbh0 = cuda_randn(G, 0.1, &r);
    const float *pbi = bias ? bi : NULL, *pbh = bias ? bh : NULL;
    /* the CPU */
    sq_ctx c = sq_ctx_cpu();
    float *h = malloc(nh * sizeof *h), *cache = malloc(nc * sizeof *cache);
    float *scr = malloc(ns * sizeof *scr);
    float *bufs[5] = {cuda_host_dup(gx0, nx), cuda_host_dup(gwi0, nwi), cuda_host_dup(gwh0, nwh),
                      cuda_host_dup(gbi0, G), cuda_host_dup(gbh0, G)};
    size_t sizes[5] = {nx, nwi, nwh, (size_t)G, (size_t)G};
    sq_gru_forward(&c, h, cache, scr, x, wi, wh, pbi, pbh, off, B, In, H);
    sq_gru_backward(&c, want_dx ? bufs[0] : NULL, bufs[1], bufs[2], bias ? bufs[3] : NULL,
                    bias ? bufs[4] : NULL, scr, dh, x, h, cache, wi, wh, off, B, In, H);
    /* the GPU, twice */
    CHECK_EQ(cuda_stage_off(g, off, B), 0);
    float *dx = cuda_up(g, x, nx), *dwi = cuda_up(g, wi, nwi), *dwh = cuda_up(g, wh, nwh);
    float *dbi = cuda_up(g, bi, G), *dbh = cuda_up(g, bh, G), *ddh = cuda_up(g, dh, nh);
    float *dcache = cuda_zeros(g, nc), *dscr = cuda_zeros(g, ns);
    float *hh = malloc(nh * sizeof *hh), *got[5], *prev[6];
    for (int i = 0; i < 5; i++)
        got[i] = malloc(sizes[i] * sizeof(float)), prev[i] = malloc(sizes[i] * sizeof(float));
    prev[5] = malloc(nh * sizeof(float));
    char what[96];
    snprintf(what, sizeof what, "gru In %d H %d bias %d dx %d", In, H, bias, want_dx);
    for (int rep = 0; rep < 2; rep++) {
        float *dhh = cuda_zeros(g, nh), *dg[5];
        for (int i = 0; i < 5; i++)
            dg[i] = cuda_up(g, i == 0 ? gx0 : i == 1 ? gwi0 : i == 2 ? gwh0 : i == 3 ? gbi0 : gbh0,
                            sizes[i]);
        sq_gru_forward(&g->cx, dhh, dcache, dscr, dx, dwi, dwh, bias ? dbi : NULL,
                       bias ? dbh : NULL, off, B, In, H);
        sq_gru_backward(&g->cx, want_dx ? dg[0] : NULL, dg[1], dg[2], bias ? dg[3] : NULL,
                        bias ? dg[4] : NULL, dscr, ddh, dx, dhh, dcache, dwi, dwh, off, B, In, H);
        CHECK(cuda_down(g, hh, dhh, nh) == 0);
        CHECK(cuda_close_to(hh, h, nh, GRU_ATOL, GRU_RTOL, what));
        cuda_keep_max(&wst->h_cpu, cuda_max_diff(hh, h, NULL, nh));
        for (int i = 0; i < 5; i++) {
            CHECK(cuda_down(g, got[i], dg[i], sizes[i]) == 0);
            CHECK(cuda_close_to(got[i], bufs[i], sizes[i], GRU_ATOL, GRU_RTOL, what));
            cuda_keep_max(&wst->grad_cpu, cuda_max_diff(got[i], bufs[i], NULL, sizes[i]));
            if (rep)
                CHECK(memcmp(prev[i], got[i], sizes[i] * sizeof(float)) == 0);
            memcpy(prev[i], got[i], sizes[i] * sizeof(float));
        }
        if (rep)
            CHECK(memcmp(prev[5], hh, nh * sizeof(float)) == 0);
        memcpy(prev[5], hh, nh * sizeof(float));
    }
    if (!want_dx)
        CHECK(cuda_same_bits(got[0], gx0, nx, "gru: dx NULL left alone"));
    if (!bias)
        CHECK(cuda_same_bits(got[3], gbi0, G, "gru: db NULL left alone"));
    /* the GPU's states against the definition */
    double *xd = cuda_to_double(x, nx), *wid = cuda_to_double(wi, nwi);
    double *whd = cuda_to_double(wh, nwh), *bid = cuda_to_double(bi, G);
    double *bhd = cuda_to_double(bh, G), *ref = malloc(nh * sizeof *ref);
    CHECK(xd && wid && whd && bid && bhd && ref);
    if (xd && wid && whd && bid && bhd && ref) {
        ref_gru(ref, xd, wid, whd, bias ? bid : NULL, bias ? bhd : NULL, off, B, In, H);
        snprintf(what, sizeof what, "gru In %d H %d vs tests/ref", In, H);
        CHECK(cuda_close_to_ref(hh, ref, nh, GRU_ATOL, GRU_RTOL, what));
        cuda_keep_max(&wst->h_ref, cuda_max_diff(hh, NULL, ref, nh));
    }
    free(xd); free(wid); free(whd); free(bid); free(bhd); free(ref);
    for (int i = 0; i < 5; i++)
        free(bufs[i]), free(got[i]), free(prev[i]);
    free(prev[5]);
    free(x); free(wi); free(wh); free(bi); free(bh); free(dh); free(gx0); free(gwi0);
    free(gwh0); free(gbi0); free(gbh0); free(h); free(cache); free(scr); free(hh);
}

UNIT_TEST(cuda_gru)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    static const int lens[][5] = {{1, 9, 4, 6, 2}, {3, 3, 8, 1, 5}};
    static const int dims[][2] = {{3, 5}, {24, 24}};
    gru_worst w = {0, 0, 0};
    for (int s = 0; s < 2; s++)
        for (int d = 0; d < 2; d++)
            gru_case(t, &g, lens[s], 5, dims[d][0], dims[d][1], (s + d) % 2, s == 0 || d == 0,
                     &w);
    gc_note("cuda_gru", "h vs cpu", w.h_cpu);
    gc_note("cuda_gru", "h vs tests/ref", w.h_ref);
    gc_note("cuda_gru", "gradients vs cpu", w.grad_cpu);
    cuda_close(&g);
}
