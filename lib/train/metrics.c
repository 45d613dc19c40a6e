/* metrics.c - HR, Recall, NDCG, MRR, MAP and Precision at K from rank
 * records, per record or per user, plain or corrected for sampled
 * candidates (definitions in metrics.h and man 1 seqrec-metrics). */
#include "metrics.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sampled.h"

int sq_metrics_parse_k(const char *s, uint32_t *k, int *n_k, sq_err *e)
{
    *n_k = 0;
    const char *p = s;
    for (;;) {
        if (*p < '0' || *p > '9')
            return sq_fail(e, SQ_EX_USAGE, "-k: expected a list of positive integers like 10,20, got '%s'", s);
        char *end;
        errno = 0;
        unsigned long long v = strtoull(p, &end, 10);
        if (errno || v < 1 || v > UINT32_MAX || (*end != ',' && *end != '\0'))
            return sq_fail(e, SQ_EX_USAGE, "-k: expected a list of positive integers like 10,20, got '%s'", s);
        if (*n_k == SQ_METRICS_MAX_K)
            return sq_fail(e, SQ_EX_USAGE, "-k: at most %d cutoffs", SQ_METRICS_MAX_K);
        for (int j = 0; j < *n_k; j++)
            if (k[j] == v)
                return sq_fail(e, SQ_EX_USAGE, "-k: cutoff %llu given twice", v);
        k[(*n_k)++] = (uint32_t)v;
        if (*end == '\0')
            return SQ_OK;
        p = end + 1;
    }
}

int sq_metrics_init(sq_metrics *m, const uint32_t *k, int n_k, sq_err *e)
{
    memset(m, 0, sizeof *m);
    if (n_k < 1 || n_k > SQ_METRICS_MAX_K)
        return sq_fail(e, SQ_EX_USAGE, "between 1 and %d cutoffs are needed", SQ_METRICS_MAX_K);
    m->n_k = n_k;
    for (int j = 0; j < n_k; j++) {
        if (k[j] < 1)
            return sq_fail(e, SQ_EX_USAGE, "cutoffs must be positive");
        m->k[j] = k[j];
    }
    return SQ_OK;
}

void sq_metrics_free(sq_metrics *m)
{
    free(m->users);
    free(m->rec);
    m->users = NULL;
    m->rec = NULL;
    m->users_cap = m->n_users = m->rec_cap = 0;
}

static uint64_t slot_of(uint64_t key, uint64_t cap)
{
    return (key * 0x9e3779b97f4a7c15ull) >> 32 & (cap - 1);
}

/* Inserts user into the distinct-user set (grown at half load). */
static int add_user(sq_metrics *m, uint32_t user, sq_err *e)
{
    if (2 * (m->n_users + 1) > m->users_cap) {
        uint64_t cap = m->users_cap ? 2 * m->users_cap : 1024;
        uint64_t *t = calloc(cap, sizeof *t);
        if (!t)
            return sq_fail(e, SQ_EX_OSERR, "out of memory for %llu users",
                           (unsigned long long)m->n_users);
        for (uint64_t i = 0; i < m->users_cap; i++) {
            if (!m->users[i])
                continue;
            uint64_t h = slot_of(m->users[i], cap);
            while (t[h])
                h = (h + 1) & (cap - 1);
            t[h] = m->users[i];
        }
        free(m->users);
        m->users = t;
        m->users_cap = cap;
    }
    uint64_t key = (uint64_t)user + 1;
    uint64_t h = slot_of(key, m->users_cap);
    while (m->users[h]) {
        if (m->users[h] == key)
            return SQ_OK;
        h = (h + 1) & (m->users_cap - 1);
    }
    m->users[h] = key;
    m->n_users++;
    return SQ_OK;
}

int sq_metrics_add(sq_metrics *m, uint32_t user, uint32_t rank, uint32_t n_cand, sq_err *e)
{
    return sq_metrics_add_item(m, user, rank, n_cand, 0, e);
}

