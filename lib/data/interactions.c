/* interactions.c - interning, sorting, filtering and remapping of
 * interaction logs (see interactions.h for the order of the steps). */
#include "interactions.h"
#include "dataset.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#define SQ_MAX_ROWS ((size_t)UINT32_MAX - 1) /* row indices are u32 in sorts */
#define SQ_MAX_IDS (UINT32_MAX - 2)          /* id + 1 must fit a u32 slot */

static int oom(sq_err *e, const char *what)
{
    return sq_fail(e, SQ_EX_OSERR, "out of memory (%s)", what);
}

/* Grows *p to hold at least need elements of size sz (doubling). */
static int grow(void **p, size_t *cap, size_t need, size_t sz, size_t first)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : first;
    while (c < need)
        c *= 2;
    if (c > SIZE_MAX / sz)
        return -1;
    void *q = realloc(*p, c * sz);
    if (!q)
        return -1;
    *p = q;
    *cap = c;
    return 0;
}

/* ---- string interning ---- */

static int ids_rehash(sq_ids *d, size_t n_slots)
{
    sq_slot *s = calloc(n_slots, sizeof *s);
    if (!s)
        return -1;
    size_t mask = n_slots - 1;
    for (uint32_t id = 0; id < d->n; id++) {
        uint64_t h = d->hash[id];
        size_t i = (size_t)h & mask;
        while (s[i].id1)
            i = (i + 1) & mask;
        s[i].id1 = id + 1;
        s[i].tag = (uint32_t)(h >> 32);
    }
    free(d->slots);
    d->slots = s;
    d->n_slots = n_slots;
    return 0;
}

int sq_ids_intern(sq_ids *d, const char *s, size_t n, uint32_t *id, sq_err *e)
{
    if (!d->slots && ids_rehash(d, 1024))
        return oom(e, "id table");
    uint64_t h = XXH3_64bits(s, n);
    uint32_t tag = (uint32_t)(h >> 32);
    size_t mask = d->n_slots - 1;
    size_t i = (size_t)h & mask;
    for (; d->slots[i].id1; i = (i + 1) & mask) {
        uint32_t k = d->slots[i].id1 - 1;
        if (d->slots[i].tag == tag && d->len[k] == n &&
            memcmp(d->bytes + d->off[k], s, n) == 0) {
            *id = k;
            return 0;
        }
    }
    if (d->n >= SQ_MAX_IDS)
        return sq_fail(e, SQ_EX_DATA, "more than %u distinct ids", (unsigned)SQ_MAX_IDS);
    if (n > UINT32_MAX)
        return sq_fail(e, SQ_EX_DATA, "id longer than 4 GiB");
    if (d->n == d->cap) {
        size_t c = d->cap ? (size_t)d->cap * 2 : 1024;
        if (c > SQ_MAX_IDS)
            c = SQ_MAX_IDS;
        size_t *off = realloc(d->off, c * sizeof *off);
        if (off)
            d->off = off;
        uint32_t *len = realloc(d->len, c * sizeof *len);
        if (len)
            d->len = len;
        uint64_t *hash = realloc(d->hash, c * sizeof *hash);
        if (hash)
            d->hash = hash;
        if (!off || !len || !hash)
            return oom(e, "id table");
        d->cap = (uint32_t)c;
    }
    if (grow((void **)&d->bytes, &d->bytes_cap, d->bytes_len + n + 1, 1, 1 << 16))
        return oom(e, "id strings");
    memcpy(d->bytes + d->bytes_len, s, n);
    d->bytes[d->bytes_len + n] = '\0';
    uint32_t k = d->n++;
    d->off[k] = d->bytes_len;
    d->len[k] = (uint32_t)n;
    d->hash[k] = h;
    d->bytes_len += n + 1;
    d->slots[i].id1 = k + 1;
    d->slots[i].tag = tag;
    /* keep the table at most half full so that probes stay short */
    if ((size_t)d->n * 2 > d->n_slots && ids_rehash(d, d->n_slots * 2))
        return oom(e, "id table");
    *id = k;
    return 0;
}

const char *sq_ids_str(const sq_ids *d, uint32_t id)
{
    return d->bytes + d->off[id];
}

