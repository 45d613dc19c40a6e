/* ranks.h - what the processes of a data-parallel job (comm.h) check and
 * share besides the gradients (micro.h ACROSS PROCESSES): that they run
 * the same thing, that their parameters stay the same, and the validation
 * ranks of their shares of the users. Every function is a no-op (or the
 * plain single-process computation) for one process. */
#ifndef SQ_RANKS_H
#define SQ_RANKS_H

#include <stddef.h>
#include <stdint.h>

#include "comm.h"
#include "ctx.h"
#include "dataset.h"
#include "eval.h"
#include "model.h"

/* XXH3-64 of the dataset's records and items: two ranks that read other
 * data (another split, another file) differ in it. */
uint64_t sq_ranks_data_hash(const sq_dataset *ds);

/* text: "key=value" lines that must be the same on every rank (the run's
 * options and data). SQ_EX_USAGE on every rank when one differs from rank
 * 0's, naming the first line that differs and both values. */
int sq_ranks_same_text(const sq_comm *c, const char *text, sq_err *e);

/* XXH3-64 of the parameters p[n] after epoch (1-based) on every rank:
 * SQ_EX_SOFTWARE naming the ranks and the hashes when they differ (a
 * rank's arithmetic went its own way: another library, another CPU). */
int sq_ranks_same_params(const sq_comm *c, const float *p, size_t n, uint64_t epoch,
                         sq_err *e);

/* sq_eval_ranks over the users, shared out: rank r ranks the users of
 * shard r of size (eval.h SHARDS), the ranks are all-gathered and every
 * rank adds them to acc in dataset order: the same sums, in the same
 * order, as one process ranking them all. */
int sq_ranks_eval(const sq_comm *c, sq_model *m, const sq_dataset *ds, const sq_eval_opts *o,
                  sq_metrics *acc, sq_err *e);

/* The GPU's communicator of the ranks of c on cx (NCCL: ctx.h), joined by
 * every rank at once, and, for an env job, c's sum of bytes over it (the
 * host collectives). The id is rank 0's, broadcast over MPI, or, in an env
 * job, passed through the file SEQREC_NCCL_ID: rank 0 writes it (it must
 * not exist: a stale id would join another job's ranks) and removes it
 * once every rank has joined; the others wait for it (SEQREC_NCCL_WAIT
 * seconds, default 300). */
int sq_ranks_nccl(sq_comm *c, const sq_ctx *cx, sq_err *e);

#endif
