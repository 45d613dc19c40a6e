/* Unit tests for lib/ops/attn_cross.c (softmax cross-attention on packed
 * segments: queries of one packed set, keys/values of another).
 *
 * On odd shapes (C = 6 with H = 2 or 3, C = 5 with H = 1) and packed batches
 * of query segments of 1..4 rows against key segments of 1..7 (ELASTIC's k
 * interest tokens over a sequence) and the reverse, with a segment that has
 * no keys and one that has no queries (in some batches one with neither),
 * q rows of stride ldq = C, C + 3 or 2C and k, v separate (ldk = C) or
 * columns of one fused buffer (ldk = 2C; ldk = 3C with k before v or after):
 *   - the double build equals an explicit long double reference
 *     (tests/ref: outputs and the probability cache, laid out as
 *     attn_cross.h says) to 1e-12,
 *     the float build to 1e-5 (normwise relative);
 *   - dq, dk, dv of the double build match fourth-order central finite
 *     differences (gradcheck.h) to 1e-6 over the whole q and kv buffers;
 *     backward adds into gradients that start non-zero and leaves every
 *     element it has no gradient for (other columns, rows of segments
 *     without keys or without queries) bitwise unchanged;
 *   - the float build agrees with the double one (output and gradients).
 * Then: with offq == offk and the same rows for queries and keys the op
 * equals sq_attention_forward/backward (causal = 0), also with dq == dk;
 * logits of size ~100 (exp overflows float at 88.7) stay finite; results
 * are bitwise the same for 1 and 2 threads; the cache size. Set
 * SQ_TEST_VERBOSE=1 to print the measured errors. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attn_cross.h"
#include "gradcheck.h"
#include "ops.h"
#include "ref_ops.h"
#include "rng.h"
#include "segs.h"
#include "unit.h"

#define GRAD_TOL 1e-6 /* finite differences vs backward, double build */
#define REF_TOL_F64 1e-12
#define REF_TOL_F32 1e-5
#define F32_TOL 1e-5  /* float build vs double build, normwise */
#define MAXB 8

#define UPD(w, e) do { double e_ = (e); if (!(e_ <= (w))) (w) = e_; } while (0)
#define CHECK_WORST(err, tol, worst) do { \
    double e2_ = (err); \
    CHECK(e2_ < (tol)); \
    UPD(worst, e2_); \
    } while (0)

static int rand_int(sq_rng *r, int lo, int hi) /* inclusive */
{
    return lo + (int)sq_rng_below(r, (uint64_t)(hi - lo + 1));
}

/* ------------------------------------------------------------------------ */
/* Two packed layouts over the same B segments.                             */

typedef struct {
    int B, Tq, Tk;
    int nq[MAXB], nk[MAXB], offq[MAXB + 1], offk[MAXB + 1];
} xsegs;

/* B in 3..6 segments, nq_b in 1..maxq, nk_b in 1..maxk; then empty = 1:
 * one segment without keys and another without queries; empty = 2: the
 * first segment without keys, the last without queries and a middle one
 * without either. */
static void xsegs_random(sq_rng *r, xsegs *s, int maxq, int maxk, int empty)
{
    s->B = rand_int(r, 3, 6);
    for (int b = 0; b < s->B; b++) {
        s->nq[b] = rand_int(r, 1, maxq);
        s->nk[b] = rand_int(r, 1, maxk);
    }
    if (empty == 1) {
        int b1 = rand_int(r, 0, s->B - 1);
        int b2 = (b1 + rand_int(r, 1, s->B - 1)) % s->B;
        s->nk[b1] = 0;
        s->nq[b2] = 0;
    } else if (empty == 2) {
        int mid = rand_int(r, 1, s->B - 2);
        s->nk[0] = 0;
        s->nq[s->B - 1] = 0;
        s->nq[mid] = s->nk[mid] = 0;
    }
    s->Tq = sq_pack_offsets(s->offq, s->nq, s->B);
    s->Tk = sq_pack_offsets(s->offk, s->nk, s->B);
}

/* ------------------------------------------------------------------------ */
/* One problem: q rows of stride ldq in qb [Tq, ldq]; k and v at kb + koff
 * and kb + voff with stride ldk in kb [kn]. */

