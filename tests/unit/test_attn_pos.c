/* Unit tests for lib/ops/attn_pos.c: PARec / FPARec positional attention, the
 * fixed patterns of FPARec's ablation and the token-mixing baseline.
 *
 * Each kind, causal and bidirectional, on odd shapes (C = 5, max_len = 9,
 * segments of every length 1..7, so positions 0 and 1 are never used): the
 * double build against a naive transcription of the formulas of
 * attn_pos.h, every gradient against finite differences, the float build
 * against the double one, rows of the weights summing to 1, no output
 * depending on a future position or another segment, gradients only on
 * parameter entries in use, fpositional = positional at R = R1 R2^T, and
 * bitwise the same results for 1 and 2 threads. SQ_TEST_VERBOSE=1 prints
 * the measured errors. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "attn_pos.h"
#include "gradcheck.h"
#include "ops.h"
#include "rng.h"
#include "unit.h"

#define GRAD_TOL 1e-6 /* finite differences vs backward, double build */
#define F32_TOL 1e-5  /* float build vs double build, normwise */
#define REF_TOL 1e-12 /* double build vs naive formulas, absolute */

#define MAXLEN 9
#define NSEG 7
static const int seg_len[NSEG] = {3, 1, 7, 5, 2, 6, 4}; /* every length 1..7 */

/* One configuration of one kind, inputs and outputs in double. */
typedef struct {
    int kind, causal, B, H, C, ld, max_len, k, T;
    int off[NSEG + 1], pos[64];
    double decay;
    double *v;                /* [T, ld] values (mixing: x) */
    double *p[4];             /* parameters: pa Rw; fpa R1, R2; mixing W1 b1 W2 b2 */
    size_t pn[4];             /* their sizes */
    int np;                   /* number of parameter arrays */
    double *out, *cache, *scratch, *w; /* w = dout, the objective's weights */
    size_t cn, sn;            /* cache and scratch sizes */
} cfg;

static size_t nv(const cfg *c) { return (size_t)c->T * c->ld; }
static size_t no(const cfg *c) { return (size_t)c->T * c->C; }

static void cfg_init(cfg *c, sq_rng *r, int kind, int causal, int C, int H,
                     int ld)
{
    memset(c, 0, sizeof *c);
    c->kind = kind;
    c->causal = causal;
    c->B = NSEG;
    c->H = H;
    c->C = C;
    c->ld = ld;
    c->max_len = MAXLEN;
    c->k = 3;
    c->decay = SQ_EXP_ANNEAL_DECAY;
    c->T = sq_pack_offsets(c->off, seg_len, NSEG);
    sq_pack_positions(c->pos, c->off, NSEG, MAXLEN);
    size_t n = MAXLEN, nn = (size_t)MAXLEN * MAXLEN;
    switch (kind) {
    case SQ_ATTN_POSITIONAL:
        c->np = 1;
        c->pn[0] = (size_t)H * nn;
        c->cn = sq_pa_cache_size(c->off, c->B, H);
        break;
    case SQ_ATTN_FPOSITIONAL:
        c->np = 2;
        c->pn[0] = c->pn[1] = (size_t)H * n * c->k;
        c->cn = sq_pa_cache_size(c->off, c->B, H);
        c->sn = sq_fpa_scratch_size(MAXLEN, H);
        break;
    case SQ_ATTN_MIXING:
        c->np = 4;
        c->pn[0] = c->pn[2] = nn;
        c->pn[1] = c->pn[3] = n;
        c->cn = sq_mixing_cache_size(c->T, C);
        c->sn = sq_mixing_scratch_size(c->T, C);
        break;
    default:
        c->np = 0;
    }
    c->v = gc_normal(r, nv(c), 1);
    for (int i = 0; i < c->np; i++)
        c->p[i] = gc_normal(r, c->pn[i], kind == SQ_ATTN_MIXING ? 0.5 : 1);
    c->out = gc_zeros(no(c));
    c->cache = gc_zeros(c->cn);
    c->scratch = gc_zeros(c->sn);
    c->w = gc_normal(r, no(c), 1);
}

