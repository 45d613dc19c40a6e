/* Unit tests for lib/ops/ops.c and lib/ops/adam.c.
 *
 * Every gradient of every op is checked against central finite differences
 * on the double build (the same source as the float build that trains), on
 * random small shapes with odd sizes; the float build must then agree with
 * the double one on the same inputs. Set SQ_TEST_VERBOSE=1 to print the
 * measured errors. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "adam.h"
#include "gradcheck.h"
#include "ops.h"
#include "rng.h"
#include "segs.h"
#include "unit.h"

#define GRAD_TOL 1e-6 /* finite differences vs backward, double build */
#define F32_TOL 1e-5  /* float build vs double build, normwise */
#define TRIALS 4      /* random shapes per op */

static int rand_int(sq_rng *r, int lo, int hi) /* inclusive */
{
    return lo + (int)sq_rng_below(r, (uint64_t)(hi - lo + 1));
}

/* Float-vs-double check of one array, recording the worst value seen. */
#define CHECK_F32(fa, da, n, worst) do { \
    double e_ = gc_rel_diff((fa), (da), (n)); \
    CHECK(e_ < F32_TOL); \
    if (!(e_ <= (worst))) (worst) = e_; \
    } while (0)

#define CHECK_GRAD(err, worst) do { \
    double e_ = (err); \
    CHECK(e_ < GRAD_TOL); \
    if (!(e_ <= (worst))) (worst) = e_; \
    } while (0)

/* ------------------------------------------------------------------------ */

typedef struct {
    int T, C;
    const int *ids;
    double *table, *out, *w, scale;
} emb_ctx;

static double emb_obj(void *p)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    emb_ctx *c = p;
    sq_embedding_forward_f64(cx, c->out, c->table, c->ids, c->T, c->C, c->scale);
    return gc_dot(c->out, c->w, (size_t)c->T * c->C);
}

UNIT_TEST(test_ops_embedding)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    sq_rng r;
    sq_rng_seed(&r, 1, 0);
    double gworst = 0, fworst = 0;
    for (int trial = 0; trial < TRIALS; trial++) {
        segs s;
        segs_random(&r, &s, 4, 7);
        int C = trial == 0 ? 5 : rand_int(&r, 1, 6), V1 = 12, T = s.T;
        size_t n = (size_t)T * C, tn = (size_t)V1 * C;
        int ids[64];
        for (int i = 0; i < T; i++)
            ids[i] = rand_int(&r, 0, V1 - 1);
        ids[0] = 0;
        ids[T - 1] = 3; /* a repeated item accumulates */
        if (T > 1)
            ids[T - 2] = 3;
        emb_ctx c = {T, C, ids, gc_normal(&r, tn, 1), gc_zeros(n),
                     gc_normal(&r, n, 1), sqrt((double)C)};
        double *dtable = gc_zeros(tn);
        emb_obj(&c);
        sq_embedding_backward_f64(cx, dtable, c.w, ids, T, C, c.scale);
        CHECK_GRAD(gc_check(emb_obj, &c, c.table, dtable, tn), gworst);
        emb_obj(&c); /* out at the unperturbed table again */
        /* padding: the garbage in table row 0 never shows, row 0 gets no
         * gradient */
        int pad_ok = 1;
        for (int i = 0; i < T; i++)
            for (int k = 0; k < C; k++)
                if (ids[i] == 0 && c.out[(size_t)i * C + k] != 0)
                    pad_ok = 0;
        for (int k = 0; k < C; k++)
            if (dtable[k] != 0)
                pad_ok = 0;
        CHECK(pad_ok);
        /* float build */
        float *ft = gc_to_float(c.table, tn), *fw = gc_to_float(c.w, n);
        float *fo = calloc(n, sizeof *fo), *fd = calloc(tn, sizeof *fd);
        sq_embedding_forward(cx, fo, ft, ids, T, C, (float)c.scale);
        sq_embedding_backward(cx, fd, fw, ids, T, C, (float)c.scale);
        CHECK_F32(fo, c.out, n, fworst);
        CHECK_F32(fd, dtable, tn, fworst);
        free(ft); free(fw); free(fo); free(fd);
        free(c.table); free(c.out); free(c.w); free(dtable);
    }
    gc_note(t->name, "grad table", gworst);
    gc_note(t->name, "float vs double", fworst);
}

/* ------------------------------------------------------------------------ */

typedef struct {
    int T, C;
    const int *pos;
    double *inp, *pe, *out, *w;
} pos_ctx;

static double pos_obj(void *p)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    pos_ctx *c = p;
    sq_posemb_forward_f64(cx, c->out, c->inp, c->pe, c->pos, c->T, c->C);
    return gc_dot(c->out, c->w, (size_t)c->T * c->C);
}

UNIT_TEST(test_ops_posemb)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    sq_rng r;
    sq_rng_seed(&r, 2, 0);
    double gworst = 0, fworst = 0;
    for (int trial = 0; trial < TRIALS; trial++) {
        segs s;
        segs_random(&r, &s, 4, 7);
        int C = rand_int(&r, 1, 6), T = s.T, P = 7;
        size_t n = (size_t)T * C, pn = (size_t)P * C;
        int pos[64];
        sq_pack_positions(pos, s.off, s.B, P);
        /* the SASRec convention: the newest item of each sequence at P-1 */
        int conv_ok = 1;
        for (int b = 0; b < s.B; b++)
            conv_ok &= pos[s.off[b + 1] - 1] == P - 1 && pos[s.off[b]] == P - s.len[b];
        CHECK(conv_ok);
        pos_ctx c = {T, C, pos, gc_normal(&r, n, 1), gc_normal(&r, pn, 1),
                     gc_zeros(n), gc_normal(&r, n, 1)};
        double *dinp = gc_zeros(n), *dpe = gc_zeros(pn);
        pos_obj(&c);
        sq_posemb_backward_f64(cx, dinp, dpe, c.w, pos, T, C);
        CHECK_GRAD(gc_check(pos_obj, &c, c.inp, dinp, n), gworst);
        CHECK_GRAD(gc_check(pos_obj, &c, c.pe, dpe, pn), gworst);
        pos_obj(&c);
        float *fi = gc_to_float(c.inp, n), *fp = gc_to_float(c.pe, pn);
        float *fw = gc_to_float(c.w, n), *fo = calloc(n, sizeof *fo);
        float *fdi = calloc(n, sizeof *fdi), *fdp = calloc(pn, sizeof *fdp);
        sq_posemb_forward(cx, fo, fi, fp, pos, T, C);
        sq_posemb_backward(cx, fdi, fdp, fw, pos, T, C);
        CHECK_F32(fo, c.out, n, fworst);
        CHECK_F32(fdi, dinp, n, fworst);
        CHECK_F32(fdp, dpe, pn, fworst);
        free(fi); free(fp); free(fw); free(fo); free(fdi); free(fdp);
        free(c.inp); free(c.pe); free(c.out); free(c.w); free(dinp); free(dpe);
    }
    gc_note(t->name, "grad inp, pe", gworst);
    gc_note(t->name, "float vs double", fworst);
}

/* ------------------------------------------------------------------------ */

typedef struct {
    int T, C;
    double eps;
    double *inp, *wt, *bias, *out, *mean, *rstd, *w;
} ln_ctx;

static double ln_obj(void *p)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    ln_ctx *c = p;
    sq_layernorm_forward_f64(cx, c->out, c->mean, c->rstd, c->inp, c->wt, c->bias,
                             c->T, c->C, c->eps);
    return gc_dot(c->out, c->w, (size_t)c->T * c->C);
}

