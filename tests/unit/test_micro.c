/* Unit tests for lib/train/micro.c and sq_packed_split: a batch cut into
 * micro-batches gives the whole batch's loss and gradient (dropout off),
 * the same bits every time, and parts that tile the batch; the sum
 * deferred into Adam gives the same update. */
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "micro.h"
#include "models.h"
#include "sasrec.h"
#include "unit.h"

/* 11 users of 3..23 items over items 1..9 of 60: sampled negatives reach
 * rows no input or target touches (grad_rows) */
static uint32_t m_items[200];
static uint64_t m_start[11];
static uint32_t m_ntrain[11];

static sq_seqs micro_seqs(void)
{
    uint64_t at = 0;
    for (int u = 0; u < 11; u++) {
        m_start[u] = at;
        m_ntrain[u] = 3 + (uint32_t)(u * 7 % 21);
        for (uint32_t i = 0; i < m_ntrain[u]; i++)
            m_items[at++] = 1 + (uint32_t)((u * 5 + i * 3 + i * i) % 9);
    }
    return (sq_seqs){.n_users = 11, .n_items = 60, .items = m_items, .start = m_start,
                     .n_train = m_ntrain};
}

/* The parts of p tile it: sequences, rows, ids and entries in order. */
static void check_parts(unit_ctx *t, const sq_packed *p, const sq_packed *parts, int np)
{
    int B = 0, T = 0, n = 0, ok = 1;
    for (int k = 0; k < np; k++) {
        const sq_packed *q = &parts[k];
        ok &= q->off[0] == 0 && q->off[q->B] == q->T && q->ids == p->ids + T;
        for (int i = 0; i < q->B; i++)
            ok &= q->off[i + 1] - q->off[i] == p->off[B + i + 1] - p->off[B + i];
        for (int i = 0; i < q->n; i++) {
            int row = q->rows ? q->rows[i] : i;
            ok &= row >= 0 && row < q->T && q->targets[i] == p->targets[n + i];
            ok &= (p->rows ? p->rows[n + i] : n + i) == T + row;
        }
        B += q->B;
        T += q->T;
        n += q->n;
    }
    CHECK(ok);
    CHECK_EQ(B, p->B);
    CHECK_EQ(T, p->T);
    CHECK_EQ(n, p->n);
}

static double rel_diff(const float *a, const float *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)b[i] * b[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static int all_zero(const float *a, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != 0)
            return 0;
    return 1;
}

/* A deferred sum (mb->defer: the parts added inside Adam, sq_micro_adam)
 * updates the parameters to the same bits as summing first and then
 * sq_adam_update, and leaves every gradient zero, so that the next step,
 * which skips zeroing them, gives the same gradient g1 again. */
