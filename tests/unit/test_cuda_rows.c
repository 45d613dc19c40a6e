/* The CUDA element-wise and row ops (cuda/k_elem.cu, cuda/k_rows.cu)
 * against their CPU twins (ops.h 1-7 and the row helpers), through the CPU
 * API on a CUDA context (cuda_check.h); skipped without a backend.
 *
 * Shapes are odd: T = 37 rows, C = 40 (not a multiple of a warp), F = 72,
 * ids and positions repeating. Gradient buffers start non-zero (the
 * backwards ADD). The backend is built with --fmad=false, so where the GPU
 * does the CPU's arithmetic in the CPU's order the bits must be equal:
 * copies, fills, ReLU, dropout (mask byte for byte: the same counter
 * generator), residuals, embeddings and every scatter-add (the sources of
 * a row added in the CPU's order). Tolerances elsewhere: GELU 2e-6 (erff
 * here, vec.h's polynomial erf on the CPU, within 6e-7); LayerNorm 1e-5
 * (a warp's sums in another order than the CPU's lanes); linear layers
 * and the column sums 1e-5 absolute + 1e-5 relative (cuBLAS's and the
 * tiles' sum orders; --precision fp32 for these tests). Every op runs
 * twice: the same bits. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_check.h"
#include "ops.h"
#include "rng.h"

#define RT 37
#define RC 40
#define RF 72
#define RV 23 /* table rows: ids 0..22 repeat over 37 tokens */

static float *randn(size_t n, double s, sq_rng *r)
{
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(s * sq_rng_normal(r));
    return x;
}

static int *randi(int n, int below, sq_rng *r)
{
    int *x = malloc((size_t)n * sizeof *x);
    for (int i = 0; i < n; i++)
        x[i] = (int)sq_rng_below(r, (uint64_t)below);
    return x;
}

static int same_bits(const float *a, const float *b, size_t n, const char *what)
{
    if (memcmp(a, b, n * sizeof *a) == 0)
        return 1;
    return cuda_close_to(a, b, n, 0, 0, what);
}

/* stages host integer arrays, as the trainer does once a step */
static int stage(cuda_env *g, const int *a, size_t na, const int *b, size_t nb)
{
    const void *host[2] = {a, b};
    size_t bytes[2] = {na * sizeof(int), nb * sizeof(int)};
    return sq_gpu_stage(g->gpu, host, bytes, b ? 2 : 1, &g->e);
}

