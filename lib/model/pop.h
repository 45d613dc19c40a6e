/* pop.h - the popularity baseline: every user gets the same scores, the
 * number of times each item occurs in the training parts of the data.
 *
 * Fit: the counts of dataset.h (items[hist, n_train) of every view-0
 * record: validation and test targets are never counted). Scores: the count
 * of item i, whatever the history, so equally popular items tie (and ties
 * count against the target, see eval.h). */
#ifndef SQ_POP_H
#define SQ_POP_H

#include "dataset.h"
#include "err.h"
#include "model.h"
#include "modelfile.h"

/* Fills mf (empty) with model=pop, n_items, the data meta and the tensor
 * "pop.count" (u64, [n_items + 1], index 0 unused), borrowed from ds->pop:
 * ds must outlive the write. The caller may add keys, then writes it with
 * sq_modelfile_write and frees it. */
int sq_pop_fit(const sq_dataset *ds, sq_modelfile *mf, sq_err *e);

/* The loader of sq_model_load's table. */
int sq_pop_load(sq_model *m, sq_modelfile *mf, const sq_ctx *cx, sq_err *e);

#endif
