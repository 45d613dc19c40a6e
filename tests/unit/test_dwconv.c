/* Unit tests for lib/ops/dwconv.c (the depthwise convolution along packed
 * segments) and the efficient-dwc attention kind (lib/model/mix_dwc.c).
 *
 * The op, causal and bidirectional, K in {1, 2, 3, 5, 9} (9: longer than
 * every segment), packed batches of segments of lengths 1..7 (a length-1
 * segment always included), x a [T, C] array or the V slice of a fused
 * [T, 3C] buffer, with and without a bias:
 *   - the double build equals an explicit loop over the definition
 *     (dwconv.h; tests/ref) to 1e-12, and the forward adds onto what out held;
 *   - dx (over the whole fused buffer: nothing outside V may move), dw and
 *     db of the double build match fourth-order central finite differences
 *     (gradcheck.h) to 1e-6; the backward adds into gradients that start
 *     non-zero;
 *   - the float build agrees with the double one to 1e-5 (normwise);
 *   - results are bitwise the same for 1 and 2 threads (sq_ctx.threads).
 * The kind: its tensor table repeats the projection's and adds dwc_w and
 * dwc_b; its mixer (double) matches finite differences on every parameter
 * and both inputs, causal and bidirectional, K in {0, 2, 5}; with
 * --dwc-kernel 0 a SASRec and a BERT4Rec on it compute bitwise what they
 * compute on efficient (states, loss, gradients); its attention map is
 * efficient's plus the band of the head-mean taps. SQ_TEST_VERBOSE=1
 * prints the measured errors. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dwconv.h"
#include "gradcheck.h"
#include "mixer_opt.h"
#include "mix_qkv.h"
#include "ops.h"
#include "ref_ops.h"
#include "rng.h"
#include "sasrec.h"
#include "segs.h"
#include "unit.h"

#define GRAD_TOL 1e-6 /* finite differences vs backward, double build */
#define REF_TOL 1e-12 /* double build vs the explicit loop */
#define F32_TOL 1e-5  /* float build vs double build, normwise */

#define UPD(w, e) do { double e_ = (e); if (!(e_ <= (w))) (w) = e_; } while (0)

/* ------------------------------------------------------------------------ */
/* The op                                                                    */

/* f = sum(out * wgt) with out = dwconv(x) (x: the V slice at column xo of
 * rows of stride ld in buf). */
typedef struct {
    const segs *s;
    int C, ld, xo, K, causal, bias;
    double *buf, *w, *b, *out, *wgt;
} dc_ctx;

static double dc_obj(void *p)
{
    const sq_ctx cx = sq_ctx_cpu();
    dc_ctx *c = p;
    size_t n = (size_t)c->s->T * c->C;
    memset(c->out, 0, n * sizeof *c->out);
    sq_dwconv_forward_f64(&cx, c->out, c->buf + c->xo, c->ld, c->w, c->bias ? c->b : NULL,
                          c->K, c->s->off, c->s->B, c->C, c->causal);
    return gc_dot(c->out, c->wgt, n);
}

typedef struct {
    double ref, grad, f32;
} op_worst;

/* g = after - before, elementwise. */
static double *diff_of(const double *after, const double *before, size_t n)
{
    double *g = gc_zeros(n);
    for (size_t i = 0; i < n; i++)
        g[i] = after[i] - before[i];
    return g;
}

/* The float build on the same inputs against the double results (out, and
 * the gradients g of buf, w, b). */