UNIT_TEST(test_ops_layernorm)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    sq_rng r;
    sq_rng_seed(&r, 3, 0);
    const double eps_list[TRIALS] = {1e-5, 1e-8, 1e-12, 1e-5};
    double gworst = 0, fworst = 0;
    for (int trial = 0; trial < TRIALS; trial++) {
        segs s;
        segs_random(&r, &s, 4, 7);
        /* C >= 3: for C = 2 the output is +-w + b whatever x, a zero
         * gradient that float round-off would dominate */
        int C = trial == 0 ? 5 : rand_int(&r, 3, 9), T = s.T;
        size_t n = (size_t)T * C;
        ln_ctx c = {T, C, eps_list[trial], gc_normal(&r, n, 1),
                    gc_normal(&r, (size_t)C, 1), gc_normal(&r, (size_t)C, 1),
                    gc_zeros(n), gc_zeros((size_t)T), gc_zeros((size_t)T),
                    gc_normal(&r, n, 1)};
        for (size_t i = 0; i < n; i++) /* an offset mean, as real activations */
            c.inp[i] += 3;
        double *dinp = gc_zeros(n), *dwt = gc_zeros((size_t)C), *db = gc_zeros((size_t)C);
        ln_obj(&c);
        sq_layernorm_backward_f64(cx, dinp, dwt, db, c.w, c.inp, c.wt, c.mean, c.rstd, T, C);
        CHECK_GRAD(gc_check(ln_obj, &c, c.inp, dinp, n), gworst);
        CHECK_GRAD(gc_check(ln_obj, &c, c.wt, dwt, (size_t)C), gworst);
        CHECK_GRAD(gc_check(ln_obj, &c, c.bias, db, (size_t)C), gworst);
        /* the normalised row has mean 0 and variance var / (var + eps) */
        ln_obj(&c);
        float *fi = gc_to_float(c.inp, n), *fwt = gc_to_float(c.wt, (size_t)C);
        float *fb = gc_to_float(c.bias, (size_t)C), *fw = gc_to_float(c.w, n);
        float *fo = calloc(n, sizeof *fo), *fm = calloc((size_t)T, sizeof *fm);
        float *fr = calloc((size_t)T, sizeof *fr), *fdi = calloc(n, sizeof *fdi);
        float *fdw = calloc((size_t)C, sizeof *fdw), *fdb = calloc((size_t)C, sizeof *fdb);
        sq_layernorm_forward(cx, fo, fm, fr, fi, fwt, fb, T, C, (float)c.eps);
        sq_layernorm_backward(cx, fdi, fdw, fdb, fw, fi, fwt, fm, fr, T, C);
        CHECK_F32(fo, c.out, n, fworst);
        CHECK_F32(fdi, dinp, n, fworst);
        CHECK_F32(fdw, dwt, (size_t)C, fworst);
        CHECK_F32(fdb, db, (size_t)C, fworst);
        free(fi); free(fwt); free(fb); free(fw); free(fo); free(fm); free(fr);
        free(fdi); free(fdw); free(fdb);
        free(c.inp); free(c.wt); free(c.bias); free(c.out); free(c.mean);
        free(c.rstd); free(c.w); free(dinp); free(dwt); free(db);
    }
    gc_note(t->name, "grad inp, w, b", gworst);
    gc_note(t->name, "float vs double", fworst);
}

UNIT_TEST(test_ops_layernorm_values)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    /* Hand values: x = (1, 2, 3, 4): mean 2.5, var 1.25, w = 1, b = 0. */
    double x[4] = {1, 2, 3, 4}, w[4] = {1, 1, 1, 1}, b[4] = {0}, out[4], m, s;
    sq_layernorm_forward_f64(cx, out, &m, &s, x, w, b, 1, 4, 1e-12);
    CHECK_NEAR(m, 2.5, 1e-15);
    CHECK_NEAR(s, 1 / sqrt(1.25), 1e-12);
    CHECK_NEAR(out[0], -1.5 / sqrt(1.25), 1e-12);
    CHECK_NEAR(out[3], 1.5 / sqrt(1.25), 1e-12);
}

/* ------------------------------------------------------------------------ */

typedef struct {
    int T, C, OC;
    double *inp, *wt, *bias, *out, *w;
} lin_ctx;

static double lin_obj(void *p)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    lin_ctx *c = p;
    sq_linear_forward_f64(cx, c->out, c->inp, c->wt, c->bias, c->T, c->C, c->OC);
    return gc_dot(c->out, c->w, (size_t)c->T * c->OC);
}

UNIT_TEST(test_ops_linear)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    sq_rng r;
    sq_rng_seed(&r, 4, 0);
    double gworst = 0, fworst = 0;
    for (int trial = 0; trial < TRIALS; trial++) {
        segs s;
        segs_random(&r, &s, 4, 7);
        int C = rand_int(&r, 1, 7), OC = trial == 0 ? 5 : rand_int(&r, 1, 9), T = s.T;
        size_t n = (size_t)T * C, on = (size_t)T * OC, wn = (size_t)OC * C;
        int has_bias = trial != 3;
        lin_ctx c = {T, C, OC, gc_normal(&r, n, 1), gc_normal(&r, wn, 1),
                     has_bias ? gc_normal(&r, (size_t)OC, 1) : NULL,
                     gc_zeros(on), gc_normal(&r, on, 1)};
        double *dinp = gc_zeros(n), *dwt = gc_zeros(wn), *db = gc_zeros((size_t)OC);
        lin_obj(&c);
        sq_linear_backward_f64(cx, dinp, dwt, has_bias ? db : NULL, c.w, c.inp, c.wt, T, C, OC);
        CHECK_GRAD(gc_check(lin_obj, &c, c.inp, dinp, n), gworst);
        CHECK_GRAD(gc_check(lin_obj, &c, c.wt, dwt, wn), gworst);
        if (has_bias)
            CHECK_GRAD(gc_check(lin_obj, &c, c.bias, db, (size_t)OC), gworst);
        lin_obj(&c);
        float *fi = gc_to_float(c.inp, n), *fwt = gc_to_float(c.wt, wn);
        float *fb = has_bias ? gc_to_float(c.bias, (size_t)OC) : NULL;
        float *fw = gc_to_float(c.w, on), *fo = calloc(on, sizeof *fo);
        float *fdi = calloc(n, sizeof *fdi), *fdw = calloc(wn, sizeof *fdw);
        float *fdb = calloc((size_t)OC, sizeof *fdb);
        sq_linear_forward(cx, fo, fi, fwt, fb, T, C, OC);
        sq_linear_backward(cx, fdi, fdw, has_bias ? fdb : NULL, fw, fi, fwt, T, C, OC);
        CHECK_F32(fo, c.out, on, fworst);
        CHECK_F32(fdi, dinp, n, fworst);
        CHECK_F32(fdw, dwt, wn, fworst);
        if (has_bias)
            CHECK_F32(fdb, db, (size_t)OC, fworst);
        free(fi); free(fwt); free(fb); free(fw); free(fo); free(fdi); free(fdw); free(fdb);
        free(c.inp); free(c.wt); free(c.bias); free(c.out); free(c.w);
        free(dinp); free(dwt); free(db);
    }
    gc_note(t->name, "grad inp, W, b", gworst);
    gc_note(t->name, "float vs double", fworst);
}

/* ------------------------------------------------------------------------ */

typedef struct {
    size_t n;
    int relu;
    double *inp, *out, *w;
} act_ctx;

static double act_obj(void *p)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    act_ctx *c = p;
    if (c->relu)
        sq_relu_forward_f64(cx, c->out, c->inp, c->n);
    else
        sq_gelu_forward_f64(cx, c->out, c->inp, c->n);
    return gc_dot(c->out, c->w, c->n);
}

UNIT_TEST(test_ops_activations)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    sq_rng r;
    sq_rng_seed(&r, 5, 0);
    double gworst = 0, fworst = 0;
    for (int relu = 0; relu < 2; relu++) {
        for (int trial = 0; trial < TRIALS; trial++) {
            size_t n = (size_t)rand_int(&r, 1, 40);
            act_ctx c = {n, relu, gc_normal(&r, n, 2), gc_zeros(n), gc_normal(&r, n, 1)};
            for (size_t i = 0; i < n; i++) /* keep ReLU's kink out of reach of h */
                if (fabs(c.inp[i]) < 1e-3)
                    c.inp[i] = 0.5;
            double *dinp = gc_zeros(n);
            act_obj(&c);
            if (relu)
                sq_relu_backward_f64(cx, dinp, c.w, c.inp, n);
            else
                sq_gelu_backward_f64(cx, dinp, c.w, c.inp, n);
            CHECK_GRAD(gc_check(act_obj, &c, c.inp, dinp, n), gworst);
            act_obj(&c);
            float *fi = gc_to_float(c.inp, n), *fw = gc_to_float(c.w, n);
            float *fo = calloc(n, sizeof *fo), *fd = calloc(n, sizeof *fd);
            if (relu) {
                sq_relu_forward(cx, fo, fi, n);
                sq_relu_backward(cx, fd, fw, fi, n);
            } else {
                sq_gelu_forward(cx, fo, fi, n);
                sq_gelu_backward(cx, fd, fw, fi, n);
            }
            CHECK_F32(fo, c.out, n, fworst);
            CHECK_F32(fd, dinp, n, fworst);
            free(fi); free(fw); free(fo); free(fd);
            free(c.inp); free(c.out); free(c.w); free(dinp);
        }
    }
    /* GELU reference values (PyTorch nn.GELU()(x)) */
    double x[3] = {-1, 0.5, 2}, y[3];
    sq_gelu_forward_f64(cx, y, x, 3);
    CHECK_NEAR(y[0], -0.15865525393145707, 1e-15);
    CHECK_NEAR(y[1], 0.34573123063700656, 1e-15);
    CHECK_NEAR(y[2], 1.9544997361036416, 1e-15);
    gc_note(t->name, "grad inp (gelu, relu)", gworst);
    gc_note(t->name, "float vs double", fworst);
}

