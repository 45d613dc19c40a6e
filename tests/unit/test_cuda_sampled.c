/* The sampled softmaxes (Blin's plain one, and with log-Q) and gBCE on the
 * GPU (cuda/k_sampled.cu) against their CPU twins (ops.h 10b, 10c, 10d,
 * 10e) and tests/ref, through the
 * CPU API on a CUDA context (cuda_check.h); skipped without a backend.
 *
 * Shapes are odd: 37 entries (in chunks of 16 for the shared ops: two full
 * and a partial one), C = 24, 41 items (entries share rows of dE), K = 5
 * per entry and 13 shared. Every 6th entry has no target (padding); some
 * negatives are 0, some equal the entry's positive (masked hits), the
 * shared set holds an item twice and items that are some entries'
 * positives. Gradient buffers start non-zero (the ops add). rows: NULL,
 * increasing, with repeats; ids staged (as the trainer's) or on the device.
 *
 * Tolerances as test_cuda_loss.c's: the loss to 1e-5 relative (float dot
 * products in another order, expf and log1pf where the CPU has vec.h's exp
 * and its log1p series; the sums in double), the gradients to 1e-7
 * absolute + 1e-4 relative (they start at 0.01 scale); a missing or
 * misplaced term (a masked hit counted, a wrong row, the correction left
 * out) is orders of magnitude over. Every op runs twice: the same bits;
 * the loss alone (no gradients) is the same value. Also: inside a CUDA
 * graph, and a batch without a target (nothing written).
 * SQ_TEST_VERBOSE=1 prints each op's largest differences. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_check.h"
#include "ops.h"
#include "ref_ops.h"
#include "rng.h"

enum { SP_N = 37, SP_C = 24, SP_V1 = 41, SP_KE = 5, SP_KS = 13, SP_CHUNK = 16, SP_HROWS = 53 };

/* Which op and how it is called. */
typedef struct {
    int shared, softmax, bias, rows_kind, dev_ids;
    int plain; /* 10b (Blin's --softmax sampled): no bias, no correction, hits kept */
} sp_case;

/* The inputs of a case (host), drawn from seed. */
typedef struct {
    int K, *rows, pos[SP_N], *neg, nneg;
    float *h, *E, *bias, *lq, *dh0, *dE0, *db0, beta, dloss;
} sp_data;

static void fill(float *x, size_t n, double s, sq_rng *r)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(s * sq_rng_normal(r));
}

static int sp_make(sp_data *d, const sp_case *c, uint64_t seed)
{
    sq_rng r;
    sq_rng_seed(&r, seed, (uint64_t)(c->shared * 16 + c->softmax * 8 + c->bias * 4));
    memset(d, 0, sizeof *d);
    d->K = c->shared ? SP_KS : SP_KE;
    d->nneg = c->shared ? d->K : SP_N * d->K;
    size_t nh = (size_t)SP_HROWS * SP_C, nE = (size_t)SP_V1 * SP_C;
    d->h = malloc(nh * sizeof *d->h);
    d->E = malloc(nE * sizeof *d->E);
    d->dh0 = malloc(nh * sizeof *d->dh0);
    d->dE0 = malloc(nE * sizeof *d->dE0);
    d->bias = malloc(SP_V1 * sizeof *d->bias);
    d->db0 = malloc(SP_V1 * sizeof *d->db0);
    d->neg = malloc((size_t)d->nneg * sizeof *d->neg);
    d->lq = malloc((size_t)d->nneg * sizeof *d->lq);
    d->rows = c->rows_kind ? malloc(SP_N * sizeof *d->rows) : NULL;
    if (!d->h || !d->E || !d->dh0 || !d->dE0 || !d->bias || !d->db0 || !d->neg || !d->lq ||
        (c->rows_kind && !d->rows))
        return -1;
    fill(d->h, nh, 0.5, &r);
    fill(d->E, nE, 0.5, &r);
    fill(d->dh0, nh, 0.01, &r);
    fill(d->dE0, nE, 0.01, &r);
    fill(d->bias, SP_V1, 0.5, &r);
    fill(d->db0, SP_V1, 0.01, &r);
    fill(d->lq, (size_t)d->nneg, 1.0, &r);
    for (int i = 0; i < SP_N; i++)
        d->pos[i] = i % 6 == 1 ? 0 : 1 + (int)sq_rng_below(&r, SP_V1 - 1);
    for (int i = 0; i < d->nneg; i++) /* some 0 (none), some the positive (a hit) */
        d->neg[i] = i % 7 == 3 ? 0
                    : !c->shared && i % 11 == 5 ? d->pos[i / d->K]
                                                : 1 + (int)sq_rng_below(&r, SP_V1 - 1);
    if (c->shared) { /* an item twice; some entries' positives in the set */
        d->neg[5] = d->neg[2];
        d->pos[0] = d->neg[4];
        d->pos[7] = d->neg[2];
        d->pos[20] = d->neg[9];
    }
    for (int i = 0; i < SP_N && d->rows; i++)
        d->rows[i] = c->rows_kind == 1 ? i + i / 3 : (int)sq_rng_below(&r, SP_HROWS / 4);
    d->beta = c->softmax ? 1.0f : 0.37f;
    d->dloss = 0.8f;
    return 0;
}

