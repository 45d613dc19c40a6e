/* test_hstu.c - HSTU: the SiLU attention op (attn_silu.h) against a naive
 * transcription of its formula (tests/ref), every gradient of the op, of SiLU and of
 * the gate against finite differences in double, the float build against
 * the double one, causality and segment isolation, bitwise the same results
 * for 1 and 2 threads; then the whole model (lib/model/hstu.c) by
 * flat_gradcheck, CE and BCE, every --target, and its float build against
 * the double one. SQ_TEST_VERBOSE=1 prints the measured errors. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attn_silu.h"
#include "flat.h"
#include "flat_check.h"
#include "gradcheck.h"
#include "ops.h"
#include "ref_ops.h"
#include "rng.h"
#include "sasrec.h"
#include "unit.h"

#define GRAD_TOL 1e-6 /* finite differences vs backward, double build */
#define F32_TOL 1e-5  /* float build vs double build, normwise */
#define REF_TOL 1e-12 /* double build vs the naive formula */

/* Segments of every length 1..6, max_len 7 (distance 6 never used). */
#define MAXLEN 7
#define NSEG 6
static const int seg_len[NSEG] = {3, 1, 6, 5, 2, 4};

typedef struct {
    int B, H, dqk, dv, ld, T, max_len;
    int off[NSEG + 1];
    double scale;
    double *x;     /* [T, ld]: v at column 0, q at H dv, k at H (dv + dqk) */
    double *rab;   /* [H, max_len] */
    double *out, *w, *scratch;
} acfg;

static double *aq(const acfg *c) { return c->x + c->H * c->dv; }
static double *ak(const acfg *c) { return c->x + c->H * (c->dv + c->dqk); }
static size_t nout(const acfg *c) { return (size_t)c->T * c->H * c->dv; }

static void acfg_init(acfg *c, sq_rng *r, int H, int dqk, int dv)
{
    memset(c, 0, sizeof *c);
    c->B = NSEG;
    c->H = H;
    c->dqk = dqk;
    c->dv = dv;
    c->ld = H * (dv + 2 * dqk) + 3; /* padding columns: a stride wider than the data */
    c->max_len = MAXLEN;
    c->scale = 1.0 / MAXLEN;
    c->T = sq_pack_offsets(c->off, seg_len, NSEG);
    c->x = gc_normal(r, (size_t)c->T * c->ld, 1);
    c->rab = gc_normal(r, (size_t)H * MAXLEN, 0.5);
    c->out = gc_zeros(nout(c));
    c->w = gc_normal(r, nout(c), 1);
    c->scratch = gc_zeros(sq_attn_silu_scratch_size(c->B, H, MAXLEN));
}

static void acfg_free(acfg *c)
{
    free(c->x);
    free(c->rab);
    free(c->out);
    free(c->w);
    free(c->scratch);
}

static void afwd(acfg *c)
{
    const sq_ctx cx = sq_ctx_cpu();
    sq_attn_silu_forward_f64(&cx, c->out, aq(c), ak(c), c->x, c->ld, c->rab, c->off, c->B,
                             c->H, c->dqk, c->dv, c->max_len, c->scale);
}

static double aobj(void *ctx)
{
    acfg *c = ctx;
    afwd(c);
    return gc_dot(c->out, c->w, nout(c));
}

UNIT_TEST(hstu_attn_matches_formula)
{
    sq_rng r;
    sq_rng_seed(&r, 1, 0);
    acfg c;
    acfg_init(&c, &r, 2, 3, 4);
    afwd(&c);
    double *ref = gc_zeros(nout(&c)), worst = 0;
    ref_attn_silu(ref, aq(&c), ak(&c), c.x, c.ld, c.rab, c.off, c.B, c.H, c.dqk, c.dv,
                  c.max_len, c.scale);
    for (size_t i = 0; i < nout(&c); i++)
        worst = fmax(worst, fabs(ref[i] - c.out[i]));
    gc_note("hstu_attn_matches_formula", "max abs diff", worst);
    CHECK(worst < REF_TOL);
    free(ref);
    acfg_free(&c);
}