typedef struct {
    const xsegs *s;
    int H, C, ldq, ldk;
    size_t koff, voff, qn, kn, an;
    double *qb, *kb, *out, *att, *w;
} xc_ctx;

/* kv layout variants: 0 fused [k|v] (ldk = 2C); 1 [*|k|v] (ldk = 3C);
 * 2 separate arrays (ldk = C); 3 [v|*|k] (ldk = 3C). */
static void xc_layout(xc_ctx *c, int ldq_var, int kv_var)
{
    int C = c->C;
    size_t Tk = (size_t)c->s->Tk;
    c->ldq = ldq_var == 0 ? C : ldq_var == 1 ? C + 3 : 2 * C;
    c->ldk = kv_var == 0 ? 2 * C : kv_var == 2 ? C : 3 * C;
    c->koff = kv_var == 0 ? 0 : kv_var == 1 ? (size_t)C : kv_var == 2 ? 0 : 2 * (size_t)C;
    c->voff = kv_var == 0 ? (size_t)C : kv_var == 1 ? 2 * (size_t)C : kv_var == 2 ? Tk * C : 0;
    c->qn = (size_t)c->s->Tq * c->ldq;
    c->kn = kv_var == 2 ? 2 * Tk * C : Tk * c->ldk;
    c->an = sq_cross_attention_cache_size(c->s->offq, c->s->offk, c->s->B, c->H);
}

static double xc_obj(void *p)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    xc_ctx *c = p;
    sq_cross_attention_forward_f64(cx, c->out, c->att, c->qb, c->ldq, c->s->offq,
                                   c->kb + c->koff, c->kb + c->voff, c->ldk, c->s->offk,
                                   c->s->B, c->H, c->C);
    return gc_dot(c->out, c->w, (size_t)c->s->Tq * c->C);
}

static void fill_nan(double *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = NAN;
}

/* Whether element e of the q buffer (qside) or of the kv buffer gets a
 * gradient: a column of the op, in a segment with keys and queries. */
static int has_grad(const xc_ctx *c, int qside, size_t e)
{
    const xsegs *s = c->s;
    int C = c->C, row, col, b = 0;
    if (qside) {
        row = (int)(e / (size_t)c->ldq), col = (int)(e % (size_t)c->ldq);
        if (col >= C)
            return 0;
        while (s->offq[b + 1] <= row)
            b++;
    } else {
        size_t Tk = (size_t)s->Tk;
        if (c->ldk == C) { /* separate arrays: k then v */
            row = (int)(e % (Tk * C) / (size_t)C);
        } else {
            row = (int)(e / (size_t)c->ldk), col = (int)(e % (size_t)c->ldk);
            int ink = (size_t)col >= c->koff && (size_t)col < c->koff + (size_t)C;
            int inv = (size_t)col >= c->voff && (size_t)col < c->voff + (size_t)C;
            if (!ink && !inv)
                return 0;
        }
        while (s->offk[b + 1] <= row)
            b++;
    }
    return s->nq[b] > 0 && s->nk[b] > 0;
}

/* The gradient the backward added (g = d - d0); 0 when an element it has
 * no gradient for was changed at all. */
static int added(const xc_ctx *c, int qside, double *g, const double *d,
                 const double *d0, size_t n)
{
    int ok = 1;
    for (size_t i = 0; i < n; i++) {
        g[i] = d[i] - d0[i];
        if (!has_grad(c, qside, i) && memcmp(&d[i], &d0[i], sizeof *d) != 0)
            ok = 0;
    }
    return ok;
}

typedef struct {
    double ref64, att64, grad, ref32, f32;
} worst;

/* The float build on the same inputs: out vs reference and double, and
 * gradients (from zero) vs the double ones g_q, g_kv. */
