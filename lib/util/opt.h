/* opt.h - option tables: one description of an option serves the command
 * line (seqrec-train builds its getopt table and --help from it), the
 * config of a model file (the same value under its key) and the range
 * checks.
 *
 * A table is an array of sq_opt ending with {0}. Each option binds to a
 * field of its owner's struct by offset: an int (SQ_OPT_INT, SQ_OPT_FLAG,
 * SQ_OPT_CHOICE: the index of the choice, SQ_OPT_ENUM, SQ_OPT_SQUARE), a double
 * (SQ_OPT_REAL) or a uint64_t (SQ_OPT_U64).
 * Values travel as "key=value\n" text (kv.h): what the user gave, what a
 * model file holds; sq_opt_apply parses such text into the struct, and
 * sq_opt_write writes the struct back, so that two configs compare as the
 * texts they serialise to. */
#ifndef SQ_OPT_H
#define SQ_OPT_H

#include <stddef.h>
#include <stdio.h>

#include "err.h"

typedef enum {
    SQ_OPT_INT = 1,   /* int in [lo, hi] */
    SQ_OPT_REAL,      /* double in [lo, hi] (lo_open/hi_open: excluded) */
    SQ_OPT_CHOICE,    /* one word of choices ("code|paper"), stored as its index */
    SQ_OPT_FLAG,      /* --name without a value sets 1; the config holds 0/1 */
    SQ_OPT_ENUM,      /* a word of a table (parse/name below), stored as an int */
    SQ_OPT_U64,       /* uint64_t in [0, 2^64) (seeds) */
    SQ_OPT_SQUARE,    /* int n in [lo, hi] written "NxN" (a square: product
                         keys' two sub-key sets of n); "N" is read too, "NxM"
                         with N != M refused */
} sq_opt_type;

typedef struct {
    const char *name;     /* --name on the command line (NULL: config only) */
    const char *key;      /* the config key (NULL: name with '-' as '_') */
    sq_opt_type type;
    size_t offset;        /* of the int or double field in the owner's struct */
    const char *def;      /* default, as text */
    double lo, hi;        /* INT, REAL, SQUARE: the range */
    int lo_open, hi_open; /* REAL: lo or hi itself is refused */
    const char *choices;  /* CHOICE: "a|b|c" */
    const char *arg;      /* --help's name of the value ("N", "X", "S") */
    const char *help;     /* --help's text; '\n' starts a continuation line */
    int (*parse)(const char *word);  /* ENUM: the word's number, -1 if none */
    const char *(*word)(int v);      /* ENUM: the number's word */
    const char *(*format)(int v, char *buf, size_t n); /* ENUM, instead of word: a
                                        value with numbers in it ("pop:100") */
    const char *expect;              /* ENUM: what a value looks like, for the
                                        message of a refusal */
    void (*more_help)(FILE *f);      /* printed after the option's lines */
    int cli_only;                    /* not written to model files */
    int optional;                    /* may be absent from a file (an option
                                        newer than the file): default kept */
} sq_opt;

/* The config key of o into buf ("linrec-scale" -> "linrec_scale"). */
const char *sq_opt_key(const sq_opt *o, char *buf, size_t n);
/* The command-line name of a config key into buf ("train.mask_prob" ->
 * "mask-prob", "blin.bkl_lambda" -> "bkl-lambda"), for messages about keys. */
const char *sq_opt_name_of_key(const char *key, char *buf, size_t n);
/* The option of t named name (a command-line name), or NULL. */
const sq_opt *sq_opt_find(const sq_opt *t, const char *name);

/* Sets every field of t in obj to its default. */
void sq_opt_defaults(const sq_opt *t, void *obj);
/* Parses the value text of o into obj; SQ_EX_USAGE (or `code`) with a
 * message naming --name (from_file: the key and src) when it is malformed
 * or out of range. */
int sq_opt_set(const sq_opt *o, void *obj, const char *value, int code, const char *src,
               sq_err *e);
/* Whether every option of t in obj is in its range (a config built in
 * code rather than parsed): the value as sq_opt_format writes it must parse
 * back; an option without a default may be unset (0). SQ_EX_USAGE (or
 * `code`) naming the option otherwise. */
int sq_opt_check(const sq_opt *t, const void *obj, int code, sq_err *e);
/* For each option of t whose key has a line in kv, sets it (sq_opt_set).
 * required: an option whose key is missing is an error (code, naming src);
 * otherwise it keeps its value. */
int sq_opt_apply(const sq_opt *t, void *obj, const char *kv, int required, int code,
                 const char *src, sq_err *e);
/* The value of o in obj as text ("%d", "%.17g", "%dx%d" or the choice's
 * word). */
const char *sq_opt_format(const sq_opt *o, const void *obj, char *buf, size_t n);
/* Writes "key=value" of every option of t through set (e.g. the model
 * file's config); prefix goes before each key. */
typedef int (*sq_opt_sink)(void *ctx, const char *key, const char *value, sq_err *e);
int sq_opt_write(const sq_opt *t, const void *obj, sq_opt_sink set, void *ctx, sq_err *e);
/* --help lines for the options of t that have a name. */
void sq_opt_help(const sq_opt *t, FILE *f);

#endif
