/* HSTU on the GPU: its element-wise ops (cuda/k_hstu.cu) against their CPU
 * twins (attn_silu.c's sq_silu_* and sq_gate_*) through the CPU API on a
 * CUDA context (cuda_check.h), their forwards against the definitions
 * (tests/ref's ref_silu, ref_gate, in double from the same float inputs);
 * then the whole model (lib/model/hstu.c on flat.c): a training step's
 * loss and gradients, and scoring, on the GPU against the CPU. Skipped
 * without a backend. Gradient buffers start non-zero (the backwards ADD);
 * every GPU run is done twice: the same bits.
 *
 * SiLU and the gate: views of 1 x 1 to 37 x 45 elements (not multiples of
 * a block), row strides wider than the view (padding that must not move),
 * SiLU in place and not, inputs N(0, 3) and +-30, +-100 (both sides of the
 * sigmoid, exp past float's range), the gate's backward with da, db or
 * both. Built with --fmad=false, each element is the CPU's expression in
 * the CPU's order: the gate and its backward are the CPU's bits (tolerance
 * 0, no library call in them); SiLU's sigmoid calls expf, the C library's
 * on the CPU and CUDA's (within 2 ulp) on a GPU: 1e-6 absolute + 1e-5
 * relative against the CPU (measured 0 on the simulated device, whose
 * expf is the CPU's), the same against tests/ref (float against double:
 * measured 8.5e-7 absolute, on values up to 100). The gate against
 * tests/ref: one rounding, 1.2e-7 relative (measured 2.4e-7 absolute).
 *
 * The model (--dim 16 --heads 2 --layers 2 --max-len 8, dropout 0.2, CE
 * and BCE, --target all and last, the GPU in fp32): the step's loss within
 * 1e-5 relative of the CPU's (measured 1.8e-9 on the simulated device) and
 * every gradient within 1e-5 absolute + 1e-3 relative (measured 3e-8: the
 * GEMMs sum in another order; a real GPU's cuBLAS and expf more); scores
 * of a batch with a cold user and histories longer than --max-len within
 * 1e-4 absolute + 1e-4 relative of the CPU's (measured 2.2e-8). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attn_silu.h"
#include "batch.h"
#include "cuda_check.h"
#include "flat.h"
#include "gradcheck.h"
#include "model.h"
#include "ops.h"
#include "ref_ops.h"
#include "rng.h"
#include "sasrec.h" /* SQ_LOSS_CE */

#define SG_ATOL 1e-6 /* SiLU against the CPU and tests/ref */
#define SG_RTOL 1e-5
#define GATE_REF_RTOL 1.2e-7 /* the gate against tests/ref: one rounding */
#define STEP_LOSS_RTOL 1e-5
#define STEP_ATOL 1e-5 /* the model's gradients against the CPU's */
#define STEP_RTOL 1e-3
#define SCORE_ATOL 1e-4
#define SCORE_RTOL 1e-4

/* ------------------------------------------------------------------------ */
/* SiLU and the gate                                                        */

typedef struct {
    double silu_cpu, silu_ref, gate_ref;
} ew_worst;

