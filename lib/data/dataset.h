/* dataset.h - a split (or padded, or sequences) stream held in memory.
 *
 * Training and evaluation both need random access to every user: the
 * batch builder samples users, the evaluation ranks each held-out target
 * given the items before it. A dataset is the records of one stream, their
 * items packed in one array, plus the item popularity of the training
 * parts (what the popularity model fits and what pop:N sampling draws
 * from).
 *
 * Records keep their items exactly as the stream has them:
 *   split      items[0, n_train) train, then n_valid validation targets,
 *              then the test targets; hist = 0.
 *   padded     items[0, max_len) is the padded row (zeros included, as the
 *              training code wants it), then the targets; hist is the start
 *              of the row's last run of non-zero items, which is the user's
 *              sequence under every padding policy (zeros left, zeros right,
 *              RandomPad: its row ends with a whole copy). One record per
 *              view; evaluation and popularity use view 0 only.
 *   sequences  every item is training (n_train = len, no targets).
 * So the history of the target at index t is items[hist, t), contiguous,
 * and "everything known" about a user is items[hist, len). */
#ifndef SQ_DATASET_H
#define SQ_DATASET_H

#include <stdint.h>
#include <stdio.h>

#include "err.h"
#include "stream.h"

typedef struct {
    uint32_t user;
    uint32_t view;      /* padded: which view; 0 otherwise */
    uint32_t len;       /* items in the record */
    uint32_t n_train;   /* split/padded cut points (padded: n_train = max_len) */
    uint32_t n_valid;
    uint32_t hist;      /* index of the first history item (see above) */
    uint64_t off;       /* the record's items are ds->items[off, off + len) */
} sq_seq;

typedef struct {
    sq_header hdr;      /* the stream's header: kind, n_items, max_len, meta */
    sq_seq *seq;        /* [n_seq], in stream order */
    uint64_t n_seq, cap_seq;
    uint32_t *items;    /* every record's items, packed */
    uint64_t n_items_total, cap_items;
    uint64_t *pop;      /* [hdr.n_items + 1]: occurrences of each item in the
                           training parts items[hist, n_train) of view-0 records */
    uint64_t n_train_total; /* sum of pop[] */
} sq_dataset;

/* Reads a whole split, padded or sequences stream (ranks and topk streams
 * are refused, 65). Stream errors are reported as the reader reports them,
 * so a truncated input fails before anything has been written. */
int sq_dataset_read(sq_dataset *ds, FILE *f, const char *name, sq_err *e);
/* The same, accepting only the kinds KINDS names (a subset of these): the
 * program's own list, so its wrong-kind message names only what it takes. */
#define SQ_DATASET_KINDS (SQ_KIND_BIT(SQ_SEQUENCES) | SQ_KIND_BIT(SQ_SPLIT) | SQ_KIND_BIT(SQ_PADDED))
int sq_dataset_read_as(sq_dataset *ds, FILE *f, const char *name, unsigned kinds, sq_err *e);
void sq_dataset_free(sq_dataset *ds);

/* The items of record r. */
static inline const uint32_t *sq_dataset_items(const sq_dataset *ds, uint64_t r)
{
    return ds->items + ds->seq[r].off;
}

/* The largest user id of ds + 1 (0 for no record; capped at UINT32_MAX):
 * the rows of a table with a row per user. */
uint32_t sq_dataset_n_users(const sq_dataset *ds);

/* Adds one record (a copy of rec's items) as sq_dataset_read does; for tests
 * and for programs that build a dataset without a stream. Call
 * sq_dataset_init first and sq_dataset_finish (popularity) after the last. */
int sq_dataset_init(sq_dataset *ds, const sq_header *h, sq_err *e);
int sq_dataset_add(sq_dataset *ds, const sq_record *rec, sq_err *e);
int sq_dataset_finish(sq_dataset *ds, sq_err *e);

/* ---- id maps (seqrec-preprocess --map) ----
 * Lines "kind<TAB>dense<TAB>original" with kind "user" or "item": the
 * original ids of dense users and items, for output meant for people. */
typedef struct {
    char *text;           /* the map file, NUL-separated fields */
    const char **user;    /* [n_user + 1], NULL where unknown */
    const char **item;    /* [n_item + 1] */
    uint32_t n_user, n_item; /* the tables' sizes */
    uint32_t users, items;   /* the largest dense id of each kind */
    size_t len;              /* bytes of the map text */
} sq_idmap;

/* One line of a map file, s[0, n) without its newline (a trailing CR is
 * dropped): "kind<TAB>dense<TAB>original", the original id being the rest
 * of the line (it may hold tabs: seqrec-preprocess writes ids verbatim).
 * The one reader of the format, for sq_idmap_read and seqrec-preprocess
 * --map-in. Returns 1 for a blank line (skipped), 0 with *kind (0 user, 1
 * item), *dense (>= 1) and the original's span set, or SQ_EX_DATA
 * "PATH: line N: reason". */
int sq_idmap_line(const char *s, size_t n, const char *path, unsigned long long line,
                  int *kind, uint32_t *dense, const char **orig, size_t *orig_len,
                  sq_err *e);

/* Reads a map file: 66 when missing, 65 "FILE: line N: reason" when bad. */
int sq_idmap_read(sq_idmap *m, const char *path, sq_err *e);
/* The same, and *raw (malloc'd, m->len bytes and a NUL) the file's bytes
 * as they were (seqrec-train --map keeps them in the model). */
int sq_idmap_read_raw(sq_idmap *m, const char *path, char **raw, sq_err *e);
/* Parses a map held in memory (bytes[0, len), copied), as sq_idmap_read
 * parses a file; name is for messages. */
int sq_idmap_parse(sq_idmap *m, const char *bytes, size_t len, const char *name, sq_err *e);
/* The original id of a dense user or item, or NULL when the map lacks it. */
const char *sq_idmap_user(const sq_idmap *m, uint32_t dense);
const char *sq_idmap_item(const sq_idmap *m, uint32_t dense);
void sq_idmap_free(sq_idmap *m);

#endif