static void check_deferred(unit_ctx *t, sq_micro *mb, const sq_model_def *def, sq_net *net,
                           void *work, const sq_packed *p, const sq_step_opts *so,
                           const float *g1)
{
    size_t n = net->ts->total;
    float *p0 = malloc(n * sizeof *p0), *pa = malloc(n * sizeof *pa);
    float *m = calloc(2 * n, sizeof *m), *v = m + n;
    sq_adam_cfg cfg = {.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.98, .eps = 1e-8,
                       .weight_decay = 0.1, .decoupled = 1};
    int cnt;
    memcpy(p0, net->params, n * sizeof *p0);
    sq_err e = {0};
    /* two runs, as train.c's weight-decay groups: the second past the item
     * table, the first holds it */
    sq_adam_cfg plain = cfg;
    plain.weight_decay = 0;
    size_t cut = n - n / 8;
    sq_micro_run runs[2] = {{.off = 0, .len = cut, .cfg = &cfg},
                            {.off = cut, .len = n - cut, .cfg = &plain}};
    float *gs = malloc(n * sizeof *gs);
    memcpy(gs, net->grads, n * sizeof *gs);
    CHECK_EQ(sq_micro_adam(mb, net, m, v, runs, 2, 1, &e), 0); /* summed (row-sparse or not) */
    memcpy(pa, net->params, n * sizeof *pa);
    /* the same bits as plain Adam on the summed gradient */
    memcpy(net->params, p0, n * sizeof *p0);
    memset(m, 0, 2 * n * sizeof *m);
    for (int i = 0; i < 2; i++)
        sq_adam_update(net->cx, net->params + runs[i].off, gs + runs[i].off, m + runs[i].off,
                       v + runs[i].off, runs[i].len, runs[i].cfg, 1);
    CHECK(memcmp(pa, net->params, n * sizeof *pa) == 0);
    free(gs);
    memcpy(net->params, p0, n * sizeof *p0);
    memset(m, 0, 2 * n * sizeof *m);
    mb->defer = 1;
    sq_micro_step(mb, def, net, work, p, so, 1, &cnt);
    CHECK_EQ(mb->np, 3);
    CHECK_EQ(sq_micro_adam(mb, net, m, v, runs, 2, 1, &e), 0); /* row-sparse (bce) or dense */
    CHECK(memcmp(pa, net->params, n * sizeof *pa) == 0);
    int zero = all_zero(net->grads, n);
    for (int k = 1; k < mb->P; k++)
        zero &= all_zero(mb->net[k].grads, n) && mb->clean[k];
    CHECK(zero && mb->clean[0]);
    /* the same step and update in one region (sq_micro_train): the same
     * bits; above max_loss, no update at all */
    memcpy(net->params, p0, n * sizeof *p0);
    memset(m, 0, 2 * n * sizeof *m);
    sq_micro_update u = {.m = m, .v = v, .runs = runs, .n_runs = 2, .t = 1};
    sq_micro_result res;
    CHECK_EQ(sq_micro_train(mb, def, net, work, p, so, 1, &u, &res, &e), 0);
    CHECK(res.updated && res.count == cnt && res.norm == 0);
    CHECK(memcmp(pa, net->params, n * sizeof *pa) == 0);
    CHECK(all_zero(net->grads, n) && mb->clean[0] && mb->np == 0);
    u.max_loss = res.loss / 2;
    memcpy(net->params, p0, n * sizeof *p0);
    CHECK_EQ(sq_micro_train(mb, def, net, work, p, so, 1, &u, &res, &e), 0);
    CHECK(!res.updated && res.loss > u.max_loss);
    CHECK(memcmp(p0, net->params, n * sizeof *p0) == 0);
    u.max_loss = 0;
    u.clip = 1; /* clipping needs the summed gradient: refused while deferred */
    CHECK_EQ(sq_micro_train(mb, def, net, work, p, so, 1, &u, &res, &e), SQ_EX_SOFTWARE);
    CHECK(memcmp(p0, net->params, n * sizeof *p0) == 0);
    memcpy(net->params, p0, n * sizeof *p0);
    mb->defer = 0;
    sq_micro_step(mb, def, net, work, p, so, 1, &cnt);
    CHECK(memcmp(g1, net->grads, n * sizeof *g1) == 0);
    free(m);
    free(p0);
    free(pa);
}

/* Lazy Adam (adam.h cfg.lazy) after a row-sparse step, summed (mb->defer
 * 0) and deferred: the rows of the item table the step did not mark keep
 * their values and moments to the bit; every other element gets exact
 * Adam's bits. The moments start non-zero, so exact Adam would move the
 * unmarked rows. */
static void check_lazy(unit_ctx *t, sq_micro *mb, const sq_model_def *def, sq_net *net,
                       void *work, const sq_packed *p, const sq_step_opts *so)
{
    size_t n = net->ts->total;
    float *p0 = malloc(n * sizeof *p0), *m0 = malloc(2 * n * sizeof *m0);
    float *exact = malloc(3 * n * sizeof *exact), *m = malloc(2 * n * sizeof *m), *v = m + n;
    sq_adam_cfg cfg = {.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.98, .eps = 1e-8,
                       .weight_decay = 0.1, .decoupled = 1};
    sq_micro_run run = {.off = 0, .len = n, .cfg = &cfg};
    memcpy(p0, net->params, n * sizeof *p0);
    for (size_t i = 0; i < 2 * n; i++)
        m0[i] = (float)(1e-3 * (1 + (double)(i % 7)));
    sq_err e = {0};
    int cnt, marked = 0, kept = 0, ok = 1;
    for (int pass = 0; pass < 3; pass++) { /* exact, lazy summed, lazy deferred */
        memcpy(net->params, p0, n * sizeof *p0);
        memcpy(m, m0, 2 * n * sizeof *m);
        cfg.lazy = pass > 0;
        mb->defer = pass == 2;
        sq_micro_step(mb, def, net, work, p, so, 1, &cnt);
        CHECK(mb->rows_t >= 0);
        if (mb->rows_t < 0)
            break;
        CHECK_EQ(sq_micro_adam(mb, net, m, v, &run, 1, 3, &e), 0);
        if (pass == 0) {
            memcpy(exact, net->params, n * sizeof *exact);
            memcpy(exact + n, m, 2 * n * sizeof *m);
            continue;
        }
        size_t t0 = net->ts->off[mb->rows_t], rows = net->ts->shape[mb->rows_t][0];
        size_t w = net->ts->size[mb->rows_t] / rows;
        for (size_t i = 0; i < n; i++) {
            size_t r = i >= t0 && i < t0 + rows * w ? (i - t0) / w : (size_t)-1;
            int keep = r != (size_t)-1 && mb->mark[r] != mb->stamp;
            marked += r != (size_t)-1 && !keep && (i - t0) % w == 0;
            kept += keep && (i - t0) % w == 0;
            const float *want_p = keep ? p0 : exact, *want_m = keep ? m0 : exact + n;
            ok &= net->params[i] == want_p[i] && m[i] == want_m[i] &&
                  v[i] == want_m[n + i];
        }
    }
    CHECK(ok);
    CHECK(marked > 0 && kept > 0);
    mb->defer = 0;
    free(p0);
    free(m0);
    free(exact);
    free(m);
}

