/* models.h - the models seqrec-train and seqrec-score know (the registry):
 * one table (models.c), above the models (model.h: sq_model_def). A new
 * model adds one line there. In lib/model, beside the mixer table
 * (mixers.c), so that loading a model needs nothing of lib/train. */
#ifndef SQ_MODELS_H
#define SQ_MODELS_H

#include <stddef.h>

#include "err.h"
#include "model.h"

int sq_models_count(void);
const sq_model_def *sq_models_get(int i);        /* NULL out of range */
const sq_model_def *sq_models_find(const char *name); /* NULL when unknown */
/* "sasrec, bert4rec, pop" for messages. */
const char *sq_models_names(char *buf, size_t n);

/* Loads any model file, dispatching on its "model" config key to the
 * model's loader. */
int sq_model_load(sq_model *m, const char *path, sq_err *e);
/* onto the backend of cx (NULL: the CPU); 64 when the model does not run
 * there */
int sq_model_load_on(sq_model *m, const char *path, const sq_ctx *cx, sq_err *e);

#endif
