/* The CUDA losses and optimiser (cuda/k_loss.cu, cuda/k_adam.cu) against
 * their CPU twins (ops.h 9-10, adam.h), through the CPU API on a CUDA
 * context (cuda_check.h); skipped without a backend.
 *
 * Sizes are odd on purpose: 37 entries in chunks of 16 (two full chunks
 * and a partial one), C = 24 (not a multiple of a warp), V1 = 1001 (not a
 * multiple of a block). Gradient buffers start non-zero (the ops ADD).
 *
 * Tolerances. The GPU sums in other orders than the CPU (the online
 * log-sum-exp, a warp's dot product, cuBLAS's blocking) and uses expf
 * where the CPU uses vec.h's exp: a few float ulps per term. The loss is
 * compared to 1e-5 relative. Gradients start at 0.01 scale, so that the
 * smallest contributions (a non-target item's dlogit times h, ~1e-5) are
 * far above the float spacing of the sums; they are compared to 1e-7
 * absolute + 1e-4 relative, which a missing or misplaced term (wrong row,
 * wrong item, missing 1/count) exceeds by orders of magnitude. Adam is the
 * CPU's arithmetic operation for operation (single roundings, IEEE
 * division and sqrt): 1 ulp of slack only so as not to depend on how the
 * simulated device's host compiler contracts. Every op is run twice and
 * must give the same bits (no float atomics).
 *
 * The results are also checked against the ops' definitions (tests/ref, in
 * double from the same float inputs): the losses and counts of the full CE
 * and the sampled BCE (1e-5 relative, as against the CPU: the float dot
 * products and expf, a few ulps per term, then averaged), Adam's state
 * (ADAM_ATOL, below), the norm (1e-12: double sums in another order) and
 * the clipped gradient (2 float roundings). The losses' gradients have no
 * reference (tests/ref holds forwards: the CPU's are checked against
 * finite differences). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "adam.h"
#include "cuda_check.h"
#include "ops.h"
#include "ref_ops.h"
#include "rng.h"

#define CE_N 37
#define CE_C 24
#define CE_V1 1001
#define CE_CHUNK 16
#define CE_HROWS 53 /* rows of h: more than entries, so rows matter */

static void fill_normal(float *x, size_t n, double scale, sq_rng *r)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(scale * sq_rng_normal(r));
}

/* The rows variant: 0 NULL, 1 increasing (distinct), 2 with repeats, 3
 * each entry's own index (the GPU reads h's rows in place, as for NULL). */
static int *make_rows(int kind, int n, int nrows, sq_rng *r)
{
    if (kind == 0)
        return NULL;
    int *rows = malloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++)
        rows[i] = kind == 3   ? i
                  : kind == 1 ? i + i / 3
                              : (int)sq_rng_below(r, (uint64_t)nrows / 4);
    return rows;
}

/* Stages the op's host integer arrays (NULLs skipped): what the trainer's
 * sq_gpu_stage does once a step. */
static int stage(cuda_env *g, const int *a, size_t na, const int *b, size_t nb, const int *c,
                 size_t nc)
{
    const void *host[3] = {a, b, c};
    size_t bytes[3] = {a ? na * sizeof(int) : 0, b ? nb * sizeof(int) : 0,
                       c ? nc * sizeof(int) : 0};
    return sq_gpu_stage(g->gpu, host, bytes, 3, &g->e);
}

typedef struct {
    double loss;
    int count;
    float *dh, *dE, *db;
} ce_out;

/* One CE run on the GPU from the initial gradients; dev_ids: rows and
 * targets as device arrays instead of staged host ones. */
