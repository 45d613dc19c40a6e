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
 * twice: the same bits.
 *
 * The forwards are also checked against the ops' definitions (tests/ref,
 * in double, from the same float inputs): 0 where the float result is
 * exact (ReLU, gather: no rounding at all), else 1e-5 absolute + 1e-4
 * relative, float32 against double: a rounding or two per element (scale,
 * add, erff) is a few float ulps (6e-8 relative each), LayerNorm's sums
 * over C = 40 and the linear layer's 40 products a few more (2e-6 at most
 * here); a wrong row, scale or mask is off by the inputs' size, 1e-1 or
 * more. The embedding's and the positions' backwards are scatter-adds and
 * a residual, checked against those references; the other backwards
 * (GELU', ReLU', dropout, residual, LayerNorm, linear) have none (tests/ref
 * holds forwards: the backwards are checked against finite differences on
 * the CPU, here against the CPU's), nor do the copies and fills. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_check.h"
#include "ops.h"
#include "ref_ops.h"
#include "rng.h"

#define RT 37
#define RC 40
#define RF 72
#define RV 23 /* table rows: ids 0..22 repeat over 37 tokens */
#define REF_ATOL 1e-5 /* against tests/ref: float32 against double */
#define REF_RTOL 1e-4

static int *randi(int n, int below, sq_rng *r)
{
    int *x = malloc((size_t)n * sizeof *x);
    for (int i = 0; i < n; i++)
        x[i] = (int)sq_rng_below(r, (uint64_t)below);
    return x;
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
    float *x = cuda_randn(n, 1.5, &r), *d = cuda_randn(n, 1, &r), *g0 = cuda_randn(n, 0.1, &r);
    float *cpu = malloc(n * sizeof *cpu), *gpu = malloc(n * sizeof *gpu);
    sq_ctx c = sq_ctx_cpu();
    float *dx = cuda_up(&g, x, n), *dd = cuda_up(&g, d, n), *dout = cuda_zeros(&g, n);
    /* the forwards by their definitions (tests/ref) */
    double *xd = cuda_to_double(x, n), *d64 = cuda_to_double(d, n);
    double *rgelu = malloc(n * sizeof *rgelu), *rrelu = malloc(n * sizeof *rrelu);
    double *rres = malloc(n * sizeof *rres);
    int ok = xd && d64 && rgelu && rrelu && rres;
    CHECK(ok);
    if (ok) {
        ref_gelu(rgelu, xd, n);
        ref_relu(rrelu, xd, n);
        ref_residual(rres, xd, d64, n);
    }
    static const char *name[] = {"gelu", "gelu'", "relu", "relu'", "gelu' written"};
    for (int op = 0; op < 5; op++) { /* gelu, gelu', relu, relu', gelu' written over g0 */
        for (int rep = 0; rep < 2; rep++) {
            float *dg = cuda_up(&g, g0, n);
            memcpy(cpu, g0, n * sizeof *cpu);
            switch (op) {
            case 0: sq_gelu_forward(&c, cpu, x, n); sq_gelu_forward(&g.cx, dg, dx, n); break;
            case 1: sq_gelu_backward(&c, cpu, d, x, n); sq_gelu_backward(&g.cx, dg, dd, dx, n); break;
            case 2: sq_relu_forward(&c, cpu, x, n); sq_relu_forward(&g.cx, dg, dx, n); break;
            case 3:
                sq_relu_backward(&c, cpu, d, x, n);
                sq_relu_backward(&g.cx, dg, dd, dx, n);
                break;
            default:
                sq_gelu_backward_to(&c, cpu, d, x, n);
                sq_gelu_backward_to(&g.cx, dg, dd, dx, n);
            }
            CHECK(cuda_down(&g, gpu, dg, n) == 0);
            if (op == 2 || op == 3)
                CHECK(cuda_same_bits(gpu, cpu, n, name[op]));
            else
                CHECK(cuda_close_to(gpu, cpu, n, 2e-6, 2e-6, name[op]));
            if (ok && op == 0)
                CHECK(cuda_close_to_ref(gpu, rgelu, n, REF_ATOL, REF_RTOL, "gelu vs tests/ref"));
            if (ok && op == 2) /* max(x, 0) of a float is that float */
                CHECK(cuda_close_to_ref(gpu, rrelu, n, 0, 0, "relu vs tests/ref"));
        }
    }
    /* residual: out = a + b; backward adds into both */
    float *ca = malloc(n * sizeof *ca), *ga = malloc(n * sizeof *ga);
    sq_residual_forward(&c, cpu, x, d, n);
    sq_residual_forward(&g.cx, dout, dx, dd, n);
    CHECK(cuda_down(&g, gpu, dout, n) == 0 && cuda_same_bits(gpu, cpu, n, "residual"));
    CHECK(ok && cuda_close_to_ref(gpu, rres, n, REF_ATOL, REF_RTOL, "residual vs tests/ref"));
    memcpy(cpu, g0, n * sizeof *cpu);
    memcpy(ca, x, n * sizeof *ca);
    float *dg = cuda_up(&g, g0, n), *dga = cuda_up(&g, x, n);
    sq_residual_backward(&c, ca, cpu, d, n);
    sq_residual_backward(&g.cx, dga, dg, dd, n);
    CHECK(cuda_down(&g, gpu, dg, n) == 0 && cuda_same_bits(gpu, cpu, n, "residual db"));
    CHECK(cuda_down(&g, ga, dga, n) == 0 && cuda_same_bits(ga, ca, n, "residual da"));
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
    CHECK(cuda_down(&g, gpu, dg, n) == 0 && cuda_same_bits(gpu, cpu, n, "copy2d/add2d/fill2d"));
    free(ca); free(ga);
    free(xd); free(d64); free(rgelu); free(rrelu); free(rres);
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
    float *x = cuda_randn(n, 1, &r), *d = cuda_randn(n, 1, &r), *g0 = cuda_randn(n, 0.1, &r);
    float *cpu = malloc(n * sizeof *cpu), *gpu = malloc(n * sizeof *gpu);
    uint8_t *cm = malloc(n), *gm = malloc(n);
    sq_ctx c = sq_ctx_cpu();
    float *dx = cuda_up(&g, x, n), *dd = cuda_up(&g, d, n), *dout = cuda_zeros(&g, n);
    uint8_t *dm = cuda_up_bytes(&g, NULL, n);
    double *xd = cuda_to_double(x, n), *ref = malloc(n * sizeof *ref);
    CHECK(xd && ref);
    const float ps[] = {0.5f, 0.1f, 0.0f};
    for (int k = 0; k < 3; k++) {
        sq_dropout_forward(&c, cpu, cm, x, RT, RF, ps[k], 7, 1000 + k, 3);
        sq_dropout_forward(&g.cx, dout, dm, dx, RT, RF, ps[k], 7, 1000 + k, 3);
        CHECK(cuda_down(&g, gpu, dout, n) == 0 && cuda_same_bits(gpu, cpu, n, "dropout out"));
        CHECK(cuda_down_bytes(&g, gm, dm, n) == 0 && memcmp(gm, cm, n) == 0);
        /* the definition (tests/ref) with the GPU's own mask */
        if (xd && ref) {
            ref_dropout(ref, xd, gm, n, ps[k]);
            CHECK(cuda_close_to_ref(gpu, ref, n, REF_ATOL, REF_RTOL, "dropout vs tests/ref"));
        }
        if (ps[k] > 0) {
            memcpy(cpu, g0, n * sizeof *cpu);
            float *dg = cuda_up(&g, g0, n);
            sq_dropout_backward(&c, cpu, d, cm, n, ps[k]);
            sq_dropout_backward(&g.cx, dg, dd, dm, n, ps[k]);
            CHECK(cuda_down(&g, gpu, dg, n) == 0 && cuda_same_bits(gpu, cpu, n, "dropout back"));
        }
    }
    free(xd); free(ref);
    free(x); free(d); free(g0); free(cpu); free(gpu); free(cm); free(gm);
    cuda_close(&g);
}

/* The fused dropouts (k_elem.cu's k_dropout_fused) give the CPU's masks
 * and bits: res + dropout(x) and dropout(relu(x)), at p 0.5, 0.1 and 0;
 * and the latter's backward (k_relu_dropout_back). */
UNIT_TEST(cuda_dropout_fused)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    sq_rng r;
    sq_rng_seed(&r, 13, 0);
    size_t n = (size_t)RT * RF;
    float *x = cuda_randn(n, 1, &r), *res = cuda_randn(n, 1, &r);
    float *cpu = malloc(n * sizeof *cpu), *gpu = malloc(n * sizeof *gpu);
    uint8_t *cm = malloc(n), *gm = malloc(n);
    CHECK(x && res && cpu && gpu && cm && gm);
    sq_ctx c = sq_ctx_cpu();
    float *dx = cuda_up(&g, x, n), *dres = cuda_up(&g, res, n), *dout = cuda_zeros(&g, n);
    uint8_t *dm = cuda_up_bytes(&g, NULL, n);
    const float ps[] = {0.5f, 0.1f, 0.0f};
    for (int k = 0; k < 6 && !g.bad && x && res && cpu && gpu && cm && gm; k++) {
        float p = ps[k % 3];
        if (k < 3) {
            sq_dropout_add_forward(&c, cpu, cm, res, x, RT, RF, p, 7, 50 + k, 2);
            sq_dropout_add_forward(&g.cx, dout, dm, dres, dx, RT, RF, p, 7, 50 + k, 2);
        } else {
            sq_relu_dropout_forward(&c, cpu, cm, x, RT, RF, p, 7, 50 + k, 2);
            sq_relu_dropout_forward(&g.cx, dout, dm, dx, RT, RF, p, 7, 50 + k, 2);
        }
        CHECK(cuda_down(&g, gpu, dout, n) == 0 && cuda_same_bits(gpu, cpu, n, "fused dropout"));
        CHECK(cuda_down_bytes(&g, gm, dm, n) == 0 && memcmp(gm, cm, n) == 0);
        if (k < 3 && p > 0) { /* dropout's backward into dinp, not added (res: garbage) */
            float *dg = cuda_up(&g, res, n);
            memset(cpu, 0, n * sizeof *cpu);
            sq_dropout_backward(&c, cpu, x, cm, n, p);
            sq_dropout_backward_to(&g.cx, dg, dx, dm, n, p);
            CHECK(cuda_down(&g, gpu, dg, n) == 0 &&
                  cuda_same_bits(gpu, cpu, n, "dropout backward into"));
        }
        if (k >= 3 && p > 0) { /* the ReLU's backward through the dropout, written over res */
            memcpy(cpu, res, n * sizeof *cpu);
            float *dg = cuda_up(&g, res, n);
            sq_relu_dropout_backward_to(&c, cpu, x, cm, res, n, p);
            sq_relu_dropout_backward_to(&g.cx, dg, dx, dm, dres, n, p);
            CHECK(cuda_down(&g, gpu, dg, n) == 0 &&
                  cuda_same_bits(gpu, cpu, n, "fused relu-dropout backward"));
        }
    }
    free(x); free(res); free(cpu); free(gpu); free(cm); free(gm);
    cuda_close(&g);
}

