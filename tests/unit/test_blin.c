/* Unit tests for Blin: the views batcher (batch.h VIEWS) and the model's
 * training step (lib/model/blin.c).
 *
 *   - RandomPad views: each view is RandomPad of the sample's inputs over
 *     the same RandomPad of its targets (copies of the whole sample, untrained
 *     separators), right-aligned; entries [0, n_first) are the first views';
 *     a user's views do not depend on the batch size, are redrawn every
 *     epoch and differ between the two views of an epoch;
 *   - crop views: a run of floor(eta len) consecutive pairs, zero-padded;
 *   - negatives (K > 0) are never in the user's training part;
 *   - the step: with dropout 0 and two identical views the KL term is 0
 *     (the loss and every gradient equal those of --bkl-lambda 0); with
 *     RandomPad views the term is positive; and the gradient of the whole
 *     loss (both views' CE plus lambda KL) matches central finite
 *     differences of the float model on the largest entries. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "model.h"
#include "models.h"
#include "pad.h"
#include "unit.h"

/* 5 users: training parts of 3, 1 (no sample), 6, 2 and 4 items. */
static const uint32_t v_items[] = {1, 2, 3, 9, 4, 5, 6, 7, 8, 1, 2, 3, 5, 6, 7, 9};
static const uint64_t v_start[] = {0, 3, 4, 10, 12};
static const uint32_t v_ntrain[] = {3, 1, 6, 2, 4};

static sq_seqs views_seqs(void)
{
    return (sq_seqs){.n_users = 5, .n_items = 9, .items = v_items, .start = v_start,
                     .n_train = v_ntrain};
}

/* Checks sequence j of p as a RandomPad view of its user's sample (N rows);
 * returns its number of copies. *entry walks the entries in order. */
static int check_randompad(unit_ctx *t, const sq_packed *p, int j, int N, int *entry)
{
    uint32_t u = p->user[j];
    const uint32_t *it = v_items + v_start[u];
    int len = (int)v_ntrain[u] - 1;
    if (len > N)
        len = N;
    const uint32_t *in = it + (v_ntrain[u] - 1 - (uint32_t)len), *tg = in + 1;
    int o = p->off[j], span = p->off[j + 1] - o;
    int copies = (span + 1) / (len + 1);
    CHECK_EQ(copies * len + copies - 1, span);
    CHECK(copies >= 1 && (uint32_t)(copies - 1) <= sq_randompad_max((uint32_t)len, (uint32_t)N));
    if (len * 2 < N)
        CHECK(copies >= 2); /* alpha >= 1 whenever a repeat fits */
    for (int r = 0; r < span; r++) {
        int c = r % (len + 1); /* place in its copy; len: the separator */
        CHECK_EQ(p->pos[o + r], N - span + r);
        CHECK_EQ(p->ids[o + r], c == len ? 0 : (int)in[c]);
        if (c == len)
            continue; /* a separator has no entry */
        CHECK_EQ(p->rows[*entry], o + r);
        CHECK_EQ(p->targets[*entry], (int)tg[c]);
        (*entry)++;
    }
    return copies;
}

UNIT_TEST(test_blin_views_randompad)
{
    sq_err e = {0};
    sq_seqs d = views_seqs();
    sq_batcher b, b1;
    int N = 12;
    CHECK_EQ(sq_batcher_init_views(&b, &d, SQ_VIEW_RANDOMPAD, 0.5, N, 8, 0, 7, &e), 0);
    CHECK_EQ(sq_batcher_init_views(&b1, &d, SQ_VIEW_RANDOMPAD, 0.5, N, 1, 0, 7, &e), 0);
    CHECK_EQ(b.n_samples, 4);
    int differ_views = 0, differ_epochs = 0;
    int span0[2][5] = {{0}};
    for (uint64_t ep = 0; ep < 6; ep++) {
        sq_batcher_shuffle(&b, ep);
        const sq_packed *p = sq_batcher_get(&b, ep, 0);
        CHECK_EQ(p->views, 2);
        CHECK_EQ(p->B, 8);
        CHECK(p->T <= b.cap_T);
        int entry = 0;
        for (int j = 0; j < p->B; j++) {
            if (j == p->B / 2)
                CHECK_EQ(entry, p->n_first);
            CHECK_EQ(p->user[j], p->user[j % 4]);
            check_randompad(t, p, j, N, &entry);
        }
        CHECK_EQ(entry, p->n);
        for (int j = 0; j < 4; j++) {
            int s1 = p->off[j + 1] - p->off[j], s2 = p->off[j + 5] - p->off[j + 4];
            differ_views += s1 != s2;
            uint32_t u = p->user[j];
            if (ep == 0)
                span0[0][u] = s1;
            else
                differ_epochs += span0[0][u] != s1;
        }
        /* batching does not change a user's views */
        sq_batcher_shuffle(&b1, ep);
        for (uint64_t i = 0; i < 4; i++) {
            const sq_packed *q = sq_batcher_get(&b1, ep, i);
            int k = 0;
            while (k < 4 && p->user[k] != q->user[0])
                k++;
            CHECK(k < 4);
            for (int v = 0; v < 2 && k < 4; v++) {
                int pj = k + 4 * v, len = q->off[v + 1] - q->off[v];
                CHECK_EQ(p->off[pj + 1] - p->off[pj], len);
                for (int r = 0; r < len && len == p->off[pj + 1] - p->off[pj]; r++)
                    CHECK_EQ(q->ids[q->off[v] + r], p->ids[p->off[pj] + r]);
            }
        }
    }
    CHECK(differ_views > 0);
    CHECK(differ_epochs > 0);
    sq_batcher_free(&b);
    sq_batcher_free(&b1);
}

