/* Unit tests for lib/ops/gru.c (one GRU layer over packed sequences) and
 * the gru4rec model (lib/model/gru4rec.c).
 *
 * The op, on packed batches of sequences of lengths 1..7 (segs_edges: a
 * length-1 and a length-7 one always in), input width != hidden width, with
 * and without biases:
 *   - the double build equals an explicit per-sequence loop over PyTorch's
 *     equations (gru.h; tests/ref) to 1e-12;
 *   - dx, dw_ih, dw_hh, db_ih, db_hh of the double build match fourth-order
 *     central finite differences (gradcheck.h) of sum(h * w) to 1e-6, and
 *     the backward adds into gradients that start non-zero;
 *   - the float build agrees with the double one to 1e-5 (normwise);
 *   - a batch of many sequences gives bitwise the same h and gradients on
 *     1 and 2 threads, and each sequence's states are those it has alone.
 * The model: flat_gradcheck on every tensor (double build), one and two GRU
 * layers, CE and BCE, every --target. SQ_TEST_VERBOSE=1 prints the errors. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "flat.h"
#include "flat_check.h"
#include "gradcheck.h"
#include "gru.h"
#include "ops.h"
#include "ref_ops.h"
#include "rng.h"
#include "sasrec.h" /* SQ_LOSS_CE */
#include "segs.h"
#include "unit.h"

#define GRAD_TOL 1e-6 /* finite differences vs backward, double build */
#define REF_TOL 1e-12 /* double build vs the explicit loop */
#define F32_TOL 1e-5  /* float build vs double build, normwise */

#define UPD(w, e) do { double e_ = (e); if (!(e_ <= (w))) (w) = e_; } while (0)

/* f = sum(h * wgt), h = gru(x). */
typedef struct {
    const segs *s;
    int In, H, bias;
    double *x, *wi, *wh, *bi, *bh, *h, *cache, *scratch, *wgt;
} gr_ctx;

static double gr_obj(void *p)
{
    const sq_ctx cx = sq_ctx_cpu();
    gr_ctx *c = p;
    sq_gru_forward_f64(&cx, c->h, c->cache, c->scratch, c->x, c->wi, c->wh,
                       c->bias ? c->bi : NULL, c->bias ? c->bh : NULL, c->s->off, c->s->B,
                       c->In, c->H);
    return gc_dot(c->h, c->wgt, (size_t)c->s->T * c->H);
}

/* g = after - before, elementwise. */
static double *diff_of(const double *after, const double *before, size_t n)
{
    double *g = gc_zeros(n);
    for (size_t i = 0; i < n; i++)
        g[i] = after[i] - before[i];
    return g;
}

/* A copy of n doubles. */
static double *dup(const double *x, size_t n)
{
    double *y = gc_zeros(n);
    memcpy(y, x, n * sizeof *y);
    return y;
}

/* The sizes of c's arrays: x, w_ih, w_hh, bias, h. */
typedef struct {
    size_t x, wi, wh, b, h;
} gr_sizes;

static gr_sizes sizes_of(const gr_ctx *c)
{
    size_t T = (size_t)c->s->T, G = 3 * (size_t)c->H;
    gr_sizes z = {T * c->In, G * c->In, G * c->H, G, T * c->H};
    return z;
}

static void gr_init(gr_ctx *c, sq_rng *r, const segs *s, int In, int H, int bias)
{
    *c = (gr_ctx){.s = s, .In = In, .H = H, .bias = bias};
    gr_sizes z = sizes_of(c);
    c->x = gc_normal(r, z.x, 1);
    c->wi = gc_normal(r, z.wi, 0.6);
    c->wh = gc_normal(r, z.wh, 0.6);
    c->bi = gc_normal(r, z.b, 0.5);
    c->bh = gc_normal(r, z.b, 0.5);
    c->h = gc_zeros(z.h);
    c->cache = gc_zeros(sq_gru_cache_size(s->T, H));
    c->scratch = gc_zeros(sq_gru_scratch_size(s->B, s->T, H));
    c->wgt = gc_normal(r, z.h, 1);
}

static void gr_free(gr_ctx *c)
{
    free(c->x); free(c->wi); free(c->wh); free(c->bi); free(c->bh); free(c->h);
    free(c->cache); free(c->scratch); free(c->wgt);
}

/* The double backward's gradients (added onto random starts, returned as
 * the differences): g[0..4] = x, w_ih, w_hh, b_ih, b_hh. */
