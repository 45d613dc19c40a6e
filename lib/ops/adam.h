/* adam.h - Adam / AdamW and global-norm gradient clipping.
 *
 * The optimiser state is two flat arrays m, v of the parameters' size (zero
 * at the start), so a checkpoint saves them as they are, plus the step
 * counter t that the caller keeps (1 for the first update). Parameters in
 * several groups (say, no weight decay for biases) are updated by one call
 * per group on the matching slices of param, grad, m and v.
 *
 * Like the ops, every function takes the op context first (ctx.h) and
 * exists for float (the name) and double (name_f64), compiled from the same
 * source (see real.h). */
#ifndef SQ_ADAM_H
#define SQ_ADAM_H

#include <stddef.h>
#include <stdint.h>

#include "ctx.h"

typedef struct {
    double lr;           /* learning rate */
    double beta1, beta2; /* moment decay rates, e.g. 0.9, 0.999 (0.98 SASRec) */
    double eps;          /* 1e-8 */
    double weight_decay; /* 0 for none */
    int decoupled;       /* 1: AdamW (decay the weights, Loshchilov & Hutter);
                            0: Adam (add weight_decay * param to the gradient,
                            PyTorch's Adam(weight_decay=...)) */
    int lazy;            /* 1: lazy Adam: the unmarked rows of a row-sparse
                            tensor (sq_adam_update_pieces) keep their values
                            and moments, as PyTorch's SparseAdam and
                            TensorFlow's LazyAdam; 0: exact Adam, whose
                            moments decay in every row every step */
} sq_adam_cfg;

/* A piece of a fused update (sq_adam_update_pieces) */
typedef struct {
    size_t off;   /* its segment's first element in the parameter block */
    size_t a, b;  /* elements [a, b) of the segment, rows when width > 0 */
    size_t width; /* 0: dense; else the row width of a row-sparse tensor */
    int cfg;      /* which of the update's configs */
} sq_adam_piece;

enum { SQ_ADAM_CFGS = 4 }; /* configs of one fused update at most */

/* A run of sq_adam_update_runs: elements [off, off + len), config cfg */
typedef struct {
    size_t off, len;
    const sq_adam_cfg *cfg;
} sq_adam_run;


/* sq_adam_update_rows: a list entry that names no row (padding a list to
 * the length a CUDA graph's step fixed) */
#define SQ_ADAM_NO_ROW UINT32_MAX

#define SQ_TWICE "adam.h"
#include "twice.h"

#elif defined(SQ_DECLARE_TWICE)

/* One update of n parameters at step t >= 1, in PyTorch's form:
 *   g = grad (+ wd * param for Adam)      param *= 1 - lr wd (AdamW)
 *   m = b1 m + (1 - b1) g                 v = b2 v + (1 - b2) g^2
 *   param -= lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps) */
void R(sq_adam_update)(const sq_ctx *cx, real *param, const real *grad, real *m,
                       real *v, size_t n, const sq_adam_cfg *cfg, long t);

/* sq_adam_update on each run of the block, elements [off, off + len) with
 * its config, as one call (on a GPU one launch, not one a run: a model's
 * runs alternate between decayed weights and the rest). The same bits as
 * a call a run. */
void R(sq_adam_update_runs)(const sq_ctx *cx, real *param, const real *grad, real *m, real *v,
                            const sq_adam_run *runs, int n, long t);

/* The update of sq_adam_update on rows rows[0 .. n) of `width` elements
 * (row r: elements [r width, (r + 1) width) of param, grad, m and v) and
 * on nothing else: lazy Adam's step on a row-sparse tensor, the rows
 * the step touched. The rows are distinct, a host array; SQ_ADAM_NO_ROW
 * entries are skipped. The same bits as sq_adam_update_pieces's marked
 * rows. */
void R(sq_adam_update_rows)(const sq_ctx *cx, real *param, const real *grad, real *m,
                            real *v, size_t width, const uint32_t *rows, size_t n,
                            const sq_adam_cfg *cfg, long t);

/* grad = w[0] grad + w[1] parts[1] + ... + w[np-1] parts[np-1], added in
 * that order (parts[0] is not read: grad is part 0); every part k >= 1 is
 * zeroed once read. The sum of data-parallel gradients (micro.h). */
void R(sq_grad_sum)(const sq_ctx *cx, real *grad, real *const *parts, const real *w, int np,
                    size_t n);

/* sq_grad_sum, then sq_adam_update with the sum, then grad zeroed, as one
 * pass over memory, in pieces (sq_adam_piece) that one parallel loop
 * shares out: a dense piece is elements [off + a, off + b) of the block; a
 * row-sparse one is rows [a, b) of `width` of the tensor at element off,
 * whose gradient (every part's) is zero but in the rows r with mark[r] ==
 * stamp: the other rows are updated with a zero gradient and no gradient
 * read or written (a lazy config: not updated at all, nothing read). Piece i takes the constants of cfgs[pc[i].cfg]. The
 * same bits as summing, then sq_adam_update, for any cut into pieces. np
 * 1: grad alone, w not read. */
void R(sq_adam_update_pieces)(const sq_ctx *cx, real *param, real *grad, real *const *parts,
                              const real *w, int np, real *m, real *v,
                              const sq_adam_piece *pc, int n_pieces,
                              const sq_adam_cfg *const *cfgs, int n_cfgs,
                              const uint32_t *mark, uint32_t stamp, long t);

/* sq_adam_update_pieces without its parallel region: the calling thread's
 * share of the pieces (an orphaned `omp for`, no barrier at its end).
 * Called by every thread of a region, the team shares the pieces (micro.c
 * runs the update in the region of the step's parts); outside a region,
 * the caller updates them all. */
void R(sq_adam_share_pieces)(real *param, real *grad, real *const *parts, const real *w,
                             int np, real *m, real *v, const sq_adam_piece *pc, int n_pieces,
                             const sq_adam_cfg *const *cfgs, int n_cfgs, const uint32_t *mark,
                             uint32_t stamp, long t);

/* The L2 norm of g[n], summed in double in a fixed order. */
double R(sq_grad_norm)(const sq_ctx *cx, const real *g, size_t n);

/* Global-norm clipping: when the norm exceeds max_norm > 0, scales g by
 * max_norm / (norm + 1e-6) (PyTorch clip_grad_norm_). Returns the norm
 * before clipping; a non-finite norm is returned and g left alone, so the
 * caller can stop on divergence. */
double R(sq_grad_clip)(const sq_ctx *cx, real *g, size_t n, double max_norm);

#endif
