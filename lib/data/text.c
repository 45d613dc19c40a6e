#include "text.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static void put_list_u32(FILE *f, const uint32_t *v, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        fprintf(f, i ? " %" PRIu32 : "%" PRIu32, v[i]);
}

static void put_list_i64(FILE *f, const int64_t *v, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        fprintf(f, i ? " %" PRId64 : "%" PRId64, v[i]);
}

int sq_text_write(FILE *f, const sq_header *h, const sq_record *r)
{
    fprintf(f, "%" PRIu32, r->user);
    switch (h->kind) {
    case SQ_SEQUENCES:
        fputc('\t', f);
        put_list_u32(f, r->items, r->len);
        break;
    case SQ_SPLIT:
    case SQ_PADDED: {
        uint32_t n_test = r->len - r->n_train - r->n_valid;
        if (h->kind == SQ_PADDED)
            fprintf(f, "\t%" PRIu32, r->view);
        fputc('\t', f);
        put_list_u32(f, r->items, r->n_train);
        fputc('\t', f);
        put_list_u32(f, r->items + r->n_train, r->n_valid);
        fputc('\t', f);
        put_list_u32(f, r->items + r->n_train + r->n_valid, n_test);
        break;
    }
    case SQ_RANKS:
        fprintf(f, "\t%" PRIu32 "\t%" PRIu32 "\t%" PRIu32, r->rank, r->n_cand, r->item);
        break;
    case SQ_TOPK:
        fputc('\t', f);
        for (uint32_t i = 0; i < r->len; i++)
            fprintf(f, "%s%" PRIu32 ":%.9g", i ? "," : "", r->items[i], (double)r->scores[i]);
        break;
    }
    if (r->ts) {
        fputc('\t', f);
        put_list_i64(f, r->ts, r->len);
    }
    if (fputc('\n', f) == EOF)
        return SQ_EX_IO;
    return 0;
}