int sq_metrics_add_item(sq_metrics *m, uint32_t user, uint32_t rank, uint32_t n_cand,
                        uint32_t item, sq_err *e)
{
    if (rank < 1 || rank > n_cand)
        return sq_fail(e, SQ_EX_DATA, "rank %u outside 1..n_cand (%u)", rank, n_cand);
    if (add_user(m, user, e))
        return e->code;
    if (m->records == m->rec_cap) {
        uint64_t cap = m->rec_cap ? 2 * m->rec_cap : 1024;
        sq_rank_rec *t = cap > SIZE_MAX / sizeof *t ? NULL : realloc(m->rec, cap * sizeof *t);
        if (!t)
            return sq_fail(e, SQ_EX_OSERR, "out of memory for %llu rank records",
                           (unsigned long long)cap);
        m->rec = t;
        m->rec_cap = cap;
    }
    m->rec[m->records] = (sq_rank_rec){user, rank, n_cand, item};
    double r = rank;
    for (int j = 0; j < m->n_k; j++) {
        if (rank > m->k[j])
            continue;
        m->hit[j] += 1.0;
        m->ndcg[j] += 1.0 / log2(r + 1.0);
        m->mrr_at[j] += 1.0 / r;
    }
    m->mrr += 1.0 / r;
    m->records++;
    return SQ_OK;
}

sq_metrics_at sq_metrics_get(const sq_metrics *m, int j)
{
    sq_metrics_at a = {m->k[j], 0, 0, 0, 0, 0};
    if (m->records == 0)
        return a;
    double n = (double)m->records;
    a.hr = a.recall = m->hit[j] / n;
    a.ndcg = m->ndcg[j] / n;
    a.mrr = m->mrr_at[j] / n;
    a.precision = a.hr / m->k[j];
    return a;
}

double sq_metrics_mrr(const sq_metrics *m)
{
    return m->records ? m->mrr / (double)m->records : 0.0;
}

/* ---- per-record values and units ---- */

int sq_metrics_parse_corrected(const char *s, sq_metrics_opts *o, sq_err *e)
{
    if (!strcmp(s, "rank")) {
        o->corrected = SQ_CORR_RANK;
        return SQ_OK;
    }
    if (!strncmp(s, "bv", 2) && (s[2] == '\0' || s[2] == ':')) {
        double g = 0.1;
        char *end = NULL;
        if (s[2] == ':') {
            errno = 0;
            g = strtod(s + 3, &end);
        }
        if ((s[2] == ':' && (errno || end == s + 3 || *end)) || !(g > 0.0 && g <= 1.0))
            return sq_fail(e, SQ_EX_USAGE, "--corrected: bv:GAMMA needs 0 < GAMMA <= 1, got "
                           "'%s'", s);
        o->corrected = SQ_CORR_BV;
        o->gamma = g;
        return SQ_OK;
    }
    return sq_fail(e, SQ_EX_USAGE, "--corrected: expected rank, bv or bv:GAMMA, got '%s'", s);
}

/* The BV weights of each sample size the records have (sampled.h). */
typedef struct {
    uint32_t *m;   /* [n] negatives */
    double **x;    /* [n][(m + 1) * nv] */
    size_t n;
} bv_table;

static void bv_free(bv_table *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->x[i]);
    free(t->m);
    free(t->x);
    memset(t, 0, sizeof *t);
}

static const double *bv_row(const bv_table *t, uint32_t m, uint32_t rank, int nv)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->m[i] == m)
            return t->x[i] + (size_t)(rank - 1) * (size_t)nv;
    return NULL;
}