static void ce_gpu(unit_ctx *t, cuda_env *g, ce_out *o, const float *h, const float *E,
                   const float *bias, const float *dh0, const float *dE0, const float *db0,
                   const int *rows, const int *targets, float dloss, int dev_ids, int V1)
{
    (void)t;
    size_t nh = (size_t)CE_HROWS * CE_C, nE = (size_t)V1 * CE_C;
    float *dh = cuda_up(g, dh0, nh), *dE = cuda_up(g, dE0, nE);
    float *db = bias ? cuda_up(g, db0, V1) : NULL;
    float *dhd = cuda_up(g, h, nh), *Ed = cuda_up(g, E, nE);
    float *bd = bias ? cuda_up(g, bias, V1) : NULL;
    float *scratch = cuda_zeros(g, sq_ce_scratch_size(CE_CHUNK, V1, CE_C));
    const int *r = rows, *tg = targets;
    if (dev_ids) {
        tg = cuda_up_bytes(g, targets, sizeof(int) * CE_N);
        r = rows ? cuda_up_bytes(g, rows, sizeof(int) * CE_N) : NULL;
        stage(g, NULL, 0, NULL, 0, NULL, 0);
    } else {
        stage(g, rows, CE_N, targets, CE_N, NULL, 0);
    }
    if (g->bad)
        return;
    o->loss = bias ? sq_ce_full_bias(&g->cx, dh, dE, db, scratch, dhd, Ed, bd, r, tg, CE_N,
                                     CE_C, V1, CE_CHUNK, dloss, &o->count)
                   : sq_ce_full(&g->cx, dh, dE, scratch, dhd, Ed, r, tg, CE_N, CE_C, V1,
                                CE_CHUNK, dloss, &o->count);
    cuda_down(g, o->dh, dh, nh);
    cuda_down(g, o->dE, dE, nE);
    if (bias)
        cuda_down(g, o->db, db, V1);
}

static void ce_case(unit_ctx *t, int with_bias, int rows_kind, int dev_ids, int V1)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    sq_rng r;
    sq_rng_seed(&r, 42 + (uint64_t)rows_kind, (uint64_t)with_bias);
    size_t nh = (size_t)CE_HROWS * CE_C, nE = (size_t)V1 * CE_C;
    float *h = malloc(sizeof(float) * nh), *E = malloc(sizeof(float) * nE);
    float *bias = malloc(sizeof(float) * V1), *db0 = malloc(sizeof(float) * V1);
    float *dh0 = malloc(sizeof(float) * nh), *dE0 = malloc(sizeof(float) * nE);
    fill_normal(h, nh, 0.3, &r);
    fill_normal(E, nE, 0.3, &r);
    fill_normal(bias, V1, 0.5, &r);
    fill_normal(dh0, nh, 0.01, &r);
    fill_normal(dE0, nE, 0.01, &r);
    fill_normal(db0, V1, 0.01, &r);
    int targets[CE_N];
    for (int i = 0; i < CE_N; i++) /* every 5th ignored; the rest 1..V1-1 */
        targets[i] = i % 5 == 2 ? 0 : 1 + (int)sq_rng_below(&r, V1 - 1);
    targets[3] = V1 - 1; /* the last item */
    int *rows = make_rows(rows_kind, CE_N, CE_HROWS, &r);
    float dloss = 1.7f;

    /* the CPU op in float */
    const sq_ctx cpu = sq_ctx_cpu();
    float *cdh = malloc(sizeof(float) * nh), *cdE = malloc(sizeof(float) * nE);
    float *cdb = malloc(sizeof(float) * V1);
    float *cs = malloc(sizeof(float) * sq_ce_scratch_size(CE_CHUNK, V1, CE_C));
    memcpy(cdh, dh0, sizeof(float) * nh);
    memcpy(cdE, dE0, sizeof(float) * nE);
    memcpy(cdb, db0, sizeof(float) * V1);
    int ccount = 0;
    double closs = with_bias ? sq_ce_full_bias(&cpu, cdh, cdE, cdb, cs, h, E, bias, rows,
                                               targets, CE_N, CE_C, V1, CE_CHUNK, dloss,
                                               &ccount)
                             : sq_ce_full(&cpu, cdh, cdE, cs, h, E, rows, targets, CE_N, CE_C,
                                          V1, CE_CHUNK, dloss, &ccount);

    ce_out o[2];
    for (int k = 0; k < 2; k++) {
        o[k].dh = malloc(sizeof(float) * nh);
        o[k].dE = malloc(sizeof(float) * nE);
        o[k].db = malloc(sizeof(float) * V1);
        o[k].loss = -1;
        o[k].count = -1;
        ce_gpu(t, &g, &o[k], h, E, with_bias ? bias : NULL, dh0, dE0, db0, rows, targets,
               dloss, dev_ids, V1);
    }
    if (!g.bad) {
        CHECK_EQ(o[0].count, ccount);
        CHECK_NEAR(o[0].loss, closs, 1e-5);
        /* the GPU's loss against the definition (tests/ref) too */
        double *hd = cuda_to_double(h, nh), *Ed = cuda_to_double(E, nE);
        double *bd = with_bias ? cuda_to_double(bias, V1) : NULL;
        CHECK(hd && Ed && (bd || !with_bias));
        if (hd && Ed && (bd || !with_bias)) {
            int rcount = -1;
            double rloss = ref_ce_full(hd, Ed, bd, rows, targets, CE_N, CE_C, V1, &rcount);
            CHECK_EQ(o[0].count, rcount);
            CHECK_NEAR(o[0].loss, rloss, 1e-5);
        }
        free(hd); free(Ed); free(bd);
        CHECK(cuda_close_to(o[0].dh, cdh, nh, 1e-7, 1e-4, "ce dh"));
        CHECK(cuda_close_to(o[0].dE, cdE, nE, 1e-7, 1e-4, "ce dE"));
        if (with_bias)
            CHECK(cuda_close_to(o[0].db, cdb, V1, 1e-7, 1e-4, "ce dbias"));
        /* deterministic: the second run gives the same bits */
        CHECK(o[0].loss == o[1].loss);
        CHECK(memcmp(o[0].dh, o[1].dh, sizeof(float) * nh) == 0);
        CHECK(memcmp(o[0].dE, o[1].dE, sizeof(float) * nE) == 0);
        if (with_bias)
            CHECK(memcmp(o[0].db, o[1].db, sizeof(float) * V1) == 0);
    }
    /* no gradients wanted: the loss alone, buffers untouched */
    if (!g.bad) {
        float *scratch = cuda_zeros(&g, sq_ce_scratch_size(CE_CHUNK, V1, CE_C));
        float *hd = cuda_up(&g, h, nh), *Ed = cuda_up(&g, E, nE);
        float *bd = cuda_up(&g, bias, V1);
        stage(&g, rows, CE_N, targets, CE_N, NULL, 0);
        int cnt = -1;
        double l = with_bias ? sq_ce_full_bias(&g.cx, NULL, NULL, NULL, scratch, hd, Ed, bd,
                                               rows, targets, CE_N, CE_C, V1, CE_CHUNK,
                                               dloss, &cnt)
                             : sq_ce_full(&g.cx, NULL, NULL, scratch, hd, Ed, rows, targets,
                                          CE_N, CE_C, V1, CE_CHUNK, dloss, &cnt);
        CHECK_EQ(cnt, ccount);
        CHECK(l == o[0].loss);
    }
    cuda_close(&g);
    for (int k = 0; k < 2; k++) {
        free(o[k].dh);
        free(o[k].dE);
        free(o[k].db);
    }
    free(h); free(E); free(bias); free(db0); free(dh0); free(dE0);
    free(cdh); free(cdE); free(cdb); free(cs); free(rows);
}

