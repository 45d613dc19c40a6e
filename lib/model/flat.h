/* flat.h - the plumbing shared by the models with math of their own whose
 * score of an item is a dot product with an output table (gru4rec, caser,
 * fpmc, hstu): everything but the math, so that such a model is one file
 * (its math, over `real`) plus one line of the registry.
 *
 * THE MODEL WRITES
 *   - its config struct, whose FIRST member is an sq_flat_head, and its
 *     option table (opt.h; the head's fields bind like any other:
 *     .offset = offsetof(cfg, h.max_len));
 *   - `tensors`: its tensor table resolved for a config (sq_tensors_add
 *     then sq_tensors_layout); one of them is the output table O [V1, D]
 *     (V1 = n_items + 1; row 0, padding, never scored), named by `out`,
 *     and optionally a bias [V1] named by `out_bias`;
 *   - a workspace for one batch (work_alloc, work_free), over `real`;
 *     work_alloc may leave a partial workspace in *work when it fails, and
 *     work_free frees it (and does nothing for NULL);
 *   - forward: a packed batch (batch.h; ids, pos, off, rows, uid) to
 *     h [n, D], the states of the batch's n loss entries in entry order
 *     (entry i is row rows[i] of its sequence; rows NULL: every row), into
 *     a buffer of its workspace that it returns. train = 0: no dropout;
 *     train = 1: dropout drawn from (seed, step);
 *   - backward: from dh [n, D], ADDS the gradients of its tensors into g
 *     (the trainer zeroes them); the gradient of O and of the bias through
 *     the loss are flat.c's.
 *
 * FLAT.C GIVES
 *   - config from the options (an option the model does not have is a
 *     usage error naming it), model files, --help;
 *   - allocation of the parameters (one block, pointers per tensor) on the
 *     context's backend, init by the tensor table (sq_tensors_init with the
 *     def's rule; the padding row of O and of every table the def lists in
 *     `zero_row0` zeroed);
 *   - the loss of h against O: softmax cross-entropy over every item
 *     (--loss ce) or BCE with the batch's negatives (--loss bce);
 *   - the trainer's step, and scoring: each history (its newest max_len
 *     items; a cold user one padding token) packed alone with its newest
 *     row as the one entry, forward with train = 0 on one thread per
 *     history (sq_states_parallel), scores = h . O[i] (+ bias[i]): a
 *     user's scores do not depend on the batch (eval.h INVARIANCE);
 *   - on a GPU (a def with gpu_check: hstu), the same inputs one after
 *     another as one packed batch a run of histories (at most
 *     SQ_FLAT_GPU_ROWS token rows), staged and run by one forward on the
 *     device, the states and scores on the device and the scores down
 *     once: two runs give the same bits, the batch may move the last ones
 *     (the GPU's GEMMs). The step is ops only (the trainer stages the
 *     batch), and a model's host code must not touch its buffers;
 *   - USERS: a model with `users` set has a row per user (the head's
 *     n_users = the training stream's largest user id + 1, set from the
 *     data); the packed batch's uid[b] is sequence b's user id. Scoring
 *     skips the users it has no row for, or that had no training sequence
 *     (sq_model.knows_user), and seqrec-score says how many.
 *
 * A model defines `const sq_flat_def sq_flat_NAME = {...}` and then
 * `SQ_FLAT_MODEL(NAME, "summary", train_defaults)`, which defines
 * sq_model_NAME for the registry. Its gradients are checked whole, in double, by
 * sq_flat_gradcheck (tests/unit/flat_check.h). */
#ifndef SQ_FLAT_H
#define SQ_FLAT_H

#include <stddef.h>
#include <stdint.h>

#include "batch.h"
#include "ctx.h"
#include "err.h"
#include "model.h"
#include "nextloss.h"
#include "opt.h"
#include "tensor.h"

/* The first member of every flat model's config. */
typedef struct sq_flat_def sq_flat_def;

typedef struct {
    const sq_flat_def *def; /* set by sq_flat_config/_read; not an option */
    uint32_t n_items;
    uint32_t n_users;  /* users: the training stream's largest user id + 1
                          (0: not known yet) */
    int max_len;       /* newest items of a history the model reads */
} sq_flat_head;

