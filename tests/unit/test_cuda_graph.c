/* CUDA graphs (cuda/graph.cu): a step bracketed by sq_ctx_graph_begin/end
 * is recorded on its key's first step, captured on the next two and
 * replayed after; every step gives the eager step's bits on its own data.
 * A step whose launches depend on the batch (a scalar, an upload's size, an
 * extra op) or that reads a value back is refused, naming the node. */
#include <stdlib.h>
#include <string.h>

#include "adam.h"
#include "attn_linear.h"
#include "infonce.h"
#include "cuda_check.h"
#include "ops.h"

enum { GR_C = 8, GR_ROWS = 20 };

typedef struct {
    float *in, *w, *g, *h, *out;
} gr_bufs;

static int gr_alloc(cuda_env *g, gr_bufs *b, int n)
{
    b->in = cuda_zeros(g, GR_ROWS * GR_C);
    b->w = cuda_zeros(g, GR_C * GR_C);
    b->g = cuda_zeros(g, (size_t)n * GR_C);
    b->h = cuda_zeros(g, (size_t)n * GR_C);
    b->out = cuda_zeros(g, (size_t)n * GR_C);
    return b->in && b->w && b->g && b->h && b->out ? 0 : -1;
}

/* The step: rows staged, a gather, a GEMM, GELU, a scale by s, and the
 * scatter-add of the result back into the table's rows (its buckets follow
 * the rows' repeats, planned on the host, uploaded at a fixed size). */
static void gr_step(cuda_env *g, const gr_bufs *b, const int *rows, int n, float s)
{
    const void *host[1] = {rows};
    size_t bytes[1] = {(size_t)n * sizeof *rows};
    if (sq_gpu_stage(g->gpu, host, bytes, 1, &g->e))
        g->bad = 1;
    sq_gather_rows(&g->cx, b->g, b->in, rows, n, GR_C);
    sq_gemm(&g->cx, 0, 0, n, GR_C, GR_C, 1.0f, b->g, GR_C, b->w, GR_C, 0.0f, b->h, GR_C);
    sq_gelu_forward(&g->cx, b->out, b->h, (size_t)n * GR_C);
    sq_scale(&g->cx, b->out, (size_t)n * GR_C, s);
    sq_scatter_add_rows(&g->cx, b->in, b->out, rows, n, GR_C);
}

/* New inputs for step k: the table, the weights and the rows. */
static void gr_data(cuda_env *g, const gr_bufs *b, int k, int *rows, int n)
{
    float in[GR_ROWS * GR_C], w[GR_C * GR_C];
    sq_rng r;
    sq_rng_seed(&r, 7, (uint64_t)k);
    for (int i = 0; i < GR_ROWS * GR_C; i++)
        in[i] = (float)sq_rng_normal(&r);
    for (int i = 0; i < GR_C * GR_C; i++)
        w[i] = (float)sq_rng_normal(&r) * 0.3f;
    for (int i = 0; i < n; i++)
        rows[i] = (int)sq_rng_below(&r, GR_ROWS);
    if (sq_gpu_upload(g->gpu, b->in, in, sizeof in, &g->e) ||
        sq_gpu_upload(g->gpu, b->w, w, sizeof w, &g->e))
        g->bad = 1;
}