UNIT_TEST(test_cuda_ce_full)
{
    for (int rk = 0; rk < 4; rk++)
        ce_case(t, 0, rk, 0, CE_V1);
    ce_case(t, 0, 2, 1, CE_V1); /* ids on the device: counted there */
}

UNIT_TEST(test_cuda_ce_full_bias)
{
    for (int rk = 0; rk < 4; rk++)
        ce_case(t, 1, rk, 0, CE_V1);
    /* a catalogue over k_loss.cu's CE_COLSUM_TWO_PASS (65536): dbias a
     * thread a column, not be_colsum's two passes */
    ce_case(t, 1, 0, 0, 65539);
}

/* Every target ignored: count 0, loss 0, gradients untouched (the CPU's
 * early return: no 1/0 scale reaches a kernel). */
UNIT_TEST(test_cuda_loss_none_counted)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    enum { n = 5, C = 8, V1 = 11, K = 2 };
    float h[n * C], E[V1 * C], dh[n * C], dE[V1 * C];
    for (int i = 0; i < n * C; i++)
        h[i] = 0.1f * (float)i;
    for (int i = 0; i < V1 * C; i++)
        E[i] = 0.01f * (float)i;
    int targets[n] = {0}, neg[n * K];
    for (int i = 0; i < n * K; i++)
        neg[i] = 1 + i % (V1 - 1);
    float *hd = cuda_up(&g, h, n * C), *Ed = cuda_up(&g, E, V1 * C);
    float *dhd = cuda_up(&g, h, n * C), *dEd = cuda_up(&g, E, V1 * C);
    float *sc = cuda_zeros(&g, sq_ce_scratch_size(4, V1, C));
    stage(&g, targets, n, neg, n * K, NULL, 0);
    if (!g.bad) {
        int cnt = -1;
        CHECK(sq_ce_full(&g.cx, dhd, dEd, sc, hd, Ed, NULL, targets, n, C, V1, 4, 1, &cnt) == 0);
        CHECK_EQ(cnt, 0);
        cnt = -1;
        CHECK(sq_bce_sampled(&g.cx, dhd, dEd, hd, Ed, NULL, targets, neg, n, K, C, 1, &cnt) == 0);
        CHECK_EQ(cnt, 0);
        cuda_down(&g, dh, dhd, n * C);
        cuda_down(&g, dE, dEd, V1 * C);
        CHECK(memcmp(dh, h, sizeof h) == 0);
        CHECK(memcmp(dE, E, sizeof E) == 0);
    }
    cuda_close(&g);
}