static void cfg_free(cfg *c)
{
    free(c->v);
    for (int i = 0; i < c->np; i++)
        free(c->p[i]);
    free(c->out);
    free(c->cache);
    free(c->scratch);
    free(c->w);
}

static void fwd(cfg *c)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    switch (c->kind) {
    case SQ_ATTN_POSITIONAL:
        sq_pa_forward_f64(cx, c->out, c->cache, c->p[0], c->v, c->ld, c->off,
                          c->pos, c->B, c->H, c->C, c->max_len, c->causal);
        break;
    case SQ_ATTN_FPOSITIONAL:
        sq_fpa_forward_f64(cx, c->out, c->cache, c->scratch, c->p[0], c->p[1],
                           c->k, c->v, c->ld, c->off, c->pos, c->B, c->H,
                           c->C, c->max_len, c->causal);
        break;
    case SQ_ATTN_MIXING:
        sq_mixing_forward_f64(cx, c->out, c->cache, c->v, c->ld, c->p[0], c->p[1],
                              c->p[2], c->p[3], c->off, c->pos, c->B, c->C,
                              c->max_len, c->causal);
        break;
    default:
        sq_fixed_forward_f64(cx, c->out, c->v, c->ld, c->off, c->pos, c->B, c->C,
                             c->max_len, c->kind, c->decay, c->causal);
    }
}

/* Backward of the last forward with dout = w: adds into dv, dp[0..np-1]. */
static void bwd(cfg *c, double *dv, double **dp)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    switch (c->kind) {
    case SQ_ATTN_POSITIONAL:
        sq_pa_backward_f64(cx, dp[0], dv, c->w, c->out, c->v, c->cache, c->ld,
                           c->off, c->pos, c->B, c->H, c->C, c->max_len,
                           c->causal);
        break;
    case SQ_ATTN_FPOSITIONAL:
        sq_fpa_backward_f64(cx, dp[0], dp[1], dv, c->scratch, c->w, c->out, c->v,
                            c->cache, c->p[0], c->p[1], c->k, c->ld, c->off,
                            c->pos, c->B, c->H, c->C, c->max_len, c->causal);
        break;
    case SQ_ATTN_MIXING:
        sq_mixing_backward_f64(cx, dv, dp[0], dp[1], dp[2], dp[3], c->scratch,
                               c->w, c->v, c->cache, c->p[0], c->p[2], c->ld,
                               c->off, c->pos, c->B, c->C, c->max_len,
                               c->causal);
        break;
    default:
        sq_fixed_backward_f64(cx, dv, c->w, c->ld, c->off, c->pos, c->B, c->C,
                              c->max_len, c->kind, c->decay, c->causal);
    }
}

static double obj(void *p)
{
    cfg *c = p;
    fwd(c);
    return gc_dot(c->out, c->w, no(c));
}

/* The float build on the same inputs: out and the gradients. */
static void run_float(const cfg *c, float *out, float *dv, float **dp)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    float *v = gc_to_float(c->v, nv(c)), *w = gc_to_float(c->w, no(c));
    float *p[4] = {0};
    for (int i = 0; i < c->np; i++)
        p[i] = gc_to_float(c->p[i], c->pn[i]);
    float *cache = calloc(c->cn + 1, sizeof *cache);
    float *scratch = calloc(c->sn + 1, sizeof *scratch);
    switch (c->kind) {
    case SQ_ATTN_POSITIONAL:
        sq_pa_forward(cx, out, cache, p[0], v, c->ld, c->off, c->pos, c->B, c->H,
                      c->C, c->max_len, c->causal);
        sq_pa_backward(cx, dp[0], dv, w, out, v, cache, c->ld, c->off, c->pos,
                       c->B, c->H, c->C, c->max_len, c->causal);
        break;
    case SQ_ATTN_FPOSITIONAL:
        sq_fpa_forward(cx, out, cache, scratch, p[0], p[1], c->k, v, c->ld, c->off,
                       c->pos, c->B, c->H, c->C, c->max_len, c->causal);
        sq_fpa_backward(cx, dp[0], dp[1], dv, scratch, w, out, v, cache, p[0],
                        p[1], c->k, c->ld, c->off, c->pos, c->B, c->H, c->C,
                        c->max_len, c->causal);
        break;
    case SQ_ATTN_MIXING:
        sq_mixing_forward(cx, out, cache, v, c->ld, p[0], p[1], p[2], p[3], c->off,
                          c->pos, c->B, c->C, c->max_len, c->causal);
        sq_mixing_backward(cx, dv, dp[0], dp[1], dp[2], dp[3], scratch, w, v,
                           cache, p[0], p[2], c->ld, c->off, c->pos, c->B,
                           c->C, c->max_len, c->causal);
        break;
    default:
        sq_fixed_forward(cx, out, v, c->ld, c->off, c->pos, c->B, c->C,
                         c->max_len, c->kind, (float)c->decay, c->causal);
        sq_fixed_backward(cx, dv, w, c->ld, c->off, c->pos, c->B, c->C,
                          c->max_len, c->kind, (float)c->decay, c->causal);
    }
    free(v); free(w); free(cache); free(scratch);
    for (int i = 0; i < c->np; i++)
        free(p[i]);
}