/* ------------------------------------------------------------------------ */

typedef struct {
    int T, C;
    double p;
    uint8_t *mask;
    double *inp, *out, *w;
} drop_ctx;

static double drop_obj(void *p)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    drop_ctx *c = p;
    sq_dropout_forward_f64(cx, c->out, c->mask, c->inp, c->T, c->C, c->p, 42, 7, 3);
    return gc_dot(c->out, c->w, (size_t)c->T * c->C);
}

UNIT_TEST(test_ops_dropout)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    sq_rng r;
    sq_rng_seed(&r, 6, 0);
    double gworst = 0, fworst = 0;
    for (int trial = 0; trial < TRIALS; trial++) {
        segs s;
        segs_random(&r, &s, 4, 7);
        int C = rand_int(&r, 1, 7), T = s.T;
        size_t n = (size_t)T * C;
        drop_ctx c = {T, C, trial == 3 ? 0.0 : 0.3, calloc(n, 1),
                      gc_normal(&r, n, 1), gc_zeros(n), gc_normal(&r, n, 1)};
        double *dinp = gc_zeros(n);
        drop_obj(&c);
        sq_dropout_backward_f64(cx, dinp, c.w, c.mask, n, c.p);
        CHECK_GRAD(gc_check(drop_obj, &c, c.inp, dinp, n), gworst);
        drop_obj(&c);
        /* the float build draws the same mask */
        float *fi = gc_to_float(c.inp, n), *fw = gc_to_float(c.w, n);
        float *fo = calloc(n, sizeof *fo), *fd = calloc(n, sizeof *fd);
        uint8_t *fmask = calloc(n, 1);
        sq_dropout_forward(cx, fo, fmask, fi, T, C, (float)c.p, 42, 7, 3);
        sq_dropout_backward(cx, fd, fw, fmask, n, (float)c.p);
        CHECK(memcmp(fmask, c.mask, n) == 0);
        CHECK_F32(fo, c.out, n, fworst);
        CHECK_F32(fd, dinp, n, fworst);
        free(fi); free(fw); free(fo); free(fd); free(fmask);
        free(c.mask); free(c.inp); free(c.out); free(c.w); free(dinp);
    }
    gc_note(t->name, "grad inp", gworst);
    gc_note(t->name, "float vs double", fworst);
}

UNIT_TEST(test_ops_dropout_mask)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    /* Rate, scaling, and the mask as a function of (seed, step, site, row). */
    int T = 400, C = 50;
    size_t n = (size_t)T * C;
    float *inp = malloc(n * sizeof *inp), *out = malloc(n * sizeof *out);
    uint8_t *m1 = malloc(n), *m2 = malloc(n), *m3 = malloc(n);
    for (size_t i = 0; i < n; i++)
        inp[i] = 1.0f;
    sq_dropout_forward(cx, out, m1, inp, T, C, 0.25f, 9, 100, 2);
    size_t kept = 0;
    int scale_ok = 1;
    for (size_t i = 0; i < n; i++) {
        kept += m1[i];
        scale_ok &= m1[i] ? fabsf(out[i] - 1 / 0.75f) < 1e-6f : out[i] == 0;
    }
    CHECK(scale_ok);
    /* 20000 Bernoulli(0.75): sd = 61; 5 sd */
    CHECK(fabs((double)kept - 0.75 * (double)n) < 310);
    sq_dropout_forward(cx, out, m2, inp, T, C, 0.25f, 9, 100, 2);
    CHECK(memcmp(m1, m2, n) == 0);
    sq_dropout_forward(cx, out, m3, inp, T, C, 0.25f, 9, 101, 2);
    CHECK(memcmp(m1, m3, n) != 0);
    sq_dropout_forward(cx, out, m3, inp, T, C, 0.25f, 9, 100, 3);
    CHECK(memcmp(m1, m3, n) != 0);
    /* a row's mask does not depend on how many rows the batch has */
    sq_dropout_forward(cx, out, m3, inp, T / 2, C, 0.25f, 9, 100, 2);
    CHECK(memcmp(m1, m3, n / 2) == 0);
#ifdef _OPENMP
    int nt = omp_get_max_threads();
    omp_set_num_threads(1);
    sq_dropout_forward(cx, out, m3, inp, T, C, 0.25f, 9, 100, 2);
    omp_set_num_threads(nt);
    CHECK(memcmp(m1, m3, n) == 0);
#endif
    free(inp); free(out); free(m1); free(m2); free(m3);
}

/* ------------------------------------------------------------------------ */

typedef struct {
    size_t n;
    double *a, *b, *out, *w;
} res_ctx;

static double res_obj(void *p)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    res_ctx *c = p;
    sq_residual_forward_f64(cx, c->out, c->a, c->b, c->n);
    return gc_dot(c->out, c->w, c->n);
}

UNIT_TEST(test_ops_residual)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    sq_rng r;
    sq_rng_seed(&r, 7, 0);
    double gworst = 0, fworst = 0;
    for (int trial = 0; trial < TRIALS; trial++) {
        size_t n = (size_t)rand_int(&r, 1, 40);
        res_ctx c = {n, gc_normal(&r, n, 1), gc_normal(&r, n, 1), gc_zeros(n),
                     gc_normal(&r, n, 1)};
        double *da = gc_zeros(n), *db = gc_zeros(n);
        res_obj(&c);
        sq_residual_backward_f64(cx, da, db, c.w, n);
        CHECK_GRAD(gc_check(res_obj, &c, c.a, da, n), gworst);
        CHECK_GRAD(gc_check(res_obj, &c, c.b, db, n), gworst);
        res_obj(&c);
        float *fa = gc_to_float(c.a, n), *fb = gc_to_float(c.b, n), *fw = gc_to_float(c.w, n);
        float *fo = calloc(n, sizeof *fo), *fda = calloc(n, sizeof *fda), *fdb = calloc(n, sizeof *fdb);
        sq_residual_forward(cx, fo, fa, fb, n);
        sq_residual_backward(cx, fda, fdb, fw, n);
        CHECK_F32(fo, c.out, n, fworst);
        CHECK_F32(fda, da, n, fworst);
        CHECK_F32(fdb, db, n, fworst);
        free(fa); free(fb); free(fw); free(fo); free(fda); free(fdb);
        free(c.a); free(c.b); free(c.out); free(c.w); free(da); free(db);
    }
    gc_note(t->name, "grad a, b", gworst);
    gc_note(t->name, "float vs double", fworst);
}

/* ------------------------------------------------------------------------ */

/* q, k, v live in one array qkv: separate [T, C] blocks (ld = C) or
 * interleaved rows [T, 3C] (ld = 3C), the fused-projection layout. */
typedef struct {
    const segs *s;
    int H, C, ld, causal;
    double *qkv, *out, *att, *w;
} att_ctx;

static void att_ptrs(const att_ctx *c, double *base, double **q, double **k, double **v)
{
    size_t T = (size_t)c->s->T;
    int fused = c->ld == 3 * c->C;
    *q = base;
    *k = fused ? base + c->C : base + T * c->C;
    *v = fused ? base + 2 * c->C : base + 2 * T * c->C;
}

static double att_obj(void *p)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    att_ctx *c = p;
    double *q, *k, *v;
    att_ptrs(c, c->qkv, &q, &k, &v);
    sq_attention_forward_f64(cx, c->out, c->att, q, k, v, c->ld, c->s->off,
                             c->s->B, c->H, c->C, c->causal);
    return gc_dot(c->out, c->w, (size_t)c->s->T * c->C);
}

