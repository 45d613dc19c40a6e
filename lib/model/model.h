/* model.h - what every model offers to seqrec-train and seqrec-score.
 *
 * A model is a config (key=value text, stored in the .sqm file) plus named
 * tensors. Each model is one sq_model_def (below): its options, config,
 * tensors, training step and scores; the model table (models.c)
 * lists them, and seqrec-train, seqrec-score and the trainer find a model
 * there by name, never by a case of their own. No model includes the
 * table.
 *
 * seqrec-score only needs an sq_model's scores: given a batch of user
 * histories it returns a score for every item; the evaluation code in
 * lib/train/eval.c turns scores into ranks the same way for every model, so
 * that training-time validation and seqrec-score agree by construction.
 *
 * Implementations: pop.c (popularity), sasrec.c (SASRec and BERT4Rec with
 * every token mixer), blin.c (Blin: the SASRec backbone with a batcher and
 * a step of its own) and the models of later issues. */
#ifndef SQ_MODEL_H
#define SQ_MODEL_H

#include <stdint.h>

#include "batch.h"
#include "ctx.h"
#include "dataset.h"
#include "err.h"
#include "modelfile.h"
#include "opt.h"
#include "stream.h"
#include "tensor.h"

/* A top-K or ranking request with a batch (sq_eval_topk, sq_eval_ranks
 * with full candidates): a model that scores on a GPU may select or rank
 * there instead of handing back every score (for a catalogue of a million
 * items, 1 GB a batch of 256 that never needs to leave the device).
 * Top-K (target NULL): it fills, for each history b, the best k[b] <= K
 * items among the i in 1..n_items with ok[i] and, when exclude_history,
 * not in b's history: items[b K ..] and scores[b K ..], best first (the
 * higher score, then the lower item id: eval.c's order), nan[b] 1 when a
 * candidate's score is NaN; and sets done. K <= SQ_TOPK_GPU_MAX (topk.h).
 * Ranks (target set; K, items, scores, k, nan unused): for each history b,
 * counts[4 b ..] = rank.h's counts of target[b] against the same
 * candidates but the target (higher, the same, candidates, NaN), or, when
 * cand is set, against cand[coff[b] .. coff[b+1]) (sampled candidates
 * drawn on the host, sq_rank_lists); and sets done. A model that does not
 * leaves done 0 and fills the scores as ever. */
typedef struct sq_topk_req {
    uint32_t K;
    const unsigned char *ok;   /* [n_items + 1] host */
    int exclude_history;
    uint32_t *items;           /* [B x K] host */
    float *scores;             /* [B x K] host */
    uint32_t *k;               /* [B] */
    int *nan;                  /* [B] */
    const uint32_t *target;    /* [B] host: a ranking request; NULL: top-K */
    uint32_t *counts;          /* [B x SQ_RANK_COUNTS] host */
    const uint32_t *cand;      /* ranks: each history's candidates, or NULL: every item */
    const uint32_t *coff;      /* [B + 1]: history b's are cand[coff[b] .. coff[b + 1]) */
    int done;
} sq_topk_req;

/* A batch of B histories, packed oldest first: history b is
 * items[off[b] .. off[b] + len[b]); len[b] may be 0 (cold user). user[b]
 * is history b's user id (NULL: not known; only models with a row per
 * user read it). topk: NULL, or the caller's top-K request (above). */
typedef struct {
    const uint32_t *items;
    const uint32_t *off;
    const uint32_t *len;
    int B;
    const uint32_t *user;
    sq_topk_req *topk;
} sq_batch;

/* What a model's config learns from the training data: n_items, a padded
 * stream's row length (0: none; the default --max-len) and the largest
 * user id + 1 (0: not known, as for the early check of the options). */
typedef struct {
    uint32_t n_items;
    int padded_len;
    uint32_t n_users;
} sq_data_dims;

typedef struct sq_model sq_model;

/* The attention weights of a model for one history (seqrec-score
 * --attention-map; what they are is the model's and its mixer's). */
typedef struct {
    float *map;          /* [layers, heads, n, n]: layer l, head h, query row
                            i, key row j at ((l * heads + h) * n + i) * n + j */
    int *ids, *pos;      /* [n] the input ids and their window positions */
    int n, heads, layers;
    int mask_id;         /* the id that is the mask token (-1: none) */
    int signed_weights;  /* weights of either sign (no normaliser) */
    char what[96];       /* e.g. "bert4rec --attn hydra --causal" */
} sq_attn_map;