/* ------------------------------------------------------------------------ */
/* Naive transcriptions of the formulas of attn_pos.h                       */

/* Key position pj allowed for query position pi. */
static int allowed(const cfg *c, int pi, int pj) { return !c->causal || pj <= pi; }

/* The weight matrix row of query row i of segment b over its rows j (wrow
 * [L]), head h: unnormalised, then normalised. Rw is the [H, n, n] matrix
 * for the two positional kinds. */
static void naive_row(const cfg *c, const double *Rw, int b, int h, int i,
                      double *wrow)
{
    int o = c->off[b], L = c->off[b + 1] - o, n = c->max_len;
    int pi = c->pos[o + i];
    double sum = 0, mx = -INFINITY;
    for (int j = 0; j < L; j++) {
        int pj = c->pos[o + j];
        double a = 0;
        if (!allowed(c, pi, pj)) {
            wrow[j] = 0;
            continue;
        }
        switch (c->kind) {
        case SQ_ATTN_POSITIONAL:
        case SQ_ATTN_FPOSITIONAL:
            a = Rw[((size_t)h * n + pi) * n + pj] / sqrt((double)(c->C / c->H));
            mx = fmax(mx, a);
            break;
        case SQ_ATTN_AVERAGE:
            a = 1;
            break;
        case SQ_ATTN_LINEAR_ANNEAL:
            a = c->causal ? pj + 1 : n - abs(pi - pj);
            break;
        case SQ_ATTN_EXP_ANNEAL:
            a = pow(c->decay, abs(pi - pj));
            break;
        }
        wrow[j] = a;
    }
    if (c->kind == SQ_ATTN_POSITIONAL || c->kind == SQ_ATTN_FPOSITIONAL)
        for (int j = 0; j < L; j++)
            wrow[j] = allowed(c, pi, c->pos[o + j]) ? exp(wrow[j] - mx) : 0;
    for (int j = 0; j < L; j++)
        sum += wrow[j];
    for (int j = 0; j < L; j++)
        wrow[j] /= sum;
}

/* R1 R2^T per head. */
static double *naive_rw(const cfg *c)
{
    int n = c->max_len, k = c->k;
    double *Rw = gc_zeros((size_t)c->H * n * n);
    for (int h = 0; h < c->H; h++)
        for (int a = 0; a < n; a++)
            for (int b = 0; b < n; b++) {
                double s = 0;
                for (int l = 0; l < k; l++)
                    s += c->p[0][((size_t)h * n + a) * k + l] *
                         c->p[1][((size_t)h * n + b) * k + l];
                Rw[((size_t)h * n + a) * n + b] = s;
            }
    return Rw;
}

static double naive_gelu(double x) { return 0.5 * x * (1 + erf(x / sqrt(2.0))); }

