/* micro.h - data-parallel micro-batches: one training step on many threads.
 *
 * Op-level threads (an OpenMP loop inside every op) synchronise dozens of
 * times per step on small tensors. A model whose loss is a mean of
 * per-sequence terms (sq_model_def.micro_batches) can instead cut the batch
 * into one micro-batch per thread (sq_packed_split): each thread runs the
 * model's own single-threaded step on its part, into its own gradients,
 * and the gradients are added in the order of the parts, weighted by their
 * share of the loss entries:
 *
 *   g = sum_k (n_k / n) g_k,   loss = sum_k (n_k / n) loss_k,
 *
 * which is the gradient of the whole batch's mean loss. The order is fixed,
 * so a seed and a thread count give the same bits every time. Worker 0 is
 * the trainer's net; the others are nets of their own that read its
 * parameters (def->share_params; without it, copied before each step). A worker's dropout draws use the step
 * number with the part's index in its high bits, so no two parts share a
 * mask.
 *
 * ACROSS PROCESSES. Under a launcher (comm.h) with R ranks of P threads
 * each, the batch is cut into G = R P parts, the same cut on every rank
 * (each builds the same seeded batch); rank r runs parts [r P, r P + P)
 * on its threads and the ranks all-gather the parts' losses and counts
 * (the weights). The gradient is summed around a ring of the ranks, in
 * slices of SQ_MICRO_SLICE elements: a slice starts on rank 0, and rank r
 * receives the sum of parts [0, r P) from rank r - 1, adds its own parts
 * to it in their order and sends it on to r + 1; from the last rank the
 * finished slice goes round once more to ranks 0 .. R - 2. Every rank
 * sends and receives at once, each a different slice, so the ranks add
 * at once. Each element is the same left fold over parts 0 .. G - 1 as in
 * one process with --threads R P: the same bits, and every rank applies
 * the same update. A rank holds its P parts and two slices, not G
 * gradients. Only the elements to sum move: of a row-sparse tensor
 * (def->grad_rows) the step's rows, packed (a million-item table's
 * gradient is its batch's rows).
 *
 * On GPUs (P = 1) rank r runs part r alone; the parts' losses and entries
 * are summed over NCCL (each rank gives its own slot, exactly), each rank
 * scales its gradient by its weight n_r / n and NCCL sums the gradients
 * in place (ctx.h: its order pinned, so the same ranks give the same bits
 * every run, though not one GPU's bits); of a row-sparse tensor the
 * step's rows alone, gathered into one packed buffer and put back. A batch that cannot be cut is
 * rank 0's step, the others adding zeros. The step stages its own part
 * (sq_micro_stages). */
#ifndef SQ_MICRO_H
#define SQ_MICRO_H

#include "adam.h"
#include "comm.h"
#include "model.h"

/* parts of a step: threads, or ranks x threads */
#define SQ_MICRO_MAX 256
/* the elements a rank sums and sends on at once (ACROSS PROCESSES): 4 MiB.
 * Each slice is a meeting of two ranks, which can cost a scheduler's time
 * slice on busy cores (in one trial on 2 shared cores, 256 KiB slices made
 * Beauty's 2-rank epoch about 1.5x slower); a gradient of tens of millions
 * is still tens of slices, a pipeline. The bits do not depend on it. */
#define SQ_MICRO_SLICE ((size_t)1 << 20)

/* A run of gradient elements that ranks sum (ACROSS PROCESSES): elements
 * [x, x + m), at p in the order they travel in */
typedef struct {
    size_t x, m, p;
} sq_micro_seg;

typedef struct {
    int P;                       /* this process's parts (1: plain steps) */
    int G;                       /* the batch's parts: P, times the ranks */
    int base;                    /* this rank's first part (rank * P) */
    const sq_comm *comm;         /* the ranks (NULL: one process) */
    float *in, *out;             /* ranks > 1: a slice received, one sent
                                    [SQ_MICRO_SLICE] (micro.c ring_sum) */
    sq_micro_seg *segs;          /* the elements a step's sum moves, in order */
    int n_segs, cap_segs;
    size_t active;               /* their count */
    double *loss;                /* ranks > 1: every part's loss [G] */
    int *cnt;                    /* and its entries [G] */
    int gpu;                     /* ranks on GPUs: NCCL sums the gradient */
    const sq_ctx *cx;            /* gpu: the backend of stats */
    double *stats, *stats_host;  /* gpu: every part's loss and entries [2 G],
                                    on the device and on the host */
    sq_ctx cx1;                  /* the workers' context: one thread */
    sq_net net[SQ_MICRO_MAX];    /* [1, P): the workers' nets */
    void *work[SQ_MICRO_MAX];    /* [1, P): their work */
    sq_packed part[SQ_MICRO_MAX];
    int shared;                  /* the workers read net's parameters */
    int clean[SQ_MICRO_MAX];     /* worker k's gradients are all zero */
    int *buf;                    /* the parts' rebased offsets and rows */
    size_t cap;
    int defer;                   /* leave the sum to sq_micro_adam (set by the
                                    caller when nothing reads the whole
                                    gradient first: no clipping) */
    int lazy;                    /* the update is lazy Adam (set by the caller):
                                    on a GPU the step's rows are marked and
                                    listed for it, else not at all */
    int np;                      /* parts of the last step not yet summed */
    float w[SQ_MICRO_MAX];       /* their weights n_k / n */
    uint32_t *mark, stamp;       /* the step's rows of tensor rows_t
                                    (def->grad_rows): mark[r] == stamp */
    uint64_t mark_n;
    int rows_t;                  /* -1: the step's gradient is dense */
    size_t rows_most;            /* the most rows the step's shape marks
                                    (def->grad_rows's value) */
    uint32_t *list;              /* a GPU's lazy update and ranks' sum: the
                                    marked rows [mark_n] in the order marked
                                    (listed of them), padded to rows_most */
    size_t listed;
    float *packed;               /* gpu: the step's rows of tensor rows_t,
                                    packed for NCCL [cap_packed] */
    int *dlist;                  /* gpu: their rows, on the device */
    size_t cap_packed;
    int dense_sum;               /* gpu: sum every value (a diagnostic, set by
                                    the caller: the same sums; several ranks'
                                    NCCL may add them in another order) */
    sq_adam_piece *pieces;       /* the update's pieces (sq_micro_adam) */
    int n_pieces, cap_pieces;
} sq_micro;