static double check_f32(const dc_ctx *c, const double *gx, const double *gw, const double *gb)
{
    const sq_ctx cx = sq_ctx_cpu();
    size_t T = (size_t)c->s->T, n = T * c->C, nb = T * c->ld, nw = (size_t)c->K * c->C;
    float *fb = gc_to_float(c->buf, nb), *fw = gc_to_float(c->w, nw);
    float *fbias = gc_to_float(c->b, (size_t)c->C), *fg = gc_to_float(c->wgt, n);
    float *fo = calloc(n, sizeof *fo), *fdx = calloc(nb, sizeof *fdx);
    float *fdw = calloc(nw, sizeof *fdw), *fdb = calloc((size_t)c->C, sizeof *fdb);
    sq_dwconv_forward(&cx, fo, fb + c->xo, c->ld, fw, c->bias ? fbias : NULL, c->K, c->s->off,
                      c->s->B, c->C, c->causal);
    sq_dwconv_backward(&cx, fdx + c->xo, fdw, c->bias ? fdb : NULL, fg, fb + c->xo, c->ld, fw,
                       c->K, c->s->off, c->s->B, c->C, c->causal);
    double e = fmax(gc_rel_diff(fo, c->out, n), gc_rel_diff(fdx, gx, nb));
    e = fmax(e, gc_rel_diff(fdw, gw, nw));
    if (c->bias)
        e = fmax(e, gc_rel_diff(fdb, gb, (size_t)c->C));
    free(fb); free(fw); free(fbias); free(fg); free(fo); free(fdx); free(fdw); free(fdb);
    return e;
}

/* One random instance: reference, gradients, float build. */
static void check_op(unit_ctx *t, sq_rng *r, int K, int causal, int trial, op_worst *wo)
{
    const sq_ctx cx = sq_ctx_cpu();
    segs s;
    segs_edges(r, &s, trial, 6);
    int C = trial % 3 ? 6 : 5, fused = trial % 2, ld = fused ? 3 * C : C;
    size_t T = (size_t)s.T, n = T * C, nb = T * ld, nw = (size_t)K * C;
    dc_ctx c = {&s, C, ld, fused ? 2 * C : 0, K, causal, trial % 4 != 3,
                gc_normal(r, nb, 1), gc_normal(r, nw, 1), gc_normal(r, (size_t)C, 1),
                gc_zeros(n), gc_normal(r, n, 1)};
    const double *x = c.buf + c.xo, *bias = c.bias ? c.b : NULL;

    /* the forward adds onto out */
    double *o0 = gc_normal(r, n, 1), *o = gc_zeros(n), *ref = gc_zeros(n);
    memcpy(o, o0, n * sizeof *o);
    memcpy(ref, o0, n * sizeof *ref);
    sq_dwconv_forward_f64(&cx, o, x, ld, c.w, bias, K, s.off, s.B, C, causal);
    ref_dwconv(ref, x, ld, c.w, bias, K, s.off, s.B, C, causal);
    double e = gc_rel_diff_f64(o, ref, n);
    CHECK(e < REF_TOL);
    UPD(wo->ref, e);

    /* gradients, added into non-zero buffers */
    double *dx0 = gc_normal(r, nb, 1), *dw0 = gc_normal(r, nw, 1), *db0 = gc_normal(r, C, 1);
    double *dx = gc_zeros(nb), *dw = gc_zeros(nw), *db = gc_zeros(C);
    memcpy(dx, dx0, nb * sizeof *dx);
    memcpy(dw, dw0, nw * sizeof *dw);
    memcpy(db, db0, (size_t)C * sizeof *db);
    sq_dwconv_backward_f64(&cx, dx + c.xo, dw, c.bias ? db : NULL, c.wgt, x, ld, c.w, K, s.off,
                           s.B, C, causal);
    double *gx = diff_of(dx, dx0, nb), *gw = diff_of(dw, dw0, nw), *gb = diff_of(db, db0, C);
    e = fmax(gc_check(dc_obj, &c, c.buf, gx, nb), gc_check(dc_obj, &c, c.w, gw, nw));
    e = fmax(e, gc_check(dc_obj, &c, c.b, gb, (size_t)C)); /* no bias: 0 and 0 */
    CHECK(e < GRAD_TOL);
    UPD(wo->grad, e);

    dc_obj(&c);
    e = check_f32(&c, gx, gw, gb);
    CHECK(e < F32_TOL);
    UPD(wo->f32, e);
    if (t->failed && getenv("SQ_TEST_VERBOSE"))
        fprintf(stderr, "    (K=%d causal=%d trial=%d)\n", K, causal, trial);
    free(c.buf); free(c.w); free(c.b); free(c.out); free(c.wgt);
    free(o0); free(o); free(ref); free(dx0); free(dw0); free(db0); free(dx); free(dw); free(db);
    free(gx); free(gw); free(gb);
}