/* rows_case's results by the definitions (tests/ref), from its float
 * inputs: the embedding (scale 2.5) with the positions added, the gather of
 * 11 rows, the scatters into gt0 (the embedding's backward is the
 * scatter-add of 0.5 dout over the non-padding ids, ops.h 1), and the
 * positions' backward (dpe: gt0 plus dout scattered by position; dinp:
 * dout plus dout) */
typedef struct {
    double emb[RT * RC], pos[RT * RC], gat[11 * RC], scat[RV * RC], dpe[RV * RC];
    double dinp[RT * RC];
} rows_ref;

static rows_ref *rows_ref_make(const float *table, const float *dout, const float *gt0,
                               const int *ids, const int *pos)
{
    size_t tc = (size_t)RT * RC, vc = (size_t)RV * RC;
    rows_ref *rf = malloc(sizeof *rf);
    double *tab = cuda_to_double(table, vc), *d = cuda_to_double(dout, tc);
    double *half = malloc(tc * sizeof *half);
    if (rf && tab && d && half) {
        ref_embedding(rf->emb, tab, ids, RT, RC, 2.5);
        ref_posemb(rf->pos, rf->emb, tab, pos, RT, RC);
        ref_gather_rows(rf->gat, tab, ids, 11, RC);
        int nz[RT], k = 0;
        for (int i = 0; i < RT; i++)
            if (ids[i]) {
                for (int c = 0; c < RC; c++)
                    half[(size_t)k * RC + c] = 0.5 * d[(size_t)i * RC + c];
                nz[k++] = ids[i];
            }
        for (size_t i = 0; i < vc; i++)
            rf->scat[i] = rf->dpe[i] = gt0[i];
        ref_scatter_add_rows(rf->scat, half, nz, k, RC);
        ref_scatter_add_rows(rf->scat, d, ids, RT, RC);
        ref_scatter_add_rows(rf->scat, d, NULL, 9, RC);
        ref_scatter_add_rows(rf->dpe, d, pos, RT, RC);
        ref_residual(rf->dinp, d, d, tc);
    } else {
        free(rf);
        rf = NULL;
    }
    free(tab); free(d); free(half);
    return rf;
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
    float *table = cuda_randn(vc, 1, &r), *dout = cuda_randn(tc, 1, &r);
    float *gt0 = cuda_randn(vc, 0.1, &r);
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
    rows_ref *rf = rows_ref_make(table, dout, gt0, ids, pos);
    CHECK(rf != NULL);
    for (int rep = 0; rep < 2 && rf; rep++) {
        sq_embedding_forward(&c, co, table, ids, RT, RC, 2.5f);
        sq_embedding_forward(&g.cx, dx, dtab, di, RT, RC, 2.5f);
        CHECK(cuda_down(&g, go, dx, tc) == 0 && cuda_same_bits(go, co, tc, "embedding"));
        CHECK(cuda_close_to_ref(go, rf->emb, tc, REF_ATOL, REF_RTOL, "embedding vs tests/ref"));
        sq_posemb_forward(&c, co, co, table, pos, RT, RC);
        sq_posemb_forward(&g.cx, dx, dx, dtab, dp, RT, RC);
        CHECK(cuda_down(&g, go, dx, tc) == 0 && cuda_same_bits(go, co, tc, "posemb"));
        CHECK(cuda_close_to_ref(go, rf->pos, tc, REF_ATOL, REF_RTOL, "posemb vs tests/ref"));
        sq_gather_rows(&c, co, table, ids, 11, RC);
        sq_gather_rows(&g.cx, dx, dtab, di, 11, RC);
        CHECK(cuda_down(&g, go, dx, 11 * RC) == 0 && cuda_same_bits(go, co, 11 * RC, "gather"));
        CHECK(cuda_close_to_ref(go, rf->gat, 11 * RC, 0, 0, "gather vs tests/ref")); /* copies */
        /* scatters into a non-zero table */
        memcpy(cpu, gt0, vc * sizeof *cpu);
        float *dg = cuda_up(&g, gt0, vc);
        sq_embedding_backward(&c, cpu, dout, ids, RT, RC, 0.5f);
        sq_embedding_backward(&g.cx, dg, dd, di, RT, RC, 0.5f);
        sq_scatter_add_rows(&c, cpu, dout, ids, RT, RC);
        sq_scatter_add_rows(&g.cx, dg, dd, di, RT, RC);
        sq_scatter_add_rows(&c, cpu, dout, NULL, 9, RC);
        sq_scatter_add_rows(&g.cx, dg, dd, NULL, 9, RC);
        CHECK(cuda_down(&g, gpu, dg, vc) == 0 && cuda_same_bits(gpu, cpu, vc, "scatters"));
        CHECK(cuda_close_to_ref(gpu, rf->scat, vc, REF_ATOL, REF_RTOL, "scatters vs tests/ref"));
        memcpy(cpu, gt0, vc * sizeof *cpu);
        memcpy(co, dout, tc * sizeof *co);
        dg = cuda_up(&g, gt0, vc);
        float *dgi = cuda_up(&g, dout, tc);
        sq_posemb_backward(&c, co, cpu, dout, pos, RT, RC);
        sq_posemb_backward(&g.cx, dgi, dg, dd, dp, RT, RC);
        CHECK(cuda_down(&g, gpu, dg, vc) == 0 && cuda_same_bits(gpu, cpu, vc, "posemb dpe"));
        CHECK(cuda_close_to_ref(gpu, rf->dpe, vc, REF_ATOL, REF_RTOL, "posemb dpe vs tests/ref"));
        CHECK(cuda_down(&g, go, dgi, tc) == 0 && cuda_same_bits(go, co, tc, "posemb dinp"));
        CHECK(cuda_close_to_ref(go, rf->dinp, tc, REF_ATOL, REF_RTOL, "posemb dinp vs tests/ref"));
    }
    free(rf);
    free(table); free(dout); free(gt0); free(ids); free(pos);
    free(cpu); free(gpu); free(co); free(go);
    cuda_close(&g);
}