/* The output by the formulas; returns max |ref - out|. */
static double naive_err(const cfg *c)
{
    double *ref = gc_zeros(no(c)), wrow[16];
    double *Rw = c->kind == SQ_ATTN_FPOSITIONAL ? naive_rw(c) : c->p[0];
    int n = c->max_len, hs = c->C / c->H;
    for (int b = 0; b < c->B; b++) {
        int o = c->off[b], L = c->off[b + 1] - o;
        if (c->kind == SQ_ATTN_MIXING) {
            const double *W1 = c->p[0], *b1 = c->p[1], *W2 = c->p[2], *b2 = c->p[3];
            for (int ch = 0; ch < c->C; ch++)
                for (int i = 0; i < L; i++) {
                    int pi = c->pos[o + i];
                    double s = b2[pi];
                    for (int t = 0; t < L; t++) {
                        int pt = c->pos[o + t];
                        if (!allowed(c, pi, pt))
                            continue;
                        double u = b1[pt];
                        for (int j = 0; j < L; j++) {
                            int pj = c->pos[o + j];
                            if (allowed(c, pt, pj))
                                u += W1[pt * n + pj] * c->v[(size_t)(o + j) * c->ld + ch];
                        }
                        s += W2[pi * n + pt] * naive_gelu(u);
                    }
                    ref[(size_t)(o + i) * c->C + ch] = s;
                }
            continue;
        }
        int H = c->kind <= SQ_ATTN_FPOSITIONAL ? c->H : 1;
        int width = c->kind <= SQ_ATTN_FPOSITIONAL ? hs : c->C;
        for (int h = 0; h < H; h++)
            for (int i = 0; i < L; i++) {
                naive_row(c, Rw, b, h, i, wrow);
                for (int d = 0; d < width; d++) {
                    double s = 0;
                    for (int j = 0; j < L; j++)
                        s += wrow[j] * c->v[(size_t)(o + j) * c->ld + h * width + d];
                    ref[(size_t)(o + i) * c->C + h * width + d] = s;
                }
            }
    }
    double err = 0;
    for (size_t i = 0; i < no(c); i++)
        err = fmax(err, fabs(ref[i] - c->out[i]));
    if (Rw != c->p[0])
        free(Rw);
    free(ref);
    return err;
}

/* ------------------------------------------------------------------------ */
/* The checks shared by every kind                                          */

typedef struct {
    double grad[2], f32, ref;
} worst;

#define UPD(w, e) do { double e_ = (e); if (!(e_ <= (w))) (w) = e_; } while (0)

/* Forward vs naive, every gradient vs finite differences, float vs double,
 * and no gradient on unused parameter entries. */
static void check_kind(unit_ctx *t, cfg *c, worst *wst)
{
    obj(c);
    double ref = naive_err(c);
    CHECK(ref < REF_TOL);
    UPD(wst->ref, ref);

    double *dv = gc_zeros(nv(c)), *dp[4] = {0};
    for (int i = 0; i < c->np; i++)
        dp[i] = gc_zeros(c->pn[i]);
    bwd(c, dv, dp);
    double e = gc_check(obj, c, c->v, dv, nv(c));
    CHECK(e < GRAD_TOL);
    UPD(wst->grad[c->causal], e);
    for (int i = 0; i < c->np; i++) {
        e = gc_check(obj, c, c->p[i], dp[i], c->pn[i]);
        CHECK(e < GRAD_TOL);
        UPD(wst->grad[c->causal], e);
    }
    obj(c); /* caches at the unperturbed inputs again */

    /* Rows 0 and 1 (positions no segment reaches) and, causal, entries
     * above the diagonal of the square parameters get exactly nothing. */
    int n = c->max_len, unused_ok = 1;
    if (c->kind == SQ_ATTN_POSITIONAL || c->kind == SQ_ATTN_MIXING) {
        for (int pi = 0; pi < c->np; pi++) {
            if (c->pn[pi] == (size_t)n) { /* biases */
                unused_ok &= dp[pi][0] == 0 && dp[pi][1] == 0;
                continue;
            }
            for (size_t h = 0; h < c->pn[pi] / ((size_t)n * n); h++)
                for (int a = 0; a < n; a++)
                    for (int b = 0; b < n; b++) {
                        double g = dp[pi][(h * n + a) * n + b];
                        if ((a < 2 || b < 2 || (c->causal && b > a)) && g != 0)
                            unused_ok = 0;
                    }
        }
    }
    if (c->kind == SQ_ATTN_FPOSITIONAL) /* factor rows 0, 1 */
        for (int pi = 0; pi < 2; pi++)
            for (int h = 0; h < c->H; h++)
                for (int l = 0; l < 2 * c->k; l++)
                    unused_ok &= dp[pi][(size_t)h * n * c->k + l] == 0;
    CHECK(unused_ok);

    /* float build */
    float *fo = calloc(no(c), sizeof *fo), *fdv = calloc(nv(c), sizeof *fdv);
    float *fdp[4] = {0};
    for (int i = 0; i < c->np; i++)
        fdp[i] = calloc(c->pn[i], sizeof *fdp[i]);
    run_float(c, fo, fdv, fdp);
    e = gc_rel_diff(fo, c->out, no(c));
    CHECK(e < F32_TOL);
    UPD(wst->f32, e);
    e = gc_rel_diff(fdv, dv, nv(c));
    CHECK(e < F32_TOL);
    UPD(wst->f32, e);
    for (int i = 0; i < c->np; i++) {
        e = gc_rel_diff(fdp[i], dp[i], c->pn[i]);
        CHECK(e < F32_TOL);
        UPD(wst->f32, e);
        free(fdp[i]);
        free(dp[i]);
    }
    free(fo); free(fdv); free(dv);
}