static void check_model(unit_ctx *t, const char *model, const char *given, sq_step_opts so)
{
    sq_err e = {0};
    sq_seqs d = micro_seqs();
    const sq_model_def *def = sq_models_find(model);
    CHECK(def != NULL);
    if (!def)
        return;
    void *cfg = calloc(1, def->cfg_size);
    sq_ctx cx = sq_ctx_cpu();
    cx.threads = 1;
    sq_net net = {0};
    sq_batcher bt;
    void *work = NULL;
    sq_micro mb;
    int rc = def->config(cfg, given, &(sq_data_dims){.n_items = 60}, &e) ||
             def->net_alloc(&net, cfg, &cx, &e) || def->batcher(&bt, &d, cfg, &so, &e) ||
             def->work_alloc(&net, &bt, &work, &e) ||
             sq_micro_open(&mb, def, cfg, &net, &bt, 3, NULL, &e);
    if (rc)
        fprintf(stderr, "  %s: %s\n", model, e.msg);
    CHECK_EQ(rc, 0);
    if (rc)
        return;
    CHECK_EQ(mb.P, 3);
    def->net_init(&net, 5);
    size_t n = net.ts->total;
    float *ref = malloc(n * sizeof *ref), *g1 = malloc(n * sizeof *g1);
    sq_batcher_shuffle(&bt, 0);
    const sq_packed *p = sq_batcher_get(&bt, 0, 0);
    int np = sq_packed_split(p, 3, mb.part, mb.buf, mb.cap);
    CHECK_EQ(np, 3);
    check_parts(t, p, mb.part, np);
    int cnt = 0, cnt1 = 0, cnt2 = 0;
    memset(net.grads, 0, n * sizeof *net.grads);
    double loss = def->step(&net, work, p, &so, 1, &cnt);
    memcpy(ref, net.grads, n * sizeof *ref);
    double l1 = sq_micro_step(&mb, def, &net, work, p, &so, 1, &cnt1);
    memcpy(g1, net.grads, n * sizeof *g1);
    double l2 = sq_micro_step(&mb, def, &net, work, p, &so, 1, &cnt2);
    double err = rel_diff(g1, ref, n);
    if (getenv("SQ_TEST_VERBOSE"))
        fprintf(stderr, "  %s: loss %.7g vs %.7g, gradient relative difference %.3g\n",
                model, l1, loss, err);
    CHECK_EQ(cnt1, cnt);
    CHECK(fabs(l1 - loss) < 1e-5 * fabs(loss));
    CHECK(err < 1e-5);
    CHECK(l1 == l2 && cnt2 == cnt1);
    CHECK(memcmp(g1, net.grads, n * sizeof *g1) == 0);
    check_deferred(t, &mb, def, &net, work, p, &so, g1);
    if (so.loss != SQ_LOSS_CE)
        check_lazy(t, &mb, def, &net, work, p, &so);
    free(ref);
    free(g1);
    sq_micro_close(&mb, def);
    def->work_free(work);
    sq_batcher_free(&bt);
    def->net_free(&net);
    free(cfg);
}

UNIT_TEST(test_micro_sasrec_ce)
{
    check_model(t, "sasrec", "dim=8\nffn=8\nmax_len=12\nlayers=1\ndropout=0\n",
                (sq_step_opts){.loss = SQ_LOSS_CE, .target = SQ_TARGET_ALL, .batch = 11,
                               .seed = 3});
}

UNIT_TEST(test_micro_sasrec_bce_last)
{
    check_model(t, "sasrec", "dim=8\nffn=8\nmax_len=12\nlayers=2\ndropout=0\n",
                (sq_step_opts){.loss = SQ_LOSS_BCE, .neg = 2, .target = SQ_TARGET_LAST,
                               .batch = 40, .seed = 3});
}

UNIT_TEST(test_micro_bert4rec)
{
    check_model(t, "bert4rec", "dim=8\nffn=8\nmax_len=12\nlayers=1\ndropout=0\ntrain.mask_prob=0.3\n",
                (sq_step_opts){.loss = SQ_LOSS_CE, .target = SQ_TARGET_ALL, .batch = 11,
                               .seed = 3});
}

/* The sampled losses: in-batch negatives drawn over the whole batch before
 * it is cut (mixed), their corrections carried into every part; the
 * row-sparse update over the inputs, targets and negatives. */