/* ------------------------------------------------------------------------ */

#define BCE_K 3
#define BCE_V1 41 /* few items: several entries hit the same row of dE */

static void bce_case(unit_ctx *t, int rows_kind, int dev_ids)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    sq_rng r;
    sq_rng_seed(&r, 7 + (uint64_t)rows_kind, (uint64_t)dev_ids);
    size_t nh = (size_t)CE_HROWS * CE_C, nE = (size_t)BCE_V1 * CE_C;
    float *h = malloc(sizeof(float) * nh), *E = malloc(sizeof(float) * nE);
    float *dh0 = malloc(sizeof(float) * nh), *dE0 = malloc(sizeof(float) * nE);
    fill_normal(h, nh, 0.5, &r);
    fill_normal(E, nE, 0.5, &r);
    fill_normal(dh0, nh, 0.01, &r);
    fill_normal(dE0, nE, 0.01, &r);
    int pos[CE_N], neg[CE_N * BCE_K];
    for (int i = 0; i < CE_N; i++)
        pos[i] = i % 6 == 1 ? 0 : 1 + (int)sq_rng_below(&r, BCE_V1 - 1);
    for (int i = 0; i < CE_N * BCE_K; i++) /* some 0 (none); some equal to pos */
        neg[i] = i % 7 == 3 ? 0 : i % 11 == 5 ? pos[i / BCE_K] : 1 + (int)sq_rng_below(&r, BCE_V1 - 1);
    int *rows = make_rows(rows_kind, CE_N, CE_HROWS, &r);
    float dloss = 0.8f;

    const sq_ctx cpu = sq_ctx_cpu();
    float *cdh = malloc(sizeof(float) * nh), *cdE = malloc(sizeof(float) * nE);
    memcpy(cdh, dh0, sizeof(float) * nh);
    memcpy(cdE, dE0, sizeof(float) * nE);
    int ccount = 0;
    double closs = sq_bce_sampled(&cpu, cdh, cdE, h, E, rows, pos, neg, CE_N, BCE_K, CE_C,
                                  dloss, &ccount);

    float *gdh[2], *gdE[2];
    double gl[2] = {-1, -1};
    int gc[2] = {-1, -1};
    float *hd = cuda_up(&g, h, nh), *Ed = cuda_up(&g, E, nE);
    const int *rr = rows, *pp = pos, *nn = neg;
    if (dev_ids) {
        rr = rows ? cuda_up_bytes(&g, rows, sizeof(int) * CE_N) : NULL;
        pp = cuda_up_bytes(&g, pos, sizeof pos);
        nn = cuda_up_bytes(&g, neg, sizeof neg);
    }
    for (int k = 0; k < 2; k++) {
        gdh[k] = malloc(sizeof(float) * nh);
        gdE[k] = malloc(sizeof(float) * nE);
        float *dh = cuda_up(&g, dh0, nh), *dE = cuda_up(&g, dE0, nE);
        if (dev_ids)
            stage(&g, NULL, 0, NULL, 0, NULL, 0);
        else
            stage(&g, rows, CE_N, pos, CE_N, neg, CE_N * BCE_K);
        if (g.bad)
            break;
        gl[k] = sq_bce_sampled(&g.cx, dh, dE, hd, Ed, rr, pp, nn, CE_N, BCE_K, CE_C, dloss,
                               &gc[k]);
        cuda_down(&g, gdh[k], dh, nh);
        cuda_down(&g, gdE[k], dE, nE);
    }
    if (!g.bad) {
        CHECK_EQ(gc[0], ccount);
        CHECK_NEAR(gl[0], closs, 1e-5);
        /* the GPU's loss against the definition (tests/ref) too */
        double *h64 = cuda_to_double(h, nh), *E64 = cuda_to_double(E, nE);
        CHECK(h64 && E64);
        if (h64 && E64) {
            int rcount = -1;
            double rloss = ref_bce_sampled(h64, E64, rows, pos, neg, CE_N, BCE_K, CE_C, &rcount);
            CHECK_EQ(gc[0], rcount);
            CHECK_NEAR(gl[0], rloss, 1e-5);
        }
        free(h64); free(E64);
        CHECK(cuda_close_to(gdh[0], cdh, nh, 1e-7, 1e-4, "bce dh"));
        CHECK(cuda_close_to(gdE[0], cdE, nE, 1e-7, 1e-4, "bce dE"));
        CHECK(gl[0] == gl[1]);
        CHECK(memcmp(gdh[0], gdh[1], sizeof(float) * nh) == 0);
        CHECK(memcmp(gdE[0], gdE[1], sizeof(float) * nE) == 0);
        /* the loss alone */
        if (!dev_ids)
            stage(&g, rows, CE_N, pos, CE_N, neg, CE_N * BCE_K);
        int cnt = -1;
        double l = sq_bce_sampled(&g.cx, NULL, NULL, hd, Ed, rr, pp, nn, CE_N, BCE_K, CE_C,
                                  dloss, &cnt);
        CHECK_EQ(cnt, ccount);
        CHECK(l == gl[0]);
    }
    cuda_close(&g);
    for (int k = 0; k < 2; k++) {
        free(gdh[k]);
        free(gdE[k]);
    }
    free(h); free(E); free(dh0); free(dE0); free(cdh); free(cdE); free(rows);
}

