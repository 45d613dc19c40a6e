/* filter.h - the plumbing of a stream-to-stream program (seqrec-split,
 * seqrec-pad): one input stream read record by record, one output stream
 * written atomically (fileio.h), whose header starts as a copy of the
 * input's.
 *
 *     sq_filter f = {0};
 *     if (sq_filter_open(&f, in_path, out_path, e) || (check f.rd.hdr,
 *         edit f.hdr) || sq_filter_start(&f, e) || (sq_reader_next on
 *         &f.rd, sq_write on &f.wr ...) || sq_filter_finish(&f, e))
 *         report e;
 *     sq_filter_close(&f);
 *
 * sq_filter_close after a failure removes the half-written output. */
#ifndef SQ_FILTER_H
#define SQ_FILTER_H

#include <stdio.h>

#include "err.h"
#include "fileio.h"
#include "stream.h"

typedef struct {
    FILE *in;
    sq_reader rd;          /* the input; rd.hdr is its header */
    sq_header hdr;         /* the output's header, to edit before sq_filter_start */
    sq_outfile out;
    sq_writer wr;          /* the output, after sq_filter_start */
    const char *in_name;   /* for messages: the path, or "<stdin>" */
    const char *out_path;  /* NULL or "-": standard output */
    const char *out_name;
} sq_filter;

/* Opens in_path (NULL or "-": standard input), reads its header and copies
 * it into f->hdr. out_path is only remembered. */
int sq_filter_open(sq_filter *f, const char *in_path, const char *out_path, sq_err *e);
/* Opens the output (a binary stream: never a terminal) and writes f->hdr. */
int sq_filter_start(sq_filter *f, sq_err *e);
/* Writes the trailer and renames the output into place. */
int sq_filter_finish(sq_filter *f, sq_err *e);
/* Frees everything; removes the output's temp file unless it was finished. */
void sq_filter_close(sq_filter *f);

#endif