UNIT_TEST(test_dwconv_op)
{
    static const int Ks[] = {1, 2, 3, 5, 9};
    sq_rng r;
    sq_rng_seed(&r, 301, 0);
    for (int causal = 0; causal < 2; causal++) {
        op_worst wo = {0, 0, 0};
        for (size_t i = 0; i < sizeof Ks / sizeof Ks[0]; i++)
            for (int trial = 0; trial < 4; trial++)
                check_op(t, &r, Ks[i], causal, trial, &wo);
        gc_note(t->name, causal ? "f64 vs loop (causal)" : "f64 vs loop (bidir)", wo.ref);
        gc_note(t->name, causal ? "grad x, w, b (causal)" : "grad x, w, b (bidir)", wo.grad);
        gc_note(t->name, causal ? "f32 vs f64 (causal)" : "f32 vs f64 (bidir)", wo.f32);
    }
}

/* The windows by hand: one segment of 4 rows, one channel, x = 1, 10, 100,
 * 1000, taps 1, 2, 3 (K = 3) and K = 2. */
UNIT_TEST(test_dwconv_windows)
{
    const sq_ctx cx = sq_ctx_cpu();
    int off[2] = {0, 4};
    double x[4] = {1, 10, 100, 1000}, w3[3] = {1, 2, 3}, w2[2] = {1, 2}, out[4];
    /* causal K = 3: y_t = 1 x_{t-2} + 2 x_{t-1} + 3 x_t */
    static const double causal3[4] = {3, 32, 321, 3210};
    /* centred K = 3: y_t = 1 x_{t-1} + 2 x_t + 3 x_{t+1} */
    static const double centred3[4] = {32, 321, 3210, 2100};
    /* K = 2 bidirectional: lo = 0, y_t = 1 x_t + 2 x_{t+1} (one more on the right) */
    static const double even2[4] = {21, 210, 2100, 1000};
    memset(out, 0, sizeof out);
    sq_dwconv_forward_f64(&cx, out, x, 1, w3, NULL, 3, off, 1, 1, 1);
    CHECK(memcmp(out, causal3, sizeof out) == 0);
    memset(out, 0, sizeof out);
    sq_dwconv_forward_f64(&cx, out, x, 1, w3, NULL, 3, off, 1, 1, 0);
    CHECK(memcmp(out, centred3, sizeof out) == 0);
    memset(out, 0, sizeof out);
    sq_dwconv_forward_f64(&cx, out, x, 1, w2, NULL, 2, off, 1, 1, 0);
    CHECK(memcmp(out, even2, sizeof out) == 0);
    CHECK_EQ(sq_dwconv_lo(3, 1), 2);
    CHECK_EQ(sq_dwconv_lo(4, 0), 1);
    CHECK_EQ(sq_dwconv_lo(1, 0), 0);
}

/* Float forward + backward with cx's thread count: out, dx, dw, db into
 * res [n + nb + nw + C]. */
static void run_threads(int threads, float *res, const float *x, const float *w,
                        const float *b, const float *g, const int *off, int B, int C, int ld,
                        int K, int causal)
{
    sq_ctx cx = sq_ctx_cpu();
    cx.threads = threads;
    size_t n = (size_t)off[B] * C, nb = (size_t)off[B] * ld, nw = (size_t)K * C;
    float *out = res, *dx = out + n, *dw = dx + nb, *db = dw + nw;
    memset(res, 0, (n + nb + nw + C) * sizeof *res);
    sq_dwconv_forward(&cx, out, x, ld, w, b, K, off, B, C, causal);
    sq_dwconv_backward(&cx, dx, dw, db, g, x, ld, w, K, off, B, C, causal);
}

/* Bitwise the same results with 1 and 2 threads, with enough work
 * (T C K >= 16384) that the op forks, and C = 40 (channel blocks of 16, 16
 * and 8). */
