/* ELASTIC's CUDA ops (cuda/k_elastic.cu): the segment means, the cross
 * attention and the product-key retrieval against their CPU twins (ops.c,
 * attn_cross.c, pkm.c) through the CPU API on a CUDA context
 * (cuda_check.h), and their forwards against the definitions (tests/ref,
 * in double, from the same float inputs); skipped without a backend.
 * Gradient buffers start non-zero (the backwards ADD); every op runs
 * twice: the same bits.
 *
 * segmean: segments of 0 to 6 rows, C = 20: the CPU's sums in its order,
 * its bits (tolerance 0).
 * cross attention: query segments of 0 to 4 rows (ELASTIC's k tokens)
 * against key segments of 0 to 9 rows (a segment without keys: zero rows),
 * H = 2 heads of 8, q and the fused k|v at wider strides. Every dot
 * product is real.h's 8-lane sum (be_dot8) in the CPU's order; the softmax
 * uses CUDA's expf: 1e-6 absolute + 1e-5 relative against the CPU
 * (measured 1e-7) on out, att and every gradient; tests/ref (long double)
 * 1e-5 / 1e-4.
 * pkm: B = 70 queries (more than the 64 work groups: a thread takes two),
 * n = 9 sub-keys a half, d = 16, k = 4, weighted and not. The same float
 * scores in the same order: the CPU's experts exactly, its out and dE,
 * dC1, dC2, dq to 1e-6 + 1e-5 (the weights' expf); the experts against
 * the brute-force reference too. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attn_cross.h"
#include "cuda_check.h"
#include "gradcheck.h"
#include "ops.h"
#include "pkm.h"
#include "ref_ops.h"
#include "rng.h"

#define EL_ATOL 1e-6
#define EL_RTOL 1e-5

UNIT_TEST(cuda_segmean)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    static const int len[5] = {3, 0, 6, 1, 4};
    int off[6], B = 5, C = 20;
    int T = sq_pack_offsets(off, len, B);
    sq_rng r;
    sq_rng_seed(&r, 5, 1);
    float *x = cuda_randn((size_t)T * C, 1, &r), *dout = cuda_randn((size_t)B * C, 1, &r);
    float *gx0 = cuda_randn((size_t)T * C, 0.1, &r);
    sq_ctx c = sq_ctx_cpu();
    float *out = malloc((size_t)B * C * sizeof *out), *gx = cuda_host_dup(gx0, (size_t)T * C);
    sq_segmean_forward(&c, out, x, off, B, C);
    sq_segmean_backward(&c, gx, dout, off, B, C);
    CHECK_EQ(cuda_stage_off(&g, off, B), 0);
    float *dx = cuda_up(&g, x, (size_t)T * C), *dd = cuda_up(&g, dout, (size_t)B * C);
    float *ho = malloc((size_t)B * C * sizeof *ho), *hg = malloc((size_t)T * C * sizeof *hg);
    for (int rep = 0; rep < 2; rep++) {
        float *go = cuda_zeros(&g, (size_t)B * C), *gg = cuda_up(&g, gx0, (size_t)T * C);
        sq_segmean_forward(&g.cx, go, dx, off, B, C);
        sq_segmean_backward(&g.cx, gg, dd, off, B, C);
        CHECK(cuda_down(&g, ho, go, (size_t)B * C) == 0 && cuda_down(&g, hg, gg, (size_t)T * C) == 0);
        CHECK(cuda_same_bits(ho, out, (size_t)B * C, "segmean out"));
        CHECK(cuda_same_bits(hg, gx, (size_t)T * C, "segmean dinp"));
    }
    double *xd = cuda_to_double(x, (size_t)T * C), *ref = malloc((size_t)B * C * sizeof *ref);
    CHECK(xd && ref);
    if (xd && ref) {
        ref_segmean(ref, xd, off, B, C);
        CHECK(cuda_close_to_ref(ho, ref, (size_t)B * C, 1e-6, 1e-6, "segmean vs tests/ref"));
    }
    free(xd); free(ref); free(x); free(dout); free(gx0); free(out); free(gx); free(ho); free(hg);
    cuda_close(&g);
}

UNIT_TEST(cuda_cross_attention)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    enum { B = 4, H = 2, C = 16, LDQ = 19, LDK = 2 * C + 3 };
    static const int lq[B] = {4, 0, 2, 3}, lk[B] = {9, 5, 0, 6};
    int offq[B + 1], offk[B + 1];
    int Tq = sq_pack_offsets(offq, lq, B), Tk = sq_pack_offsets(offk, lk, B);
    size_t nq = (size_t)Tq * LDQ, nk = (size_t)Tk * LDK, no = (size_t)Tq * C;
    size_t na = sq_cross_attention_cache_size(offq, offk, B, H);
    sq_rng r;
    sq_rng_seed(&r, 7, 2);
    float *q = cuda_randn(nq, 1, &r), *kv = cuda_randn(nk, 1, &r), *dout = cuda_randn(no, 1, &r);
    float *gq0 = cuda_randn(nq, 0.1, &r), *gkv0 = cuda_randn(nk, 0.1, &r);
    sq_ctx c = sq_ctx_cpu();
    float *out = malloc(no * sizeof *out), *att = malloc(na * sizeof *att);
    float *gq = cuda_host_dup(gq0, nq), *gkv = cuda_host_dup(gkv0, nk);
    sq_cross_attention_forward(&c, out, att, q, LDQ, offq, kv, kv + C, LDK, offk, B, H, C);
    sq_cross_attention_backward(&c, gq, gkv, gkv + C, dout, out, q, LDQ, offq, kv, kv + C, LDK,
                                offk, att, B, H, C);
    const void *host[2] = {offq, offk};
    size_t bytes[2] = {sizeof offq, sizeof offk};
    CHECK_EQ(sq_gpu_stage(g.gpu, host, bytes, 2, &g.e), 0);
    float *dq = cuda_up(&g, q, nq), *dkv = cuda_up(&g, kv, nk), *dd = cuda_up(&g, dout, no);
    float *ho = malloc(no * sizeof *ho), *ha = malloc(na * sizeof *ha);
    float *hgq = malloc(nq * sizeof *hgq), *hgkv = malloc(nk * sizeof *hgkv);
    float *pgq = malloc(nq * sizeof *pgq), *pgkv = malloc(nk * sizeof *pgkv);
    for (int rep = 0; rep < 2; rep++) {
        float *go = cuda_zeros(&g, no), *ga = cuda_zeros(&g, na);
        float *ggq = cuda_up(&g, gq0, nq), *ggkv = cuda_up(&g, gkv0, nk);
        sq_cross_attention_forward(&g.cx, go, ga, dq, LDQ, offq, dkv, dkv + C, LDK, offk, B, H,
                                   C);
        sq_cross_attention_backward(&g.cx, ggq, ggkv, ggkv + C, dd, go, dq, LDQ, offq, dkv,
                                    dkv + C, LDK, offk, ga, B, H, C);
        CHECK(cuda_down(&g, ho, go, no) == 0 && cuda_down(&g, ha, ga, na) == 0 &&
              cuda_down(&g, hgq, ggq, nq) == 0 && cuda_down(&g, hgkv, ggkv, nk) == 0);
        CHECK(cuda_close_to(ho, out, no, EL_ATOL, EL_RTOL, "cross attention out"));
        CHECK(cuda_close_to(ha, att, na, EL_ATOL, EL_RTOL, "cross attention att"));
        CHECK(cuda_close_to(hgq, gq, nq, EL_ATOL, EL_RTOL, "cross attention dq"));
        CHECK(cuda_close_to(hgkv, gkv, nk, EL_ATOL, EL_RTOL, "cross attention dk|dv"));
        if (rep)
            CHECK(memcmp(pgq, hgq, nq * sizeof *hgq) == 0 &&
                  memcmp(pgkv, hgkv, nk * sizeof *hgkv) == 0);
        memcpy(pgq, hgq, nq * sizeof *hgq);
        memcpy(pgkv, hgkv, nk * sizeof *hgkv);
    }
    double *qd = cuda_to_double(q, nq), *kd = cuda_to_double(kv, nk);
    double *ref = malloc(no * sizeof *ref), *ra = malloc(na * sizeof *ra);
    CHECK(qd && kd && ref && ra);
    if (qd && kd && ref && ra) {
        ref_attn_cross(ref, ra, qd, LDQ, offq, kd, kd + C, LDK, offk, B, H, C);
        CHECK(cuda_close_to_ref(ho, ref, no, 1e-5, 1e-4, "cross attention vs tests/ref"));
        CHECK(cuda_close_to_ref(ha, ra, na, 1e-5, 1e-4, "cross attention att vs tests/ref"));
    }
    free(qd); free(kd); free(ref); free(ra);
    free(q); free(kv); free(dout); free(gq0); free(gkv0); free(out); free(att); free(gq);
    free(gkv); free(ho); free(ha); free(hgq); free(hgkv); free(pgq); free(pgkv);
    cuda_close(&g);
}

static void pkm_case(unit_ctx *t, cuda_env *g, int weighted)
{
    enum { B = 70, N = 9, D = 16, K = 4 };
    size_t nq = (size_t)B * D, nc = (size_t)N * (D / 2), ne = (size_t)N * N * D;
    size_t no = (size_t)B * K * D, ncache = sq_pkm_cache_size(B, K);
    size_t ns = sq_pkm_scratch_size(B, N, K), ni = (size_t)B * K;
    sq_rng r;
    sq_rng_seed(&r, 11, (uint64_t)weighted);
    float *q = cuda_randn(nq, 1, &r), *C1 = cuda_randn(nc, 1, &r), *C2 = cuda_randn(nc, 1, &r);
    float *E = cuda_randn(ne, 1, &r), *dout = cuda_randn(no, 1, &r);
    float *g0[4] = {cuda_randn(nq, 0.1, &r), cuda_randn(nc, 0.1, &r), cuda_randn(nc, 0.1, &r),
                    cuda_randn(ne, 0.1, &r)};
    size_t sz[4] = {nq, nc, nc, ne};
    sq_ctx c = sq_ctx_cpu();
    float *out = malloc(no * sizeof *out), *cache = malloc(ncache * sizeof *cache);
    float *scr = malloc(ns * sizeof *scr), *cg[4];
    int *idx = malloc(ni * sizeof *idx);
    for (int i = 0; i < 4; i++)
        cg[i] = cuda_host_dup(g0[i], sz[i]);
    sq_pkm_forward(&c, out, idx, cache, scr, q, C1, C2, E, B, N, D, K, weighted);
    sq_pkm_backward(&c, cg[0], cg[1], cg[2], cg[3], scr, dout, q, C1, C2, E, idx, cache, B, N,
                    D, K, weighted);
    float *dq = cuda_up(g, q, nq), *dC1 = cuda_up(g, C1, nc), *dC2 = cuda_up(g, C2, nc);
    float *dE = cuda_up(g, E, ne), *dd = cuda_up(g, dout, no);
    float *dcache = cuda_zeros(g, ncache), *dscr = cuda_zeros(g, ns);
    int *didx = cuda_alloc(g, ni * sizeof *didx), *hidx = malloc(ni * sizeof *hidx);
    float *ho = malloc(no * sizeof *ho), *hg[4], *pg[4];
    for (int i = 0; i < 4; i++)
        hg[i] = malloc(sz[i] * sizeof(float)), pg[i] = malloc(sz[i] * sizeof(float));
    char what[48];
    snprintf(what, sizeof what, "pkm weighted %d", weighted);
    for (int rep = 0; rep < 2; rep++) {
        float *go = cuda_zeros(g, no), *gg[4];
        for (int i = 0; i < 4; i++)
            gg[i] = cuda_up(g, g0[i], sz[i]);
        sq_pkm_forward(&g->cx, go, didx, dcache, dscr, dq, dC1, dC2, dE, B, N, D, K, weighted);
        sq_pkm_backward(&g->cx, gg[0], gg[1], gg[2], gg[3], dscr, dd, dq, dC1, dC2, dE, didx,
                        dcache, B, N, D, K, weighted);
        CHECK(cuda_down(g, ho, go, no) == 0 &&
              cuda_down_bytes(g, hidx, didx, ni * sizeof *hidx) == 0);
        CHECK(memcmp(hidx, idx, ni * sizeof *idx) == 0); /* the CPU's experts */
        CHECK(cuda_close_to(ho, out, no, EL_ATOL, EL_RTOL, what));
        for (int i = 0; i < 4; i++) {
            CHECK(cuda_down(g, hg[i], gg[i], sz[i]) == 0);
            CHECK(cuda_close_to(hg[i], cg[i], sz[i], EL_ATOL, EL_RTOL, what));
            if (rep)
                CHECK(memcmp(pg[i], hg[i], sz[i] * sizeof(float)) == 0);
            memcpy(pg[i], hg[i], sz[i] * sizeof(float));
        }
    }
    if (!weighted) /* q, C1, C2 get no gradient */
        for (int i = 0; i < 3; i++)
            CHECK(cuda_same_bits(hg[i], g0[i], sz[i], "pkm unweighted: no dq, dC1, dC2"));
    double *qd = cuda_to_double(q, nq), *c1 = cuda_to_double(C1, nc), *c2 = cuda_to_double(C2, nc);
    double *ed = cuda_to_double(E, ne), *ref = malloc(no * sizeof *ref);
    int *ridx = malloc(ni * sizeof *ridx);
    CHECK(qd && c1 && c2 && ed && ref && ridx);
    if (qd && c1 && c2 && ed && ref && ridx) {
        ref_pkm(ref, ridx, qd, c1, c2, ed, B, N, D, K, weighted);
        CHECK(memcmp(ridx, hidx, ni * sizeof *ridx) == 0);
        CHECK(cuda_close_to_ref(ho, ref, no, 1e-5, 1e-4, "pkm out vs tests/ref"));
    }
    free(qd); free(c1); free(c2); free(ed); free(ref); free(ridx);
    for (int i = 0; i < 4; i++)
        free(g0[i]), free(cg[i]), free(hg[i]), free(pg[i]);
    free(q); free(C1); free(C2); free(E); free(dout); free(out); free(cache); free(scr);
    free(idx); free(hidx); free(ho);
}

UNIT_TEST(cuda_pkm)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    pkm_case(t, &g, 1);
    pkm_case(t, &g, 0);
    cuda_close(&g);
}
