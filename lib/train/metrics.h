/* metrics.h - ranking metrics from rank records (one target per record).
 *
 * Definitions follow RecBole's top-k metrics with one relevant item per
 * record (the leave-one-out case), r the 1-based rank of the target:
 *   HR@K = Recall@K = [r <= K]
 *   NDCG@K          = [r <= K] / log2(r + 1)   (the ideal DCG is 1)
 *   MRR@K           = [r <= K] / r
 *   Precision@K     = [r <= K] / K
 *   MRR             = 1 / r                    (no cutoff)
 * each averaged over records. A user with several records (several held-out
 * targets) counts once per record: RecBole's per-interaction convention. */
#ifndef SQ_METRICS_H
#define SQ_METRICS_H

#include <stdint.h>
#include <stdio.h>

#include "err.h"
#include "stream.h"

#define SQ_METRICS_MAX_K 32

typedef struct {
    int n_k;
    uint32_t k[SQ_METRICS_MAX_K];  /* the cutoffs, in the order given */
    uint64_t records;
    /* Sums over records; divide by records for the means. */
    double hit[SQ_METRICS_MAX_K];
    double ndcg[SQ_METRICS_MAX_K];
    double mrr_at[SQ_METRICS_MAX_K];
    double mrr;
    /* Distinct users: open addressing on user + 1 (0 = empty slot). */
    uint64_t *users;
    uint64_t users_cap;  /* power of two, or 0 */
    uint64_t n_users;
} sq_metrics;

/* The means for one cutoff. */
typedef struct {
    uint32_t k;
    double hr, recall, ndcg, mrr, precision;
} sq_metrics_at;

/* Parses a cutoff list "10,20" (positive, distinct, at most
 * SQ_METRICS_MAX_K) into k[]; SQ_EX_USAGE on error. */
int sq_metrics_parse_k(const char *s, uint32_t *k, int *n_k, sq_err *e);

/* Starts an empty accumulator for the cutoffs k[0..n_k). */
int sq_metrics_init(sq_metrics *m, const uint32_t *k, int n_k, sq_err *e);
void sq_metrics_free(sq_metrics *m);

/* Adds one record. rank must be in 1..n_cand: otherwise SQ_EX_DATA with
 * the message "rank R outside 1..N" for the caller to prefix with where. */
int sq_metrics_add(sq_metrics *m, uint32_t user, uint32_t rank, uint32_t n_cand,
                   sq_err *e);

/* Means for cutoff j (0..n_k-1) and the uncut MRR; 0 with no records. */
sq_metrics_at sq_metrics_get(const sq_metrics *m, int j);
double sq_metrics_mrr(const sq_metrics *m);

/* Parses one line of the ranks text form
 *   user <TAB> rank <TAB> n_cand [<TAB> item]
 * into rec (user, rank, n_cand, item; item 0 when absent). Returns 1 for a
 * record, 0 for a blank or '#' comment line, -1 when malformed with the
 * reason in why. Fields may also be separated by spaces. */
int sq_ranks_parse_line(const char *line, sq_record *rec, char *why, size_t why_len);

/* Reads every record of f into m: a SQ_RANKS stream when the first byte is
 * 'S' (the "SQRC" magic), else the text form. Errors are "NAME: line N:
 * reason" (text) or "NAME: byte N: reason" (stream), code 65; an input
 * without records is an error too. */
int sq_metrics_read(sq_metrics *m, FILE *f, const char *name, sq_err *e);

/* The results as an aligned table or as one JSON object (with newline). */
int sq_metrics_write_table(const sq_metrics *m, FILE *out, const char *name, sq_err *e);
int sq_metrics_write_json(const sq_metrics *m, FILE *out, const char *name, sq_err *e);

#endif