UNIT_TEST(test_dwconv_threads)
{
    enum { B = 40, C = 40, LD = 2 * C };
    int len[B], off[B + 1];
    sq_rng r;
    sq_rng_seed(&r, 302, 0);
    for (int b = 0; b < B; b++)
        len[b] = 1 + (int)sq_rng_below(&r, 60);
    int T = sq_pack_offsets(off, len, B), same = 1;
    size_t n = (size_t)T * C, nb = (size_t)T * LD;
    for (int K = 1; K <= 7; K += 3)
        for (int causal = 0; causal < 2; causal++) {
            size_t nw = (size_t)K * C, nr = n + nb + nw + C;
            float *x = calloc(nb, sizeof *x), *w = calloc(nw, sizeof *w);
            float *b = calloc(C, sizeof *b), *g = calloc(n, sizeof *g);
            float *a1 = calloc(nr, sizeof *a1), *a2 = calloc(nr, sizeof *a2);
            for (size_t i = 0; i < nb; i++)
                x[i] = (float)sq_rng_normal(&r);
            for (size_t i = 0; i < nw; i++)
                w[i] = (float)sq_rng_normal(&r);
            for (int i = 0; i < C; i++)
                b[i] = (float)sq_rng_normal(&r);
            for (size_t i = 0; i < n; i++)
                g[i] = (float)sq_rng_normal(&r);
            run_threads(1, a1, x, w, b, g, off, B, C, LD, K, causal);
            run_threads(2, a2, x, w, b, g, off, B, C, LD, K, causal);
            same &= memcmp(a1, a2, nr * sizeof *a1) == 0;
            free(x); free(w); free(b); free(g); free(a1); free(a2);
        }
    CHECK(same);
}

/* ------------------------------------------------------------------------ */
/* The kind                                                                  */

static int dwc_kind(void)
{
    return sq_mixer_find("efficient-dwc");
}

/* Its table: the projection's eight as mix_qkv.c has them, then the taps
 * (weight decay: a matrix per layer) and the bias; its option. */
UNIT_TEST(test_dwconv_kind_table)
{
    int k = dwc_kind();
    CHECK(k == sq_mixer_find("efficient") + 1);
    if (k < 0)
        return;
    const sq_mixer *m = sq_mixer_get(k);
    CHECK_EQ(m->n_tensors, QKV_NT + 2);
    CHECK(m->n_tensors <= SQ_MIXER_MAXT);
    for (int i = 0; i < QKV_NT; i++) {
        const sq_tensor_desc *a = &m->tensors[i], *b = &sq_qkv_tensors[i];
        CHECK_STR(a->name, b->name);
        CHECK_STR(a->shape, b->shape);
        CHECK(a->order == b->order && a->decay == b->decay && a->init == b->init);
    }
    const sq_tensor_desc *w = &m->tensors[QKV_NT], *b = &m->tensors[QKV_NT + 1];
    CHECK_STR(w->name, "dwc_w");
    CHECK_STR(w->shape, "LKC");
    CHECK(w->order >= 100 && w->decay == 1 && w->init == SQ_INIT_TRUNC);
    CHECK_STR(b->name, "dwc_b");
    CHECK_STR(b->shape, "LC");
    CHECK(b->order >= 100 && b->order != w->order && b->decay == 0 && b->init == SQ_INIT_ZERO);
    CHECK(m->signed_map);
    /* --dwc-kernel: default 5, 0..64 */
    sq_mixer_cfg mc;
    char buf[32];
    sq_mixer_defaults(&mc, k);
    CHECK_STR(mixer_get(&mc, "dwc-kernel", buf, sizeof buf), "5");
    CHECK(m->trunc_sd != NULL);
    sq_mixer_env env = {6, 2, 8, 1, 1, &mc, m};
    sq_err e = {0};
    CHECK_EQ(sq_mixer_check(&env, &e), 0);
    CHECK_NEAR(m->trunc_sd(&env, "dwc_w"), 1 / sqrt(15.0), 1e-15);
    CHECK_EQ(sq_mixer_set(&mc, "dwc-kernel", "0", &e), 0);
    CHECK_EQ(sq_mixer_check(&env, &e), 0);
    CHECK_EQ(sq_mixer_set(&mc, "dwc-kernel", "65", &e), SQ_EX_USAGE);
    mixer_poke(&mc, "dwc-kernel", 65); /* built in code: the check refuses it */
    CHECK_EQ(sq_mixer_check(&env, &e), SQ_EX_USAGE);
    mixer_poke(&mc, "dwc-kernel", -1);
    CHECK_EQ(sq_mixer_check(&env, &e), SQ_EX_USAGE);
}