UNIT_TEST(cuda_rows_staged) { rows_case(t, 1); }
UNIT_TEST(cuda_rows_device_ids) { rows_case(t, 0); }

/* Scatter-adds whose staged rows increase (k_rows.cu's one-writer kernel,
 * no buckets) and whose rows are distinct but not in order (the CSR): the
 * CPU's bits either way; the embedding's with id 0 first (skipped) */
UNIT_TEST(cuda_scatter_distinct_rows)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    sq_rng r;
    sq_rng_seed(&r, 17, 0);
    enum { N = 9 };
    int inc[N] = {0, 1, 2, 5, 7, 11, 12, 19, 22}, perm[N] = {3, 9, 1, 22, 0, 14, 6, 2, 18};
    size_t vc = (size_t)RV * RC, nc = (size_t)N * RC;
    float *in = cuda_randn(nc, 1, &r), *gt0 = cuda_randn(vc, 0.1, &r);
    float *cpu = malloc(vc * sizeof *cpu), *gpu = malloc(vc * sizeof *gpu);
    sq_ctx c = sq_ctx_cpu();
    CHECK_EQ(stage(&g, inc, N, perm, N), 0);
    float *dg = cuda_up(&g, gt0, vc), *din = cuda_up(&g, in, nc);
    memcpy(cpu, gt0, vc * sizeof *cpu);
    for (int k = 0; k < 2; k++) {
        sq_scatter_add_rows(&c, cpu, in, k ? perm : inc, N, RC);
        sq_scatter_add_rows(&g.cx, dg, din, k ? perm : inc, N, RC);
        sq_embedding_backward(&c, cpu, in, k ? perm : inc, N, RC, 0.5f);
        sq_embedding_backward(&g.cx, dg, din, k ? perm : inc, N, RC, 0.5f);
    }
    CHECK(cuda_down(&g, gpu, dg, vc) == 0 && cuda_same_bits(gpu, cpu, vc, "distinct scatters"));
    free(in); free(gt0); free(cpu); free(gpu);
    cuda_close(&g);
}