/* SiLU on a rows x cols view of stride ld, in place or not. */
static void silu_case(unit_ctx *t, cuda_env *g, int rows, int cols, int ld, int inplace,
                      ew_worst *w)
{
    size_t n = (size_t)rows * ld;
    sq_rng r;
    sq_rng_seed(&r, (uint64_t)(rows * 131 + cols * 7 + ld), (uint64_t)inplace);
    float *x = cuda_randn(n, 3, &r), *out0 = cuda_randn(n, 1, &r), *dout = cuda_randn(n, 1, &r);
    float *dx0 = cuda_randn(n, 0.1, &r);
    static const float big[] = {30, -30, 100, -100, 0};
    for (size_t i = 0; x && i < 5 && i < n; i++)
        x[i * 7 % n] = big[i];
    sq_ctx c = sq_ctx_cpu();
    float *out = cuda_host_dup(inplace ? x : out0, n), *dx = cuda_host_dup(dx0, n);
    sq_silu_forward(&c, out, inplace ? out : x, ld, rows, cols);
    sq_silu_backward(&c, dx, dout, x, ld, rows, cols);
    float *gx = cuda_up(g, x, n), *gd = cuda_up(g, dout, n);
    float *hout = malloc(n * sizeof *hout), *hdx = malloc(n * sizeof *hdx);
    float *pout = malloc(n * sizeof *pout), *pdx = malloc(n * sizeof *pdx);
    char what[96];
    snprintf(what, sizeof what, "silu %dx%d ld %d in place %d", rows, cols, ld, inplace);
    for (int rep = 0; rep < 2; rep++) {
        float *go = cuda_up(g, inplace ? x : out0, n), *gdx = cuda_up(g, dx0, n);
        sq_silu_forward(&g->cx, go, inplace ? go : gx, ld, rows, cols);
        sq_silu_backward(&g->cx, gdx, gd, gx, ld, rows, cols);
        CHECK(cuda_down(g, hout, go, n) == 0 && cuda_down(g, hdx, gdx, n) == 0);
        CHECK(cuda_close_to(hout, out, n, SG_ATOL, SG_RTOL, what));
        CHECK(cuda_close_to(hdx, dx, n, SG_ATOL, SG_RTOL, what));
        w->silu_cpu = fmax(w->silu_cpu, cuda_max_diff(hout, out, NULL, n));
        w->silu_cpu = fmax(w->silu_cpu, cuda_max_diff(hdx, dx, NULL, n));
        if (rep) {
            CHECK(memcmp(pout, hout, n * sizeof *hout) == 0);
            CHECK(memcmp(pdx, hdx, n * sizeof *hdx) == 0);
        }
        memcpy(pout, hout, n * sizeof *hout);
        memcpy(pdx, hdx, n * sizeof *hdx);
    }
    /* outside the view nothing moves */
    const float *before = inplace ? x : out0;
    for (int i = 0; i < rows; i++)
        for (int j = cols; j < ld; j++) {
            CHECK(hout[(size_t)i * ld + j] == before[(size_t)i * ld + j]);
            CHECK(hdx[(size_t)i * ld + j] == dx0[(size_t)i * ld + j]);
        }
    /* the forward against the definition */
    double *xd = cuda_to_double(x, n), *ref = cuda_to_double(before, n);
    CHECK(xd && ref);
    if (xd && ref) {
        ref_silu(ref, xd, ld, rows, cols);
        snprintf(what, sizeof what, "silu %dx%d ld %d vs tests/ref", rows, cols, ld);
        CHECK(cuda_close_to_ref(hout, ref, n, SG_ATOL, SG_RTOL, what));
        w->silu_ref = fmax(w->silu_ref, cuda_max_diff(hout, NULL, ref, n));
    }
    free(xd); free(ref);
    free(x); free(out0); free(dout); free(dx0); free(out); free(dx);
    free(hout); free(hdx); free(pout); free(pdx);
}

/* The gate out [rows, cols] = a (stride lda) * b (stride ldb); the
 * backward into da, db or both (grads: bit 0 da, bit 1 db). */