void sq_ids_free(sq_ids *d)
{
    free(d->bytes);
    free(d->off);
    free(d->len);
    free(d->hash);
    free(d->slots);
    memset(d, 0, sizeof *d);
}

/* ---- the table ---- */

void sq_inter_init(sq_inter *t)
{
    memset(t, 0, sizeof *t);
    t->has_ts = -1;
}

static void free_remap(sq_inter *t)
{
    free(t->user_raw);
    free(t->item_raw);
    free(t->item_dense);
    free(t->user_start);
    t->user_raw = t->item_raw = t->item_dense = NULL;
    t->user_start = NULL;
    t->n_users = t->n_items = 0;
}

void sq_inter_free(sq_inter *t)
{
    sq_ids_free(&t->users);
    sq_ids_free(&t->items);
    free(t->user);
    free(t->item);
    free(t->ts);
    free_remap(t);
    sq_inter_init(t);
}

int sq_inter_set_ts(sq_inter *t, int has_ts, const char *name, sq_err *e)
{
    if (t->has_ts == -1) {
        t->has_ts = has_ts ? 1 : 0;
        return 0;
    }
    if (t->has_ts != (has_ts ? 1 : 0))
        return sq_fail(e, SQ_EX_DATA, "%s: %s timestamps but the inputs before it %s",
                       name, has_ts ? "has" : "has no", has_ts ? "do not" : "do");
    return 0;
}

int sq_inter_add(sq_inter *t, uint32_t user, uint32_t item, int64_t ts, sq_err *e)
{
    if (t->has_ts == -1)
        t->has_ts = 0; /* rows added without sq_inter_set_ts carry no time */
    if (t->n == t->cap) {
        if (t->n >= SQ_MAX_ROWS)
            return sq_fail(e, SQ_EX_DATA, "more than %zu interactions", SQ_MAX_ROWS);
        size_t c = t->cap ? t->cap * 2 : (size_t)1 << 16;
        uint32_t *u = realloc(t->user, c * sizeof *u);
        if (u)
            t->user = u;
        uint32_t *it = realloc(t->item, c * sizeof *it);
        if (it)
            t->item = it;
        if (!u || !it)
            return oom(e, "interactions");
        if (t->has_ts == 1) {
            int64_t *s = realloc(t->ts, c * sizeof *s);
            if (!s)
                return oom(e, "timestamps");
            t->ts = s;
        }
        t->cap = c;
    }
    t->user[t->n] = user;
    t->item[t->n] = item;
    if (t->has_ts == 1)
        t->ts[t->n] = ts;
    t->n++;
    t->sorted = 0;
    return 0;
}

int sq_inter_add_str(sq_inter *t, const char *user, size_t ulen,
                     const char *item, size_t ilen, int64_t ts, sq_err *e)
{
    uint32_t u, i;
    if (sq_ids_intern(&t->users, user, ulen, &u, e) || sq_ids_intern(&t->items, item, ilen, &i, e))
        return e->code;
    return sq_inter_add(t, u, i, ts, e);
}

/* ---- sorting ---- */

typedef struct {
    uint64_t key;
    uint32_t row;
} sq_keyrow;

/* Stable LSD radix sort of the rows by timestamp, 11 bits a pass over only
 * the bits that the range of timestamps needs. Fills order[0,n). */
