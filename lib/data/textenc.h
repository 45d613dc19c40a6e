/* textenc.h - text records (the form text.h parses) back into a stream:
 * what `seqrec-cat --from-text` does.
 *
 * The whole text is read before anything is written, as the header's
 * n_items defaults to the largest item id of the text. Every record then
 * goes through the stream writer's checks, so text that encodes is a
 * stream the other programs accept. */
#ifndef SQ_TEXTENC_H
#define SQ_TEXTENC_H

#include <stdint.h>
#include <stdio.h>

#include "err.h"

typedef struct {
    uint16_t kind;           /* SQ_SEQUENCES ... SQ_TOPK: what the lines hold */
    int with_ts;             /* the lines have a timestamps field */
    long n_items;            /* header n_items; -1: the largest item id seen */
    long max_len;            /* header max_len; <= 0: 0 (variable lengths) */
    const char *const *meta; /* [n_meta] "KEY=VALUE" meta lines, in order */
    int n_meta;
} sq_text_encode_opts;

/* Reads text records of o->kind from IN (IN_NAME in messages; empty lines
 * and lines starting with '#' are skipped) and writes them to OUT as one
 * stream (OUT_NAME in the writer's messages) whose meta is o->meta, then
 * "cat.from_text=IN_NAME". Does not close IN or OUT. Returns 0, or 65
 * "IN_NAME: line N: reason" for a line that does not parse or a record the
 * stream refuses (an item above n_items, ...), 65 from the writer for a
 * header it refuses, 70 for a meta entry without '=' or with a bad key,
 * 71 out of memory, 74 on a read or write error. */
int sq_text_encode(FILE *in, const char *in_name, const sq_text_encode_opts *o,
                   FILE *out, const char *out_name, sq_err *e);

#endif