/* Sets up P = threads parts when the model allows it (def->micro_batches),
 * the backend is the CPU and threads > 1; P = 1 otherwise. With comm (may
 * be NULL) of several ranks, G = ranks x P parts (ACROSS PROCESSES);
 * SQ_EX_USAGE when the model or the backend cannot, or G > SQ_MICRO_MAX. */
int sq_micro_open(sq_micro *mb, const sq_model_def *def, const void *cfg, const sq_net *net,
                  const sq_batcher *bt, int threads, const sq_comm *comm, sq_err *e);
void sq_micro_close(sq_micro *mb, const sq_model_def *def);
/* Whether sq_micro_train stages the batch (ranks on GPUs stage their own
 * part): the caller then does not. */
static inline int sq_micro_stages(const sq_micro *mb) { return mb->gpu; }

/* One step on batch b: zeroes net->grads, then as model.h's step (the mean
 * loss over *count entries, gradients in net->grads), on the parts in
 * parallel when the batch can be cut. With mb->defer the parts' gradients
 * are left unsummed for sq_micro_adam. */
double sq_micro_step(sq_micro *mb, const sq_model_def *def, sq_net *net, void *work,
                     const sq_packed *b, const sq_step_opts *so, uint64_t step, int *count);

/* A run of parameters and its Adam config (train.c: the weight-decay
 * groups): adam.h's, so that a GPU updates them all in one call */
typedef sq_adam_run sq_micro_run;

/* Adam (adam.h) on the runs with the step's gradient, t >= 1 the step
 * count. Deferred, the parts are summed into net->grads there, chunk by
 * chunk, in the order sq_micro_step would have used (the same bits), every
 * part and the sum zeroed in the same pass (so the next step need not),
 * and the rows of a row-sparse tensor (def->grad_rows) that the step did
 * not touch updated with a zero gradient without reading any; the whole
 * update is one parallel loop (an idle OpenMP thread sleeps: each loop
 * costs a wake-up). Call it after every step (a deferred step's gradient
 * exists only as its unsummed parts). SQ_EX_OSERR out of memory. */
int sq_micro_adam(sq_micro *mb, sq_net *net, float *m, float *v, const sq_micro_run *runs,
                  int n_runs, long t, sq_err *e);

/* One training step with its update: sq_micro_step, then, when the loss
 * is finite and at most max_loss and (clipping) the gradient norm finite,
 * global-norm clipping and sq_micro_adam. A deferred step of several parts
 * runs its update in the parts' own parallel region (one wake-up of a
 * sleeping thread a step, not two). Set mb->defer only without clipping. */
typedef struct {
    float *m, *v;               /* Adam's moments */
    const sq_micro_run *runs;
    int n_runs;
    long t;                     /* the update's step count, >= 1 */
    double max_loss;            /* no update above it (0: no bound) */
    double clip;                /* the gradient's global-norm bound (0: none) */
} sq_micro_update;

typedef struct {
    double loss;                /* as sq_micro_step */
    double norm;                /* before clipping (0 without) */
    int count;                  /* the loss entries */
    int updated;                /* 0: not updated (a loss or norm out of bounds) */
} sq_micro_result;

/* 0, or an error code with e set (out of memory; SQ_EX_SOFTWARE for
 * clipping with mb->defer set) */
int sq_micro_train(sq_micro *mb, const sq_model_def *def, sq_net *net, void *work,
                   const sq_packed *b, const sq_step_opts *so, uint64_t step,
                   const sq_micro_update *u, sq_micro_result *res, sq_err *e);
/* A step's loss that allows its update: finite, at most max_loss (0: no
 * bound). */
int sq_micro_passes(double loss, double max_loss);
/* The update of a summed step whose loss and count are known (the tail of
 * sq_micro_train: a CUDA graph's step reads its loss after the graph). */
int sq_micro_finish(sq_micro *mb, sq_net *net, double loss, int count,
                    const sq_micro_update *u, sq_micro_result *res, sq_err *e);

#endif