/* One layer of the mixer alone, in double: parameters, inputs and buffers. */
typedef struct {
    sq_mixer_cfg mc;
    sq_mixer_env env;
    sq_tensor_set ts;
    sq_packed pb;
    int off[4], pos[16];
    const sq_mixer *m;
    double *mem, *grad, *qin, *kvin, *out, *wgt, *cache, *scratch;
    sq_mix_args_f64 a;
} mix1;

static int mix1_init(mix1 *x, sq_rng *r, int K, int causal)
{
    static const int len[3] = {1, 4, 7};
    sq_err e = {0};
    memset(x, 0, sizeof *x);
    sq_mixer_defaults(&x->mc, dwc_kind());
    mixer_set_int(&x->mc, "dwc-kernel", K);
    x->m = sq_mixer_get(dwc_kind());
    x->env = (sq_mixer_env){6, 2, 8, 1, causal, &x->mc, x->m};
    int T = sq_pack_offsets(x->off, len, 3), C = x->env.dim;
    sq_pack_positions(x->pos, x->off, 3, x->env.max_len);
    x->pb = (sq_packed){.B = 3, .T = T, .off = x->off, .pos = x->pos};
    sq_dims d = {{0}};
    sq_dims_set(&d, 'C', (uint64_t)C);
    if (sq_mixer_check(&x->env, &e) || sq_mixer_tensors(&x->env, &x->ts, &d, 1, &e))
        return -1;
    sq_tensors_layout(&x->ts);
    sq_mixer_cap cap = {.B = 3, .T = T, .att = 66, .train = 1};
    size_t n = (size_t)T * C;
    x->mem = gc_normal(r, x->ts.total, 0.7);
    x->grad = gc_normal(r, x->ts.total, 1);
    x->qin = gc_normal(r, n, 1);
    x->kvin = gc_normal(r, n, 1);
    x->out = gc_zeros(n);
    x->wgt = gc_normal(r, n, 1);
    x->cache = gc_zeros(x->m->cache_size(&x->env, &cap));
    x->scratch = gc_zeros(x->m->scratch_size(&x->env, &cap));
    static const sq_ctx cx = {SQ_BACKEND_CPU, 1, NULL, 0};
    x->a = (sq_mix_args_f64){.cx = &cx, .env = &x->env, .b = &x->pb, .cache = x->cache,
                             .scratch = x->scratch, .cap_T = T, .train = 1};
    for (int i = 0; i < x->ts.n; i++) {
        x->a.P[i] = x->mem + x->ts.off[i];
        x->a.G[i] = x->grad + x->ts.off[i];
    }
    return 0;
}

static void mix1_free(mix1 *x)
{
    free(x->mem); free(x->grad); free(x->qin); free(x->kvin); free(x->out); free(x->wgt);
    free(x->cache); free(x->scratch);
}

static double mix1_obj(void *p)
{
    mix1 *x = p;
    x->m->forward_f64(&x->a, x->out, x->qin, x->kvin);
    return gc_dot(x->out, x->wgt, (size_t)x->pb.T * x->env.dim);
}

/* The mixer's backward against finite differences on every parameter and
 * on both inputs (qin != kvin), adding into non-zero gradients; the float
 * build's output agrees. */
