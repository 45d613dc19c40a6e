/* stream.h - the SQRC binary stream every seqrec program reads and writes.
 *
 * Layout (little-endian, never seeks, see man 5 seqrec):
 *   header   "SQRC" u16 version u16 kind u32 flags u32 n_items u32 max_len
 *            u32 meta_len, meta (UTF-8 "key=value\n" lines)
 *   records  u8 tag (= kind), then the record body for that kind
 *   trailer  u8 0xFF, u64 records, u64 interactions, u64 XXH3-64 of every
 *            byte before the trailer tag
 *
 * Record bodies:
 *   SEQUENCES  user u32, len u32, items[len] u32, [ts[len] i64 if SQ_FLAG_TS]
 *   SPLIT      as SEQUENCES, then n_train u32, n_valid u32
 *              (train = items[0,n_train), validation targets = the next
 *              n_valid items, test targets = the rest; each target's history
 *              is every item before it)
 *   PADDED     as SPLIT (no ts), then view u32; items[0,max_len) is the padded
 *              row (0 = padding, n_train == max_len), the rest are the held-out
 *              validation and test targets
 *   RANKS      user u32, item u32 (target), rank u32 (1 = best), n_cand u32
 *              (candidates including the target)
 *   TOPK       user u32, k u32, items[k] u32, scores[k] f32
 * "interactions" in the trailer is the sum of len (sequences, split,
 * padded), the number of records (ranks) or the sum of k (topk).
 *
 * Every violation is reported as "FILE: byte N: reason" with code 65. */
#ifndef SQ_STREAM_H
#define SQ_STREAM_H

#include <stdint.h>
#include <stdio.h>
#include "err.h"

#define SQ_MAGIC "SQRC"
#define SQ_VERSION 1
#define SQ_TRAILER_TAG 0xFFu
#define SQ_MAX_RECORD_ITEMS (1u << 24) /* 16M items in one record */
#define SQ_MAX_META (1u << 20)          /* 1 MiB of meta text */
#define SQ_HEADER_FIXED 24              /* bytes before the meta text */

enum sq_kind {
    SQ_SEQUENCES = 1,
    SQ_SPLIT = 2,
    SQ_PADDED = 3,
    SQ_RANKS = 4,
    SQ_TOPK = 5,
};

enum { SQ_FLAG_TS = 1u }; /* records carry i64 timestamps */

typedef struct {
    uint16_t version;
    uint16_t kind;
    uint32_t flags;
    uint32_t n_items;  /* items are 1..n_items, 0 is padding */
    uint32_t max_len;  /* 0 = variable; padded rows are exactly max_len */
    uint32_t meta_len; /* bytes of meta, without the terminating NUL */
    char *meta;        /* owned, NUL-terminated; NULL when meta_len == 0 */
} sq_header;

typedef struct {
    uint32_t user;
    uint32_t len;      /* items in the record (k for topk, 1 for ranks) */
    uint32_t *items;
    int64_t *ts;       /* NULL unless the header has SQ_FLAG_TS */
    float *scores;     /* topk only */
    uint32_t n_train;  /* split/padded cut points */
    uint32_t n_valid;
    uint32_t view;     /* padded: which random view of the user (0-based) */
    uint32_t item;     /* ranks: the target */
    uint32_t rank;     /* ranks: 1-based, ties counted against the target */
    uint32_t n_cand;   /* ranks: candidates including the target */
} sq_record;

const char *sq_kind_name(uint16_t kind);      /* "sequences", ... or NULL */
int sq_kind_parse(const char *name);          /* 0 if unknown */
#define SQ_KIND_BIT(k) (1u << (k))
/* The one wrong-kind message of every program: 0 if h's kind is one of
 * KINDS (SQ_KIND_BIT ors), else 65 "NAME: byte 6: expected a split or
 * padded stream, got sequences[ (WHY)]"; WHY may be NULL. */
int sq_expect_kind(const sq_header *h, const char *name, unsigned kinds, const char *why,
                   sq_err *e);

/* Header helpers. meta is owned by the header. */
void sq_header_init(sq_header *h, uint16_t kind, uint32_t n_items);
int sq_header_copy(sq_header *dst, const sq_header *src, sq_err *e);
void sq_header_free(sq_header *h);
/* Appends "key=value\n" (value printf-formatted) to the meta text. Keys
 * name their program ("split.mode"). Returns 0 or SQ_EX_OSERR. */
int sq_meta_add(sq_header *h, sq_err *e, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Copies the value of the last line "key=..." into buf; 1 if found. */
int sq_meta_get(const sq_header *h, const char *key, char *buf, size_t n);

/* ---- reading ---- */

typedef struct {
    FILE *f;
    const char *name;     /* for messages */
    sq_header hdr;
    unsigned char *buf;   /* read buffer */
    size_t buf_cap, buf_len, buf_pos;
    uint64_t buf_off;     /* stream offset of buf[0] */
    size_t hashed;        /* bytes of buf already fed to the hash */
    void *hash;           /* XXH3_state_t */
    uint64_t n_records, n_inter;
    int done;             /* trailer seen and verified */
    uint32_t *items;      /* record storage, reused between records */
    int64_t *ts;
    float *scores;
    uint32_t cap;         /* capacity of items/ts/scores */
} sq_reader;

/* Whether f (a file or a pipe) starts a stream rather than text: its first
 * byte, put back (one byte of look-ahead is all ungetc promises on a pipe;
 * the reader checks the rest of the magic). 1 stream, 0 text or empty, -1
 * on a read error (SQ_EX_IO naming name). */
int sq_stream_peek(FILE *f, const char *name, sq_err *e);
/* Reads and checks the header. On error the reader is still safe to free. */
int sq_reader_open(sq_reader *r, FILE *f, const char *name, sq_err *e);
/* Reads the next record into rec (arrays stay valid until the next call).
 * Returns 1 for a record, 0 at the verified trailer, -1 on error (e set). */
int sq_reader_next(sq_reader *r, sq_record *rec, sq_err *e);
/* fn(ctx, rec, e) on each record to the trailer, stopping at the first
 * error: the stream's, or fn's (nonzero), which becomes "NAME: byte OFF:
 * its message", OFF where the record starts. SQ_OK or the error's code. */
int sq_reader_each(sq_reader *r, const char *name,
                   int (*fn)(void *ctx, const sq_record *rec, sq_err *e), void *ctx,
                   sq_err *e);
void sq_reader_free(sq_reader *r);

/* ---- writing ---- */

typedef struct {
    FILE *f;
    const char *name;
    sq_header hdr;        /* copy of the header written */
    unsigned char *buf;
    size_t buf_cap, buf_len;
    void *hash;           /* XXH3_state_t */
    uint64_t n_records, n_inter;
} sq_writer;

/* Writes the header. The writer keeps its own copy of h. */
int sq_writer_open(sq_writer *w, FILE *f, const char *name,
                   const sq_header *h, sq_err *e);
/* Checks and writes one record of the header's kind. The same checks as the
 * reader (item range, zero only in padded rows, cut points) apply, so a
 * program bug cannot produce a stream that the next program refuses. */
int sq_write(sq_writer *w, const sq_record *rec, sq_err *e);
/* Writes the trailer and flushes (does not close f). */
int sq_writer_finish(sq_writer *w, sq_err *e);
void sq_writer_free(sq_writer *w);

#endif
