/* eval.c - ranks of held-out targets and top-K lists (eval.h).
 *
 * Work is a list of jobs (one per target, or one per user for top-K) taken
 * B at a time: their histories are packed into one sq_batch, the model
 * scores the batch once into a [B x (n_items + 1)] buffer, then OpenMP
 * threads rank the jobs of the batch, each with its own scratch, and the
 * results are emitted in job order. Every random draw of a job comes from
 * a generator seeded by (seed, user, position), and the model's scores of
 * a history do not depend on its batch (eval.h, INVARIANCE), so nothing
 * depends on the batch size, the shard or the number of threads. */
#include "eval.h"
#include "rank.h"
#include "topk.h"
#include "vec.h"

#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "rng.h"

/* ---- options ---- */

void sq_eval_defaults(sq_eval_opts *o)
{
    memset(o, 0, sizeof *o);
    o->target = SQ_EVAL_TEST;
    o->cand = SQ_CAND_FULL;
    o->seed = 1;
    o->batch = 0; /* sq_eval_batch */
}

int sq_eval_batch(const sq_eval_opts *o, uint32_t n_items)
{
    if (o->batch > 0)
        return o->batch;
    size_t fit = SQ_EVAL_SCORES_MAX / ((size_t)n_items + 1);
    return fit >= 256 ? 256 : fit < 1 ? 1 : (int)fit;
}

static int parse_u32(const char *s, uint32_t *v)
{
    if (*s < '0' || *s > '9')
        return -1;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (errno || *end || x > UINT32_MAX)
        return -1;
    *v = (uint32_t)x;
    return 0;
}

int sq_eval_parse_candidates(const char *s, sq_eval_opts *o, sq_err *e)
{
    if (strcmp(s, "full") == 0) {
        o->cand = SQ_CAND_FULL;
        o->n_neg = 0;
        return 0;
    }
    int kind = strncmp(s, "uni:", 4) == 0 ? SQ_CAND_UNI
             : strncmp(s, "pop:", 4) == 0 ? SQ_CAND_POP : -1;
    uint32_t n;
    if (kind < 0 || parse_u32(s + 4, &n) || n == 0)
        return sq_fail(e, SQ_EX_USAGE, "--candidates: expected full, uni:N or pop:N "
                       "(N a positive integer), got '%s'", s);
    o->cand = kind;
    o->n_neg = n;
    return 0;
}

int sq_eval_parse_shard(const char *s, sq_eval_opts *o, sq_err *e)
{
    char buf[64];
    const char *slash = strchr(s, '/');
    uint32_t i, n;
    if (!slash || (size_t)(slash - s) >= sizeof buf)
        goto bad;
    memcpy(buf, s, (size_t)(slash - s));
    buf[slash - s] = '\0';
    if (parse_u32(buf, &i) || parse_u32(slash + 1, &n) || n == 0 || i >= n)
        goto bad;
    o->shard_i = i;
    o->shard_n = n;
    return 0;
bad:
    return sq_fail(e, SQ_EX_USAGE, "--shard: expected i/n with 0 <= i < n, got '%s'", s);
}

void sq_eval_candidates_name(const sq_eval_opts *o, char *buf, size_t n)
{
    if (o->cand == SQ_CAND_FULL)
        snprintf(buf, n, "full");
    else
        snprintf(buf, n, "%s:%u", o->cand == SQ_CAND_UNI ? "uni" : "pop", o->n_neg);
}

uint64_t sq_shard_hash(uint32_t user)
{
    unsigned char b[4] = {(unsigned char)user, (unsigned char)(user >> 8),
                          (unsigned char)(user >> 16), (unsigned char)(user >> 24)};
    return XXH3_64bits(b, sizeof b);
}

int sq_shard_has(uint32_t user, uint32_t i, uint32_t n)
{
    return n <= 1 || sq_shard_hash(user) % n == i;
}

/* ---- jobs and scratch ---- */

typedef struct {
    uint64_t rec;   /* record of the dataset */
    uint32_t pos;   /* target position (ranks) or len (top-K): history ends here */
} job;

typedef sq_scored scored; /* topk.h */

/* Per-thread memory: two stamp arrays over the items (a mark is current
 * when it equals stamp, so nothing is cleared between jobs), and room for
 * pop sampling's fallback and for a top-K heap. */
typedef struct {
    uint32_t *hist;   /* hist[i] == stamp: i is in the excluded history */
    uint32_t *drawn;  /* drawn[i] == stamp: i already drawn (or left out) */
    uint32_t stamp;
    scored *keys;     /* [n_items] for pop sampling's exact fallback, or [K] heap */
} scratch;

