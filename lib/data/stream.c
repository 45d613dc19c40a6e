/* stream.c - reader and writer of the SQRC stream (see stream.h, seqrec(5)).
 *
 * Both sides buffer in 256 KiB blocks and feed the XXH3 state a block at a
 * time, so checksumming costs one pass over memory that is already hot. The
 * reader never seeks: it works on pipes. Byte offsets in messages are
 * offsets from the first byte of the stream. */
#include "stream.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "kv.h"

#define BUF_CAP (256u << 10)

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "seqrec streams are little-endian; add byte swapping for this host"
#endif

static const char *kind_names[] = {NULL, "sequences", "split", "padded", "ranks", "topk"};

const char *sq_kind_name(uint16_t kind)
{
    return kind >= 1 && kind <= SQ_TOPK ? kind_names[kind] : NULL;
}

int sq_expect_kind(const sq_header *h, const char *name, unsigned kinds, const char *why,
                   sq_err *e)
{
    if (h->kind < 32 && (kinds & SQ_KIND_BIT(h->kind)))
        return 0;
    char list[128] = "";
    int n = 0, total = 0;
    for (int k = 1; k <= SQ_TOPK; k++)
        total += (kinds & SQ_KIND_BIT(k)) != 0;
    for (int k = 1; k <= SQ_TOPK; k++) {
        if (!(kinds & SQ_KIND_BIT(k)))
            continue;
        n++;
        size_t at = strlen(list);
        snprintf(list + at, sizeof list - at, "%s%s", n == 1 ? "" : n == total ? " or " : ", ",
                 kind_names[k]);
    }
    const char *got = sq_kind_name(h->kind);
    char num[16];
    snprintf(num, sizeof num, "kind %u", h->kind);
    return sq_fail(e, SQ_EX_DATA, "%s: byte 6: expected a %s stream, got %s%s%s%s", name, list,
                   got ? got : num, why ? " (" : "", why ? why : "", why ? ")" : "");
}

int sq_kind_parse(const char *name)
{
    for (int k = 1; k <= SQ_TOPK; k++)
        if (strcmp(name, kind_names[k]) == 0)
            return k;
    return 0;
}

/* ---- header and meta ---- */

void sq_header_init(sq_header *h, uint16_t kind, uint32_t n_items)
{
    memset(h, 0, sizeof *h);
    h->version = SQ_VERSION;
    h->kind = kind;
    h->n_items = n_items;
}

int sq_header_copy(sq_header *dst, const sq_header *src, sq_err *e)
{
    *dst = *src;
    dst->meta = NULL;
    if (src->meta_len) {
        dst->meta = malloc(src->meta_len + 1);
        if (!dst->meta)
            return sq_fail(e, SQ_EX_OSERR, "out of memory");
        memcpy(dst->meta, src->meta, src->meta_len + 1);
    }
    return 0;
}

void sq_header_free(sq_header *h)
{
    free(h->meta);
    h->meta = NULL;
    h->meta_len = 0;
}

int sq_meta_add(sq_header *h, sq_err *e, const char *key, const char *fmt, ...)
{
    size_t len = h->meta_len;
    va_list ap;
    va_start(ap, fmt);
    int rc = sq_kv_add(&h->meta, &len, SQ_MAX_META, e, key, fmt, ap);
    va_end(ap);
    h->meta_len = (uint32_t)len;
    return rc;
}

int sq_meta_get(const sq_header *h, const char *key, char *buf, size_t n)
{
    return sq_kv_get(h->meta, key, buf, n);
}

/* ---- record checks shared by reader and writer ----
 * Each returns 0 or fills e; `at` maps an element index to the byte offset
 * used in the message (the writer reports the record number instead). */

typedef struct {
    uint64_t base;  /* offset of element 0 (reader) */
    size_t stride;  /* bytes per element */
    int writer;     /* messages say "record N" instead of "byte N" */
    uint64_t recno;
    const char *name;
} where;

