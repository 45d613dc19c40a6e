/* exposure.c - coverage, Gini and popularity bias of recommended lists
 * (definitions in exposure.h and man 1 seqrec-metrics). */
#include "exposure.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "stream.h"

int sq_exposure_set_items(sq_exposure *x, uint32_t n_items, sq_err *e)
{
    if (n_items == 0)
        return sq_fail(e, SQ_EX_DATA, "a catalogue of 0 items");
    uint64_t cells = (uint64_t)x->n_k * ((uint64_t)n_items + 1);
    x->count = calloc(cells, sizeof *x->count);
    if (!x->count)
        return sq_fail(e, SQ_EX_OSERR, "out of memory for the exposure of %u items", n_items);
    x->n_items = n_items;
    return SQ_OK;
}

int sq_exposure_init(sq_exposure *x, const uint32_t *k, int n_k, uint32_t n_items,
                     const double *pct, sq_err *e)
{
    memset(x, 0, sizeof *x);
    if (n_k < 1 || n_k > SQ_METRICS_MAX_K)
        return sq_fail(e, SQ_EX_USAGE, "between 1 and %d cutoffs are needed", SQ_METRICS_MAX_K);
    x->n_k = n_k;
    memcpy(x->k, k, (size_t)n_k * sizeof *k);
    x->pct = pct;
    return n_items ? sq_exposure_set_items(x, n_items, e) : SQ_OK;
}

void sq_exposure_free(sq_exposure *x)
{
    free(x->count);
    free(x->user);
    free(x->pop);
    memset(x, 0, sizeof *x);
}

