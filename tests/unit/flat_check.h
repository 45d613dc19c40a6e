/* flat_check.h - the finite-difference check of a whole flat model
 * (flat.h) in double: its forward, flat.c's loss against the output table
 * and its backward, on a tiny batch from the batch builder, every tensor.
 *
 * flat_gradcheck(t, def, cfg, target, loss, tol) builds a batch of 4 users
 * (sequences of 2 to 7 items over the config's n_items, user ids below its
 * n_users) with sq_batcher_init(target, max_len, ...), perturbs the initial
 * parameters (so that zero biases and unit norms are generic), runs the
 * training forward (dropout masks fixed by (seed, step)), the loss and the
 * backward, and compares each parameter's gradient with the fourth-order
 * central difference of the loss (gradcheck.h). Elements where the loss has
 * a kink within two steps (a relu, a max, a top-k changing its choice: the
 * four one-step slopes do not bend smoothly) are skipped, and CHECKs that no more than
 * a tenth of them are. Up to 160 elements a tensor, spread over it. */
#ifndef SQ_FLAT_CHECK_H
#define SQ_FLAT_CHECK_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "flat.h"
#include "gradcheck.h"
#include "rng.h"
#include "sasrec.h"
#include "unit.h"

typedef struct {
    const sq_flat_def *def;
    sq_flat_f64 *m;
    void *w;
    const sq_packed *b;
    int loss;
    double *scratch;
} fc_ctx;

/* The loss of kind `loss`; gBCE with t = 0.6. */
static sq_loss_spec fc_spec(int loss)
{
    sq_loss_spec l = {loss, 0.6};
    return l;
}

static double fc_loss(void *ctx)
{
    fc_ctx *c = ctx;
    int count = 0;
    const double *h = c->def->d.forward(c->m, c->w, c->b, 1, 7, 3);
    return sq_flat_loss_f64(c->m, c->b, h, fc_spec(c->loss), c->scratch, NULL, NULL, &count);
}

/* Worst relative error over up to 160 elements of x (gradient g); kinks
 * skipped and counted in *skipped, elements checked in *checked. */
static double fc_check(fc_ctx *c, double *x, const double *g, size_t n, int *skipped,
                       int *checked)
{
    double worst = 0;
    size_t stride = n > 160 ? n / 160 : 1;
    for (size_t i = 0; i < n; i += stride) {
        double save = x[i], f0 = fc_loss(c);
        x[i] = save + GC_H;
        double fp = fc_loss(c);
        x[i] = save - GC_H;
        double fm = fc_loss(c);
        x[i] = save + 2 * GC_H;
        double fp2 = fc_loss(c);
        x[i] = save - 2 * GC_H;
        double fm2 = fc_loss(c);
        x[i] = save;
        /* the four one-step slopes: on a smooth loss their successive
         * differences agree to about h^2 times the third derivative; a kink
         * anywhere in [x - 2h, x + 2h] puts a share of its jump into one */
        double sp = (fp - f0) / GC_H, sm = (f0 - fm) / GC_H;
        double sp2 = (fp2 - fp) / GC_H, sm2 = (fm - fm2) / GC_H;
        double bend = fmax(fabs((sp2 - sp) - (sp - sm)), fabs((sp - sm) - (sm - sm2)));
        if (bend > 1e-6 * fmax(fmax(fabs(sp), fabs(sm)), GC_FLOOR)) {
            ++*skipped;
            continue;
        }
        ++*checked;
        double fd = (8 * (fp - fm) - (fp2 - fm2)) / (12 * GC_H);
        double err = fabs(g[i] - fd) / fmax(fmax(fabs(g[i]), fabs(fd)), GC_FLOOR);
        if (!(err <= worst))
            worst = err;
    }
    return worst;
}