static int bad(sq_err *e, const where *w, uint64_t idx, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int bad(sq_err *e, const where *w, uint64_t idx, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (w->writer)
        return sq_fail(e, SQ_EX_DATA, "%s: record %llu: %s", w->name,
                       (unsigned long long)w->recno, msg);
    return sq_fail(e, SQ_EX_DATA, "%s: byte %llu: %s", w->name,
                   (unsigned long long)(w->base + idx * w->stride), msg);
}

/* Items must be 1..n_items; 0 (padding) is allowed only in [0, zero_ok). */
static int check_items(const sq_header *h, const uint32_t *items, uint32_t len,
                       uint32_t zero_ok, const where *w, sq_err *e)
{
    for (uint32_t i = 0; i < len; i++) {
        uint32_t it = items[i];
        if (it > h->n_items)
            return bad(e, w, i, "item id %u out of range (n_items %u)", it, h->n_items);
        if (it == 0 && i >= zero_ok)
            return bad(e, w, i, "item id 0 (padding) outside a padded row");
    }
    return 0;
}

static int check_len(const sq_header *h, uint32_t len, const where *w, sq_err *e)
{
    if (len > SQ_MAX_RECORD_ITEMS)
        return bad(e, w, 0, "oversize record: %u items (limit %u)", len, SQ_MAX_RECORD_ITEMS);
    if (h->kind == SQ_PADDED && len < h->max_len)
        return bad(e, w, 0, "padded record of %u items is shorter than max_len %u", len, h->max_len);
    if ((h->kind == SQ_SEQUENCES || h->kind == SQ_SPLIT) && h->max_len && len > h->max_len)
        return bad(e, w, 0, "oversize record: %u items exceeds max_len %u", len, h->max_len);
    /* a user without items has nothing to split, pad or train on (and no
     * writer makes one: preprocess drops such users) */
    if ((h->kind == SQ_SEQUENCES || h->kind == SQ_SPLIT) && len == 0)
        return bad(e, w, 0, "empty record (a user with no items)");
    return 0;
}

static int check_cuts(const sq_header *h, const sq_record *rec, const where *w, sq_err *e)
{
    if ((uint64_t)rec->n_train + rec->n_valid > rec->len)
        return bad(e, w, 0, "cut points %u+%u exceed the record length %u",
                   rec->n_train, rec->n_valid, rec->len);
    if (h->kind == SQ_PADDED && rec->n_train != h->max_len)
        return bad(e, w, 0, "padded row of %u items, header max_len is %u",
                   rec->n_train, h->max_len);
    return 0;
}

static int check_rank(const sq_header *h, const sq_record *rec, const where *w, sq_err *e)
{
    if (rec->item == 0 || rec->item > h->n_items)
        return bad(e, w, 0, "target item id %u out of range (n_items %u)", rec->item, h->n_items);
    if (rec->n_cand == 0 || rec->rank == 0 || rec->rank > rec->n_cand)
        return bad(e, w, 1, "rank %u not within 1..%u candidates", rec->rank, rec->n_cand);
    return 0;
}

static int check_header(const sq_header *h, const where *w, sq_err *e)
{
    if (h->version != SQ_VERSION)
        return bad(e, w, 4, "unsupported stream version %u (this build reads version %u)",
                   h->version, SQ_VERSION);
    if (!sq_kind_name(h->kind))
        return bad(e, w, 6, "unknown stream kind %u", h->kind);
    if (h->flags & ~(uint32_t)SQ_FLAG_TS)
        return bad(e, w, 8, "unknown flags 0x%x", h->flags);
    if ((h->flags & SQ_FLAG_TS) && h->kind != SQ_SEQUENCES && h->kind != SQ_SPLIT)
        return bad(e, w, 8, "timestamps flag on a %s stream", sq_kind_name(h->kind));
    if (h->kind == SQ_PADDED && h->max_len == 0)
        return bad(e, w, 16, "padded stream with max_len 0");
    if (h->max_len > SQ_MAX_RECORD_ITEMS)
        return bad(e, w, 16, "max_len %u exceeds the limit %u", h->max_len, SQ_MAX_RECORD_ITEMS);
    if (h->meta_len > SQ_MAX_META)
        return bad(e, w, 20, "oversize meta: %u bytes (limit %u)", h->meta_len, SQ_MAX_META);
    return 0;
}

/* ---- reading ---- */

static uint64_t rd_off(const sq_reader *r) { return r->buf_off + r->buf_pos; }

/* Makes at least n (<= BUF_CAP) bytes available at buf_pos. Returns the
 * number available (less than n only at EOF) or -1 on a read error. */
static long fill(sq_reader *r, size_t n, int hash, sq_err *e)
{
    if (r->buf_len - r->buf_pos >= n)
        return (long)n;
    if (hash && r->buf_pos > r->hashed) /* hash what is about to be dropped */
        XXH3_64bits_update(r->hash, r->buf + r->hashed, r->buf_pos - r->hashed);
    size_t keep = r->buf_len - r->buf_pos;
    memmove(r->buf, r->buf + r->buf_pos, keep);
    r->buf_off += r->buf_pos;
    r->buf_pos = 0;
    r->buf_len = keep;
    r->hashed = 0;
    while (r->buf_len < n) {
        size_t got = fread(r->buf + r->buf_len, 1, r->buf_cap - r->buf_len, r->f);
        r->buf_len += got;
        if (got == 0) {
            if (ferror(r->f)) {
                sq_fail(e, SQ_EX_IO, "%s: read error: %s", r->name, strerror(errno));
                return -1;
            }
            break;
        }
    }
    return (long)(r->buf_len < n ? r->buf_len : n);
}

static int eof_error(sq_reader *r, sq_err *e)
{
    return sq_fail(e, SQ_EX_DATA, "%s: byte %llu: unexpected end of stream (truncated: no trailer)",
                   r->name, (unsigned long long)(r->buf_off + r->buf_len));
}

/* Copies n bytes of the stream into dst. */
static int take(sq_reader *r, void *dst, size_t n, sq_err *e)
{
    unsigned char *d = dst;
    while (n) {
        size_t chunk = n < r->buf_cap ? n : r->buf_cap;
        long got = fill(r, chunk, !r->done, e);
        if (got < 0)
            return e->code;
        if ((size_t)got < chunk)
            return eof_error(r, e);
        memcpy(d, r->buf + r->buf_pos, chunk);
        r->buf_pos += chunk;
        d += chunk;
        n -= chunk;
    }
    return 0;
}

static int take_u32(sq_reader *r, uint32_t *v, sq_err *e) { return take(r, v, 4, e); }

int sq_stream_peek(FILE *f, const char *name, sq_err *e)
{
    int c = getc(f);
    if (c == EOF && ferror(f))
        return sq_fail(e, SQ_EX_IO, "%s: read failed: %s", name, strerror(errno)), -1;
    if (c != EOF && ungetc(c, f) == EOF)
        return sq_fail(e, SQ_EX_IO, "%s: read failed", name), -1;
    return c == SQ_MAGIC[0];
}

int sq_reader_open(sq_reader *r, FILE *f, const char *name, sq_err *e)
{
    memset(r, 0, sizeof *r);
    r->f = f;
    r->name = name;
    r->buf = malloc(BUF_CAP);
    r->hash = XXH3_createState();
    if (!r->buf || !r->hash)
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    r->buf_cap = BUF_CAP;
    XXH3_64bits_reset(r->hash);

    long got = fill(r, SQ_HEADER_FIXED, 1, e);
    if (got < 0)
        return e->code;
    if (got == 0)
        return sq_fail(e, SQ_EX_DATA, "%s: byte 0: empty input (expected a seqrec stream)", name);
    if (got < 4 || memcmp(r->buf, SQ_MAGIC, 4) != 0)
        return sq_fail(e, SQ_EX_DATA, "%s: byte 0: bad magic (not a seqrec stream)", name);
    if (got < SQ_HEADER_FIXED)
        return eof_error(r, e);
    unsigned char hb[SQ_HEADER_FIXED];
    memcpy(hb, r->buf, sizeof hb);
    r->buf_pos = SQ_HEADER_FIXED;
    sq_header *h = &r->hdr;
    memcpy(&h->version, hb + 4, 2);
    memcpy(&h->kind, hb + 6, 2);
    memcpy(&h->flags, hb + 8, 4);
    memcpy(&h->n_items, hb + 12, 4);
    memcpy(&h->max_len, hb + 16, 4);
    memcpy(&h->meta_len, hb + 20, 4);
    where w = {0, 1, 0, 0, name};
    uint32_t meta_len = h->meta_len;
    h->meta_len = 0; /* owned only once allocated */
    sq_header probe = *h;
    probe.meta_len = meta_len;
    if (check_header(&probe, &w, e))
        return e->code;
    if (meta_len) {
        h->meta = malloc(meta_len + 1);
        if (!h->meta)
            return sq_fail(e, SQ_EX_OSERR, "out of memory");
        if (take(r, h->meta, meta_len, e))
            return e->code;
        h->meta[meta_len] = '\0';
        h->meta_len = meta_len;
        if (memchr(h->meta, '\0', meta_len))
            return sq_fail(e, SQ_EX_DATA, "%s: byte %u: NUL byte in the meta text", name,
                           SQ_HEADER_FIXED + (unsigned)(strlen(h->meta)));
        /* lines end in "\n" (seqrec(5)); the next program's key would
         * otherwise join the last one */
        if (h->meta[meta_len - 1] != '\n')
            return sq_fail(e, SQ_EX_DATA, "%s: byte %u: the meta text does not end with a newline",
                           name, SQ_HEADER_FIXED + meta_len - 1);
    }
    return 0;
}

static int grow(sq_reader *r, uint32_t n, sq_err *e)
{
    if (n <= r->cap && r->items)
        return 0; /* a record of k = 0 still gets arrays, never NULL */
    uint32_t cap = r->cap ? r->cap : 256;
    while (cap < n)
        cap = cap > SQ_MAX_RECORD_ITEMS / 2 ? SQ_MAX_RECORD_ITEMS : cap * 2;
    uint32_t *it = realloc(r->items, (size_t)cap * sizeof *it);
    if (it)
        r->items = it;
    int64_t *ts = it ? realloc(r->ts, (size_t)cap * sizeof *ts) : NULL;
    if (ts)
        r->ts = ts;
    float *sc = ts ? realloc(r->scores, (size_t)cap * sizeof *sc) : NULL;
    if (sc)
        r->scores = sc;
    if (!sc)
        return sq_fail(e, SQ_EX_OSERR, "out of memory for a record of %u items", n);
    r->cap = cap;
    return 0;
}

static int read_trailer(sq_reader *r, sq_err *e)
{
    uint64_t tag_off = rd_off(r);
    /* The checksum covers every byte before the trailer tag. */
    if (r->buf_pos > r->hashed)
        XXH3_64bits_update(r->hash, r->buf + r->hashed, r->buf_pos - r->hashed);
    r->hashed = r->buf_pos;
    uint64_t want = XXH3_64bits_digest(r->hash);
    r->done = 1; /* from here on nothing is hashed */
    r->buf_pos++; /* the tag */
    uint64_t v[3];
    if (take(r, v, sizeof v, e))
        return e->code;
    if (v[0] != r->n_records)
        return sq_fail(e, SQ_EX_DATA, "%s: byte %llu: trailer says %llu records, stream has %llu",
                       r->name, (unsigned long long)(tag_off + 1), (unsigned long long)v[0],
                       (unsigned long long)r->n_records);
    if (v[1] != r->n_inter)
        return sq_fail(e, SQ_EX_DATA, "%s: byte %llu: trailer says %llu interactions, stream has %llu",
                       r->name, (unsigned long long)(tag_off + 9), (unsigned long long)v[1],
                       (unsigned long long)r->n_inter);
    if (v[2] != want)
        return sq_fail(e, SQ_EX_DATA, "%s: byte %llu: checksum mismatch (stream corrupted): "
                       "trailer %016llx, computed %016llx", r->name,
                       (unsigned long long)(tag_off + 17), (unsigned long long)v[2],
                       (unsigned long long)want);
    long got = fill(r, 1, 0, e);
    if (got < 0)
        return e->code;
    if (got > 0)
        return sq_fail(e, SQ_EX_DATA, "%s: byte %llu: data after the trailer", r->name,
                       (unsigned long long)rd_off(r));
    return 0;
}

int sq_reader_each(sq_reader *r, const char *name,
                   int (*fn)(void *ctx, const sq_record *rec, sq_err *e), void *ctx,
                   sq_err *e)
{
    for (;;) {
        uint64_t off = r->buf_off + r->buf_pos; /* where this record starts */
        sq_record rec;
        int got = sq_reader_next(r, &rec, e);
        if (got <= 0)
            return got < 0 ? e->code : SQ_OK;
        sq_err tmp = {0};
        if (fn(ctx, &rec, &tmp))
            return sq_fail(e, tmp.code, "%s: byte %llu: %s", name, (unsigned long long)off,
                           tmp.msg);
    }
}

int sq_reader_next(sq_reader *r, sq_record *rec, sq_err *e)
{
    if (r->done)
        return 0;
    memset(rec, 0, sizeof *rec);
    long got = fill(r, 1, 1, e);
    if (got < 0)
        return -1;
    if (got == 0) {
        eof_error(r, e);
        return -1;
    }
    const sq_header *h = &r->hdr;
    uint64_t rec_off = rd_off(r);
    unsigned tag = r->buf[r->buf_pos];
    if (tag == SQ_TRAILER_TAG)
        return read_trailer(r, e) ? -1 : 0;
    where w = {rec_off, 1, 0, 0, r->name};
    if (tag != h->kind) {
        bad(e, &w, 0, "unexpected record tag 0x%02x in a %s stream", tag, sq_kind_name(h->kind));
        return -1;
    }
    r->buf_pos++;
    if (take_u32(r, &rec->user, e))
        return -1;
    if (h->kind == SQ_RANKS) {
        uint32_t v[3];
        w.base = rd_off(r);
        w.stride = 4;
        if (take(r, v, sizeof v, e))
            return -1;
        rec->item = v[0];
        rec->rank = v[1];
        rec->n_cand = v[2];
        rec->len = 1;
        if (check_rank(h, rec, &w, e))
            return -1;
        r->n_records++;
        r->n_inter++;
        return 1;
    }
    w.base = rd_off(r);
    if (take_u32(r, &rec->len, e) || check_len(h, rec->len, &w, e) || grow(r, rec->len, e))
        return -1;
    rec->items = r->items;
    w.base = rd_off(r);
    w.stride = 4;
    if (take(r, rec->items, (size_t)rec->len * 4, e))
        return -1;
    uint32_t zero_ok = h->kind == SQ_PADDED ? h->max_len : 0;
    if (h->kind == SQ_TOPK) {
        rec->scores = r->scores;
        if (take(r, rec->scores, (size_t)rec->len * 4, e))
            return -1;
    }
    if (check_items(h, rec->items, rec->len, zero_ok, &w, e))
        return -1;
    if (h->flags & SQ_FLAG_TS) {
        rec->ts = r->ts;
        if (take(r, rec->ts, (size_t)rec->len * 8, e))
            return -1;
    }
    if (h->kind == SQ_SPLIT || h->kind == SQ_PADDED) {
        w.base = rd_off(r);
        w.stride = 4;
        if (take_u32(r, &rec->n_train, e) || take_u32(r, &rec->n_valid, e))
            return -1;
        if (check_cuts(h, rec, &w, e))
            return -1;
        if (h->kind == SQ_PADDED && take_u32(r, &rec->view, e))
            return -1;
    }
    r->n_records++;
    r->n_inter += rec->len;
    return 1;
}

void sq_reader_free(sq_reader *r)
{
    free(r->buf);
    if (r->hash)
        XXH3_freeState(r->hash);
    free(r->items);
    free(r->ts);
    free(r->scores);
    sq_header_free(&r->hdr);
    memset(r, 0, sizeof *r);
}

/* ---- writing ---- */

static int wr_flush(sq_writer *w, int hash, sq_err *e)
{
    if (!w->buf_len)
        return 0;
    if (hash)
        XXH3_64bits_update(w->hash, w->buf, w->buf_len);
    if (fwrite(w->buf, 1, w->buf_len, w->f) != w->buf_len)
        return sq_fail(e, SQ_EX_IO, "%s: write error: %s", w->name, strerror(errno));
    w->buf_len = 0;
    return 0;
}

static int put(sq_writer *w, const void *src, size_t n, sq_err *e)
{
    const unsigned char *s = src;
    while (n) {
        if (w->buf_len == w->buf_cap && wr_flush(w, 1, e))
            return e->code;
        size_t chunk = w->buf_cap - w->buf_len;
        if (chunk > n)
            chunk = n;
        memcpy(w->buf + w->buf_len, s, chunk);
        w->buf_len += chunk;
        s += chunk;
        n -= chunk;
    }
    return 0;
}

static int put_u32(sq_writer *w, uint32_t v, sq_err *e) { return put(w, &v, 4, e); }

int sq_writer_open(sq_writer *w, FILE *f, const char *name, const sq_header *h, sq_err *e)
{
    memset(w, 0, sizeof *w);
    w->f = f;
    w->name = name;
    w->buf = malloc(BUF_CAP);
    w->hash = XXH3_createState();
    if (!w->buf || !w->hash)
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    w->buf_cap = BUF_CAP;
    XXH3_64bits_reset(w->hash);
    if (sq_header_copy(&w->hdr, h, e))
        return e->code;
    w->hdr.version = SQ_VERSION;
    where wh = {0, 1, 1, 0, name};
    if (check_header(&w->hdr, &wh, e))
        return e->code;
    uint16_t v16[2] = {w->hdr.version, w->hdr.kind};
    uint32_t v32[4] = {w->hdr.flags, w->hdr.n_items, w->hdr.max_len, w->hdr.meta_len};
    if (put(w, SQ_MAGIC, 4, e) || put(w, v16, sizeof v16, e) || put(w, v32, sizeof v32, e) ||
        put(w, w->hdr.meta, w->hdr.meta_len, e))
        return e->code;
    return 0;
}

int sq_write(sq_writer *w, const sq_record *rec, sq_err *e)
{
    const sq_header *h = &w->hdr;
    where wh = {0, 1, 1, w->n_records, w->name};
    unsigned char tag = (unsigned char)h->kind;
    if (put(w, &tag, 1, e) || put_u32(w, rec->user, e))
        return e->code;
    if (h->kind == SQ_RANKS) {
        if (check_rank(h, rec, &wh, e))
            return e->code;
        uint32_t v[3] = {rec->item, rec->rank, rec->n_cand};
        if (put(w, v, sizeof v, e))
            return e->code;
        w->n_records++;
        w->n_inter++;
        return 0;
    }
    uint32_t zero_ok = h->kind == SQ_PADDED ? h->max_len : 0;
    if (check_len(h, rec->len, &wh, e) || check_items(h, rec->items, rec->len, zero_ok, &wh, e))
        return e->code;
    if ((h->kind == SQ_SPLIT || h->kind == SQ_PADDED) && check_cuts(h, rec, &wh, e))
        return e->code;
    if ((h->flags & SQ_FLAG_TS) && !rec->ts)
        return bad(e, &wh, 0, "record without timestamps in a timestamped stream");
    if (put_u32(w, rec->len, e) || put(w, rec->items, (size_t)rec->len * 4, e))
        return e->code;
    if (h->kind == SQ_TOPK && put(w, rec->scores, (size_t)rec->len * 4, e))
        return e->code;
    if ((h->flags & SQ_FLAG_TS) && put(w, rec->ts, (size_t)rec->len * 8, e))
        return e->code;
    if (h->kind == SQ_SPLIT || h->kind == SQ_PADDED) {
        if (put_u32(w, rec->n_train, e) || put_u32(w, rec->n_valid, e))
            return e->code;
        if (h->kind == SQ_PADDED && put_u32(w, rec->view, e))
            return e->code;
    }
    w->n_records++;
    w->n_inter += rec->len;
    return 0;
}

int sq_writer_finish(sq_writer *w, sq_err *e)
{
    if (wr_flush(w, 1, e))
        return e->code;
    unsigned char tag = SQ_TRAILER_TAG;
    uint64_t v[3] = {w->n_records, w->n_inter, XXH3_64bits_digest(w->hash)};
    if (put(w, &tag, 1, e) || put(w, v, sizeof v, e) || wr_flush(w, 0, e))
        return e->code;
    if (fflush(w->f) != 0)
        return sq_fail(e, SQ_EX_IO, "%s: write error: %s", w->name, strerror(errno));
    return 0;
}

void sq_writer_free(sq_writer *w)
{
    free(w->buf);
    if (w->hash)
        XXH3_freeState(w->hash);
    sq_header_free(&w->hdr);
    memset(w, 0, sizeof *w);
}
