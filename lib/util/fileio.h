/* fileio.h - opening inputs and writing outputs atomically.
 *
 * An output named on the command line is written to "FILE.tmp.PID" and
 * renamed over FILE only by sq_out_commit, so a run that fails (or is
 * killed) never leaves a half-written FILE behind; sq_out_abort removes the
 * temp file. "-" or NULL means standard output, where no rename is possible:
 * a half-written stream there has no trailer, so the next program refuses it. */
#ifndef SQ_FILEIO_H
#define SQ_FILEIO_H

#include <stdio.h>
#include "err.h"

typedef struct {
    FILE *fp;       /* where to write; stdout for "-" */
    char *path;     /* final name, NULL for stdout */
    char *tmp;      /* temp name, NULL for stdout */
} sq_outfile;

/* Opens PATH ("-" or NULL = stdout) for writing. With binary != 0 it
 * refuses to write to a terminal (usage error). Exit code on failure:
 * 73 (cannot create). */
int sq_out_open(sq_outfile *o, const char *path, int binary, sq_err *e);
/* Flushes, closes and renames the temp file into place (74 on failure). */
int sq_out_commit(sq_outfile *o, sq_err *e);
/* Closes and removes the temp file; safe to call twice or after commit. */
void sq_out_abort(sq_outfile *o);

/* The whole life of one output: opens PATH (as sq_out_open), calls
 * fn(ctx, fp, name, e) with name = sq_out_name(PATH), then commits, or
 * on any failure removes the temp file. Returns 0 or e->code. */
typedef int (*sq_out_writer)(void *ctx, FILE *fp, const char *name, sq_err *e);
int sq_out_write(const char *path, int binary, sq_out_writer fn, void *ctx, sq_err *e);

/* Opens PATH for reading ("-" or NULL = stdin). 66 when missing. */
int sq_in_open(FILE **fp, const char *path, sq_err *e);
/* Closes an input opened by sq_in_open (stdin is left open). */
void sq_in_close(FILE *fp);
/* The name to use in messages: "<stdin>" / "<stdout>" for "-" and NULL. */
const char *sq_in_name(const char *path);
const char *sq_out_name(const char *path);

#endif