/* Perturbing the input row j of the length-7 segment changes no output row
 * of another segment and, causal, no earlier row of its own segment; and
 * (bidirectional) it does change the first row. */
static void check_isolation(unit_ctx *t, cfg *c)
{
    fwd(c);
    size_t n = no(c);
    double *before = gc_zeros(n);
    memcpy(before, c->out, n * sizeof *before);
    int b7 = 2, o = c->off[b7], j = 4;
    double save = c->v[(size_t)(o + j) * c->ld + 1];
    c->v[(size_t)(o + j) * c->ld + 1] += 0.5;
    fwd(c);
    int ok = 1;
    for (int row = 0; row < c->T; row++) {
        int same_seg = row >= o && row < c->off[b7 + 1];
        int must_equal = !same_seg || (c->causal && row < o + j);
        if (must_equal && memcmp(before + (size_t)row * c->C,
                                 c->out + (size_t)row * c->C,
                                 (size_t)c->C * sizeof *before) != 0)
            ok = 0;
    }
    CHECK(ok);
    if (!c->causal) { /* bidirectional: the first row sees the change */
        int changed = 0;
        for (int d = 0; d < c->C; d++)
            changed |= before[(size_t)o * c->C + d] != c->out[(size_t)o * c->C + d];
        CHECK(changed);
    }
    c->v[(size_t)(o + j) * c->ld + 1] = save;
    fwd(c);
    free(before);
}

static void note(unit_ctx *t, const worst *w)
{
    gc_note(t->name, "grad (bidir)", w->grad[0]);
    gc_note(t->name, "grad (causal)", w->grad[1]);
    gc_note(t->name, "vs naive formulas (abs)", w->ref);
    gc_note(t->name, "float vs double", w->f32);
}

/* ------------------------------------------------------------------------ */

UNIT_TEST(test_attn_pos_sizes)
{
    int off[4] = {0, 3, 4, 8};
    CHECK_EQ(sq_pa_cache_size(off, 3, 2), 2 * (9 + 1 + 16));
    CHECK_EQ(sq_fpa_scratch_size(9, 2), 162);
    CHECK_EQ(sq_mixing_cache_size(8, 5), 80);
    CHECK_EQ(sq_mixing_scratch_size(8, 5), 40);
}

