/* compare.c - paired differences, t-test, Wilcoxon signed-rank test and
 * bootstrap interval of two rank files (definitions in compare.h). */
#include "compare.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

/* ---- special functions ---- */

/* One step of the modified Lentz method with coefficient aa: c and d
 * updated (kept off zero), the factor d c of the fraction returned */
static double lentz_step(double aa, double *c, double *d)
{
    const double tiny = 1e-300;
    *d = 1.0 + aa * *d;
    if (fabs(*d) < tiny)
        *d = tiny;
    *c = 1.0 + aa / *c;
    if (fabs(*c) < tiny)
        *c = tiny;
    *d = 1.0 / *d;
    return *d * *c;
}

/* The continued fraction of I_x(a, b) by the modified Lentz method
 * (Numerical Recipes' betacf): converges fast for x < (a + 1)/(a + b + 2). */
static double betacf(double a, double b, double x)
{
    const double tiny = 1e-300, eps = 1e-15;
    double qab = a + b, qap = a + 1.0, qam = a - 1.0;
    double c = 1.0, d = 1.0 - qab * x / qap;
    if (fabs(d) < tiny)
        d = tiny;
    d = 1.0 / d;
    double h = d;
    for (int m = 1; m <= 10000; m++) {
        double m2 = 2.0 * m;
        h *= lentz_step(m * (b - m) * x / ((qam + m2) * (a + m2)), &c, &d);
        double del = lentz_step(-(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)), &c, &d);
        h *= del;
        if (fabs(del - 1.0) < eps)
            break;
    }
    return h;
}

double sq_betainc(double a, double b, double x)
{
    if (x <= 0.0)
        return 0.0;
    if (x >= 1.0)
        return 1.0;
    /* the prefactor x^a (1-x)^b / (a B(a, b)) in logs (lgamma of libm) */
    double lbt = lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x);
    if (x < (a + 1.0) / (a + b + 2.0))
        return exp(lbt) * betacf(a, b, x) / a;
    return 1.0 - exp(lbt) * betacf(b, a, 1.0 - x) / b;
}