UNIT_TEST(test_blin_views_crop_and_negatives)
{
    sq_err e = {0};
    sq_seqs d = views_seqs();
    sq_batcher b;
    int N = 4;
    CHECK_EQ(sq_batcher_init_views(&b, &d, SQ_VIEW_CROP, 0.5, N, 4, 3, 9, &e), 0);
    sq_batcher_shuffle(&b, 1);
    const sq_packed *p = sq_batcher_get(&b, 1, 0);
    CHECK_EQ(p->B, 8);
    CHECK_EQ(p->K, 3);
    for (int j = 0; j < p->B; j++) {
        uint32_t u = p->user[j];
        const uint32_t *it = v_items + v_start[u];
        int len = (int)v_ntrain[u] - 1 < N ? (int)v_ntrain[u] - 1 : N;
        int c = (int)(0.5 * len) < 1 ? 1 : (int)(0.5 * len);
        int o = p->off[j];
        CHECK_EQ(p->off[j + 1] - o, c);
        /* consecutive items of the user, each followed by its target */
        for (int r = 0; r < c; r++) {
            CHECK_EQ(p->pos[o + r], N - c + r);
            CHECK_EQ(p->rows[o + r], o + r); /* every row is an entry */
            int found = 0;
            for (uint32_t s = 0; s + 1 < v_ntrain[u]; s++)
                found |= (int)it[s] == p->ids[o + r] && (int)it[s + 1] == p->targets[o + r];
            CHECK(found);
            if (r > 0)
                CHECK(p->ids[o + r] == p->targets[o + r - 1]);
            for (int k = 0; k < 3; k++) {
                int x = p->neg[(size_t)(o + r) * 3 + k];
                CHECK(x >= 1 && x <= 9);
                for (uint32_t s = 0; s < v_ntrain[u]; s++)
                    CHECK(x != (int)it[s]);
            }
        }
    }
    sq_batcher_free(&b);
    CHECK(sq_batcher_init_views(&b, &d, SQ_VIEW_CROP, 0, N, 4, 0, 9, &e) == SQ_EX_USAGE);
    CHECK(sq_batcher_init_views(&b, &d, 7, 0.5, N, 4, 0, 9, &e) == SQ_EX_USAGE);
}

/* ------------------------------------------------------------------------ */
/* The training step                                                        */

typedef struct {
    const sq_model_def *def;
    void *cfg;
    sq_ctx cx;
    sq_net net;
    sq_batcher bt;
    void *work;
    sq_step_opts so;
} rig;

static int rig_open(unit_ctx *t, rig *r, const char *given)
{
    sq_err e = {0};
    memset(r, 0, sizeof *r);
    sq_seqs d = views_seqs();
    r->def = sq_models_find("blin");
    CHECK(r->def != NULL);
    if (!r->def)
        return -1;
    r->cfg = calloc(1, r->def->cfg_size);
    r->cx = sq_ctx_cpu();
    r->cx.threads = 1;
    r->so = (sq_step_opts){.loss = 0, .neg = 2, .target = SQ_TARGET_ALL, .batch = 4, .seed = 3};
    int rc = r->def->config(r->cfg, given, &(sq_data_dims){.n_items = 9}, &e) ||
             r->def->net_alloc(&r->net, r->cfg, &r->cx, &e) ||
             r->def->batcher(&r->bt, &d, r->cfg, &r->so, &e) ||
             r->def->work_alloc(&r->net, &r->bt, &r->work, &e);
    if (rc)
        fprintf(stderr, "  blin rig: %s\n", e.msg);
    CHECK_EQ(rc, 0);
    if (!rc)
        r->def->net_init(&r->net, 5);
    return rc;
}

static void rig_close(rig *r)
{
    if (r->def) {
        r->def->work_free(r->work);
        sq_batcher_free(&r->bt);
        r->def->net_free(&r->net);
    }
    free(r->cfg);
}

static double rig_step(rig *r, const sq_packed *p)
{
    int cnt;
    memset(r->net.grads, 0, r->net.ts->total * sizeof *r->net.grads);
    return r->def->step(&r->net, r->work, p, &r->so, 1, &cnt);
}

/* Makes the second views of p copies of the first (same rows, positions and
 * entries) in a packed batch of the caller's arrays. */