static void backward_f64(gr_ctx *c, sq_rng *r, double *g[5])
{
    const sq_ctx cx = sq_ctx_cpu();
    gr_sizes z = sizes_of(c);
    size_t n[5] = {z.x, z.wi, z.wh, z.b, z.b};
    double *d0[5], *d[5];
    for (int i = 0; i < 5; i++) {
        d0[i] = gc_normal(r, n[i], 1);
        d[i] = dup(d0[i], n[i]);
    }
    gr_obj(c);
    sq_gru_backward_f64(&cx, d[0], d[1], d[2], c->bias ? d[3] : NULL, c->bias ? d[4] : NULL,
                        c->scratch, c->wgt, c->x, c->h, c->cache, c->wi, c->wh, c->s->off,
                        c->s->B, c->In, c->H);
    for (int i = 0; i < 5; i++) {
        g[i] = diff_of(d[i], d0[i], n[i]);
        free(d0[i]);
        free(d[i]);
    }
}

/* The float build on c's values against the double h and gradients g. */
static double check_f32(const gr_ctx *c, double *const g[5])
{
    const sq_ctx cx = sq_ctx_cpu();
    gr_sizes z = sizes_of(c);
    int T = c->s->T, H = c->H;
    float *x = gc_to_float(c->x, z.x), *wi = gc_to_float(c->wi, z.wi);
    float *wh = gc_to_float(c->wh, z.wh), *bi = gc_to_float(c->bi, z.b);
    float *bh = gc_to_float(c->bh, z.b), *wgt = gc_to_float(c->wgt, z.h);
    float *h = calloc(z.h, sizeof *h), *cache = calloc(sq_gru_cache_size(T, H), sizeof *h);
    float *scr = calloc(sq_gru_scratch_size(c->s->B, T, H), sizeof *h);
    float *d[5] = {calloc(z.x, 4), calloc(z.wi, 4), calloc(z.wh, 4), calloc(z.b, 4),
                   calloc(z.b, 4)};
    sq_gru_forward(&cx, h, cache, scr, x, wi, wh, c->bias ? bi : NULL, c->bias ? bh : NULL,
                   c->s->off, c->s->B, c->In, H);
    sq_gru_backward(&cx, d[0], d[1], d[2], c->bias ? d[3] : NULL, c->bias ? d[4] : NULL, scr,
                    wgt, x, h, cache, wi, wh, c->s->off, c->s->B, c->In, H);
    size_t n[5] = {z.x, z.wi, z.wh, z.b, z.b};
    double e = gc_rel_diff(h, c->h, z.h);
    for (int i = 0; i < 5; i++) {
        if (i < 3 || c->bias)
            e = fmax(e, gc_rel_diff(d[i], g[i], n[i]));
        free(d[i]);
    }
    free(x); free(wi); free(wh); free(bi); free(bh); free(wgt); free(h); free(cache);
    free(scr);
    return e;
}

UNIT_TEST(test_gru_op)
{
    sq_rng r;
    sq_rng_seed(&r, 1401, 0);
    double worst[3] = {0, 0, 0};
    for (int trial = 0; trial < 8; trial++) {
        segs s;
        segs_edges(&r, &s, trial, 6);
        int In = 3 + trial % 3, H = 2 + trial % 4, bias = trial % 4 != 3;
        gr_ctx c;
        gr_init(&c, &r, &s, In, H, bias);
        gr_sizes z = sizes_of(&c);
        double *ref = gc_zeros(z.h);
        gr_obj(&c);
        ref_gru(ref, c.x, c.wi, c.wh, bias ? c.bi : NULL, bias ? c.bh : NULL, s.off, s.B, In, H);
        double e = gc_rel_diff_f64(c.h, ref, z.h);
        CHECK(e < REF_TOL);
        UPD(worst[0], e);

        double *g[5];
        backward_f64(&c, &r, g);
        double *arr[5] = {c.x, c.wi, c.wh, c.bi, c.bh};
        size_t n[5] = {z.x, z.wi, z.wh, z.b, z.b};
        e = 0;
        for (int i = 0; i < 5; i++) /* no bias: zero gradient, zero difference */
            e = fmax(e, gc_check(gr_obj, &c, arr[i], g[i], n[i]));
        CHECK(e < GRAD_TOL);
        UPD(worst[1], e);

        gr_obj(&c);
        e = check_f32(&c, g);
        CHECK(e < F32_TOL);
        UPD(worst[2], e);
        for (int i = 0; i < 5; i++)
            free(g[i]);
        free(ref);
        gr_free(&c);
    }
    gc_note(t->name, "f64 vs loop", worst[0]);
    gc_note(t->name, "grad x, w_ih, w_hh, b_ih, b_hh", worst[1]);
    gc_note(t->name, "f32 vs f64", worst[2]);
}

