/* metrics.c - HR, Recall, NDCG, MRR and Precision at K from rank records
 * (definitions in metrics.h and man 1 seqrec-metrics). */
#include "metrics.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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
    m->users = NULL;
    m->users_cap = m->n_users = 0;
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
    if (rank < 1 || rank > n_cand)
        return sq_fail(e, SQ_EX_DATA, "rank %u outside 1..n_cand (%u)", rank, n_cand);
    if (add_user(m, user, e))
        return e->code;
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

/* ---- input ---- */

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
            if (sq_metrics_add(m, rec.user, rec.rank, rec.n_cand, &tmp))
                rc = sq_fail(e, tmp.code, "%s: line %llu: %s", name,
                             (unsigned long long)lineno, tmp.msg);
        }
    }
    if (rc == SQ_OK && ferror(f))
        rc = sq_fail(e, SQ_EX_IO, "%s: read failed: %s", name, strerror(errno));
    free(line);
    return rc;
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
    while (rc == SQ_OK) {
        uint64_t off = r.buf_off + r.buf_pos; /* where this record starts */
        sq_record rec;
        int got = sq_reader_next(&r, &rec, e);
        if (got < 0)
            rc = e->code;
        if (got <= 0)
            break;
        sq_err tmp = {0};
        if (sq_metrics_add(m, rec.user, rec.rank, rec.n_cand, &tmp))
            rc = sq_fail(e, tmp.code, "%s: byte %llu: record %llu: %s", name,
                         (unsigned long long)off, (unsigned long long)m->records + 1,
                         tmp.msg);
    }
    sq_reader_free(&r);
    return rc;
}

int sq_metrics_read(sq_metrics *m, FILE *f, const char *name, sq_err *e)
{
    /* One byte of look-ahead is all that ungetc promises on a pipe; no text
     * line can start with 'S', and the reader checks the rest of "SQRC". */
    int c = getc(f);
    if (c == EOF && ferror(f))
        return sq_fail(e, SQ_EX_IO, "%s: read failed: %s", name, strerror(errno));
    if (c != EOF && ungetc(c, f) == EOF)
        return sq_fail(e, SQ_EX_IO, "%s: read failed", name);
    int rc = c == SQ_MAGIC[0] ? read_stream(m, f, name, e) : read_text(m, f, name, e);
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

int sq_metrics_write_table(const sq_metrics *m, FILE *out, const char *name, sq_err *e)
{
    static const char *rows[5] = {"HR", "Recall", "NDCG", "MRR", "Precision"};
    fprintf(out, "%-10s", "metric");
    for (int j = 0; j < m->n_k; j++) {
        char head[16];
        snprintf(head, sizeof head, "@%u", m->k[j]);
        fprintf(out, " %10s", head);
    }
    fputc('\n', out);
    for (int row = 0; row < 5; row++) {
        fprintf(out, "%-10s", rows[row]);
        for (int j = 0; j < m->n_k; j++) {
            sq_metrics_at a = sq_metrics_get(m, j);
            double v[5] = {a.hr, a.recall, a.ndcg, a.mrr, a.precision};
            fprintf(out, " %10.4f", v[row]);
        }
        fputc('\n', out);
    }
    fprintf(out, "%-10s %10.4f\n", "MRR (all)", sq_metrics_mrr(m));
    fprintf(out, "%-10s %10llu\n", "records", (unsigned long long)m->records);
    fprintf(out, "%-10s %10llu\n", "users", (unsigned long long)m->n_users);
    return write_check(out, name, e);
}

int sq_metrics_write_json(const sq_metrics *m, FILE *out, const char *name, sq_err *e)
{
    fprintf(out, "{\"records\": %llu, \"users\": %llu, \"mrr\": %.6f",
            (unsigned long long)m->records, (unsigned long long)m->n_users,
            sq_metrics_mrr(m));
    for (int j = 0; j < m->n_k; j++) {
        sq_metrics_at a = sq_metrics_get(m, j);
        fprintf(out, ", \"hr@%u\": %.6f, \"recall@%u\": %.6f, \"ndcg@%u\": %.6f"
                     ", \"mrr@%u\": %.6f, \"precision@%u\": %.6f",
                a.k, a.hr, a.k, a.recall, a.k, a.ndcg, a.k, a.mrr, a.k, a.precision);
    }
    fputs("}\n", out);
    return write_check(out, name, e);
}
