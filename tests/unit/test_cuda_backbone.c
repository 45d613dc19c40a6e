/* The CUDA ops of the models on the SASRec backbone: CORE's L2
 * normalisation and attention pooling (cuda/k_core.cu), CL4SRec's InfoNCE
 * (its softmax rows and gradient in cuda/k_nce.cu, between ops that had
 * twins) and Blin's bidirectional KL (cuda/k_bkl.cu), against their CPU
 * twins (l2norm.c, attnpool.c) through the CPU
 * API on a CUDA context (cuda_check.h), and their forwards against the
 * definitions (tests/ref, in double, from the same float inputs); skipped
 * without a backend. Gradient buffers start non-zero (the backwards ADD;
 * dscore is SET); every op runs twice: the same bits.
 *
 * l2norm: T = 9 rows of C = 33 with a scale of 1 and of 1/tau = 20, one row
 * of zeros (the clamped branch), eps 1e-12 as CORE. Both kernels sum in
 * double in the CPU's order, and double sqrt and division are correctly
 * rounded: the CPU's bits (tolerance 0).
 *
 * attnpool: sequences of 0 to 7 rows (an empty one: a zero row), C = 33,
 * scores and none (1 / len). The softmax uses CUDA's double exp (1 ulp of
 * the C library's), so alpha rounds to the same float nearly always:
 * 1e-6 absolute + 1e-6 relative on out, alpha and dscore, the CPU's bits
 * on dinp given the same alpha (it is one product a row). Against
 * tests/ref: 1e-5 absolute + 1e-5 relative (measured 1e-7).
 *
 * infonce: U = 6 pairs of distinct rows of h [T = 20, C = 33], dot and
 * cosine, tau
 * 0.5, with and without labels (two pairs share one); and U = 150 (300
 * views, more than a block's 256 threads: a thread walks two columns of
 * its row), cosine and labels. The loss and dh
 * (added, with dloss 0.3) against the CPU: 1e-5 absolute + 1e-4 relative
 * (cuBLAS's sums, CUDA's exp and log; measured 1e-7); the loss against
 * tests/ref 1e-5 relative.
 *
 * bkl: U = 5 pairs over rows of h [T = 12, C = 33] (one row in two pairs:
 * the scatter's order), V1 = 300 items (chunks of 2 pairs: three chunks),
 * with and without gradients; over every item and over supports of S = 6
 * (shared items, one listed twice, empty slots: the sampled mode's
 * buckets). The loss, dh and dE against the CPU: 1e-6
 * absolute + 1e-4 relative (the sums' order and cuBLAS; measured 2e-8 on
 * the loss); the loss against tests/ref (long double) 1e-4 relative. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attnpool.h"
#include "bkl.h"
#include "cuda_check.h"
#include "gradcheck.h"
#include "infonce.h"
#include "l2norm.h"
#include "ops.h"
#include "ref_ops.h"
#include "rng.h"

#define CC_C 33
#define POOL_ATOL 1e-6 /* attnpool against the CPU */
#define POOL_RTOL 1e-6
#define REF_ATOL 1e-5 /* forwards against tests/ref */
#define REF_RTOL 1e-5
#define NCE_ATOL 1e-5 /* infonce against the CPU */
#define NCE_RTOL 1e-4