typedef struct {
    const sq_dataset *ds;
    const sq_eval_opts *o;
    uint32_t n;        /* n_items */
    uint64_t *cum;     /* pop: cum[i] = pop[1] + ... + pop[i] */
    uint32_t n_pos;    /* pop: items with a positive count (and item_ok) */
    uint32_t K;        /* top-K */
    unsigned char *ok; /* [n + 1] items that may be candidates (all 1 without filter) */
    uint32_t n_ok;     /* how many of 1..n */
    uint32_t *ok_list; /* [n_ok] those items when some are filtered, else NULL */
    /* pop: a guide to cum (Chen and Asau's): x in [j gw, (j + 1) gw) draws
     * an item of [guide[j], guide[j + 1]], guide[j] the one x = j gw draws */
    uint32_t *guide;   /* [n + 1] */
    uint64_t gw;
} ctx;

/* The context of a run: ok[] from o->item_ok, or every item. */
static int ctx_init(ctx *c, const sq_dataset *ds, const sq_eval_opts *o, uint32_t K, sq_err *e)
{
    *c = (ctx){ds, o, ds->hdr.n_items, NULL, 0, K, NULL, 0, NULL, NULL, 0};
    c->ok = malloc((size_t)c->n + 1);
    if (!c->ok)
        return sq_fail(e, SQ_EX_OSERR, "out of memory for %u items", c->n);
    c->ok[0] = 0;
    for (uint32_t i = 1; i <= c->n; i++) {
        c->ok[i] = o->item_ok ? o->item_ok[i] != 0 : 1;
        c->n_ok += c->ok[i];
    }
    /* uniform draws from the allowed items: rejection over 1..n would
     * stall on a short allow list */
    if (c->n_ok < c->n) {
        c->ok_list = malloc(((size_t)c->n_ok + 1) * sizeof *c->ok_list);
        if (!c->ok_list)
            return sq_fail(e, SQ_EX_OSERR, "out of memory for %u items", c->n_ok);
        for (uint32_t i = 1, j = 0; i <= c->n; i++)
            if (c->ok[i])
                c->ok_list[j++] = i;
    }
    return SQ_OK;
}

static void ctx_free(ctx *c)
{
    free(c->cum);
    free(c->guide);
    free(c->ok);
    free(c->ok_list);
}

static void scratch_free(scratch *s, int nt)
{
    for (int t = 0; s && t < nt; t++) {
        free(s[t].hist);
        free(s[t].drawn);
        free(s[t].keys);
    }
    free(s);
}

static scratch *scratch_new(int nt, uint32_t n, size_t n_keys)
{
    scratch *s = calloc((size_t)nt, sizeof *s);
    if (!s)
        return NULL;
    for (int t = 0; t < nt; t++) {
        s[t].hist = calloc((size_t)n + 1, sizeof *s[t].hist);
        s[t].drawn = calloc((size_t)n + 1, sizeof *s[t].drawn);
        s[t].keys = n_keys ? malloc(n_keys * sizeof *s[t].keys) : NULL;
        if (!s[t].hist || !s[t].drawn || (n_keys && !s[t].keys)) {
            scratch_free(s, nt);
            return NULL;
        }
    }
    return s;
}

/* A fresh stamp: every mark of earlier jobs is stale at once. */
static void next_stamp(scratch *s, uint32_t n)
{
    if (++s->stamp == 0) {
        memset(s->hist, 0, ((size_t)n + 1) * sizeof *s->hist);
        memset(s->drawn, 0, ((size_t)n + 1) * sizeof *s->drawn);
        s->stamp = 1;
    }
}

/* Marks the history items except keep and the filtered ones; returns how
 * many distinct ones, and in *n_pos how many of those have a positive
 * training count. */
static uint32_t mark_history(scratch *s, const uint32_t *h, uint32_t len, uint32_t keep,
                             const uint64_t *pop, const unsigned char *ok, uint32_t *n_pos)
{
    uint32_t d = 0, dp = 0;
    for (uint32_t j = 0; j < len; j++) {
        uint32_t it = h[j];
        /* a filtered item is no candidate already: not counted twice */
        if (it == keep || s->hist[it] == s->stamp || !ok[it])
            continue;
        s->hist[it] = s->stamp;
        d++;
        dp += pop && pop[it] > 0;
    }
    if (n_pos)
        *n_pos = dp;
    return d;
}

/* ---- ranking one target ---- */

/* Candidates compared with the target score so far. */
typedef struct {
    float st;         /* the target's score */
    uint32_t above;   /* scoring strictly higher */
    uint32_t equal;   /* scoring the same */
    uint32_t n;       /* candidates other than the target */
    int nan;
    uint32_t *list;   /* when set, the candidates are listed here (tests) */
} tally;

static inline void cmp(tally *t, const float *sc, uint32_t i)
{
    float x = sc[i];
    t->above += x > t->st;
    t->equal += x == t->st;
    t->nan |= x != x;
    if (t->list)
        t->list[t->n] = i;
    t->n++;
}

/* tally_all's common case (full candidates, nothing listed) without a
 * branch, so that it vectorises: items 1..n but the target, the filtered
 * ones (okv[i] 0), those marked in hist (excl) and those marked in drawn
 * (skip_drawn) with this stamp.
 * Integer counts: the same as cmp item by item. */
