/* textenc.c - text records back into a stream (see textenc.h). */
#include "textenc.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "stream.h"
#include "text.h"

/* Text records, kept until n_items is known. */
typedef struct {
    sq_record *recs;
    uint64_t *lines;    /* the input line of each record, for messages */
    size_t n, cap;
    sq_text_buf arr;    /* every record's items, timestamps and scores */
    size_t n_items;     /* entries of arr in use */
} record_list;

static void record_list_free(record_list *l)
{
    free(l->recs);
    free(l->lines);
    sq_text_buf_free(&l->arr);
}

static int keep(record_list *l, const sq_record *r, uint64_t lineno, sq_err *e)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        sq_record *p = realloc(l->recs, cap * sizeof *p);
        if (p)
            l->recs = p;
        uint64_t *ln = p ? realloc(l->lines, cap * sizeof *ln) : NULL;
        if (!ln)
            return sq_fail(e, SQ_EX_OSERR, "out of memory");
        l->lines = ln;
        l->cap = cap;
    }
    l->lines[l->n] = lineno;
    if (sq_text_buf_reserve(&l->arr, l->n_items + r->len, e))
        return e->code;
    sq_record *k = &l->recs[l->n++];
    *k = *r;
    /* Arrays are stored as offsets until the end, as the buffers move. */
    k->items = (uint32_t *)(uintptr_t)l->n_items;
    if (r->items)
        memcpy(l->arr.items + l->n_items, r->items, r->len * sizeof *r->items);
    if (r->ts)
        memcpy(l->arr.ts + l->n_items, r->ts, r->len * sizeof *r->ts);
    if (r->scores)
        memcpy(l->arr.scores + l->n_items, r->scores, r->len * sizeof *r->scores);
    l->n_items += r->items ? r->len : 0;
    return 0;
}

/* Parses every line of in into l; *max_item = the largest item id seen. */
static int read_records(FILE *in, const char *name, const sq_text_encode_opts *o,
                        record_list *l, uint32_t *max_item, sq_err *e)
{
    sq_text_buf b = {0};
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    uint64_t lineno = 0;
    int rc = 0;
    while (!rc && (n = getline(&line, &cap, in)) >= 0) {
        lineno++;
        /* the parser stops at a NUL: the rest of the line would vanish */
        const char *nul = memchr(line, '\0', (size_t)n);
        if (nul) {
            rc = sq_fail(e, SQ_EX_DATA, "%s: line %" PRIu64 ": a NUL byte (byte %zu of the line)",
                         name, lineno, (size_t)(nul - line) + 1);
            break;
        }
        if (n > 0 && line[n - 1] == '\n')
            line[--n] = '\0';
        if (n == 0 || line[0] == '#')
            continue;
        char where[512];
        snprintf(where, sizeof where, "%s: line %" PRIu64, name, lineno);
        sq_record rec;
        rc = sq_text_parse(line, o->kind, o->with_ts, &b, &rec, where, e);
        if (!rc) {
            for (uint32_t i = 0; i < rec.len && rec.items; i++)
                if (rec.items[i] > *max_item)
                    *max_item = rec.items[i];
            if (rec.item > *max_item)
                *max_item = rec.item;
            rc = keep(l, &rec, lineno, e);
        }
    }
    if (!rc && ferror(in))
        rc = sq_fail(e, SQ_EX_IO, "%s: read error", name);
    else if (!rc && !feof(in)) /* getline failed without EOF: no memory */
        rc = sq_fail(e, SQ_EX_OSERR, "out of memory");
    free(line);
    sq_text_buf_free(&b);
    return rc;
}

/* Adds one "KEY=VALUE" entry to h's meta. */
static int add_meta(sq_header *h, const char *kv, sq_err *e)
{
    const char *eq = strchr(kv, '=');
    if (!eq)
        return sq_fail(e, SQ_EX_SOFTWARE, "bad meta '%s': expected KEY=VALUE", kv);
    size_t klen = (size_t)(eq - kv);
    char *key = malloc(klen + 1); /* kv is the caller's: not cut in place */
    if (!key)
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    memcpy(key, kv, klen);
    key[klen] = '\0';
    int rc = sq_meta_add(h, e, key, "%s", eq + 1);
    free(key);
    return rc;
}

/* The writer names a bad record "OUTPUT: record N: reason"; the reader of
 * the text wants "INPUT: line L: reason". */
static int at_line(sq_err *e, const char *in_name, uint64_t lineno)
{
    char reason[sizeof e->msg];
    const char *r = strstr(e->msg, ": record ");
    r = r ? strstr(r + 9, ": ") : NULL;
    snprintf(reason, sizeof reason, "%s", r ? r + 2 : e->msg);
    e->code = 0;
    return sq_fail(e, SQ_EX_DATA, "%s: line %" PRIu64 ": %s", in_name, lineno, reason);
}

/* Writes the header h and the kept records to out. */
static int write_records(const record_list *l, const sq_header *h, const char *in_name,
                         FILE *out, const char *out_name, sq_err *e)
{
    sq_writer w = {0};
    int rc = sq_writer_open(&w, out, out_name, h, e);
    for (size_t i = 0; !rc && i < l->n; i++) {
        sq_record rec = l->recs[i];
        size_t off = (size_t)(uintptr_t)rec.items;
        /* the arrays are NULL when every record is empty: no offset then */
        rec.items = h->kind != SQ_RANKS && l->arr.items ? l->arr.items + off : NULL;
        rec.ts = (h->flags & SQ_FLAG_TS) && l->arr.ts ? l->arr.ts + off : NULL;
        rec.scores = h->kind == SQ_TOPK && l->arr.scores ? l->arr.scores + off : NULL;
        rc = sq_write(&w, &rec, e);
        if (rc == SQ_EX_DATA)
            rc = at_line(e, in_name, l->lines[i]);
    }
    if (!rc)
        rc = sq_writer_finish(&w, e);
    sq_writer_free(&w);
    return rc;
}

int sq_text_encode(FILE *in, const char *in_name, const sq_text_encode_opts *o,
                   FILE *out, const char *out_name, sq_err *e)
{
    record_list l = {0};
    uint32_t max_item = 0;
    int rc = read_records(in, in_name, o, &l, &max_item, e);
    sq_header h;
    sq_header_init(&h, o->kind, o->n_items >= 0 ? (uint32_t)o->n_items : max_item);
    h.max_len = o->max_len > 0 ? (uint32_t)o->max_len : 0;
    h.flags = o->with_ts ? SQ_FLAG_TS : 0;
    for (int i = 0; !rc && i < o->n_meta; i++)
        rc = add_meta(&h, o->meta[i], e);
    if (!rc)
        rc = sq_meta_add(&h, e, "cat.from_text", "%s", in_name);
    if (!rc)
        rc = write_records(&l, &h, in_name, out, out_name, e);
    sq_header_free(&h);
    record_list_free(&l);
    return rc;
}