static int bv_build(const sq_metrics *m, const sq_metrics_opts *o, uint32_t N, bv_table *t,
                    sq_err *e)
{
    memset(t, 0, sizeof *t);
    int nv = sq_metrics_nv(m);
    for (uint64_t i = 0; i < m->records; i++) {
        uint32_t nc = m->rec[i].n_cand;
        if (nc < 2 || nc >= N || bv_row(t, nc - 1, 1, nv))
            continue;
        uint32_t *mm = realloc(t->m, (t->n + 1) * sizeof *mm);
        if (mm)
            t->m = mm;
        double **xx = mm ? realloc(t->x, (t->n + 1) * sizeof *xx) : NULL;
        if (xx)
            t->x = xx;
        double *x = xx ? malloc((size_t)nc * (size_t)nv * sizeof *x) : NULL;
        if (!x) {
            bv_free(t);
            return sq_fail(e, SQ_EX_OSERR, "out of memory for the correction");
        }
        t->m[t->n] = nc - 1;
        t->x[t->n++] = x;
        if (sq_bv_weights(m, N, nc - 1, o->gamma, x, e)) {
            bv_free(t);
            return e->code;
        }
    }
    return SQ_OK;
}

/* A record's values: sq_metrics_values, or under SQ_CORR_BV the weights'
 * row of its sampled rank (t: the table of every sample size). */
static void record_values(const sq_metrics *m, const sq_metrics_opts *o, const bv_table *t,
                          const sq_rank_rec *rec, double *v)
{
    const double *row = o->corrected == SQ_CORR_BV && rec->n_cand >= 2
                            ? bv_row(t, rec->n_cand - 1, rec->rank, sq_metrics_nv(m))
                            : NULL;
    if (row)
        memcpy(v, row, (size_t)sq_metrics_nv(m) * sizeof *v);
    else
        sq_metrics_values(m, o, rec, v);
}

void sq_metrics_values(const sq_metrics *m, const sq_metrics_opts *o, const sq_rank_rec *rec,
                       double *v)
{
    double r = rec->rank;
    uint32_t n = o->n_items ? o->n_items : m->n_items;
    if (o->corrected == SQ_CORR_RANK && rec->n_cand >= 2 && rec->n_cand < n)
        r = 1.0 + (r - 1.0) * ((double)n - 1.0) / ((double)rec->n_cand - 1.0);
    for (int j = 0; j < m->n_k; j++) {
        double *x = v + SQ_MV_N * j;
        int in = r <= (double)m->k[j];
        x[SQ_MV_HR] = in;
        x[SQ_MV_NDCG] = in ? 1.0 / log2(r + 1.0) : 0.0;
        x[SQ_MV_MRR] = x[SQ_MV_MAP] = in ? 1.0 / r : 0.0;
        x[SQ_MV_PREC] = in ? 1.0 / m->k[j] : 0.0;
    }
    v[SQ_MV_N * m->n_k] = 1.0 / r;
}

typedef struct {
    uint32_t user;
    uint64_t idx;
} user_idx;

/* By user, then by position in the input (a total order: qsort is not
 * stable, this key is). */
