/* pkm.c - product-key memory retrieval (formulas, buffers: pkm.h).
 *
 * Written over `real` and compiled twice: as float, and as double into
 * pkm_f64.o (see real.h). The forward keeps, per query, two sorted lists of
 * the k best sub-keys (insertion into a list of k: the n scores of a half
 * are never stored) and then a sorted list of the k best of the k*k sums,
 * written straight into the caller's sc and idx rows. Scores are sq_dot
 * sums in `real`, per (query, sub-key), in a fixed order; the sum of two
 * sub-scores is formed once and compared as is, so that the selection is
 * exactly the top-k of those sums under the tie-break of pkm.h. */
#ifndef SQ_REAL
#define SQ_REAL float
#endif

#include "pkm.h"
#include "real.h"
#include "ongpu.h"
#include "vec.h"

#include <string.h>

/* Below this many multiply-adds an op does not fork. */
#define PAR_MIN_WORK 16384
/* Columns of d per scatter tile of the backward. */
#define TILE 32

static int n_groups(int B)
{
    return B < SQ_PKM_GROUPS ? B : SQ_PKM_GROUPS;
}

/* Reals of one forward slot: the two sub-key lists (scores, indices). */
static size_t slot_size(int k)
{
    return 4 * (size_t)k;
}

static int par_worth(int B, int a, int b)
{
    return (double)B * a * b >= PAR_MIN_WORK;
}

#if !SQ_REAL_IS_F64
size_t sq_pkm_cache_size(int B, int k)
{
    return 2 * (size_t)B * (size_t)k;
}

size_t sq_pkm_scratch_size(int B, int n, int k)
{
    (void)n; /* the n sub-key scores of a half are never stored */
    size_t fwd = (size_t)n_groups(B) * slot_size(k);
    size_t bwd = (size_t)B * (size_t)k;
    return fwd > bwd ? fwd : bwd;
}

void sq_pkm_count(const int *idx, int B, int k, uint64_t *count)
{
    size_t N = (size_t)B * (size_t)k;
    for (size_t i = 0; i < N; i++)
        count[idx[i]]++;
}
#endif

/* The order of pkm.h: higher score first, then the smaller index. */
static inline int better(real sa, int ia, real sb, int ib)
{
    return sa > sb || (sa == sb && ia < ib);
}

/* Inserts sub-key (s, i) into the sorted list vs/is of *cnt <= k entries
 * (best first) when it is among the k best so far; the indices are kept as
 * reals (exact: i < n < 2^24). A list that is not full takes any entry, so
 * k entries always come out of n >= k offers. */
static void sub_insert(real *vs, real *is, int *cnt, int k, real s, int i)
{
    int c = *cnt;
    if (c == k && !better(s, i, vs[k - 1], (int)is[k - 1]))
        return;
    int p = c < k ? c : k - 1;
    for (; p > 0 && better(s, i, vs[p - 1], (int)is[p - 1]); p--) {
        vs[p] = vs[p - 1];
        is[p] = is[p - 1];
    }
    vs[p] = s;
    is[p] = (real)i;
    if (c < k)
        *cnt = c + 1;
}

/* The same for experts, into the caller's sc (scores) and ix (ints). */
static void expert_insert(real *sc, int *ix, int *cnt, int k, real s, int e)
{
    int c = *cnt;
    if (c == k && !better(s, e, sc[k - 1], ix[k - 1]))
        return;
    int p = c < k ? c : k - 1;
    for (; p > 0 && better(s, e, sc[p - 1], ix[p - 1]); p--) {
        sc[p] = sc[p - 1];
        ix[p] = ix[p - 1];
    }
    sc[p] = s;
    ix[p] = e;
    if (c < k)
        *cnt = c + 1;
}

/* The selection of one query qb [d] into sc [k], ix [k] (pkm.h), with the
 * slot's 4k reals for the two sub-key lists. */
static void select_query(real *sc, int *ix, real *slot, const real *qb,
                         const real *C1, const real *C2, int n, int h, int k)
{
    real *v1 = slot, *i1 = v1 + k, *v2 = i1 + k, *i2 = v2 + k;
    int c1 = 0, c2 = 0, c = 0;
    for (int i = 0; i < n; i++)
        sub_insert(v1, i1, &c1, k, sq_dot(qb, C1 + (size_t)i * h, h), i);
    for (int j = 0; j < n; j++)
        sub_insert(v2, i2, &c2, k, sq_dot(qb + h, C2 + (size_t)j * h, h), j);
    /* v1 and v2 descend, and rounding is monotone: once a sum is strictly
     * below the k-th of a full list, so is every later sum of that row
     * (b grows), and of every later row when it happens at b = 0. */
    for (int a = 0; a < k; a++) {
        int b = 0;
        for (; b < k; b++) {
            real s = v1[a] + v2[b];
            if (c == k && s < sc[k - 1])
                break;
            expert_insert(sc, ix, &c, k, s, (int)i1[a] * n + (int)i2[b]);
        }
        if (b == 0)
            break;
    }
}