UNIT_TEST(test_cuda_bce_sampled)
{
    for (int rk = 0; rk < 3; rk++)
        bce_case(t, rk, 0);
    bce_case(t, 2, 1); /* ids on the device: downloaded to bucket */
}

/* ------------------------------------------------------------------------ */

#define ADAM_N 1237
/* Against tests/ref's Adam in double, carried over the steps: the float
 * state is rounded at every step and the float constants are off (1 -
 * 0.98f is 1e-6 relative from 0.02), 1e-6 relative here after three
 * steps; a wrong bias correction or decay is off by 1e-3 or more. */
#define ADAM_ATOL 1e-5
#define ADAM_RTOL 1e-4

UNIT_TEST(test_cuda_adam)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    sq_rng r;
    sq_rng_seed(&r, 3, 0);
    const sq_ctx cpu = sq_ctx_cpu();
    for (int decoupled = 0; decoupled < 2; decoupled++) {
        sq_adam_cfg cfg = {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.98, .eps = 1e-8,
                           .weight_decay = 0.01, .decoupled = decoupled};
        float p[ADAM_N], m[ADAM_N] = {0}, v[ADAM_N] = {0}, gr[ADAM_N];
        float gp[ADAM_N], gm[ADAM_N], gv[ADAM_N];
        double p64[ADAM_N], m64[ADAM_N] = {0}, v64[ADAM_N] = {0}, g64[ADAM_N];
        fill_normal(p, ADAM_N, 1.0, &r);
        for (int i = 0; i < ADAM_N; i++)
            p64[i] = p[i];
        float *dp = cuda_up(&g, p, ADAM_N), *dm = cuda_zeros(&g, ADAM_N);
        float *dv = cuda_zeros(&g, ADAM_N), *dg = cuda_zeros(&g, ADAM_N);
        for (long step = 1; step <= 3 && !g.bad; step++) {
            fill_normal(gr, ADAM_N, step == 2 ? 1e-3 : 1.0, &r);
            sq_gpu_upload(g.gpu, dg, gr, sizeof gr, &g.e);
            sq_adam_update(&cpu, p, gr, m, v, ADAM_N, &cfg, step);
            sq_adam_update(&g.cx, dp, dg, dm, dv, ADAM_N, &cfg, step);
            cuda_down(&g, gp, dp, ADAM_N);
            cuda_down(&g, gm, dm, ADAM_N);
            cuda_down(&g, gv, dv, ADAM_N);
            CHECK(cuda_close_to(gp, p, ADAM_N, 1e-30, 2.4e-7, "adam param"));
            CHECK(cuda_close_to(gm, m, ADAM_N, 1e-30, 2.4e-7, "adam m"));
            CHECK(cuda_close_to(gv, v, ADAM_N, 1e-30, 2.4e-7, "adam v"));
            /* the definition (tests/ref) in double from the same gradients */
            for (int i = 0; i < ADAM_N; i++)
                g64[i] = gr[i];
            ref_adam(p64, g64, m64, v64, ADAM_N, &cfg, step);
            CHECK(cuda_close_to_ref(gp, p64, ADAM_N, ADAM_ATOL, ADAM_RTOL, "adam param vs ref"));
            CHECK(cuda_close_to_ref(gm, m64, ADAM_N, ADAM_ATOL, ADAM_RTOL, "adam m vs ref"));
            CHECK(cuda_close_to_ref(gv, v64, ADAM_N, ADAM_ATOL, ADAM_RTOL, "adam v vs ref"));
            size_t same = 0;
            for (int i = 0; i < ADAM_N; i++)
                same += memcmp(&gp[i], &p[i], sizeof(float)) == 0;
            if (same != ADAM_N)
                fprintf(stderr, "  adam step %ld: %zu of %d parameters bit-equal\n", step, same,
                        ADAM_N);
        }
    }
    cuda_close(&g);
}