/* Every gradient of the op (q, k, v through x; rab) for H = 1 and 2. */
UNIT_TEST(hstu_attn_gradients)
{
    for (int H = 1; H <= 2; H++) {
        sq_rng r;
        sq_rng_seed(&r, 2, (uint64_t)H);
        acfg c;
        acfg_init(&c, &r, H, 3, 2);
        const sq_ctx cx = sq_ctx_cpu();
        size_t nx = (size_t)c.T * c.ld, nr = (size_t)H * MAXLEN;
        double *gx = gc_zeros(nx), *gr = gc_zeros(nr);
        sq_attn_silu_backward_f64(&cx, aq(&c) - c.x + gx, ak(&c) - c.x + gx, gx, gr,
                                  c.scratch, c.w, aq(&c), ak(&c), c.x, c.ld, c.rab, c.off,
                                  c.B, H, c.dqk, c.dv, c.max_len, c.scale);
        double ex = gc_check(aobj, &c, c.x, gx, nx), er = gc_check(aobj, &c, c.rab, gr, nr);
        gc_note("hstu_attn_gradients", H == 1 ? "H=1 q k v" : "H=2 q k v", ex);
        gc_note("hstu_attn_gradients", H == 1 ? "H=1 rab" : "H=2 rab", er);
        CHECK(ex < GRAD_TOL);
        CHECK(er < GRAD_TOL);
        /* the padding columns of x and the unused distance get nothing */
        for (int row = 0; row < c.T; row++)
            for (int j = H * (c.dv + 2 * c.dqk); j < c.ld; j++)
                CHECK(gx[(size_t)row * c.ld + j] == 0);
        for (int h = 0; h < H; h++)
            CHECK(gr[h * MAXLEN + MAXLEN - 1] == 0);
        free(gx);
        free(gr);
        acfg_free(&c);
    }
}

/* Row i of a segment depends on nothing after it, nor on other segments. */
UNIT_TEST(hstu_attn_causal_and_isolated)
{
    sq_rng r;
    sq_rng_seed(&r, 3, 0);
    acfg c;
    acfg_init(&c, &r, 2, 3, 4);
    afwd(&c);
    size_t n = nout(&c);
    double *base = malloc(n * sizeof *base);
    memcpy(base, c.out, n * sizeof *base);
    int b = 2, o = c.off[b], L = seg_len[b], E = c.H * c.dv;
    double *save = malloc((size_t)c.ld * sizeof *save);
    for (int p = 0; p < L; p++) { /* perturb row p of segment b */
        double *xp = c.x + (size_t)(o + p) * c.ld;
        memcpy(save, xp, (size_t)c.ld * sizeof *save);
        for (int j = 0; j < c.ld; j++)
            xp[j] += 0.5;
        afwd(&c);
        for (int row = 0; row < c.T; row++) {
            int same = 1;
            for (int j = 0; j < E; j++)
                same &= c.out[(size_t)row * E + j] == base[(size_t)row * E + j];
            int may_change = row >= o + p && row < o + L;
            if (!may_change)
                CHECK(same);
            else if (row == o + p)
                CHECK(!same);
        }
        memcpy(xp, save, (size_t)c.ld * sizeof *save);
    }
    free(save);
    free(base);
    acfg_free(&c);
}

/* The float build against the double one, forward and backward, and the
 * float build bitwise the same for 1 and 2 threads. */
UNIT_TEST(hstu_attn_float_and_threads)
{
    sq_rng r;
    sq_rng_seed(&r, 4, 0);
    acfg c;
    acfg_init(&c, &r, 2, 3, 4);
    size_t nx = (size_t)c.T * c.ld, nr = (size_t)c.H * MAXLEN, no = nout(&c);
    const sq_ctx cx = sq_ctx_cpu();
    afwd(&c);
    double *gx = gc_zeros(nx), *gr = gc_zeros(nr);
    sq_attn_silu_backward_f64(&cx, aq(&c) - c.x + gx, ak(&c) - c.x + gx, gx, gr, c.scratch,
                              c.w, aq(&c), ak(&c), c.x, c.ld, c.rab, c.off, c.B, c.H, c.dqk,
                              c.dv, MAXLEN, c.scale);
    float *x = gc_to_float(c.x, nx), *rab = gc_to_float(c.rab, nr), *w = gc_to_float(c.w, no);
    float *out[2], *fx[2], *fr[2];
    float *scr = calloc(sq_attn_silu_scratch_size(c.B, c.H, MAXLEN), sizeof *scr);
    float *q = x + c.H * c.dv, *k = q + c.H * c.dqk;
    for (int th = 0; th < 2; th++) {
        sq_ctx f = sq_ctx_cpu();
        f.threads = th + 1;
        out[th] = calloc(no, sizeof(float));
        fx[th] = calloc(nx, sizeof(float));
        fr[th] = calloc(nr, sizeof(float));
        sq_attn_silu_forward(&f, out[th], q, k, x, c.ld, rab, c.off, c.B, c.H, c.dqk, c.dv,
                             MAXLEN, (float)c.scale);
        sq_attn_silu_backward(&f, fx[th] + (q - x), fx[th] + (k - x), fx[th], fr[th], scr, w,
                              q, k, x, c.ld, rab, c.off, c.B, c.H, c.dqk, c.dv, MAXLEN,
                              (float)c.scale);
    }
    double e_out = gc_rel_diff(out[0], c.out, no), e_x = gc_rel_diff(fx[0], gx, nx);
    double e_r = gc_rel_diff(fr[0], gr, nr);
    gc_note("hstu_attn_float_and_threads", "float out", e_out);
    gc_note("hstu_attn_float_and_threads", "float dx", e_x);
    gc_note("hstu_attn_float_and_threads", "float drab", e_r);
    CHECK(e_out < F32_TOL);
    CHECK(e_x < F32_TOL);
    CHECK(e_r < F32_TOL);
    CHECK(memcmp(out[0], out[1], no * sizeof(float)) == 0);
    CHECK(memcmp(fx[0], fx[1], nx * sizeof(float)) == 0);
    CHECK(memcmp(fr[0], fr[1], nr * sizeof(float)) == 0);
    for (int th = 0; th < 2; th++) {
        free(out[th]);
        free(fx[th]);
        free(fr[th]);
    }
    free(scr);
    free(x);
    free(rab);
    free(w);
    free(gx);
    free(gr);
    acfg_free(&c);
}