/* sq_scatter_rows (the ranks' row-sparse sum puts its packed rows back):
 * the listed rows overwritten, the others kept, the GPU's bits the CPU's,
 * and a gather then a scatter of the same list the identity */
UNIT_TEST(cuda_scatter_rows)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    enum { NS = 6 };
    const int list[NS] = {7, 2, 22, 0, 15, 9}; /* distinct, unordered */
    sq_rng r;
    sq_rng_seed(&r, 17, 0);
    size_t vc = (size_t)RV * RC, pc = (size_t)NS * RC;
    float *table = cuda_randn(vc, 1, &r), *in = cuda_randn(pc, 1, &r);
    float *cpu = malloc(vc * sizeof *cpu), *gpu = malloc(vc * sizeof *gpu);
    float *back = malloc(vc * sizeof *back), *pk = malloc(pc * sizeof *pk);
    sq_ctx c = sq_ctx_cpu();
    memcpy(cpu, table, vc * sizeof *cpu);
    sq_scatter_rows(&c, cpu, in, list, NS, RC);
    int listed[RV] = {0};
    for (int i = 0; i < NS; i++)
        listed[list[i]] = i + 1;
    int naive = 1;
    for (int v = 0; v < RV; v++)
        for (int k = 0; k < RC; k++)
            naive &= cpu[(size_t)v * RC + k] ==
                     (listed[v] ? in[(size_t)(listed[v] - 1) * RC + k] : table[(size_t)v * RC + k]);
    CHECK(naive);
    float *dt = cuda_up(&g, table, vc), *di = cuda_up(&g, in, pc);
    const int *dl = cuda_up_bytes(&g, list, sizeof list);
    sq_scatter_rows(&g.cx, dt, di, dl, NS, RC);
    CHECK(cuda_down(&g, gpu, dt, vc) == 0 && cuda_same_bits(gpu, cpu, vc, "scatter_rows"));
    /* the round trip: gather the listed rows, scatter them back */
    memcpy(back, table, vc * sizeof *back);
    sq_gather_rows(&c, pk, table, list, NS, RC);
    sq_scatter_rows(&c, back, pk, list, NS, RC);
    CHECK(memcmp(back, table, vc * sizeof *back) == 0);
    free(table); free(in); free(cpu); free(gpu); free(back); free(pk);
    cuda_close(&g);
}