/* Naive reference: scores for every pair of rows with an explicit mask. */
static void att_naive(const att_ctx *c, double *out)
{
    double *q, *k, *v;
    att_ptrs(c, c->qkv, &q, &k, &v);
    int T = c->s->T, hs = c->C / c->H;
    int seg[64];
    for (int b = 0; b < c->s->B; b++)
        for (int i = c->s->off[b]; i < c->s->off[b + 1]; i++)
            seg[i] = b;
    for (int h = 0; h < c->H; h++)
        for (int i = 0; i < T; i++) {
            double sc[64], mx = -1e300, sum = 0;
            for (int j = 0; j < T; j++) {
                int ok = seg[j] == seg[i] && (!c->causal || j <= i);
                sc[j] = -INFINITY;
                if (!ok)
                    continue;
                double d = 0;
                for (int e = 0; e < hs; e++)
                    d += q[(size_t)i * c->ld + h * hs + e] * k[(size_t)j * c->ld + h * hs + e];
                sc[j] = d / sqrt(hs);
                mx = fmax(mx, sc[j]);
            }
            for (int j = 0; j < T; j++) {
                sc[j] = exp(sc[j] - mx);
                sum += sc[j];
            }
            for (int e = 0; e < hs; e++) {
                double o = 0;
                for (int j = 0; j < T; j++)
                    o += sc[j] / sum * v[(size_t)j * c->ld + h * hs + e];
                out[(size_t)i * c->C + h * hs + e] = o;
            }
        }
}

UNIT_TEST(test_ops_attention)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    sq_rng r;
    sq_rng_seed(&r, 8, 0);
    double gworst[2] = {0, 0}, fworst = 0, nworst = 0;
    for (int causal = 0; causal < 2; causal++) {
        for (int trial = 0; trial < TRIALS + 2; trial++) {
            segs s;
            segs_random(&r, &s, 4, 7);
            int H = trial == 0 ? 1 : rand_int(&r, 1, 3);
            int hs = trial == 0 ? 5 : rand_int(&r, 1, 3), C = H * hs;
            int ld = trial % 2 ? 3 * C : C;
            size_t T = (size_t)s.T, n = T * C, qn = 3 * n;
            size_t an = sq_attention_cache_size(s.off, s.B, H);
            att_ctx c = {&s, H, C, ld, causal, gc_normal(&r, qn, 1), gc_zeros(n),
                         gc_zeros(an), gc_normal(&r, n, 1)};
            double *dqkv = gc_zeros(qn), *ref = gc_zeros(n);
            att_obj(&c);
            att_naive(&c, ref);
            for (size_t i = 0; i < n; i++)
                nworst = fmax(nworst, fabs(ref[i] - c.out[i]));
            double *q, *k, *v, *dq, *dk, *dv;
            att_ptrs(&c, c.qkv, &q, &k, &v);
            att_ptrs(&c, dqkv, &dq, &dk, &dv);
            sq_attention_backward_f64(cx, dq, dk, dv, c.w, c.out, q, k, v, c.att, ld,
                                      s.off, s.B, H, C, causal);
            CHECK_GRAD(gc_check(att_obj, &c, c.qkv, dqkv, qn), gworst[causal]);
            att_obj(&c);
            /* float build */
            float *fqkv = gc_to_float(c.qkv, qn), *fw = gc_to_float(c.w, n);
            float *fo = calloc(n, sizeof *fo), *fatt = calloc(an, sizeof *fatt);
            float *fd = calloc(qn, sizeof *fd);
            float *fq = fqkv, *fk = ld == C ? fqkv + n : fqkv + C;
            float *fv = ld == C ? fqkv + 2 * n : fqkv + 2 * C;
            float *fdq = fd, *fdk = ld == C ? fd + n : fd + C;
            float *fdv = ld == C ? fd + 2 * n : fd + 2 * C;
            sq_attention_forward(cx, fo, fatt, fq, fk, fv, ld, s.off, s.B, H, C, causal);
            sq_attention_backward(cx, fdq, fdk, fdv, fw, fo, fq, fk, fv, fatt, ld,
                                  s.off, s.B, H, C, causal);
            CHECK_F32(fo, c.out, n, fworst);
            CHECK_F32(fatt, c.att, an, fworst);
            CHECK_F32(fd, dqkv, qn, fworst);
            free(fqkv); free(fw); free(fo); free(fatt); free(fd);
            free(c.qkv); free(c.out); free(c.att); free(c.w); free(dqkv); free(ref);
        }
    }
    CHECK(nworst < 1e-12);
    gc_note(t->name, "grad q, k, v (bidir)", gworst[0]);
    gc_note(t->name, "grad q, k, v (causal)", gworst[1]);
    gc_note(t->name, "vs naive masked (abs)", nworst);
    gc_note(t->name, "float vs double", fworst);
}

UNIT_TEST(test_ops_attention_layout)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    /* Causal probabilities: row i of each block sums to 1 over j <= i and
     * is 0 above the diagonal; a length-1 segment attends to itself. */
    int len[3] = {3, 1, 4}, off[4], H = 2, C = 4;
    int T = sq_pack_offsets(off, len, 3);
    size_t an = sq_attention_cache_size(off, 3, H);
    CHECK_EQ(an, (size_t)H * (9 + 1 + 16));
    double q[32], k[32], v[32], out[32], *att = gc_zeros(an);
    sq_rng r;
    sq_rng_seed(&r, 9, 0);
    for (int i = 0; i < T * C; i++) {
        q[i] = sq_rng_normal(&r);
        k[i] = sq_rng_normal(&r);
        v[i] = sq_rng_normal(&r);
    }
    sq_attention_forward_f64(cx, out, att, q, k, v, C, off, 3, H, C, 1);
    int ok = 1;
    size_t base = 0;
    for (int b = 0; b < 3; b++)
        for (int h = 0; h < H; h++, base += (size_t)len[b] * len[b])
            for (int i = 0; i < len[b]; i++) {
                double sum = 0;
                for (int j = 0; j < len[b]; j++) {
                    double p = att[base + (size_t)i * len[b] + j];
                    if (j > i && p != 0)
                        ok = 0;
                    sum += p;
                }
                if (fabs(sum - 1) > 1e-12)
                    ok = 0;
            }
    CHECK(ok);
    /* the one-row segment (row 3) copies its own v */
    CHECK_NEAR(out[3 * C + 0], v[3 * C + 0], 1e-15);
    CHECK_NEAR(out[3 * C + 3], v[3 * C + 3], 1e-15);
    /* the first row of a causal segment copies its own v */
    CHECK_NEAR(out[4 * C + 1], v[4 * C + 1], 1e-15);
    free(att);
}

/* ------------------------------------------------------------------------ */

typedef struct {
    int n, C, V1, chunk;
    const int *rows, *targets;
    double *h, *E, *scratch;
} ce_ctx;

static double ce_obj(void *p)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    ce_ctx *c = p;
    int count;
    return sq_ce_full_f64(cx, NULL, NULL, c->scratch, c->h, c->E, c->rows, c->targets,
                          c->n, c->C, c->V1, c->chunk, 1, &count);
}

/* Naive: every logit of every entry, in double, no chunks, no fusion. */
static double ce_naive(const ce_ctx *c, int *count)
{
    double total = 0;
    *count = 0;
    for (int i = 0; i < c->n; i++) {
        if (!c->targets[i])
            continue;
        const double *hi = c->h + (size_t)(c->rows ? c->rows[i] : i) * c->C;
        double lse = 0, ly = 0;
        for (int j = 1; j < c->V1; j++) {
            double l = gc_dot(hi, c->E + (size_t)j * c->C, (size_t)c->C);
            lse += exp(l);
            if (j == c->targets[i])
                ly = l;
        }
        total += log(lse) - ly;
        ++*count;
    }
    return *count ? total / *count : 0;
}

/* CE with an output bias: the objective over h, E and the bias. */
typedef struct {
    ce_ctx c;
    double *bias;
} ceb_ctx;

static double ceb_obj(void *p)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    ceb_ctx *b = p;
    int count;
    return sq_ce_full_bias_f64(cx, NULL, NULL, NULL, b->c.scratch, b->c.h, b->c.E, b->bias,
                               b->c.rows, b->c.targets, b->c.n, b->c.C, b->c.V1, b->c.chunk, 1,
                               &count);
}