/* SiLU and the gate on strided views. */
typedef struct {
    int rows, cols, lda, ldb;
    double *a, *b, *out, *w;
    int which; /* 0 silu of a, 1 gate a * b */
} ecfg;

static double eobj(void *ctx)
{
    ecfg *c = ctx;
    const sq_ctx cx = sq_ctx_cpu();
    if (c->which == 0) {
        sq_silu_forward_f64(&cx, c->out, c->a, c->lda, c->rows, c->cols);
        return gc_dot(c->out, c->w, (size_t)c->rows * c->lda);
    }
    sq_gate_forward_f64(&cx, c->out, c->a, c->lda, c->b, c->ldb, c->rows, c->cols);
    return gc_dot(c->out, c->w, (size_t)c->rows * c->cols);
}

UNIT_TEST(hstu_silu_gate_gradients)
{
    sq_rng r;
    sq_rng_seed(&r, 5, 0);
    ecfg c = {.rows = 5, .cols = 3, .lda = 4, .ldb = 7};
    size_t na = (size_t)c.rows * c.lda, nb = (size_t)c.rows * c.ldb;
    c.a = gc_normal(&r, na, 2);
    c.b = gc_normal(&r, nb, 1);
    c.out = gc_zeros(na);
    c.w = gc_normal(&r, na, 1);
    for (size_t i = 0; i < na; i++) /* silu's weights on the view only */
        if ((int)(i % c.lda) >= c.cols)
            c.w[i] = 0;
    const sq_ctx cx = sq_ctx_cpu();
    double *ga = gc_zeros(na), *gb = gc_zeros(nb);
    c.which = 0;
    sq_silu_backward_f64(&cx, ga, c.w, c.a, c.lda, c.rows, c.cols);
    double e_silu = gc_check(eobj, &c, c.a, ga, na);
    memset(ga, 0, na * sizeof *ga);
    c.which = 1;
    sq_gate_backward_f64(&cx, ga, gb, c.w, c.a, c.lda, c.b, c.ldb, c.rows, c.cols);
    double e_ga = gc_check(eobj, &c, c.a, ga, na), e_gb = gc_check(eobj, &c, c.b, gb, nb);
    gc_note("hstu_silu_gate_gradients", "silu", e_silu);
    gc_note("hstu_silu_gate_gradients", "gate da", e_ga);
    gc_note("hstu_silu_gate_gradients", "gate db", e_gb);
    CHECK(e_silu < GRAD_TOL);
    CHECK(e_ga < GRAD_TOL);
    CHECK(e_gb < GRAD_TOL);
    free(ga);
    free(gb);
    free(c.a);
    free(c.b);
    free(c.out);
    free(c.w);
}

/* ------------------------------------------------------------------------ */
/* The whole model (lib/model/hstu.c)                                       */

extern const sq_flat_def sq_flat_hstu;
extern const sq_model_def sq_model_hstu;

/* A config from option text, in storage aligned for any struct. */
typedef union {
    max_align_t align;
    unsigned char bytes[512];
} cfg_buf;

static int hstu_config(unit_ctx *t, cfg_buf *c, const char *given)
{
    sq_err e = {0};
    sq_data_dims d = {.n_items = 11};
    CHECK(sq_model_hstu.cfg_size <= sizeof c->bytes);
    int rc = sq_model_hstu.config(c->bytes, given, &d, &e);
    if (rc)
        printf("  hstu config: %s\n", e.msg);
    return rc;
}