UNIT_TEST(test_cuda_graph_replays_eager_bits)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    enum { N1 = 12, N2 = 5, STEPS = 7 };
    gr_bufs b1, b2;
    CHECK_EQ(gr_alloc(&g, &b1, N1), 0);
    CHECK_EQ(gr_alloc(&g, &b2, N2), 0);
    float got[N1 * GR_C], want[N1 * GR_C], tab[GR_ROWS * GR_C], tab_want[GR_ROWS * GR_C];
    int rows[N1];
    for (int k = 0; k < STEPS && !g.bad; k++) {
        /* two keys in turn: each its own graph */
        int n = k % 3 == 2 ? N2 : N1;
        const gr_bufs *b = n == N1 ? &b1 : &b2;
        gr_data(&g, b, k, rows, n);
        CHECK_EQ(sq_ctx_graph_begin(&g.cx, (uint64_t)n, &g.e), 0);
        gr_step(&g, b, rows, n, 0.5f);
        CHECK_EQ(sq_ctx_graph_end(&g.cx, &g.e), 0);
        CHECK_EQ(cuda_down(&g, got, b->out, (size_t)n * GR_C), 0);
        CHECK_EQ(cuda_down(&g, tab, b->in, GR_ROWS * GR_C), 0);
        gr_data(&g, b, k, rows, n); /* the same step, eagerly */
        gr_step(&g, b, rows, n, 0.5f);
        CHECK_EQ(cuda_down(&g, want, b->out, (size_t)n * GR_C), 0);
        CHECK_EQ(cuda_down(&g, tab_want, b->in, GR_ROWS * GR_C), 0);
        CHECK(memcmp(got, want, (size_t)n * GR_C * sizeof *got) == 0);
        CHECK(memcmp(tab, tab_want, sizeof tab) == 0);
    }
    int keys = 0;
    long replays = 0;
    CHECK_EQ(sq_gpu_graph_stats(g.gpu, &keys, &replays, &g.e), 0);
    CHECK_EQ(keys, 2);
    CHECK_EQ(replays, 2); /* N1's steps 0 1 3 4 6: record, capture x2, 2 replays */
    cuda_close(&g);
}

/* A key whose first step outgrows the upload region (the scatter's CSR
 * of 3 n + 2 ints, over 64 KiB): the region grows mid-step, so the step's
 * log holds addresses of the old one; the key records again in a region
 * that fits, then captures and replays with the eager bits (a real run
 * once failed here, SASRec at batch 128: "op upload's launch differs"). */
UNIT_TEST(test_cuda_graph_region_grows)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    enum { N = 6000, STEPS = 6 };
    gr_bufs b;
    CHECK_EQ(gr_alloc(&g, &b, N), 0);
    float *got = malloc((size_t)N * GR_C * sizeof *got);
    float *want = malloc((size_t)N * GR_C * sizeof *want);
    int *rows = malloc(N * sizeof *rows);
    CHECK(got && want && rows);
    for (int k = 0; k < STEPS && !g.bad && got && want && rows; k++) {
        gr_data(&g, &b, k, rows, N);
        CHECK_EQ(sq_ctx_graph_begin(&g.cx, 3, &g.e), 0);
        gr_step(&g, &b, rows, N, 0.5f);
        CHECK_EQ(sq_ctx_graph_end(&g.cx, &g.e), 0);
        CHECK_EQ(cuda_down(&g, got, b.out, (size_t)N * GR_C), 0);
        gr_data(&g, &b, k, rows, N);
        gr_step(&g, &b, rows, N, 0.5f);
        CHECK_EQ(cuda_down(&g, want, b.out, (size_t)N * GR_C), 0);
        CHECK(memcmp(got, want, (size_t)N * GR_C * sizeof *got) == 0);
    }
    int keys = 0;
    long replays = 0;
    CHECK_EQ(sq_gpu_graph_stats(g.gpu, &keys, &replays, &g.e), 0);
    CHECK_EQ(replays, 2); /* recorded twice, captured twice, 2 replays */
    free(got);
    free(want);
    free(rows);
    cuda_close(&g);
}

/* One linear attention forward over B segments, its offsets staged first
 * with pad (a graph's step stages each array as an op upload, into the
 * key's region). */
static void gr_lattn(cuda_env *g, const int *off, int B, const int *pad, size_t n_pad,
                     const float *x, float *dc, float *ds, float *dy)
{
    enum { C = 8 };
    const void *host[2] = {off, pad};
    size_t bytes[2] = {(size_t)(B + 1) * sizeof *off, n_pad * sizeof *pad};
    if (sq_gpu_stage(g->gpu, host, bytes, 2, &g->e))
        g->bad = 1;
    sq_lattn_forward(&g->cx, SQ_LATTN_LINREC, dy, dc, ds, x, x + C, x + 2 * C, 3 * C, off, B, 1,
                     C, 1);
}

