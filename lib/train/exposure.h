/* exposure.h - what recommended lists show of the catalogue: item
 * coverage@K, the Gini index of the items' exposure@K and the popularity
 * bias@K (seqrec-metrics --topk, --coverage, --popularity).
 *
 * A list is a user's items best first: a top-K list of seqrec-score, or the
 * one target of a rank record at its rank (what the ranks show of a list:
 * the item is in the top K when its rank is). Over the lists, at cutoff K,
 * with count(i) the number of lists holding item i within their first K
 * and N the catalogue's items 1..N:
 *   Coverage@K = |{i : count(i) > 0}| / N
 *   Gini@K     = sum_j (2j - N - 1) c_(j) / (N sum_j c_(j)), c_(1) <= ... <=
 *                c_(N) the counts in ascending order (0 for no exposure)
 *   PopBias@K  = the mean over lists (per user: over users, each the mean of
 *                its lists) of the mean popularity percentile of the list's
 *                items within K; lists with none within K do not count.
 * The popularity percentile of item i (0..100, 100 the most popular) from
 * its training count c_i among the N items: 100 (#{c < c_i} +
 * #{c == c_i} / 2) / N, scipy.stats.percentileofscore's kind "mean". */
#ifndef SQ_EXPOSURE_H
#define SQ_EXPOSURE_H

#include <stdint.h>
#include <stdio.h>

#include "err.h"
#include "metrics.h"

typedef struct {
    int n_k;
    uint32_t k[SQ_METRICS_MAX_K];
    uint32_t n_items;
    uint64_t *count;    /* [n_k][n_items + 1] */
    const double *pct;  /* [n_items + 1] popularity percentiles, or NULL */
    uint32_t *user;     /* per list */
    double *pop;        /* per list [n_k]: mean percentile within K, NaN: none */
    uint64_t n_lists, cap;
} sq_exposure;

/* n_items 0: set later (sq_exposure_set_items, or a topk stream's). */
int sq_exposure_init(sq_exposure *x, const uint32_t *k, int n_k, uint32_t n_items,
                     const double *pct, sq_err *e);
int sq_exposure_set_items(sq_exposure *x, uint32_t n_items, sq_err *e);
void sq_exposure_free(sq_exposure *x);

/* Adds a list of len items whose first is at position pos0 (1 for a top-K
 * list, the rank for a rank record's target). An item outside 1..n_items
 * is SQ_EX_DATA "item I outside 1..N" for the caller to prefix. */
int sq_exposure_add(sq_exposure *x, uint32_t user, const uint32_t *items, uint32_t len,
                    uint32_t pos0, sq_err *e);

/* Coverage, Gini and (with pct) PopBias into r (have_cov, have_pop set);
 * per_user as in sq_metrics_opts. */
int sq_exposure_report(const sq_exposure *x, int per_user, sq_metrics_report *r, sq_err *e);

/* The popularity percentiles pct[1..n] of counts c[1..n] (pct[0] = 0). */
int sq_popularity_pct(const uint64_t *c, uint32_t n, double *pct, sq_err *e);

/* Reads the top-K lists of f into x: a topk stream (first byte 'S') or the
 * tsv form of seqrec-score --topk, "user<TAB>item:score,item:score,..."
 * with dense ids. A stream's header gives the catalogue when x has none
 * yet (n_items 0 at init); text then is SQ_EX_USAGE. Errors name the line
 * or byte, 65. */
int sq_exposure_read_topk(sq_exposure *x, FILE *f, const char *name, sq_err *e);

#endif