/* LayerNorm's and the linear layer's backwards, adding or _to */
typedef void (*ln_back_fn)(const sq_ctx *cx, float *dinp, float *dw, float *db, const float *dout,
                           const float *inp, const float *w, const float *mean,
                           const float *rstd, int T, int C);
typedef void (*lin_back_fn)(const sq_ctx *cx, float *dinp, float *dw, float *db,
                            const float *dout, const float *inp, const float *w, int T, int C,
                            int OC);

UNIT_TEST(cuda_layernorm_linear)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    sq_rng r;
    sq_rng_seed(&r, 14, 0);
    size_t tc = (size_t)RT * RC, tf = (size_t)RT * RF, fc = (size_t)RF * RC;
    float *x = cuda_randn(tc, 2, &r), *w = cuda_randn(RC, 1, &r), *b = cuda_randn(RC, 1, &r);
    float *dout = cuda_randn(tc, 1, &r), *g0 = cuda_randn(tc, 0.1, &r);
    float *W = cuda_randn(fc, 0.2, &r), *bF = cuda_randn(RF, 1, &r), *dF = cuda_randn(tf, 1, &r);
    float *c1 = malloc(tf * sizeof *c1), *g1 = malloc(tf * sizeof *g1);
    float cm[RT], cr[RT], gm[RT], gr[RT], cw[RF], gw[RF], cb[RF], gb[RF];
    sq_ctx c = sq_ctx_cpu();
    float *dx = cuda_up(&g, x, tc), *dw = cuda_up(&g, w, RC), *db = cuda_up(&g, b, RC);
    float *dd = cuda_up(&g, dout, tc), *dW = cuda_up(&g, W, fc), *dbF = cuda_up(&g, bF, RF);
    float *ddF = cuda_up(&g, dF, tf), *dy = cuda_zeros(&g, tf);
    float *dmean = cuda_zeros(&g, RT), *drstd = cuda_zeros(&g, RT);
    /* the forwards by their definitions (tests/ref) */
    double *xd = cuda_to_double(x, tc), *wd = cuda_to_double(w, RC), *bd = cuda_to_double(b, RC);
    double *Wd = cuda_to_double(W, fc), *bFd = cuda_to_double(bF, RF);
    double *rln = malloc(tc * sizeof *rln), *rlin = malloc(tf * sizeof *rlin);
    int ok = xd && wd && bd && Wd && bFd && rln && rlin;
    CHECK(ok);
    if (ok) {
        ref_layernorm(rln, xd, wd, bd, RT, RC, 1e-5f);
        ref_linear(rlin, xd, Wd, bFd, RT, RC, RF);
    }
    for (int rep = 0; rep < 2 && ok; rep++) {
        sq_layernorm_forward(&c, c1, cm, cr, x, w, b, RT, RC, 1e-5f);
        sq_layernorm_forward(&g.cx, dy, dmean, drstd, dx, dw, db, RT, RC, 1e-5f);
        CHECK(cuda_down(&g, g1, dy, tc) == 0 && cuda_close_to(g1, c1, tc, 1e-5, 1e-5, "ln out"));
        CHECK(cuda_close_to_ref(g1, rln, tc, REF_ATOL, REF_RTOL, "ln out vs tests/ref"));
        CHECK(cuda_down(&g, gm, dmean, RT) == 0 &&
              cuda_close_to(gm, cm, RT, 1e-6, 1e-5, "ln mean"));
        CHECK(cuda_down(&g, gr, drstd, RT) == 0 &&
              cuda_close_to(gr, cr, RT, 1e-6, 1e-5, "ln rstd"));
        /* backward into non-zero dinp, dw, db; then the _to form, dinp
         * written over garbage (x), dw and db added */
        for (int to = 0; to < 2; to++) {
            const float *d0 = to ? x : g0;
            ln_back_fn lnb = to ? sq_layernorm_backward_to : sq_layernorm_backward;
            memcpy(c1, d0, tc * sizeof *c1);
            memcpy(cw, b, RC * sizeof *cw);
            memcpy(cb, w, RC * sizeof *cb);
            float *gdi = cuda_up(&g, d0, tc), *gdw = cuda_up(&g, b, RC);
            float *gdb = cuda_up(&g, w, RC);
            lnb(&c, c1, cw, cb, dout, x, w, cm, cr, RT, RC);
            lnb(&g.cx, gdi, gdw, gdb, dd, dx, dw, dmean, drstd, RT, RC);
            CHECK(cuda_down_close(&g, g1, gdi, c1, tc, 1e-5, 1e-4, "ln dx"));
            CHECK(cuda_down_close(&g, gw, gdw, cw, RC, 1e-5, 1e-5, "ln dw"));
            CHECK(cuda_down_close(&g, gb, gdb, cb, RC, 1e-5, 1e-5, "ln db"));
        }
        /* linear C -> F and its backward */
        sq_linear_forward(&c, c1, x, W, bF, RT, RC, RF);
        sq_linear_forward(&g.cx, dy, dx, dW, dbF, RT, RC, RF);
        CHECK(cuda_down(&g, g1, dy, tf) == 0 && cuda_close_to(g1, c1, tf, 1e-5, 1e-5, "linear"));
        CHECK(cuda_close_to_ref(g1, rlin, tf, REF_ATOL, REF_RTOL, "linear vs tests/ref"));
        float *cdx = malloc(tc * sizeof *cdx), *cdW = malloc(fc * sizeof *cdW);
        float *gdx = malloc(tc * sizeof *gdx), *gdW = malloc(fc * sizeof *gdW);
        for (int to = 0; to < 2 && cdx && cdW && gdx && gdW; to++) {
            const float *d0 = to ? x : g0;
            lin_back_fn linb = to ? sq_linear_backward_to : sq_linear_backward;
            memcpy(cdx, d0, tc * sizeof *cdx);
            memcpy(cdW, W, fc * sizeof *cdW);
            memcpy(cb, bF, RF * sizeof *cb);
            float *ex = cuda_up(&g, d0, tc), *eW = cuda_up(&g, W, fc), *eb = cuda_up(&g, bF, RF);
            linb(&c, cdx, cdW, cb, dF, x, W, RT, RC, RF);
            linb(&g.cx, ex, eW, eb, ddF, dx, dW, RT, RC, RF);
            CHECK(cuda_down_close(&g, gdx, ex, cdx, tc, 1e-5, 1e-5, "lin dx"));
            CHECK(cuda_down_close(&g, gdW, eW, cdW, fc, 1e-5, 1e-5, "lin dW"));
            CHECK(cuda_down_close(&g, gb, eb, cb, RF, 1e-5, 1e-5, "lin db"));
        }
        free(cdx); free(cdW); free(gdx); free(gdW);
    }
    free(xd); free(wd); free(bd); free(Wd); free(bFd); free(rln); free(rlin);
    free(x); free(w); free(b); free(dout); free(g0); free(W); free(bF); free(dF);
    free(c1); free(g1);
    cuda_close(&g);
}

