/* sampler.c - the negatives of the sampled losses (see sampler.h). */
#include "sampler.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_names[] = {"uniform", "pop", "in-batch", "mixed"};

int sq_neg_sampler_parse(const char *w)
{
    for (int k = 0; k < 4; k++)
        if (!strcmp(w, kind_names[k]))
            return k + (k == SQ_NEG_POP ? 8 * 1000 : 0);
    if (strncmp(w, "pop:", 4) || !w[4])
        return -1;
    char *end;
    double a = strtod(w + 4, &end);
    if (*end || !(a >= 0 && a <= 1))
        return -1;
    long m = lround(a * 1000);
    if (fabs(a * 1000 - (double)m) > 1e-6)
        return -1; /* more than 3 decimals: not what the file would say */
    return SQ_NEG_POP + 8 * (int)m;
}

const char *sq_neg_sampler_format(int v, char *buf, size_t n)
{
    if (sq_neg_kind(v) == SQ_NEG_POP)
        snprintf(buf, n, "pop:%g", sq_neg_alpha(v));
    else
        snprintf(buf, n, "%s", kind_names[sq_neg_kind(v) & 3]);
    return buf;
}

/* Walker's alias table of the weights w[0..V) (sum > 0), Vose's
 * construction: deterministic, O(V). */
static int alias_build(sq_sampler *s, const double *w, double sum, uint32_t V)
{
    uint32_t *small = malloc((size_t)V * sizeof *small), *large = malloc((size_t)V * sizeof *large);
    double *p = malloc((size_t)V * sizeof *p);
    if (!small || !large || !p) {
        free(small);
        free(large);
        free(p);
        return -1;
    }
    uint32_t ns = 0, nl = 0;
    for (uint32_t j = 0; j < V; j++) {
        p[j] = w[j] * V / sum;
        if (p[j] < 1)
            small[ns++] = j;
        else
            large[nl++] = j;
    }
    while (ns && nl) {
        uint32_t a = small[--ns], b = large[nl - 1];
        s->prob[a] = (float)p[a];
        s->alias[a] = b + 1;
        p[b] -= 1 - p[a];
        if (p[b] < 1) {
            nl--;
            small[ns++] = b;
        }
    }
    while (nl) /* what rounding left: probability 1 */
        s->prob[large[--nl]] = 1;
    while (ns)
        s->prob[small[--ns]] = 1;
    free(small);
    free(large);
    free(p);
    return 0;
}

static int pop_init(sq_sampler *s, double alpha, const uint32_t *items, const uint64_t *start,
                    const uint32_t *n_train, uint32_t n_users, sq_err *e)
{
    uint32_t V = s->n_items;
    double *w = calloc(V, sizeof *w);
    s->prob = malloc((size_t)V * sizeof *s->prob);
    s->alias = malloc((size_t)V * sizeof *s->alias);
    s->log_kq_pop = malloc(((size_t)V + 1) * sizeof *s->log_kq_pop);
    if (!w || !s->prob || !s->alias || !s->log_kq_pop) {
        free(w);
        return sq_fail(e, SQ_EX_OSERR, "out of memory for the popularity sampler");
    }
    for (uint32_t u = 0; u < n_users; u++)
        for (uint32_t t = 0; t < n_train[u]; t++) {
            uint32_t x = items[start[u] + t];
            if (x >= 1 && x <= V)
                w[x - 1] += 1;
        }
    double sum = 0;
    for (uint32_t j = 0; j < V; j++) {
        w[j] = w[j] > 0 ? pow(w[j], alpha) : 0;
        sum += w[j];
    }
    if (!(sum > 0)) {
        free(w);
        return sq_fail(e, SQ_EX_DATA, "--neg-sampler pop: the training parts hold no item");
    }
    s->log_kq_pop[0] = 0;
    for (uint32_t j = 0; j < V; j++)
        s->log_kq_pop[j + 1] = w[j] > 0 ? (float)log(s->K * w[j] / sum) : 0;
    int rc = alias_build(s, w, sum, V);
    free(w);
    return rc ? sq_fail(e, SQ_EX_OSERR, "out of memory for the popularity sampler") : 0;
}

int sq_sampler_init(sq_sampler *s, int v, int K, uint32_t n_items, const uint32_t *items,
                    const uint64_t *start, const uint32_t *n_train, uint32_t n_users,
                    sq_err *e)
{
    char buf[32];
    memset(s, 0, sizeof *s);
    s->kind = sq_neg_kind(v);
    s->K = K;
    s->n_items = n_items;
    if (K < 1 || (uint64_t)K >= n_items)
        return sq_fail(e, SQ_EX_USAGE,
                       "--neg %d: a sampled loss takes 1 to n_items - 1 = %u negatives "
                       "(use --loss ce for the whole catalogue)",
                       K, n_items ? n_items - 1 : 0);
    if (s->kind == SQ_NEG_MIXED && K < 2)
        return sq_fail(e, SQ_EX_USAGE, "--neg-sampler mixed needs --neg 2 or more");
    s->log_kq = log((double)K / n_items);
    if (s->kind == SQ_NEG_POP)
        return pop_init(s, sq_neg_alpha(v), items, start, n_train, n_users, e);
    if (s->kind == SQ_NEG_INBATCH || s->kind == SQ_NEG_MIXED) {
        s->cnt = calloc((size_t)n_items + 1, sizeof *s->cnt);
        if (!s->cnt)
            return sq_fail(e, SQ_EX_OSERR, "out of memory for --neg-sampler %s",
                           sq_neg_sampler_format(v, buf, sizeof buf));
    }
    return 0;
}

void sq_sampler_free(sq_sampler *s)
{
    free(s->prob);
    free(s->alias);
    free(s->log_kq_pop);
    free(s->cnt);
    memset(s, 0, sizeof *s);
}

void sq_sampler_draw(const sq_sampler *s, sq_rng *r, int k0, int *neg, float *lq)
{
    for (int k = k0; k < s->K; k++) {
        uint32_t j = (uint32_t)sq_rng_below(r, s->n_items);
        if (s->kind == SQ_NEG_POP) {
            double u = sq_rng_uniform(r);
            uint32_t x = u < (double)s->prob[j] ? j + 1 : s->alias[j];
            neg[k] = (int)x;
            lq[k] = s->log_kq_pop[x];
        } else {
            neg[k] = (int)j + 1;
            lq[k] = (float)s->log_kq;
        }
    }
}

void sq_sampler_inbatch(sq_sampler *s, sq_rng *r, const int *tg, int n, const int *at,
                        int n_at, int *neg, float *lq)
{
    int K = s->K, K1 = s->kind == SQ_NEG_MIXED ? K / 2 : K;
    double lo = (double)(K - K1) / s->n_items; /* the uniform part of K Q */
    for (int i = 0; i < n; i++)
        s->cnt[tg[i]]++;
    for (int j = 0; j < n_at; j++) {
        int i = at ? at[j] : j;
        int *ni = neg + (size_t)i * K;
        float *qi = lq + (size_t)i * K;
        for (int k = 0; k < K1; k++)
            ni[k] = tg[sq_rng_below(r, (uint64_t)n)];
        for (int k = 0; k < K; k++) /* a target counts at least its own entry */
            qi[k] = ni[k] ? (float)log((double)K1 * s->cnt[ni[k]] / n + lo) : 0;
    }
    for (int i = 0; i < n; i++)
        s->cnt[tg[i]] = 0;
}
