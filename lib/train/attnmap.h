/* attnmap.h - the attention maps of one user's history as files
 * (seqrec-score --attention-map).
 *
 * For a model with attention (model.h: sq_model.attention) and a user of a
 * dataset, writes beside PREFIX, each atomically (fileio.h):
 *   PREFIX.items.tsv       "row position item" of the model's input rows
 *                          (item "mask" for BERT4Rec's mask token)
 *   PREFIX.lL.hH.tsv       layer L's head H: n x n weights, query rows,
 *                          key columns (%.7g, TAB-separated)
 *   PREFIX.lL.mean.tsv     the mean over the heads
 *   PREFIX.gp              a gnuplot script: one heat map panel per layer
 * and, when gnuplot is installed, PREFIX.png from the script. */
#ifndef SQ_ATTNMAP_H
#define SQ_ATTNMAP_H

#include <stdint.h>

#include "dataset.h"
#include "err.h"
#include "model.h"

/* Writes the maps above for the history of user's first target of
 * `target` (SQ_EVAL_VALID or SQ_EVAL_TEST: the history sq_eval_ranks gives
 * it, view 0 of a padded stream). 64 when the model has no attention
 * (model_path names it), 65 when ds (in_name) has no such user, 73/74 for
 * the files (their names in the message). */
int sq_attention_map_write(const sq_model *model, const char *model_path,
                           const sq_dataset *ds, const char *in_name, uint32_t user,
                           int target, const char *prefix, sq_err *e);

/* Runs gnuplot on PREFIX.gp in PREFIX's directory, which draws PREFIX.png.
 * *drawn = 1 when it did, 0 when gnuplot is not installed (not an error:
 * the script stays for later). 70 when gnuplot fails (or cannot run), 71
 * when the fork fails. Flushes stdout and stderr before the fork. */
int sq_attention_map_draw(const char *prefix, int *drawn, sq_err *e);

#endif