static int order_by_ts(const sq_inter *t, uint32_t *order, sq_err *e)
{
    enum { BITS = 11, BUCKETS = 1 << BITS };
    size_t n = t->n;
    uint64_t lo = UINT64_MAX, hi = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t k = (uint64_t)t->ts[i] ^ ((uint64_t)1 << 63); /* signed -> unsigned order */
        if (k < lo)
            lo = k;
        if (k > hi)
            hi = k;
    }
    int bits = 0;
    for (uint64_t span = hi - lo; span; span >>= 1)
        bits++;
    if (bits == 0) {
        for (size_t i = 0; i < n; i++)
            order[i] = (uint32_t)i;
        return 0;
    }
    sq_keyrow *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    size_t *count = malloc(BUCKETS * sizeof *count);
    if (!a || !b || !count) {
        free(a);
        free(b);
        free(count);
        return oom(e, "sort");
    }
    for (size_t i = 0; i < n; i++) {
        a[i].key = ((uint64_t)t->ts[i] ^ ((uint64_t)1 << 63)) - lo;
        a[i].row = (uint32_t)i;
    }
    for (int shift = 0; shift < bits; shift += BITS) {
        memset(count, 0, BUCKETS * sizeof *count);
        for (size_t i = 0; i < n; i++)
            count[(a[i].key >> shift) & (BUCKETS - 1)]++;
        size_t sum = 0;
        for (size_t k = 0; k < BUCKETS; k++) {
            size_t c = count[k];
            count[k] = sum;
            sum += c;
        }
        for (size_t i = 0; i < n; i++)
            b[count[(a[i].key >> shift) & (BUCKETS - 1)]++] = a[i];
        sq_keyrow *tmp = a;
        a = b;
        b = tmp;
    }
    for (size_t i = 0; i < n; i++)
        order[i] = a[i].row;
    free(a);
    free(b);
    free(count);
    return 0;
}

/* Reorders every column so that row j becomes old row order[j]. */
static int permute(sq_inter *t, const uint32_t *order, sq_err *e)
{
    size_t n = t->n;
    uint32_t *u = malloc((n ? n : 1) * sizeof *u);
    uint32_t *it = malloc((n ? n : 1) * sizeof *it);
    int64_t *ts = t->has_ts == 1 ? malloc((n ? n : 1) * sizeof *ts) : NULL;
    if (!u || !it || (t->has_ts == 1 && !ts)) {
        free(u);
        free(it);
        free(ts);
        return oom(e, "sort");
    }
    for (size_t j = 0; j < n; j++) {
        u[j] = t->user[order[j]];
        it[j] = t->item[order[j]];
        if (ts)
            ts[j] = t->ts[order[j]];
    }
    free(t->user);
    free(t->item);
    free(t->ts);
    t->user = u;
    t->item = it;
    t->ts = ts;
    t->cap = n ? n : 1;
    return 0;
}

int sq_inter_sort(sq_inter *t, sq_err *e)
{
    size_t n = t->n, nu = t->users.n;
    uint32_t *by_ts = malloc((n ? n : 1) * sizeof *by_ts);
    uint32_t *order = malloc((n ? n : 1) * sizeof *order);
    size_t *start = calloc(nu + 1, sizeof *start);
    if (!by_ts || !order || !start) {
        free(by_ts);
        free(order);
        free(start);
        return oom(e, "sort");
    }
    int rc = 0;
    if (t->has_ts == 1) {
        rc = order_by_ts(t, by_ts, e);
    } else {
        for (size_t i = 0; i < n; i++)
            by_ts[i] = (uint32_t)i;
    }
    if (rc == 0) {
        /* stable counting sort by user over the chronological order */
        for (size_t i = 0; i < n; i++)
            start[t->user[i] + 1]++;
        for (size_t u = 0; u < nu; u++)
            start[u + 1] += start[u];
        for (size_t i = 0; i < n; i++) {
            uint32_t row = by_ts[i];
            order[start[t->user[row]]++] = row;
        }
        rc = permute(t, order, e);
    }
    free(by_ts);
    free(order);
    free(start);
    if (rc == 0)
        t->sorted = 1;
    return rc;
}

/* ---- filters ---- */

/* Keeps the rows with keep[i] != 0, in order. */
static void compact(sq_inter *t, const uint8_t *keep)
{
    size_t j = 0;
    for (size_t i = 0; i < t->n; i++) {
        if (!keep[i])
            continue;
        t->user[j] = t->user[i];
        t->item[j] = t->item[i];
        if (t->has_ts == 1)
            t->ts[j] = t->ts[i];
        j++;
    }
    t->n = j;
}

