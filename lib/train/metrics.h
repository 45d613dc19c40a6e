/* metrics.h - ranking metrics from rank records (one target per record).
 *
 * Definitions follow RecBole's top-k metrics with one relevant item per
 * record (the leave-one-out case), r the 1-based rank of the target:
 *   HR@K = Recall@K = [r <= K]
 *   NDCG@K          = [r <= K] / log2(r + 1)   (the ideal DCG is 1)
 *   MRR@K           = [r <= K] / r
 *   Precision@K     = [r <= K] / K
 *   MAP@K           = [r <= K] / r             (AP@K of one relevant item)
 *   MRR             = 1 / r                    (no cutoff)
 * each averaged over records. A user with several records (several held-out
 * targets) counts once per record: RecBole's per-interaction convention;
 * sq_metrics_units averages per user instead (--per-user). The records are
 * kept (16 bytes each) for that, for --corrected and for --compare. */
#ifndef SQ_METRICS_H
#define SQ_METRICS_H

#include <stdint.h>
#include <stdio.h>

#include "err.h"
#include "stream.h"

#define SQ_METRICS_MAX_K 32

/* One rank record as the accumulator keeps it (item 0: not given). */
typedef struct {
    uint32_t user, rank, n_cand, item;
} sq_rank_rec;

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
    sq_rank_rec *rec;    /* [records], in input order */
    uint64_t rec_cap;
    uint32_t n_items;    /* a ranks stream's catalogue (header), else 0 */
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
 * the message "rank R outside 1..N" for the caller to prefix with where.
 * The _item form keeps the target (0: unknown) for coverage and --compare. */
int sq_metrics_add(sq_metrics *m, uint32_t user, uint32_t rank, uint32_t n_cand,
                   sq_err *e);
int sq_metrics_add_item(sq_metrics *m, uint32_t user, uint32_t rank, uint32_t n_cand,
                        uint32_t item, sq_err *e);

/* ---- per-record values, units, corrections ----
 * A record's values are a vector of SQ_MV_N values per cutoff (in the
 * order of k[]) and then the uncut MRR: sq_metrics_nv(m) doubles. */
enum { SQ_MV_HR, SQ_MV_NDCG, SQ_MV_MRR, SQ_MV_MAP, SQ_MV_PREC, SQ_MV_N };
static inline int sq_metrics_nv(const sq_metrics *m) { return SQ_MV_N * m->n_k + 1; }

/* --corrected: none, or the rank estimate of Krichene and Rendle (KDD 2020,
 * section 5): from rank r among n_cand = m + 1 candidates (m sampled
 * negatives) of a catalogue of N items, the full rank's unbiased estimate
 *   R = 1 + (r - 1) (N - 1) / m
 * (E[r - 1 | R] = (R - 1) m / (N - 1) under uniform sampling without
 * replacement), and each metric at R: HR@K = [R <= K], NDCG@K =
 * [R <= K] / log2(R + 1), MRR@K = MAP@K = [R <= K] / R, MRR = 1 / R.
 * A record with n_cand >= N is a full ranking and kept as it is. */
/* SQ_CORR_BV: the bias-variance estimator of the same paper (sampled.h),
 * gamma its weight of the variance. */
enum { SQ_CORR_NONE = 0, SQ_CORR_RANK, SQ_CORR_BV };

typedef struct {
    int per_user;   /* average per user (each user's records first) */
    int corrected;  /* SQ_CORR_* */
    uint32_t n_items; /* N for --corrected (0: m->n_items) */
    double gamma;   /* SQ_CORR_BV's, in (0, 1] */
} sq_metrics_opts;

/* "rank", "bv" or "bv:GAMMA" (0 < GAMMA <= 1; bv alone 0.1) into o;
 * SQ_EX_USAGE otherwise. */
int sq_metrics_parse_corrected(const char *s, sq_metrics_opts *o, sq_err *e);

/* The values of one record into v[sq_metrics_nv(m)] (uncorrected under
 * SQ_CORR_BV, whose values need the weights sq_metrics_units computes). */
void sq_metrics_values(const sq_metrics *m, const sq_metrics_opts *o, const sq_rank_rec *r,
                       double *v);

/* The units the means run over: every record (in input order), or with
 * per_user every user (ascending id) with the mean of its records' values.
 * *vals is [*n][sq_metrics_nv(m)] (malloc'd), keys[] (malloc'd, or NULL
 * when keys is NULL) the record index (per record) or the user. A record
 * whose n_cand is below 2 with corrected is a full ranking too. */
int sq_metrics_units(const sq_metrics *m, const sq_metrics_opts *o, double **vals,
                     uint32_t **keys, uint64_t *n, sq_err *e);

/* What is printed: the means of the units and, when computed (have_*),
 * the measures of the recommended lists (exposure.h) per cutoff. */
typedef struct {
    int n_k;
    uint32_t k[SQ_METRICS_MAX_K];
    uint64_t records, users, units;
    int have_ranks;   /* 0: lists only (--topk without ranks) */
    uint64_t lists;   /* the lists of the list measures */
    int per_user, corrected;
    double gamma;
    double mean[SQ_MV_N * SQ_METRICS_MAX_K + 1];
    int have_cov, have_pop;
    double coverage[SQ_METRICS_MAX_K], gini[SQ_METRICS_MAX_K], popbias[SQ_METRICS_MAX_K];
} sq_metrics_report;

/* The report's means (have_* 0; the caller adds the rest). */
int sq_metrics_report_make(const sq_metrics *m, const sq_metrics_opts *o, sq_metrics_report *r,
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
int sq_metrics_write_table(const sq_metrics_report *r, FILE *out, const char *name, sq_err *e);
int sq_metrics_write_json(const sq_metrics_report *r, FILE *out, const char *name, sq_err *e);

#endif