UNIT_TEST(test_dwconv_kind_gradcheck)
{
    static const int Ks[] = {0, 2, 5};
    sq_rng r;
    sq_rng_seed(&r, 303, 0);
    double worst[2] = {0, 0}, fworst = 0;
    for (int causal = 0; causal < 2; causal++)
        for (size_t i = 0; i < sizeof Ks / sizeof Ks[0]; i++) {
            mix1 x;
            CHECK_EQ(mix1_init(&x, &r, Ks[i], causal), 0);
            size_t n = (size_t)x.pb.T * x.env.dim, np = x.ts.total;
            double *g0 = gc_zeros(np), *dq = gc_normal(&r, n, 1), *dkv = gc_normal(&r, n, 1);
            double *dq0 = gc_zeros(n), *dkv0 = gc_zeros(n);
            memcpy(g0, x.grad, np * sizeof *g0);
            memcpy(dq0, dq, n * sizeof *dq0);
            memcpy(dkv0, dkv, n * sizeof *dkv0);
            mix1_obj(&x);
            x.m->backward_f64(&x.a, x.out, x.wgt, x.qin, x.kvin, dq, dkv);
            double *gp = diff_of(x.grad, g0, np), *gq = diff_of(dq, dq0, n);
            double *gkv = diff_of(dkv, dkv0, n);
            double e = gc_check(mix1_obj, &x, x.mem, gp, np);
            e = fmax(e, gc_check(mix1_obj, &x, x.qin, gq, n));
            e = fmax(e, gc_check(mix1_obj, &x, x.kvin, gkv, n));
            CHECK(e < GRAD_TOL);
            UPD(worst[causal], e);
            if (Ks[i] == 0) /* dwc_b unused: no gradient */
                for (size_t j = 0; j < x.ts.size[QKV_NT + 1]; j++)
                    CHECK(gp[x.ts.off[QKV_NT + 1] + j] == 0);
            /* float forward on the same values */
            mix1_obj(&x);
            float *fm = gc_to_float(x.mem, np), *fq = gc_to_float(x.qin, n);
            float *fkv = gc_to_float(x.kvin, n), *fo = calloc(n, sizeof *fo);
            sq_mixer_cap cap = {.B = 3, .T = x.pb.T, .att = 66, .train = 0};
            float *fc = calloc(x.m->cache_size(&x.env, &cap), sizeof *fc);
            float *fs = calloc(x.m->scratch_size(&x.env, &cap) + 1, sizeof *fs);
            sq_mix_args fa = {.cx = x.a.cx, .env = &x.env, .b = &x.pb, .cache = fc,
                              .scratch = fs, .cap_T = x.pb.T, .train = 0};
            for (int j = 0; j < x.ts.n; j++)
                fa.P[j] = fm + x.ts.off[j];
            x.m->forward(&fa, fo, fq, fkv);
            e = gc_rel_diff(fo, x.out, n);
            CHECK(e < F32_TOL);
            UPD(fworst, e);
            free(fm); free(fq); free(fkv); free(fo); free(fc); free(fs);
            free(g0); free(dq); free(dkv); free(dq0); free(dkv0); free(gp); free(gq); free(gkv);
            mix1_free(&x);
        }
    gc_note(t->name, "grad params, qin, kvin (bidir)", worst[0]);
    gc_note(t->name, "grad params, qin, kvin (causal)", worst[1]);
    gc_note(t->name, "f32 vs f64 out", fworst);
}

/* A small model of a backbone on kind (K taps if efficient-dwc). */
static sq_sasrec_config small_config(int backbone, int kind, int K)
{
    sq_sasrec_config c;
    sq_sasrec_defaults(&c, backbone);
    c.n_items = 9;
    c.n_layers = 2;
    c.n_heads = 2;
    c.dim = 6;
    c.ffn = 7;
    c.max_len = 8;
    c.dropout = 0;
    sq_mixer_defaults(&c.attn, kind);
    if (kind == dwc_kind())
        mixer_set_int(&c.attn, "dwc-kernel", K);
    return c;
}

/* Copies every tensor of src that dst has by name (same shapes). */
static void copy_shared(sq_sasrec *dst, const sq_sasrec *src)
{
    for (int i = 0; i < src->ts.n; i++) {
        int j = sq_tensors_find(&dst->ts, src->ts.desc[i]->name);
        if (j >= 0 && src->ts.size[i] == dst->ts.size[j])
            memcpy(dst->mem + dst->ts.off[j], src->mem + src->ts.off[i],
                   src->ts.size[i] * sizeof *src->mem);
    }
}

/* A batch of 3 sequences (lengths 1, 4, 7); BERT4Rec: the mask token at
 * rows 0, 2, 5, 9, which are the loss entries. */