static sq_packed twin_views(const sq_packed *p, int *mem)
{
    int U = p->B / 2, T1 = p->off[U], n1 = p->n_first;
    sq_packed q = *p;
    q.ids = mem;
    q.pos = q.ids + 2 * T1;
    q.rows = q.pos + 2 * T1;
    q.targets = q.rows + 2 * n1;
    q.off = q.targets + 2 * n1;
    for (int v = 0; v < 2; v++) {
        for (int r = 0; r < T1; r++) {
            q.ids[v * T1 + r] = p->ids[r];
            q.pos[v * T1 + r] = p->pos[r];
        }
        for (int k = 0; k < n1; k++) {
            q.rows[v * n1 + k] = p->rows[k] + v * T1;
            q.targets[v * n1 + k] = p->targets[k];
        }
        for (int j = 0; j <= U; j++)
            q.off[v * U + j] = p->off[j] + v * T1;
    }
    q.T = 2 * T1;
    q.n = 2 * n1;
    return q;
}

UNIT_TEST(test_blin_step_kl_zero_for_identical_views)
{
    const char *base = "dim=8\nffn=8\nmax_len=12\nlayers=1\ndropout=0\n";
    char with[256], without[256];
    snprintf(with, sizeof with, "%sblin.bkl_lambda=2\n", base);
    snprintf(without, sizeof without, "%sblin.bkl_lambda=0\n", base);
    rig a, z;
    if (rig_open(t, &a, with) || rig_open(t, &z, without)) {
        rig_close(&a);
        rig_close(&z);
        return;
    }
    sq_batcher_shuffle(&a.bt, 0);
    const sq_packed *p = sq_batcher_get(&a.bt, 0, 0);
    int *mem = malloc((size_t)(8 * p->T + 8 * p->n + 4 * p->B + 4) * sizeof *mem);
    sq_packed q = twin_views(p, mem);
    double la = rig_step(&a, &q), lz = rig_step(&z, &q);
    CHECK(fabs(la - lz) <= 1e-6 * fabs(lz));
    size_t n = a.net.ts->total;
    double gmax = 0, dmax = 0;
    for (size_t i = 0; i < n; i++) {
        gmax = fmax(gmax, fabs(z.net.grads[i]));
        dmax = fmax(dmax, fabs(a.net.grads[i] - z.net.grads[i]));
    }
    CHECK(gmax > 0);
    CHECK(dmax <= 1e-5 * gmax);
    /* two different RandomPad views: the KL term is there */
    double la2 = rig_step(&a, p), lz2 = rig_step(&z, p);
    CHECK(la2 > lz2 + 1e-6);
    if (getenv("SQ_TEST_VERBOSE"))
        fprintf(stderr, "  twin views: loss %.9g vs %.9g, grad diff %.3g of %.3g; "
                "RandomPad views: %.9g vs %.9g\n", la, lz, dmax, gmax, la2, lz2);
    free(mem);
    rig_close(&a);
    rig_close(&z);
}

/* The float model's gradient against central differences on the entries
 * with the largest gradient (dropout 0, so the loss is a function). */
static void check_step_gradient(unit_ctx *t, const char *given)
{
    rig r;
    if (rig_open(t, &r, given)) {
        rig_close(&r);
        return;
    }
    sq_batcher_shuffle(&r.bt, 0);
    const sq_packed *p = sq_batcher_get(&r.bt, 0, 0);
    size_t n = r.net.ts->total;
    rig_step(&r, p);
    float *g = malloc(n * sizeof *g);
    memcpy(g, r.net.grads, n * sizeof *g);
    double worst = 0;
    for (int pick = 0; pick < 12; pick++) {
        size_t best = 0;
        for (size_t i = 0; i < n; i++)
            if (fabsf(g[i]) > fabsf(g[best]))
                best = i;
        float save = r.net.params[best], h = 1e-2f;
        r.net.params[best] = save + h;
        double fp = rig_step(&r, p);
        r.net.params[best] = save - h;
        double fm = rig_step(&r, p);
        r.net.params[best] = save;
        double fd = (fp - fm) / (2 * (double)h);
        double err = fabs(fd - g[best]) / fmax(fabs(g[best]), 1e-3);
        worst = fmax(worst, err);
        g[best] = 0; /* next pick */
    }
    if (getenv("SQ_TEST_VERBOSE"))
        fprintf(stderr, "  %s: worst relative error %.3g\n", given, worst);
    CHECK(worst < 3e-2);
    free(g);
    rig_close(&r);
}

UNIT_TEST(test_blin_step_gradient)
{
    check_step_gradient(t, "dim=8\nffn=8\nmax_len=12\nlayers=1\ndropout=0\nblin.bkl_lambda=2\n");
    check_step_gradient(t, "dim=8\nffn=8\nmax_len=12\nlayers=1\ndropout=0\nblin.bkl_lambda=3\n"
                           "blin.softmax=sampled\n");
    check_step_gradient(t, "dim=8\nffn=8\nmax_len=12\nlayers=1\ndropout=0\nblin.pad=zero\n");
    /* the KL term dominating: its scale and its pairs of rows */
    check_step_gradient(t, "dim=8\nffn=8\nmax_len=12\nlayers=1\ndropout=0\nblin.bkl_lambda=500\n");
}