static void check_f32(unit_ctx *t, const xc_ctx *c, const double *ref,
                      const double *gq, const double *gk, worst *wo)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    const xsegs *s = c->s;
    size_t n = (size_t)s->Tq * c->C;
    float *q = gc_to_float(c->qb, c->qn), *kb = gc_to_float(c->kb, c->kn);
    float *w = gc_to_float(c->w, n), *out = calloc(n ? n : 1, sizeof *out);
    float *att = calloc(c->an ? c->an : 1, sizeof *att);
    float *dq = calloc(c->qn ? c->qn : 1, sizeof *dq), *dk = calloc(c->kn, sizeof *dk);
    sq_cross_attention_forward(cx, out, att, q, c->ldq, s->offq, kb + c->koff,
                               kb + c->voff, c->ldk, s->offk, s->B, c->H, c->C);
    sq_cross_attention_backward(cx, dq, dk + c->koff, dk + c->voff, w, out, q, c->ldq,
                                s->offq, kb + c->koff, kb + c->voff, c->ldk, s->offk,
                                att, s->B, c->H, c->C);
    CHECK_WORST(gc_rel_diff(out, ref, n), REF_TOL_F32, wo->ref32);
    double e = fmax(gc_rel_diff(out, c->out, n), gc_rel_diff(att, c->att, c->an));
    e = fmax(e, fmax(gc_rel_diff(dq, gq, c->qn), gc_rel_diff(dk, gk, c->kn)));
    CHECK_WORST(e, F32_TOL, wo->f32);
    free(q); free(kb); free(w); free(out); free(att); free(dq); free(dk);
}

/* One random problem: reference, cache, gradients, float. */
static void check_instance(unit_ctx *t, sq_rng *r, int C, int H, int maxq, int maxk,
                           int trial, worst *wo)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    xsegs s;
    xsegs_random(r, &s, maxq, maxk, trial % 3);
    xc_ctx c = {&s, H, C, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, NULL, NULL};
    xc_layout(&c, trial % 3, trial % 4);
    size_t n = (size_t)s.Tq * C;
    c.qb = gc_normal(r, c.qn, 1);
    c.kb = gc_normal(r, c.kn, 1);
    c.out = gc_zeros(n);
    c.att = gc_zeros(c.an);
    c.w = gc_normal(r, n, 1);
    size_t pairs = 0;
    for (int b = 0; b < s.B; b++)
        pairs += (size_t)s.nq[b] * (size_t)s.nk[b];
    CHECK_EQ(c.an, (size_t)H * pairs);

    /* forward against the reference: every entry written (NaN before) */
    fill_nan(c.out, n);
    fill_nan(c.att, c.an);
    double *ref = gc_zeros(n), *ratt = gc_zeros(c.an);
    xc_obj(&c);
    ref_attn_cross(ref, ratt, c.qb, c.ldq, s.offq, c.kb + c.koff, c.kb + c.voff, c.ldk,
                   s.offk, s.B, H, C);
    CHECK_WORST(gc_rel_diff_f64(c.out, ref, n), REF_TOL_F64, wo->ref64);
    CHECK_WORST(gc_rel_diff_f64(c.att, ratt, c.an), REF_TOL_F64, wo->att64);

    /* backward adds into non-zero buffers; the rest stays untouched */
    double *dq0 = gc_normal(r, c.qn, 1), *dk0 = gc_normal(r, c.kn, 1);
    double *dq = gc_zeros(c.qn), *dk = gc_zeros(c.kn);
    double *gq = gc_zeros(c.qn), *gk = gc_zeros(c.kn);
    memcpy(dq, dq0, c.qn * sizeof *dq);
    memcpy(dk, dk0, c.kn * sizeof *dk);
    sq_cross_attention_backward_f64(cx, dq, dk + c.koff, dk + c.voff, c.w, c.out, c.qb,
                                    c.ldq, s.offq, c.kb + c.koff, c.kb + c.voff, c.ldk,
                                    s.offk, c.att, s.B, H, C);
    CHECK(added(&c, 1, gq, dq, dq0, c.qn));
    CHECK(added(&c, 0, gk, dk, dk0, c.kn));
    double e = fmax(gc_check(xc_obj, &c, c.qb, gq, c.qn),
                    gc_check(xc_obj, &c, c.kb, gk, c.kn));
    CHECK_WORST(e, GRAD_TOL, wo->grad);
    xc_obj(&c);

    check_f32(t, &c, ref, gq, gk, wo);
    if (t->failed && getenv("SQ_TEST_VERBOSE"))
        fprintf(stderr, "    (C=%d H=%d maxq=%d maxk=%d trial=%d)\n", C, H, maxq, maxk,
                trial);
    free(c.qb); free(c.kb); free(c.out); free(c.att); free(c.w); free(ref); free(ratt);
    free(dq0); free(dk0); free(dq); free(dk); free(gq); free(gk);
}