static void gate_case(unit_ctx *t, cuda_env *g, int rows, int cols, int lda, int ldb, int grads,
                      ew_worst *w)
{
    size_t na = (size_t)rows * lda, nb = (size_t)rows * ldb, no = (size_t)rows * cols;
    sq_rng r;
    sq_rng_seed(&r, (uint64_t)(rows * 17 + cols * 3 + lda), (uint64_t)(ldb * 4 + grads));
    float *a = cuda_randn(na, 1, &r), *b = cuda_randn(nb, 1, &r), *dout = cuda_randn(no, 1, &r);
    float *da0 = cuda_randn(na, 0.1, &r), *db0 = cuda_randn(nb, 0.1, &r);
    sq_ctx c = sq_ctx_cpu();
    float *out = malloc(no * sizeof *out), *da = cuda_host_dup(da0, na);
    float *db = cuda_host_dup(db0, nb);
    sq_gate_forward(&c, out, a, lda, b, ldb, rows, cols);
    sq_gate_backward(&c, grads & 1 ? da : NULL, grads & 2 ? db : NULL, dout, a, lda, b, ldb,
                     rows, cols);
    float *ga = cuda_up(g, a, na), *gb = cuda_up(g, b, nb), *gd = cuda_up(g, dout, no);
    float *hout = malloc(no * sizeof *hout), *hda = malloc(na * sizeof *hda);
    float *hdb = malloc(nb * sizeof *hdb), *pout = malloc(no * sizeof *pout);
    char what[96];
    snprintf(what, sizeof what, "gate %dx%d lda %d ldb %d grads %d", rows, cols, lda, ldb,
             grads);
    for (int rep = 0; rep < 2; rep++) {
        float *go = cuda_zeros(g, no), *gda = cuda_up(g, da0, na), *gdb = cuda_up(g, db0, nb);
        sq_gate_forward(&g->cx, go, ga, lda, gb, ldb, rows, cols);
        sq_gate_backward(&g->cx, grads & 1 ? gda : NULL, grads & 2 ? gdb : NULL, gd, ga, lda,
                         gb, ldb, rows, cols);
        CHECK(cuda_down(g, hout, go, no) == 0 && cuda_down(g, hda, gda, na) == 0 &&
              cuda_down(g, hdb, gdb, nb) == 0);
        CHECK(cuda_same_bits(hout, out, no, what)); /* the CPU's bits */
        CHECK(cuda_same_bits(hda, da, na, what));   /* da, or da0 untouched when NULL */
        CHECK(cuda_same_bits(hdb, db, nb, what));
        if (rep)
            CHECK(memcmp(pout, hout, no * sizeof *hout) == 0);
        memcpy(pout, hout, no * sizeof *hout);
    }
    if (!(grads & 1))
        CHECK(cuda_same_bits(hda, da0, na, "gate: da NULL left alone"));
    if (!(grads & 2))
        CHECK(cuda_same_bits(hdb, db0, nb, "gate: db NULL left alone"));
    double *ad = cuda_to_double(a, na), *bd = cuda_to_double(b, nb);
    double *ref = malloc(no * sizeof *ref);
    CHECK(ad && bd && ref);
    if (ad && bd && ref) {
        ref_gate(ref, ad, lda, bd, ldb, rows, cols);
        snprintf(what, sizeof what, "gate %dx%d vs tests/ref", rows, cols);
        CHECK(cuda_close_to_ref(hout, ref, no, 0, GATE_REF_RTOL, what));
        w->gate_ref = fmax(w->gate_ref, cuda_max_diff(hout, NULL, ref, no));
    }
    free(ad); free(bd); free(ref);
    free(a); free(b); free(dout); free(da0); free(db0); free(out); free(da); free(db);
    free(hout); free(hda); free(hdb); free(pout);
}

UNIT_TEST(cuda_hstu_silu_gate)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    static const int shapes[][2] = {{1, 1}, {5, 3}, {37, 45}, {12, 64}};
    ew_worst w = {0, 0, 0};
    for (int s = 0; s < 4; s++) {
        int rows = shapes[s][0], cols = shapes[s][1];
        for (int inplace = 0; inplace < 2; inplace++)
            silu_case(t, &g, rows, cols, cols + (s % 2) * 5 + inplace, inplace, &w);
        for (int grads = 1; grads <= 3; grads++)
            gate_case(t, &g, rows, cols, 4 * cols + grads, cols + (s + grads) % 3, grads, &w);
    }
    /* an empty view launches nothing and fails nothing */
    sq_silu_forward(&g.cx, NULL, NULL, 4, 0, 4);
    sq_gate_backward(&g.cx, NULL, NULL, NULL, NULL, 4, NULL, 4, 3, 0);
    CHECK_EQ(sq_gpu_sync(g.gpu, &g.e), 0);
    gc_note("cuda_hstu_silu_gate", "silu, silu' vs cpu", w.silu_cpu);
    gc_note("cuda_hstu_silu_gate", "silu vs tests/ref", w.silu_ref);
    gc_note("cuda_hstu_silu_gate", "gate vs tests/ref", w.gate_ref);
    cuda_close(&g);
}

/* ------------------------------------------------------------------------ */
/* The whole model                                                          */

extern const sq_model_def sq_model_hstu;

enum { HU = 6, HMAXL = 11, HITEMS = 13 };

/* A config from option text, in storage aligned for any struct. */
typedef union {
    max_align_t align;
    unsigned char bytes[512];
} hs_cfg;

/* Six users of 2 to 11 items over HITEMS items (longer than max_len 8). */
typedef struct {
    uint32_t items[HU * HMAXL], ntr[HU];
    uint64_t start[HU];
    sq_seqs s;
} hs_data;

static void hs_data_make(hs_data *d)
{
    sq_rng r;
    sq_rng_seed(&r, 21, 0);
    size_t at = 0;
    for (int u = 0; u < HU; u++) {
        d->start[u] = at;
        d->ntr[u] = (uint32_t)(2 + (u * 4 + 3) % (HMAXL - 1)); /* 5, 9, 3, 7, 11, 5 */
        for (uint32_t k = 0; k < d->ntr[u]; k++)
            d->items[at++] = 1 + (uint32_t)sq_rng_below(&r, HITEMS);
    }
    d->s = (sq_seqs){.n_users = HU, .n_items = HITEMS, .items = d->items, .start = d->start,
                     .n_train = d->ntr, .user_id = NULL};
}