/* Returns the worst relative error (also CHECKed against tol). */
static double flat_gradcheck(unit_ctx *t, const sq_flat_def *def, const void *cfg, int target,
                             int loss, double tol)
{
    const sq_flat_head *hd = cfg;
    uint32_t V = hd->n_items, nu = hd->n_users ? hd->n_users : 1;
    enum { U = 4, MAXL = 7 };
    uint32_t items[U * MAXL], ntr[U], uid[U];
    uint64_t start[U];
    sq_rng r;
    sq_rng_seed(&r, 11, 0);
    size_t at = 0;
    for (int u = 0; u < U; u++) {
        start[u] = at;
        ntr[u] = (uint32_t)(2 + (u * 5 + 1) % (MAXL - 1)); /* 3, 2, 7, 6 */
        for (uint32_t k = 0; k < ntr[u]; k++)
            items[at++] = 1 + (uint32_t)sq_rng_below(&r, V);
        uid[u] = (uint32_t)((u * 3 + 1) % nu);
    }
    sq_seqs s = {.n_users = U, .n_items = V, .items = items, .start = start, .n_train = ntr,
                 .user_id = uid};
    sq_batcher bt;
    sq_err e = {0};
    sq_ctx cx = sq_ctx_cpu();
    cx.threads = 1;
    sq_flat_f64 m, g;
    memset(&m, 0, sizeof m);
    memset(&g, 0, sizeof g);
    memset(&bt, 0, sizeof bt);
    double worst = -1;
    int K = loss == SQ_LOSS_BCE ? 2 : 0;
    fc_ctx c = {def, &m, NULL, NULL, loss, NULL};
    double *dh = NULL;
    /* the sampled losses: two negatives, one in-batch and one uniform */
    if (sq_batcher_init(&bt, &s, target, hd->max_len, U, K, 5, &e) ||
        (sq_loss_sampled(loss) && sq_batcher_sampled(&bt, SQ_NEG_MIXED, 2, 0, &e)) ||
        sq_flat_alloc_f64(&m, def, cfg, &cx, &e) || sq_flat_alloc_f64(&g, def, cfg, &cx, &e)) {
        printf("  %s: %s\n", def->name, e.msg);
        CHECK(0);
        goto out;
    }
    sq_batcher_shuffle(&bt, 0);
    c.b = sq_batcher_get(&bt, 0, 0);
    sq_flat_cap cap = {.B = U, .T = bt.cap_T, .n = bt.cap_T, .N = hd->max_len, .train = 1};
    int D = (int)m.ts.shape[sq_tensors_find(&m.ts, def->out)][1];
    c.scratch = calloc(sq_flat_loss_scratch(def, cfg, c.b->n) + 1, sizeof *c.scratch);
    dh = calloc((size_t)c.b->n * D + 1, sizeof *dh);
    if (!c.scratch || !dh || def->d.work_alloc(&m, &cap, &c.w, &e)) {
        CHECK(0);
        goto out;
    }
    sq_flat_init_f64(&m, 3);
    for (size_t i = 0; i < m.ts.total; i++) /* generic values, padding rows included */
        m.mem[i] += 0.05 * (2 * sq_rng_uniform(&r) - 1);
    int count = 0;
    const double *h = def->d.forward(&m, c.w, c.b, 1, 7, 3);
    double L = sq_flat_loss_f64(&m, c.b, h, fc_spec(loss), c.scratch, dh, &g, &count);
    def->d.backward(&m, c.w, c.b, dh, &g);
    CHECK(count > 0 && L == L);
    int skipped = 0, checked = 0;
    worst = 0;
    for (int i = 0; i < m.ts.n; i++) {
        if (!m.ts.size[i])
            continue;
        double err = fc_check(&c, m.t[i], g.t[i], m.ts.size[i], &skipped, &checked);
        if (err > tol)
            printf("  %s: tensor %s: gradient error %.3g\n", def->name, m.ts.desc[i]->name, err);
        worst = err > worst ? err : worst;
    }
    printf("  %s (target %d, loss %d): worst %.3g over %d elements, %d at kinks skipped\n",
           def->name, target, loss, worst, checked, skipped);
    CHECK(worst <= tol);
    CHECK(skipped * 10 <= checked + skipped);
out:
    if (c.w)
        def->d.work_free(c.w);
    free(c.scratch);
    free(dh);
    sq_flat_free_f64(&g);
    sq_flat_free_f64(&m);
    sq_batcher_free(&bt);
    return worst;
}

#endif
