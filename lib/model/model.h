/* model.h - what every model offers to seqrec-train and seqrec-score.
 *
 * A model is a config (key=value text, stored in the .sqm file) plus named
 * tensors. seqrec-score only needs sq_model_scores: given a batch of user
 * histories it returns a score for every item; the evaluation code in
 * lib/eval.c turns scores into ranks the same way for every model, so that
 * training-time validation and seqrec-score agree by construction.
 *
 * Implementations: lib/pop.c (popularity), lib/sasrec.c (SASRec) and the
 * backbones of later issues. Dispatch is by the config key "model". */
#ifndef SQ_MODEL_H
#define SQ_MODEL_H

#include <stdint.h>
#include "err.h"
#include "modelfile.h"
#include "stream.h"

/* A batch of B histories, packed oldest first: history b is
 * items[off[b] .. off[b] + len[b]); len[b] may be 0 (cold user). */
typedef struct {
    const uint32_t *items;
    const uint32_t *off;
    const uint32_t *len;
    int B;
} sq_batch;

typedef struct sq_model sq_model;

struct sq_model {
    char name[32];          /* "pop", "sasrec", ... */
    uint32_t n_items;       /* of the dataset it was trained on */
    char *meta;             /* the training stream's meta (dataset check) */
    void *impl;             /* the model's own state */
    /* scores[b * (n_items + 1) + i] for items i = 1..n_items (index 0 unused).
     * Must be deterministic and thread-safe for distinct batches. */
    int (*scores)(sq_model *m, const sq_batch *b, float *scores, sq_err *e);
    void (*free_impl)(sq_model *m);
};

/* Loads any model file, dispatching on its "model" config key. */
int sq_model_load(sq_model *m, const char *path, sq_err *e);
void sq_model_free(sq_model *m);

/* What each model provides to sq_model_load (one line per model in the
 * table of lib/model.c): sq_model_load has already set m->name, n_items and
 * meta; the loader copies what it needs from mf, which is freed after it
 * returns (or takes a tensor's data over by setting that tensor's data to
 * NULL), and sets impl, scores and free_impl. */
typedef int (*sq_model_loader)(sq_model *m, sq_modelfile *mf, sq_err *e);

/* Writes the keys every model file carries after its "model" key: n_items,
 * the training stream's meta as "data.KEY=value" lines and seqrec.version.
 * Each model's save calls it, so that sq_model_load can restore m->meta. */
int sq_model_set_data(sq_modelfile *mf, const sq_header *train, sq_err *e);

/* Refuses (65) a stream of another dataset: n_items differs, or both the
 * stream and the model's training stream have a "dataset" meta key and the
 * values differ. name is the stream's name for the message. */
int sq_model_check_stream(const sq_model *m, const sq_header *h, const char *name, sq_err *e);

#endif
