/* dataset.c - a split, padded or sequences stream in memory (dataset.h),
 * and the id maps of seqrec-preprocess. */
#include "dataset.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"

int sq_dataset_init(sq_dataset *ds, const sq_header *h, sq_err *e)
{
    memset(ds, 0, sizeof *ds);
    if (h->kind != SQ_SPLIT && h->kind != SQ_PADDED && h->kind != SQ_SEQUENCES)
        return sq_fail(e, SQ_EX_DATA, "expected a split, padded or sequences stream, got %s",
                       sq_kind_name(h->kind) ? sq_kind_name(h->kind) : "?");
    return sq_header_copy(&ds->hdr, h, e);
}

/* Start of the last run of non-zero items in row[0, n): the sequence itself
 * whatever the padding policy. */
static uint32_t last_run(const uint32_t *row, uint32_t n)
{
    uint32_t end = n;
    while (end > 0 && row[end - 1] == 0)
        end--;
    uint32_t start = end;
    while (start > 0 && row[start - 1] != 0)
        start--;
    return start;
}

int sq_dataset_add(sq_dataset *ds, const sq_record *rec, sq_err *e)
{
    if (ds->n_seq == ds->cap_seq) {
        uint64_t cap = ds->cap_seq ? ds->cap_seq * 2 : 1024;
        sq_seq *s = realloc(ds->seq, cap * sizeof *s);
        if (!s)
            return sq_fail(e, SQ_EX_OSERR, "out of memory for %llu users",
                           (unsigned long long)cap);
        ds->seq = s;
        ds->cap_seq = cap;
    }
    if (ds->n_items_total + rec->len > ds->cap_items) {
        uint64_t cap = ds->cap_items ? ds->cap_items : 4096;
        while (cap < ds->n_items_total + rec->len)
            cap *= 2;
        uint32_t *it = realloc(ds->items, cap * sizeof *it);
        if (!it)
            return sq_fail(e, SQ_EX_OSERR, "out of memory for %llu interactions",
                           (unsigned long long)cap);
        ds->items = it;
        ds->cap_items = cap;
    }
    sq_seq *s = &ds->seq[ds->n_seq++];
    memset(s, 0, sizeof *s);
    s->user = rec->user;
    s->len = rec->len;
    s->off = ds->n_items_total;
    if (rec->len)
        memcpy(ds->items + s->off, rec->items, (size_t)rec->len * sizeof *rec->items);
    ds->n_items_total += rec->len;
    if (ds->hdr.kind == SQ_SEQUENCES) {
        s->n_train = rec->len;
    } else {
        s->n_train = rec->n_train;
        s->n_valid = rec->n_valid;
    }
    if (ds->hdr.kind == SQ_PADDED) {
        s->view = rec->view;
        s->hist = last_run(rec->items, rec->n_train);
    }
    return 0;
}

uint32_t sq_dataset_n_users(const sq_dataset *ds)
{
    uint32_t n = 0;
    for (uint64_t i = 0; i < ds->n_seq; i++)
        if (ds->seq[i].user >= n)
            n = ds->seq[i].user == UINT32_MAX ? UINT32_MAX : ds->seq[i].user + 1;
    return n;
}

int sq_dataset_finish(sq_dataset *ds, sq_err *e)
{
    uint32_t n = ds->hdr.n_items;
    free(ds->pop);
    ds->pop = calloc((size_t)n + 1, sizeof *ds->pop);
    if (!ds->pop)
        return sq_fail(e, SQ_EX_OSERR, "out of memory for %u item counts", n);
    ds->n_train_total = 0;
    for (uint64_t r = 0; r < ds->n_seq; r++) {
        const sq_seq *s = &ds->seq[r];
        if (s->view != 0)
            continue; /* another view of a user already counted */
        const uint32_t *it = sq_dataset_items(ds, r);
        for (uint32_t j = s->hist; j < s->n_train; j++)
            ds->pop[it[j]]++;
        ds->n_train_total += s->n_train - s->hist;
    }
    ds->pop[0] = 0; /* a padded row's zeros are not an item */
    return 0;
}

int sq_dataset_read(sq_dataset *ds, FILE *f, const char *name, sq_err *e)
{
    return sq_dataset_read_as(ds, f, name, SQ_DATASET_KINDS, e);
}