static void check_shapes(unit_ctx *t, uint64_t seed, int maxq, int maxk)
{
    static const int shape[3][2] = {{6, 2}, {6, 3}, {5, 1}};
    sq_rng r;
    sq_rng_seed(&r, seed, 0);
    worst wo = {0, 0, 0, 0, 0};
    for (int trial = 0; trial < 12; trial++)
        check_instance(t, &r, shape[trial % 3][0], shape[trial % 3][1], maxq, maxk,
                       trial, &wo);
    gc_note(t->name, "f64 out vs reference", wo.ref64);
    gc_note(t->name, "f64 att vs reference", wo.att64);
    gc_note(t->name, "grad q, k, v (f64)", wo.grad);
    gc_note(t->name, "f32 out vs reference", wo.ref32);
    gc_note(t->name, "f32 vs f64 out+att+grad", wo.f32);
}

/* ELASTIC eq. 2: 1..4 interest tokens attend over 1..7 sequence rows. */
UNIT_TEST(test_attn_cross_tokens)
{
    check_shapes(t, 201, 4, 7);
}

/* ELASTIC eq. 3: 1..7 sequence rows read back from 1..4 tokens. */
UNIT_TEST(test_attn_cross_reverse)
{
    check_shapes(t, 202, 7, 4);
}

/* ------------------------------------------------------------------------ */

/* offq == offk and the same rows for queries and keys: the bidirectional
 * sq_attention_forward/backward on the same inputs. Even trials: fused
 * [q|k|v] rows (ld = 3C), gradients into a fused [dq|dk|dv]; odd trials:
 * k is q itself ([q|v], ld = 2C) and dq is dk (one [dq=dk|dv] buffer). */
UNIT_TEST(test_attn_cross_self)
{
    static const int shape[3][2] = {{6, 2}, {6, 3}, {5, 1}};
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    sq_rng r;
    sq_rng_seed(&r, 203, 0);
    double eout = 0, egrad = 0;
    int bitwise = 1;
    for (int trial = 0; trial < 6; trial++) {
        int C = shape[trial % 3][0], H = shape[trial % 3][1], odd = trial % 2;
        int ld = odd ? 2 * C : 3 * C, voff = odd ? C : 2 * C, koff = odd ? 0 : C;
        segs s;
        segs_random(&r, &s, 6, 7);
        size_t T = (size_t)s.T, n = T * C, xn = T * ld;
        size_t an = sq_attention_cache_size(s.off, s.B, H);
        CHECK_EQ(sq_cross_attention_cache_size(s.off, s.off, s.B, H), an);
        double *x = gc_normal(&r, xn, 1), *w = gc_normal(&r, n, 1);
        double *d0 = gc_normal(&r, xn, 1), *da = gc_zeros(xn), *db = gc_zeros(xn);
        double *oa = gc_zeros(n), *ob = gc_zeros(n), *aa = gc_zeros(an), *ab = gc_zeros(an);
        memcpy(da, d0, xn * sizeof *da);
        memcpy(db, d0, xn * sizeof *db);
        sq_attention_forward_f64(cx, oa, aa, x, x + koff, x + voff, ld, s.off, s.B, H, C, 0);
        sq_attention_backward_f64(cx, da, da + koff, da + voff, w, oa, x, x + koff,
                                  x + voff, aa, ld, s.off, s.B, H, C, 0);
        sq_cross_attention_forward_f64(cx, ob, ab, x, ld, s.off, x + koff, x + voff, ld,
                                       s.off, s.B, H, C);
        sq_cross_attention_backward_f64(cx, db, db + koff, db + voff, w, ob, x, ld, s.off,
                                        x + koff, x + voff, ld, s.off, ab, s.B, H, C);
        CHECK_WORST(fmax(gc_rel_diff_f64(ob, oa, n), gc_rel_diff_f64(ab, aa, an)),
                    REF_TOL_F64, eout);
        CHECK_WORST(gc_rel_diff_f64(db, da, xn), REF_TOL_F64, egrad);
        bitwise &= memcmp(oa, ob, n * sizeof *oa) == 0 &&
                   memcmp(aa, ab, an * sizeof *aa) == 0 &&
                   memcmp(da, db, xn * sizeof *da) == 0;
        free(x); free(w); free(d0); free(da); free(db); free(oa); free(ob); free(aa);
        free(ab);
    }
    gc_note(t->name, "out+att vs self-attention", eout);
    gc_note(t->name, "dq, dk, dv vs self-attention", egrad);
    gc_note(t->name, "bitwise equal (1 = yes)", bitwise);
}