int sq_inter_dedup(sq_inter *t, int mode, sq_err *e)
{
    if (mode == SQ_DEDUP_KEEP || t->n == 0)
        return 0;
    if (!t->sorted)
        return sq_fail(e, SQ_EX_SOFTWARE, "dedup needs a sorted table");
    /* seen[item] == g + 1 when user group g already has the item */
    uint32_t *seen = calloc(t->items.n ? t->items.n : 1, sizeof *seen);
    uint8_t *keep = malloc(t->n);
    if (!seen || !keep) {
        free(seen);
        free(keep);
        return oom(e, "dedup");
    }
    uint32_t g = 0;
    for (size_t s = 0; s < t->n; g++) {
        size_t end = s + 1;
        while (end < t->n && t->user[end] == t->user[s])
            end++;
        for (size_t k = 0; k < end - s; k++) {
            size_t i = mode == SQ_DEDUP_FIRST ? s + k : end - 1 - k;
            keep[i] = seen[t->item[i]] != g + 1;
            seen[t->item[i]] = g + 1;
        }
        s = end;
    }
    compact(t, keep);
    free(seen);
    free(keep);
    return 0;
}

int sq_inter_kcore(sq_inter *t, uint32_t ucore, uint32_t icore, int *passes, sq_err *e)
{
    if (passes)
        *passes = 0;
    if (ucore <= 1 && icore <= 1)
        return 0; /* every present user and item has at least one row */
    uint32_t *uc = malloc((t->users.n ? t->users.n : 1) * sizeof *uc);
    uint32_t *ic = malloc((t->items.n ? t->items.n : 1) * sizeof *ic);
    if (!uc || !ic) {
        free(uc);
        free(ic);
        return oom(e, "k-core");
    }
    /* Removing rows lowers other counts, so repeat until a pass removes
     * nothing: the result is the largest subset where every count is met. */
    for (;;) {
        memset(uc, 0, t->users.n * sizeof *uc);
        memset(ic, 0, t->items.n * sizeof *ic);
        for (size_t i = 0; i < t->n; i++) {
            uc[t->user[i]]++;
            ic[t->item[i]]++;
        }
        if (passes)
            (*passes)++;
        size_t j = 0;
        for (size_t i = 0; i < t->n; i++) {
            if (uc[t->user[i]] < ucore || ic[t->item[i]] < icore)
                continue;
            t->user[j] = t->user[i];
            t->item[j] = t->item[i];
            if (t->has_ts == 1)
                t->ts[j] = t->ts[i];
            j++;
        }
        if (j == t->n)
            break;
        t->n = j;
    }
    free(uc);
    free(ic);
    return 0;
}

/* ---- remapping ---- */

typedef struct {
    const char *s;
    uint32_t len;
    uint32_t raw;
} sq_idkey;