/* The capacity of a workspace: most sequences, token rows, loss entries,
 * the longest sequence, and whether it holds the backward's buffers. */
typedef struct {
    int B, T, n, N;
    int train;
} sq_flat_cap;

/* GPU scoring: the most token rows of one forward (a run of consecutive
 * histories; one history longer than that runs alone), so that the
 * workspace stays bounded whatever the scoring batch. */
#define SQ_FLAT_GPU_ROWS 32768

#define SQ_TWICE "flat.h"
#include "twice.h"

#elif defined(SQ_DECLARE_TWICE)

/* A flat model's parameters (or gradients) in one block of cx's memory. */
typedef struct {
    const sq_flat_def *def;
    void *cfg;                      /* def->cfg_size bytes, owned */
    sq_ctx cx;
    sq_tensor_set ts;
    real *mem;                      /* ts.total reals */
    real *t[SQ_MAX_TENSORS];        /* tensor i of ts (NULL: unused) */
} R(sq_flat);

/* What a model gives in each precision. */
typedef struct {
    int (*work_alloc)(const R(sq_flat) *m, const sq_flat_cap *cap, void **work, sq_err *e);
    void (*work_free)(void *work);
    const real *(*forward)(const R(sq_flat) *m, void *work, const sq_packed *b, int train,
                           uint64_t seed, uint64_t step);
    void (*backward)(const R(sq_flat) *m, void *work, const sq_packed *b, const real *dh,
                     R(sq_flat) *g);
} R(sq_flat_fns);

/* Allocates m for a copy of cfg (checked by def->check) on cx; SQ_EX_USAGE
 * for a bad config, SQ_EX_OSERR. m is safe to free on failure. */
int R(sq_flat_alloc)(R(sq_flat) *m, const sq_flat_def *def, const void *cfg, const sq_ctx *cx,
                     sq_err *e);
void R(sq_flat_free)(R(sq_flat) *m);
/* The tensor table's init with the def's rule (host memory), row 0 of O
 * and of the def's zero_row0 tensors zeroed. */
void R(sq_flat_init)(R(sq_flat) *m, uint64_t seed);
/* The loss of a batch whose forward ran (h its result): the next-item loss
 * `loss` (nextloss.h) against the output table (and bias); with g, the
 * gradients of O and the bias are added into g and dh [n, D] is
 * overwritten with d loss / d h. scratch holds sq_flat_loss_scratch reals. */
double R(sq_flat_loss)(const R(sq_flat) *m, const sq_packed *b, const real *h, sq_loss_spec loss,
                       real *scratch, real *dh, R(sq_flat) *g, int *count);

#endif

#if !defined(SQ_DECLARE_TWICE) && !defined(SQ_FLAT_DEF_DONE)
#define SQ_FLAT_DEF_DONE

struct sq_flat_def {
    const char *name;              /* --model NAME */
    const sq_opt *opts;            /* bound into the config struct */
    size_t cfg_size;
    int users;                     /* 1: a row per user (USERS above) */
    /* SQ_EX_USAGE naming the option when the config (options applied,
     * head set) cannot be built; NULL: the option table's ranges only. */
    int (*check)(const void *cfg, sq_err *e);
    /* Its tensors for cfg (sq_tensors_add ..., sq_tensors_layout). */
    int (*tensors)(const void *cfg, sq_tensor_set *s, sq_err *e);
    const char *out, *out_bias;    /* the output table's name, its bias's (NULL: none) */
    const char *const *zero_row0;  /* NULL-ended: more tables whose row 0 is padding */
    sq_init_rule init;             /* SQ_INIT_WEIGHT/TRUNC draws */
    /* SQ_EX_USAGE for training options it cannot use (NULL: CE and BCE,
     * every --target). */
    int (*check_step)(const void *cfg, const sq_step_opts *o, sq_err *e);
    /* --device cuda: 0 when this config trains and scores on a GPU (every
     * op of its forward and backward has a CUDA twin, and its host code
     * touches no buffer), else SQ_EX_USAGE saying what does not; NULL: the
     * model runs on the CPU only (sq_flat_gpu_check refuses it). */
    int (*gpu_check)(const void *cfg, sq_err *e);
    sq_flat_fns f;                 /* float: training and scoring */
    sq_flat_fns_f64 d;             /* double: the gradient checks */
};