SQ_VEC static void tally_counts(tally *t, const float *sc, uint32_t n, uint32_t target,
                                const unsigned char *okv, uint32_t excl, const uint32_t *hist,
                                uint32_t skip_drawn, const uint32_t *drawn, uint32_t stamp)
{
    uint32_t above = 0, equal = 0, cnt = 0, nan = 0;
    float st = t->st;
    size_t end = (size_t)n + 1; /* a size_t count: the trip count is known */
    #pragma omp simd reduction(+ : above, equal, cnt) reduction(| : nan)
    for (size_t i = 1; i < end; i++) {
        uint32_t ok = (uint32_t)(i != target) & (uint32_t)okv[i] &
                      ~(excl & (uint32_t)(hist[i] == stamp)) &
                      ~(skip_drawn & (uint32_t)(drawn[i] == stamp)) & 1u;
        float x = sc[i];
        above += ok & (uint32_t)(x > st);
        equal += ok & (uint32_t)(x == st);
        nan |= ok & (uint32_t)(x != x);
        cnt += ok;
    }
    t->above += above;
    t->equal += equal;
    t->nan |= (int)nan;
    t->n += cnt;
}

/* Every item other than the target that is not filtered or excluded (and, with
 * pop_only, has a positive count) and not already drawn. */
static void tally_all(tally *t, const float *sc, const ctx *c, const scratch *s,
                      uint32_t target, int excl, int pop_only, int skip_drawn)
{
    const uint64_t *pop = c->ds->pop;
    if (!t->list && !pop_only) {
        tally_counts(t, sc, c->n, target, c->ok, excl != 0, s->hist, skip_drawn != 0, s->drawn,
                     s->stamp);
        return;
    }
    for (uint32_t i = 1; i <= c->n; i++) {
        if (i == target || !c->ok[i] || (excl && s->hist[i] == s->stamp) ||
            (pop_only && pop[i] == 0) || (skip_drawn && s->drawn[i] == s->stamp))
            continue;
        cmp(t, sc, i);
    }
}

/* Whether i may be drawn as a negative. */
static inline int eligible(const ctx *c, const scratch *s, uint32_t i, uint32_t target, int excl)
{
    return i != target && c->ok[i] && !(excl && s->hist[i] == s->stamp) &&
           s->drawn[i] != s->stamp;
}

/* Uniform negatives without replacement. Rejection sampling while at most
 * half the pool is wanted; beyond that the complement (the items left out)
 * is drawn instead, so the expected cost stays below two draws per item. */
static void sample_uniform(tally *t, const float *sc, const ctx *c, scratch *s, sq_rng *r,
                           uint32_t target, int excl, uint32_t pool, uint32_t need)
{
    if (need == pool) {
        tally_all(t, sc, c, s, target, excl, 0, 0);
        return;
    }
    int complement = need > pool / 2;
    uint32_t todo = complement ? pool - need : need;
    while (todo) {
        uint32_t i = c->ok_list ? c->ok_list[sq_rng_below(r, c->n_ok)]
                                : 1 + (uint32_t)sq_rng_below(r, c->n);
        if (!eligible(c, s, i, target, excl))
            continue;
        s->drawn[i] = s->stamp;
        if (!complement)
            cmp(t, sc, i);
        todo--;
    }
    if (complement) /* candidates: what was not left out */
        tally_all(t, sc, c, s, target, excl, 0, 1);
}

static int by_key(const void *a, const void *b)
{
    const scored *x = a, *y = b;
    if (x->score != y->score)
        return x->score < y->score ? -1 : 1;
    return x->item < y->item ? -1 : x->item > y->item;
}

