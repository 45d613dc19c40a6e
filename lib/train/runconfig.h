/* runconfig.h - seqrec-train --config FILE: a run's settings as the
 * "key=value" lines a model file's config holds (seqrec-train(1),
 * CONFIGURATION FILES).
 *
 * FILE is a text file or a model file (.sqm, or a checkpoint): a text file
 * holds "key=value" lines (no spaces around '='), blank lines and '#'
 * comments; a line "config<TAB>key=value" is read as "key=value" and the
 * other lines of `seqrec-cat --header` (file, kind, version, tensor,
 * tensors, checksum, each a word and a TAB) are skipped, so that output, or
 * any cut of it, is a config. A model file gives its config.
 *
 * The keys:
 *   model               the model, when the command line gives no --model
 *   a trainer option    sq_train_options' keys ("train.lr"): every trained model
 *   a model option      the keys of the model's tables (its opts and more_opts:
 *                       for the transformer models, every attention kind's)
 *   a record of the run skipped: n_items, n_users, data.*, seqrec.*,
 *                       valid.*, train.best_epoch, train.epochs_done,
 *                       train.stop, train.parts, MODEL.train_interactions
 *                       (pop's count) (what the data, the
 *                       version and the run put in a model file; nothing a
 *                       user chooses)
 * Anything else is refused: a key of another model (naming it) or an unknown
 * key, SQ_EX_USAGE with "FILE:LINE:" (a model file: "FILE: key KEY:"), as
 * is a value its option refuses; a line that is not "key=value" is
 * SQ_EX_DATA. When a key appears twice the last line wins. */
#ifndef SQ_RUNCONFIG_H
#define SQ_RUNCONFIG_H

#include <stddef.h>

#include "err.h"
#include "model.h"

typedef struct {
    char *model;        /* the value of the `model` key (malloc'd), or NULL */
    char *model_kv;     /* the model's options, "key=value\n" text (NULL: none) */
    size_t model_len;
    char *train_kv;     /* the trainer's options, the same way */
    size_t train_len;
} sq_runconfig;

/* Whether key is a record of a run (skipped, above). */
int sq_runconfig_is_record(const char *key);

/* The option of model d (its own tables) whose config key is key, or NULL. */
const sq_opt *sq_runconfig_model_key(const sq_model_def *d, const char *key);

/* Reads FILE (path) into c for the model `want` (NULL: the file's `model`
 * key, else the registry's first model, sasrec); *def the model used. */
int sq_runconfig_read(const char *path, const sq_model_def *want, sq_runconfig *c,
                      const sq_model_def **def, sq_err *e);
void sq_runconfig_free(sq_runconfig *c);

/* Prints the settings model d takes in a config, "KEY<TAB>--NAME" a line
 * (NAME "-" for a key without a command-line name): the model's keys, then
 * the trainer's (a model fitted in one pass: its own only). */
void sq_runconfig_keys(const sq_model_def *d, FILE *f);

#endif