UNIT_TEST(cuda_elementwise)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    sq_rng r;
    sq_rng_seed(&r, 11, 0);
    size_t n = (size_t)RT * RF;
    float *x = randn(n, 1.5, &r), *d = randn(n, 1, &r), *g0 = randn(n, 0.1, &r);
    float *cpu = malloc(n * sizeof *cpu), *gpu = malloc(n * sizeof *gpu);
    sq_ctx c = sq_ctx_cpu();
    float *dx = cuda_up(&g, x, n), *dd = cuda_up(&g, d, n), *dout = cuda_zeros(&g, n);
    for (int op = 0; op < 4; op++) { /* gelu, gelu', relu, relu' */
        for (int rep = 0; rep < 2; rep++) {
            float *dg = cuda_up(&g, g0, n);
            memcpy(cpu, g0, n * sizeof *cpu);
            switch (op) {
            case 0: sq_gelu_forward(&c, cpu, x, n); sq_gelu_forward(&g.cx, dg, dx, n); break;
            case 1: sq_gelu_backward(&c, cpu, d, x, n); sq_gelu_backward(&g.cx, dg, dd, dx, n); break;
            case 2: sq_relu_forward(&c, cpu, x, n); sq_relu_forward(&g.cx, dg, dx, n); break;
            default: sq_relu_backward(&c, cpu, d, x, n); sq_relu_backward(&g.cx, dg, dd, dx, n);
            }
            CHECK(cuda_down(&g, gpu, dg, n) == 0);
            if (op < 2)
                CHECK(cuda_close_to(gpu, cpu, n, 2e-6, 2e-6, op ? "gelu'" : "gelu"));
            else
                CHECK(same_bits(gpu, cpu, n, op == 2 ? "relu" : "relu'"));
        }
    }
    /* residual: out = a + b; backward adds into both */
    float *ca = malloc(n * sizeof *ca), *ga = malloc(n * sizeof *ga);
    sq_residual_forward(&c, cpu, x, d, n);
    sq_residual_forward(&g.cx, dout, dx, dd, n);
    CHECK(cuda_down(&g, gpu, dout, n) == 0 && same_bits(gpu, cpu, n, "residual"));
    memcpy(cpu, g0, n * sizeof *cpu);
    memcpy(ca, x, n * sizeof *ca);
    float *dg = cuda_up(&g, g0, n), *dga = cuda_up(&g, x, n);
    sq_residual_backward(&c, ca, cpu, d, n);
    sq_residual_backward(&g.cx, dga, dg, dd, n);
    CHECK(cuda_down(&g, gpu, dg, n) == 0 && same_bits(gpu, cpu, n, "residual db"));
    CHECK(cuda_down(&g, ga, dga, n) == 0 && same_bits(ga, ca, n, "residual da"));
    /* 2-D copies, adds (also a broadcast row: ld 0) and fills */
    memcpy(cpu, g0, n * sizeof *cpu);
    dg = cuda_up(&g, g0, n);
    sq_copy2d(&c, cpu + 3, RF, x, RC, RT - 2, RC - 5);
    sq_copy2d(&g.cx, dg + 3, RF, dx, RC, RT - 2, RC - 5);
    sq_add2d(&c, cpu, RF, d, 0, RT, 17);
    sq_add2d(&g.cx, dg, RF, dd, 0, RT, 17);
    sq_add2d(&c, cpu + 1, RF, d, RC, RT - 1, RC);
    sq_add2d(&g.cx, dg + 1, RF, dd, RC, RT - 1, RC);
    sq_fill2d(&c, cpu + 50, RF, RT, 3, -2.5f);
    sq_fill2d(&g.cx, dg + 50, RF, RT, 3, -2.5f);
    sq_copy(&c, cpu + n - 9, x, 7);
    sq_copy(&g.cx, dg + n - 9, dx, 7);
    sq_zero(&c, cpu + 60, 5);
    sq_zero(&g.cx, dg + 60, 5);
    CHECK(cuda_down(&g, gpu, dg, n) == 0 && same_bits(gpu, cpu, n, "copy2d/add2d/fill2d"));
    free(ca); free(ga);
    free(x); free(d); free(g0); free(cpu); free(gpu);
    cuda_close(&g);
}

UNIT_TEST(cuda_dropout_same_masks)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    sq_rng r;
    sq_rng_seed(&r, 12, 0);
    size_t n = (size_t)RT * RF;
    float *x = randn(n, 1, &r), *d = randn(n, 1, &r), *g0 = randn(n, 0.1, &r);
    float *cpu = malloc(n * sizeof *cpu), *gpu = malloc(n * sizeof *gpu);
    uint8_t *cm = malloc(n), *gm = malloc(n);
    sq_ctx c = sq_ctx_cpu();
    float *dx = cuda_up(&g, x, n), *dd = cuda_up(&g, d, n), *dout = cuda_zeros(&g, n);
    uint8_t *dm = cuda_up_bytes(&g, NULL, n);
    const float ps[] = {0.5f, 0.1f, 0.0f};
    for (int k = 0; k < 3; k++) {
        sq_dropout_forward(&c, cpu, cm, x, RT, RF, ps[k], 7, 1000 + k, 3);
        sq_dropout_forward(&g.cx, dout, dm, dx, RT, RF, ps[k], 7, 1000 + k, 3);
        CHECK(cuda_down(&g, gpu, dout, n) == 0 && same_bits(gpu, cpu, n, "dropout out"));
        CHECK(cuda_down_bytes(&g, gm, dm, n) == 0 && memcmp(gm, cm, n) == 0);
        if (ps[k] > 0) {
            memcpy(cpu, g0, n * sizeof *cpu);
            float *dg = cuda_up(&g, g0, n);
            sq_dropout_backward(&c, cpu, d, cm, n, ps[k]);
            sq_dropout_backward(&g.cx, dg, dd, dm, n, ps[k]);
            CHECK(cuda_down(&g, gpu, dg, n) == 0 && same_bits(gpu, cpu, n, "dropout back"));
        }
    }
    free(x); free(d); free(g0); free(cpu); free(gpu); free(cm); free(gm);
    cuda_close(&g);
}

/* the embedding, positions, gather and scatter; staged = the ids are the
 * step's staged host arrays (CSR scatter), else device arrays (the
 * column-walk fallback) */