/* Lazy Adam's rows (sq_adam_update_rows) against the CPU op: the listed
 * rows as test_cuda_adam's elements, every other row bit-equal to its
 * start, a list out of order with SQ_ADAM_NO_ROW entries; twice, the
 * same bits */
#define AR_ROWS 301
#define AR_W 33
UNIT_TEST(test_cuda_adam_rows)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    enum { N = AR_ROWS * AR_W };
    static float p[N], m[N], v[N], gr[N], gp[2][N], gm[N], gv[N];
    uint32_t list[AR_ROWS];
    size_t nl = 0;
    sq_rng r;
    sq_rng_seed(&r, 11, 0);
    fill_normal(p, N, 1.0, &r);
    fill_normal(gr, N, 1.0, &r);
    for (int i = 0; i < N; i++) {
        m[i] = 1e-3f * (float)(1 + i % 7);
        v[i] = 1e-4f * (float)(1 + i % 3);
    }
    for (int k = AR_ROWS - 1; k >= 0; k--)
        if (k % 4 == 1 || k % 9 == 0)
            list[nl++] = (uint32_t)k;
        else if (k % 50 == 0)
            list[nl++] = SQ_ADAM_NO_ROW;
    const sq_ctx cpu = sq_ctx_cpu();
    sq_adam_cfg cfg = {.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.98, .eps = 1e-8,
                       .weight_decay = 0.05, .decoupled = 1, .lazy = 1};
    for (int run = 0; run < 2 && !g.bad; run++) {
        float *dp = cuda_up(&g, p, N), *dm = cuda_up(&g, m, N), *dv = cuda_up(&g, v, N);
        float *dg = cuda_up(&g, gr, N);
        sq_adam_update_rows(&g.cx, dp, dg, dm, dv, AR_W, list, nl, &cfg, 5);
        cuda_down(&g, gp[run], dp, N);
        cuda_down(&g, gm, dm, N);
        cuda_down(&g, gv, dv, N);
    }
    float cp[N], cm[N], cv[N];
    memcpy(cp, p, sizeof cp);
    memcpy(cm, m, sizeof cm);
    memcpy(cv, v, sizeof cv);
    sq_adam_update_rows(&cpu, cp, gr, cm, cv, AR_W, list, nl, &cfg, 5);
    CHECK(cuda_close_to(gp[0], cp, N, 1e-30, 2.4e-7, "adam rows param"));
    CHECK(cuda_close_to(gm, cm, N, 1e-30, 2.4e-7, "adam rows m"));
    CHECK(cuda_close_to(gv, cv, N, 1e-30, 2.4e-7, "adam rows v"));
    CHECK(memcmp(gp[0], gp[1], sizeof gp[0]) == 0);
    int still = 1, moved = 0;
    for (int i = 0; i < N; i++) {
        int k = i / AR_W, on = k % 4 == 1 || k % 9 == 0;
        if (on)
            moved += gp[0][i] != p[i];
        else
            still &= memcmp(&gp[0][i], &p[i], sizeof p[i]) == 0;
    }
    CHECK(still);
    CHECK(moved > 0);
    cuda_close(&g);
}

