/* nextloss.c - the next-item loss of every model (nextloss.h). */
#ifndef SQ_REAL
#define SQ_REAL float
#endif
#include "real.h"

#include "nextloss.h"
#include "ops.h"

/* Entries per chunk of the shared-negative ops (ops.h 10e) in the full
 * CE's scratch (sq_ce_scratch_size(chunk, V1, C) reals, when the model
 * has one), or 0: the per-entry op then (the same loss), as for a batch
 * whose entries have their own negatives. */
static int R(shared_chunk)(const sq_packed *b, const real *scratch, int C, int V1, int chunk)
{
    if (!b->neg_shared || !scratch || chunk < 1)
        return 0;
    return sq_sampled_shared_chunk(sq_ce_scratch_size(chunk, V1, C), b->n, b->K, C);
}

double R(sq_next_item_loss)(const sq_ctx *cx, sq_loss_spec l, const sq_packed *b,
                            const int *rows, real *dh, real *dE, real *dbias, real *scratch,
                            const real *h, const real *E, const real *bias, int C, int V1,
                            int chunk, real dloss, int *count)
{
    int sc = R(shared_chunk)(b, scratch, C, V1, chunk); /* row 0: the set */
    if (sc && l.kind == SQ_LOSS_SAMPLED_SOFTMAX)
        return R(sq_ce_sampled_shared)(cx, dh, dE, dbias, scratch, h, E, bias, rows, b->targets,
                                       b->neg, b->lq, b->n, b->K, C, sc, dloss, count);
    if (sc && l.kind == SQ_LOSS_GBCE)
        return R(sq_gbce_sampled_shared)(cx, dh, dE, dbias, scratch, h, E, bias, rows,
                                         b->targets, b->neg, b->n, b->K, C, sc,
                                         (real)sq_gbce_beta(l.gbce_t, b->K, (uint32_t)V1 - 1),
                                         dloss, count);
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