/* The item i with cum[i-1] <= x < cum[i], known to be in [lo, hi]. */
static uint32_t pop_search(const uint64_t *cum, uint32_t lo, uint32_t hi, uint64_t x)
{
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (cum[mid] > x)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* Popularity negatives without replacement: draws proportional to the
 * training counts, rejecting the target, the excluded history and repeats.
 * When the items left are so unpopular that rejection stalls, the rest is
 * drawn exactly by an exponential race (key -log(u) / count, smallest keys
 * first), which continues the same successive sampling. */
static void sample_pop(tally *t, const float *sc, const ctx *c, scratch *s, sq_rng *r,
                       uint32_t target, int excl, uint32_t pool, uint32_t need)
{
    if (need == pool) {
        tally_all(t, sc, c, s, target, excl, 1, 0);
        return;
    }
    const uint64_t *pop = c->ds->pop;
    uint64_t total = c->cum[c->n], tries = 32 * (uint64_t)need + 1024;
    uint32_t got = 0;
    while (got < need && tries--) {
        uint64_t x = sq_rng_below(r, total);
        uint32_t i = pop_search(c->cum, c->guide[x / c->gw], c->guide[x / c->gw + 1], x);
        if (!eligible(c, s, i, target, excl))
            continue;
        s->drawn[i] = s->stamp;
        cmp(t, sc, i);
        got++;
    }
    if (got == need)
        return;
    uint32_t m = 0;
    for (uint32_t i = 1; i <= c->n; i++) {
        if (pop[i] == 0 || !eligible(c, s, i, target, excl))
            continue;
        double u = 1.0 - sq_rng_uniform(r); /* (0, 1] */
        s->keys[m].score = (float)(-log(u) / (double)pop[i]);
        s->keys[m++].item = i;
    }
    qsort(s->keys, m, sizeof *s->keys, by_key);
    for (uint32_t j = 0; j < need - got && j < m; j++)
        cmp(t, sc, s->keys[j].item);
}

/* Rank and candidate count of one target; -1 on a NaN score. With list,
 * the candidates other than the target are also listed there. */
static int rank_one(const ctx *c, scratch *s, const float *sc, uint32_t user, uint32_t pos,
                    const uint32_t *h, uint32_t hlen, uint32_t target,
                    uint32_t *rank, uint32_t *n_cand, uint32_t *list)
{
    const sq_eval_opts *o = c->o;
    int excl = o->exclude_history;
    tally t = {.st = sc[target], .list = list};
    next_stamp(s, c->n);
    uint32_t nh = 0, nh_pos = 0;
    if (excl)
        nh = mark_history(s, h, hlen, target, c->ds->pop, c->ok, &nh_pos);
    if (o->cand == SQ_CAND_FULL) {
        tally_all(&t, sc, c, s, target, excl, 0, 0);
    } else {
        sq_rng r;
        sq_rng_seed(&r, o->seed, sq_eval_stream(user, pos));
        uint32_t pool = o->cand == SQ_CAND_UNI
                            ? c->n_ok - 1 - nh
                            : c->n_pos - (c->ds->pop[target] > 0) - nh_pos;
        uint32_t need = o->n_neg < pool ? o->n_neg : pool;
        if (o->cand == SQ_CAND_UNI)
            sample_uniform(&t, sc, c, s, &r, target, excl, pool, need);
        else
            sample_pop(&t, sc, c, s, &r, target, excl, pool, need);
    }
    if (t.nan || t.st != t.st)
        return -1;
    *rank = 1 + t.above + (o->optimistic ? 0 : t.equal);
    *n_cand = 1 + t.n;
    return 0;
}

/* ---- top-K of one user ---- */

/* The best K items into items/scores, best first; returns k, or -1 on NaN. */
static int64_t topk_one(const ctx *c, scratch *s, const float *sc, const uint32_t *h,
                        uint32_t hlen, uint32_t *items, float *scores)
{
    int excl = c->o->exclude_history;
    next_stamp(s, c->n);
    if (excl)
        mark_history(s, h, hlen, 0, NULL, c->ok, NULL);
    scored *hp = s->keys;
    uint32_t k = 0, K = c->K;
    for (uint32_t i = 1; i <= c->n; i++) {
        if (!c->ok[i] || (excl && s->hist[i] == s->stamp))
            continue;
        scored x = {sc[i], i};
        if (x.score != x.score)
            return -1;
        sq_topk_add(hp, &k, K, x);
    }
    sq_topk_order(hp, k, K);
    for (uint32_t j = 0; j < k; j++) {
        items[j] = hp[j].item;
        scores[j] = hp[j].score;
    }
    return k;
}

/* ---- the batched driver ---- */

/* The jobs of record r under o: positions [*a, *b) (top-K: one job at
 * len); 0 when o leaves the record out, -1 when the model cannot score its
 * user (sq_model.knows_user), 1 otherwise. */
static int record_jobs(const sq_model *m, const sq_dataset *ds, const sq_eval_opts *o, int topk,
                       uint64_t r, uint32_t *a, uint32_t *b)
{
    const sq_seq *q = &ds->seq[r];
    *a = *b = 0;
    if (q->view != 0 || !sq_shard_has(q->user, o->shard_i, o->shard_n) ||
        (o->users && (q->user >= o->n_users || !o->users[q->user])))
        return 0;
    if (m->knows_user && !m->knows_user(m, q->user)) /* e.g. caser: no row for it */
        return -1;
    *a = q->len;
    *b = q->len + 1;
    if (!topk) {
        *a = o->target == SQ_EVAL_VALID ? q->n_train : q->n_train + q->n_valid;
        *b = o->target == SQ_EVAL_VALID ? q->n_train + q->n_valid : q->len;
    }
    return 1;
}

/* Whether the target at position p of record r is ranked (ITEM FILTERS). */
static int target_ok(const sq_dataset *ds, const sq_eval_opts *o, uint64_t r, uint32_t p)
{
    return !o->item_ok || o->item_ok[sq_dataset_items(ds, r)[p]];
}

uint32_t sq_eval_record_jobs(const sq_model *m, const sq_dataset *ds, const sq_eval_opts *o,
                             int topk, uint64_t r)
{
    uint32_t a, b, n = 0;
    if (record_jobs(m, ds, o, topk, r, &a, &b) <= 0)
        return 0;
    for (uint32_t p = a; p < b; p++)
        n += topk || target_ok(ds, o, r, p);
    return n;
}

/* Lists the jobs: targets (topk == 0) or users (topk != 0) of ds under o. */
static int list_jobs(const sq_model *m, const sq_dataset *ds, const sq_eval_opts *o, int topk,
                     job **out, uint64_t *n_out, sq_err *e)
{
    uint64_t n = 0, cap = 0;
    job *jobs = NULL;
    for (uint64_t r = 0; r < ds->n_seq; r++) {
        uint32_t a, b;
        int has = record_jobs(m, ds, o, topk, r, &a, &b);
        if (has < 0 && o->unknown_users)
            ++*o->unknown_users;
        if (has <= 0)
            continue;
        for (uint32_t p = a; p < b; p++) {
            if (!topk && !target_ok(ds, o, r, p)) {
                if (o->filtered_targets)
                    ++*o->filtered_targets;
                continue;
            }
            if (n == cap) {
                cap = cap ? cap * 2 : 1024;
                job *j = realloc(jobs, cap * sizeof *j);
                if (!j) {
                    free(jobs);
                    return sq_fail(e, SQ_EX_OSERR, "out of memory for %llu targets",
                                   (unsigned long long)cap);
                }
                jobs = j;
            }
            jobs[n++] = (job){r, p};
        }
    }
    *out = jobs;
    *n_out = n;
    return 0;
}

typedef struct {
    int B, nt;
    uint32_t *items;   /* packed histories */
    size_t cap_items;
    uint32_t *off, *len, *user;
    float *scores;     /* [B x (n_items + 1)] */
    uint32_t *rank, *n_cand; /* ranks: per job; top-K: k per job in rank */
    int *bad;
    uint32_t *top;     /* top-K: [B x K] items */
    float *top_sc;     /* [B x K] scores */
    uint32_t *tgt;     /* ranks: the jobs' targets, and a GPU's counts of them */
    uint32_t *cnt;     /* [B x SQ_RANK_COUNTS] (sq_topk_req, rank.h) */
    /* sampled candidates (uni:N, pop:N with N <= SQ_EVAL_LIST_MAX): each
     * job's drawn before its scores, job b's cand[coff[b] .. coff[b+1]) */
    uint32_t L;        /* the most a job draws: min(N, items) */
    uint32_t *cand, *coff;
    float *zero;       /* [n_items + 1] zeros: the scores the draws are given */
    scratch *s;
} work;

/* The candidates a job may draw at most for them to be listed before the
 * scores (and counted where the scores are, rank.h); beyond, each job's are
 * drawn and compared with its scores in one pass, on the host. */
#define SQ_EVAL_LIST_MAX 4096

static void work_free(work *w)
{
    free(w->items);
    free(w->off);
    free(w->len);
    free(w->user);
    free(w->scores);
    free(w->rank);
    free(w->n_cand);
    free(w->bad);
    free(w->top);
    free(w->top_sc);
    free(w->tgt);
    free(w->cnt);
    free(w->cand);
    free(w->coff);
    free(w->zero);
    scratch_free(w->s, w->nt);
}

static int work_new(work *w, const ctx *c, int topk, sq_err *e)
{
    const sq_eval_opts *o = c->o;
    memset(w, 0, sizeof *w);
    w->B = sq_eval_batch(o, c->n);
    w->nt = o->threads > 0 ? o->threads : omp_get_max_threads();
    size_t B = (size_t)w->B, row = (size_t)c->n + 1;
    size_t n_keys = topk ? c->K : o->cand == SQ_CAND_POP ? c->n : 0;
    w->off = malloc(B * sizeof *w->off);
    w->len = malloc(B * sizeof *w->len);
    w->user = malloc(B * sizeof *w->user);
    w->scores = B <= SIZE_MAX / row / sizeof(float) ? malloc(B * row * sizeof *w->scores) : NULL;
    w->rank = malloc(B * sizeof *w->rank);
    w->n_cand = malloc(B * sizeof *w->n_cand);
    w->bad = malloc(B * sizeof *w->bad);
    if (topk) {
        w->top = malloc(B * c->K * sizeof *w->top);
        w->top_sc = malloc(B * c->K * sizeof *w->top_sc);
    } else {
        w->tgt = malloc(B * sizeof *w->tgt);
        w->cnt = malloc(B * SQ_RANK_COUNTS * sizeof *w->cnt);
    }
    if (!topk && o->cand != SQ_CAND_FULL && o->n_neg <= SQ_EVAL_LIST_MAX) {
        w->L = o->n_neg < c->n ? o->n_neg : c->n;
        w->cand = malloc((B * w->L + 1) * sizeof *w->cand);
        w->coff = malloc((B + 1) * sizeof *w->coff);
        w->zero = calloc(row, sizeof *w->zero);
    }
    w->s = scratch_new(w->nt, c->n, n_keys);
    if (!w->off || !w->len || !w->user || !w->scores || !w->rank || !w->n_cand || !w->bad || !w->s ||
        (topk && (!w->top || !w->top_sc)) || (!topk && (!w->tgt || !w->cnt)) ||
        (w->L && (!w->cand || !w->coff || !w->zero))) {
        work_free(w);
        memset(w, 0, sizeof *w);
        return sq_fail(e, SQ_EX_OSERR, "out of memory for a batch of %d x %u scores "
                       "(try a smaller --batch)", (int)B, c->n);
    }
    return 0;
}

/* Packs the histories of jobs[0, B) into w and has the model score them;
 * with a top-K request, a model on a GPU may select there instead (its
 * done set; model.h). */
static int score_batch(sq_model *m, const ctx *c, work *w, const job *jobs, int B,
                       sq_topk_req *req, sq_err *e)
{
    size_t total = 0;
    for (int b = 0; b < B; b++)
        total += jobs[b].pos - c->ds->seq[jobs[b].rec].hist;
    if (total > UINT32_MAX)
        return sq_fail(e, SQ_EX_SOFTWARE, "batch histories exceed 2^32 items (smaller --batch)");
    if (total > w->cap_items) {
        uint32_t *it = realloc(w->items, (total ? total : 1) * sizeof *it);
        if (!it)
            return sq_fail(e, SQ_EX_OSERR, "out of memory for %zu history items", total);
        w->items = it;
        w->cap_items = total;
    }
    uint32_t at = 0;
    for (int b = 0; b < B; b++) {
        const sq_seq *q = &c->ds->seq[jobs[b].rec];
        uint32_t n = jobs[b].pos - q->hist;
        if (n)
            memcpy(w->items + at, sq_dataset_items(c->ds, jobs[b].rec) + q->hist,
                   (size_t)n * sizeof *w->items);
        w->off[b] = at;
        w->len[b] = n;
        w->user[b] = q->user;
        at += n;
    }
    sq_batch batch = {w->items, w->off, w->len, B, w->user, req};
    if (req)
        req->done = 0;
    if (c->o->expert_count && m->experts && m->experts(m, &batch, c->o->expert_count, e))
        return e->code;
    return m->scores(m, &batch, w->scores, e);
}

/* The ranks of jobs[0, B) (w's tgt) into w's rank, n_cand and bad: from
 * the counts when the model counted them (req done: a GPU's, rank.h), else
 * from the scores, on the host. */
static void rank_batch(const ctx *c, work *w, const job *jb, int B, const sq_topk_req *req)
{
    size_t row = (size_t)c->n + 1;
    if (req && !req->done && w->L) { /* the drawn lists against the scores here */
        sq_ctx cpu = sq_ctx_cpu();
        sq_err e = {0}; /* the CPU's cannot fail */
        sq_rank_lists(&cpu, (int *)w->cnt, w->scores, B, (int)row, (const int *)w->tgt,
                      (const int *)w->cand, (const int *)w->coff, &e);
    }
    if (req && (req->done || w->L)) {
        for (int b = 0; b < B; b++) {
            const uint32_t *k = w->cnt + (size_t)b * SQ_RANK_COUNTS;
            w->bad[b] = k[SQ_RANK_NAN] != 0;
            w->rank[b] = 1 + k[SQ_RANK_ABOVE] + (c->o->optimistic ? 0 : k[SQ_RANK_EQUAL]);
            w->n_cand[b] = 1 + k[SQ_RANK_N];
        }
        return;
    }
#pragma omp parallel for schedule(dynamic, 4) num_threads(w->nt)
    for (int b = 0; b < B; b++) {
        const sq_seq *q = &c->ds->seq[jb[b].rec];
        const uint32_t *it = sq_dataset_items(c->ds, jb[b].rec);
        w->bad[b] = rank_one(c, &w->s[omp_get_thread_num()], w->scores + (size_t)b * row,
                             q->user, jb[b].pos, it + q->hist, jb[b].pos - q->hist, w->tgt[b],
                             &w->rank[b], &w->n_cand[b], NULL);
    }
}

/* Each job's sampled candidates drawn into w's lists (rank_one with zero
 * scores: the draws do not read them), packed: job b's are cand[coff[b] ..
 * coff[b+1]). The same draws as ranking with the scores, which compares
 * each candidate as it is drawn. */
static void draw_lists(const ctx *c, work *w, const job *jb, int B)
{
#pragma omp parallel for schedule(dynamic, 4) num_threads(w->nt)
    for (int b = 0; b < B; b++) {
        const sq_seq *q = &c->ds->seq[jb[b].rec];
        const uint32_t *it = sq_dataset_items(c->ds, jb[b].rec);
        uint32_t rank, n_cand;
        rank_one(c, &w->s[omp_get_thread_num()], w->zero, q->user, jb[b].pos, it + q->hist,
                 jb[b].pos - q->hist, w->tgt[b], &rank, &n_cand, w->cand + (size_t)b * w->L);
        w->coff[b + 1] = n_cand - 1;
    }
    w->coff[0] = 0;
    for (int b = 0; b < B; b++) { /* packed in place: each list moves down, if at all */
        uint32_t n = w->coff[b + 1];
        memmove(w->cand + w->coff[b], w->cand + (size_t)b * w->L, n * sizeof *w->cand);
        w->coff[b + 1] = w->coff[b] + n;
    }
}

/* The cumulative popularity pop:N draws from. */
static int pop_table(ctx *c, sq_err *e)
{
    c->cum = malloc(((size_t)c->n + 1) * sizeof *c->cum);
    if (!c->cum)
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    c->cum[0] = 0;
    for (uint32_t i = 1; i <= c->n; i++) {
        uint64_t p = c->ok[i] ? c->ds->pop[i] : 0; /* a filtered item is never drawn */
        c->cum[i] = c->cum[i - 1] + p;
        c->n_pos += p > 0;
    }
    /* the guide: n buckets of x, each searched over the items its ends
     * draw (about one), not 1..n (the same items: one inverse of cum) */
    uint64_t total = c->cum[c->n];
    c->guide = malloc(((size_t)c->n + 1) * sizeof *c->guide);
    if (!c->guide)
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    c->gw = total / (c->n ? c->n : 1) + 1; /* n gw > total: x / gw < n */
    for (uint32_t j = 0; j <= c->n; j++)
        c->guide[j] = (uint64_t)j * c->gw < total
                          ? pop_search(c->cum, 1, c->n, (uint64_t)j * c->gw)
                          : c->n;
    return 0;
}

static int nan_error(sq_err *e, uint32_t user)
{
    return sq_fail(e, SQ_EX_SOFTWARE, "user %u: the model gave a NaN score (did training diverge?)",
                   user);
}

static int check_model(const sq_model *m, const sq_dataset *ds, sq_err *e)
{
    if (!m->scores)
        return sq_fail(e, SQ_EX_SOFTWARE, "model '%s' cannot score", m->name);
    if (m->n_items != ds->hdr.n_items || !ds->pop)
        return sq_fail(e, SQ_EX_SOFTWARE, "model of %u items, dataset of %u",
                       m->n_items, ds->hdr.n_items);
    return 0;
}

int sq_eval_ranks(sq_model *m, const sq_dataset *ds, const sq_eval_opts *o,
                  sq_rank_fn emit, void *emit_ctx, sq_metrics *acc, sq_err *e)
{
    if (check_model(m, ds, e))
        return e->code;
    ctx c;
    job *jobs = NULL;
    uint64_t n_jobs = 0;
    work w = {0};
    int rc = 0;
    if (ctx_init(&c, ds, o, 0, e) || (o->cand == SQ_CAND_POP && pop_table(&c, e))) {
        ctx_free(&c);
        return e->code;
    }
    if ((rc = list_jobs(m, ds, o, 0, &jobs, &n_jobs, e)) || (rc = work_new(&w, &c, 0, e)))
        goto done;
    /* every item, or the lists drawn first: a model on a GPU may count the
     * ranks there (else the lists are compared with the scores here) */
    sq_topk_req req = {.ok = c.ok, .exclude_history = o->exclude_history, .target = w.tgt,
                       .counts = w.cnt, .cand = w.cand, .coff = w.coff};
    sq_topk_req *rq = (o->cand == SQ_CAND_FULL || w.L) && !o->ranks_host ? &req : NULL;
    for (uint64_t j0 = 0; j0 < n_jobs; j0 += (uint64_t)w.B) {
        int B = n_jobs - j0 < (uint64_t)w.B ? (int)(n_jobs - j0) : w.B;
        const job *jb = jobs + j0;
        if (o->progress)
            o->progress(o->progress_ctx, j0, n_jobs);
        for (int b = 0; b < B; b++)
            w.tgt[b] = sq_dataset_items(ds, jb[b].rec)[jb[b].pos];
        if (rq && w.L)
            draw_lists(&c, &w, jb, B);
        if ((rc = score_batch(m, &c, &w, jb, B, rq, e)))
            goto done;
        rank_batch(&c, &w, jb, B, rq);
        for (int b = 0; b < B; b++) {
            const sq_seq *q = &ds->seq[jb[b].rec];
            if (w.bad[b]) {
                rc = nan_error(e, q->user);
                goto done;
            }
            sq_rank r = {q->user, sq_dataset_items(ds, jb[b].rec)[jb[b].pos], w.rank[b],
                         w.n_cand[b]};
            if ((acc && (rc = sq_metrics_add(acc, r.user, r.rank, r.n_cand, e))) ||
                (emit && (rc = emit(emit_ctx, &r, e))))
                goto done;
        }
    }
    if (o->progress)
        o->progress(o->progress_ctx, n_jobs, n_jobs);
done:
    work_free(&w);
    free(jobs);
    ctx_free(&c);
    return rc;
}

int sq_eval_means(sq_model *m, const sq_dataset *ds, const sq_eval_opts *o, uint32_t k,
                  double *hr, double *ndcg, uint64_t *n_targets, sq_err *e)
{
    sq_metrics acc;
    if (sq_metrics_init(&acc, &k, 1, e))
        return e->code;
    int rc = sq_eval_ranks(m, ds, o, NULL, NULL, &acc, e);
    if (!rc) {
        sq_metrics_at a = sq_metrics_get(&acc, 0);
        *hr = a.hr;
        *ndcg = a.ndcg;
        *n_targets = acc.records;
    }
    sq_metrics_free(&acc);
    return rc;
}

int sq_eval_topk(sq_model *m, const sq_dataset *ds, const sq_eval_opts *o, uint32_t K,
                 sq_topk_fn emit, void *emit_ctx, sq_err *e)
{
    if (check_model(m, ds, e))
        return e->code;
    if (K == 0)
        return sq_fail(e, SQ_EX_USAGE, "top-K needs K >= 1");
    ctx c;
    job *jobs = NULL;
    uint64_t n_jobs = 0;
    work w = {0};
    int rc;
    if (ctx_init(&c, ds, o, K < ds->hdr.n_items ? K : ds->hdr.n_items, e)) {
        ctx_free(&c);
        return e->code;
    }
    if ((rc = list_jobs(m, ds, o, 1, &jobs, &n_jobs, e)) || (rc = work_new(&w, &c, 1, e)))
        goto done;
    /* the request a GPU model may take (its lists land where the host's go) */
    sq_topk_req req = {.K = c.K, .ok = c.ok, .exclude_history = o->exclude_history,
                       .items = w.top, .scores = w.top_sc, .k = w.rank, .nan = w.bad};
    for (uint64_t j0 = 0; j0 < n_jobs; j0 += (uint64_t)w.B) {
        int B = n_jobs - j0 < (uint64_t)w.B ? (int)(n_jobs - j0) : w.B;
        const job *jb = jobs + j0;
        if ((rc = score_batch(m, &c, &w, jb, B, o->topk_host ? NULL : &req, e)))
            goto done;
        size_t row = (size_t)c.n + 1;
        int nb = req.done ? 0 : B; /* selected on the device: nothing left */
#pragma omp parallel for schedule(dynamic, 4) num_threads(w.nt)
        for (int b = 0; b < nb; b++) {
            const sq_seq *q = &ds->seq[jb[b].rec];
            const uint32_t *it = sq_dataset_items(ds, jb[b].rec);
            int64_t k = topk_one(&c, &w.s[omp_get_thread_num()], w.scores + (size_t)b * row,
                                 it + q->hist, q->len - q->hist, w.top + (size_t)b * c.K,
                                 w.top_sc + (size_t)b * c.K);
            w.bad[b] = k < 0;
            w.rank[b] = k < 0 ? 0 : (uint32_t)k;
        }
        for (int b = 0; b < B; b++) {
            uint32_t user = ds->seq[jb[b].rec].user;
            if (w.bad[b]) {
                rc = nan_error(e, user);
                goto done;
            }
            if ((rc = emit(emit_ctx, user, w.rank[b], w.top + (size_t)b * c.K,
                           w.top_sc + (size_t)b * c.K, e)))
                goto done;
        }
    }
done:
    work_free(&w);
    free(jobs);
    ctx_free(&c);
    return rc;
}

int sq_eval_candidates(const sq_dataset *ds, const sq_eval_opts *o, uint64_t rec, uint32_t pos,
                       uint32_t *list, uint32_t *n_list, sq_err *e)
{
    const sq_seq *q = rec < ds->n_seq ? &ds->seq[rec] : NULL;
    if (!q || pos < q->hist || pos >= q->len || !ds->pop)
        return sq_fail(e, SQ_EX_SOFTWARE, "sq_eval_candidates: no target %u in record %llu",
                       pos, (unsigned long long)rec);
    ctx c;
    if (ctx_init(&c, ds, o, 0, e)) {
        ctx_free(&c);
        return e->code;
    }
    float *zero = calloc((size_t)c.n + 1, sizeof *zero);
    scratch *s = scratch_new(1, c.n, o->cand == SQ_CAND_POP ? c.n : 0);
    int rc = 0;
    if (!zero || !s)
        rc = sq_fail(e, SQ_EX_OSERR, "out of memory");
    else if (o->cand != SQ_CAND_POP || !(rc = pop_table(&c, e))) {
        const uint32_t *it = sq_dataset_items(ds, rec);
        uint32_t rank, n_cand;
        rank_one(&c, s, zero, q->user, pos, it + q->hist, pos - q->hist, it[pos], &rank,
                 &n_cand, list);
        *n_list = n_cand - 1;
    }
    free(zero);
    ctx_free(&c);
    scratch_free(s, 1);
    return rc;
}
