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

#endif
