/* eval.h - ranks of held-out targets and top-K lists, for every model.
 *
 * seqrec-score and training-time validation both call sq_eval_ranks, so the
 * early-stopping metric and the published one come from the same code.
 *
 * TARGETS. For --target valid every validation target of a record is ranked
 * given the items before it (its history: with leave-one-out, the training
 * part); for --target test every test target (history: training part plus
 * validation targets). Padded streams: the history is the row's sequence
 * (dataset.h: the last run of non-zero items) followed by earlier targets;
 * only view 0 of a user is used.
 *
 * CANDIDATES. full: every item 1..n_items. uni:N: the target plus N
 * negatives drawn uniformly without replacement among the items other than
 * the target. pop:N: likewise, drawn in proportion to training popularity
 * (dataset.h pop[], items never seen in training are never drawn), without
 * replacement (successive draws, each proportional to popularity among the
 * items not drawn yet). When fewer than N items qualify, all of them are.
 * exclude_history removes the history items from the candidates (and from
 * the negatives' pool) except the target itself, which stays a candidate
 * even when the user saw it before. The draws of a target come from
 * sq_rng_seed(seed, sq_eval_stream(user, position of the target in the
 * record)): they do not depend on batching, sharding or thread count.
 *
 * ITEM FILTERS. o->item_ok (seqrec-score --exclude-items, --allow-items;
 * itemlist.h) leaves the items i with item_ok[i] == 0 out of every
 * candidate set, every negative pool and every top-K list, for every
 * model (they are dropped after the model's scores, on CPU or GPU alike).
 * A held-out target that is itself filtered is not ranked: its job is
 * dropped (sq_eval_record_jobs does not count it) and counted in
 * *o->filtered_targets. The filter is per item, so it keeps INVARIANCE.
 *
 * RANK. 1 + the candidates other than the target scoring strictly higher
 * + (pessimistic, the default) those scoring equal. n_cand counts the
 * candidates including the target. A NaN score is an error (70).
 *
 * SHARDS. --shard i/n keeps the users whose XXH3-64 (seed 0) of the user id
 * as 4 little-endian bytes is i modulo n; o->users keeps a set of users.
 *
 * INVARIANCE. A user's scores come from the model's scores function, which
 * must give every history the same bits whatever it is batched with and
 * however many threads run (sasrec.c, sasrec_model.c: one forward per
 * history, scores in a fixed order); ranks and top-K lists are computed
 * per job from those scores alone. So a user's ranks, top-K items and
 * scores are the same bytes whatever the shard, the batch size or the
 * thread count. */
#ifndef SQ_EVAL_H
#define SQ_EVAL_H

#include <stdint.h>

#include "dataset.h"
#include "err.h"
#include "metrics.h"
#include "model.h"

enum sq_eval_target { SQ_EVAL_VALID = 0, SQ_EVAL_TEST = 1 };
enum sq_cand { SQ_CAND_FULL = 0, SQ_CAND_UNI = 1, SQ_CAND_POP = 2 };

typedef struct {
    int target;           /* SQ_EVAL_VALID or SQ_EVAL_TEST */
    int cand;             /* SQ_CAND_* */
    uint32_t n_neg;       /* N of uni:N and pop:N */
    int exclude_history;  /* drop history items (not the target) from the candidates */
    int optimistic;       /* ties count for the target instead of against it */
    uint64_t seed;
    uint32_t shard_i, shard_n; /* shard_n <= 1: every user */
    const unsigned char *users; /* when set: only the users u < n_users with
                                   users[u] != 0 (seqrec-score --users) */
    uint32_t n_users;
    int batch;            /* histories per model->scores call (<= 0: sq_eval_batch's) */
    int topk_host;        /* top-K: select on the host even when the model scores
                             on a GPU (SEQREC_GPU_TOPK=host, a diagnostic) */
    int ranks_host;       /* ranks (full candidates): rank on the host even when
                             the model scores on a GPU (SEQREC_GPU_RANKS=host) */
    int threads;          /* OpenMP threads for the ranking (<= 0: the default) */
    uint64_t *expert_count; /* when set (a model with experts, model.h): each scored
                               history's retrieved experts are counted in it */
    uint64_t *unknown_users; /* when set: adds the users skipped because the model
                                cannot score them (sq_model.knows_user) */
    /* when set: told the targets ranked of all, (0, n) first and after each
     * batch, from the calling thread (seqrec-train's progress bar); it
     * changes nothing of the ranking */
    void (*progress)(void *ctx, uint64_t done, uint64_t total);
    void *progress_ctx;
    const unsigned char *item_ok; /* when set: [n_items + 1], the items that may be
                                     candidates (ITEM FILTERS) */
    uint64_t *filtered_targets;   /* when set: adds the targets not ranked because
                                     item_ok leaves them out */
} sq_eval_opts;