static void sp_free(sp_data *d)
{
    free(d->h); free(d->E); free(d->dh0); free(d->dE0); free(d->bias); free(d->db0);
    free(d->neg); free(d->lq); free(d->rows);
}

/* The op of case c on cx's buffers (dh, dE NULL: the loss alone). */
static double sp_op(const sq_ctx *cx, const sp_case *c, const sp_data *d, float *dh, float *dE,
                    float *db, float *scratch, const float *h, const float *E,
                    const float *bias, const int *rows, const int *pos, const int *neg,
                    int *count)
{
    const float *b = c->bias ? bias : NULL;
    float *gb = c->bias && dh ? db : NULL;
    if (c->plain)
        return sq_ce_sampled(cx, dh, dE, h, E, rows, pos, neg, SP_N, d->K, SP_C, d->dloss,
                             count);
    if (c->shared && c->softmax)
        return sq_ce_sampled_shared(cx, dh, dE, gb, scratch, h, E, b, rows, pos, neg, d->lq,
                                    SP_N, d->K, SP_C, SP_CHUNK, d->dloss, count);
    if (c->shared)
        return sq_gbce_sampled_shared(cx, dh, dE, gb, scratch, h, E, b, rows, pos, neg, SP_N,
                                      d->K, SP_C, SP_CHUNK, d->beta, d->dloss, count);
    if (c->softmax)
        return sq_ce_sampled_logq(cx, dh, dE, gb, h, E, b, rows, pos, neg, d->lq, SP_N, d->K,
                                  SP_C, d->dloss, count);
    return sq_gbce_sampled(cx, dh, dE, gb, h, E, b, rows, pos, neg, SP_N, d->K, SP_C, d->beta,
                           d->dloss, count);
}

/* The loss by tests/ref, the shared set copied into every row. */
static double sp_ref(const sp_case *c, const sp_data *d, int *count)
{
    size_t nh = (size_t)SP_HROWS * SP_C, nE = (size_t)SP_V1 * SP_C, nk = (size_t)SP_N * d->K;
    double *h = cuda_to_double(d->h, nh), *E = cuda_to_double(d->E, nE);
    double *b = c->bias ? cuda_to_double(d->bias, SP_V1) : NULL;
    int *neg = malloc(nk * sizeof *neg);
    float *lq = malloc(nk * sizeof *lq);
    double l = NAN;
    if (h && E && (b || !c->bias) && neg && lq) {
        for (size_t j = 0; j < nk; j++) {
            neg[j] = d->neg[c->shared ? j % (size_t)d->K : j];
            lq[j] = d->lq[c->shared ? j % (size_t)d->K : j];
        }
        l = c->plain     ? ref_ce_sampled(h, E, d->rows, d->pos, neg, SP_N, d->K, SP_C, count)
            : c->softmax ? ref_ce_sampled_logq(h, E, b, d->rows, d->pos, neg, lq, SP_N, d->K,
                                             SP_C, count)
                       : ref_gbce_sampled(h, E, b, d->rows, d->pos, neg, SP_N, d->K, SP_C,
                                          d->beta, count);
    }
    free(h); free(E); free(b); free(neg); free(lq);
    return l;
}

/* The staged ids (as the trainer's sq_packed_stage) or none. */
static void sp_stage(cuda_env *g, const sp_data *d, int none)
{
    const void *host[3] = {d->rows, d->pos, d->neg};
    size_t bytes[3] = {d->rows ? SP_N * sizeof(int) : 0, sizeof d->pos,
                       (size_t)d->nneg * sizeof(int)};
    if (sq_gpu_stage(g->gpu, host, bytes, none ? 0 : 3, &g->e))
        g->bad = 1;
}