/* One training step of the model on cx: the loss and the gradients (host
 * copy into grads, ts->total floats); 0 when it ran. */
static int hs_step(unit_ctx *t, const sq_ctx *cx, const void *cfg, const hs_data *d,
                   const sq_step_opts *so, double *loss, float **grads, size_t *n)
{
    const sq_model_def *def = &sq_model_hstu;
    sq_net net;
    sq_batcher bt;
    void *work = NULL;
    sq_err e = {0};
    int count = 0, rc = -1;
    memset(&net, 0, sizeof net);
    memset(&bt, 0, sizeof bt);
    *grads = NULL;
    if (def->net_alloc(&net, cfg, cx, &e) || def->batcher(&bt, &d->s, net.cfg, so, &e) ||
        def->work_alloc(&net, &bt, &work, &e)) {
        printf("  hstu step: %s\n", e.msg);
        goto out;
    }
    def->net_init(&net, 5);
    *n = net.ts->total;
    sq_zero(cx, net.grads, *n);
    sq_batcher_shuffle(&bt, 0);
    const sq_packed *pb = sq_batcher_get(&bt, 0, 0);
    if (sq_packed_stage(cx, pb, &e))
        goto out;
    *loss = def->step(&net, work, pb, so, 3, &count);
    if (!(*grads = malloc(*n * sizeof **grads)) ||
        sq_ctx_download(cx, *grads, net.grads, *n * sizeof **grads, &e))
        goto out;
    CHECK(count > 0);
    rc = 0;
out:
    if (rc && e.msg[0])
        printf("  hstu step: %s\n", e.msg);
    if (work)
        def->work_free(work);
    def->net_free(&net);
    sq_batcher_free(&bt);
    return rc;
}

static int hs_config(unit_ctx *t, hs_cfg *c, const char *given)
{
    sq_err e = {0};
    sq_data_dims d = {.n_items = HITEMS};
    CHECK(sq_model_hstu.cfg_size <= sizeof c->bytes);
    int rc = sq_model_hstu.config(c->bytes, given, &d, &e);
    if (rc)
        printf("  hstu config: %s\n", e.msg);
    return rc;
}

static const char hs_given[] = "dim=16\nheads=2\nlayers=2\nmax_len=8\ndropout=0.2\n";

UNIT_TEST(cuda_hstu_step)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    hs_cfg c;
    hs_data d;
    hs_data_make(&d);
    CHECK_EQ(hs_config(t, &c, hs_given), 0);
    CHECK_EQ(sq_model_hstu.gpu_check(c.bytes, &g.e), 0);
    sq_ctx cpu = sq_ctx_cpu();
    cpu.threads = 1;
    static const int targets[] = {SQ_TARGET_ALL, SQ_TARGET_LAST};
    double wl = 0, wg = 0;
    for (int k = 0; k < 2; k++)
        for (int loss = SQ_LOSS_CE; loss <= SQ_LOSS_BCE; loss++) {
            sq_step_opts so = {.loss = loss, .neg = 2, .target = targets[k], .batch = HU,
                               .seed = 9};
            double lc = 0, lg[2] = {0, 0};
            float *gc = NULL, *gg[2] = {NULL, NULL};
            size_t n = 0, ng = 0;
            CHECK_EQ(hs_step(t, &cpu, c.bytes, &d, &so, &lc, &gc, &n), 0);
            for (int rep = 0; rep < 2; rep++)
                CHECK_EQ(hs_step(t, &g.cx, c.bytes, &d, &so, &lg[rep], &gg[rep], &ng), 0);
            if (gc && gg[0] && gg[1] && n == ng) {
                char what[64];
                snprintf(what, sizeof what, "hstu step target %d loss %d", targets[k], loss);
                CHECK(fabs(lg[0] - lc) <= STEP_LOSS_RTOL * fabs(lc));
                CHECK(cuda_close_to(gg[0], gc, n, STEP_ATOL, STEP_RTOL, what));
                CHECK(lg[0] == lg[1]);
                CHECK(memcmp(gg[0], gg[1], n * sizeof(float)) == 0); /* the same bits */
                wl = fmax(wl, fabs(lg[0] - lc) / fabs(lc));
                wg = fmax(wg, cuda_max_diff(gg[0], gc, NULL, n));
            }
            free(gc);
            free(gg[0]);
            free(gg[1]);
        }
    gc_note("cuda_hstu_step", "loss vs cpu (relative)", wl);
    gc_note("cuda_hstu_step", "gradients vs cpu", wg);
    cuda_close(&g);
}