/* The column sums of long batches (k_rows.cu's two passes: groups of rows
 * into the backend's workspace, then the groups): LayerNorm's dw and db
 * and a linear layer's db over 3000 rows (24 groups) against the CPU,
 * and the same bits twice. */
UNIT_TEST(cuda_colsum_long)
{
    enum { LT = 3000, LC = 40, LI = 8 };
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    sq_rng r;
    sq_rng_seed(&r, 15, 0);
    size_t tc = (size_t)LT * LC, ti = (size_t)LT * LI;
    float *x = cuda_randn(tc, 1, &r), *w = cuda_randn(LC, 1, &r), *b = cuda_randn(LC, 1, &r);
    float *dout = cuda_randn(tc, 1, &r), *xi = cuda_randn(ti, 1, &r);
    float *W = cuda_randn((size_t)LC * LI, 0.3, &r);
    float *cdi = calloc(tc, sizeof *cdi), *cdxi = calloc(ti, sizeof *cdxi);
    float *cdW = calloc((size_t)LC * LI, sizeof *cdW);
    float *cm = malloc(LT * sizeof *cm), *cr = malloc(LT * sizeof *cr), *y = malloc(tc * sizeof *y);
    float cw[LC] = {0}, cb[LC] = {0}, lb[LC] = {0}, gv[2][3][LC];
    int ok = x && w && b && dout && xi && W && cdi && cdxi && cdW && cm && cr && y;
    CHECK(ok);
    sq_ctx c = sq_ctx_cpu();
    if (ok) {
        sq_layernorm_forward(&c, y, cm, cr, x, w, b, LT, LC, 1e-5f);
        sq_layernorm_backward(&c, cdi, cw, cb, dout, x, w, cm, cr, LT, LC);
        sq_linear_backward(&c, cdxi, cdW, lb, dout, xi, W, LT, LI, LC);
    }
    for (int rep = 0; rep < 2 && ok; rep++) {
        float *dx = cuda_up(&g, x, tc), *dw = cuda_up(&g, w, LC), *dd = cuda_up(&g, dout, tc);
        float *dm = cuda_up(&g, cm, LT), *dr = cuda_up(&g, cr, LT), *di = cuda_zeros(&g, tc);
        float *gw = cuda_zeros(&g, LC), *gb = cuda_zeros(&g, LC), *gl = cuda_zeros(&g, LC);
        float *dxi = cuda_up(&g, xi, ti), *dW = cuda_up(&g, W, (size_t)LC * LI);
        float *gxi = cuda_zeros(&g, ti), *gW = cuda_zeros(&g, (size_t)LC * LI);
        sq_layernorm_backward(&g.cx, di, gw, gb, dd, dx, dw, dm, dr, LT, LC);
        sq_linear_backward(&g.cx, gxi, gW, gl, dd, dxi, dW, LT, LI, LC);
        CHECK(cuda_down(&g, gv[rep][0], gw, LC) == 0 && cuda_down(&g, gv[rep][1], gb, LC) == 0 &&
              cuda_down(&g, gv[rep][2], gl, LC) == 0);
        CHECK(cuda_close_to(gv[rep][0], cw, LC, 1e-4, 1e-4, "ln dw (3000 rows)"));
        CHECK(cuda_close_to(gv[rep][1], cb, LC, 1e-4, 1e-4, "ln db (3000 rows)"));
        CHECK(cuda_close_to(gv[rep][2], lb, LC, 1e-4, 1e-4, "linear db (3000 rows)"));
    }
    if (ok)
        CHECK(cuda_same_bits(&gv[0][0][0], &gv[1][0][0], 3 * LC, "column sums twice"));
    free(x); free(w); free(b); free(dout); free(xi); free(W); free(cdi); free(cdxi); free(cdW);
    free(cm); free(cr); free(y);
    cuda_close(&g);
}