static void l2norm_case(unit_ctx *t, cuda_env *g, float s, double *worst)
{
    int T = 9, C = CC_C;
    size_t n = (size_t)T * C;
    float eps = 1e-12f;
    sq_rng r;
    sq_rng_seed(&r, 91, (uint64_t)s);
    float *x = cuda_randn(n, 1, &r), *dy = cuda_randn(n, 1, &r), *gx0 = cuda_randn(n, 0.1, &r);
    memset(x + 4 * C, 0, C * sizeof *x); /* a zero row: the clamped branch */
    sq_ctx c = sq_ctx_cpu();
    float *y = malloc(n * sizeof *y), *nrm = malloc(T * sizeof *nrm), *gx = cuda_host_dup(gx0, n);
    sq_l2norm_forward(&c, y, nrm, x, T, C, s, eps);
    sq_l2norm_backward(&c, gx, dy, y, nrm, T, C, s, eps);
    float *dx = cuda_up(g, x, n), *ddy = cuda_up(g, dy, n);
    float *hy = malloc(n * sizeof *hy), *hn = malloc(T * sizeof *hn), *hgx = malloc(n * sizeof *hgx);
    float *py = malloc(n * sizeof *py), *pgx = malloc(n * sizeof *pgx);
    for (int rep = 0; rep < 2; rep++) {
        float *gy = cuda_zeros(g, n), *gn = cuda_zeros(g, T), *ggx = cuda_up(g, gx0, n);
        sq_l2norm_forward(&g->cx, gy, gn, dx, T, C, s, eps);
        sq_l2norm_backward(&g->cx, ggx, ddy, gy, gn, T, C, s, eps);
        CHECK(cuda_down(g, hy, gy, n) == 0 && cuda_down(g, hn, gn, T) == 0 &&
              cuda_down(g, hgx, ggx, n) == 0);
        CHECK(cuda_same_bits(hy, y, n, "l2norm out"));
        CHECK(cuda_same_bits(hn, nrm, T, "l2norm norm"));
        CHECK(cuda_same_bits(hgx, gx, n, "l2norm dinp"));
        if (rep)
            CHECK(memcmp(py, hy, n * sizeof *hy) == 0 && memcmp(pgx, hgx, n * sizeof *hgx) == 0);
        memcpy(py, hy, n * sizeof *hy);
        memcpy(pgx, hgx, n * sizeof *hgx);
    }
    double *xd = cuda_to_double(x, n), *ref = malloc(n * sizeof *ref);
    double *rn = malloc(T * sizeof *rn);
    CHECK(xd && ref && rn);
    if (xd && ref && rn) {
        ref_l2norm(ref, rn, xd, T, C, s, eps);
        CHECK(cuda_close_to_ref(hy, ref, n, REF_ATOL, REF_RTOL, "l2norm vs tests/ref"));
        CHECK(cuda_close_to_ref(hn, rn, T, REF_ATOL, REF_RTOL, "l2norm norm vs tests/ref"));
        double d = cuda_max_diff(hy, NULL, ref, n);
        *worst = d > *worst ? d : *worst;
    }
    free(xd); free(ref); free(rn);
    free(x); free(dy); free(gx0); free(y); free(nrm); free(gx); free(hy); free(hn); free(hgx);
    free(py); free(pgx);
}