/* The scores of hist from the model net on cx (its initial parameters),
 * through the scoring view (flat.c's scores). */
static int hs_scores(unit_ctx *t, const sq_ctx *cx, const void *cfg, const sq_batch *hist,
                     float *scores)
{
    const sq_model_def *def = &sq_model_hstu;
    sq_net net;
    sq_model mm;
    sq_err e = {0};
    memset(&net, 0, sizeof net);
    int rc = def->net_alloc(&net, cfg, cx, &e);
    if (!rc) {
        def->net_init(&net, 5);
        def->view(&mm, &net);
        rc = mm.scores(&mm, hist, scores, &e);
    }
    if (rc)
        printf("  hstu scores: %s\n", e.msg);
    CHECK_EQ(rc, 0);
    def->net_free(&net);
    return rc;
}

UNIT_TEST(cuda_hstu_scores)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    hs_cfg c;
    hs_data d;
    hs_data_make(&d);
    CHECK_EQ(hs_config(t, &c, hs_given), 0);
    /* the users' histories, a cold user (no item) among them */
    enum { B = HU + 1 };
    uint32_t off[B], len[B];
    for (int u = 0; u < HU; u++) {
        off[u] = (uint32_t)d.start[u];
        len[u] = d.ntr[u];
    }
    off[HU] = 0;
    len[HU] = 0;
    sq_batch hist = {d.items, off, len, B, NULL, NULL};
    size_t ns = (size_t)B * (HITEMS + 1);
    float *sc = calloc(ns, sizeof *sc), *sg = calloc(ns, sizeof *sg);
    float *sg2 = calloc(ns, sizeof *sg2), *one = calloc(HITEMS + 1, sizeof *one);
    sq_ctx cpu = sq_ctx_cpu();
    cpu.threads = 2;
    CHECK(sc && sg && sg2 && one);
    if (sc && sg && sg2 && one && !hs_scores(t, &cpu, c.bytes, &hist, sc) &&
        !hs_scores(t, &g.cx, c.bytes, &hist, sg) && !hs_scores(t, &g.cx, c.bytes, &hist, sg2)) {
        CHECK(cuda_close_to(sg, sc, ns, SCORE_ATOL, SCORE_RTOL, "hstu scores"));
        CHECK(memcmp(sg, sg2, ns * sizeof *sg) == 0); /* two GPU runs, the same bits */
        for (int b = 0; b < B; b++)
            CHECK(sg[(size_t)b * (HITEMS + 1)] == 0); /* padding */
        /* the CPU: a user's scores are the same bits alone as in the batch */
        sq_batch alone = {d.items, off + 3, len + 3, 1, NULL, NULL};
        if (!hs_scores(t, &cpu, c.bytes, &alone, one))
            CHECK(memcmp(one, sc + 3 * (HITEMS + 1), (HITEMS + 1) * sizeof *one) == 0);
        gc_note("cuda_hstu_scores", "scores vs cpu", cuda_max_diff(sg, sc, NULL, ns));
    }
    free(sc);
    free(sg);
    free(sg2);
    free(one);
    cuda_close(&g);
}

/* --device cuda: heads over the GPU's 128 dimensions are refused (64),
 * naming them; gru4rec's config runs there whatever it is. */
UNIT_TEST(cuda_hstu_gpu_check)
{
    hs_cfg c;
    sq_err e = {0};
    CHECK_EQ(hs_config(t, &c, "dim=256\nheads=2\n"), 0);
    CHECK_EQ(sq_model_hstu.gpu_check(c.bytes, &e), 0);
    CHECK_EQ(hs_config(t, &c, "dim=258\nheads=1\n"), 0);
    CHECK_EQ(sq_model_hstu.gpu_check(c.bytes, &e), SQ_EX_USAGE);
    CHECK(strstr(e.msg, "258 dimensions") != NULL);
    /* gru4rec's flat def takes sq_flat_gpu_any: every config runs there
     * (the refusal of a model without kernels: device.bats, elastic) */
    extern const sq_model_def sq_model_gru4rec;
    sq_data_dims d = {.n_items = HITEMS};
    memset(&e, 0, sizeof e);
    CHECK(sq_model_gru4rec.cfg_size <= sizeof c.bytes);
    CHECK_EQ(sq_model_gru4rec.config(c.bytes, NULL, &d, &e), 0);
    CHECK_EQ(sq_model_gru4rec.gpu_check(c.bytes, &e), 0);
}
