/* text.h - the text form of stream records (what seqrec-cat prints and
 * `seqrec-cat --from-text` reads back). One record per line, TSV:
 *
 *   sequences  user  items            [timestamps]
 *   split      user  train  valid  test  [timestamps]
 *   padded     user  view  row  valid  test
 *   ranks      user  rank  n_cand  item
 *   topk       user  item:score,item:score,...
 *
 * Lists inside a field are space-separated; an empty list is an empty
 * field. The ranks form is the text form seqrec-metrics accepts. */
#ifndef SQ_TEXT_H
#define SQ_TEXT_H

#include <stdio.h>
#include "err.h"
#include "stream.h"

/* Prints one record of header h's kind as a line. Returns 0 or 74. */
int sq_text_write(FILE *f, const sq_header *h, const sq_record *rec);

/* Growable storage for parsed records. */
typedef struct {
    uint32_t *items;
    int64_t *ts;
    float *scores;
    size_t cap;
} sq_text_buf;

/* Parses one line (without its newline) into rec, whose arrays point into
 * buf. where = "FILE: line N" for messages. Returns 0 or 65/71. */
int sq_text_parse(char *line, uint16_t kind, int with_ts, sq_text_buf *buf,
                  sq_record *rec, const char *where, sq_err *e);
/* Room for n entries in each array (the capacity doubles); 0 or 71. */
int sq_text_buf_reserve(sq_text_buf *b, size_t n, sq_err *e);
void sq_text_buf_free(sq_text_buf *buf);

#endif
