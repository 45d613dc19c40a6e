/* sampler.h - the negatives of the sampled losses (--neg-sampler).
 *
 * A sampler draws the K negatives of each loss entry of a packed batch and
 * writes, beside each, the log-Q correction c = log(K Q(item)) that the
 * sampled softmax subtracts from the negative's logit (ops.h 10c), Q the
 * probability that one draw gives that item:
 *   SQ_NEG_UNIFORM  items 1..n_items, each 1 / n_items (gSASRec's draws);
 *   SQ_NEG_POP      item i with probability count(i)^alpha / sum_j
 *                   count(j)^alpha, count(i) its occurrences in the training
 *                   parts of the stream (0 <= alpha <= 1; alpha 0: uniform over
 *                   the items that occur; an item that never occurs is never
 *                   drawn); Walker's alias table, one uniform draw each;
 *   SQ_NEG_INBATCH  the target of an entry of the batch, each entry equally
 *                   likely (with replacement; generative-recommenders'
 *                   in-batch negatives): Q(i) = c_B(i) / n with c_B(i) the
 *                   batch's entries whose target is i and n its entries, a
 *                   popularity sampler for free;
 *   SQ_NEG_MIXED    the first K1 = floor(K/2) slots in-batch and the other
 *                   K - K1 uniform (mixed negative sampling); every slot is
 *                   corrected by the mixture, K Q(i) = K1 c_B(i) / n +
 *                   (K - K1) / n_items.
 * A negative equal to its entry's target (an accidental hit) is drawn all
 * the same and masked by the loss. The draws of a sample come from its own
 * generator (batch.c: seeded by seed, epoch, user, end), the in-batch
 * draws from one seeded by (seed, epoch, batch index): neither depends on
 * the thread count, and the micro-batch parts read the batch's slots.
 *
 * --neg-sampler as an int: kind + 8 * round(1000 alpha) (pop), so the
 * option table's ENUM carries it (sq_neg_sampler_parse / _format). */
#ifndef SQ_SAMPLER_H
#define SQ_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "rng.h"

enum sq_neg_kind { SQ_NEG_UNIFORM = 0, SQ_NEG_POP = 1, SQ_NEG_INBATCH = 2, SQ_NEG_MIXED = 3 };

/* "uniform", "pop", "pop:ALPHA" (0 <= ALPHA <= 1, at most 3 decimals),
 * "in-batch", "mixed" into the packed int; -1 for anything else. */
int sq_neg_sampler_parse(const char *w);
const char *sq_neg_sampler_format(int v, char *buf, size_t n);
static inline int sq_neg_kind(int v) { return v & 7; }
static inline double sq_neg_alpha(int v) { return (double)(v >> 3) / 1000; }
/* The slots of K that are drawn in-batch (in-batch: K, mixed: K / 2). */
static inline int sq_neg_inbatch_slots(int v, int K)
{
    int k = sq_neg_kind(v);
    return k == SQ_NEG_INBATCH ? K : k == SQ_NEG_MIXED ? K / 2 : 0;
}

typedef struct {
    int kind, K;
    uint32_t n_items;
    float *prob;      /* pop: the alias table [n_items], slot j holds item j+1 */
    uint32_t *alias;
    double log_kq;    /* uniform: log(K / n_items) */
    float *log_kq_pop; /* pop: log(K Q(i)) [n_items + 1] */
    uint32_t *cnt;    /* in-batch, mixed: the batch's targets counted [n_items + 1] */
} sq_sampler;

/* Prepares the sampler v (the packed --neg-sampler) for K draws per entry
 * over items 1..n_items; pop counts the training parts, user u's
 * items[start[u] .. start[u] + n_train[u]). SQ_EX_USAGE when K is out of
 * 1..n_items - 1, SQ_EX_DATA when pop finds no item, SQ_EX_OSERR. */
int sq_sampler_init(sq_sampler *s, int v, int K, uint32_t n_items, const uint32_t *items,
                    const uint64_t *start, const uint32_t *n_train, uint32_t n_users,
                    sq_err *e);
void sq_sampler_free(sq_sampler *s);

/* The non-in-batch slots [k0, K) of one entry from r: neg and lq. */
void sq_sampler_draw(const sq_sampler *s, sq_rng *r, int k0, int *neg, float *lq);
/* The in-batch slots [0, sq_neg_inbatch_slots) of entries at[0 .. n_at)
 * (at NULL: entries 0 .. n_at - 1) of the n entries whose targets are tg,
 * with their corrections (a mixed sampler's uniform slots are corrected
 * too), from r, in that order: every entry (--neg-share position), each
 * sequence's first (sequence) or entry 0 (batch). The draws are over all
 * n targets either way. */
void sq_sampler_inbatch(sq_sampler *s, sq_rng *r, const int *tg, int n, const int *at,
                        int n_at, int *neg, float *lq);

/* --neg-share: whose entries share one set of K negatives */
enum { SQ_SHARE_POSITION = 0, SQ_SHARE_SEQUENCE = 1, SQ_SHARE_BATCH = 2 };

#endif