UNIT_TEST(test_ops_ce_full_bias)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    sq_rng r;
    sq_rng_seed(&r, 11, 0);
    double gworst = 0, fworst = 0;
    for (int trial = 0; trial < TRIALS; trial++) {
        int n = rand_int(&r, 1, 9), C = rand_int(&r, 1, 6), V1 = 13, chunk = rand_int(&r, 1, 4);
        int targets[16];
        for (int i = 0; i < n; i++)
            targets[i] = trial && i == 1 ? 0 : rand_int(&r, 1, V1 - 1);
        size_t hn = (size_t)n * C, en = (size_t)V1 * C;
        ceb_ctx b = {{n, C, V1, chunk, NULL, targets, gc_normal(&r, hn, 1),
                      gc_normal(&r, en, 1), gc_zeros(sq_ce_scratch_size(chunk, V1, C))},
                     gc_normal(&r, (size_t)V1, 1)};
        double *dh = gc_zeros(hn), *dE = gc_zeros(en), *db = gc_zeros((size_t)V1);
        int count;
        double loss = sq_ce_full_bias_f64(cx, dh, dE, db, b.c.scratch, b.c.h, b.c.E, b.bias,
                                          NULL, targets, n, C, V1, chunk, 1, &count);
        /* the bias is the logit of a constant feature: E with a column
         * (bias) and h with a column of ones give the same loss */
        double *h1 = gc_zeros((size_t)n * (C + 1)), *E1 = gc_zeros((size_t)V1 * (C + 1));
        double *s1 = gc_zeros(sq_ce_scratch_size(chunk, V1, C + 1));
        for (int i = 0; i < n; i++) {
            memcpy(h1 + (size_t)i * (C + 1), b.c.h + (size_t)i * C, (size_t)C * sizeof *h1);
            h1[(size_t)i * (C + 1) + C] = 1;
        }
        for (int j = 0; j < V1; j++) {
            memcpy(E1 + (size_t)j * (C + 1), b.c.E + (size_t)j * C, (size_t)C * sizeof *E1);
            E1[(size_t)j * (C + 1) + C] = b.bias[j];
        }
        int c1;
        CHECK_NEAR(sq_ce_full_f64(cx, NULL, NULL, s1, h1, E1, NULL, targets, n, C + 1, V1, chunk,
                                  1, &c1), loss, 1e-12);
        CHECK_EQ(c1, count);
        CHECK_GRAD(gc_check(ceb_obj, &b, b.c.h, dh, hn), gworst);
        CHECK_GRAD(gc_check(ceb_obj, &b, b.c.E, dE, en), gworst);
        CHECK_GRAD(gc_check(ceb_obj, &b, b.bias, db, (size_t)V1), gworst);
        /* the float build */
        float *fh = gc_to_float(b.c.h, hn), *fE = gc_to_float(b.c.E, en);
        float *fb = gc_to_float(b.bias, (size_t)V1);
        float *fdh = calloc(hn, sizeof *fdh), *fdE = calloc(en, sizeof *fdE);
        float *fdb = calloc((size_t)V1, sizeof *fdb);
        float *fs = calloc(sq_ce_scratch_size(chunk, V1, C), sizeof *fs);
        int fcount;
        double floss = sq_ce_full_bias(cx, fdh, fdE, fdb, fs, fh, fE, fb, NULL, targets, n, C,
                                       V1, chunk, 1, &fcount);
        CHECK_NEAR(floss, loss, 1e-5);
        CHECK_F32(fdh, dh, hn, fworst);
        CHECK_F32(fdE, dE, en, fworst);
        CHECK_F32(fdb, db, (size_t)V1, fworst);
        free(fh); free(fE); free(fb); free(fdh); free(fdE); free(fdb); free(fs);
        free(h1); free(E1); free(s1);
        free(b.c.h); free(b.c.E); free(b.c.scratch); free(b.bias); free(dh); free(dE); free(db);
    }
    fprintf(stderr, "  ce_full_bias: worst gradient error %.3g, float %.3g\n", gworst, fworst);
}

/* Chunks of the full CE: logits of about 2^20 reals, 16 rows at least, no
 * more rows than entries */
UNIT_TEST(test_ops_ce_chunk)
{
    CHECK(sq_ce_chunk(1000, 12102) == 86);
    CHECK(sq_ce_chunk(50, 12102) == 50);
    CHECK(sq_ce_chunk(1000, 1 << 22) == 16);
    CHECK(sq_ce_chunk(10, 1 << 22) == 10);
    CHECK(sq_ce_chunk(700, 61) == 700);
    CHECK(sq_ce_chunk(0, 61) == 1);
}

UNIT_TEST(test_ops_ce_full)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    sq_rng r;
    sq_rng_seed(&r, 10, 0);
    double gworst = 0, fworst = 0, lworst = 0;
    for (int trial = 0; trial < TRIALS + 2; trial++) {
        segs s;
        segs_random(&r, &s, 4, 7);
        int C = trial == 0 ? 5 : rand_int(&r, 1, 6), V1 = 12, T = s.T;
        /* entries: every row (rows NULL) or the last row of each sequence,
         * as the `all` and `last` training targets select them */
        int last = trial % 2, n = last ? s.B : T;
        int rows[64], targets[64];
        for (int i = 0; i < n; i++) {
            rows[i] = last ? s.off[i + 1] - 1 : i;
            targets[i] = rand_int(&r, 1, V1 - 1);
        }
        if (!last && n > 2)
            targets[1] = 0; /* ignored */
        int chunk = rand_int(&r, 1, 5);
        size_t hn = (size_t)T * C, en = (size_t)V1 * C;
        ce_ctx c = {n, C, V1, chunk, last ? rows : NULL, targets,
                    gc_normal(&r, hn, 1), gc_normal(&r, en, 1),
                    gc_zeros(sq_ce_scratch_size(chunk, V1, C))};
        for (int k = 0; k < C; k++)
            c.E[k] = 0; /* padding row, as the embedding keeps it */
        double *dh = gc_zeros(hn), *dE = gc_zeros(en);
        int count, ncount;
        double loss = sq_ce_full_f64(cx, dh, dE, c.scratch, c.h, c.E, c.rows, targets,
                                     n, C, V1, chunk, 1, &count);
        double ref = ce_naive(&c, &ncount);
        CHECK_EQ(count, ncount);
        lworst = fmax(lworst, fabs(loss - ref) / ref);
        CHECK_NEAR(loss, ref, 1e-12);
        CHECK_GRAD(gc_check(ce_obj, &c, c.h, dh, hn), gworst);
        CHECK_GRAD(gc_check(ce_obj, &c, c.E, dE, en), gworst);
        int pad_ok = 1;
        for (int k = 0; k < C; k++)
            pad_ok &= dE[k] == 0;
        CHECK(pad_ok);
        /* float build; dloss scales the gradient */
        float *fh = gc_to_float(c.h, hn), *fE = gc_to_float(c.E, en);
        float *fdh = calloc(hn, sizeof *fdh), *fdE = calloc(en, sizeof *fdE);
        float *fs = calloc(sq_ce_scratch_size(chunk, V1, C), sizeof *fs);
        int fcount;
        double floss = sq_ce_full(cx, fdh, fdE, fs, fh, fE, c.rows, targets, n, C, V1,
                                  chunk, 2.0f, &fcount);
        CHECK_EQ(fcount, count);
        CHECK_NEAR(floss, loss, 1e-5);
        for (size_t i = 0; i < hn; i++)
            dh[i] *= 2;
        for (size_t i = 0; i < en; i++)
            dE[i] *= 2;
        CHECK_F32(fdh, dh, hn, fworst);
        CHECK_F32(fdE, dE, en, fworst);
        free(fh); free(fE); free(fdh); free(fdE); free(fs);
        free(c.h); free(c.E); free(c.scratch); free(dh); free(dE);
    }
    /* nothing to score */
    int zero[2] = {0, 0}, count = -1;
    double h2[2] = {1, 2}, E2[4] = {0, 0, 1, 1}, sc[16];
    CHECK(sq_ce_full_f64(cx, NULL, NULL, sc, h2, E2, NULL, zero, 2, 1, 2, 4, 1, &count) == 0);
    CHECK_EQ(count, 0);
    gc_note(t->name, "grad h, E", gworst);
    gc_note(t->name, "loss vs naive", lworst);
    gc_note(t->name, "float vs double", fworst);
}