/* sq_adam_update_rows on a fresh context with a list of 20,000 rows (80 KB):
 * its second upload (the list) grows the op upload buffer after its first
 * (the constants) took an address in it. The grown-from buffer is kept
 * (be_grow_pair), so the constants are still there: the CPU's result. */
UNIT_TEST(test_cuda_adam_rows_grows)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    enum { N = 20000 };
    static float p[N], m[N], v[N], gr[N], gp[N];
    static uint32_t list[N];
    sq_rng r;
    sq_rng_seed(&r, 12, 0);
    fill_normal(p, N, 1.0, &r);
    fill_normal(gr, N, 1.0, &r);
    for (int i = 0; i < N; i++) {
        m[i] = v[i] = 1e-3f;
        list[i] = (uint32_t)(N - 1 - i);
    }
    sq_adam_cfg cfg = {.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.98, .eps = 1e-8, .lazy = 1};
    float *dp = cuda_up(&g, p, N), *dm = cuda_up(&g, m, N), *dv = cuda_up(&g, v, N);
    float *dg = cuda_up(&g, gr, N);
    sq_adam_update_rows(&g.cx, dp, dg, dm, dv, 1, list, N, &cfg, 3);
    cuda_down(&g, gp, dp, N);
    const sq_ctx cpu = sq_ctx_cpu();
    sq_adam_update_rows(&cpu, p, gr, m, v, 1, list, N, &cfg, 3);
    CHECK(cuda_close_to(gp, p, N, 1e-30, 2.4e-7, "adam rows, the buffer grown"));
    cuda_close(&g);
}

/* sq_adam_update_runs: 70 runs (two launches of at most 64), of two
 * configs alternating, of lengths 0 to 400, with gaps between them that
 * no run covers: on the GPU the same bits as a call a run (and as the
 * CPU's to its tolerance), the gaps untouched */
#define RUNS_N 70
UNIT_TEST(test_cuda_adam_runs)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    sq_adam_cfg c0 = {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.98, .eps = 1e-8,
                      .weight_decay = 0.01, .decoupled = 1};
    sq_adam_cfg c1 = {.lr = 3e-3, .beta1 = 0.8, .beta2 = 0.999, .eps = 1e-6,
                      .weight_decay = 0.0, .decoupled = 0};
    sq_adam_run runs[RUNS_N];
    size_t at = 0;
    for (int i = 0; i < RUNS_N; i++) {
        runs[i] = (sq_adam_run){.off = at, .len = (size_t)(i * 37) % 401, .cfg = i % 2 ? &c1 : &c0};
        at += runs[i].len + (size_t)(i % 3); /* a gap of 0 to 2 */
    }
    size_t n = at;
    float *p = malloc(n * sizeof *p), *gr = malloc(n * sizeof *gr);
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *cp = malloc(n * sizeof *cp);
    float *cm = calloc(n, sizeof *cm), *cv = calloc(n, sizeof *cv);
    sq_rng r;
    sq_rng_seed(&r, 19, 0);
    fill_normal(p, n, 1.0, &r);
    fill_normal(gr, n, 1.0, &r);
    float *dg = cuda_up(&g, gr, n);
    for (int k = 0; k < 2 && !g.bad; k++) { /* k 0: one call, k 1: a call a run */
        float *dp = cuda_up(&g, p, n), *dm = cuda_zeros(&g, n), *dv = cuda_zeros(&g, n);
        for (long step = 1; step <= 2; step++) {
            if (k == 0)
                sq_adam_update_runs(&g.cx, dp, dg, dm, dv, runs, RUNS_N, step);
            else
                for (int i = 0; i < RUNS_N; i++)
                    sq_adam_update(&g.cx, dp + runs[i].off, dg + runs[i].off, dm + runs[i].off,
                                   dv + runs[i].off, runs[i].len, runs[i].cfg, step);
        }
        cuda_down(&g, k ? b : a, dp, n);
    }
    memcpy(cp, p, n * sizeof *cp);
    const sq_ctx cpu = sq_ctx_cpu();
    for (long step = 1; step <= 2; step++)
        sq_adam_update_runs(&cpu, cp, gr, cm, cv, runs, RUNS_N, step);
    if (!g.bad) {
        CHECK(memcmp(a, b, n * sizeof *a) == 0);
        CHECK(cuda_close_to(a, cp, n, 1e-30, 2.4e-7, "adam runs param"));
        int gaps = 1, moved = 0;
        for (int i = 0; i < RUNS_N; i++) {
            size_t end = runs[i].off + runs[i].len, next = i + 1 < RUNS_N ? runs[i + 1].off : n;
            for (size_t e = end; e < next; e++)
                gaps &= memcmp(&a[e], &p[e], sizeof *a) == 0;
            moved += runs[i].len && a[runs[i].off] != p[runs[i].off];
        }
        CHECK(gaps);
        CHECK(moved > RUNS_N / 2);
    }
    free(p); free(gr); free(a); free(b); free(cp); free(cm); free(cv);
    cuda_close(&g);
}