static void rows_case(unit_ctx *t, int staged)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    sq_rng r;
    sq_rng_seed(&r, 13, 0);
    size_t tc = (size_t)RT * RC, vc = (size_t)RV * RC;
    float *table = randn(vc, 1, &r), *dout = randn(tc, 1, &r), *gt0 = randn(vc, 0.1, &r);
    int *ids = randi(RT, RV, &r), *pos = randi(RT, 9, &r);
    ids[0] = 0; /* padding */
    ids[5] = ids[6] = ids[20] = 4; /* repeats */
    float *cpu = malloc(vc * sizeof *cpu), *gpu = malloc(vc * sizeof *gpu);
    float *co = malloc(tc * sizeof *co), *go = malloc(tc * sizeof *go);
    sq_ctx c = sq_ctx_cpu();
    const int *di = ids, *dp = pos;
    if (staged)
        CHECK_EQ(stage(&g, ids, RT, pos, RT), 0);
    else {
        di = cuda_up_bytes(&g, ids, RT * sizeof(int));
        dp = cuda_up_bytes(&g, pos, RT * sizeof(int));
    }
    float *dtab = cuda_up(&g, table, vc), *dd = cuda_up(&g, dout, tc), *dx = cuda_zeros(&g, tc);
    for (int rep = 0; rep < 2; rep++) {
        sq_embedding_forward(&c, co, table, ids, RT, RC, 2.5f);
        sq_embedding_forward(&g.cx, dx, dtab, di, RT, RC, 2.5f);
        CHECK(cuda_down(&g, go, dx, tc) == 0 && same_bits(go, co, tc, "embedding"));
        sq_posemb_forward(&c, co, co, table, pos, RT, RC);
        sq_posemb_forward(&g.cx, dx, dx, dtab, dp, RT, RC);
        CHECK(cuda_down(&g, go, dx, tc) == 0 && same_bits(go, co, tc, "posemb"));
        sq_gather_rows(&c, co, table, ids, 11, RC);
        sq_gather_rows(&g.cx, dx, dtab, di, 11, RC);
        CHECK(cuda_down(&g, go, dx, 11 * RC) == 0 && same_bits(go, co, 11 * RC, "gather"));
        /* scatters into a non-zero table */
        memcpy(cpu, gt0, vc * sizeof *cpu);
        float *dg = cuda_up(&g, gt0, vc);
        sq_embedding_backward(&c, cpu, dout, ids, RT, RC, 0.5f);
        sq_embedding_backward(&g.cx, dg, dd, di, RT, RC, 0.5f);
        sq_scatter_add_rows(&c, cpu, dout, ids, RT, RC);
        sq_scatter_add_rows(&g.cx, dg, dd, di, RT, RC);
        sq_scatter_add_rows(&c, cpu, dout, NULL, 9, RC);
        sq_scatter_add_rows(&g.cx, dg, dd, NULL, 9, RC);
        CHECK(cuda_down(&g, gpu, dg, vc) == 0 && same_bits(gpu, cpu, vc, "scatters"));
        memcpy(cpu, gt0, vc * sizeof *cpu);
        memcpy(co, dout, tc * sizeof *co);
        dg = cuda_up(&g, gt0, vc);
        float *dgi = cuda_up(&g, dout, tc);
        sq_posemb_backward(&c, co, cpu, dout, pos, RT, RC);
        sq_posemb_backward(&g.cx, dgi, dg, dd, dp, RT, RC);
        CHECK(cuda_down(&g, gpu, dg, vc) == 0 && same_bits(gpu, cpu, vc, "posemb dpe"));
        CHECK(cuda_down(&g, go, dgi, tc) == 0 && same_bits(go, co, tc, "posemb dinp"));
    }
    free(table); free(dout); free(gt0); free(ids); free(pos);
    free(cpu); free(gpu); free(co); free(go);
    cuda_close(&g);
}

UNIT_TEST(cuda_rows_staged) { rows_case(t, 1); }
UNIT_TEST(cuda_rows_device_ids) { rows_case(t, 0); }