UNIT_TEST(test_attn_pos_positional)
{
    sq_rng r;
    sq_rng_seed(&r, 101, 0);
    worst w = {{0, 0}, 0, 0};
    /* (C, H, ld): the paper's one head, then two heads on strided rows */
    const int shapes[2][3] = {{5, 1, 5}, {6, 2, 8}};
    for (int causal = 0; causal < 2; causal++)
        for (int s = 0; s < 2; s++) {
            cfg c;
            cfg_init(&c, &r, SQ_ATTN_POSITIONAL, causal, shapes[s][0],
                     shapes[s][1], shapes[s][2]);
            check_kind(t, &c, &w);
            check_isolation(t, &c);
            /* probability rows sum to 1, 0 above the diagonal when causal;
             * a length-1 segment copies its value */
            fwd(&c);
            int ok = 1;
            size_t base = 0;
            for (int b = 0; b < c.B; b++) {
                int L = seg_len[b];
                for (int h = 0; h < c.H; h++, base += (size_t)L * L)
                    for (int i = 0; i < L; i++) {
                        double sum = 0;
                        for (int j = 0; j < L; j++) {
                            double p = c.cache[base + (size_t)i * L + j];
                            sum += p;
                            if ((causal && j > i && p != 0) || p < 0)
                                ok = 0;
                        }
                        ok &= fabs(sum - 1) < 1e-12;
                    }
            }
            CHECK(ok);
            CHECK_EQ(base, c.cn);
            int o1 = c.off[1]; /* the length-1 segment */
            for (int d = 0; d < c.C; d++)
                CHECK_NEAR(c.out[(size_t)o1 * c.C + d], c.v[(size_t)o1 * c.ld + d], 1e-15);
            cfg_free(&c);
        }
    note(t, &w);
}

UNIT_TEST(test_attn_pos_fpositional)
{
    sq_rng r;
    sq_rng_seed(&r, 102, 0);
    worst w = {{0, 0}, 0, 0};
    double eq = 0;
    const int shapes[2][3] = {{5, 1, 5}, {6, 2, 8}};
    for (int causal = 0; causal < 2; causal++)
        for (int s = 0; s < 2; s++) {
            cfg c;
            cfg_init(&c, &r, SQ_ATTN_FPOSITIONAL, causal, shapes[s][0],
                     shapes[s][1], shapes[s][2]);
            check_kind(t, &c, &w);
            check_isolation(t, &c);
            /* = positional at Rw = R1 R2^T: outputs, probabilities, dv, and
             * dR1 = dRw R2, dR2 = dRw^T R1 from positional's dRw */
            cfg p;
            cfg_init(&p, &r, SQ_ATTN_POSITIONAL, causal, c.C, c.H, c.ld);
            memcpy(p.v, c.v, nv(&c) * sizeof *p.v);
            memcpy(p.w, c.w, no(&c) * sizeof *p.w);
            double *Rw = naive_rw(&c);
            memcpy(p.p[0], Rw, p.pn[0] * sizeof *Rw);
            fwd(&c);
            fwd(&p);
            for (size_t i = 0; i < no(&c); i++)
                eq = fmax(eq, fabs(c.out[i] - p.out[i]));
            for (size_t i = 0; i < c.cn; i++)
                eq = fmax(eq, fabs(c.cache[i] - p.cache[i]));
            double *dvc = gc_zeros(nv(&c)), *dvp = gc_zeros(nv(&c));
            double *d1 = gc_zeros(c.pn[0]), *d2 = gc_zeros(c.pn[1]);
            double *dR = gc_zeros(p.pn[0]);
            double *dpc[4] = {d1, d2}, *dpp[4] = {dR};
            bwd(&c, dvc, dpc);
            bwd(&p, dvp, dpp);
            for (size_t i = 0; i < nv(&c); i++)
                eq = fmax(eq, fabs(dvc[i] - dvp[i]));
            int n = c.max_len, k = c.k;
            for (int h = 0; h < c.H; h++)
                for (int a = 0; a < n; a++)
                    for (int l = 0; l < k; l++) {
                        double g1 = 0, g2 = 0;
                        for (int b = 0; b < n; b++) {
                            g1 += dR[((size_t)h * n + a) * n + b] * c.p[1][((size_t)h * n + b) * k + l];
                            g2 += dR[((size_t)h * n + b) * n + a] * c.p[0][((size_t)h * n + b) * k + l];
                        }
                        eq = fmax(eq, fabs(g1 - d1[((size_t)h * n + a) * k + l]));
                        eq = fmax(eq, fabs(g2 - d2[((size_t)h * n + a) * k + l]));
                    }
            free(dvc); free(dvp); free(d1); free(d2); free(dR); free(Rw);
            cfg_free(&p);
            cfg_free(&c);
        }
    CHECK(eq < 1e-12);
    note(t, &w);
    gc_note(t->name, "vs positional at R1 R2^T", eq);
}