/* Fills one query's weights wb = softmax(scb) and its k output rows. */
static void emit_query(real *outb, real *wb, const real *scb, const int *ix,
                       const real *E, int d, int k, int weighted)
{
    memcpy(wb, scb, (size_t)k * sizeof *wb);
    sq_softmax_row(wb, k, k);
    for (int m = 0; m < k; m++) {
        const real *e = E + (size_t)ix[m] * d;
        real *o = outb + (size_t)m * d;
        if (weighted)
            for (int c = 0; c < d; c++)
                o[c] = wb[m] * e[c];
        else
            memcpy(o, e, (size_t)d * sizeof *o);
    }
}

void R(sq_pkm_forward)(const sq_ctx *cx, real *out, int *idx, real *cache,
                       real *scratch, const real *q, const real *C1,
                       const real *C2, const real *E, int B, int n, int d,
                       int k, int weighted)
{
    SQ_ON_GPU(cx, pkm_forward, (out, idx, cache, scratch, q, C1, C2, E, B, n, d, k, weighted));
    int h = d / 2, G = n_groups(B);
    real *sc = cache, *w = cache + (size_t)B * k;
    SQ_PAR_LOOP(static, par_worth(B, n, d), int, g, G, 1, {
        real *slot = scratch + (size_t)g * slot_size(k);
        for (int b = g; b < B; b += G) {
            size_t r = (size_t)b * k;
            select_query(sc + r, idx + r, slot, q + (size_t)b * d, C1, C2, n,
                         h, k);
            emit_query(out + r * d, w + r, sc + r, idx + r, E, d, k,
                       weighted);
        }
    });
}

/* Weighted backward of one query: gb[m] = d sc_m (pkm.h's g), and dqb. */
static void query_grad(real *dqb, real *gb, const real *doutb,
                       const real *C1, const real *C2, const real *E,
                       const int *ix, const real *wb, int n, int d, int k)
{
    int h = d / 2;
    real mean = 0;
    for (int m = 0; m < k; m++) {
        gb[m] = sq_dot(doutb + (size_t)m * d, E + (size_t)ix[m] * d, d);
        mean += wb[m] * gb[m];
    }
    for (int m = 0; m < k; m++) {
        gb[m] = wb[m] * (gb[m] - mean);
        int i = ix[m] / n, j = ix[m] % n;
        sq_axpy(dqb, gb[m], C1 + (size_t)i * h, h);
        sq_axpy(dqb + h, gb[m], C2 + (size_t)j * h, h);
    }
}

/* Columns [c0, c0 + nc) of the scatters: dE for every (b, m), and, with g
 * (weighted), the matching columns of dC1 (c < h) and dC2 (c >= h); the
 * queries in order, so every element sums in the same order. */
static void scatter_tile(real *dC1, real *dC2, real *dE, const real *g,
                         const real *dout, const real *q, const int *idx,
                         const real *w, int B, int n, int d, int k, int c0,
                         int nc)
{
    int h = d / 2;
    int a0 = c0 < h ? c0 : h, a1 = c0 + nc < h ? c0 + nc : h; /* dC1 part */
    int b0 = c0 > h ? c0 : h, b1 = c0 + nc;                  /* dC2 part */
    for (int b = 0; b < B; b++) {
        const real *qb = q + (size_t)b * d;
        for (int m = 0; m < k; m++) {
            size_t r = (size_t)b * k + m;
            int e = idx[r];
            sq_axpy(dE + (size_t)e * d + c0, w ? w[r] : (real)1,
                    dout + r * d + c0, nc);
            if (!g)
                continue;
            int i = e / n, j = e % n;
            if (a1 > a0)
                sq_axpy(dC1 + (size_t)i * h + a0, g[r], qb + a0, a1 - a0);
            if (b1 > b0)
                sq_axpy(dC2 + (size_t)j * h + (b0 - h), g[r], qb + b0,
                        b1 - b0);
        }
    }
}

void R(sq_pkm_backward)(const sq_ctx *cx, real *dq, real *dC1, real *dC2,
                        real *dE, real *scratch, const real *dout,
                        const real *q, const real *C1, const real *C2,
                        const real *E, const int *idx, const real *cache,
                        int B, int n, int d, int k, int weighted)
{
    SQ_ON_GPU(cx, pkm_backward,
              (dq, dC1, dC2, dE, scratch, dout, q, C1, C2, E, idx, cache, B, n, d, k, weighted));
    const real *w = cache + (size_t)B * k;
    real *g = weighted ? scratch : NULL;
    if (weighted) {
        SQ_PAR_LOOP(static, par_worth(B, k, d), int, b, B, 1, {
            size_t r = (size_t)b * k;
            query_grad(dq + (size_t)b * d, g + r, dout + r * d, C1, C2, E,
                       idx + r, w + r, n, d, k);
        });
    }
    int tiles = (d + TILE - 1) / TILE;
    SQ_PAR_LOOP(static, par_worth(B, k, d), int, t, tiles, 1, {
        int c0 = t * TILE, nc = d - c0 < TILE ? d - c0 : TILE;
        scatter_tile(dC1, dC2, dE, g, dout, q, idx, weighted ? w : NULL, B,
                     n, d, k, c0, nc);
    });
}