/* ------------------------------------------------------------------------ */

/* Scores of size ~100 (q, k entries ~ 12 N(0,1), hs = 3): exp overflows
 * float at 88.7, so a softmax without the max subtraction gives inf/NaN.
 * Float stays finite and close to the long double reference on the same
 * (float-rounded) inputs; double matches it to 1e-12 and its gradients
 * still match finite differences. */
UNIT_TEST(test_attn_cross_large)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    sq_rng r;
    sq_rng_seed(&r, 204, 0);
    double eref32 = 0, eref64 = 0, egrad = 0, smax = 0;
    int finite = 1;
    for (int trial = 0; trial < 4; trial++) {
        xsegs s;
        xsegs_random(&r, &s, trial % 2 ? 7 : 4, trial % 2 ? 4 : 7, 1);
        xc_ctx c = {&s, 2, 6, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, NULL, NULL};
        xc_layout(&c, 0, 0);
        size_t n = (size_t)s.Tq * c.C;
        c.qb = gc_normal(&r, c.qn, 12);
        c.kb = gc_normal(&r, c.kn, 1);
        for (size_t i = 0; i < c.kn; i++) /* k columns large, v columns not */
            c.kb[i] = (float)(c.kb[i] * (i % (size_t)c.ldk < (size_t)c.C ? 12 : 1));
        for (size_t i = 0; i < c.qn; i++)
            c.qb[i] = (float)c.qb[i];
        c.out = gc_zeros(n);
        c.att = gc_zeros(c.an);
        c.w = gc_normal(&r, n, 1);
        double *ref = gc_zeros(n), *ratt = gc_zeros(c.an);
        ref_attn_cross(ref, ratt, c.qb, c.ldq, s.offq, c.kb, c.kb + c.C, c.ldk, s.offk,
                       s.B, c.H, c.C);
        for (int b = 0; b < s.B; b++) /* the largest score */
            for (int i = s.offq[b]; i < s.offq[b + 1]; i++)
                for (int j = s.offk[b]; j < s.offk[b + 1]; j++)
                    smax = fmax(smax, fabs(gc_dot(c.qb + (size_t)i * c.ldq,
                                                  c.kb + (size_t)j * c.ldk, 3)) / sqrt(3));
        float *q = gc_to_float(c.qb, c.qn), *kb = gc_to_float(c.kb, c.kn);
        float *w = gc_to_float(c.w, n), *out = calloc(n ? n : 1, sizeof *out);
        float *att = calloc(c.an ? c.an : 1, sizeof *att);
        float *dq = calloc(c.qn, sizeof *dq), *dk = calloc(c.kn, sizeof *dk);
        sq_cross_attention_forward(cx, out, att, q, c.ldq, s.offq, kb, kb + c.C, c.ldk,
                                   s.offk, s.B, c.H, c.C);
        sq_cross_attention_backward(cx, dq, dk, dk + c.C, w, out, q, c.ldq, s.offq, kb,
                                    kb + c.C, c.ldk, s.offk, att, s.B, c.H, c.C);
        for (size_t i = 0; i < n; i++)
            finite &= isfinite(out[i]) != 0;
        for (size_t i = 0; i < c.qn; i++)
            finite &= isfinite(dq[i]) != 0;
        for (size_t i = 0; i < c.kn; i++)
            finite &= isfinite(dk[i]) != 0;
        /* a score s carries float round-off ~ 6e-8 |s| ~ 1e-5 at |s| ~ 200,
         * and p moves by as much relative to it */
        CHECK_WORST(gc_rel_diff(out, ref, n), 1e-4, eref32);
        xc_obj(&c);
        CHECK_WORST(gc_rel_diff_f64(c.out, ref, n), REF_TOL_F64, eref64);
        double *gq = gc_zeros(c.qn), *gk = gc_zeros(c.kn);
        sq_cross_attention_backward_f64(cx, gq, gk, gk + c.C, c.w, c.out, c.qb, c.ldq,
                                        s.offq, c.kb, c.kb + c.C, c.ldk, s.offk, c.att,
                                        s.B, c.H, c.C);
        double e = fmax(gc_check(xc_obj, &c, c.qb, gq, c.qn),
                        gc_check(xc_obj, &c, c.kb, gk, c.kn));
        CHECK_WORST(e, GRAD_TOL, egrad);
        free(q); free(kb); free(w); free(out); free(att); free(dq); free(dk);
        free(c.qb); free(c.kb); free(c.out); free(c.att); free(c.w); free(ref); free(ratt);
        free(gq); free(gk);
    }
    CHECK(finite);
    CHECK(smax > 100); /* the scores did go past float's exp range */
    volatile float big = 95.0f;
    CHECK(isinf(expf(big)));
    gc_note(t->name, "largest |score|", smax);
    gc_note(t->name, "f32 out vs reference", eref32);
    gc_note(t->name, "f64 out vs reference", eref64);
    gc_note(t->name, "grad q, k, v (f64)", egrad);
}