/* An op whose own upload grows the region after the batch's arrays were
 * staged into it moves them: a device address of them taken before that
 * upload is stale (linear attention's offsets once were: Blin at --max-len
 * 45 and up trained another model in a key's first step, reading freed
 * memory). 1000 segments of 2 rows: the offsets (4 KiB with alignment)
 * and the pad (60,000 bytes) fit the region's first 64 KiB, the pieces'
 * list (4 KiB) does not. */
UNIT_TEST(test_cuda_graph_lattn_region_grows)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    enum { B = 1000, C = 8, STEPS = 4, PAD = 15000 };
    static const int pad[PAD]; /* zeros */
    int T = 2 * B, *off = malloc((B + 1) * sizeof *off);
    float *x = malloc((size_t)T * 3 * C * sizeof *x), *got = malloc((size_t)T * C * sizeof *got);
    float *want = malloc((size_t)T * C * sizeof *want);
    CHECK(off && x && got && want);
    if (off && x && got && want) {
        for (int b = 0; b <= B; b++)
            off[b] = 2 * b;
        float *dx = cuda_zeros(&g, (size_t)T * 3 * C);
        float *dc = cuda_zeros(&g, sq_lattn_cache_size(SQ_LATTN_LINREC, off, B, 1, C));
        float *ds = cuda_zeros(&g, sq_lattn_gpu_scratch_size(SQ_LATTN_LINREC, off, B, 1, C));
        float *dy = cuda_zeros(&g, (size_t)T * C);
        sq_rng r;
        sq_rng_seed(&r, 11, 0);
        for (int k = 0; k < STEPS && !g.bad && dx && dc && ds && dy; k++) {
            for (size_t i = 0; i < (size_t)T * 3 * C; i++)
                x[i] = (float)sq_rng_normal(&r);
            if (sq_gpu_upload(g.gpu, dx, x, (size_t)T * 3 * C * sizeof *x, &g.e))
                g.bad = 1;
            CHECK_EQ(sq_ctx_graph_begin(&g.cx, 4, &g.e), 0);
            gr_lattn(&g, off, B, pad, PAD, dx, dc, ds, dy);
            CHECK_EQ(sq_ctx_graph_end(&g.cx, &g.e), 0);
            CHECK_EQ(cuda_down(&g, got, dy, (size_t)T * C), 0);
            gr_lattn(&g, off, B, pad, PAD, dx, dc, ds, dy); /* the same step, eagerly */
            CHECK_EQ(cuda_down(&g, want, dy, (size_t)T * C), 0);
            CHECK(memcmp(got, want, (size_t)T * C * sizeof *got) == 0);
        }
        int keys = 0;
        long replays = 0;
        CHECK_EQ(sq_gpu_graph_stats(g.gpu, &keys, &replays, &g.e), 0);
        CHECK_EQ(replays, 0); /* recorded twice (the region grew), captured twice */
    }
    free(off);
    free(x);
    free(got);
    free(want);
    cuda_close(&g);
}

/* Runs gr_step as key 1's steps 0.. with the scale of each step, then
 * `extra` (0 none, 1 a zero, 2 a norm read back) in the last, `grow` an
 * array staged one longer each step; the end's exit code, its message
 * into msg. */
static int gr_bad(unit_ctx *t, const float *s, int steps, int extra, int grow, char *msg,
                  size_t n_msg)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return -1;
    gr_bufs b;
    int rows[GR_ROWS], rc = 0;
    if (gr_alloc(&g, &b, GR_ROWS)) {
        cuda_close(&g);
        return -1;
    }
    for (int k = 0; k < steps && !rc; k++) {
        gr_data(&g, &b, 0, rows, GR_ROWS);
        rc = sq_ctx_graph_begin(&g.cx, 1, &g.e);
        gr_step(&g, &b, rows, GR_ROWS, s[k]);
        if (grow) /* a model's own array, one longer each step */
            sq_ctx_stage_add(&g.cx, rows, (size_t)(k + 1) * sizeof *rows);
        if (k == steps - 1 && extra == 1)
            sq_zero(&g.cx, b.h, GR_C);
        if (k == steps - 1 && extra == 2)
            sq_grad_norm(&g.cx, b.h, GR_C);
        rc = rc ? rc : sq_ctx_graph_end(&g.cx, &g.e);
    }
    snprintf(msg, n_msg, "%s", rc ? g.e.msg : "");
    g.bad = 0; /* the error was the point */
    cuda_close(&g);
    return rc;
}