static void pool_case(unit_ctx *t, cuda_env *g, const int *len, int B, int scored,
                      double *worst)
{
    int off[16], C = CC_C;
    int T = sq_pack_offsets(off, len, B);
    size_t nx = (size_t)T * C, no = (size_t)B * C;
    sq_rng r;
    sq_rng_seed(&r, (uint64_t)(T * 5 + scored), 17);
    float *x = cuda_randn(nx, 1, &r), *sc = cuda_randn((size_t)T, 1.5, &r);
    float *dout = cuda_randn(no, 1, &r), *gx0 = cuda_randn(nx, 0.1, &r);
    const float *score = scored ? sc : NULL;
    sq_ctx c = sq_ctx_cpu();
    float *out = malloc(no * sizeof *out), *al = malloc((size_t)T * sizeof *al);
    float *gx = cuda_host_dup(gx0, nx), *ds = malloc((size_t)T * sizeof *ds);
    sq_attnpool_forward(&c, out, al, score, x, off, B, C);
    sq_attnpool_backward(&c, gx, scored ? ds : NULL, dout, al, x, off, B, C);
    CHECK_EQ(cuda_stage_off(g, off, B), 0);
    float *dx = cuda_up(g, x, nx), *dsc = cuda_up(g, sc, (size_t)T), *dd = cuda_up(g, dout, no);
    float *ho = malloc(no * sizeof *ho), *ha = malloc((size_t)T * sizeof *ha);
    float *hgx = malloc(nx * sizeof *hgx), *hds = malloc((size_t)T * sizeof *hds);
    float *po = malloc(no * sizeof *po), *pgx = malloc(nx * sizeof *pgx);
    char what[64];
    snprintf(what, sizeof what, "attnpool T %d scored %d", T, scored);
    for (int rep = 0; rep < 2; rep++) {
        float *go = cuda_up(g, dout, no), *ga = cuda_zeros(g, (size_t)T);
        float *ggx = cuda_up(g, gx0, nx), *gds = cuda_zeros(g, (size_t)T);
        sq_attnpool_forward(&g->cx, go, ga, scored ? dsc : NULL, dx, off, B, C);
        sq_attnpool_backward(&g->cx, ggx, scored ? gds : NULL, dd, ga, dx, off, B, C);
        CHECK(cuda_down(g, ho, go, no) == 0 && cuda_down(g, ha, ga, (size_t)T) == 0 &&
              cuda_down(g, hgx, ggx, nx) == 0 && cuda_down(g, hds, gds, (size_t)T) == 0);
        CHECK(cuda_close_to(ho, out, no, POOL_ATOL, POOL_RTOL, what));
        CHECK(cuda_close_to(ha, al, (size_t)T, POOL_ATOL, POOL_RTOL, what));
        CHECK(cuda_close_to(hgx, gx, nx, POOL_ATOL, POOL_RTOL, what));
        if (scored)
            CHECK(cuda_close_to(hds, ds, (size_t)T, POOL_ATOL, POOL_RTOL, what));
        if (rep)
            CHECK(memcmp(po, ho, no * sizeof *ho) == 0 && memcmp(pgx, hgx, nx * sizeof *hgx) == 0);
        memcpy(po, ho, no * sizeof *ho);
        memcpy(pgx, hgx, nx * sizeof *hgx);
    }
    double *xd = cuda_to_double(x, nx), *sd = cuda_to_double(sc, (size_t)T);
    double *ref = malloc(no * sizeof *ref), *ra = malloc(((size_t)T + 1) * sizeof *ra);
    CHECK(xd && sd && ref && ra);
    if (xd && sd && ref && ra) {
        ref_attnpool(ref, ra, scored ? sd : NULL, xd, off, B, C);
        snprintf(what, sizeof what, "attnpool T %d scored %d vs tests/ref", T, scored);
        CHECK(cuda_close_to_ref(ho, ref, no, REF_ATOL, REF_RTOL, what));
        CHECK(cuda_close_to_ref(ha, ra, (size_t)T, REF_ATOL, REF_RTOL, what));
        double d = cuda_max_diff(ho, NULL, ref, no);
        *worst = d > *worst ? d : *worst;
    }
    free(xd); free(sd); free(ref); free(ra);
    free(x); free(sc); free(dout); free(gx0); free(out); free(al); free(gx); free(ds);
    free(ho); free(ha); free(hgx); free(hds); free(po); free(pgx);
}