/* Reals of scratch sq_flat_loss needs for n entries. */
size_t sq_flat_loss_scratch(const sq_flat_def *def, const void *cfg, int n);

/* The sq_model_def sq_model_NAME of the flat model whose def is
 * sq_flat_NAME, options NAME_opts and config type sq_NAME_config; TRAIN is
 * its train_defaults (NULL: none). */
#define SQ_FLAT_MODEL(NAME, SUMMARY, TRAIN)                                                \
    static int NAME##_flat_config(void *cfg, const char *given, const sq_data_dims *d,     \
                                  sq_err *e)                                               \
    {                                                                                      \
        return sq_flat_config(&sq_flat_##NAME, cfg, given, d, e);                          \
    }                                                                                      \
    static int NAME##_flat_read(void *cfg, const sq_modelfile *mf, const char *path,       \
                                sq_err *e)                                                 \
    {                                                                                      \
        return sq_flat_config_read(&sq_flat_##NAME, cfg, mf, path, e);                     \
    }                                                                                      \
    static int NAME##_flat_load(sq_model *m, sq_modelfile *mf, const sq_ctx *cx, sq_err *e) \
    {                                                                                      \
        return sq_flat_load(&sq_flat_##NAME, m, mf, cx, e);                                \
    }                                                                                      \
    const sq_model_def sq_model_##NAME = {                                                 \
        .name = #NAME, .summary = SUMMARY, .opts = NAME##_opts,                            \
        .cfg_size = sizeof(sq_##NAME##_config), .config = NAME##_flat_config,              \
        .config_check = sq_flat_config_check, .config_write = sq_flat_config_write,        \
        .config_read = NAME##_flat_read, .load = NAME##_flat_load,                         \
        .check_step = sq_flat_check_step, .gpu_check = sq_flat_gpu_check, .graphs = 1,    \
        .net_alloc = sq_flat_net_alloc,                                                    \
        .net_free = sq_flat_net_free, .net_init = sq_flat_net_init,                        \
        .batcher = sq_flat_batcher, .work_alloc = sq_flat_work_alloc,                      \
        .work_free = sq_flat_work_free, .step = sq_flat_step, .view = sq_flat_view,        \
        .train_defaults = TRAIN,                                                           \
    }

/* The parts of SQ_FLAT_MODEL (flat.c). Those without a def find it in the
 * config's head (sq_flat_config and sq_flat_config_read set it). */
int sq_flat_config(const sq_flat_def *def, void *cfg, const char *given, const sq_data_dims *d,
                   sq_err *e);
int sq_flat_config_check(const void *cfg, sq_err *e);
int sq_flat_config_write(const void *cfg, sq_modelfile *mf, sq_err *e);
int sq_flat_config_read(const sq_flat_def *def, void *cfg, const sq_modelfile *mf,
                        const char *path, sq_err *e);
int sq_flat_load(const sq_flat_def *def, sq_model *m, sq_modelfile *mf, const sq_ctx *cx,
                 sq_err *e);
int sq_flat_check_step(const void *cfg, const sq_step_opts *o, sq_err *e);
/* The def's gpu_check, or SQ_EX_USAGE (runs on the CPU only) without one. */
int sq_flat_gpu_check(const void *cfg, sq_err *e);
/* A def's gpu_check when every config of it runs on a GPU (gru4rec, caser,
 * fpmc: each op has a CUDA twin, and the host arrays their forwards plan
 * are staged with sq_ctx_stage_add). */
int sq_flat_gpu_any(const void *cfg, sq_err *e);
int sq_flat_net_alloc(sq_net *n, const void *cfg, const sq_ctx *cx, sq_err *e);
void sq_flat_net_free(sq_net *n);
void sq_flat_net_init(sq_net *n, uint64_t seed);
int sq_flat_batcher(sq_batcher *bt, const sq_seqs *s, const void *cfg, const sq_step_opts *o,
                    sq_err *e);
int sq_flat_work_alloc(const sq_net *n, const sq_batcher *bt, void **work, sq_err *e);
void sq_flat_work_free(void *work);
double sq_flat_step(sq_net *n, void *work, const sq_packed *b, const sq_step_opts *o,
                    uint64_t step, int *count);
void sq_flat_view(sq_model *out, const sq_net *n);

#endif