typedef struct {
    double loss;
    int count;
    float *dh, *dE, *db;
} sp_out;

static void sp_gpu(cuda_env *g, const sp_case *c, const sp_data *d, sp_out *o)
{
    size_t nh = (size_t)SP_HROWS * SP_C, nE = (size_t)SP_V1 * SP_C;
    float *dh = cuda_up(g, d->dh0, nh), *dE = cuda_up(g, d->dE0, nE);
    float *db = cuda_up(g, d->db0, SP_V1), *h = cuda_up(g, d->h, nh), *E = cuda_up(g, d->E, nE);
    float *bias = cuda_up(g, d->bias, SP_V1);
    float *scratch = cuda_zeros(g, sq_sampled_shared_scratch_size(SP_CHUNK, d->K, SP_C));
    const int *rows = d->rows, *pos = d->pos, *neg = d->neg;
    if (c->dev_ids) {
        rows = d->rows ? cuda_up_bytes(g, d->rows, SP_N * sizeof(int)) : NULL;
        pos = cuda_up_bytes(g, d->pos, sizeof d->pos);
        neg = cuda_up_bytes(g, d->neg, (size_t)d->nneg * sizeof(int));
    }
    sp_stage(g, d, c->dev_ids);
    if (g->bad)
        return;
    o->loss = sp_op(&g->cx, c, d, dh, dE, db, scratch, h, E, bias, rows, pos, neg, &o->count);
    cuda_down(g, o->dh, dh, nh);
    cuda_down(g, o->dE, dE, nE);
    cuda_down(g, o->db, db, SP_V1);
    /* the loss alone: the same value, nothing written */
    sp_stage(g, d, c->dev_ids);
    int cnt = -1;
    double l = sp_op(&g->cx, c, d, NULL, NULL, NULL, scratch, h, E, bias, rows, pos, neg, &cnt);
    if (l != o->loss || cnt != o->count) {
        fprintf(stderr, "    loss alone %.17g (%d), with gradients %.17g (%d)\n", l, cnt,
                o->loss, o->count);
        g->bad = 1;
    }
}

static const char *sp_name(const sp_case *c)
{
    static const char *names[4] = {"gbce_sampled", "ce_sampled_logq", "gbce_sampled_shared",
                                   "ce_sampled_shared"};
    return c->plain ? "ce_sampled" : names[c->shared * 2 + c->softmax];
}

/* The largest absolute and relative (over |cpu| + 1e-3) differences. */
static void sp_worst(const float *a, const float *b, size_t n, double *abs_w, double *rel_w)
{
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        cuda_keep_max(abs_w, d);
        cuda_keep_max(rel_w, d / (fabs((double)b[i]) + 1e-3));
    }
}