/* ------------------------------------------------------------------------ */

/* Float forward + backward with the given thread count (context); res
 * gets out, att, dq, dk, dv one after another. */
static size_t run_threads(float *res, int threads, const float *q, const float *kv,
                          const float *w, const int *offq, const int *offk, int B, int H,
                          int C)
{
    sq_ctx cx0 = sq_ctx_cpu();
    cx0.threads = threads;
    const sq_ctx *cx = &cx0;
    size_t n = (size_t)offq[B] * C, kn = (size_t)offk[B] * 2 * C;
    size_t an = sq_cross_attention_cache_size(offq, offk, B, H);
    float *out = res, *att = out + n, *dq = att + an, *dkv = dq + n;
    memset(res, 0, (3 * n + an + kn) * sizeof *res);
    sq_cross_attention_forward(cx, out, att, q, C, offq, kv, kv + C, 2 * C, offk, B, H, C);
    sq_cross_attention_backward(cx, dq, dkv, dkv + C, w, out, q, C, offq, kv, kv + C,
                                2 * C, offk, att, B, H, C);
    return 2 * n + an + kn;
}

/* Bitwise the same results with 1 and 2 threads, both directions (1..8
 * tokens against 1..60 rows and the reverse, one segment without keys),
 * with enough work that the ops do fork a team. */
UNIT_TEST(test_attn_cross_threads)
{
#ifndef _OPENMP
    SKIP("built without OpenMP");
#else
    enum { B = 40, C = 16, H = 2 };
    sq_rng r;
    sq_rng_seed(&r, 205, 0);
    int same = 1;
    for (int dir = 0; dir < 2; dir++) {
        int nq[B], nk[B], offq[B + 1], offk[B + 1];
        for (int b = 0; b < B; b++) {
            nq[b] = rand_int(&r, 1, dir ? 60 : 8);
            nk[b] = rand_int(&r, 1, dir ? 8 : 60);
        }
        nk[B / 2] = 0;
        size_t n = (size_t)sq_pack_offsets(offq, nq, B) * C;
        size_t kn = (size_t)sq_pack_offsets(offk, nk, B) * 2 * C;
        size_t an = sq_cross_attention_cache_size(offq, offk, B, H);
        CHECK(an * (C / H) >= 16384);
        float *q = malloc(n * sizeof *q), *kv = malloc(kn * sizeof *kv);
        float *w = malloc(n * sizeof *w);
        for (size_t i = 0; i < n; i++) {
            q[i] = (float)sq_rng_normal(&r);
            w[i] = (float)sq_rng_normal(&r);
        }
        for (size_t i = 0; i < kn; i++)
            kv[i] = (float)sq_rng_normal(&r);
        size_t cap = 3 * n + an + kn;
        float *a = malloc(cap * sizeof *a), *b2 = malloc(cap * sizeof *b2);
        size_t na = run_threads(a, 1, q, kv, w, offq, offk, B, H, C);
        size_t nb = run_threads(b2, 2, q, kv, w, offq, offk, B, H, C);
        same &= na == nb && memcmp(a, b2, na * sizeof *a) == 0;
        free(q); free(kv); free(w); free(a); free(b2);
    }
    CHECK(same);
#endif
}