int sq_text_buf_reserve(sq_text_buf *b, size_t n, sq_err *e)
{
    if (n <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap * 2 : 64;
    while (cap < n)
        cap *= 2;
    uint32_t *it = realloc(b->items, cap * sizeof *it);
    if (it)
        b->items = it;
    int64_t *ts = it ? realloc(b->ts, cap * sizeof *ts) : NULL;
    if (ts)
        b->ts = ts;
    float *sc = ts ? realloc(b->scores, cap * sizeof *sc) : NULL;
    if (sc)
        b->scores = sc;
    if (!sc)
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    b->cap = cap;
    return 0;
}

void sq_text_buf_free(sq_text_buf *b)
{
    free(b->items);
    free(b->ts);
    free(b->scores);
    memset(b, 0, sizeof *b);
}

/* Splits the line at tabs; returns the number of fields (at most max). */
static int fields(char *line, char **f, int max)
{
    int n = 0;
    f[n++] = line;
    for (char *p = line; *p && n < max + 1; p++)
        if (*p == '\t') {
            *p = '\0';
            f[n++] = p + 1;
        }
    return n;
}

static int parse_u32(const char *s, uint32_t *v)
{
    char *end;
    errno = 0;
    unsigned long x = strtoul(s, &end, 10);
    if (end == s || *end || errno || x > UINT32_MAX || *s == '-')
        return -1;
    *v = (uint32_t)x;
    return 0;
}

/* Appends a space-separated list of numbers to the buffer at *n. */
static int parse_list(const char *s, sq_text_buf *b, size_t *n, int as_ts,
                      const char *where, const char *what, sq_err *e)
{
    const char *p = s;
    while (*p) {
        while (*p == ' ')
            p++;
        if (!*p)
            break;
        if (sq_text_buf_reserve(b, *n + 1, e))
            return e->code;
        char *end;
        errno = 0;
        if (as_ts) {
            long long x = strtoll(p, &end, 10);
            b->ts[*n] = x;
        } else {
            unsigned long x = strtoul(p, &end, 10);
            if (*p == '-' || x > UINT32_MAX)
                errno = ERANGE;
            b->items[*n] = (uint32_t)x;
        }
        if (end == p || errno || (*end && *end != ' '))
            return sq_fail(e, SQ_EX_DATA, "%s: bad number in the %s field", where, what);
        (*n)++;
        p = end;
    }
    return 0;
}

int sq_text_parse(char *line, uint16_t kind, int with_ts, sq_text_buf *b,
                  sq_record *rec, const char *where, sq_err *e)
{
    memset(rec, 0, sizeof *rec);
    char *f[8];
    int want;
    switch (kind) {
    case SQ_SEQUENCES: want = 2; break;
    case SQ_SPLIT: want = 4; break;
    case SQ_PADDED: want = 5; break;
    case SQ_RANKS: want = 4; break;
    default: want = 2; break;
    }
    if (with_ts)
        want++;
    int n = fields(line, f, 7);
    if (n != want)
        return sq_fail(e, SQ_EX_DATA, "%s: expected %d tab-separated fields for a %s record, found %d",
                       where, want, sq_kind_name(kind), n);
    if (parse_u32(f[0], &rec->user))
        return sq_fail(e, SQ_EX_DATA, "%s: bad user id '%s'", where, f[0]);
    size_t len = 0;
    if (kind == SQ_RANKS) {
        if (parse_u32(f[1], &rec->rank) || parse_u32(f[2], &rec->n_cand) || parse_u32(f[3], &rec->item))
            return sq_fail(e, SQ_EX_DATA, "%s: bad number in a ranks record", where);
        rec->len = 1;
        return 0;
    }
    if (kind == SQ_TOPK) {
        for (char *p = f[1]; *p;) {
            if (sq_text_buf_reserve(b, len + 1, e))
                return e->code;
            char *end;
            errno = 0;
            unsigned long it = strtoul(p, &end, 10);
            if (end == p || *end != ':' || errno || it > UINT32_MAX)
                return sq_fail(e, SQ_EX_DATA, "%s: expected item:score in the topk field", where);
            p = end + 1;
            float sc = strtof(p, &end);
            if (end == p || (*end && *end != ','))
                return sq_fail(e, SQ_EX_DATA, "%s: bad score in the topk field", where);
            b->items[len] = (uint32_t)it;
            b->scores[len++] = sc;
            p = *end ? end + 1 : end;
        }
        rec->len = (uint32_t)len;
        rec->items = b->items;
        rec->scores = b->scores;
        return 0;
    }
    int first = 1;
    if (kind == SQ_PADDED) {
        if (parse_u32(f[1], &rec->view))
            return sq_fail(e, SQ_EX_DATA, "%s: bad view number '%s'", where, f[1]);
        first = 2;
    }
    int lists = kind == SQ_SEQUENCES ? 1 : 3;
    static const char *names[3] = {"train", "validation", "test"};
    size_t cut[3];
    for (int i = 0; i < lists; i++) {
        if (parse_list(f[first + i], b, &len, 0, where, lists == 1 ? "items" : names[i], e))
            return e->code;
        cut[i] = len;
    }
    if (len > SQ_MAX_RECORD_ITEMS)
        return sq_fail(e, SQ_EX_DATA, "%s: oversize record", where);
    rec->len = (uint32_t)len;
    if (lists == 3) {
        rec->n_train = (uint32_t)cut[0];
        rec->n_valid = (uint32_t)(cut[1] - cut[0]);
    }
    if (with_ts) {
        size_t nts = 0;
        if (parse_list(f[first + lists], b, &nts, 1, where, "timestamps", e))
            return e->code;
        if (nts != len)
            return sq_fail(e, SQ_EX_DATA, "%s: %zu timestamps for %zu items", where, nts, len);
        rec->ts = b->ts;
    }
    rec->items = b->items; /* only now: parsing may have moved the arrays */
    return 0;
}