static void sp_case_run(unit_ctx *t, sp_case c, uint64_t seed)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    sp_data d;
    CHECK_EQ(sp_make(&d, &c, seed), 0);
    size_t nh = (size_t)SP_HROWS * SP_C, nE = (size_t)SP_V1 * SP_C;
    const sq_ctx cpu = sq_ctx_cpu();
    float *cdh = cuda_host_dup(d.dh0, nh), *cdE = cuda_host_dup(d.dE0, nE);
    float *cdb = cuda_host_dup(d.db0, SP_V1);
    float *cs = malloc(sq_sampled_shared_scratch_size(SP_CHUNK, d.K, SP_C) * sizeof *cs);
    int ccount = -1;
    double closs = sp_op(&cpu, &c, &d, cdh, cdE, cdb, cs, d.h, d.E, d.bias, d.rows, d.pos,
                         d.neg, &ccount);
    sp_out o[2];
    for (int k = 0; k < 2; k++) {
        o[k] = (sp_out){-1, -1, malloc(nh * sizeof(float)), malloc(nE * sizeof(float)),
                        malloc(SP_V1 * sizeof(float))};
        if (!g.bad)
            sp_gpu(&g, &c, &d, &o[k]);
    }
    if (!g.bad) {
        CHECK_EQ(o[0].count, ccount);
        CHECK_NEAR(o[0].loss, closs, 1e-5 * fabs(closs));
        int rcount = -1;
        double rloss = sp_ref(&c, &d, &rcount);
        CHECK_EQ(rcount, ccount);
        CHECK_NEAR(o[0].loss, rloss, 1e-5 * fabs(rloss));
        CHECK(cuda_close_to(o[0].dh, cdh, nh, 1e-7, 1e-4, "dh"));
        CHECK(cuda_close_to(o[0].dE, cdE, nE, 1e-7, 1e-4, "dE"));
        CHECK(cuda_close_to(o[0].db, cdb, SP_V1, 1e-7, 1e-4, "dbias"));
        if (!c.bias)
            CHECK(memcmp(o[0].db, d.db0, SP_V1 * sizeof(float)) == 0);
        CHECK(o[0].loss == o[1].loss);
        CHECK(memcmp(o[0].dh, o[1].dh, nh * sizeof(float)) == 0);
        CHECK(memcmp(o[0].dE, o[1].dE, nE * sizeof(float)) == 0);
        CHECK(memcmp(o[0].db, o[1].db, SP_V1 * sizeof(float)) == 0);
        if (getenv("SQ_TEST_VERBOSE")) {
            double a = 0, r = 0;
            sp_worst(o[0].dh, cdh, nh, &a, &r);
            sp_worst(o[0].dE, cdE, nE, &a, &r);
            sp_worst(o[0].db, cdb, SP_V1, &a, &r);
            fprintf(stderr, "    %s bias %d rows %d: loss %.9g cpu %.9g (rel %.2g), "
                    "gradients max abs %.3g, max rel %.3g\n", sp_name(&c), c.bias, c.rows_kind,
                    o[0].loss, closs, fabs(o[0].loss - closs) / fabs(closs), a, r);
        }
    }
    cuda_close(&g);
    for (int k = 0; k < 2; k++) {
        free(o[k].dh);
        free(o[k].dE);
        free(o[k].db);
    }
    free(cdh); free(cdE); free(cdb); free(cs);
    sp_free(&d);
}

/* Every rows kind, with and without a bias, ids staged; once on the device. */
static void sp_all(unit_ctx *t, int shared, int softmax)
{
    for (int rk = 0; rk < 3; rk++)
        for (int b = 0; b < 2; b++)
            sp_case_run(t, (sp_case){shared, softmax, b, rk, 0, 0}, 11 + (uint64_t)rk);
    sp_case_run(t, (sp_case){shared, softmax, 1, 2, 1, 0}, 5);
}

/* 10b: every rows kind, ids staged; once on the device (a negative equal
 * to its positive is a term: the data's hits count here) */
UNIT_TEST(test_cuda_ce_sampled)
{
    for (int rk = 0; rk < 3; rk++)
        sp_case_run(t, (sp_case){0, 1, 0, rk, 0, 1}, 21 + (uint64_t)rk);
    sp_case_run(t, (sp_case){0, 1, 0, 2, 1, 1}, 7);
}

UNIT_TEST(test_cuda_ce_sampled_logq)
{
    sp_all(t, 0, 1);
}

UNIT_TEST(test_cuda_gbce_sampled)
{
    sp_all(t, 0, 0);
}

UNIT_TEST(test_cuda_ce_sampled_shared)
{
    sp_all(t, 1, 1);
}

UNIT_TEST(test_cuda_gbce_sampled_shared)
{
    sp_all(t, 1, 0);
}

/* In a CUDA graph (the trainer's --cuda-graphs bracket): a key's steps on
 * new batches of the same shapes (ids, negatives, corrections, targets)
 * give the eager steps' bits: losses (the step's value) and gradients. */