int sq_exposure_add(sq_exposure *x, uint32_t user, const uint32_t *items, uint32_t len,
                    uint32_t pos0, sq_err *e)
{
    if (!x->count)
        return sq_fail(e, SQ_EX_USAGE, "the catalogue's size is unknown");
    for (uint32_t i = 0; i < len; i++)
        if (items[i] < 1 || items[i] > x->n_items)
            return sq_fail(e, SQ_EX_DATA, "item %u outside 1..%u", items[i], x->n_items);
    if (x->n_lists == x->cap) {
        uint64_t cap = x->cap ? 2 * x->cap : 1024;
        uint32_t *u = realloc(x->user, cap * sizeof *u);
        if (u)
            x->user = u;
        double *p = u ? realloc(x->pop, cap * (uint64_t)x->n_k * sizeof *p) : NULL;
        if (!p)
            return sq_fail(e, SQ_EX_OSERR, "out of memory for %llu lists",
                           (unsigned long long)cap);
        x->pop = p;
        x->cap = cap;
    }
    double *pop = x->pop + x->n_lists * (uint64_t)x->n_k;
    for (int j = 0; j < x->n_k; j++) {
        uint64_t *c = x->count + (uint64_t)j * (x->n_items + 1ull);
        double s = 0.0;
        uint32_t n = 0;
        for (uint32_t i = 0; i < len && (uint64_t)pos0 + i <= x->k[j]; i++, n++) {
            c[items[i]]++;
            if (x->pct)
                s += x->pct[items[i]];
        }
        pop[j] = n ? s / n : NAN;
    }
    x->user[x->n_lists++] = user;
    return SQ_OK;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Gini of c[1..n] (sorted in a copy, tmp[n]). */
static double gini(const uint64_t *c, uint32_t n, uint64_t *tmp)
{
    memcpy(tmp, c + 1, (size_t)n * sizeof *tmp);
    qsort(tmp, n, sizeof *tmp, cmp_u64);
    double num = 0.0, sum = 0.0;
    for (uint32_t j = 0; j < n; j++) {
        num += (2.0 * (j + 1) - n - 1.0) * (double)tmp[j];
        sum += (double)tmp[j];
    }
    return sum > 0 ? num / ((double)n * sum) : 0.0;
}

typedef struct {
    uint32_t user;
    uint64_t idx;
} list_ref;

static int cmp_list(const void *a, const void *b)
{
    const list_ref *x = a, *y = b;
    if (x->user != y->user)
        return x->user < y->user ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* PopBias at cutoff j: the mean over lists, or over users of their lists'
 * mean (ord: the lists by user). */
static double popbias(const sq_exposure *x, int j, const list_ref *ord)
{
    double s = 0.0;
    uint64_t units = 0;
    for (uint64_t i = 0; i < x->n_lists;) {
        uint64_t e = i + 1;
        if (ord)
            while (e < x->n_lists && ord[e].user == ord[i].user)
                e++;
        double us = 0.0;
        uint64_t un = 0;
        for (uint64_t t = i; t < e; t++) {
            double p = x->pop[(ord ? ord[t].idx : t) * (uint64_t)x->n_k + (uint64_t)j];
            if (!isnan(p)) {
                us += p;
                un++;
            }
        }
        if (un) {
            s += us / (double)un;
            units++;
        }
        i = e;
    }
    return units ? s / (double)units : 0.0;
}

int sq_exposure_report(const sq_exposure *x, int per_user, sq_metrics_report *r, sq_err *e)
{
    if (!x->count)
        return sq_fail(e, SQ_EX_USAGE, "the catalogue's size is unknown");
    uint64_t *tmp = malloc(((uint64_t)x->n_items + 1) * sizeof *tmp);
    list_ref *ord = per_user && x->pct ? malloc((x->n_lists + 1) * sizeof *ord) : NULL;
    if (!tmp || (per_user && x->pct && !ord)) {
        free(tmp);
        free(ord);
        return sq_fail(e, SQ_EX_OSERR, "out of memory for %u items", x->n_items);
    }
    if (ord) {
        for (uint64_t i = 0; i < x->n_lists; i++)
            ord[i] = (list_ref){x->user[i], i};
        qsort(ord, x->n_lists, sizeof *ord, cmp_list);
    }
    for (int j = 0; j < x->n_k; j++) {
        const uint64_t *c = x->count + (uint64_t)j * (x->n_items + 1ull);
        uint64_t seen = 0;
        for (uint32_t i = 1; i <= x->n_items; i++)
            seen += c[i] > 0;
        r->coverage[j] = (double)seen / x->n_items;
        r->gini[j] = gini(c, x->n_items, tmp);
        if (x->pct)
            r->popbias[j] = popbias(x, j, ord);
    }
    r->have_cov = 1;
    r->lists = x->n_lists;
    r->have_pop = x->pct != NULL;
    free(tmp);
    free(ord);
    return SQ_OK;
}

int sq_popularity_pct(const uint64_t *c, uint32_t n, double *pct, sq_err *e)
{
    uint64_t *s = malloc(((uint64_t)n + 1) * sizeof *s);
    if (!s)
        return sq_fail(e, SQ_EX_OSERR, "out of memory for %u items", n);
    memcpy(s, c + 1, (size_t)n * sizeof *s);
    qsort(s, n, sizeof *s, cmp_u64);
    pct[0] = 0.0;
    for (uint32_t i = 1; i <= n; i++) {
        /* [lo, hi): the sorted counts equal to c[i] */
        uint32_t lo = 0, hi = n;
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (s[mid] < c[i]) lo = mid + 1; else hi = mid;
        }
        uint32_t less = lo;
        hi = n;
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (s[mid] <= c[i]) lo = mid + 1; else hi = mid;
        }
        pct[i] = 100.0 * ((double)less + 0.5 * (double)(lo - less)) / n;
    }
    free(s);
    return SQ_OK;
}

/* ---- top-K input ---- */

/* One tsv line "user<TAB>item:score,...": the user and the items into
 * *items (grown); -1 with why when malformed, 0 blank or comment, 1. */