UNIT_TEST(test_cuda_graph_refuses_batch_dependence)
{
    char msg[sizeof(((sq_err *)0)->msg)];
    float same[3] = {1, 1, 1}, varied[3] = {1, 2, 2};
    int rc = gr_bad(t, same, 3, 0, 0, msg, sizeof msg);
    if (rc < 0)
        return;
    CHECK_EQ(rc, 0);
    /* a scalar argument that changes: the capture of step 1 names it */
    CHECK_EQ(gr_bad(t, varied, 2, 0, 0, msg, sizeof msg), SQ_EX_SOFTWARE);
    CHECK(strstr(msg, "k_scale's launch differs from the key's first step") != NULL);
    /* one node more than the first step */
    CHECK_EQ(gr_bad(t, same, 2, 1, 0, msg, sizeof msg), SQ_EX_SOFTWARE);
    CHECK(strstr(msg, "one node more") != NULL);
    /* a value read back inside the step */
    CHECK_EQ(gr_bad(t, same, 1, 2, 0, msg, sizeof msg), SQ_EX_SOFTWARE);
    CHECK(strstr(msg, "read back to the host inside a graph's step") != NULL);
    /* an array staged at another length under the same key: the key does
     * not name the step's shapes */
    CHECK_EQ(gr_bad(t, same, 2, 0, 1, msg, sizeof msg), SQ_EX_SOFTWARE);
    CHECK(strstr(msg, "op upload's launch differs from the key's first step") != NULL);
}

/* On the CPU the bracket is a no-op. */
UNIT_TEST(test_cuda_graph_cpu_noop)
{
    sq_ctx cx = sq_ctx_cpu();
    sq_err e = {0};
    CHECK_EQ(sq_ctx_graph_begin(&cx, 42, &e), 0);
    CHECK_EQ(sq_ctx_graph_end(&cx, &e), 0);
}

/* The update's gate (sq_ctx_graph_gate): in a graph's step, an Adam update
 * after a loss above max_loss leaves the parameters and moments as they
 * were, on every kind of step (recorded, captured, replayed); under the
 * bound it updates them with the eager update's bits (a twin set of
 * parameters updated eagerly on those steps alone). */
UNIT_TEST(test_cuda_graph_gate)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    enum { U = 3, M = 2 * U, N = 16, STEPS = 6 };
    float S0[M * M], p0[N], grad[N], a[3][N], b[3][N];
    sq_rng r;
    sq_rng_seed(&r, 3, 0);
    for (int i = 0; i < M * M; i++)
        S0[i] = (float)sq_rng_normal(&r);
    for (int i = 0; i < N; i++) {
        p0[i] = (float)sq_rng_normal(&r);
        grad[i] = (float)sq_rng_normal(&r);
    }
    float *S = cuda_zeros(&g, M * M), *gr = cuda_up(&g, grad, N);
    float *x[3], *y[3]; /* param, m, v: the graph's and the eager twin's */
    for (int j = 0; j < 3; j++) {
        x[j] = j ? cuda_zeros(&g, N) : cuda_up(&g, p0, N);
        y[j] = j ? cuda_zeros(&g, N) : cuda_up(&g, p0, N);
    }
    sq_adam_cfg cfg = {.lr = 0.1, .beta1 = 0.9, .beta2 = 0.98, .eps = 1e-8};
    CHECK_EQ(sq_gpu_upload(g.gpu, S, S0, sizeof S0, &g.e), 0);
    double loss = sq_nce_softmax(&g.cx, S, U, NULL, 1.0); /* the same every step */
    CHECK(loss > 0 && isfinite(loss));
    for (int k = 0; k < STEPS && !g.bad; k++) {
        int up = k % 3 != 1; /* steps 1 and 4 above the bound */
        CHECK_EQ(sq_gpu_upload(g.gpu, S, S0, sizeof S0, &g.e), 0);
        CHECK_EQ(sq_ctx_graph_begin(&g.cx, 9, &g.e), 0);
        sq_nce_softmax(&g.cx, S, U, NULL, 1.0);
        sq_ctx_graph_gate(&g.cx, up ? 2 * loss : loss / 2);
        sq_adam_update(&g.cx, x[0], gr, x[1], x[2], N, &cfg, k + 1);
        CHECK_EQ(sq_ctx_graph_end(&g.cx, &g.e), 0);
        if (up)
            sq_adam_update(&g.cx, y[0], gr, y[1], y[2], N, &cfg, k + 1);
        for (int j = 0; j < 3; j++) {
            CHECK_EQ(cuda_down(&g, a[j], x[j], N), 0);
            CHECK_EQ(cuda_down(&g, b[j], y[j], N), 0);
            CHECK(memcmp(a[j], b[j], sizeof a[j]) == 0);
        }
    }
    CHECK(memcmp(a[0], p0, sizeof p0) != 0); /* it did update */
    cuda_close(&g);
}