typedef struct {
    int ids[12], pos[12], off[4], rows[12], targets[12];
    uint32_t user[3];
    sq_packed pb;
} small_batch;

static void small_batch_init(small_batch *s, const sq_sasrec_config *c)
{
    static const int len[3] = {1, 4, 7}, masked[4] = {0, 2, 5, 9};
    int bert = c->backbone == SQ_BACKBONE_BERT4REC;
    memset(s, 0, sizeof *s);
    int T = sq_pack_offsets(s->off, len, 3), n = T;
    sq_pack_positions(s->pos, s->off, 3, c->max_len);
    for (int i = 0; i < T; i++) {
        s->ids[i] = 1 + (i * 7) % 9;
        s->rows[i] = i;
        s->targets[i] = 1 + (i * 5 + 3) % 9;
    }
    if (bert) {
        n = 4;
        for (int i = 0; i < n; i++) {
            s->rows[i] = masked[i];
            s->targets[i] = s->ids[masked[i]];
            s->ids[masked[i]] = sq_mask_id(c);
        }
    }
    s->pb = (sq_packed){.B = 3, .T = T, .ids = s->ids, .off = s->off, .pos = s->pos,
                        .user = s->user, .n = n, .rows = s->rows, .targets = s->targets};
}

/* Forward, loss and backward of m on sb: the states and the gradients. */
static double run_model(const sq_sasrec *m, small_batch *sb, sq_sasrec *g, float *states,
                        sq_err *e)
{
    const sq_sasrec_config *c = &m->cfg;
    sq_sasrec_cap cap = {.B = 3, .T = sb->pb.T, .n = sb->pb.n, .att = 66, .train = 1};
    sq_sasrec_work w;
    if (sq_sasrec_work_alloc(&w, m, &cap, e))
        return NAN;
    int cnt;
    memset(g->mem, 0, g->n * sizeof *g->mem);
    sq_sasrec_forward(m, &w, &sb->pb, 0, 0, 0);
    double loss = sq_sasrec_loss(m, &w, &sb->pb, sq_loss_of(SQ_LOSS_CE), g, &cnt);
    sq_sasrec_backward(m, &w, &sb->pb, g);
    const float *h = c->backbone == SQ_BACKBONE_BERT4REC
                         ? w.x + (size_t)c->n_layers * w.cap.T * c->dim
                         : w.out;
    memcpy(states, h, (size_t)sb->pb.T * c->dim * sizeof *states);
    sq_sasrec_work_free(&w);
    return loss;
}

/* --dwc-kernel 0 is efficient: the same parameters give bitwise the same
 * states, loss and gradients (dwc_b's: zero) in SASRec (causal) and
 * BERT4Rec (bidirectional and causal); --dwc-kernel 5 does not. */