/* Float h and gradients of a batch on `threads` threads. */
static void run_f32(const segs *s, const float *x, const float *wi, const float *wh,
                    const float *bi, const float *bh, const float *wgt, int In, int H,
                    int threads, float *h, float *dx, float *dw)
{
    sq_ctx cx = sq_ctx_cpu();
    cx.threads = threads;
    float *cache = calloc(sq_gru_cache_size(s->T, H), sizeof *h);
    float *scr = calloc(sq_gru_scratch_size(s->B, s->T, H), sizeof *h);
    size_t G = 3 * (size_t)H;
    sq_gru_forward(&cx, h, cache, scr, x, wi, wh, bi, bh, s->off, s->B, In, H);
    sq_gru_backward(&cx, dx, dw, dw + G * In, dw + G * (In + H), dw + G * (In + H + 1), scr,
                    wgt, x, h, cache, wi, wh, s->off, s->B, In, H);
    free(cache);
    free(scr);
}

/* Many sequences, wide enough for the threaded gate loops: bitwise the
 * same on 1 and 2 threads; sequence b's states are those it has alone. */
UNIT_TEST(test_gru_threads_and_batch)
{
    enum { NB = 8, In = 24, H = 40 };
    sq_rng r;
    sq_rng_seed(&r, 1402, 0);
    segs s;
    s.B = NB;
    for (int b = 0; b < NB; b++)
        s.len[b] = 1 + (b * 5) % 9;
    s.T = sq_pack_offsets(s.off, s.len, NB);
    size_t G = 3 * H, nw = G * (In + H + 2), nh = (size_t)s.T * H, nx = (size_t)s.T * In;
    double *dx = gc_normal(&r, nx, 1), *dw = gc_normal(&r, nw, 0.3), *dg = gc_normal(&r, nh, 1);
    float *x = gc_to_float(dx, nx), *w = gc_to_float(dw, nw), *wgt = gc_to_float(dg, nh);
    const float *wi = w, *wh = w + G * In, *bi = wh + G * H, *bh = bi + G;
    float *h[2], *gx[2], *gw[2];
    for (int k = 0; k < 2; k++) {
        h[k] = calloc(nh, sizeof(float));
        gx[k] = calloc(nx, sizeof(float));
        gw[k] = calloc(nw, sizeof(float));
        run_f32(&s, x, wi, wh, bi, bh, wgt, In, H, k + 1, h[k], gx[k], gw[k]);
    }
    CHECK(memcmp(h[0], h[1], nh * sizeof(float)) == 0);
    CHECK(memcmp(gx[0], gx[1], nx * sizeof(float)) == 0);
    CHECK(memcmp(gw[0], gw[1], nw * sizeof(float)) == 0);
    double worst = 0;
    for (int b = 0; b < NB; b++) {
        segs one = {.B = 1, .T = s.len[b], .len = {s.len[b]}, .off = {0, s.len[b]}};
        float *h1 = calloc(nh, sizeof(float)), *g1 = calloc(nx, sizeof(float));
        float *w1 = calloc(nw, sizeof(float));
        run_f32(&one, x + (size_t)s.off[b] * In, wi, wh, bi, bh, wgt + (size_t)s.off[b] * H,
                In, H, 1, h1, g1, w1);
        for (size_t i = 0; i < (size_t)s.len[b] * H; i++)
            worst = fmax(worst, fabs(h1[i] - h[0][(size_t)s.off[b] * H + i]));
        free(h1); free(g1); free(w1);
    }
    CHECK(worst < 1e-6);
    gc_note(t->name, "alone vs batched h", worst);
    for (int k = 0; k < 2; k++) {
        free(h[k]); free(gx[k]); free(gw[k]);
    }
    free(dx); free(dw); free(dg); free(x); free(w); free(wgt);
}

/* ------------------------------------------------------------------------ */
/* The model                                                                 */

extern const sq_flat_def sq_flat_gru4rec;
extern const sq_model_def sq_model_gru4rec;

/* A gru4rec config over 9 items from the options given (NULL on a usage
 * error, its message in e). */
static void *config_of(const char *given, sq_err *e)
{
    void *c = calloc(1, sq_model_gru4rec.cfg_size);
    sq_data_dims d = {.n_items = 9};
    if (c && sq_model_gru4rec.config(c, given, &d, e)) {
        free(c);
        return NULL;
    }
    return c;
}

/* Every tensor of the double build against finite differences of the loss
 * (flat_check.h): one and two layers (the second reads the first's states
 * through gru_w_ih), input and hidden widths apart, dropout on and off, CE
 * and BCE, every --target. */