/* A linear layer's bias in cuBLASLt's epilogue (cuda/blaslt.cu) and the
 * path it replaces (out = b, then the GEMM with beta 1), which a shape
 * without a cuBLASLt algorithm still takes (SEQREC_SIM_LT_NONE: the
 * simulated heuristic offers none): under each --precision both match
 * the CPU (fp32) or each other (tf32, bf16: the same rounded inputs), a
 * run repeated gives the same bits, and so does a second call of the
 * shape (its algorithm kept). */
static int lin_gpu(unit_ctx *t, int prec, int lt, const float *x, const float *W,
                   const float *b, float *out)
{
    cuda_env g;
    if (lt)
        unsetenv("SEQREC_SIM_LT_NONE");
    else
        setenv("SEQREC_SIM_LT_NONE", "1", 1);
    int rc = cuda_open(t, &g);
    if (rc) {
        unsetenv("SEQREC_SIM_LT_NONE");
        return rc;
    }
    size_t tc = (size_t)RT * RC, tf = (size_t)RT * RF;
    float two[2][RT * RF];
    CHECK(sq_gpu_set_precision(g.gpu, prec, &g.e) == 0);
    float *dx = cuda_up(&g, x, tc), *dW = cuda_up(&g, W, (size_t)RF * RC);
    float *db = cuda_up(&g, b, RF), *dy = cuda_zeros(&g, tf);
    for (int k = 0; k < 2 && !g.bad; k++) {
        sq_linear_forward(&g.cx, dy, dx, dW, db, RT, RC, RF);
        cuda_down(&g, two[k], dy, tf);
    }
    rc = g.bad;
    CHECK(!rc && memcmp(two[0], two[1], sizeof two[0]) == 0);
    /* operands a float off their allocations' alignment (a layer's rows
     * inside a larger buffer): another shape for the kept algorithms */
    float *ox = cuda_zeros(&g, tc + 1), *oW = cuda_zeros(&g, (size_t)RF * RC + 1);
    float *ob = cuda_zeros(&g, RF + 1), *oy = cuda_zeros(&g, tf + 1);
    if (!g.bad && !rc) {
        sq_copy(&g.cx, ox + 1, dx, tc);
        sq_copy(&g.cx, oW + 1, dW, (size_t)RF * RC);
        sq_copy(&g.cx, ob + 1, db, RF);
        sq_linear_forward(&g.cx, oy + 1, ox + 1, oW + 1, ob + 1, RT, RC, RF);
        cuda_down(&g, two[1], oy + 1, tf);
        CHECK(!g.bad && memcmp(two[0], two[1], sizeof two[0]) == 0);
        rc = g.bad;
    }
    memcpy(out, two[0], sizeof two[0]);
    cuda_close(&g);
    unsetenv("SEQREC_SIM_LT_NONE");
    return rc;
}

