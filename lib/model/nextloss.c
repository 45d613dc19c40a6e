/* nextloss.c - the next-item loss of every model (nextloss.h). */
#ifndef SQ_REAL
#define SQ_REAL float
#endif
#include "real.h"

#include "nextloss.h"
#include "ops.h"

/* Entries per chunk of the shared-negative ops (ops.h 10e) in the full
 * CE's scratch (sq_ce_scratch_size(chunk, V1, C) reals, when the model
 * has one) for groups of n entries, or 0: the per-entry op then (the same
 * loss), as for a batch whose entries have their own negatives. */
static int R(shared_chunk)(const sq_packed *b, const real *scratch, int n, int C, int V1,
                           int chunk)
{
    if (!b->neg_share || !scratch || chunk < 1 || b->K < 1)
        return 0;
    return sq_sampled_shared_chunk(sq_ce_scratch_size(chunk, V1, C), n, b->K, C);
}

/* The entries [e0, e1) of b, sharing entry e0's set, through ops.h 10e:
 * their mean loss (h's rows by `rows`; without it entry e is h's row e) */
static double R(shared_group)(const sq_ctx *cx, sq_loss_spec l, const sq_packed *b, int e0,
                              int e1, const int *rows, real *dh, real *dE, real *dbias,
                              real *scratch, const real *h, const real *E, const real *bias,
                              int C, int V1, int sc, real dloss, int *count)
{
    size_t at = rows ? 0 : (size_t)e0 * (size_t)C, k0 = (size_t)e0 * (size_t)b->K;
    const int *r = rows ? rows + e0 : NULL;
    real *dhg = dh ? dh + at : NULL;
    if (l.kind == SQ_LOSS_SAMPLED_SOFTMAX)
        return R(sq_ce_sampled_shared)(cx, dhg, dE, dbias, scratch, h + at, E, bias, r,
                                       b->targets + e0, b->neg + k0, b->lq + k0, e1 - e0, b->K,
                                       C, sc, dloss, count);
    return R(sq_gbce_sampled_shared)(cx, dhg, dE, dbias, scratch, h + at, E, bias, r,
                                     b->targets + e0, b->neg + k0, e1 - e0, b->K, C, sc,
                                     (real)sq_gbce_beta(l.gbce_t, b->K, (uint32_t)V1 - 1),
                                     dloss, count);
}

/* The end of entry e0's sequence: the entries after it whose rows lie in
 * the same segment of b (a sample's entries are consecutive, batch.c) */
static int seq_end(const sq_packed *b, int e0, int *seg)
{
    int row = b->rows ? b->rows[e0] : e0;
    while (b->off[*seg + 1] <= row)
        (*seg)++;
    int e1 = e0 + 1;
    while (e1 < b->n && (b->rows ? b->rows[e1] : e1) < b->off[*seg + 1])
        e1++;
    return e1;
}

/* --neg-share sequence and batch through ops.h 10e: one group of entries a
 * set (a sequence's, or the batch's), each group's mean weighted by its
 * share of the batch's entries with a target. 0 with *count -1 when the
 * scratch cannot hold a group's chunk: the per-entry op then. */
static double R(shared_loss)(const sq_ctx *cx, sq_loss_spec l, const sq_packed *b,
                             const int *rows, real *dh, real *dE, real *dbias, real *scratch,
                             const real *h, const real *E, const real *bias, int C, int V1,
                             int chunk, real dloss, int *count)
{
    int cnt = sq_count_targets(b->targets, b->n), seg = 0;
    int sc = R(shared_chunk)(b, scratch, b->neg_share == SQ_SHARE_BATCH ? b->n : 1, C, V1,
                             chunk);
    *count = sc ? cnt : -1;
    if (!sc || !cnt)
        return 0;
    if (b->neg_share == SQ_SHARE_BATCH)
        return R(shared_group)(cx, l, b, 0, b->n, rows, dh, dE, dbias, scratch, h, E, bias, C,
                               V1, sc, dloss, count);
    double total = 0;
    for (int e0 = 0, e1; e0 < b->n; e0 = e1) {
        e1 = seq_end(b, e0, &seg);
        int c, cg = sq_count_targets(b->targets + e0, e1 - e0);
        if (!cg)
            continue;
        real w = (real)cg / (real)cnt;
        int scg = R(shared_chunk)(b, scratch, e1 - e0, C, V1, chunk);
        total += (double)w * R(shared_group)(cx, l, b, e0, e1, rows, dh, dE, dbias, scratch, h,
                                             E, bias, C, V1, scg, dloss * w, &c);
    }
    return total;
}

double R(sq_next_item_loss)(const sq_ctx *cx, sq_loss_spec l, const sq_packed *b,
                            const int *rows, real *dh, real *dE, real *dbias, real *scratch,
                            const real *h, const real *E, const real *bias, int C, int V1,
                            int chunk, real dloss, int *count)
{
    if (b->neg_share && sq_loss_sampled(l.kind)) {
        double loss = R(shared_loss)(cx, l, b, rows, dh, dE, dbias, scratch, h, E, bias, C, V1,
                                     chunk, dloss, count);
        if (*count >= 0)
            return loss;
    }
    switch (l.kind) {
    case SQ_LOSS_BCE: /* the models with a bias refuse it (check_step) */
        return R(sq_bce_sampled)(cx, dh, dE, h, E, rows, b->targets, b->neg, b->n, b->K, C,
                                 dloss, count);
    case SQ_LOSS_SAMPLED_SOFTMAX:
        return R(sq_ce_sampled_logq)(cx, dh, dE, dbias, h, E, bias, rows, b->targets, b->neg,
                                     b->lq, b->n, b->K, C, dloss, count);
    case SQ_LOSS_GBCE:
        return R(sq_gbce_sampled)(cx, dh, dE, dbias, h, E, bias, rows, b->targets, b->neg, b->n,
                                  b->K, C, (real)sq_gbce_beta(l.gbce_t, b->K, (uint32_t)V1 - 1),
                                  dloss, count);
    default:
        if (bias)
            return R(sq_ce_full_bias)(cx, dh, dE, dbias, scratch, h, E, bias, rows, b->targets,
                                      b->n, C, V1, chunk, dloss, count);
        return R(sq_ce_full)(cx, dh, dE, scratch, h, E, rows, b->targets, b->n, C, V1, chunk,
                             dloss, count);
    }
}

#if !SQ_REAL_IS_F64

double sq_gbce_beta(double t, int K, uint32_t n_items)
{
    double alpha = (double)K / ((double)n_items - 1);
    return alpha * (t * (1 - 1 / alpha) + 1 / alpha);
}

int sq_loss_batcher_negatives(sq_batcher *bt, const sq_step_opts *o, sq_err *e)
{
    if (!sq_loss_sampled(o->loss))
        return 0;
    if (sq_batcher_sampled(bt, o->neg_sampler, o->neg, o->neg_share, e)) {
        sq_batcher_free(bt);
        return e->code;
    }
    return 0;
}

static const char *const loss_names[] = {"ce", "bce", "sampled-softmax", "gbce"};

int sq_loss_check(const sq_step_opts *o, unsigned ok, const char *model, const char *why,
                  sq_err *e)
{
    if (o->loss < 0 || o->loss > SQ_LOSS_GBCE || !(ok >> o->loss & 1))
        return sq_fail(e, SQ_EX_USAGE, "--model %s cannot train --loss %s: %s", model,
                       loss_names[o->loss & 3], why);
    return 0;
}

#endif