/* ------------------------------------------------------------------------ */

typedef struct {
    int n, K, C;
    const int *rows, *pos, *neg;
    double *h, *E;
} bce_ctx;

static double bce_obj(void *p)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    bce_ctx *c = p;
    int count;
    return sq_bce_sampled_f64(cx, NULL, NULL, c->h, c->E, c->rows, c->pos, c->neg,
                              c->n, c->K, c->C, 1, &count);
}

/* Naive: TF SASRec's loss, -log sigmoid written literally. */
static double bce_naive(const bce_ctx *c, int *count)
{
    double total = 0;
    *count = 0;
    for (int i = 0; i < c->n; i++) {
        if (!c->pos[i])
            continue;
        const double *hi = c->h + (size_t)(c->rows ? c->rows[i] : i) * c->C;
        double sp = gc_dot(hi, c->E + (size_t)c->pos[i] * c->C, (size_t)c->C);
        total -= log(1 / (1 + exp(-sp)));
        for (int k = 0; k < c->K; k++) {
            int item = c->neg[i * c->K + k];
            if (!item)
                continue;
            double sn = gc_dot(hi, c->E + (size_t)item * c->C, (size_t)c->C);
            total -= log(1 - 1 / (1 + exp(-sn)));
        }
        ++*count;
    }
    return *count ? total / *count : 0;
}

UNIT_TEST(test_ops_bce_sampled)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    sq_rng r;
    sq_rng_seed(&r, 11, 0);
    double gworst = 0, fworst = 0, lworst = 0;
    for (int trial = 0; trial < TRIALS + 2; trial++) {
        segs s;
        segs_random(&r, &s, 4, 7);
        int C = trial == 0 ? 5 : rand_int(&r, 1, 6), V1 = 12, T = s.T;
        int K = rand_int(&r, 1, 3), last = trial % 2, n = last ? s.B : T;
        int rows[64], pos[64], neg[64 * 3];
        for (int i = 0; i < n; i++) {
            rows[i] = last ? s.off[i + 1] - 1 : i;
            pos[i] = rand_int(&r, 1, V1 - 1);
            for (int k = 0; k < K; k++)
                neg[i * K + k] = rand_int(&r, 1, V1 - 1);
        }
        if (n > 2) {
            pos[1] = 0;       /* ignored entry */
            neg[2 * K] = 0;   /* a missing negative */
        }
        size_t hn = (size_t)T * C, en = (size_t)V1 * C;
        bce_ctx c = {n, K, C, last ? rows : NULL, pos, neg,
                     gc_normal(&r, hn, 1), gc_normal(&r, en, 1)};
        double *dh = gc_zeros(hn), *dE = gc_zeros(en);
        int count, ncount;
        double loss = sq_bce_sampled_f64(cx, dh, dE, c.h, c.E, c.rows, pos, neg, n, K, C,
                                         1, &count);
        double ref = bce_naive(&c, &ncount);
        CHECK_EQ(count, ncount);
        lworst = fmax(lworst, fabs(loss - ref) / ref);
        CHECK_NEAR(loss, ref, 1e-12);
        CHECK_GRAD(gc_check(bce_obj, &c, c.h, dh, hn), gworst);
        CHECK_GRAD(gc_check(bce_obj, &c, c.E, dE, en), gworst);
        float *fh = gc_to_float(c.h, hn), *fE = gc_to_float(c.E, en);
        float *fdh = calloc(hn, sizeof *fdh), *fdE = calloc(en, sizeof *fdE);
        int fcount;
        double floss = sq_bce_sampled(cx, fdh, fdE, fh, fE, c.rows, pos, neg, n, K, C,
                                      1.0f, &fcount);
        CHECK_EQ(fcount, count);
        CHECK_NEAR(floss, loss, 1e-5);
        CHECK_F32(fdh, dh, hn, fworst);
        CHECK_F32(fdE, dE, en, fworst);
        free(fh); free(fE); free(fdh); free(fdE);
        free(c.h); free(c.E); free(dh); free(dE);
    }
    /* no overflow for huge scores: softplus(1000) = 1000 */
    double h1[1] = {1000}, E1[2] = {0, 1};
    int p1[1] = {1}, n1[1] = {1}, count;
    double l = sq_bce_sampled_f64(cx, NULL, NULL, h1, E1, NULL, p1, n1, 1, 1, 1, 1, &count);
    CHECK(isfinite(l));
    CHECK_NEAR(l, 1000, 1e-12);
    gc_note(t->name, "grad h, E", gworst);
    gc_note(t->name, "loss vs naive", lworst);
    gc_note(t->name, "float vs double", fworst);
}

/* ------------------------------------------------------------------------ */

UNIT_TEST(test_ops_adam)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    /* Two steps on three parameters, against the formulas written out. */
    double p0[3] = {0.5, -1.0, 2.0}, g1[3] = {0.1, -0.2, 0.3}, g2[3] = {-0.05, 0.4, 0.0};
    for (int decoupled = 0; decoupled < 2; decoupled++) {
        sq_adam_cfg cfg = {0.01, 0.9, 0.999, 1e-8, 0.1, decoupled};
        double p[3], m[3] = {0}, v[3] = {0};
        memcpy(p, p0, sizeof p);
        sq_adam_update_f64(cx, p, g1, m, v, 3, &cfg, 1);
        sq_adam_update_f64(cx, p, g2, m, v, 3, &cfg, 2);
        float pf[3], gf1[3], gf2[3], mf[3] = {0}, vf[3] = {0};
        for (int i = 0; i < 3; i++) {
            pf[i] = (float)p0[i];
            gf1[i] = (float)g1[i];
            gf2[i] = (float)g2[i];
        }
        sq_adam_update(cx, pf, gf1, mf, vf, 3, &cfg, 1);
        sq_adam_update(cx, pf, gf2, mf, vf, 3, &cfg, 2);
        for (int i = 0; i < 3; i++) {
            double x = p0[i], mm = 0, vv = 0;
            const double *gs[2] = {g1, g2};
            for (int s = 1; s <= 2; s++) {
                double g = gs[s - 1][i] + (decoupled ? 0 : 0.1 * x);
                if (decoupled)
                    x *= 1 - 0.01 * 0.1;
                mm = 0.9 * mm + 0.1 * g;
                vv = 0.999 * vv + 0.001 * g * g;
                double mhat = mm / (1 - pow(0.9, s)), vhat = vv / (1 - pow(0.999, s));
                x -= 0.01 * mhat / (sqrt(vhat) + 1e-8);
            }
            CHECK_NEAR(p[i], x, 1e-14);
            CHECK_NEAR(m[i], mm, 1e-15);
            CHECK_NEAR(v[i], vv, 1e-15);
            CHECK_NEAR(pf[i], x, 1e-6);
        }
    }
    /* The first Adam step moves every weight by about lr (sign of g). */
    sq_adam_cfg plain = {0.001, 0.9, 0.999, 1e-8, 0, 0};
    double p[2] = {0, 0}, g[2] = {3, -1e-3}, m[2] = {0}, v[2] = {0};
    sq_adam_update_f64(cx, p, g, m, v, 2, &plain, 1);
    CHECK_NEAR(p[0], -0.001, 1e-10);
    CHECK_NEAR(p[1], 0.001, 1e-7);
}

UNIT_TEST(test_ops_grad_clip)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    double g[2] = {3, 4};
    CHECK_NEAR(sq_grad_norm_f64(cx, g, 2), 5, 1e-15);
    CHECK_NEAR(sq_grad_clip_f64(cx, g, 2, 10), 5, 1e-15); /* below: untouched */
    CHECK(g[0] == 3 && g[1] == 4);
    CHECK_NEAR(sq_grad_clip_f64(cx, g, 2, 1), 5, 1e-15);
    CHECK_NEAR(g[0], 0.6, 1e-6);
    CHECK_NEAR(g[1], 0.8, 1e-6);
    CHECK_NEAR(sq_grad_norm_f64(cx, g, 2), 1, 1e-6);
    /* float, many elements (several blocks, uneven last block) */
    size_t n = 1001;
    float *gf = malloc(n * sizeof *gf);
    for (size_t i = 0; i < n; i++)
        gf[i] = 2.0f;
    CHECK_NEAR(sq_grad_clip(cx, gf, n, 2.0), 2 * sqrt(1001.0), 1e-12);
    CHECK_NEAR(sq_grad_norm(cx, gf, n), 2.0, 1e-5);
    gf[7] = NAN; /* divergence: reported, nothing scaled */
    CHECK(isnan(sq_grad_clip(cx, gf, n, 1.0)));
    CHECK(gf[0] == gf[1]);
    CHECK_EQ(sq_grad_norm(cx, gf, 0) == 0, 1);
    free(gf);
}