/* Defaults: test targets, full ranking, pessimistic ties, seed 1, the
 * batch sq_eval_batch picks. */
void sq_eval_defaults(sq_eval_opts *o);

/* The histories a scoring call takes: o->batch when given (> 0), else 256,
 * fewer for a catalogue of more than 262,143 items, so that the batch's
 * B x (n_items + 1) scores stay within SQ_EVAL_SCORES_MAX floats (256 MiB;
 * 67 for a million items, 1 from 67 million). Nothing ranked depends on
 * it (INVARIANCE). */
#define SQ_EVAL_SCORES_MAX ((size_t)64 << 20)
int sq_eval_batch(const sq_eval_opts *o, uint32_t n_items);

/* "full", "uni:N", "pop:N" (N >= 1) into o; 64 otherwise. */
int sq_eval_parse_candidates(const char *s, sq_eval_opts *o, sq_err *e);
/* "i/n" with 0 <= i < n into o; 64 otherwise. */
int sq_eval_parse_shard(const char *s, sq_eval_opts *o, sq_err *e);
/* The canonical text of the candidates option ("uni:100"), for meta lines. */
void sq_eval_candidates_name(const sq_eval_opts *o, char *buf, size_t n);

/* XXH3-64 (seed 0) of the user id as 4 little-endian bytes. */
uint64_t sq_shard_hash(uint32_t user);
/* Whether user belongs to shard i of n (every user when n <= 1). */
int sq_shard_has(uint32_t user, uint32_t i, uint32_t n);
/* The rng stream of the target at position pos of user's record. */
static inline uint64_t sq_eval_stream(uint32_t user, uint32_t pos)
{
    return ((uint64_t)user << 32) | pos;
}

/* One ranked target. */
typedef struct {
    uint32_t user, item, rank, n_cand;
} sq_rank;

/* Called for each ranked target in dataset order (records in stream order,
 * targets in sequence order); a non-zero return stops the evaluation. */
typedef int (*sq_rank_fn)(void *ctx, const sq_rank *r, sq_err *e);

/* Ranks the targets of ds chosen by o. emit (may be NULL) gets every rank;
 * acc (may be NULL, else initialised with its cutoffs) accumulates the
 * metrics. The stream must match the model (sq_model_check_stream). */
int sq_eval_ranks(sq_model *m, const sq_dataset *ds, const sq_eval_opts *o,
                  sq_rank_fn emit, void *ctx, sq_metrics *acc, sq_err *e);

/* How many results record r of ds gives under o: its ranked targets
 * (topk 0) or its one top-K list (topk 1), 0 when o's shard, users or
 * view leave it out or the model cannot score its user. Dataset order and
 * these counts are the order sq_eval_ranks and sq_eval_topk emit in (what
 * score_ranks.h merges the shards of a job by). */
uint32_t sq_eval_record_jobs(const sq_model *m, const sq_dataset *ds, const sq_eval_opts *o,
                             int topk, uint64_t r);

/* Means of HR@k and NDCG@k over the targets and their number: what
 * training early-stops on (NDCG@10 of the validation targets). */
int sq_eval_means(sq_model *m, const sq_dataset *ds, const sq_eval_opts *o, uint32_t k,
                  double *hr, double *ndcg, uint64_t *n_targets, sq_err *e);

/* The candidates other than the target for the target at position pos of
 * record rec, as sq_eval_ranks draws them, into list (room for n_items);
 * their number in *n_list. For tests and for looking at what was drawn. */
int sq_eval_candidates(const sq_dataset *ds, const sq_eval_opts *o, uint64_t rec, uint32_t pos,
                       uint32_t *list, uint32_t *n_list, sq_err *e);

/* Called with each user's top-K list, best first (k may be less than K
 * when fewer items are candidates). */
typedef int (*sq_topk_fn)(void *ctx, uint32_t user, uint32_t k, const uint32_t *items,
                          const float *scores, sq_err *e);

/* The K best items of every user of ds (view 0 of padded streams) given
 * everything known (items[hist, len): train, validation and test), among
 * every item, minus the history when o->exclude_history. Equal scores are
 * ordered by item id. Uses o's shard, batch and threads only. */
int sq_eval_topk(sq_model *m, const sq_dataset *ds, const sq_eval_opts *o, uint32_t K,
                 sq_topk_fn emit, void *ctx, sq_err *e);

#endif