void sq_attn_map_free(sq_attn_map *a);

struct sq_model {
    char name[32];          /* "pop", "sasrec", ... */
    uint32_t n_items;       /* of the dataset it was trained on */
    char *meta;             /* the training stream's meta (dataset check) */
    void *impl;             /* the model's own state */
    /* scores[b * (n_items + 1) + i] for items i = 1..n_items (index 0 unused).
     * Must be deterministic and thread-safe for distinct batches. */
    int (*scores)(sq_model *m, const sq_batch *b, float *scores, sq_err *e);
    /* The attention maps of one history (NULL: the model has none). */
    int (*attention)(const sq_model *m, const uint32_t *hist, uint32_t len, sq_attn_map *out,
                     sq_err *e);
    void (*free_impl)(sq_model *m);
    /* Expert usage (models with a memory of experts, e.g. ELASTIC's
     * interest pool; NULL: none): adds to count[0 .. n_experts) how many
     * times each history of b retrieves each expert. */
    int (*experts)(const sq_model *m, const sq_batch *b, uint64_t *count, sq_err *e);
    uint64_t n_experts;
    /* Models with a row per user (caser, fpmc): 1 when the model can score
     * user id `user`; seqrec-score skips (and counts) the others. NULL:
     * every user. */
    int (*knows_user)(const sq_model *m, uint32_t user);
};

void sq_model_free(sq_model *m);

/* The rows a step writes of its row-sparse tensor (grad_rows): row r is
 * marked when mark[r] == stamp (a new stamp a step: nothing is cleared);
 * list, when not NULL, gets each row once, in the order first marked (n
 * of them): a GPU's update and its ranks' sum take the list, not a pass
 * over a million rows. */
typedef struct {
    uint32_t *mark, stamp;
    uint32_t *list;
    size_t n;
} sq_row_marks;

static inline void sq_row_mark(sq_row_marks *m, uint32_t r)
{
    if (m->mark[r] == m->stamp)
        return;
    m->mark[r] = m->stamp;
    if (m->list)
        m->list[m->n++] = r;
}

typedef struct sq_model_def sq_model_def;

/* CUDA: the integer arrays of packed batch b up to the device in one copy
 * (sq_ctx_stage), for the ops of the step that follows; a no-op on the
 * CPU. */
int sq_packed_stage(const sq_ctx *cx, const sq_packed *b, sq_err *e);
/* The histories of hist as one packed scoring batch, each as sq_packed_one
 * packs one (the newest max_len items, an empty history one padding row,
 * positions right-aligned, its newest row its entry), in one malloc'd block
 * *ints (the caller frees it): how a model with a forward over packed
 * sequences scores many histories at once on a GPU. SQ_EX_DATA for an item
 * outside 1..n_items. */
int sq_packed_histories(sq_packed *pb, int **ints, const sq_batch *hist, int max_len,
                        uint32_t n_items, sq_err *e);

/* Loads a model file: reads it, restores what every model shares (name,
 * n_items, the training meta) and hands it to the loader of find(its
 * "model" key); known lists the names for the message when there is none.
 * (models.h's sq_model_load calls it with the model table.) */
int sq_model_load_by(sq_model *m, const char *path,
                     const sq_model_def *(*find)(const char *name), const char *known,
                     const sq_ctx *cx, sq_err *e);

/* What each model provides to sq_model_load (models.h): sq_model_load
 * has already set m->name, n_items and meta; the loader copies what it
 * needs from mf, which is freed after it returns (or takes a tensor's data
 * over by setting that tensor's data to NULL), and sets impl, scores and
 * free_impl. */
/* cx: the backend the model is loaded onto (sq_model_load_by has checked
 * that the model runs there: the CPU, or a GPU for a model with gpu_check). */
typedef int (*sq_model_loader)(sq_model *m, sq_modelfile *mf, const sq_ctx *cx, sq_err *e);

/* Writes the keys every model file carries after its "model" key: n_items,
 * the training stream's meta as "data.KEY=value" lines and seqrec.version.
 * Each model's save calls it, so that sq_model_load can restore m->meta. */
int sq_model_set_data(sq_modelfile *mf, const sq_header *train, sq_err *e);