/* ------------------------------------------------------------------------ */

/* Every op once with one thread and once with four, set through OpenMP's
 * default and through the context: bitwise equal. */
#ifdef _OPENMP
static void run_all_float(float *res, size_t *nres, int T, int C, const int *off, int B,
                          int threads)
{
    sq_ctx cx0 = sq_ctx_cpu();
    cx0.threads = threads;
    const sq_ctx *cx = &cx0;
    sq_rng r;
    sq_rng_seed(&r, 12, 0);
    int H = 2, V1 = 97, ld = C;
    size_t n = (size_t)T * C, k = 0;
    float *x = malloc(n * sizeof *x), *w = malloc(n * sizeof *w), *y = calloc(n, sizeof *y);
    float *E = malloc((size_t)V1 * C * sizeof *E), *dE = calloc((size_t)V1 * C, sizeof *dE);
    float *dx = calloc(n, sizeof *dx), *mean = calloc((size_t)T, sizeof *mean);
    float *rstd = calloc((size_t)T, sizeof *rstd), *lw = malloc((size_t)C * sizeof *lw);
    float *lb = calloc((size_t)C, sizeof *lb), *dlw = calloc((size_t)C, sizeof *dlw);
    float *dlb = calloc((size_t)C, sizeof *dlb);
    size_t an = sq_attention_cache_size(off, B, H);
    float *att = calloc(an, sizeof *att);
    float *scratch = calloc(sq_ce_scratch_size(64, V1, C), sizeof *scratch);
    int *ids = malloc((size_t)T * sizeof *ids);
    for (size_t i = 0; i < n; i++) {
        x[i] = (float)sq_rng_normal(&r);
        w[i] = (float)sq_rng_normal(&r);
    }
    for (size_t i = 0; i < (size_t)V1 * C; i++)
        E[i] = (float)sq_rng_normal(&r) * 0.1f;
    for (int c = 0; c < C; c++)
        lw[c] = 1 + 0.1f * (float)c;
    for (int i = 0; i < T; i++)
        ids[i] = 1 + (int)sq_rng_below(&r, (uint64_t)(V1 - 1));
    sq_layernorm_forward(cx, y, mean, rstd, x, lw, lb, T, C, 1e-8f);
    sq_layernorm_backward(cx, dx, dlw, dlb, w, x, lw, mean, rstd, T, C);
    sq_embedding_backward(cx, dE, w, ids, T, C, 2.0f);
    sq_scatter_add_rows(cx, dE, x, ids, T, C);
    sq_attention_forward(cx, y, att, x, w, x, ld, off, B, H, C, 1);
    sq_attention_backward(cx, dx, dx, dx, w, y, x, w, x, att, ld, off, B, H, C, 1);
    int count;
    double loss = sq_ce_full(cx, dx, dE, scratch, y, E, NULL, ids, T, C, V1, 64, 1, &count);
    double norm = sq_grad_norm(cx, dx, n);
    memcpy(res + k, dx, n * sizeof *dx), k += n;
    memcpy(res + k, dE, (size_t)V1 * C * sizeof *dE), k += (size_t)V1 * C;
    memcpy(res + k, dlw, (size_t)C * sizeof *dlw), k += (size_t)C;
    memcpy(res + k, dlb, (size_t)C * sizeof *dlb), k += (size_t)C;
    memcpy(res + k, att, an * sizeof *att), k += an;
    res[k++] = (float)loss;
    res[k++] = (float)norm;
    *nres = k;
    free(x); free(w); free(y); free(E); free(dE); free(dx); free(mean); free(rstd);
    free(lw); free(lb); free(dlw); free(dlb); free(att); free(scratch); free(ids);
}
#endif

UNIT_TEST(test_ops_deterministic_threads)
{
#ifndef _OPENMP
    SKIP("built without OpenMP");
#else
    int len[40], off[41], B = 40, C = 36;
    sq_rng r;
    sq_rng_seed(&r, 13, 0);
    for (int b = 0; b < B; b++)
        len[b] = 1 + (int)sq_rng_below(&r, 50);
    int T = sq_pack_offsets(off, len, B);
    size_t cap = (size_t)T * C * 2 + 97 * (size_t)C + 2 * (size_t)C + 2 * 2500 * 40 + 2;
    float *a = malloc(cap * sizeof *a), *b1 = malloc(cap * sizeof *b1);
    float *c1 = malloc(cap * sizeof *c1), *c4 = malloc(cap * sizeof *c4);
    size_t na, nb, nc1, nc4;
    int nt = omp_get_max_threads();
    omp_set_num_threads(1);
    run_all_float(a, &na, T, C, off, B, 0);
    run_all_float(c4, &nc4, T, C, off, B, 4); /* the context overrides */
    omp_set_num_threads(4);
    run_all_float(b1, &nb, T, C, off, B, 0);
    run_all_float(c1, &nc1, T, C, off, B, 1);
    omp_set_num_threads(nt);
    CHECK_EQ(na, nb);
    CHECK_EQ(na, nc1);
    CHECK_EQ(na, nc4);
    CHECK(memcmp(a, b1, na * sizeof *a) == 0);
    CHECK(memcmp(a, c1, na * sizeof *a) == 0);
    CHECK(memcmp(a, c4, na * sizeof *a) == 0);
    free(a); free(b1); free(c1); free(c4);
#endif
}

/* ------------------------------------------------------------------------ */
/* Memory ops and GEMM                                                      */

UNIT_TEST(test_ops_zero_copy)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    sq_rng r;
    sq_rng_seed(&r, 20, 0);
    enum { N = 1003 };
    float *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
    double *d = gc_normal(&r, N, 1), *e = gc_zeros(N);
    for (int i = 0; i < N; i++)
        a[i] = (float)sq_rng_normal(&r), b[i] = -1;
    sq_copy(cx, b, a, N - 1);
    CHECK(memcmp(a, b, (N - 1) * sizeof *a) == 0);
    CHECK(b[N - 1] == -1); /* nothing past n */
    sq_zero(cx, b + 1, N - 2);
    CHECK(b[0] == a[0] && b[N - 1] == -1);
    int nz = 0;
    for (int i = 1; i < N - 1; i++)
        nz += b[i] != 0;
    CHECK_EQ(nz, 0);
    sq_copy_f64(cx, e, d, N);
    CHECK(memcmp(d, e, N * sizeof *d) == 0);
    sq_zero_f64(cx, e, N);
    CHECK(gc_dot(e, e, N) == 0);
    sq_zero(cx, NULL, 0); /* n = 0 touches nothing */
    sq_copy(cx, NULL, NULL, 0);
    free(a); free(b); free(d); free(e);
}

