/* train.h - the training loop of seqrec-train: epochs of packed batches,
 * Adam, validation with lib/eval (the code seqrec-score runs), early
 * stopping on a validation metric (--stop-metric, default NDCG@10),
 * checkpoints and resume.
 *
 * The model is any trained model of the registry (o->model, its config
 * o->cfg): the loop never names one. The model supplies its batches (next
 * item, cloze, ...) and its step (forward, loss, backward); the loop owns
 * the optimiser, validation, early stopping, checkpoints and resume, on the
 * flat parameter block the model's tensor table lays out (model.h).
 *
 * EPOCH e (0-based): shuffle the samples by (seed, e) (batch.h); for each
 * batch: zero the gradients, the model's step (dropout drawn from (seed,
 * step)), optional global-norm clipping, Adam (AdamW-style decoupled
 * weight decay on the tensors the model's table marks: matrices and
 * embeddings), step += 1. Every
 * eval_every epochs (and after the last) the validation targets are ranked
 * against the candidates of --valid-candidates (every item by default;
 * uni:N and pop:N drawn from --valid-seed exactly as `seqrec-score -t valid
 * -c C -s SEED` draws them: eval.h; history items excluded from the
 * candidates with --valid-exclude-history, as by -x); a higher value
 * of the stop metric than the best so far makes these the best parameters
 * (kept in the checkpoint); `patience` evaluations in a row without
 * improvement stop the run (0: never). Without validation targets there is
 * no evaluation and the model of the last epoch is kept.
 *
 * OUTPUT. The model file is written once, atomically, when the run ends
 * well (the best parameters, or the last without validation): a run that
 * fails (out of memory, a write error, ...) leaves no model of its own,
 * and a model an earlier run left at out_path stays as it was. A run
 * stopped by SIGINT, SIGTERM or SIGHUP (fileio.h removes the temp files)
 * keeps its last checkpoint, so --resume goes on; its best model so far is
 * in that checkpoint (resume it with --epochs no larger than the epochs
 * done to write it).
 *
 * CHECKPOINT. After every epoch OUT.ckpt is written atomically: the model
 * file's config and tensors plus the Adam moments ("adam.m", "adam.v"), the
 * best parameters ("best.params") and the loop state ("train.state": epochs
 * done, step, best epoch, evaluations without improvement, the best value
 * of the stop metric, the best epoch's HR@10, has-best and stop flags, then
 * its NDCG@10 and MRR@10; a checkpoint written before --stop-metric has only
 * the first eight, its best value being NDCG@10, the default stop
 * metric's). Every random draw is a pure function of (seed, epoch, step,
 * user), so that state is all the generator state there is: a run resumed
 * from the checkpoint of epoch k ends bit-identical to the uninterrupted
 * run (same thread count). A finished run's checkpoint stays; resuming it
 * rewrites the same final model (or trains on with a larger epochs).
 *
 * INIT. With o->init (not with resume) the parameters start from that model
 * file instead of the seeded init: the model's init_from hook (model.h)
 * copies its tensors after net_init, so that items the stream has and the
 * file has not start as a fresh run's would. The file must be of o->model,
 * of the same dataset (its data.dataset meta, when both have one) and of
 * no more items than the stream (SQ_EX_DATA otherwise); Adam's moments and
 * the loop state start from zero. sq_train_init_config builds o->cfg from
 * the file.
 *
 * DIVERGENCE. A non-finite loss or gradient norm stops the run with
 * SQ_EX_SOFTWARE before the update is applied; the one failure that writes
 * the output: the best model so far (none when no evaluation had happened;
 * then an earlier run's model stays as it was), and no checkpoint of the
 * diverged state is written.
 *
 * RANKS. Under a launcher (o->comm of several processes) the ranks train
 * one model data-parallel (micro.h ACROSS PROCESSES): the same bits as one
 * process with --threads ranks x threads. At the start the ranks compare
 * their options, thread counts and data (SQ_EX_USAGE naming the first
 * difference); after every epoch the hashes of their parameters
 * (SQ_EX_SOFTWARE if they differ); validation ranks each rank's share of
 * the users (ranks.h). Only rank 0 writes the model and the checkpoint.
 * The checkpoint records the parts a step was cut into ("train.parts":
 * ranks x threads); a launcher run resumes only a checkpoint of as many
 * parts (the same cut, the same bits), and says which. A failing rank's
 * caller ends the job (sq_comm_abort).
 *
 * ID MAP. With o->id_map the model file and the checkpoint carry that text
 * (the map file of seqrec-preprocess --map) as the tensor "id_map"
 * (modelfile.h): the model file is then the one artifact a deployment
 * needs. sq_train_pick_map decides what a run carries. */