/* A step's loss made of two values (sq_ctx_loss_mix: Blin's and CL4SRec's
 * steps): in a graph the device sums them in the host's order, one value
 * in their place, the host's bits; the gate reads that sum. */
UNIT_TEST(test_cuda_graph_loss_mix)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    enum { U = 3, M = 2 * U, STEPS = 5 };
    float S0[2][M * M];
    sq_rng r;
    sq_rng_seed(&r, 5, 0);
    for (int j = 0; j < 2; j++)
        for (int i = 0; i < M * M; i++)
            S0[j][i] = (float)sq_rng_normal(&r);
    float *S[2] = {cuda_zeros(&g, M * M), cuda_zeros(&g, M * M)};
    double wt[2] = {0.5, 0.1}, v[2];
    for (int j = 0; j < 2; j++) {
        CHECK_EQ(sq_gpu_upload(g.gpu, S[j], S0[j], sizeof S0[j], &g.e), 0);
        v[j] = sq_nce_softmax(&g.cx, S[j], U, NULL, 3.0);
    }
    double host = sq_ctx_loss_mix(&g.cx, wt, v, 2);
    CHECK(host == 0.5 * v[0] + 0.1 * v[1]); /* eagerly: the values read */
    for (int k = 0; k < STEPS && !g.bad; k++) {
        for (int j = 0; j < 2; j++) /* the softmax works in place */
            CHECK_EQ(sq_gpu_upload(g.gpu, S[j], S0[j], sizeof S0[j], &g.e), 0);
        CHECK_EQ(sq_ctx_graph_begin(&g.cx, 4, &g.e), 0);
        for (int j = 0; j < 2; j++)
            CHECK(sq_nce_softmax(&g.cx, S[j], U, NULL, 3.0) == 0); /* a placeholder */
        CHECK(sq_ctx_loss_mix(&g.cx, wt, (double[2]){0, 0}, 2) == 0);
        sq_ctx_graph_gate(&g.cx, k % 2 ? host / 2 : 0);
        CHECK_EQ(sq_ctx_graph_end(&g.cx, &g.e), 0);
        double got_v[4];
        int got = 0;
        CHECK_EQ(sq_ctx_graph_values(&g.cx, got_v, 4, &got, &g.e), 0);
        CHECK_EQ(got, 1);
        CHECK(got_v[0] == host);
    }
    /* more values mixed than the step kept: the sticky error */
    CHECK_EQ(sq_ctx_graph_begin(&g.cx, 5, &g.e), 0);
    sq_ctx_loss_mix(&g.cx, wt, v, 2);
    CHECK(sq_ctx_graph_end(&g.cx, &g.e) != 0);
    CHECK(strstr(g.e.msg, "a loss of 2 values after 0") != NULL);
    cuda_close(&g);
}