#define NORM_N 100003 /* several blocks of the first pass, a partial last */

UNIT_TEST(test_cuda_grad_norm)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    sq_rng r;
    sq_rng_seed(&r, 5, 0);
    float *x = malloc(sizeof(float) * NORM_N);
    fill_normal(x, NORM_N, 1.0, &r);
    const sq_ctx cpu = sq_ctx_cpu();
    float *d = cuda_up(&g, x, NORM_N);
    double *xd = cuda_to_double(x, NORM_N);
    CHECK(xd != NULL);
    if (!g.bad && xd) {
        size_t sizes[] = {0, 1, 37, 8192, 8193, NORM_N};
        for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
            size_t n = sizes[k];
            double c = sq_grad_norm(&cpu, x, n);
            double a = sq_grad_norm(&g.cx, d, n), b = sq_grad_norm(&g.cx, d, n);
            CHECK_NEAR(a, c, 1e-12); /* double sums, other orders */
            CHECK_NEAR(a, ref_grad_norm(xd, n), 1e-12); /* the definition (tests/ref) */
            CHECK(memcmp(&a, &b, sizeof a) == 0);
        }
    }
    cuda_close(&g);
    free(x); free(xd);
}

UNIT_TEST(test_cuda_grad_clip)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    sq_rng r;
    sq_rng_seed(&r, 6, 0);
    float *x = malloc(sizeof(float) * NORM_N), *c = malloc(sizeof(float) * NORM_N);
    float *o = malloc(sizeof(float) * NORM_N);
    fill_normal(x, NORM_N, 1.0, &r);
    double *rd = malloc(sizeof(double) * NORM_N);
    CHECK(rd != NULL);
    const sq_ctx cpu = sq_ctx_cpu();
    double maxes[] = {5.0, 1e6, 0.0}; /* clipped, under the limit, off */
    for (int k = 0; k < 3 && rd; k++) {
        memcpy(c, x, sizeof(float) * NORM_N);
        double cn = sq_grad_clip(&cpu, c, NORM_N, maxes[k]);
        float *d = cuda_up(&g, x, NORM_N);
        if (g.bad)
            break;
        double gn = sq_grad_clip(&g.cx, d, NORM_N, maxes[k]);
        cuda_down(&g, o, d, NORM_N);
        CHECK_NEAR(gn, cn, 1e-12);
        /* the same float scale, unless the norms' last bits differ */
        CHECK(cuda_close_to(o, c, NORM_N, 1e-30, 1.2e-7, "clipped g"));
        /* the definition (tests/ref) in double: the GPU rounds the scale
         * and each product to float, 2 half-ulps (1.2e-7) at most */
        for (size_t i = 0; i < NORM_N; i++)
            rd[i] = x[i];
        CHECK_NEAR(gn, ref_grad_clip(rd, NORM_N, maxes[k]), 1e-12);
        CHECK(cuda_close_to_ref(o, rd, NORM_N, 1e-30, 1.2e-7, "clipped g vs tests/ref"));
        if (k > 0)
            CHECK(memcmp(o, x, sizeof(float) * NORM_N) == 0); /* untouched */
    }
    cuda_close(&g);
    free(x); free(c); free(o); free(rd);
}
