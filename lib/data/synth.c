/* synth.c - the synthetic interaction generator (see synth.h and
 * man 1 seqrec-synth, which lists every random draw in order: keep the
 * two in step, since "same seed, same bytes" is a promise to users). */
#include "synth.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

#define T0_BASE 978307200   /* 2001-01-01T00:00:00Z */
#define T0_SPAN 31536000u   /* first interactions spread over 365 days */
#define GAP_MIN 60          /* gaps between interactions: [60 s, 1 day) */
#define GAP_SPAN 86340u

void sq_synth_defaults(sq_synth_opts *o)
{
    o->users = 2000;
    o->items = 500;
    o->clusters = 20;
    o->user_clusters = 3;
    o->min_len = 5;
    o->mean_len = 20.0;
    o->max_len = 200;
    o->zipf = 1.0;
    o->p_next = 0.5;
    o->p_stay = 0.7;
    o->seed = 42;
}

int sq_synth_check(const sq_synth_opts *o, sq_err *e)
{
    if (o->users < 1)
        return sq_fail(e, SQ_EX_USAGE, "--users must be at least 1");
    /* succ(i) != i needs a second item. */
    if (o->items < 2)
        return sq_fail(e, SQ_EX_USAGE, "--items must be at least 2");
    if (o->clusters < 1 || o->clusters > o->items)
        return sq_fail(e, SQ_EX_USAGE, "--clusters must be in 1..%u (--items)", o->items);
    if (o->user_clusters < 1 || o->user_clusters > o->clusters)
        return sq_fail(e, SQ_EX_USAGE, "--user-clusters must be in 1..%u (--clusters)",
                       o->clusters);
    if (o->min_len < 1)
        return sq_fail(e, SQ_EX_USAGE, "--min-len must be at least 1");
    if (o->max_len < o->min_len || o->max_len > SQ_MAX_RECORD_ITEMS)
        return sq_fail(e, SQ_EX_USAGE, "--max-len must be in %u..%u (--min-len..)",
                       o->min_len, SQ_MAX_RECORD_ITEMS);
    if (!(o->mean_len >= o->min_len && o->mean_len <= o->max_len))
        return sq_fail(e, SQ_EX_USAGE, "--mean-len must be in %u..%u (--min-len..--max-len)",
                       o->min_len, o->max_len);
    if (!(o->zipf >= 0 && o->zipf <= 100))
        return sq_fail(e, SQ_EX_USAGE, "--zipf must be in 0..100");
    if (!(o->p_next >= 0 && o->p_next <= 1))
        return sq_fail(e, SQ_EX_USAGE, "--p-next must be in 0..1");
    if (!(o->p_stay >= 0 && o->p_stay <= 1))
        return sq_fail(e, SQ_EX_USAGE, "--p-stay must be in 0..1");
    return SQ_OK;
}

void sq_synth_free(sq_synth *s)
{
    free(s->cluster_of);
    free(s->successor);
    free(s->members);
    free(s->start);
    free(s->cdf);
    free(s->items);
    free(s->ts);
    free(s->rating);
    free(s->pref);
    free(s->mix_cdf);
    memset(s, 0, sizeof *s);
}

