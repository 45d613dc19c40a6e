/* score_ranks.h - scoring across the processes of a job (comm.h):
 * `mpirun -np P seqrec-score ...` (or srun).
 *
 * SHARES. Rank r scores the users of shard r of P (eval.h SHARDS: exactly
 * seqrec-score --shard r/P), keeping its results packed in memory
 * (sq_score_part). Rank 0 gathers every rank's results and hands them to
 * the output callbacks in the order one process emits them: records in
 * dataset order, each record's results (sq_eval_record_jobs: its targets,
 * or its one top-K list) the next ones of its user's shard. A result's
 * bytes do not depend on the shard (eval.h INVARIANCE), so rank 0 writes
 * what one process without --shard writes. Integer side counts (the
 * experts of --expert-stats, the users the model cannot score) are summed
 * over the ranks.
 *
 * FAILURES. Every rank takes part in every collective. A rank that fails
 * while scoring (a NaN score, out of memory) still joins the status
 * exchange (sq_score_agree): then every rank returns a failure (the
 * failing rank its own, the others "rank N failed") and the job ends
 * without rank 0 writing anything, no rank waiting on another. A failure
 * of a collective itself leaves fail.agreed 0: the caller ends the job with
 * sq_comm_abort. A rank killed by a signal is the launcher's to see: it
 * ends the job.
 *
 * MEMORY. Each rank holds its own share's results; rank 0 holds every
 * rank's (the whole output in its packed form: 16 bytes a ranked target,
 * 8 + 8K bytes a top-K list) until it has written them. They travel in
 * rounds of at most round_bytes for all ranks together, so no message
 * nears MPI's 2 GiB limit and the other ranks need one round's buffer. */
#ifndef SQ_SCORE_RANKS_H
#define SQ_SCORE_RANKS_H

#include <stddef.h>
#include <stdint.h>

#include "comm.h"
#include "dataset.h"
#include "eval.h"
#include "model.h"

/* Round size when sq_score_out.round_bytes is 0: 64 MiB. */
#define SQ_SCORE_ROUND ((size_t)64 << 20)

/* How a job's failure is known. */
typedef struct {
    int agreed; /* no rank waits on this one (every rank returns a failure, or
                   the failure is rank 0's after the last collective): the
                   processes end without sq_comm_abort */
    int remote; /* the failure is another rank's (this rank's err names it) */
    int rank;   /* the lowest rank that failed (when agreed) */
} sq_score_fail;

/* Where the results go, and what came back. */
typedef struct {
    sq_rank_fn rank;         /* ranks: on rank 0, every ranked target in dataset order */
    sq_topk_fn topk;         /* top-K: on rank 0, every user's list in dataset order */
    void *ctx;               /* for rank, topk and tick */
    void (*tick)(void *ctx); /* on rank 0 (may be NULL): each result of its own share as it
                                is scored (progress) */
    uint64_t n_experts;      /* the length of o->expert_count (when set) */
    size_t round_bytes;      /* bytes gathered a round, all ranks together (0: SQ_SCORE_ROUND) */
    sq_score_fail fail;      /* out */
} sq_score_out;

/* One shard's results, packed in the order they were emitted: sq_rank
 * records (ranks), or per top-K list uint32 user, uint32 k, k uint32 items
 * and k float scores. tick(ctx), when set, is called for each one kept. */
typedef struct {
    unsigned char *p;
    size_t n, cap;
    void (*tick)(void *ctx);
    void *ctx;
} sq_score_part;

/* sq_rank_fn and sq_topk_fn that append to the sq_score_part ctx. */
int sq_score_keep_rank(void *part, const sq_rank *r, sq_err *e);
int sq_score_keep_topk(void *part, uint32_t user, uint32_t k, const uint32_t *items,
                       const float *scores, sq_err *e);
void sq_score_part_free(sq_score_part *p);

/* Every rank's status rc (0 or an exit status): when one is non-zero every
 * rank returns non-zero, its own rc with its err, or the lowest failing
 * rank's status with "rank N failed" (fail->remote). fail->agreed says
 * that every rank knows; 0 when the exchange itself failed (then abort). */
int sq_score_agree(const sq_comm *c, int rc, sq_score_fail *fail, sq_err *e);

/* Whether every rank scores what rank 0 scores: the same model file
 * bytes, input records (ranks.h sq_ranks_data_hash), --users set and
 * scoring options (o and K). SQ_EX_USAGE on every rank otherwise, naming
 * the first rank and what differs (fail->remote but on rank 0). */
int sq_score_same(const sq_comm *c, const char *model_path, const sq_dataset *ds,
                  const sq_eval_opts *o, uint32_t K, sq_score_fail *fail, sq_err *e);

/* sq_eval_ranks (K == 0) or sq_eval_topk (K top items) over the job: each
 * rank scores its shard, rank 0 calls out->rank or out->topk with every
 * result in one process's order. One process: the plain call, emitting as
 * it goes (o's shard applies). Across processes o's shard must be unset
 * (shard_n <= 1: SQ_EX_USAGE otherwise, on every rank); o->expert_count and
 * o->unknown_users (when set) end as the sums over the ranks, on every
 * rank. */
int sq_score_run(const sq_comm *c, sq_model *m, const sq_dataset *ds, const sq_eval_opts *o,
                 uint32_t K, sq_score_out *out, sq_err *e);

/* Every rank's part (mine) to rank 0: *parts[size] there (free with
 * sq_score_parts_free), NULL elsewhere; in rounds of at most round bytes
 * for all ranks together (0: SQ_SCORE_ROUND). fail as sq_score_agree's
 * (rank 0 out of memory is every rank's failure). */
int sq_score_gather(const sq_comm *c, const sq_score_part *mine, size_t round,
                    sq_score_part **parts, sq_score_fail *fail, sq_err *e);
void sq_score_parts_free(sq_score_part *parts, int n);

/* The merge alone: parts[s] the results of shard s of n (sq_score_keep_*
 * of sq_eval_* with o's shard set to s/n), emitted through out->rank
 * (topk 0) or out->topk (topk 1) in the order of one unsharded call.
 * SQ_EX_SOFTWARE when a part does not fit the records (another order,
 * missing or extra results). */
int sq_score_merge(const sq_model *m, const sq_dataset *ds, const sq_eval_opts *o, int topk,
                   const sq_score_part *parts, int n, const sq_score_out *out, sq_err *e);

#endif