int sq_dataset_read_as(sq_dataset *ds, FILE *f, const char *name, unsigned kinds, sq_err *e)
{
    sq_reader rd;
    memset(ds, 0, sizeof *ds);
    if (sq_reader_open(&rd, f, name, e))
        goto fail;
    if (sq_expect_kind(&rd.hdr, name, kinds & SQ_DATASET_KINDS, NULL, e))
        goto fail;
    if (sq_dataset_init(ds, &rd.hdr, e))
        goto fail;
    sq_record rec;
    int got;
    while ((got = sq_reader_next(&rd, &rec, e)) == 1)
        if (sq_dataset_add(ds, &rec, e))
            goto fail;
    if (got < 0 || sq_dataset_finish(ds, e))
        goto fail;
    sq_reader_free(&rd);
    return 0;
fail:
    sq_reader_free(&rd);
    sq_dataset_free(ds);
    return e->code;
}

void sq_dataset_free(sq_dataset *ds)
{
    sq_header_free(&ds->hdr);
    free(ds->seq);
    free(ds->items);
    free(ds->pop);
    memset(ds, 0, sizeof *ds);
}

/* ---- id maps ---- */

static int parse_dense(const char *s, uint32_t *v)
{
    if (*s < '0' || *s > '9')
        return -1;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (errno || *end || x == 0 || x > UINT32_MAX)
        return -1;
    *v = (uint32_t)x;
    return 0;
}

/* Sets tab[dense] = val, growing tab (NULL-filled) as needed. */
static int map_put(const char ***tab, uint32_t *n, uint32_t dense, const char *val)
{
    if (dense > *n) {
        uint64_t cap = *n ? (uint64_t)*n * 2 : 1024;
        while (cap < dense)
            cap *= 2;
        if (cap > UINT32_MAX)
            cap = UINT32_MAX;
        const char **t = realloc(*tab, ((size_t)cap + 1) * sizeof *t);
        if (!t)
            return -1;
        for (uint64_t i = *n + (*tab ? 1 : 0); i <= cap; i++)
            t[i] = NULL;
        *tab = t;
        *n = (uint32_t)cap;
    }
    (*tab)[dense] = val;
    return 0;
}

int sq_idmap_line(const char *s, size_t n, const char *path, unsigned long long line,
                  int *kind, uint32_t *dense, const char **orig, size_t *orig_len,
                  sq_err *e)
{
    if (n && s[n - 1] == '\r')
        n--;
    if (n == 0)
        return 1;
    const char *t1 = memchr(s, '\t', n);
    const char *t2 = t1 ? memchr(t1 + 1, '\t', n - (size_t)(t1 + 1 - s)) : NULL;
    if (!t2)
        return sq_fail(e, SQ_EX_DATA, "%s: line %llu: expected kind<TAB>dense<TAB>original",
                       path, line);
    size_t kl = (size_t)(t1 - s), dl = (size_t)(t2 - t1 - 1);
    if (kl == 4 && memcmp(s, "user", 4) == 0)
        *kind = 0;
    else if (kl == 4 && memcmp(s, "item", 4) == 0)
        *kind = 1;
    else
        return sq_fail(e, SQ_EX_DATA, "%s: line %llu: kind must be user or item, not '%.*s'",
                       path, line, (int)(kl > 40 ? 40 : kl), s);
    char num[16];
    snprintf(num, sizeof num, "%.*s", (int)(dl < sizeof num - 1 ? dl : sizeof num - 1), t1 + 1);
    if (dl >= sizeof num || parse_dense(num, dense))
        return sq_fail(e, SQ_EX_DATA, "%s: line %llu: bad dense id '%.*s'", path, line,
                       (int)(dl > 40 ? 40 : dl), t1 + 1);
    *orig = t2 + 1;
    *orig_len = n - (size_t)(t2 + 1 - s);
    if (*orig_len == 0)
        return sq_fail(e, SQ_EX_DATA, "%s: line %llu: empty original %s id", path, line,
                       *kind ? "item" : "user");
    return 0;
}

/* Parses the map text m->text[0, len) (NUL-terminated, owned by m) in
 * place: each line's original id ends in a NUL written over its newline (or
 * CR). Messages are formed before the map is freed: they quote it.
 *
 * A map may have holes (a dense id without a line), but no dense id above
 * its size in bytes (a line takes at least 9, so a map of N ids has more
 * than N bytes): the tables are indexed by dense id, and a corrupt id of
 * 4e9 would otherwise ask for 32 GB instead of being refused. */