int sq_synth_init(sq_synth *s, const sq_synth_opts *o, sq_err *e)
{
    memset(s, 0, sizeof *s);
    if (sq_synth_check(o, e))
        return e->code;
    s->o = *o;
    uint32_t n = o->items, c = o->clusters, m = o->user_clusters;
    s->cluster_of = malloc(((size_t)n + 1) * sizeof *s->cluster_of);
    s->successor = malloc(((size_t)n + 1) * sizeof *s->successor);
    s->members = malloc((size_t)n * sizeof *s->members);
    s->start = malloc(((size_t)c + 1) * sizeof *s->start);
    s->cdf = malloc((size_t)n * sizeof *s->cdf);
    s->items = malloc((size_t)o->max_len * sizeof *s->items);
    s->ts = malloc((size_t)o->max_len * sizeof *s->ts);
    s->rating = malloc((size_t)o->max_len * sizeof *s->rating);
    s->pref = malloc((size_t)m * sizeof *s->pref);
    s->mix_cdf = malloc((size_t)m * sizeof *s->mix_cdf);
    if (!s->cluster_of || !s->successor || !s->members || !s->start || !s->cdf ||
        !s->items || !s->ts || !s->rating || !s->pref || !s->mix_cdf) {
        sq_synth_free(s);
        return sq_fail(e, SQ_EX_OSERR, "out of memory for %u items", n);
    }

    /* The catalogue has its own stream 0; users have streams 1..users. */
    sq_rng r;
    sq_rng_seed(&r, o->seed, 0);
    /* 1. Fisher-Yates shuffle of 1..n: cluster membership and the Zipf
     *    order inside a cluster must not follow the item ids. */
    for (uint32_t i = 0; i < n; i++)
        s->members[i] = i + 1;
    for (uint32_t i = n - 1; i > 0; i--) {
        uint32_t j = (uint32_t)sq_rng_below(&r, (uint64_t)i + 1);
        uint32_t t = s->members[i];
        s->members[i] = s->members[j];
        s->members[j] = t;
    }
    /* 2. Cluster k holds shuffled positions [floor(k n / C), floor((k+1) n / C)). */
    for (uint32_t k = 0; k <= c; k++)
        s->start[k] = (uint32_t)((uint64_t)k * n / c);
    for (uint32_t k = 0; k < c; k++) {
        uint32_t a = s->start[k], b = s->start[k + 1];
        double total = 0;
        for (uint32_t j = a; j < b; j++) {
            s->cluster_of[s->members[j]] = k;
            total += pow((double)(j - a + 1), -o->zipf);
            s->cdf[j] = total;
        }
        for (uint32_t j = a; j < b; j++)
            s->cdf[j] /= total;
        s->cdf[b - 1] = 1.0; /* no rounding gap at the top */
    }
    s->cluster_of[0] = 0;
    /* 3. succ(i) uniform over the other n - 1 items, i = 1..n in order. */
    s->successor[0] = 0;
    for (uint32_t i = 1; i <= n; i++) {
        uint32_t j = 1 + (uint32_t)sq_rng_below(&r, (uint64_t)n - 1);
        s->successor[i] = j >= i ? j + 1 : j;
    }
    /* A user's k-th preferred cluster has weight 1/(k+1). */
    double h = 0;
    for (uint32_t k = 0; k < m; k++) {
        h += 1.0 / (k + 1);
        s->mix_cdf[k] = h;
    }
    for (uint32_t k = 0; k < m; k++)
        s->mix_cdf[k] /= h;
    s->mix_cdf[m - 1] = 1.0;
    return SQ_OK;
}

/* An item of cluster k drawn by its Zipf weight: the first CDF entry above
 * u (binary search inside the cluster's slice). */
static uint32_t zipf_item(const sq_synth *s, uint32_t k, double u)
{
    uint32_t lo = s->start[k], hi = s->start[k + 1] - 1;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (s->cdf[mid] > u)
            hi = mid;
        else
            lo = mid + 1;
    }
    return s->members[lo];
}

static uint32_t preferred_cluster(const sq_synth *s, double u)
{
    uint32_t k = 0;
    while (k + 1 < s->o.user_clusters && s->mix_cdf[k] <= u)
        k++;
    return s->pref[k];
}

uint32_t sq_synth_user(sq_synth *s, uint32_t user)
{
    const sq_synth_opts *o = &s->o;
    sq_rng r;
    sq_rng_seed(&r, o->seed, user);

    /* 1. Preferred clusters: M distinct uniform draws (redraw repeats). */
    for (uint32_t k = 0; k < o->user_clusters; k++) {
        for (;;) {
            uint32_t c = (uint32_t)sq_rng_below(&r, o->clusters);
            uint32_t dup = 0;
            for (uint32_t j = 0; j < k && !dup; j++)
                dup = s->pref[j] == c;
            if (!dup) {
                s->pref[k] = c;
                break;
            }
        }
    }
    /* 2. Length: min_len + geometric G on {0, 1, ...} with mean
     *    mu = mean_len - min_len, G = floor(ln(1 - U) / ln(1 - p)),
     *    p = 1/(1 + mu); clipped to max_len. The draw is always made. */
    double u = sq_rng_uniform(&r);
    double mu = o->mean_len - o->min_len;
    double g = 0;
    if (mu > 0)
        g = floor(log1p(-u) / log1p(-1.0 / (1.0 + mu)));
    uint32_t len = o->max_len;
    if (g < (double)(o->max_len - o->min_len))
        len = o->min_len + (uint32_t)g;
    /* 3. First timestamp. */
    int64_t t = T0_BASE + (int64_t)sq_rng_below(&r, T0_SPAN);

    double p_stay = o->p_next + (1 - o->p_next) * o->p_stay;
    uint32_t cur = 0;
    for (uint32_t i = 0; i < len; i++) {
        /* 4. The item: position 0 always starts in a preferred cluster. */
        if (i == 0) {
            uint32_t k = preferred_cluster(s, sq_rng_uniform(&r));
            cur = zipf_item(s, k, sq_rng_uniform(&r));
        } else {
            double v = sq_rng_uniform(&r);
            if (v < o->p_next) {
                cur = s->successor[cur];
            } else if (v < p_stay) {
                cur = zipf_item(s, s->cluster_of[cur], sq_rng_uniform(&r));
            } else {
                uint32_t k = preferred_cluster(s, sq_rng_uniform(&r));
                cur = zipf_item(s, k, sq_rng_uniform(&r));
            }
            /* 5. The gap since the previous interaction. */
            t += GAP_MIN + (int64_t)sq_rng_below(&r, GAP_SPAN);
        }
        s->items[i] = cur;
        s->ts[i] = t;
        /* 6. The rating. */
        s->rating[i] = (uint8_t)(4 + sq_rng_below(&r, 2));
    }
    return len;
}