/* Refuses (65) a stream of another dataset: n_items differs, or both the
 * stream and the model's training stream have a "dataset" meta key and the
 * values differ. name is the stream's name for the message. */
int sq_model_check_stream(const sq_model *m, const sq_header *h, const char *name, sq_err *e);

/* Scoring helpers shared by the models (sasrec_model.c). */
/* scores[B, V1] = h[B, C] E[V1, C]^T (+ ob[V1] when not NULL), column 0
 * (padding) 0. On the CPU every score is the same sum in the same order
 * whatever B (batch-invariant: a user's scores do not depend on whom it is
 * scored with); on a GPU its GEMM, batch-invariant while the model's
 * scoring has sq_ctx_invariant on (ctx.h). */
int sq_score_states(const sq_ctx *cx, const float *h, int B, const float *E, const float *ob,
                    int C, int V1, float *scores, sq_err *e);
/* The end of a model's device scoring: dsc[B, V1] (on the GPU) down into
 * scores, or, when hist carries a top-K request the GPU can take, each
 * history's best items selected there (sq_topk_rows) and only they down
 * (the request's done set). */
int sq_scores_out(const sq_ctx *cx, const float *dsc, const sq_batch *hist, int V1,
                  float *scores, sq_err *e);
/* The states of histories b0, b0 + step, ... of hist into rows of hs. */
typedef int (*sq_states_fn)(const void *model, const sq_batch *hist, int b0, int step,
                            float *hs, sq_err *e);
/* Runs states on min(threads, B) threads, thread t taking histories t, t +
 * n, ...; the first error is kept. */
int sq_states_parallel(sq_states_fn states, const void *model, const sq_batch *hist,
                       int threads, float *hs, sq_err *e);

/* The models that train and score on a GPU (a def with gpu_check that
 * says yes), for the messages that refuse the others. */
#define SQ_GPU_MODEL_NAMES \
    "sasrec, bert4rec, blin, elastic, hstu, cl4srec, core, gru4rec, caser, fpmc, pop"

/* What the trainer tells a model's step (seqrec-train's training
 * options that shape the batches and the loss). */
typedef struct {
    int loss;        /* SQ_LOSS_* (nextloss.h) */
    int neg;         /* negatives per position (bce, the sampled losses) */
    int neg_sampler; /* the sampled softmax's sampler (sampler.h, packed) */
    int neg_share;   /* --neg-share: SQ_SHARE_* (sampler.h) */
    double gbce_t;   /* gBCE's calibration t */
    int target;      /* SQ_TARGET_* (batch.h) */
    int stride;      /* windows: --window-stride (0: max_len) */
    int batch;       /* sequences per batch */
    uint64_t seed;
} sq_step_opts;

/* A model being trained, as the trainer holds it: its parameters and their
 * gradients are flat blocks of ts->total floats on cx's backend, laid out
 * by its tensor set. */
typedef struct {
    const sq_ctx *cx;
    const sq_tensor_set *ts;
    float *params, *grads;
    const void *cfg;
    void *impl;      /* the model's own */
} sq_net;