UNIT_TEST(test_dwconv_kind_k0_is_efficient)
{
    int eff = sq_mixer_find("efficient"), dwc = dwc_kind();
    for (int bb = 0; bb <= 1; bb++)
        for (int causal = 0; causal <= bb; causal++)
            for (int K = 0; K <= 5; K += 5) {
                sq_err e = {0};
                sq_sasrec_config ce = small_config(bb, eff, 0), cd = small_config(bb, dwc, K);
                ce.causal = cd.causal = causal;
                sq_sasrec me, md, ge, gd;
                CHECK_EQ(sq_sasrec_alloc(&me, &ce, &e), 0);
                CHECK_EQ(sq_sasrec_alloc(&md, &cd, &e), 0);
                CHECK_EQ(sq_sasrec_alloc(&ge, &ce, &e), 0);
                CHECK_EQ(sq_sasrec_alloc(&gd, &cd, &e), 0);
                if (e.code)
                    return;
                sq_sasrec_init_weights(&me, 21);
                sq_sasrec_init_weights(&md, 22);
                for (size_t i = 0; i < me.n; i++) /* biases and LayerNorm off 0 and 1 */
                    me.mem[i] += 0.05f * (float)((int)((i * 37) % 11) - 5);
                copy_shared(&md, &me);
                small_batch sb;
                small_batch_init(&sb, &ce);
                size_t n = (size_t)sb.pb.T * ce.dim;
                float *he = calloc(n, sizeof *he), *hd = calloc(n, sizeof *hd);
                double le = run_model(&me, &sb, &ge, he, &e);
                double ld = run_model(&md, &sb, &gd, hd, &e);
                CHECK_EQ(e.code, 0);
                int same = memcmp(he, hd, n * sizeof *he) == 0 && le == ld;
                for (int i = 0; i < ge.ts.n; i++) {
                    int j = sq_tensors_find(&gd.ts, ge.ts.desc[i]->name);
                    CHECK(j >= 0);
                    same &= j >= 0 && memcmp(ge.mem + ge.ts.off[i], gd.mem + gd.ts.off[j],
                                             ge.ts.size[i] * sizeof *ge.mem) == 0;
                }
                if (K == 0) {
                    CHECK(same);
                    int j = sq_tensors_find(&gd.ts, "dwc_b");
                    CHECK(j >= 0 && gd.ts.size[j] == (size_t)cd.n_layers * cd.dim);
                    for (size_t i = 0; j >= 0 && i < gd.ts.size[j]; i++)
                        CHECK(gd.mem[gd.ts.off[j] + i] == 0);
                    CHECK_EQ(gd.ts.size[sq_tensors_find(&gd.ts, "dwc_w")], 0);
                } else {
                    CHECK(!same);
                }
                free(he); free(hd);
                sq_sasrec_free(&me); sq_sasrec_free(&md);
                sq_sasrec_free(&ge); sq_sasrec_free(&gd);
            }
}

/* The map of layer 0 is efficient's (same parameters) plus the band of the
 * taps averaged over each head's channels: entry (i, j) gains the tap
 * k = j - i + lo when 0 <= k < K. */
UNIT_TEST(test_dwconv_kind_map)
{
    static const uint32_t hist[] = {3, 1, 4, 1, 5, 9, 2};
    int eff = sq_mixer_find("efficient"), dwc = dwc_kind();
    double worst = 0;
    for (int bb = 0; bb <= 1; bb++)
        for (int K = 2; K <= 5; K += 3) {
            sq_err e = {0};
            sq_sasrec_config ce = small_config(bb, eff, 0), cd = small_config(bb, dwc, K);
            sq_sasrec me, md;
            CHECK_EQ(sq_sasrec_alloc(&me, &ce, &e), 0);
            CHECK_EQ(sq_sasrec_alloc(&md, &cd, &e), 0);
            if (e.code)
                return;
            sq_sasrec_init_weights(&me, 31);
            sq_sasrec_init_weights(&md, 32);
            copy_shared(&md, &me);
            float *mapE, *mapD;
            int *ids, *pos, n, H, n2, H2;
            CHECK_EQ(sq_sasrec_attention_map(&me, hist, 7, &mapE, &ids, &pos, &n, &H, &e), 0);
            free(ids);
            free(pos);
            CHECK_EQ(sq_sasrec_attention_map(&md, hist, 7, &mapD, &ids, &pos, &n2, &H2, &e), 0);
            free(ids);
            free(pos);
            CHECK(n == n2 && H == 2 && H2 == 2 && n == (bb ? 8 : 7));
            int C = cd.dim, hs = C / H, lo = sq_dwconv_lo(K, sq_sasrec_causal(&cd));
            const float *w = md.p.mix[QKV_NT]; /* layer 0's taps [K, C] */
            for (int h = 0; h < H; h++)
                for (int i = 0; i < n; i++)
                    for (int j = 0; j < n; j++) {
                        int k = j - i + lo;
                        double band = 0;
                        for (int c = 0; k >= 0 && k < K && c < hs; c++)
                            band += w[(size_t)k * C + h * hs + c] / (double)hs;
                        size_t at = ((size_t)h * n + i) * n + j;
                        worst = fmax(worst, fabs(mapD[at] - mapE[at] - band));
                    }
            CHECK(worst < 1e-5);
            free(mapE);
            free(mapD);
            sq_sasrec_free(&me);
            sq_sasrec_free(&md);
        }
    gc_note(t->name, "map - efficient's - band", worst);
}