#ifndef SQ_TRAIN_H
#define SQ_TRAIN_H

#include <stdint.h>

#include "comm.h"
#include "dataset.h"
#include "err.h"
#include "model.h"
#include "opt.h"

typedef struct {
    const sq_model_def *model;  /* a trained model of the registry */
    void *cfg;              /* its config (model->cfg_size bytes, the caller's) */
    int loss;               /* SQ_LOSS_* (nextloss.h) */
    int neg;                /* negatives per position (bce, sampled losses) */
    int neg_sampler;        /* --neg-sampler, packed (sampler.h) */
    int neg_share;          /* --neg-share: SQ_SHARE_* (sampler.h) */
    double gbce_t;          /* --gbce-t */
    int target;             /* SQ_TARGET_* (batch.h) */
    int stride;             /* --window-stride (0: max_len) */
    double lr, beta1, beta2, eps, weight_decay, clip;
    int lazy_adam;          /* --lazy-adam: skip a sampled step's untouched rows */
    int batch, epochs, patience, eval_every;
    uint64_t seed;
    int threads;            /* 0: the OpenMP default */
    const sq_ctx *cx;       /* the backend (--device), made by main; NULL:
                               the CPU with `threads` */
    const sq_comm *comm;    /* the job's processes (comm.h), made by main;
                               NULL: one process (RANKS) */
    double max_loss;        /* a batch loss above it stops the run (0: off) */
    int graphs;             /* --cuda-graphs: each step's forward and backward
                               a CUDA graph of its padded size (graph.cu) */
    int graphs_eager;       /* with graphs: the padded steps without graphs
                               (SEQREC_CUDA_GRAPHS=eager, a diagnostic) */
    int nccl_dense;         /* ranks on GPUs: NCCL sums every gradient value,
                               not a row-sparse tensor's step rows alone
                               (SEQREC_NCCL_SUM=dense, a diagnostic) */
    const char *init;       /* a model file to start from (--init), or NULL */
    int valid_cand;         /* --valid-candidates: SQ_CAND_* (eval.h) + 4 N */
    uint64_t valid_seed;    /* --valid-seed: the seed of the uni:N/pop:N draws */
    int valid_exclude_history; /* --valid-exclude-history: as seqrec-score -x */
    int stop_metric;        /* --stop-metric: SQ_STOP_* + 4 K */
    const char *id_map;     /* the id map the model carries (ID MAP), or NULL */
    size_t id_map_len;
} sq_train_opts;

/* --stop-metric: the validation metric that picks the best epoch and
 * drives --patience (metrics.h: HR@K and Recall@K are equal with one
 * target, but each is named as given). */
enum { SQ_STOP_NDCG = 0, SQ_STOP_HR = 1, SQ_STOP_RECALL = 2, SQ_STOP_MRR = 3 };
#define SQ_STOP_MAX_K (1 << 20)
/* "ndcg@K", "hr@K", "recall@K" or "mrr@K" (K an integer in
 * 1..SQ_STOP_MAX_K) into *kind, *k; -1 (nothing set) otherwise. */
int sq_stop_metric_parse(const char *s, int *kind, uint32_t *k);
/* The name of (kind, k), "mrr@10", into buf. */
const char *sq_stop_metric_name(int kind, uint32_t k, char *buf, size_t n);
/* The stop metric of o: its kind and K. */
void sq_train_stop_metric(const sq_train_opts *o, int *kind, uint32_t *k);

/* The training options of seqrec-train(1) (keys "train.NAME" in model
 * files), bound into sq_train_opts. */
extern const sq_opt sq_train_options[];

/* The defaults of seqrec-train(1) (no model). */
void sq_train_defaults(sq_train_opts *o);
/* The training options of a run of model m (may be NULL: none): the
 * defaults, m's train_defaults over them, then the options given (kv text
 * under their config keys, may be NULL), which always win. Sets the
 * options of sq_train_options only (model, cfg and init stay).
 * SQ_EX_USAGE for a bad or unknown key given, SQ_EX_SOFTWARE for one of
 * m's. */
int sq_train_opts_for_model(sq_train_opts *o, const sq_model_def *m, const char *given_kv,
                            sq_err *e);
/* SQ_EX_USAGE with a message naming the option when o is not usable (its
 * values, and what the model refuses of them). */
int sq_train_check(const sq_train_opts *o, sq_err *e);
/* What the model's step is told of o. */
sq_step_opts sq_train_step_opts(const sq_train_opts *o);