UNIT_TEST(test_micro_sampled)
{
    check_model(t, "sasrec", "dim=8\nffn=8\nmax_len=12\nlayers=1\ndropout=0\n",
                (sq_step_opts){.loss = SQ_LOSS_SAMPLED_SOFTMAX, .neg = 6,
                               .neg_sampler = SQ_NEG_MIXED, .target = SQ_TARGET_ALL,
                               .batch = 11, .seed = 3});
    check_model(t, "sasrec", "dim=8\nffn=8\nmax_len=12\nlayers=1\ndropout=0\n",
                (sq_step_opts){.loss = SQ_LOSS_SAMPLED_SOFTMAX, .neg = 4,
                               .neg_sampler = SQ_NEG_POP + 8 * 500, .target = SQ_TARGET_LAST,
                               .batch = 40, .seed = 3});
    check_model(t, "bert4rec",
                "dim=8\nffn=8\nmax_len=12\nlayers=1\ndropout=0\ntrain.mask_prob=0.3\n",
                (sq_step_opts){.loss = SQ_LOSS_GBCE, .neg = 5, .gbce_t = 0.75,
                               .target = SQ_TARGET_ALL, .batch = 11, .seed = 3});
    /* --neg-share sequence and batch: one set a sequence or a batch, the
     * parts reading it */
    check_model(t, "sasrec", "dim=8\nffn=8\nmax_len=12\nlayers=1\ndropout=0\n",
                (sq_step_opts){.loss = SQ_LOSS_GBCE, .neg = 5, .gbce_t = 0.5,
                               .neg_share = SQ_SHARE_SEQUENCE, .target = SQ_TARGET_ALL,
                               .batch = 11, .seed = 3});
    check_model(t, "sasrec", "dim=8\nffn=8\nmax_len=12\nlayers=1\ndropout=0\n",
                (sq_step_opts){.loss = SQ_LOSS_SAMPLED_SOFTMAX, .neg = 6, .neg_share = SQ_SHARE_BATCH,
                               .neg_sampler = SQ_NEG_MIXED, .target = SQ_TARGET_ALL,
                               .batch = 11, .seed = 3});
}

UNIT_TEST(test_micro_split_refuses)
{
    /* paired views cannot be cut; a buffer too small is refused */
    int off[3] = {0, 2, 4}, ids[4] = {1, 2, 3, 4}, targets[4] = {2, 3, 4, 5}, buf[16];
    sq_packed p = {.B = 2, .T = 4, .ids = ids, .off = off, .pos = ids, .n = 4,
                   .targets = targets, .views = 2};
    sq_packed parts[2];
    CHECK_EQ(sq_packed_split(&p, 2, parts, buf, 16), 0);
    p.views = 1;
    CHECK_EQ(sq_packed_split(&p, 2, parts, buf, 5), 0);
    CHECK_EQ(sq_packed_split(&p, 2, parts, buf, 16), 2);
    int rows[2] = {3, 1};
    p.rows = rows;
    p.n = 2;
    CHECK_EQ(sq_packed_split(&p, 2, parts, buf, 16), 0); /* not in row order */
}

/* The bound micro.c sizes its workers by (batch.h): each part of P has at
 * most ceil(T / P) + 1.5 L rows, L the longest sequence, whatever the
 * lengths: random ones, one long among short ones, all of length L. */
UNIT_TEST(test_micro_split_part_bound)
{
    enum { B = 97, L = 50 };
    static int off[B + 1], ids[B * L], buf[2 * B * L + B + 16];
    sq_packed parts[16];
    sq_rng r;
    sq_rng_seed(&r, 21, 0);
    int worst = 0;
    for (int trial = 0; trial < 300; trial++) {
        off[0] = 0;
        for (int b = 0; b < B; b++) {
            int len = trial % 3 == 0 ? 1 + (int)sq_rng_below(&r, L)
                      : trial % 3 == 1 ? (b == (int)(trial % B) ? L : 1 + (int)sq_rng_below(&r, 4))
                                       : L;
            off[b + 1] = off[b] + len;
        }
        int T = off[B];
        sq_packed p = {.B = B, .T = T, .ids = ids, .off = off, .pos = ids, .n = 0, .views = 1};
        for (int P = 2; P <= 16; P++) {
            int np = sq_packed_split(&p, P, parts, buf, sizeof buf / sizeof *buf);
            CHECK(np >= 1 && np <= P);
            int sum = 0;
            for (int k = 0; k < np; k++) {
                int over = 2 * parts[k].T - 2 * ((T + P - 1) / P) - 3 * L;
                worst = over > worst ? over : worst;
                sum += parts[k].T;
            }
            CHECK_EQ(sum, T);
        }
    }
    CHECK(worst <= 0);
}
