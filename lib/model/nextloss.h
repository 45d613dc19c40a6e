/* nextloss.h - the next-item loss, one place for every model (--loss).
 *
 * A model's step computes the states h of its loss entries and calls
 * sq_next_item_loss with the item table E (and an output bias when it has
 * one); the loss kind picks the op:
 *   SQ_LOSS_CE   full softmax cross-entropy over items 1..n_items
 *                (ops.h 9, with the bias when there is one);
 *   SQ_LOSS_BCE  BCE against the batch's SASRec negatives (ops.h 10);
 *   SQ_LOSS_SAMPLED_SOFTMAX  softmax over the target and K sampled
 *                negatives, each negative's logit minus log(K Q) of its
 *                sampler (ops.h 10c, sampler.h);
 *   SQ_LOSS_GBCE gSASRec's gBCE over K uniform negatives (ops.h 10d) with
 *                beta = sq_gbce_beta(t, K, n_items).
 * The sampled losses take their negatives and corrections from the packed
 * batch (pb.neg, pb.lq: sq_loss_batcher asks the builder for them); with
 * pb.neg_share (--neg-share sequence or batch) SQ_LOSS_SAMPLED_SOFTMAX and
 * SQ_LOSS_GBCE take ops.h 10e, one GEMM against each set (a sequence's or
 * the batch's), in the full CE's scratch, each set's mean weighted by its
 * entries. On a GPU each op is its kernel (cuda/k_sampled.cu); the
 * loops over groups here run on the host (--neg-share sequence calls the op
 * once a sequence with a target: not graph-safe). */
#ifndef SQ_NEXTLOSS_H
#define SQ_NEXTLOSS_H

#include <stdint.h>

#include "batch.h"
#include "ctx.h"
#include "err.h"
#include "model.h"

/* seqrec-train --loss (the order of its choices). */
enum sq_loss { SQ_LOSS_CE = 0, SQ_LOSS_BCE = 1, SQ_LOSS_SAMPLED_SOFTMAX = 2, SQ_LOSS_GBCE = 3 };

static inline int sq_loss_sampled(int kind)
{
    return kind == SQ_LOSS_SAMPLED_SOFTMAX || kind == SQ_LOSS_GBCE;
}

/* The loss of a step: its kind and gBCE's calibration t. */
typedef struct {
    int kind;
    double gbce_t;
} sq_loss_spec;

static inline sq_loss_spec sq_loss_of(int kind)
{
    sq_loss_spec l = {kind, 0};
    return l;
}

static inline sq_loss_spec sq_loss_step(const sq_step_opts *o)
{
    sq_loss_spec l = {o->loss, o->gbce_t};
    return l;
}

/* gSASRec's beta (Petrov and Macdonald, RecSys 2023, eq. 10): alpha = K /
 * (n_items - 1), the share of the other items a position samples, and
 * beta = alpha (t (1 - 1/alpha) + 1/alpha); t = 0 gives beta = 1 (BCE),
 * t = 1 beta = alpha (a calibrated sigmoid). */
double sq_gbce_beta(double t, int K, uint32_t n_items);

/* The builder of a model's next-item samples with the negatives its loss
 * needs: init(K) is the model's sq_batcher_init* call given K (SASRec's
 * negatives for bce, else 0); a sampled loss then asks for o->neg
 * negatives from o->neg_sampler. */
int sq_loss_batcher_negatives(sq_batcher *bt, const sq_step_opts *o, sq_err *e);
static inline int sq_loss_bce_negatives(const sq_step_opts *o)
{
    return o->loss == SQ_LOSS_BCE ? o->neg : 0;
}

/* Refuses (SQ_EX_USAGE) the losses a model cannot train: `ok` is a mask of
 * 1 << SQ_LOSS_*; why is the model's sentence for the refusal. */
int sq_loss_check(const sq_step_opts *o, unsigned ok, const char *model, const char *why,
                  sq_err *e);

#define SQ_TWICE "nextloss.h"
#include "twice.h"

#elif defined(SQ_DECLARE_TWICE)

/* The loss of b's entries: entry i scores row rows[i] of h [*, C] (rows
 * NULL: row i) against E [V1, C] (+ bias [V1] when not NULL) for target
 * b->targets[i]; the mean over the *count entries with a target. With dh
 * and dE (and dbias with a bias) adds the gradients of dloss * loss;
 * scratch and chunk are the full CE's (sq_ce_scratch_size). */
double R(sq_next_item_loss)(const sq_ctx *cx, sq_loss_spec l, const sq_packed *b,
                            const int *rows, real *dh, real *dE, real *dbias, real *scratch,
                            const real *h, const real *E, const real *bias, int C, int V1,
                            int chunk, real dloss, int *count);

#endif