UNIT_TEST(test_gru4rec_gradcheck)
{
    static const struct {
        const char *given;
        int target, loss;
    } runs[] = {
        {"dim=4\nhidden=5\ndropout=0\nmax_len=8\n", SQ_TARGET_ALL, SQ_LOSS_CE},
        {"dim=4\nhidden=5\ndropout=0\nmax_len=8\n", SQ_TARGET_LAST, SQ_LOSS_CE},
        {"dim=5\nhidden=3\nlayers=2\ndropout=0.3\nmax_len=8\n", SQ_TARGET_ALL,
         SQ_LOSS_CE},
        {"dim=5\nhidden=3\nlayers=2\ndropout=0.3\nmax_len=4\n", SQ_TARGET_RANDOM,
         SQ_LOSS_BCE},
        {"dim=3\nhidden=4\nlayers=3\ndropout=0.25\nmax_len=8\n", SQ_TARGET_ALL,
         SQ_LOSS_BCE},
        {"dim=4\nhidden=5\ndropout=0\nmax_len=8\n", SQ_TARGET_ALL, SQ_LOSS_SAMPLED_SOFTMAX},
        {"dim=4\nhidden=5\ndropout=0.3\nmax_len=4\n", SQ_TARGET_RANDOM, SQ_LOSS_GBCE},
    };
    double worst = 0;
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        sq_err e = {0};
        void *c = config_of(runs[i].given, &e);
        CHECK(c != NULL);
        if (!c)
            continue;
        UPD(worst, flat_gradcheck(t, &sq_flat_gru4rec, c, runs[i].target, runs[i].loss,
                                  GRAD_TOL));
        free(c);
    }
    gc_note(t->name, "grad every tensor", worst);
}

/* The options' ranges and defaults (RecBole's: dim 64, hidden 128, one
 * layer, dropout 0.3, max-len 50). */
UNIT_TEST(test_gru4rec_config)
{
    static const char *const bad[] = {"dim=0\n", "hidden=0\n", "layers=0\n",
                                      "layers=17\n", "dropout=1\n", "dropout=-0.1\n",
                                      "max_len=0\n", "heads=2\n"};
    static const char *const named[] = {"--dim", "--hidden", "--layers", "--layers",
                                        "--dropout", "--dropout", "--max-len", "--heads"};
    sq_err e = {0};
    int *c = config_of(NULL, &e); /* the head, then dim, hidden, layers */
    CHECK(c != NULL);
    if (!c)
        return;
    const sq_flat_head *h = (const sq_flat_head *)(void *)c;
    CHECK_EQ(h->max_len, 50);
    CHECK_EQ(h->n_items, 9u);
    free(c);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        e = (sq_err){0};
        void *x = config_of(bad[i], &e);
        CHECK(x == NULL && e.code == SQ_EX_USAGE && strstr(e.msg, named[i]) != NULL);
        free(x);
    }
}

/* The state of row t of a sequence in a batch (train = 0) is the state of
 * its prefix of t + 1 items packed alone: causal, and independent of the
 * other sequences of the batch. */
UNIT_TEST(test_gru4rec_causal)
{
    sq_err e = {0};
    void *c = config_of("dim=6\nhidden=7\nlayers=2\n", &e);
    CHECK(c != NULL);
    if (!c)
        return;
    sq_ctx cx = sq_ctx_cpu();
    cx.threads = 1;
    sq_flat m;
    CHECK_EQ(sq_flat_alloc(&m, &sq_flat_gru4rec, c, &cx, &e), 0);
    sq_flat_init(&m, 5);
    int len[3] = {4, 1, 6}, off[4], ids[11], pos[11];
    int T = sq_pack_offsets(off, len, 3);
    for (int i = 0; i < T; i++)
        ids[i] = 1 + (i * 4) % 9;
    sq_packed pb = {.B = 3, .T = T, .ids = ids, .off = off, .pos = pos, .n = T};
    sq_flat_cap cap = {.B = 3, .T = T, .n = T, .N = 6, .train = 0};
    const sq_flat_fns *f = &sq_flat_gru4rec.f;
    void *w = NULL, *w1 = NULL;
    CHECK_EQ(f->work_alloc(&m, &cap, &w, &e), 0);
    CHECK_EQ(f->work_alloc(&m, &cap, &w1, &e), 0);
    if (!e.code) {
        const float *h = f->forward(&m, w, &pb, 0, 0, 0);
        double worst = 0;
        for (int b = 0; b < 3; b++)
            for (int k = 1; k <= len[b]; k++) {
                int off1[2] = {0, k}, row = k - 1;
                sq_packed one = {.B = 1, .T = k, .ids = ids + off[b], .off = off1,
                                 .pos = pos, .n = 1, .rows = &row};
                const float *h1 = f->forward(&m, w1, &one, 0, 0, 0);
                for (int j = 0; j < 6; j++)
                    worst = fmax(worst, fabs(h1[j] - h[(size_t)(off[b] + row) * 6 + j]));
            }
        CHECK(worst < 1e-6);
        gc_note(t->name, "prefix alone vs batch row", worst);
    }
    f->work_free(w);
    f->work_free(w1);
    sq_flat_free(&m);
    free(c);
}
