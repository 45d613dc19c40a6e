/* fileio.h - opening inputs and writing outputs atomically.
 *
 * An output named on the command line is written to "FILE.tmp.PID" and
 * renamed over FILE only by sq_out_commit, so a run that fails (or is
 * stopped by SIGINT, SIGTERM or SIGHUP: signals.h) never leaves a
 * half-written FILE behind; sq_out_abort removes the temp file. What FILE
 * is decides how it is written:
 *   - a regular file, or no file yet: the temp file and rename above;
 *   - a symbolic link (a chain of them, dangling or not): the file it
 *     points to, atomically as above (the temp file next to it, renamed
 *     over it); the link stays a link;
 *   - a character or block device or a FIFO (/dev/null, a named pipe):
 *     written through, opened as it is, with no temp file and no rename
 *     (what was written cannot be taken back on failure);
 *   - a directory: refused at open (73), before any work.
 * "-" or NULL means standard output, where no rename is possible: a
 * half-written stream there has no trailer, so the next program refuses it. */
#ifndef SQ_FILEIO_H
#define SQ_FILEIO_H

#include <stdio.h>
#include "err.h"

typedef struct {
    FILE *fp;       /* where to write; stdout for "-" */
    char *path;     /* the name given (for messages), NULL for stdout */
    char *target;   /* what the temp file replaces: path, or the file a
                     * symlink path points to; NULL for stdout, devices, FIFOs */
    char *tmp;      /* temp name next to target; NULL when target is */
    int slot;       /* 1 + tmp's entry in the signal table (signals.h); 0: none */
} sq_outfile;

/* Opens PATH ("-" or NULL = stdout) for writing. With binary != 0 it
 * refuses to write to a terminal (usage error). Exit code on failure:
 * 73 (cannot create; PATH is a directory). */
int sq_out_open(sq_outfile *o, const char *path, int binary, sq_err *e);
/* What sq_out_open would say of PATH, without opening it (a FIFO is not
 * opened: that would block for a reader, then send it an empty stream). */
int sq_out_check(const char *path, sq_err *e);
/* 73 "OPT PATH: not a regular file" when PATH exists (through its links)
 * and is a device, FIFO or anything else that is not a file: for outputs
 * that must be files (a model, beside which its checkpoint goes). */
int sq_out_check_regular(const char *path, const char *opt, sq_err *e);
/* Flushes, closes and renames the temp file into place (74 on failure,
 * the message naming PATH). */
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