static void nce_case(unit_ctx *t, cuda_env *g, int U, int T, int cosine, int labelled,
                     double *worst)
{
    int C = CC_C, *rows = malloc(3 * (size_t)U * sizeof *rows);
    CHECK(rows != NULL);
    if (!rows)
        return;
    int *ra = rows, *rb = rows + U, *label = rows + 2 * U;
    for (int j = 0; j < U; j++) { /* distinct rows (T prime to 7, >= 2U), out of order */
        ra[j] = (7 * j + 3) % T;
        rb[j] = (7 * (j + U) + 3) % T;
        label[j] = j == 4 ? label[1] : 100 + j; /* pairs 1 and 4 share one */
    }
    size_t nh = (size_t)T * C, ns = sq_infonce_scratch_size(U, C);
    sq_rng r;
    sq_rng_seed(&r, 23, (uint64_t)(cosine * 2 + labelled));
    float *h = cuda_randn(nh, 0.5, &r), *gh0 = cuda_randn(nh, 0.1, &r);
    sq_infonce_opt o = {.tau = 0.5, .cosine = cosine, .label = labelled ? label : NULL};
    sq_ctx c = sq_ctx_cpu();
    float *scr = malloc(ns * sizeof *scr), *gh = cuda_host_dup(gh0, nh);
    double loss = sq_infonce_forward(&c, scr, h, ra, rb, U, C, &o);
    sq_infonce_backward(&c, gh, scr, ra, rb, U, C, &o, 0.3f);
    /* the GPU, twice: the pairs' rows staged as the model stages them */
    const void *host[1] = {rows};
    size_t bytes[1] = {3 * (size_t)U * sizeof *rows};
    float *dh = cuda_up(g, h, nh), *dscr = cuda_zeros(g, ns);
    float *hg = malloc(nh * sizeof *hg), *pg = malloc(nh * sizeof *pg);
    double prev = 0;
    char what[64];
    snprintf(what, sizeof what, "infonce cosine %d labels %d", cosine, labelled);
    for (int rep = 0; rep < 2; rep++) {
        CHECK_EQ(sq_gpu_stage(g->gpu, host, bytes, 1, &g->e), 0);
        float *dg = cuda_up(g, gh0, nh);
        double gl = sq_infonce_forward(&g->cx, dscr, dh, ra, rb, U, C, &o);
        sq_infonce_backward(&g->cx, dg, dscr, ra, rb, U, C, &o, 0.3f);
        CHECK(cuda_down(g, hg, dg, nh) == 0);
        CHECK(fabs(gl - loss) <= NCE_ATOL + NCE_RTOL * fabs(loss));
        CHECK(cuda_close_to(hg, gh, nh, NCE_ATOL, NCE_RTOL, what));
        if (rep)
            CHECK(gl == prev && memcmp(pg, hg, nh * sizeof *hg) == 0);
        prev = gl;
        memcpy(pg, hg, nh * sizeof *hg);
    }
    double *hd = cuda_to_double(h, nh);
    CHECK(hd != NULL);
    if (hd) {
        double ref = ref_infonce(hd, ra, rb, U, C, 0.5, cosine, labelled ? label : NULL);
        CHECK(fabs(prev - ref) <= REF_RTOL * fabs(ref));
        double d = fabs(prev - ref);
        *worst = d > *worst ? d : *worst;
    }
    free(hd); free(h); free(gh0); free(scr); free(gh); free(hg); free(pg); free(rows);
}