static int all_digits(const char *s, uint32_t n)
{
    if (n == 0)
        return 0;
    for (uint32_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return 0;
    return 1;
}

/* Numeric order of decimal strings of any length: compare without leading
 * zeros by length, then digits; "7" before "07"; then the raw id. */
static int cmp_numeric(const void *pa, const void *pb)
{
    const sq_idkey *a = pa, *b = pb;
    uint32_t za = 0, zb = 0;
    while (za + 1 < a->len && a->s[za] == '0')
        za++;
    while (zb + 1 < b->len && b->s[zb] == '0')
        zb++;
    uint32_t la = a->len - za, lb = b->len - zb;
    if (la != lb)
        return la < lb ? -1 : 1;
    int c = memcmp(a->s + za, b->s + zb, la);
    if (c)
        return c < 0 ? -1 : 1;
    if (a->len != b->len)
        return a->len < b->len ? -1 : 1;
    return a->raw < b->raw ? -1 : a->raw > b->raw;
}

/* Fills dense[1..*n_out]: first the raw ids below `first` (a map's, in
 * their order, present or not), then the others whose count is non-zero,
 * in numeric order when all of those are numbers, else in raw (appearance)
 * order. */
static int order_ids(const sq_ids *d, uint32_t first, const uint32_t *count, uint32_t *dense,
                     uint32_t *n_out, int *numeric, sq_err *e)
{
    uint32_t n = 0;
    int num = 1;
    for (uint32_t r = 0; r < first && r < d->n; r++)
        dense[++n] = r;
    for (uint32_t r = first; r < d->n; r++) {
        if (!count[r])
            continue;
        dense[++n] = r;
        if (num && !all_digits(sq_ids_str(d, r), d->len[r]))
            num = 0;
    }
    *n_out = n;
    *numeric = num;
    uint32_t fixed = first < n ? first : n, m = n - fixed; /* the ids to order */
    if (!num || m < 2)
        return 0;
    sq_idkey *k = malloc(m * sizeof *k);
    if (!k)
        return oom(e, "remap");
    for (uint32_t i = 0; i < m; i++) {
        uint32_t r = dense[fixed + i + 1];
        k[i].s = sq_ids_str(d, r);
        k[i].len = d->len[r];
        k[i].raw = r;
    }
    qsort(k, m, sizeof *k, cmp_numeric);
    for (uint32_t i = 0; i < m; i++)
        dense[fixed + i + 1] = k[i].raw;
    free(k);
    return 0;
}

/* How many of the n counts are non-zero. */
static uint32_t n_present(const uint32_t *count, size_t n)
{
    uint32_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += count[i] != 0;
    return k;
}

int sq_inter_remap(sq_inter *t, sq_err *e)
{
    if (!t->sorted)
        return sq_fail(e, SQ_EX_SOFTWARE, "remap needs a sorted table");
    free_remap(t);
    size_t nu = t->users.n, ni = t->items.n;
    uint32_t *uc = calloc(nu + 1, sizeof *uc);
    uint32_t *ic = calloc(ni + 1, sizeof *ic);
    t->user_raw = malloc((nu + 1) * sizeof *t->user_raw);
    t->item_raw = malloc((ni + 1) * sizeof *t->item_raw);
    t->item_dense = calloc(ni + 1, sizeof *t->item_dense);
    t->user_start = malloc((nu + 1) * sizeof *t->user_start);
    int rc = 0;
    if (!uc || !ic || !t->user_raw || !t->item_raw || !t->item_dense || !t->user_start) {
        rc = oom(e, "remap");
        goto done;
    }
    for (size_t i = 0; i < t->n; i++) {
        uc[t->user[i]]++;
        ic[t->item[i]]++;
    }
    /* rows are grouped by raw user in ascending order: starts are prefix sums */
    size_t sum = 0;
    for (size_t u = 0; u < nu; u++) {
        t->user_start[u] = sum;
        sum += uc[u];
    }
    t->user_start[nu] = sum;
    t->users_present = n_present(uc, nu);
    t->items_present = n_present(ic, ni);
    rc = order_ids(&t->users, t->map_users, uc, t->user_raw, &t->n_users, &t->users_numeric, e);
    if (rc == 0)
        rc = order_ids(&t->items, t->map_items, ic, t->item_raw, &t->n_items, &t->items_numeric,
                       e);
    if (rc == 0)
        for (uint32_t d = 1; d <= t->n_items; d++)
            t->item_dense[t->item_raw[d]] = d;
done:
    free(uc);
    free(ic);
    if (rc)
        free_remap(t);
    return rc;
}

void sq_inter_get_stats(const sq_inter *t, sq_inter_stats *s)
{
    memset(s, 0, sizeof *s);
    s->users = t->users_present;
    s->items = t->items_present;
    s->interactions = t->n;
    int first = 1;
    for (uint32_t d = 1; d <= t->n_users; d++) {
        uint32_t r = t->user_raw[d];
        uint32_t len = (uint32_t)(t->user_start[r + 1] - t->user_start[r]);
        if (len == 0)
            continue; /* a map's user without rows */
        if (first || len < s->min_len)
            s->min_len = len;
        if (len > s->max_len)
            s->max_len = len;
        first = 0;
    }
    if (s->users)
        s->avg_len = (double)s->interactions / s->users;
    if (s->users && s->items)
        s->sparsity = 1.0 - (double)s->interactions / ((double)s->users * s->items);
}

int sq_inter_write(const sq_inter *t, sq_writer *w, sq_err *e)
{
    uint32_t max = 0;
    for (uint32_t d = 1; d <= t->n_users; d++) {
        uint32_t r = t->user_raw[d];
        size_t len = t->user_start[r + 1] - t->user_start[r];
        if (len > SQ_MAX_RECORD_ITEMS)
            return sq_fail(e, SQ_EX_DATA, "user %s has %zu interactions (at most %u fit a record)",
                           sq_ids_str(&t->users, r), len, (unsigned)SQ_MAX_RECORD_ITEMS);
        if (len > max)
            max = (uint32_t)len;
    }
    uint32_t *items = malloc((max ? max : 1) * sizeof *items);
    int64_t *ts = malloc((max ? max : 1) * sizeof *ts);
    if (!items || !ts) {
        free(items);
        free(ts);
        return oom(e, "write");
    }
    int rc = 0;
    for (uint32_t d = 1; d <= t->n_users && rc == 0; d++) {
        size_t s = t->user_start[t->user_raw[d]];
        uint32_t len = (uint32_t)(t->user_start[t->user_raw[d] + 1] - s);
        if (len == 0)
            continue; /* a map's user without rows */
        for (uint32_t k = 0; k < len; k++)
            items[k] = t->item_dense[t->item[s + k]];
        if (t->has_ts == 1)
            memcpy(ts, t->ts + s, len * sizeof *ts);
        sq_record rec;
        memset(&rec, 0, sizeof rec);
        rec.user = d;
        rec.len = len;
        rec.items = items;
        rec.ts = t->has_ts == 1 ? ts : NULL;
        rc = sq_write(w, &rec, e);
    }
    free(items);
    free(ts);
    return rc;
}

int sq_inter_write_map(const sq_inter *t, FILE *f, const char *name, sq_err *e)
{
    for (uint32_t d = 1; d <= t->n_users; d++)
        if (fprintf(f, "user\t%u\t%s\n", d, sq_ids_str(&t->users, t->user_raw[d])) < 0)
            goto fail;
    for (uint32_t d = 1; d <= t->n_items; d++)
        if (fprintf(f, "item\t%u\t%s\n", d, sq_ids_str(&t->items, t->item_raw[d])) < 0)
            goto fail;
    if (fflush(f) == 0 && !ferror(f))
        return 0;
fail:
    return sq_fail(e, SQ_EX_IO, "%s: write failed: %s", name, strerror(errno));
}

/* ---- reading a map (--map-in) ---- */

/* One line of a map file (sq_idmap_line parses it): the next dense id of
 * its kind, for an original id not seen before. */
static int map_line(sq_inter *t, const char *s, size_t n, const char *path,
                    unsigned long long line, sq_err *e)
{
    int k;
    uint32_t dense;
    const char *orig;
    size_t ol;
    int rc = sq_idmap_line(s, n, path, line, &k, &dense, &orig, &ol, e);
    if (rc)
        return rc == 1 ? 0 : rc; /* blank lines are skipped */
    sq_ids *d = k ? &t->items : &t->users;
    const char *kind = k ? "item" : "user";
    uint32_t want = d->n + 1;
    if (dense != want)
        return sq_fail(e, SQ_EX_DATA, "%s: line %llu: %s dense id %u, expected %u (each "
                       "kind's ids are 1, 2, ... in order)", path, line, kind,
                       (unsigned)dense, (unsigned)want);
    uint32_t id;
    if (sq_ids_intern(d, orig, ol, &id, e))
        return e->code;
    if (id + 1 != want)
        return sq_fail(e, SQ_EX_DATA, "%s: line %llu: %s '%.*s' already has dense id %u",
                       path, line, kind, (int)(ol > 40 ? 40 : ol), orig, (unsigned)id + 1);
    return 0;
}

/* After the lines of a map: it must have both kinds. */
static int map_end(sq_inter *t, const char *name, unsigned long long lines, sq_err *e)
{
    if (t->users.n == 0 || t->items.n == 0)
        return sq_fail(e, SQ_EX_DATA, "%s: not an id map: no %s lines (%llu lines read)", name,
                       t->users.n == 0 ? "user" : "item", lines);
    t->map_users = t->users.n;
    t->map_items = t->items.n;
    return 0;
}

int sq_inter_read_map(sq_inter *t, const char *path, sq_err *e)
{
    if (t->n || t->users.n || t->items.n)
        return sq_fail(e, SQ_EX_SOFTWARE, "a map is read into an empty table");
    FILE *f = fopen(path, "r");
    if (!f)
        return sq_fail(e, SQ_EX_NOINPUT, "%s: cannot open: %s", path, strerror(errno));
    char *buf = NULL;
    size_t cap = 0;
    ssize_t got;
    unsigned long long line = 0;
    int rc = 0;
    errno = 0;
    while (rc == 0 && (got = getline(&buf, &cap, f)) != -1) {
        line++;
        size_t n = (size_t)got;
        if (n && buf[n - 1] == '\n')
            n--;
        if (memchr(buf, '\0', n))
            rc = sq_fail(e, SQ_EX_DATA, "%s: line %llu: NUL byte", path, line);
        else
            rc = map_line(t, buf, n, path, line, e);
    }
    if (rc == 0 && ferror(f))
        rc = sq_fail(e, errno == EISDIR ? SQ_EX_NOINPUT : SQ_EX_IO, "%s: cannot read: %s",
                     path, strerror(errno ? errno : EIO));
    free(buf);
    fclose(f);
    return rc ? rc : map_end(t, path, line, e);
}

int sq_inter_read_map_text(sq_inter *t, const char *text, size_t len, const char *name,
                           sq_err *e)
{
    if (t->n || t->users.n || t->items.n)
        return sq_fail(e, SQ_EX_SOFTWARE, "a map is read into an empty table");
    unsigned long long line = 0;
    for (size_t at = 0; at < len;) {
        const char *s = text + at, *nl = memchr(s, '\n', len - at);
        size_t n = nl ? (size_t)(nl - s) : len - at;
        line++;
        if (memchr(s, '\0', n))
            return sq_fail(e, SQ_EX_DATA, "%s: line %llu: NUL byte", name, line);
        if (map_line(t, s, n, name, line, e))
            return e->code;
        at += n + (nl ? 1 : 0);
    }
    return map_end(t, name, line, e);
}

/* ---- fingerprints (idmap.h) ---- */

typedef struct {
    const sq_ids *ids;
    const uint32_t *raw; /* dense -> raw id, or NULL: raw = dense - 1 */
    uint32_t n;
} ids_ctx;

static const char *ids_at(const void *p, uint32_t d)
{
    const ids_ctx *c = p;
    if (d < 1 || d > c->n)
        return NULL;
    return sq_ids_str(c->ids, c->raw ? c->raw[d] : d - 1);
}

int sq_inter_mapfp(const sq_inter *t, sq_mapfp *fp, sq_err *e)
{
    ids_ctx u = {&t->users, t->user_raw, t->n_users}, i = {&t->items, t->item_raw, t->n_items};
    uint32_t hole;
    memset(fp, 0, sizeof *fp);
    if (sq_idfp_compute(ids_at, &u, u.n, &fp->user, &hole) ||
        sq_idfp_compute(ids_at, &i, i.n, &fp->item, &hole))
        return oom(e, "the id map's fingerprint");
    fp->preprocessed = 1;
    return 0;
}

int sq_inter_check_map(const sq_inter *t, const char *map_name, const sq_mapfp *base,
                       const char *what, char *warn, size_t warn_n, sq_err *e)
{
    ids_ctx u = {&t->users, NULL, t->map_users}, i = {&t->items, NULL, t->map_items};
    if (sq_idfp_check_extends(ids_at, &u, u.n, map_name, 0, &base->user, "model", what, warn,
                              warn_n, e) ||
        sq_idfp_check_extends(ids_at, &i, i.n, map_name, 1, &base->item, "model", what, NULL,
                              0, e))
        return e->code;
    return 0;
}

int sq_inter_drop_new_items(sq_inter *t, uint64_t *rows, uint32_t *items, sq_err *e)
{
    uint32_t n_new = t->items.n - t->map_items;
    uint8_t *keep = malloc(t->n ? t->n : 1);
    uint8_t *seen = calloc((size_t)n_new + 1, 1);
    if (!keep || !seen) {
        free(keep);
        free(seen);
        return oom(e, "new items");
    }
    uint64_t dropped = 0;
    uint32_t distinct = 0;
    for (size_t i = 0; i < t->n; i++) {
        uint32_t it = t->item[i];
        keep[i] = it < t->map_items;
        if (keep[i])
            continue;
        dropped++;
        if (!seen[it - t->map_items]) {
            seen[it - t->map_items] = 1;
            distinct++;
        }
    }
    compact(t, keep);
    free(keep);
    free(seen);
    if (rows)
        *rows = dropped;
    if (items)
        *items = distinct;
    return 0;
}