UNIT_TEST(test_cuda_sampled_graph)
{
    for (int op = 0; op < 4; op++) {
        cuda_env g;
        if (cuda_open(t, &g))
            return;
        /* rows increasing: the trainer's batches (a shared op's scatter of
         * dh takes its kernel by whether the rows repeat, as sq_ce_full's) */
        sp_case c = {op / 2, op % 2, 1, 1, 0, 0};
        size_t nh = (size_t)SP_HROWS * SP_C, nE = (size_t)SP_V1 * SP_C;
        float *dh = cuda_zeros(&g, nh), *dE = cuda_zeros(&g, nE), *db = cuda_zeros(&g, SP_V1);
        float *h = cuda_zeros(&g, nh), *E = cuda_zeros(&g, nE), *bias = cuda_zeros(&g, SP_V1);
        float *sc = cuda_zeros(&g, sq_sampled_shared_scratch_size(SP_CHUNK, SP_KS, SP_C));
        float got[3][SP_HROWS * SP_C > SP_V1 * SP_C ? SP_HROWS * SP_C : SP_V1 * SP_C];
        float want[3][sizeof got[0] / sizeof(float)];
        size_t len[3] = {nh, nE, SP_V1};
        float *dev[3] = {dh, dE, db};
        for (int k = 0; k < 5 && !g.bad; k++) {
            sp_data d;
            CHECK_EQ(sp_make(&d, &c, 100 + (uint64_t)k), 0);
            if (k == 3) /* a batch without a target: loss 0 */
                memset(d.pos, 0, sizeof d.pos);
            double v[2];
            for (int graph = 1; graph >= 0; graph--) {
                const float *src[6] = {d.dh0, d.dE0, d.db0, d.h, d.E, d.bias};
                float *dst[6] = {dh, dE, db, h, E, bias};
                for (int j = 0; j < 6; j++)
                    sq_gpu_upload(g.gpu, dst[j], src[j], (j % 3 ? j % 3 == 1 ? nE : SP_V1 : nh) *
                                  sizeof(float), &g.e);
                int cnt;
                if (graph)
                    CHECK_EQ(sq_ctx_graph_begin(&g.cx, 77, &g.e), 0);
                sp_stage(&g, &d, 0);
                v[graph] = sp_op(&g.cx, &c, &d, dh, dE, db, sc, h, E, bias, d.rows, d.pos, d.neg,
                                 &cnt);
                if (graph) {
                    int nv = 0;
                    CHECK_EQ(sq_ctx_graph_end(&g.cx, &g.e), 0);
                    CHECK_EQ(sq_ctx_graph_values(&g.cx, &v[1], 1, &nv, &g.e), 0);
                    CHECK_EQ(nv, 1);
                }
                for (int j = 0; j < 3; j++)
                    cuda_down(&g, graph ? got[j] : want[j], dev[j], len[j]);
            }
            CHECK(v[0] == v[1]);
            for (int j = 0; j < 3; j++)
                CHECK(memcmp(got[j], want[j], len[j] * sizeof(float)) == 0);
            sp_free(&d);
        }
        int keys = 0;
        long replays = 0;
        CHECK_EQ(sq_gpu_graph_stats(g.gpu, &keys, &replays, &g.e), 0);
        CHECK_EQ(replays, 2); /* record, capture twice, two replays */
        cuda_close(&g);
    }
}

/* No entry with a target: count 0, loss 0, the gradients untouched (the
 * CPU's early return: no 1/0 scale reaches a kernel), for every op. */
UNIT_TEST(test_cuda_sampled_none_counted)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    size_t nh = (size_t)SP_HROWS * SP_C, nE = (size_t)SP_V1 * SP_C;
    float *hdh = malloc(nh * sizeof *hdh), *hdE = malloc(nE * sizeof *hdE), hdb[SP_V1];
    CHECK(hdh && hdE);
    for (int op = 0; op < 4 && hdh && hdE && !g.bad; op++) {
        sp_case c = {op / 2, op % 2, 1, 1, 0, 0};
        sp_data d;
        CHECK_EQ(sp_make(&d, &c, 3), 0);
        memset(d.pos, 0, sizeof d.pos);
        float *dh = cuda_up(&g, d.dh0, nh), *dE = cuda_up(&g, d.dE0, nE);
        float *db = cuda_up(&g, d.db0, SP_V1), *h = cuda_up(&g, d.h, nh);
        float *E = cuda_up(&g, d.E, nE), *bias = cuda_up(&g, d.bias, SP_V1);
        float *sc = cuda_zeros(&g, sq_sampled_shared_scratch_size(SP_CHUNK, d.K, SP_C));
        sp_stage(&g, &d, 0);
        int cnt = -1;
        if (!g.bad) {
            CHECK(sp_op(&g.cx, &c, &d, dh, dE, db, sc, h, E, bias, d.rows, d.pos, d.neg, &cnt) ==
                  0);
            CHECK_EQ(cnt, 0);
            cuda_down(&g, hdh, dh, nh);
            cuda_down(&g, hdE, dE, nE);
            cuda_down(&g, hdb, db, SP_V1);
            CHECK(memcmp(hdh, d.dh0, nh * sizeof *hdh) == 0);
            CHECK(memcmp(hdE, d.dE0, nE * sizeof *hdE) == 0);
            CHECK(memcmp(hdb, d.db0, sizeof hdb) == 0);
        }
        sp_free(&d);
    }
    cuda_close(&g);
    free(hdh);
    free(hdE);
}