/* Every tensor's gradient through flat.c's loss, each --target, CE and
 * BCE, one and two heads, dropout on (masks fixed by seed and step). */
UNIT_TEST(hstu_model_gradients)
{
    static const char *cfgs[] = {
        "dim=6\nheads=2\nlayers=2\nmax_len=8\ndropout=0.2\n",
        "dim=5\nheads=1\nlayers=1\nmax_len=5\ndropout=0\n",
    };
    static const int targets[] = {SQ_TARGET_ALL, SQ_TARGET_LAST, SQ_TARGET_RANDOM};
    double worst = 0;
    for (int k = 0; k < 2; k++) {
        cfg_buf c;
        CHECK_EQ(hstu_config(t, &c, cfgs[k]), 0);
        for (int i = 0; i < 3; i++)
            for (int loss = SQ_LOSS_CE; loss <= SQ_LOSS_BCE; loss++) {
                double err = flat_gradcheck(t, &sq_flat_hstu, c.bytes, targets[i], loss, 1e-6);
                worst = fmax(worst, err);
            }
    }
    gc_note("hstu_model_gradients", "worst over every tensor", worst);
}

/* Options out of range name themselves. */
UNIT_TEST(hstu_model_options)
{
    cfg_buf c;
    sq_err e = {0};
    sq_data_dims d = {.n_items = 11};
    CHECK_EQ(hstu_config(t, &c, NULL), 0);
    static const char *bad[][2] = {{"layers=0\n", "--layers"}, {"heads=0\n", "--heads"},
                                   {"dim=0\n", "--dim"},       {"dim=7\nheads=2\n", "--heads"},
                                   {"max_len=0\n", "--max-len"}, {"dropout=1\n", "--dropout"},
                                   {"ffn=4\n", "--ffn"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        e = (sq_err){0};
        CHECK_EQ(sq_model_hstu.config(c.bytes, bad[i][0], &d, &e), SQ_EX_USAGE);
        CHECK(strstr(e.msg, bad[i][1]) != NULL);
    }
}

/* The float model against the double one on the same parameters, with
 * dropout on (the masks are drawn in double in both builds), and the float
 * model bitwise the same for 1 and 2 threads. */
UNIT_TEST(hstu_model_float)
{
    cfg_buf c;
    CHECK_EQ(hstu_config(t, &c, "dim=8\nheads=2\nlayers=2\nmax_len=6\ndropout=0.2\n"), 0);
    static const int len[3] = {2, 6, 4}, ids[12] = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8};
    static const int rows[3] = {1, 7, 11};
    int off[4], pos[12];
    int T = sq_pack_offsets(off, len, 3);
    sq_pack_positions(pos, off, 3, 6);
    sq_packed b = {.B = 3, .T = T, .ids = (int *)ids, .off = off, .pos = pos, .n = 3,
                   .rows = (int *)rows, .views = 1};
    sq_flat_cap cap = {.B = 3, .T = T, .n = 3, .N = 6, .train = 1};
    sq_err e = {0};
    sq_ctx cx = sq_ctx_cpu();
    sq_flat_f64 md;
    sq_flat mf[2];
    void *wd = NULL, *wf[2] = {NULL, NULL};
    CHECK_EQ(sq_flat_alloc_f64(&md, &sq_flat_hstu, c.bytes, &cx, &e), 0);
    CHECK_EQ(sq_flat_hstu.d.work_alloc(&md, &cap, &wd, &e), 0);
    sq_flat_init_f64(&md, 5);
    const double *hd = sq_flat_hstu.d.forward(&md, wd, &b, 1, 9, 2);
    const float *hf[2];
    for (int th = 0; th < 2; th++) {
        cx.threads = th + 1;
        CHECK_EQ(sq_flat_alloc(&mf[th], &sq_flat_hstu, c.bytes, &cx, &e), 0);
        CHECK_EQ(sq_flat_hstu.f.work_alloc(&mf[th], &cap, &wf[th], &e), 0);
        for (size_t i = 0; i < md.ts.total; i++)
            mf[th].mem[i] = (float)md.mem[i];
        hf[th] = sq_flat_hstu.f.forward(&mf[th], wf[th], &b, 1, 9, 2);
    }
    double err = gc_rel_diff(hf[0], hd, 3 * 8);
    gc_note("hstu_model_float", "h float vs double", err);
    CHECK(err < F32_TOL);
    CHECK(memcmp(hf[0], hf[1], 3 * 8 * sizeof(float)) == 0);
    for (int th = 0; th < 2; th++) {
        sq_flat_hstu.f.work_free(wf[th]);
        sq_flat_free(&mf[th]);
    }
    sq_flat_hstu.d.work_free(wd);
    sq_flat_free_f64(&md);
}