/* Shortest "%.*g" that reads back as the same double, so that meta shows
 * 0.5 rather than 0.50000000000000000. */
static void fmt_double(char *buf, size_t n, double x)
{
    for (int prec = 6; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, x);
        if (strtod(buf, NULL) == x)
            return;
    }
}

int sq_synth_meta(const sq_synth_opts *o, sq_header *h, sq_err *e)
{
    char mean[32], zipf[32], pn[32], ps[32];
    fmt_double(mean, sizeof mean, o->mean_len);
    fmt_double(zipf, sizeof zipf, o->zipf);
    fmt_double(pn, sizeof pn, o->p_next);
    fmt_double(ps, sizeof ps, o->p_stay);
    if (sq_meta_add(h, e, "dataset", "synth") ||
        sq_meta_add(h, e, "synth.users", "%u", o->users) ||
        sq_meta_add(h, e, "synth.items", "%u", o->items) ||
        sq_meta_add(h, e, "synth.clusters", "%u", o->clusters) ||
        sq_meta_add(h, e, "synth.user-clusters", "%u", o->user_clusters) ||
        sq_meta_add(h, e, "synth.min-len", "%u", o->min_len) ||
        sq_meta_add(h, e, "synth.mean-len", "%s", mean) ||
        sq_meta_add(h, e, "synth.max-len", "%u", o->max_len) ||
        sq_meta_add(h, e, "synth.zipf", "%s", zipf) ||
        sq_meta_add(h, e, "synth.p-next", "%s", pn) ||
        sq_meta_add(h, e, "synth.p-stay", "%s", ps) ||
        sq_meta_add(h, e, "synth.seed", "%llu", (unsigned long long)o->seed) ||
        sq_meta_add(h, e, "seqrec.version", "%s", SEQREC_VERSION))
        return e->code;
    return SQ_OK;
}

/* Decimal digits of v at p; returns the end. printf is the bottleneck of
 * a million-line output otherwise. */
static char *put_u64(char *p, uint64_t v)
{
    char tmp[20];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        *p++ = tmp[--n];
    return p;
}

int sq_synth_write_text(sq_synth *s, FILE *f, const char *name, sq_err *e)
{
    /* One line is at most 10 + 10 + 1 + 20 digits and 4 separators. */
    enum { LINE_MAX_BYTES = 48 };
    size_t cap = (size_t)s->o.max_len * LINE_MAX_BYTES;
    char *buf = malloc(cap);
    if (!buf)
        return sq_fail(e, SQ_EX_OSERR, "out of memory for the output buffer");
    for (uint32_t u = 1; u <= s->o.users; u++) {
        uint32_t len = sq_synth_user(s, u);
        char *p = buf;
        for (uint32_t i = 0; i < len; i++) {
            p = put_u64(p, u);
            *p++ = '\t';
            p = put_u64(p, s->items[i]);
            *p++ = '\t';
            *p++ = (char)('0' + s->rating[i]);
            *p++ = '\t';
            p = put_u64(p, (uint64_t)s->ts[i]);
            *p++ = '\n';
        }
        size_t n = (size_t)(p - buf);
        if (fwrite(buf, 1, n, f) != n) {
            free(buf);
            return sq_fail(e, SQ_EX_IO, "%s: write error: %s", name, strerror(errno));
        }
    }
    free(buf);
    return SQ_OK;
}

int sq_synth_write_stream(sq_synth *s, FILE *f, const char *name, sq_err *e)
{
    sq_header h;
    sq_header_init(&h, SQ_SEQUENCES, s->o.items);
    h.flags = SQ_FLAG_TS;
    if (sq_synth_meta(&s->o, &h, e)) {
        sq_header_free(&h);
        return e->code;
    }
    sq_writer w;
    memset(&w, 0, sizeof w); /* so that sq_writer_free is safe whatever happens */
    int rc = sq_writer_open(&w, f, name, &h, e);
    sq_header_free(&h);
    for (uint32_t u = 1; rc == SQ_OK && u <= s->o.users; u++) {
        sq_record rec;
        memset(&rec, 0, sizeof rec);
        rec.user = u;
        rec.len = sq_synth_user(s, u);
        rec.items = s->items;
        rec.ts = s->ts;
        rc = sq_write(&w, &rec, e);
    }
    if (rc == SQ_OK)
        rc = sq_writer_finish(&w, e);
    sq_writer_free(&w);
    return rc;
}