UNIT_TEST(test_attn_pos_fixed)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    sq_rng r;
    sq_rng_seed(&r, 103, 0);
    worst w = {{0, 0}, 0, 0};
    for (int kind = SQ_ATTN_AVERAGE; kind <= SQ_ATTN_EXP_ANNEAL; kind++)
        for (int causal = 0; causal < 2; causal++)
            for (int s = 0; s < 2; s++) {
                cfg c;
                cfg_init(&c, &r, kind, causal, 5, 1, s ? 7 : 5);
                if (s)
                    c.decay = 0.7;
                check_kind(t, &c, &w);
                check_isolation(t, &c);
                /* v = 1 everywhere: out = row sums of the weights = 1 */
                for (size_t i = 0; i < nv(&c); i++)
                    c.v[i] = 1;
                fwd(&c);
                double dev = 0;
                for (size_t i = 0; i < no(&c); i++)
                    dev = fmax(dev, fabs(c.out[i] - 1));
                CHECK(dev < 1e-14);
                cfg_free(&c);
            }
    /* The paper's causal weights on a full window (n = 4, row i = 4):
     * linear 1:2:3:4 / 10, exponential e^{j-4} normalised. */
    int len[1] = {4}, off[2], pos[4];
    sq_pack_offsets(off, len, 1);
    sq_pack_positions(pos, off, 1, 4);
    double v[16] = {0}, full[16];
    for (int j = 0; j < 4; j++)
        v[j * 4 + j] = 1; /* one-hot rows: out_i = row i of the weights */
    sq_fixed_forward_f64(cx, full, v, 4, off, pos, 1, 4, 4, SQ_ATTN_LINEAR_ANNEAL,
                         0, 1);
    for (int j = 0; j < 4; j++)
        CHECK_NEAR(full[3 * 4 + j], (j + 1) / 10.0, 1e-15);
    /* row 1 (position 1): weights 1:2 / 3 */
    CHECK_NEAR(full[1 * 4 + 0], 1 / 3.0, 1e-15);
    CHECK_NEAR(full[1 * 4 + 1], 2 / 3.0, 1e-15);
    sq_fixed_forward_f64(cx, full, v, 4, off, pos, 1, 4, 4, SQ_ATTN_EXP_ANNEAL,
                         SQ_EXP_ANNEAL_DECAY, 1);
    double z = 1 + exp(-1) + exp(-2) + exp(-3);
    for (int j = 0; j < 4; j++)
        CHECK_NEAR(full[3 * 4 + j], exp(j - 3) / z, 1e-15);
    sq_fixed_forward_f64(cx, full, v, 4, off, pos, 1, 4, 4, SQ_ATTN_AVERAGE, 0, 0);
    for (int j = 0; j < 4; j++)
        CHECK_NEAR(full[0 * 4 + j], 0.25, 1e-15);
    note(t, &w);
}

UNIT_TEST(test_attn_pos_mixing)
{
    sq_rng r;
    sq_rng_seed(&r, 104, 0);
    worst w = {{0, 0}, 0, 0};
    for (int causal = 0; causal < 2; causal++)
        for (int s = 0; s < 2; s++) {
            cfg c;
            cfg_init(&c, &r, SQ_ATTN_MIXING, causal, 5, 1, s ? 9 : 5);
            check_kind(t, &c, &w);
            check_isolation(t, &c);
            cfg_free(&c);
        }
    note(t, &w);
}

/* Bitwise the same results for 1 and 2 threads, float build, on a batch
 * long enough for the parallel loops to split. */
UNIT_TEST(test_attn_pos_threads)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
#ifndef _OPENMP
    SKIP("built without OpenMP");