static int idmap_parse(sq_idmap *m, size_t len, const char *name, sq_err *e)
{
    if (memchr(m->text, '\0', len))
        return sq_fail(e, SQ_EX_DATA, "%s: NUL byte in a map file", name);
    char *p = m->text;
    for (uint64_t line = 1; *p; line++) {
        char *eol = strchr(p, '\n');
        size_t n = eol ? (size_t)(eol - p) : strlen(p);
        char *next = eol ? eol + 1 : p + n;
        int kind, rc;
        uint32_t dense;
        const char *orig;
        size_t ol;
        rc = sq_idmap_line(p, n, name, (unsigned long long)line, &kind, &dense, &orig, &ol, e);
        if (rc > 1)
            return rc;
        if (rc == 0 && dense > len)
            return sq_fail(e, SQ_EX_DATA, "%s: line %llu: dense %s id %u is larger than "
                           "the map itself (%zu bytes; a map numbers each kind's ids 1..N, "
                           "a line each)", name, (unsigned long long)line,
                           kind ? "item" : "user", (unsigned)dense, len);
        if (rc == 0) {
            ((char *)orig)[ol] = '\0';
            if (map_put(kind ? &m->item : &m->user, kind ? &m->n_item : &m->n_user, dense,
                        orig))
                return sq_fail(e, SQ_EX_OSERR, "out of memory for the map %s", name);
            uint32_t *top = kind ? &m->items : &m->users;
            if (dense > *top)
                *top = dense;
        }
        p = next;
    }
    return 0;
}

int sq_idmap_read(sq_idmap *m, const char *path, sq_err *e)
{
    return sq_idmap_read_raw(m, path, NULL, e);
}

int sq_idmap_read_raw(sq_idmap *m, const char *path, char **raw, sq_err *e)
{
    memset(m, 0, sizeof *m);
    if (raw)
        *raw = NULL;
    FILE *f;
    if (sq_in_open(&f, path, e))
        return e->code;
    const char *name = sq_in_name(path);
    size_t cap = 1 << 16, len = 0;
    for (;;) {
        if (!m->text || len == cap) {
            size_t want = m->text ? cap * 2 : cap;
            char *t = realloc(m->text, want + 1);
            if (!t) {
                sq_in_close(f);
                sq_fail(e, SQ_EX_OSERR, "out of memory for the map %s", name);
                goto fail;
            }
            m->text = t;
            cap = want;
        }
        size_t got = fread(m->text + len, 1, cap - len, f);
        len += got;
        if (got == 0)
            break;
    }
    int rerr = ferror(f);
    sq_in_close(f);
    if (rerr) {
        sq_fail(e, SQ_EX_IO, "%s: read error", name);
        goto fail;
    }
    m->text[len] = '\0';
    m->len = len;
    if (raw && !(*raw = malloc(len + 1))) {
        sq_fail(e, SQ_EX_OSERR, "out of memory for the map %s", name);
        goto fail;
    }
    if (raw)
        memcpy(*raw, m->text, len + 1);
    if (idmap_parse(m, len, name, e) == 0)
        return 0;
fail:
    if (raw) {
        free(*raw);
        *raw = NULL;
    }
    sq_idmap_free(m);
    return e->code;
}

int sq_idmap_parse(sq_idmap *m, const char *bytes, size_t len, const char *name, sq_err *e)
{
    memset(m, 0, sizeof *m);
    if (!(m->text = malloc(len + 1)))
        return sq_fail(e, SQ_EX_OSERR, "out of memory for the map %s", name);
    memcpy(m->text, bytes, len);
    m->text[len] = '\0';
    m->len = len;
    if (idmap_parse(m, len, name, e) == 0)
        return 0;
    sq_idmap_free(m);
    return e->code;
}

const char *sq_idmap_user(const sq_idmap *m, uint32_t dense)
{
    return dense >= 1 && dense <= m->n_user ? m->user[dense] : NULL;
}

const char *sq_idmap_item(const sq_idmap *m, uint32_t dense)
{
    return dense >= 1 && dense <= m->n_item ? m->item[dense] : NULL;
}

void sq_idmap_free(sq_idmap *m)
{
    free(m->text);
    free(m->user);
    free(m->item);
    memset(m, 0, sizeof *m);
}