static void bkl_case(unit_ctx *t, cuda_env *g, int grad, int sampled, double *worst)
{
    enum { U = 5, T = 12, V1 = 300, CHUNK = 2, S = 6 };
    /* rows shared: 0 by both views' lists in one chunk, 3 across chunks */
    int C = CC_C, ra[U] = {0, 3, 5, 7, 3}, rb[U] = {1, 0, 6, 3, 10};
    /* supports: items shared between pairs (the buckets' order), one
     * listed twice, slots of no item */
    static const int sup[U * S] = {5, 17, 0, 250, 9, 17, 17, 5, 33, 0, 0, 299,
                                   1, 2, 3, 4, 5, 6, 250, 0, 0, 0, 9, 100,
                                   17, 18, 19, 5, 0, 7};
    const int *cand = sampled ? sup : NULL, ns_ = sampled ? S : 0;
    size_t nh = (size_t)T * C, ne = (size_t)V1 * C, ns = sq_bkl_scratch_size(CHUNK, V1, C);
    sq_rng r;
    sq_rng_seed(&r, 31, (uint64_t)grad);
    float *h = cuda_randn(nh, 0.5, &r), *E = cuda_randn(ne, 0.5, &r);
    float *gh0 = cuda_randn(nh, 0.1, &r), *gE0 = cuda_randn(ne, 0.1, &r);
    sq_ctx c = sq_ctx_cpu();
    float *scr = malloc(ns * sizeof *scr), *gh = cuda_host_dup(gh0, nh), *gE = cuda_host_dup(gE0, ne);
    double loss = sq_bkl(&c, grad ? gh : NULL, grad ? gE : NULL, scr, h, E, ra, rb, cand, ns_,
                         U, C, V1, CHUNK, 0.7f);
    const void *host[2] = {ra, rb};
    size_t bytes[2] = {sizeof ra, sizeof rb};
    float *dh = cuda_up(g, h, nh), *dE = cuda_up(g, E, ne), *dscr = cuda_zeros(g, ns);
    float *hgh = malloc(nh * sizeof *hgh), *hgE = malloc(ne * sizeof *hgE);
    double prev = 0;
    char what[64];
    snprintf(what, sizeof what, "bkl grad %d sampled %d", grad, sampled);
    for (int rep = 0; rep < 2; rep++) {
        CHECK_EQ(sq_gpu_stage(g->gpu, host, bytes, 2, &g->e), 0);
        float *dgh = cuda_up(g, gh0, nh), *dgE = cuda_up(g, gE0, ne);
        double gl = sq_bkl(&g->cx, grad ? dgh : NULL, grad ? dgE : NULL, dscr, dh, dE, ra, rb,
                           cand, ns_, U, C, V1, CHUNK, 0.7f);
        CHECK(cuda_down(g, hgh, dgh, nh) == 0 && cuda_down(g, hgE, dgE, ne) == 0);
        CHECK(fabs(gl - loss) <= 1e-6 + 1e-4 * fabs(loss));
        CHECK(cuda_close_to(hgh, gh, nh, 1e-6, 1e-4, what)); /* untouched without grad */
        CHECK(cuda_close_to(hgE, gE, ne, 1e-6, 1e-4, what));
        if (rep)
            CHECK(gl == prev);
        prev = gl;
    }
    double *hd = cuda_to_double(h, nh), *Ed = cuda_to_double(E, ne);
    CHECK(hd && Ed);
    if (hd && Ed) {
        double ref = ref_bkl(hd, Ed, ra, rb, cand, ns_, U, C, V1);
        CHECK(fabs(prev - ref) <= 1e-4 * fabs(ref));
        double d = fabs(prev - ref);
        *worst = d > *worst ? d : *worst;
    }
    free(hd); free(Ed); free(h); free(E); free(gh0); free(gE0); free(scr); free(gh); free(gE);
    free(hgh); free(hgE);
}

UNIT_TEST(cuda_bkl)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    double w = 0;
    for (int sampled = 0; sampled < 2; sampled++) {
        bkl_case(t, &g, 1, sampled, &w);
        bkl_case(t, &g, 0, sampled, &w);
    }
    gc_note("cuda_bkl", "loss vs tests/ref", w);
    cuda_close(&g);
}

UNIT_TEST(cuda_core)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    double wl = 0, wp = 0;
    l2norm_case(t, &g, 1.0f, &wl);
    l2norm_case(t, &g, 20.0f, &wl);
    static const int lens[][5] = {{3, 0, 7, 1, 5}, {2, 6, 4, 1, 1}};
    for (int s = 0; s < 2; s++)
        for (int scored = 0; scored < 2; scored++)
            pool_case(t, &g, lens[s], 5, scored, &wp);
    double wn = 0;
    for (int cosine = 0; cosine < 2; cosine++)
        for (int labelled = 0; labelled < 2; labelled++)
            nce_case(t, &g, 6, 20, cosine, labelled, &wn);
    nce_case(t, &g, 150, 307, 1, 1, &wn); /* 300 views: a block's threads take two columns */
    gc_note("cuda_core", "infonce loss vs tests/ref", wn);
    gc_note("cuda_core", "l2norm out vs tests/ref", wl);
    gc_note("cuda_core", "attnpool out vs tests/ref", wp);
    cuda_close(&g);
}