#else
    enum { B = 12, N = 40, C = 16, H = 2, K = 8 };
    sq_rng r;
    sq_rng_seed(&r, 105, 0);
    int len[B], off[B + 1], pos[B * N];
    for (int b = 0; b < B; b++)
        len[b] = 1 + (int)sq_rng_below(&r, N);
    len[3] = N;
    int T = sq_pack_offsets(off, len, B);
    sq_pack_positions(pos, off, B, N);
    size_t n = (size_t)T * C, an = sq_pa_cache_size(off, B, H);
    size_t nn = (size_t)N * N, sn = sq_fpa_scratch_size(N, H);
    float *x = calloc(n, sizeof *x), *dout = calloc(n, sizeof *dout);
    float *Rw = calloc(H * nn, sizeof *Rw), *R1 = calloc((size_t)H * N * K, sizeof *R1);
    float *R2 = calloc((size_t)H * N * K, sizeof *R2);
    float *W1 = calloc(nn, sizeof *W1), *W2 = calloc(nn, sizeof *W2);
    float *b1 = calloc(N, sizeof *b1), *b2 = calloc(N, sizeof *b2);
    for (size_t i = 0; i < n; i++) {
        x[i] = (float)sq_rng_normal(&r);
        dout[i] = (float)sq_rng_normal(&r);
    }
    for (size_t i = 0; i < H * nn; i++)
        Rw[i] = (float)sq_rng_normal(&r);
    for (size_t i = 0; i < (size_t)H * N * K; i++) {
        R1[i] = (float)(0.3 * sq_rng_normal(&r));
        R2[i] = (float)(0.3 * sq_rng_normal(&r));
    }
    for (size_t i = 0; i < nn; i++) {
        W1[i] = (float)(0.2 * sq_rng_normal(&r));
        W2[i] = (float)(0.2 * sq_rng_normal(&r));
    }
    for (int i = 0; i < N; i++) {
        b1[i] = (float)(0.1 * sq_rng_normal(&r));
        b2[i] = (float)(0.1 * sq_rng_normal(&r));
    }
    /* every result of every kind, both masks, concatenated */
    size_t per = 2 * n + H * nn + 2 * (size_t)H * N * K + 2 * nn + 2 * N;
    size_t total = 2 * 4 * per;
    float *res[2];
    int nt = omp_get_max_threads();
    for (int run = 0; run < 2; run++) {
        omp_set_num_threads(run ? 2 : 1);
        float *o = res[run] = calloc(total, sizeof *o);
        float *att = calloc(an, sizeof *att), *scr = calloc(sn, sizeof *scr);
        float *cache = calloc(2 * n, sizeof *cache), *mscr = calloc(n, sizeof *mscr);
        for (int causal = 0; causal < 2; causal++) {
            float *out = o, *dv = o + n;
            sq_pa_forward(cx, out, att, Rw, x, C, off, pos, B, H, C, N, causal);
            sq_pa_backward(cx, o + 2 * n, dv, dout, out, x, att, C, off, pos, B, H,
                           C, N, causal);
            o += per;
            out = o;
            dv = o + n;
            sq_fpa_forward(cx, out, att, scr, R1, R2, K, x, C, off, pos, B, H, C,
                           N, causal);
            sq_fpa_backward(cx, o + 2 * n, o + 2 * n + (size_t)H * N * K, dv, scr,
                            dout, out, x, att, R1, R2, K, C, off, pos, B, H, C,
                            N, causal);
            o += per;
            sq_fixed_forward(cx, o, x, C, off, pos, B, C, N, SQ_ATTN_EXP_ANNEAL,
                             0.8f, causal);
            sq_fixed_backward(cx, o + n, dout, C, off, pos, B, C, N,
                              SQ_ATTN_EXP_ANNEAL, 0.8f, causal);
            o += per;
            float *g = o + 2 * n;
            sq_mixing_forward(cx, o, cache, x, C, W1, b1, W2, b2, off, pos, B, C,
                              N, causal);
            sq_mixing_backward(cx, o + n, g, g + nn, g + nn + N, g + 2 * nn + N,
                               mscr, dout, x, cache, W1, W2, C, off, pos, B, C,
                               N, causal);
            o += per;
        }
        free(att); free(scr); free(cache); free(mscr);
    }
    omp_set_num_threads(nt);
    CHECK(memcmp(res[0], res[1], total * sizeof *res[0]) == 0);
    int finite = 1;
    for (size_t i = 0; i < total; i++)
        finite &= isfinite(res[0][i]);
    CHECK(finite);
    free(res[0]); free(res[1]);
    free(x); free(dout); free(Rw); free(R1); free(R2);
    free(W1); free(W2); free(b1); free(b2);
#endif
}