static int cmp_user_idx(const void *a, const void *b)
{
    const user_idx *x = a, *y = b;
    if (x->user != y->user)
        return x->user < y->user ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Per user: the records ordered by user, each user's values averaged. */
static int units_per_user(const sq_metrics *m, const sq_metrics_opts *o, const bv_table *t,
                          double *vals, uint32_t *keys, uint64_t *n, double *v, sq_err *e)
{
    int nv = sq_metrics_nv(m);
    user_idx *ord = malloc(m->records * sizeof *ord);
    if (!ord)
        return sq_fail(e, SQ_EX_OSERR, "out of memory for %llu records",
                       (unsigned long long)m->records);
    for (uint64_t i = 0; i < m->records; i++)
        ord[i] = (user_idx){m->rec[i].user, i};
    qsort(ord, m->records, sizeof *ord, cmp_user_idx);
    uint64_t u = 0;
    for (uint64_t i = 0; i < m->records;) {
        uint64_t j = i;
        double *x = vals + u * (uint64_t)nv;
        for (int c = 0; c < nv; c++)
            x[c] = 0.0;
        for (; j < m->records && ord[j].user == ord[i].user; j++) {
            record_values(m, o, t, &m->rec[ord[j].idx], v);
            for (int c = 0; c < nv; c++)
                x[c] += v[c];
        }
        for (int c = 0; c < nv; c++)
            x[c] /= (double)(j - i);
        if (keys)
            keys[u] = ord[i].user;
        u++;
        i = j;
    }
    *n = u;
    free(ord);
    return SQ_OK;
}

int sq_metrics_units(const sq_metrics *m, const sq_metrics_opts *o, double **vals,
                     uint32_t **keys, uint64_t *n, sq_err *e)
{
    int nv = sq_metrics_nv(m);
    *vals = NULL;
    if (keys)
        *keys = NULL;
    *n = 0;
    uint64_t cells = m->records * (uint64_t)nv;
    double *v = malloc((size_t)nv * sizeof *v);
    *vals = m->records > SIZE_MAX / sizeof(double) / (uint64_t)nv ? NULL
                                                                  : malloc(cells * sizeof **vals);
    if (keys)
        *keys = malloc((m->records ? m->records : 1) * sizeof **keys);
    int rc = SQ_OK;
    bv_table t = {0};
    uint32_t N = o->n_items ? o->n_items : m->n_items;
    if (!v || !*vals || (keys && !*keys))
        rc = sq_fail(e, SQ_EX_OSERR, "out of memory for %llu records",
                     (unsigned long long)m->records);
    else if (o->corrected == SQ_CORR_BV)
        rc = bv_build(m, o, N, &t, e);
    if (!rc && o->per_user)
        rc = units_per_user(m, o, &t, *vals, keys ? *keys : NULL, n, v, e);
    else if (!rc) {
        for (uint64_t i = 0; i < m->records; i++) {
            record_values(m, o, &t, &m->rec[i], *vals + i * (uint64_t)nv);
            if (keys)
                (*keys)[i] = m->rec[i].user;
        }
        *n = m->records;
    }
    bv_free(&t);
    free(v);
    if (rc) {
        free(*vals);
        *vals = NULL;
        if (keys) {
            free(*keys);
            *keys = NULL;
        }
    }
    return rc;
}

int sq_metrics_report_make(const sq_metrics *m, const sq_metrics_opts *o, sq_metrics_report *r,
                           sq_err *e)
{
    memset(r, 0, sizeof *r);
    r->n_k = m->n_k;
    memcpy(r->k, m->k, sizeof r->k);
    r->records = m->records;
    r->users = m->n_users;
    r->have_ranks = 1;
    r->per_user = o->per_user;
    r->corrected = o->corrected;
    r->gamma = o->gamma;
    double *vals;
    uint64_t n;
    if (sq_metrics_units(m, o, &vals, NULL, &n, e))
        return e->code;
    int nv = sq_metrics_nv(m);
    r->units = n;
    /* sums in unit order: the same bits for the same input */
    for (uint64_t i = 0; i < n; i++)
        for (int c = 0; c < nv; c++)
            r->mean[c] += vals[i * (uint64_t)nv + c];
    for (int c = 0; c < nv && n; c++)
        r->mean[c] /= (double)n;
    free(vals);
    return SQ_OK;
}


/* A decimal u32 field [p, end); 0 on success. */
static int parse_u32(const char *p, const char *end, uint32_t *out)
{
    if (p == end || end - p > 10)
        return -1;
    uint64_t v = 0;
    for (; p < end; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (v > UINT32_MAX)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

int sq_ranks_parse_line(const char *line, sq_record *rec, char *why, size_t why_len)
{
    static const char *names[4] = {"user", "rank", "n_cand", "item"};
    uint32_t v[4] = {0, 0, 0, 0};
    int n = 0;
    const char *p = line;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
            p++;
        if (!*p)
            break;
        if (n == 0 && *p == '#')
            return 0;
        const char *q = p;
        while (*q && *q != ' ' && *q != '\t' && *q != '\r' && *q != '\n')
            q++;
        if (n == 4) {
            snprintf(why, why_len, "expected 3 or 4 fields (user, rank, n_cand, item), got more");
            return -1;
        }
        if (parse_u32(p, q, &v[n])) {
            snprintf(why, why_len, "%s: '%.*s' is not a number in 0..4294967295",
                     names[n], (int)(q - p > 40 ? 40 : q - p), p);
            return -1;
        }
        n++;
        p = q;
    }
    if (n == 0)
        return 0;
    if (n < 3) {
        snprintf(why, why_len, "expected 3 or 4 fields (user, rank, n_cand, item), got %d", n);
        return -1;
    }
    if (n == 4 && v[3] == 0) {
        snprintf(why, why_len, "item 0 is the padding id, items start at 1");
        return -1;
    }
    memset(rec, 0, sizeof *rec);
    rec->user = v[0];
    rec->rank = v[1];
    rec->n_cand = v[2];
    rec->item = v[3];
    rec->len = 1;
    return 1;
}

static int read_text(sq_metrics *m, FILE *f, const char *name, sq_err *e)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    uint64_t lineno = 0;
    int rc = SQ_OK;
    while (rc == SQ_OK && (len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        char why[256];
        sq_record rec;
        int got = -1;
        if (memchr(line, '\0', (size_t)len))
            snprintf(why, sizeof why, "NUL byte in a text line");
        else
            got = sq_ranks_parse_line(line, &rec, why, sizeof why);
        if (got < 0) {
            rc = sq_fail(e, SQ_EX_DATA, "%s: line %llu: %s", name,
                         (unsigned long long)lineno, why);
        } else if (got > 0) {
            sq_err tmp = {0};
            if (sq_metrics_add_item(m, rec.user, rec.rank, rec.n_cand, rec.item, &tmp))
                rc = sq_fail(e, tmp.code, "%s: line %llu: %s", name,
                             (unsigned long long)lineno, tmp.msg);
        }
    }
    if (rc == SQ_OK && ferror(f))
        rc = sq_fail(e, SQ_EX_IO, "%s: read failed: %s", name, strerror(errno));
    free(line);
    return rc;
}

/* One record of a ranks stream, a failure naming its number */
static int add_record(void *ctx, const sq_record *rec, sq_err *e)
{
    sq_metrics *m = ctx;
    sq_err tmp = {0};
    if (sq_metrics_add_item(m, rec->user, rec->rank, rec->n_cand, rec->item, &tmp))
        return sq_fail(e, tmp.code, "record %llu: %s", (unsigned long long)m->records + 1,
                       tmp.msg);
    return 0;
}

static int read_stream(sq_metrics *m, FILE *f, const char *name, sq_err *e)
{
    sq_reader r;
    memset(&r, 0, sizeof r);
    int rc = sq_reader_open(&r, f, name, e);
    if (rc == SQ_OK && r.hdr.kind != SQ_RANKS) {
        const char *kind = sq_kind_name(r.hdr.kind);
        /* The kind is the u16 after the magic and the version. */
        rc = sq_fail(e, SQ_EX_DATA, "%s: byte 6: a %s stream, expected ranks", name,
                     kind ? kind : "unknown");
    }
    if (rc == SQ_OK) {
        m->n_items = r.hdr.n_items; /* the catalogue, for --corrected and --coverage */
        rc = sq_reader_each(&r, name, add_record, m, e);
    }
    sq_reader_free(&r);
    return rc;
}

int sq_metrics_read(sq_metrics *m, FILE *f, const char *name, sq_err *e)
{
    /* no text line can start with 'S' */
    int s = sq_stream_peek(f, name, e);
    if (s < 0)
        return e->code;
    int rc = s ? read_stream(m, f, name, e) : read_text(m, f, name, e);
    if (rc == SQ_OK && m->records == 0)
        rc = sq_fail(e, SQ_EX_DATA, "%s: no rank records", name);
    return rc;
}

/* ---- output ---- */

static int write_check(FILE *out, const char *name, sq_err *e)
{
    if (ferror(out))
        return sq_fail(e, SQ_EX_IO, "%s: write error: %s", name, strerror(errno));
    return SQ_OK;
}

/* The rows of the table: name, JSON key, which value (SQ_MV_* or one of
 * the measures of the lists below). */
enum { ROW_COV = SQ_MV_N, ROW_GINI, ROW_POP };
static const struct {
    const char *name, *key;
    int what;
} rows[] = {
    {"HR", "hr", SQ_MV_HR},          {"Recall", "recall", SQ_MV_HR},
    {"NDCG", "ndcg", SQ_MV_NDCG},    {"MRR", "mrr", SQ_MV_MRR},
    {"MAP", "map", SQ_MV_MAP},       {"Precision", "precision", SQ_MV_PREC},
    {"Coverage", "coverage", ROW_COV}, {"Gini", "gini", ROW_GINI},
    {"PopBias", "popbias", ROW_POP},
};

/* Whether row is printed, and its value at cutoff j. */
static int row_value(const sq_metrics_report *r, int row, int j, double *v)
{
    int w = rows[row].what;
    if (w < SQ_MV_N) {
        *v = r->mean[SQ_MV_N * j + w];
        return 1;
    }
    if (w == ROW_POP) {
        *v = r->popbias[j];
        return r->have_pop;
    }
    *v = w == ROW_COV ? r->coverage[j] : r->gini[j];
    return r->have_cov;
}

int sq_metrics_write_table(const sq_metrics_report *r, FILE *out, const char *name, sq_err *e)
{
    fprintf(out, "%-10s", "metric");
    for (int j = 0; j < r->n_k; j++) {
        char head[16];
        snprintf(head, sizeof head, "@%u", r->k[j]);
        fprintf(out, " %10s", head);
    }
    fputc('\n', out);
    double v;
    for (int row = 0; row < (int)(sizeof rows / sizeof rows[0]); row++) {
        if (!row_value(r, row, 0, &v) || (!r->have_ranks && rows[row].what < SQ_MV_N))
            continue;
        fprintf(out, "%-10s", rows[row].name);
        for (int j = 0; j < r->n_k; j++) {
            row_value(r, row, j, &v);
            fprintf(out, " %10.4f", v);
        }
        fputc('\n', out);
    }
    if (r->have_ranks) {
        fprintf(out, "%-10s %10.4f\n", "MRR (all)", r->mean[SQ_MV_N * r->n_k]);
        fprintf(out, "%-10s %10llu\n", "records", (unsigned long long)r->records);
        fprintf(out, "%-10s %10llu\n", "users", (unsigned long long)r->users);
    }
    if (r->have_cov)
        fprintf(out, "%-10s %10llu\n", "lists", (unsigned long long)r->lists);
    if (r->per_user)
        fprintf(out, "averaged per user\n");
    if (r->corrected == SQ_CORR_RANK)
        fprintf(out, "corrected for sampled candidates (rank estimate)\n");
    else if (r->corrected == SQ_CORR_BV)
        fprintf(out, "corrected for sampled candidates (bias-variance, gamma %g)\n", r->gamma);
    return write_check(out, name, e);
}

int sq_metrics_write_json(const sq_metrics_report *r, FILE *out, const char *name, sq_err *e)
{
    if (r->have_ranks)
        fprintf(out, "{\"records\": %llu, \"users\": %llu, \"mrr\": %.6f",
                (unsigned long long)r->records, (unsigned long long)r->users,
                r->mean[SQ_MV_N * r->n_k]);
    else
        fputs("{\"records\": 0", out);
    if (r->have_cov)
        fprintf(out, ", \"lists\": %llu", (unsigned long long)r->lists);
    if (r->per_user)
        fputs(", \"averaged\": \"user\"", out);
    if (r->corrected == SQ_CORR_RANK)
        fputs(", \"corrected\": \"rank\"", out);
    else if (r->corrected == SQ_CORR_BV)
        fprintf(out, ", \"corrected\": \"bv:%g\"", r->gamma);
    double v;
    for (int j = 0; j < r->n_k; j++)
        for (int row = 0; row < (int)(sizeof rows / sizeof rows[0]); row++)
            if (row_value(r, row, j, &v) && (r->have_ranks || rows[row].what >= SQ_MV_N))
                fprintf(out, ", \"%s@%u\": %.6f", rows[row].key, r->k[j], v);
    fputs("}\n", out);
    return write_check(out, name, e);
}