UNIT_TEST(test_ops_fill_copy_add_2d)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    sq_rng r;
    sq_rng_seed(&r, 21, 0);
    enum { ROWS = 7, COLS = 5, LDD = 9, LDS = 6 };
    double src[ROWS * LDS], dst[ROWS * LDD], ref[ROWS * LDD];
    for (int i = 0; i < ROWS * LDS; i++)
        src[i] = sq_rng_normal(&r);
    for (int bcast = 0; bcast <= 1; bcast++) {
        int lds = bcast ? 0 : LDS;
        /* fill: the view only, the columns past cols keep their values */
        for (int i = 0; i < ROWS * LDD; i++)
            dst[i] = ref[i] = 100 + i;
        sq_fill2d_f64(cx, dst, LDD, ROWS, COLS, 2.5);
        for (int rr = 0; rr < ROWS; rr++)
            for (int c = 0; c < COLS; c++)
                ref[rr * LDD + c] = 2.5;
        CHECK(memcmp(dst, ref, sizeof dst) == 0);
        /* copy */
        sq_copy2d_f64(cx, dst, LDD, src, lds, ROWS, COLS);
        for (int rr = 0; rr < ROWS; rr++)
            for (int c = 0; c < COLS; c++)
                ref[rr * LDD + c] = src[rr * lds + c];
        CHECK(memcmp(dst, ref, sizeof dst) == 0);
        /* add (dst holds src now: the result is 2 src) */
        sq_add2d_f64(cx, dst, LDD, src, lds, ROWS, COLS);
        for (int rr = 0; rr < ROWS; rr++)
            for (int c = 0; c < COLS; c++)
                ref[rr * LDD + c] += src[rr * lds + c];
        CHECK(memcmp(dst, ref, sizeof dst) == 0);
        for (int c = 0; c < COLS; c++) /* broadcast: every row is row 0 */
            CHECK(dst[(ROWS - 1) * LDD + c] == (bcast ? 2 * src[c] : 2 * src[(ROWS - 1) * LDS + c]));
    }
    /* float build, contiguous */
    float fs[ROWS * COLS], fd[ROWS * COLS];
    for (int i = 0; i < ROWS * COLS; i++)
        fs[i] = (float)src[i], fd[i] = 1;
    sq_add2d(cx, fd, COLS, fs, COLS, ROWS, COLS);
    int bad = 0;
    for (int i = 0; i < ROWS * COLS; i++)
        bad += fd[i] != 1 + fs[i];
    sq_copy2d(cx, fd, COLS, fs, 0, ROWS, COLS);
    for (int i = 0; i < ROWS * COLS; i++)
        bad += fd[i] != fs[i % COLS];
    sq_fill2d(cx, fd, COLS, ROWS, COLS, -3.0f);
    for (int i = 0; i < ROWS * COLS; i++)
        bad += fd[i] != -3.0f;
    CHECK_EQ(bad, 0);
}

/* The gather of rows and its backward, the scatter-add, against finite
 * differences: f(in) = sum_i w_i . in[rows[i]], whose gradient is the
 * scatter-add of w (rows listed twice accumulate). */
typedef struct {
    const int *rows;
    int n, C;
    double *in, *w, *out;
} gather_ctx;

static double gather_obj(void *p)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    gather_ctx *g = p;
    sq_gather_rows_f64(cx, g->out, g->in, g->rows, g->n, g->C);
    return gc_dot(g->out, g->w, (size_t)g->n * g->C);
}

UNIT_TEST(test_ops_gather_gradcheck)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    sq_rng r;
    sq_rng_seed(&r, 23, 0);
    int rows[9] = {2, 0, 2, 5, 1, 2, 4, 0, 3};
    enum { NIN = 6, N = 9, C = 5 };
    gather_ctx g = {rows, N, C, gc_normal(&r, (size_t)NIN * C, 1),
                    gc_normal(&r, (size_t)N * C, 1), gc_zeros((size_t)N * C)};
    double *din = gc_zeros((size_t)NIN * C), worst = 0;
    sq_scatter_add_rows_f64(cx, din, g.w, rows, N, C);
    CHECK_GRAD(gc_check(gather_obj, &g, g.in, din, (size_t)NIN * C), worst);
    free(g.in); free(g.w); free(g.out); free(din);
}

UNIT_TEST(test_ops_gather_scatter_rows)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    sq_rng r;
    sq_rng_seed(&r, 22, 0);
    enum { NIN = 11, N = 17, C = 37 }; /* C spans several column blocks */
    int rows[N];
    for (int i = 0; i < N; i++)
        rows[i] = (int)sq_rng_below(&r, NIN); /* 17 of 11: duplicates */
    rows[3] = rows[9] = rows[14] = 4;
    double *in = gc_normal(&r, (size_t)NIN * C, 1), *g = gc_zeros((size_t)N * C);
    double *y = gc_normal(&r, (size_t)N * C, 1), *s = gc_zeros((size_t)NIN * C);
    sq_gather_rows_f64(cx, g, in, rows, N, C);
    int bad = 0;
    for (int i = 0; i < N; i++)
        bad += memcmp(g + (size_t)i * C, in + (size_t)rows[i] * C, C * sizeof *g) != 0;
    CHECK_EQ(bad, 0);
    /* scatter-add is the adjoint of the gather: <gather x, y> = <x, scatter y> */
    sq_scatter_add_rows_f64(cx, s, y, rows, N, C);
    CHECK_NEAR(gc_dot(g, y, (size_t)N * C), gc_dot(in, s, (size_t)NIN * C), 1e-12);
    /* float: bitwise the serial loop in i order (duplicates included), on
     * top of what out held */
    float *fy = gc_to_float(y, (size_t)N * C), *fo = gc_to_float(in, (size_t)NIN * C);
    float *fr = gc_to_float(in, (size_t)NIN * C);
    for (int i = 0; i < N; i++)
        for (int c = 0; c < C; c++)
            fr[(size_t)rows[i] * C + c] += fy[(size_t)i * C + c];
    sq_scatter_add_rows(cx, fo, fy, rows, N, C);
    CHECK(memcmp(fo, fr, (size_t)NIN * C * sizeof *fo) == 0);
    /* rows NULL: row i, for both */
    float *fg = calloc((size_t)N * C, sizeof *fg);
    sq_gather_rows(cx, fg, fy, NULL, N, C);
    CHECK(memcmp(fg, fy, (size_t)N * C * sizeof *fg) == 0);
    sq_scatter_add_rows(cx, fg, fy, NULL, N, C);
    bad = 0;
    for (size_t i = 0; i < (size_t)N * C; i++)
        bad += fg[i] != fy[i] + fy[i];
    CHECK_EQ(bad, 0);
    free(in); free(g); free(y); free(s); free(fy); free(fo); free(fr); free(fg);
}

UNIT_TEST(test_ops_gemm)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    sq_rng r;
    sq_rng_seed(&r, 23, 0);
    enum { M = 7, N = 5, K = 9, PAD = 3 };
    for (int ta = 0; ta <= 1; ta++)
        for (int tb = 0; tb <= 1; tb++) {
            /* op(A) [M, K], op(B) [K, N], every stride padded */
            int ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
            int lda = ac + PAD, ldb = bc + PAD, ldc = N + PAD;
            double *A = gc_normal(&r, (size_t)ar * lda, 1), *B = gc_normal(&r, (size_t)br * ldb, 1);
            double *Cm = gc_normal(&r, (size_t)M * ldc, 1), *C0 = gc_zeros((size_t)M * ldc);
            memcpy(C0, Cm, (size_t)M * ldc * sizeof *C0);
            double alpha = 0.75, beta = -0.5, worst = 0;
            sq_gemm_f64(cx, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, Cm, ldc);
            for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++) {
                    double s = 0;
                    for (int k = 0; k < K; k++)
                        s += (ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k]) *
                             (tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j]);
                    double want = alpha * s + beta * C0[(size_t)i * ldc + j];
                    worst = fmax(worst, fabs(Cm[(size_t)i * ldc + j] - want));
                }
            CHECK(worst < 1e-12);
            int bad = 0; /* the padding columns of C are left alone */
            for (int i = 0; i < M; i++)
                for (int j = N; j < ldc; j++)
                    bad += Cm[(size_t)i * ldc + j] != C0[(size_t)i * ldc + j];
            CHECK_EQ(bad, 0);
            /* float, beta = 0: C's old contents (NaN here) are ignored */
            float *fA = gc_to_float(A, (size_t)ar * lda), *fB = gc_to_float(B, (size_t)br * ldb);
            float *fC = malloc((size_t)M * ldc * sizeof *fC);
            for (int i = 0; i < M * ldc; i++)
                fC[i] = NAN;
            sq_gemm(cx, ta, tb, M, N, K, 1.0f, fA, lda, fB, ldb, 0.0f, fC, ldc);
            double fw = 0;
            for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++) {
                    double s = 0;
                    for (int k = 0; k < K; k++)
                        s += (double)(ta ? fA[(size_t)k * lda + i] : fA[(size_t)i * lda + k]) *
                             (tb ? fB[(size_t)j * ldb + k] : fB[(size_t)k * ldb + j]);
                    double d = fabs(fC[(size_t)i * ldc + j] - s);
                    if (!(d <= fw))
                        fw = d;
                }
            CHECK(fw < 1e-4);
            free(A); free(B); free(Cm); free(C0); free(fA); free(fB); free(fC);
        }
}