/* What one epoch did, for the caller's log line. */
typedef struct {
    uint64_t epoch;         /* 1-based */
    uint64_t step;          /* updates so far */
    double loss;            /* mean training loss over the epoch's trained positions */
    int evaluated;          /* validation ran this epoch */
    double hr10, ndcg10, mrr10; /* validation HR@10, NDCG@10, MRR@10 when evaluated */
    char stop_name[24];     /* the stop metric ("ndcg@10") */
    double stop;            /* its validation value when evaluated */
    double best_stop;       /* its best value so far (after this epoch) */
    uint64_t best_epoch;    /* the epoch of that best (0: none yet) */
    int improved;           /* new best model */
    uint64_t samples;       /* training sequences of the epoch */
    double seconds;         /* wall time of the epoch, validation included */
    double train_seconds;   /* of which the batches */
    double eval_seconds;    /* and the rest: validation (near 0 when not evaluated) */
    double max_rss_mib;     /* the process's peak resident memory so far */
    double device_mib;      /* GPU: the most device memory held at once so far
                               (sq_ctx_mem_peak); the CPU: -1 */
    double first_loss;      /* the loss of this run's first batch */
    int loss_rose;          /* loss > 10 first_loss: worth a warning */
    double seq_per_s;       /* samples / training seconds */
} sq_epoch_stats;

/* Callbacks (each may be NULL); a non-zero return from `epoch` stops the
 * run with that code (e.g. the log could not be written). */
typedef struct {
    void *ctx;
    void (*progress)(void *ctx, uint64_t epoch, uint64_t batch, uint64_t n_batches,
                     double loss);
    int (*epoch)(void *ctx, const sq_epoch_stats *s, sq_err *e);
    /* validation after epoch (1-based): done of total targets ranked, (0,
     * total) first, then after each scoring batch (eval.h progress) */
    void (*validating)(void *ctx, uint64_t epoch, uint64_t done, uint64_t total);
} sq_train_hooks;

/* Trains o->model with o->cfg on ds (split or padded) and writes the model to out_path
 * and the checkpoint to out_path.ckpt. With resume_path the options (all
 * but threads and epochs, which o gives) and the state come from that
 * checkpoint; a checkpoint of another dataset (n_items or data meta) is
 * refused with SQ_EX_DATA. */
int sq_train(const sq_train_opts *o, const sq_dataset *ds, const char *out_path,
                    const char *resume_path, const sq_train_hooks *hooks, sq_err *e);

/* Reads the model and training options stored in a checkpoint (to resume
 * it); o->cfg is malloc'd (the caller frees it). */
int sq_train_read_opts(sq_train_opts *o, const char *ckpt_path, sq_err *e);

/* --init: the model and config of the model file at path, for a stream
 * of the dims dd (as for def->config): the file's model options
 * with the options given (kv text, may be NULL) on top, which must leave
 * them unchanged. want (may be NULL): the --model given. SQ_EX_USAGE when
 * the file is of another model than want, the model cannot start from a
 * file, or the options given change it; SQ_EX_DATA for a bad file.
 * *cfg is malloc'd (the caller frees it). */
int sq_train_init_config(const char *path, const sq_model_def *want, const char *given,
                         const sq_data_dims *dd, const sq_model_def **def, void **cfg,
                         sq_err *e);

/* The id map a run on the stream h (named stream_name) carries: with
 * map_path that file, which must be the stream's map (idmap.h: the same
 * fingerprint; 65 naming both otherwise); without it the map that the
 * model file from (--init or --resume; may be NULL) carries, when its
 * fingerprint is the stream's. *bytes (malloc'd, NULL: none) and *len;
 * msg receives a line for the user ("warning: ..." or "note: ...", "" for
 * none): a stream without a fingerprint, or a map of from that is not
 * carried. */
int sq_train_pick_map(const char *map_path, const char *from, const sq_header *h,
                      const char *stream_name, char **bytes, size_t *len, char *msg,
                      size_t msg_n, sq_err *e);

/* 65 "NAME: ..." when ds has nothing any model can learn from: no items
 * (an empty stream) or no training item at all (every user's items held
 * out). The models ask more of it on their own (a sequence model: a user
 * with two training items). */
int sq_train_check_data(const sq_dataset *ds, const char *name, sq_err *e);

/* Fits a one-pass model (def->fit: pop) to ds and writes it to out_path,
 * carrying the id map id_map[0, id_map_len) (NULL: none; ID MAP); when ds
 * has validation targets, *evaluated = 1 and hr10, ndcg10 are its
 * validation HR@10 and NDCG@10 (the same ranking as for trained models). */
int sq_train_fit(const sq_model_def *def, const sq_dataset *ds, const char *out_path,
                 const char *id_map, size_t id_map_len, int threads, int *evaluated,
                 double *hr10, double *ndcg10, sq_err *e);

#endif