UNIT_TEST(cuda_linear_bias_epilogue)
{
    sq_rng r;
    sq_rng_seed(&r, 23, 0);
    size_t tc = (size_t)RT * RC, tf = (size_t)RT * RF;
    float *x = cuda_randn(tc, 1, &r), *W = cuda_randn((size_t)RF * RC, 0.3, &r);
    float *b = cuda_randn(RF, 1, &r), *cpu = malloc(tf * sizeof *cpu);
    float *lt = malloc(tf * sizeof *lt), *old = malloc(tf * sizeof *old);
    CHECK(x && W && b && cpu && lt && old);
    if (!(x && W && b && cpu && lt && old))
        goto done;
    sq_ctx c = sq_ctx_cpu();
    sq_linear_forward(&c, cpu, x, W, b, RT, RC, RF);
    for (int prec = 0; prec < 3; prec++) { /* SQ_PREC_FP32, TF32, BF16 */
        if (lin_gpu(t, prec, 1, x, W, b, lt) || lin_gpu(t, prec, 0, x, W, b, old))
            break;
        CHECK(cuda_close_to(lt, old, tf, 1e-6, 1e-6, "bias epilogue vs out = b, beta 1"));
        if (prec == 0)
            CHECK(cuda_close_to(lt, cpu, tf, 1e-5, 1e-5, "bias epilogue vs the cpu"));
        else /* the inputs rounded: tf32 2^-11, bf16 2^-8 relative a product */
            CHECK(cuda_close_to(lt, cpu, tf, prec == 1 ? 1e-2 : 5e-2, 0, "rounded vs the cpu"));
    }
done:
    free(x); free(W); free(b); free(cpu); free(lt); free(old);
}