double sq_t_pvalue(double t, double df)
{
    if (isnan(t))
        return 1.0;
    if (isinf(t))
        return 0.0;
    return sq_betainc(df / 2.0, 0.5, df / (df + t * t));
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double sq_wilcoxon_p(const double *d, uint64_t n, double *tmp, double *w)
{
    double *ad = tmp, *sorted = tmp + n;
    uint64_t m = 0;
    for (uint64_t i = 0; i < n; i++)
        if (d[i] != 0.0)
            ad[m++] = fabs(d[i]);
    *w = 0.0;
    if (m == 0)
        return 1.0;
    memcpy(sorted, ad, m * sizeof *sorted);
    qsort(sorted, m, sizeof *sorted, cmp_double);
    /* W+ : each positive d's average rank among the |d|, found by binary
     * search in the sorted copy; the tie term from the runs */
    double wplus = 0.0, ties = 0.0;
    for (uint64_t i = 0, j = 0; i < n; i++) {
        if (d[i] == 0.0)
            continue;
        double x = ad[j++];
        uint64_t lo = 0, hi = m;
        while (lo < hi) {
            uint64_t mid = lo + (hi - lo) / 2;
            if (sorted[mid] < x) lo = mid + 1; else hi = mid;
        }
        uint64_t first = lo;
        hi = m;
        while (lo < hi) {
            uint64_t mid = lo + (hi - lo) / 2;
            if (sorted[mid] <= x) lo = mid + 1; else hi = mid;
        }
        if (d[i] > 0)
            wplus += (double)(first + 1 + lo) / 2.0; /* ranks first+1 .. lo */
    }
    for (uint64_t i = 0; i < m;) {
        uint64_t j = i;
        while (j < m && sorted[j] == sorted[i])
            j++;
        double t = (double)(j - i);
        ties += t * (t * t - 1.0);
        i = j;
    }
    double dm = (double)m;
    double total = dm * (dm + 1.0) / 2.0, T = fmin(wplus, total - wplus);
    double mean = dm * (dm + 1.0) / 4.0;
    double var = (dm * (dm + 1.0) * (2.0 * dm + 1.0) - 0.5 * ties) / 24.0;
    *w = T;
    if (var <= 0.0)
        return 1.0;
    double z = (T - mean + 0.5 * (T < mean ? 1.0 : T > mean ? -1.0 : 0.0)) / sqrt(var);
    return erfc(fabs(z) / sqrt(2.0));
}

/* ---- the comparison ---- */

static int same_records(const sq_metrics *a, const char *na, const sq_metrics *b,
                        const char *nb, sq_err *e)
{
    if (a->records != b->records)
        return sq_fail(e, SQ_EX_DATA, "--compare: %s has %llu records, %s %llu: not the same "
                       "records", na, (unsigned long long)a->records, nb,
                       (unsigned long long)b->records);
    for (uint64_t i = 0; i < a->records; i++) {
        const sq_rank_rec *x = &a->rec[i], *y = &b->rec[i];
        if (x->user != y->user || x->item != y->item)
            return sq_fail(e, SQ_EX_DATA, "--compare: record %llu differs: user %u item %u in "
                           "%s, user %u item %u in %s", (unsigned long long)i + 1, x->user,
                           x->item, na, y->user, y->item, nb);
    }
    return SQ_OK;
}

/* Percentile q (0..1) of sorted v[0..n), numpy's linear interpolation. */
static double percentile(const double *v, uint32_t n, double q)
{
    double pos = q * (n - 1);
    uint32_t i = (uint32_t)pos;
    double f = pos - i;
    return i + 1 < n ? v[i] + f * (v[i + 1] - v[i]) : v[n - 1];
}

/* t-test and Wilcoxon of column c of the units' differences d. */
static void tests(sq_compare_row *r, const double *d, uint64_t n, double *tmp)
{
    double s = 0.0, ss = 0.0;
    for (uint64_t u = 0; u < n; u++)
        s += d[u];
    double mean = s / (double)n;
    int same = 1;
    for (uint64_t u = 0; u < n; u++) {
        ss += (d[u] - mean) * (d[u] - mean);
        same &= d[u] == d[0];
    }
    r->diff = mean;
    if (same || n < 2) {
        r->t = d[0] == 0.0 ? 0.0 : INFINITY;
        r->t_p = d[0] == 0.0 ? 1.0 : 0.0;
    } else {
        r->t = mean / sqrt(ss / (double)(n - 1) / (double)n);
        r->t_p = sq_t_pvalue(r->t, (double)(n - 1));
    }
    r->w_p = sq_wilcoxon_p(d, n, tmp, &r->w);
}

/* The bootstrap intervals of every column: boot resamples of the units. */
static int bootstrap(sq_compare *c, const double *d, uint64_t n, int nv, sq_err *e)
{
    double *means = malloc((size_t)c->boot * (size_t)nv * sizeof *means);
    double *sum = malloc((size_t)nv * sizeof *sum), *col = malloc(c->boot * sizeof *col);
    if (!means || !sum || !col) {
        free(means);
        free(sum);
        free(col);
        return sq_fail(e, SQ_EX_OSERR, "out of memory for %u resamples", c->boot);
    }
    sq_rng r;
    sq_rng_seed(&r, c->seed, 0);
    for (uint32_t b = 0; b < c->boot; b++) {
        for (int v = 0; v < nv; v++)
            sum[v] = 0.0;
        for (uint64_t i = 0; i < n; i++) {
            const double *x = d + sq_rng_below(&r, n) * (uint64_t)nv;
            for (int v = 0; v < nv; v++)
                sum[v] += x[v];
        }
        for (int v = 0; v < nv; v++)
            means[(size_t)v * c->boot + b] = sum[v] / (double)n;
    }
    for (int v = 0; v < nv; v++) {
        memcpy(col, means + (size_t)v * c->boot, c->boot * sizeof *col);
        qsort(col, c->boot, sizeof *col, cmp_double);
        c->row[v].ci_lo = percentile(col, c->boot, 0.025);
        c->row[v].ci_hi = percentile(col, c->boot, 0.975);
    }
    free(means);
    free(sum);
    free(col);
    return SQ_OK;
}

int sq_compare_run(const sq_metrics *a, const char *name_a, const sq_metrics *b,
                   const char *name_b, const sq_metrics_opts *o, uint32_t boot, uint64_t seed,
                   sq_compare *c, sq_err *e)
{
    memset(c, 0, sizeof *c);
    if (same_records(a, name_a, b, name_b, e))
        return e->code;
    c->n_k = a->n_k;
    memcpy(c->k, a->k, sizeof c->k);
    c->records = a->records;
    c->per_user = o->per_user;
    c->corrected = o->corrected;
    c->gamma = o->gamma;
    c->boot = boot ? boot : 1;
    c->seed = seed;
    int nv = sq_metrics_nv(a);
    double *va = NULL, *vb = NULL, *col = NULL, *tmp = NULL;
    uint64_t n = 0, nb = 0;
    int rc = sq_metrics_units(a, o, &va, NULL, &n, e);
    if (!rc)
        rc = sq_metrics_units(b, o, &vb, NULL, &nb, e);
    if (!rc && (!(col = malloc((n + 1) * sizeof *col)) ||
                !(tmp = malloc((2 * n + 1) * sizeof *tmp))))
        rc = sq_fail(e, SQ_EX_OSERR, "out of memory for %llu units", (unsigned long long)n);
    c->units = n;
    for (uint64_t u = 0; !rc && u < n * (uint64_t)nv; u++)
        vb[u] -= va[u]; /* vb: the differences */
    for (int v = 0; !rc && v < nv; v++) {
        double sa = 0.0, sb = 0.0;
        for (uint64_t u = 0; u < n; u++) {
            col[u] = vb[u * (uint64_t)nv + (uint64_t)v];
            sa += va[u * (uint64_t)nv + (uint64_t)v];
            sb += va[u * (uint64_t)nv + (uint64_t)v] + col[u];
        }
        c->row[v].a = sa / (double)n;
        c->row[v].b = sb / (double)n;
        tests(&c->row[v], col, n, tmp);
    }
    if (!rc)
        rc = bootstrap(c, vb, n, nv, e);
    free(va);
    free(vb);
    free(col);
    free(tmp);
    return rc;
}

/* ---- output ---- */

static const struct {
    const char *name, *key;
    int what;
} rows[] = {
    {"HR", "hr", SQ_MV_HR}, {"NDCG", "ndcg", SQ_MV_NDCG}, {"MRR", "mrr", SQ_MV_MRR},
    {"MAP", "map", SQ_MV_MAP}, {"Precision", "precision", SQ_MV_PREC},
};
enum { N_ROWS = sizeof rows / sizeof rows[0] };

static int write_check(FILE *out, const char *name, sq_err *e)
{
    if (ferror(out))
        return sq_fail(e, SQ_EX_IO, "%s: write error: %s", name, strerror(errno));
    return SQ_OK;
}

int sq_compare_write_table(const sq_compare *c, FILE *out, const char *name, sq_err *e)
{
    fprintf(out, "%-14s %9s %9s %9s %9s %9s  %s\n", "metric", "A", "B", "B-A", "t p",
            "Wilcoxon", "95% bootstrap CI");
    for (int j = 0; j <= c->n_k; j++)
        for (int i = 0; i < N_ROWS; i++) {
            if (j == c->n_k && i > 0)
                break;
            char label[32];
            const sq_compare_row *r;
            if (j < c->n_k) {
                snprintf(label, sizeof label, "%s@%u", rows[i].name, c->k[j]);
                r = &c->row[SQ_MV_N * j + rows[i].what];
            } else {
                snprintf(label, sizeof label, "MRR (all)");
                r = &c->row[SQ_MV_N * c->n_k];
            }
            fprintf(out, "%-14s %9.4f %9.4f %+9.4f %9.4g %9.4g  [%+.4f, %+.4f]\n", label, r->a,
                    r->b, r->diff, r->t_p, r->w_p, r->ci_lo, r->ci_hi);
        }
    fprintf(out, "%s %llu, %u bootstrap resamples (seed %llu)%s%s\n",
            c->per_user ? "users" : "records", (unsigned long long)c->units, c->boot,
            (unsigned long long)c->seed, c->per_user ? ", averaged per user" : "",
            c->corrected == SQ_CORR_RANK ? ", corrected (rank estimate)"
            : c->corrected ? ", corrected (bias-variance)" : "");
    return write_check(out, name, e);
}

static void json_row(FILE *out, const char *key, const sq_compare_row *r)
{
    fprintf(out, ", \"%s:a\": %.6f, \"%s:b\": %.6f, \"%s:diff\": %.6f, \"%s:t\": %.6g"
                 ", \"%s:t_p\": %.6g, \"%s:wilcoxon_w\": %.6g, \"%s:wilcoxon_p\": %.6g"
                 ", \"%s:ci_lo\": %.6f, \"%s:ci_hi\": %.6f",
            key, r->a, key, r->b, key, r->diff, key, r->t, key, r->t_p, key, r->w, key,
            r->w_p, key, r->ci_lo, key, r->ci_hi);
}

int sq_compare_write_json(const sq_compare *c, FILE *out, const char *name, sq_err *e)
{
    fprintf(out, "{\"records\": %llu, \"units\": %llu, \"bootstrap\": %u, \"seed\": %llu",
            (unsigned long long)c->records, (unsigned long long)c->units, c->boot,
            (unsigned long long)c->seed);
    if (c->per_user)
        fputs(", \"averaged\": \"user\"", out);
    if (c->corrected == SQ_CORR_RANK)
        fputs(", \"corrected\": \"rank\"", out);
    else if (c->corrected == SQ_CORR_BV)
        fprintf(out, ", \"corrected\": \"bv:%g\"", c->gamma);
    json_row(out, "mrr", &c->row[SQ_MV_N * c->n_k]);
    for (int j = 0; j < c->n_k; j++)
        for (int i = 0; i < N_ROWS; i++) {
            char key[32];
            snprintf(key, sizeof key, "%s@%u", rows[i].key, c->k[j]);
            json_row(out, key, &c->row[SQ_MV_N * j + rows[i].what]);
        }
    fputs("}\n", out);
    return write_check(out, name, e);
}