static int parse_topk_line(char *line, uint32_t *user, uint32_t **items, uint32_t *cap,
                           uint32_t *len, char *why, size_t why_len)
{
    char *p = line;
    while (*p == ' ' || *p == '\t')
        p++;
    if (!*p || *p == '\n' || *p == '\r' || *p == '#')
        return 0;
    char *end;
    errno = 0;
    unsigned long long u = strtoull(p, &end, 10);
    if (end == p || errno || u > UINT32_MAX || *end != '\t') {
        snprintf(why, why_len, "expected a dense user id and a tab (the tsv form of "
                 "seqrec-score --topk without --map)");
        return -1;
    }
    *user = (uint32_t)u;
    *len = 0;
    p = end + 1;
    while (*p && *p != '\n' && *p != '\r') {
        errno = 0;
        unsigned long long it = strtoull(p, &end, 10);
        if (end == p || errno || it > UINT32_MAX || *end != ':') {
            snprintf(why, why_len, "expected item:score, got '%.20s'", p);
            return -1;
        }
        strtod(end + 1, &p);
        if (p == end + 1 || (*p && *p != ',' && *p != '\n' && *p != '\r')) {
            snprintf(why, why_len, "item %llu: a malformed score", it);
            return -1;
        }
        if (*len == *cap) {
            uint32_t nc = *cap ? 2 * *cap : 64;
            uint32_t *t = realloc(*items, (size_t)nc * sizeof *t);
            if (!t) {
                snprintf(why, why_len, "out of memory");
                return -1;
            }
            *items = t;
            *cap = nc;
        }
        (*items)[(*len)++] = (uint32_t)it;
        if (*p == ',')
            p++;
    }
    return 1;
}

static int read_topk_text(sq_exposure *x, FILE *f, const char *name, sq_err *e)
{
    char *line = NULL;
    size_t cap = 0;
    uint32_t *items = NULL, icap = 0, len, user;
    uint64_t lineno = 0;
    int rc = SQ_OK;
    if (!x->count)
        rc = sq_fail(e, SQ_EX_USAGE, "%s: a text top-K file does not say how many items the "
                     "catalogue has: give --items N or --popularity FILE", name);
    while (rc == SQ_OK && getline(&line, &cap, f) >= 0) {
        char why[128];
        lineno++;
        int got = parse_topk_line(line, &user, &items, &icap, &len, why, sizeof why);
        sq_err tmp = {0};
        if (got < 0)
            rc = sq_fail(e, SQ_EX_DATA, "%s: line %llu: %s", name, (unsigned long long)lineno,
                         why);
        else if (got > 0 && sq_exposure_add(x, user, items, len, 1, &tmp))
            rc = sq_fail(e, tmp.code, "%s: line %llu: %s", name, (unsigned long long)lineno,
                         tmp.msg);
    }
    if (rc == SQ_OK && ferror(f))
        rc = sq_fail(e, SQ_EX_IO, "%s: read failed: %s", name, strerror(errno));
    free(line);
    free(items);
    return rc;
}

/* One record of a top-K stream: its list */
static int add_list(void *ctx, const sq_record *rec, sq_err *e)
{
    return sq_exposure_add(ctx, rec->user, rec->items, rec->len, 1, e);
}

static int read_topk_stream(sq_exposure *x, FILE *f, const char *name, sq_err *e)
{
    sq_reader r;
    memset(&r, 0, sizeof r);
    int rc = sq_reader_open(&r, f, name, e);
    if (rc == SQ_OK)
        rc = sq_expect_kind(&r.hdr, name, SQ_KIND_BIT(SQ_TOPK), "the top-K lists of "
                            "seqrec-score --topk --format stream", e);
    if (rc == SQ_OK && !x->count)
        rc = sq_exposure_set_items(x, r.hdr.n_items, e);
    if (rc == SQ_OK)
        rc = sq_reader_each(&r, name, add_list, x, e);
    sq_reader_free(&r);
    return rc;
}

int sq_exposure_read_topk(sq_exposure *x, FILE *f, const char *name, sq_err *e)
{
    int s = sq_stream_peek(f, name, e);
    if (s < 0)
        return e->code;
    int rc = s ? read_topk_stream(x, f, name, e) : read_topk_text(x, f, name, e);
    if (rc == SQ_OK && x->n_lists == 0)
        rc = sq_fail(e, SQ_EX_DATA, "%s: no top-K lists", name);
    return rc;
}