struct sq_model_def {
    const char *name;
    const char *summary;          /* seqrec-train --help's line */
    const sq_opt *opts;           /* the model's options, bound into its config */
    /* Further option tables, i = 0, 1, ... until NULL (sasrec: each
     * attention kind's); NULL: none. */
    const sq_opt *(*more_opts)(int i);
    size_t cfg_size;              /* bytes of its config struct */
    /* The config from the options given (kv text "key=value\n" under their
     * config keys; NULL: none): the defaults, the given values, the
     * defaults that depend on others, the checks (SQ_EX_USAGE naming the
     * option; also for a given option the model does not have). n_items
     * comes from the data (sq_data_dims: padded_len is the default
     * --max-len; n_users for models with a row per user). */
    int (*config)(void *cfg, const char *given, const sq_data_dims *d, sq_err *e);
    /* The model's keys of a model file ("model" and the data keys are the
     * caller's); read refuses (SQ_EX_DATA, naming path) a bad config. */
    /* SQ_EX_USAGE with a message when a config (e.g. one built in code)
     * cannot be built. */
    int (*config_check)(const void *cfg, sq_err *e);
    int (*config_write)(const void *cfg, sq_modelfile *mf, sq_err *e);
    int (*config_read)(void *cfg, const sq_modelfile *mf, const char *path, sq_err *e);
    /* For seqrec-score. */
    sq_model_loader load;
    /* One-pass models (pop): the whole model file from the data. */
    int (*fit)(const sq_dataset *ds, sq_modelfile *mf, sq_err *e);
    /* Trained models (fit NULL). SQ_EX_USAGE for training options the model
     * cannot use (e.g. BERT4Rec and --loss bce). */
    int (*check_step)(const void *cfg, const sq_step_opts *o, sq_err *e);
    /* --device cuda: 0 when this configuration trains and scores on a GPU
     * (its ops all have CUDA twins), else SQ_EX_USAGE saying what does
     * not; NULL: the model runs on the CPU only. */
    int (*gpu_check)(const void *cfg, sq_err *e);
    /* 1 when the step is graph-safe (seqrec-train --cuda-graphs: every
     * launch of its forward and backward a function of the padded batch's
     * shapes, one loss value (several: sq_ctx_loss_mix); HACKING.md "CUDA
     * graphs"), as the simulated device's runs check; 0: --cuda-graphs is
     * refused for the model. */
    int graphs;
    int (*net_alloc)(sq_net *n, const void *cfg, const sq_ctx *cx, sq_err *e);
    void (*net_free)(sq_net *n);
    void (*net_init)(sq_net *n, uint64_t seed);
    /* seqrec-train --init: after net_init, copies the parameters of a model
     * file of this model (mf, read from path, its config the same as the
     * net's but for n_items, which may have grown) into the net: every
     * tensor from mf, and in a tensor with a row per item the old items'
     * rows at their places (rows after the items, such as BERT4Rec's mask
     * token, stay after them) while the new items keep net_init's draws.
     * SQ_EX_DATA naming path for a tensor that is missing or does not fit.
     * NULL: the model cannot start from a model file (a usage error). */
    int (*init_from)(sq_net *n, const sq_modelfile *mf, const char *path, sq_err *e);
    /* The model's samples and batches (next item, cloze, views, ...). */
    int (*batcher)(sq_batcher *bt, const sq_seqs *s, const void *cfg, const sq_step_opts *o,
                   sq_err *e);
    int (*work_alloc)(const sq_net *n, const sq_batcher *bt, void **work, sq_err *e);
    void (*work_free)(void *work);
    /* One batch: forward (dropout from (seed, step)), loss, backward, ADDING
     * into n->grads (zeroed by the trainer). Returns the mean loss over the
     * *count trained entries. */
    double (*step)(sq_net *n, void *work, const sq_packed *b, const sq_step_opts *o,
                   uint64_t step, int *count);
    /* 1: the loss is a mean over entries, each depending on its own
     * sequence only, and step keeps no state between calls: the trainer
     * may cut a batch into micro-batches by sequence, one per thread
     * (lib/train/micro.h). 0: steps take whole batches (in-batch
     * negatives, paired views, per-batch draws). */
    int micro_batches;
    /* Micro-batch workers: makes worker net n read its parameters from
     * params (the trainer's block, the same layout), its own freed. NULL:
     * the trainer copies its parameters to every worker before each step. */
    void (*share_params)(sq_net *n, float *params);
    /* Row-sparse gradients (sampled losses): marks (sq_row_mark) every
     * row r of tensor *tensor (rows: its first dimension) that step(n, b)
     * may write, when it writes no other row of that tensor, and returns
     * how many marks it set, repeats counted (> 0): a bound on the rows
     * that depends on the batch's shape alone (rows, entries, negatives),
     * at which a GPU's lazy update fixes its list (a CUDA graph's step has
     * one length). The trainer then updates the other rows with a zero
     * gradient without reading, adding or zeroing theirs (lazy Adam: not
     * at all; lib/train/micro.h). Returns 0 when the step's gradient may
     * be dense (a full softmax). NULL: always dense. A row left unmarked
     * that the step writes is a wrong update: tests/unit/test_micro.c
     * compares against the dense update. */
    size_t (*grad_rows)(const sq_net *n, const sq_packed *b, const sq_step_opts *o,
                        sq_row_marks *m, int *tensor);
    /* An sq_model scoring with the net's current parameters (borrowed). */
    void (*view)(sq_model *out, const sq_net *n);
    /* The trainer options whose default differs for this model, as kv text
     * under their config keys ("train.target=random\n", lib/train/train.c's
     * sq_train_options); the options given always win. NULL: none. */
    const char *train_defaults;
};

#endif