UNIT_TEST(cuda_layernorm_linear)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    CHECK_EQ(sq_gpu_set_precision(g.gpu, 0, &g.e), 0);
    sq_rng r;
    sq_rng_seed(&r, 14, 0);
    size_t tc = (size_t)RT * RC, tf = (size_t)RT * RF, fc = (size_t)RF * RC;
    float *x = randn(tc, 2, &r), *w = randn(RC, 1, &r), *b = randn(RC, 1, &r);
    float *dout = randn(tc, 1, &r), *g0 = randn(tc, 0.1, &r);
    float *W = randn(fc, 0.2, &r), *bF = randn(RF, 1, &r), *dF = randn(tf, 1, &r);
    float *c1 = malloc(tf * sizeof *c1), *g1 = malloc(tf * sizeof *g1);
    float cm[RT], cr[RT], gm[RT], gr[RT], cw[RF], gw[RF], cb[RF], gb[RF];
    sq_ctx c = sq_ctx_cpu();
    float *dx = cuda_up(&g, x, tc), *dw = cuda_up(&g, w, RC), *db = cuda_up(&g, b, RC);
    float *dd = cuda_up(&g, dout, tc), *dW = cuda_up(&g, W, fc), *dbF = cuda_up(&g, bF, RF);
    float *ddF = cuda_up(&g, dF, tf), *dy = cuda_zeros(&g, tf);
    float *dmean = cuda_zeros(&g, RT), *drstd = cuda_zeros(&g, RT);
    for (int rep = 0; rep < 2; rep++) {
        sq_layernorm_forward(&c, c1, cm, cr, x, w, b, RT, RC, 1e-5f);
        sq_layernorm_forward(&g.cx, dy, dmean, drstd, dx, dw, db, RT, RC, 1e-5f);
        CHECK(cuda_down(&g, g1, dy, tc) == 0 && cuda_close_to(g1, c1, tc, 1e-5, 1e-5, "ln out"));
        CHECK(cuda_down(&g, gm, dmean, RT) == 0 && cuda_close_to(gm, cm, RT, 1e-6, 1e-5, "ln mean"));
        CHECK(cuda_down(&g, gr, drstd, RT) == 0 && cuda_close_to(gr, cr, RT, 1e-6, 1e-5, "ln rstd"));
        /* backward into non-zero dinp, dw, db */
        memcpy(c1, g0, tc * sizeof *c1);
        memcpy(cw, b, RC * sizeof *cw);
        memcpy(cb, w, RC * sizeof *cb);
        float *gdi = cuda_up(&g, g0, tc), *gdw = cuda_up(&g, b, RC), *gdb = cuda_up(&g, w, RC);
        sq_layernorm_backward(&c, c1, cw, cb, dout, x, w, cm, cr, RT, RC);
        sq_layernorm_backward(&g.cx, gdi, gdw, gdb, dd, dx, dw, dmean, drstd, RT, RC);
        CHECK(cuda_down(&g, g1, gdi, tc) == 0 && cuda_close_to(g1, c1, tc, 1e-5, 1e-4, "ln dx"));
        CHECK(cuda_down(&g, gw, gdw, RC) == 0 && cuda_close_to(gw, cw, RC, 1e-5, 1e-5, "ln dw"));
        CHECK(cuda_down(&g, gb, gdb, RC) == 0 && cuda_close_to(gb, cb, RC, 1e-5, 1e-5, "ln db"));
        /* linear C -> F and its backward */
        sq_linear_forward(&c, c1, x, W, bF, RT, RC, RF);
        sq_linear_forward(&g.cx, dy, dx, dW, dbF, RT, RC, RF);
        CHECK(cuda_down(&g, g1, dy, tf) == 0 && cuda_close_to(g1, c1, tf, 1e-5, 1e-5, "linear"));
        float *cdx = malloc(tc * sizeof *cdx), *cdW = malloc(fc * sizeof *cdW);
        float *gdx = malloc(tc * sizeof *gdx), *gdW = malloc(fc * sizeof *gdW);
        memcpy(cdx, g0, tc * sizeof *cdx);
        memcpy(cdW, W, fc * sizeof *cdW);
        memcpy(cb, bF, RF * sizeof *cb);
        float *ex = cuda_up(&g, g0, tc), *eW = cuda_up(&g, W, fc), *eb = cuda_up(&g, bF, RF);
        sq_linear_backward(&c, cdx, cdW, cb, dF, x, W, RT, RC, RF);
        sq_linear_backward(&g.cx, ex, eW, eb, ddF, dx, dW, RT, RC, RF);
        CHECK(cuda_down(&g, gdx, ex, tc) == 0 && cuda_close_to(gdx, cdx, tc, 1e-5, 1e-5, "lin dx"));
        CHECK(cuda_down(&g, gdW, eW, fc) == 0 && cuda_close_to(gdW, cdW, fc, 1e-5, 1e-5, "lin dW"));
        CHECK(cuda_down(&g, gb, eb, RF) == 0 && cuda_close_to(gb, cb, RF, 1e-5, 1e-5, "lin db"));
        free(cdx); free(cdW); free(gdx); free(gdW);
    }
    free(x); free(w); free(b); free(dout); free(g0); free(W); free(bF); free(dF);
    free(c1); free(g1);
    cuda_close(&g);
}
