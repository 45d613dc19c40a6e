/* The position-only mixers on the GPU (cuda/k_pos.cu; fpositional through
 * the sq_gemm and sq_fill2d ops) against the CPU's (attn_pos.c) through the
 * CPU API on a CUDA context (cuda_check.h); skipped without a backend.
 *
 * Packed segments of lengths 1 to max_len (right-aligned positions as
 * sq_pack_positions makes them, and increasing positions with gaps), values
 * at a row stride ld > C, heads of 5 and 8 dimensions (sq_dot's tail and
 * its eight partial sums), causal and bidirectional. Gradient buffers
 * start non-zero (the backward ADDS). Every op: forward (and the
 * positional cache) and backward against the CPU twin, the forward also
 * against its naive double reference (tests/ref), and two GPU runs give
 * the same bits.
 *
 * TOLERANCES, |gpu - x| <= atol + rtol |x|: 1e-5 + 1e-5 against the CPU
 * and 2e-5 + 2e-5 against the double reference. Each element's terms are
 * added in the CPU's order, so the GPU differs from the CPU only by
 * CUDA's expf/erff against glibc's (and, for fpositional, cuBLAS's
 * summation of R1 R2^T against OpenBLAS's); on the simulated device the
 * results are mostly the same bits. A wrong mask, position or missing term
 * is off by 1e-2 or more. SQ_TEST_VERBOSE=1 prints the measured errors. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attn_pos.h"
#include "cuda_check.h"
#include "ops.h"
#include "ref_ops.h"
#include "rng.h"

#define TOL_CPU 1e-5 /* atol and rtol against the CPU twin */
#define TOL_REF 2e-5 /* atol and rtol against tests/ref */
#define MAXB 8
#define MAXT 64

/* One batch: its segments, positions and shapes. */
typedef struct {
    int B, T, H, C, ld, N, causal;
    int off[MAXB + 1], pos[MAXT];
    sq_rng r;
} pcase;

/* Segments of lengths len[0..B-1] (each <= N); gaps: each segment's
 * positions drawn as an increasing subset of 0..N-1 (else right-aligned). */
static void pcase_init(pcase *c, const int *len, int B, int H, int C, int N, int causal,
                       int gaps, uint64_t seed)
{
    memset(c, 0, sizeof *c);
    c->B = B;
    c->H = H;
    c->C = C;
    c->ld = C + 3;
    c->N = N;
    c->causal = causal;
    c->T = sq_pack_offsets(c->off, len, B);
    sq_rng_seed(&c->r, seed, 0);
    sq_pack_positions(c->pos, c->off, B, N);
    for (int b = 0; gaps && b < B; b++) {
        int need = len[b], at = c->off[b];
        for (int q = 0; q < N && need > 0; q++)
            if (sq_rng_below(&c->r, (uint64_t)(N - q)) < (uint64_t)need) {
                c->pos[at++] = q;
                need--;
            }
    }
}

static float *normal(pcase *c, size_t n, double sd)
{
    float *x = malloc((n ? n : 1) * sizeof *x);
    for (size_t i = 0; x && i < n; i++)
        x[i] = (float)(sd * sq_rng_normal(&c->r));
    return x;
}

/* the batch's offsets and positions staged, as the trainer stages a batch */
static int stage(cuda_env *g, const pcase *c)
{
    const void *host[2] = {c->off, c->pos};
    size_t bytes[2] = {(size_t)(c->B + 1) * sizeof(int), (size_t)c->T * sizeof(int)};
    return sq_gpu_stage(g->gpu, host, bytes, 2, &g->e);
}

static double max_err(const float *a, const float *bf, const double *bd, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (bf ? (double)bf[i] : bd[i]));
        m = d > m || isnan(d) ? d : m;
    }
    return m;
}

static void note(unit_ctx *t, const char *what, double err)
{
    if (getenv("SQ_TEST_VERBOSE"))
        printf("    %-28s %-40s %.2e\n", t->name, what, err);
}

/* One result of an op: the CPU's, and the GPU's of two runs. */
typedef struct {
    const char *what;
    size_t n;
    float *cpu, *gpu[2];
} res;

static void res_init(res *r, const char *what, size_t n)
{
    r->what = what;
    r->n = n;
    r->cpu = calloc(n ? n : 1, sizeof(float));
    r->gpu[0] = calloc(n ? n : 1, sizeof(float));
    r->gpu[1] = calloc(n ? n : 1, sizeof(float));
}

/* GPU run 0 against the CPU, run 1 against run 0 (bits); frees r. */
static void res_check(unit_ctx *t, const pcase *c, res *r, const char *kind)
{
    char what[160];
    snprintf(what, sizeof what, "%s %s (H %d C %d causal %d)", kind, r->what, c->H, c->C,
             c->causal);
    CHECK(cuda_close_to(r->gpu[0], r->cpu, r->n, TOL_CPU, TOL_CPU, what));
    CHECK(memcmp(r->gpu[0], r->gpu[1], r->n * sizeof(float)) == 0);
    note(t, what, max_err(r->gpu[0], r->cpu, NULL, r->n));
    free(r->cpu);
    free(r->gpu[0]);
    free(r->gpu[1]);
}

/* The GPU's output against the double reference ref[T C]; frees ref. */
static void ref_check(unit_ctx *t, const pcase *c, const float *gout, double *ref,
                      const char *kind)
{
    char what[160];
    snprintf(what, sizeof what, "%s out vs tests/ref (H %d C %d causal %d)", kind, c->H, c->C,
             c->causal);
    size_t n = (size_t)c->T * c->C;
    CHECK(ref && cuda_close_to_ref(gout, ref, n, TOL_REF, TOL_REF, what));
    if (ref)
        note(t, what, max_err(gout, NULL, ref, n));
    free(ref);
}

static double *to_d(const float *x, size_t n)
{
    return cuda_to_double(x, n);
}

/* ------------------------------------------------------------------------ */
/* positional and fpositional                                               */

static void pa_case(unit_ctx *t, cuda_env *g, pcase *c, int fpa)
{
    int T = c->T, H = c->H, C = c->C, N = c->N, ld = c->ld, k = 3;
    size_t nv = (size_t)T * ld, tc = (size_t)T * C, nn = (size_t)H * N * N;
    size_t np = fpa ? (size_t)H * N * k : nn;
    size_t na = sq_pa_cache_size(c->off, c->B, H), ns = sq_fpa_scratch_size(N, H);
    float *v = normal(c, nv, 1), *dout = normal(c, tc, 1), *dv0 = normal(c, nv, 0.1);
    float *P[2] = {normal(c, np, fpa ? 0.7 : 2), fpa ? normal(c, np, 0.7) : NULL};
    float *dP0[2] = {normal(c, np, 0.1), fpa ? normal(c, np, 0.1) : NULL};
    int nP = fpa ? 2 : 1;
    res out, att, dv, dP[2];
    res_init(&out, "out", tc);
    res_init(&att, "probabilities", na);
    res_init(&dv, "dv", nv);
    for (int i = 0; i < nP; i++)
        res_init(&dP[i], fpa ? (i ? "dR2" : "dR1") : "dRw", np);
    /* the CPU */
    sq_ctx cc = sq_ctx_cpu();
    float *scr = calloc(ns, sizeof *scr);
    memcpy(dv.cpu, dv0, nv * sizeof *dv0);
    for (int i = 0; i < nP; i++)
        memcpy(dP[i].cpu, dP0[i], np * sizeof(float));
    if (fpa) {
        sq_fpa_forward(&cc, out.cpu, att.cpu, scr, P[0], P[1], k, v, ld, c->off, c->pos, c->B,
                       H, C, N, c->causal);
        sq_fpa_backward(&cc, dP[0].cpu, dP[1].cpu, dv.cpu, scr, dout, out.cpu, v, att.cpu, P[0],
                        P[1], k, ld, c->off, c->pos, c->B, H, C, N, c->causal);
    } else {
        sq_pa_forward(&cc, out.cpu, att.cpu, P[0], v, ld, c->off, c->pos, c->B, H, C, N,
                      c->causal);
        sq_pa_backward(&cc, dP[0].cpu, dv.cpu, dout, out.cpu, v, att.cpu, ld, c->off, c->pos,
                       c->B, H, C, N, c->causal);
    }
    free(scr);
    /* the GPU, twice */
    CHECK_EQ(stage(g, c), 0);
    for (int rep = 0; rep < 2; rep++) {
        float *gv = cuda_up(g, v, nv), *gd = cuda_up(g, dout, tc), *gdv = cuda_up(g, dv0, nv);
        float *gP[2] = {cuda_up(g, P[0], np), fpa ? cuda_up(g, P[1], np) : NULL};
        float *gdP[2] = {cuda_up(g, dP0[0], np), fpa ? cuda_up(g, dP0[1], np) : NULL};
        float *go = cuda_zeros(g, tc), *ga = cuda_zeros(g, na), *gs = cuda_zeros(g, ns);
        if (fpa) {
            sq_fpa_forward(&g->cx, go, ga, gs, gP[0], gP[1], k, gv, ld, c->off, c->pos, c->B, H,
                           C, N, c->causal);
            sq_fpa_backward(&g->cx, gdP[0], gdP[1], gdv, gs, gd, go, gv, ga, gP[0], gP[1], k,
                            ld, c->off, c->pos, c->B, H, C, N, c->causal);
        } else {
            sq_pa_forward(&g->cx, go, ga, gP[0], gv, ld, c->off, c->pos, c->B, H, C, N,
                          c->causal);
            sq_pa_backward(&g->cx, gdP[0], gdv, gd, go, gv, ga, ld, c->off, c->pos, c->B, H, C,
                           N, c->causal);
        }
        CHECK(cuda_down(g, out.gpu[rep], go, tc) == 0);
        CHECK(cuda_down(g, att.gpu[rep], ga, na) == 0);
        CHECK(cuda_down(g, dv.gpu[rep], gdv, nv) == 0);
        for (int i = 0; i < nP; i++)
            CHECK(cuda_down(g, dP[i].gpu[rep], gdP[i], np) == 0);
    }
    const char *kind = fpa ? "fpositional" : "positional";
    double *vd = to_d(v, nv), *ref = malloc(tc * sizeof *ref);
    double *p0 = to_d(P[0], np), *p1 = fpa ? to_d(P[1], np) : NULL;
    if (vd && ref && p0 && (!fpa || p1)) {
        if (fpa)
            ref_fpa(ref, p0, p1, k, vd, ld, c->off, c->pos, c->B, H, C, N, c->causal);
        else
            ref_pa(ref, p0, vd, ld, c->off, c->pos, c->B, H, C, N, c->causal);
        ref_check(t, c, out.gpu[0], ref, kind);
    } else {
        CHECK(0);
        free(ref);
    }
    free(vd); free(p0); free(p1);
    res_check(t, c, &out, kind);
    res_check(t, c, &att, kind);
    res_check(t, c, &dv, kind);
    for (int i = 0; i < nP; i++)
        res_check(t, c, &dP[i], kind);
    free(v); free(dout); free(dv0);
    for (int i = 0; i < nP; i++) {
        free(P[i]);
        free(dP0[i]);
    }
}

/* The shapes every test runs: segments of 1 to N rows (N = 12), heads of 5
 * and 8 dimensions, both masks, right-aligned and gapped positions. */
static const int seg_lens[5] = {3, 12, 1, 7, 10};

static void each_case(unit_ctx *t, cuda_env *g, void (*run)(unit_ctx *, cuda_env *, pcase *, int),
                      int arg, int heads)
{
    static const int shapes[][2] = {{2, 16}, {2, 10}, {1, 8}}; /* H, C: hs 8, 5, 8 */
    for (int s = 0; s < 3; s++)
        for (int causal = 0; causal < 2; causal++)
            for (int gaps = 0; gaps < 2; gaps++) {
                pcase c;
                int H = heads ? shapes[s][0] : 1;
                pcase_init(&c, seg_lens, 5, H, shapes[s][1], 12, causal, gaps,
                           (uint64_t)(arg * 1000 + s * 10 + causal * 2 + gaps));
                run(t, g, &c, arg);
            }
}

UNIT_TEST(cuda_pos_positional)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    each_case(t, &g, pa_case, 0, 1);
    cuda_close(&g);
}

UNIT_TEST(cuda_pos_fpositional)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    each_case(t, &g, pa_case, 1, 1);
    cuda_close(&g);
}

/* ------------------------------------------------------------------------ */
/* the fixed patterns                                                       */

/* kind 10 + k: exp-anneal at decay 0.8 (the others ignore decay) */
static void fixed_case(unit_ctx *t, cuda_env *g, pcase *c, int arg)
{
    int kind = arg % 10, T = c->T, C = c->C, N = c->N, ld = c->ld;
    float decay = arg >= 10 ? 0.8f : (float)SQ_EXP_ANNEAL_DECAY;
    size_t nv = (size_t)T * ld, tc = (size_t)T * C;
    float *v = normal(c, nv, 1), *dout = normal(c, tc, 1), *dv0 = normal(c, nv, 0.1);
    res out, dv;
    res_init(&out, "out", tc);
    res_init(&dv, "dv", nv);
    sq_ctx cc = sq_ctx_cpu();
    memcpy(dv.cpu, dv0, nv * sizeof *dv0);
    sq_fixed_forward(&cc, out.cpu, v, ld, c->off, c->pos, c->B, C, N, kind, decay, c->causal);
    sq_fixed_backward(&cc, dv.cpu, dout, ld, c->off, c->pos, c->B, C, N, kind, decay, c->causal);
    CHECK_EQ(stage(g, c), 0);
    for (int rep = 0; rep < 2; rep++) {
        float *gv = cuda_up(g, v, nv), *gd = cuda_up(g, dout, tc), *gdv = cuda_up(g, dv0, nv);
        float *go = cuda_zeros(g, tc);
        sq_fixed_forward(&g->cx, go, gv, ld, c->off, c->pos, c->B, C, N, kind, decay, c->causal);
        sq_fixed_backward(&g->cx, gdv, gd, ld, c->off, c->pos, c->B, C, N, kind, decay,
                          c->causal);
        CHECK(cuda_down(g, out.gpu[rep], go, tc) == 0);
        CHECK(cuda_down(g, dv.gpu[rep], gdv, nv) == 0);
    }
    static const char *names[] = {"", "", "average", "linear-anneal", "exp-anneal"};
    char kname[40];
    snprintf(kname, sizeof kname, "%s%s", names[kind], arg >= 10 ? " 0.8" : "");
    double *vd = to_d(v, nv), *ref = malloc(tc * sizeof *ref);
    if (vd && ref) {
        ref_fixed(ref, vd, ld, c->off, c->pos, c->B, C, N, kind, decay, c->causal);
        ref_check(t, c, out.gpu[0], ref, kname);
    } else {
        CHECK(0);
        free(ref);
    }
    free(vd);
    res_check(t, c, &out, kname);
    res_check(t, c, &dv, kname);
    free(v); free(dout); free(dv0);
}

UNIT_TEST(cuda_pos_fixed)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    static const int kinds[] = {SQ_ATTN_AVERAGE, SQ_ATTN_LINEAR_ANNEAL, SQ_ATTN_EXP_ANNEAL,
                                10 + SQ_ATTN_EXP_ANNEAL};
    for (int k = 0; k < 4; k++)
        each_case(t, &g, fixed_case, kinds[k], 0);
    cuda_close(&g);
}

/* ------------------------------------------------------------------------ */
/* token mixing                                                             */

static void mixing_case(unit_ctx *t, cuda_env *g, pcase *c, int arg)
{
    (void)arg;
    int T = c->T, C = c->C, N = c->N, ld = c->ld;
    size_t nv = (size_t)T * ld, tc = (size_t)T * C, nn = (size_t)N * N;
    size_t ncache = sq_mixing_cache_size(T, C), nscr = sq_mixing_scratch_size(T, C);
    float *x = normal(c, nv, 1), *dout = normal(c, tc, 1), *dx0 = normal(c, nv, 0.1);
    float *P[4] = {normal(c, nn, 0.5), normal(c, N, 0.5), normal(c, nn, 0.5), normal(c, N, 0.5)};
    size_t pn[4] = {nn, (size_t)N, nn, (size_t)N};
    float *dP0[4];
    for (int i = 0; i < 4; i++)
        dP0[i] = normal(c, pn[i], 0.1);
    static const char *pname[4] = {"dW1", "db1", "dW2", "db2"};
    res out, cache, dx, dP[4];
    res_init(&out, "out", tc);
    res_init(&cache, "cache (u, gelu u)", ncache);
    res_init(&dx, "dx", nv);
    for (int i = 0; i < 4; i++) {
        res_init(&dP[i], pname[i], pn[i]);
        memcpy(dP[i].cpu, dP0[i], pn[i] * sizeof(float));
    }
    sq_ctx cc = sq_ctx_cpu();
    float *scr = calloc(nscr, sizeof *scr);
    memcpy(dx.cpu, dx0, nv * sizeof *dx0);
    sq_mixing_forward(&cc, out.cpu, cache.cpu, x, ld, P[0], P[1], P[2], P[3], c->off, c->pos,
                      c->B, C, N, c->causal);
    sq_mixing_backward(&cc, dx.cpu, dP[0].cpu, dP[1].cpu, dP[2].cpu, dP[3].cpu, scr, dout, x,
                       cache.cpu, P[0], P[2], ld, c->off, c->pos, c->B, C, N, c->causal);
    free(scr);
    CHECK_EQ(stage(g, c), 0);
    for (int rep = 0; rep < 2; rep++) {
        float *gx = cuda_up(g, x, nv), *gd = cuda_up(g, dout, tc), *gdx = cuda_up(g, dx0, nv);
        float *gP[4], *gdP[4];
        for (int i = 0; i < 4; i++) {
            gP[i] = cuda_up(g, P[i], pn[i]);
            gdP[i] = cuda_up(g, dP0[i], pn[i]);
        }
        float *go = cuda_zeros(g, tc), *gc = cuda_zeros(g, ncache), *gs = cuda_zeros(g, nscr);
        sq_mixing_forward(&g->cx, go, gc, gx, ld, gP[0], gP[1], gP[2], gP[3], c->off, c->pos,
                          c->B, C, N, c->causal);
        sq_mixing_backward(&g->cx, gdx, gdP[0], gdP[1], gdP[2], gdP[3], gs, gd, gx, gc, gP[0],
                           gP[2], ld, c->off, c->pos, c->B, C, N, c->causal);
        CHECK(cuda_down(g, out.gpu[rep], go, tc) == 0);
        CHECK(cuda_down(g, cache.gpu[rep], gc, ncache) == 0);
        CHECK(cuda_down(g, dx.gpu[rep], gdx, nv) == 0);
        for (int i = 0; i < 4; i++)
            CHECK(cuda_down(g, dP[i].gpu[rep], gdP[i], pn[i]) == 0);
    }
    double *xd = to_d(x, nv), *ref = malloc(tc * sizeof *ref), *pd[4];
    int ok = xd && ref;
    for (int i = 0; i < 4; i++)
        ok = (pd[i] = to_d(P[i], pn[i])) != NULL && ok;
    if (ok) {
        ref_mixing(ref, xd, ld, pd[0], pd[1], pd[2], pd[3], c->off, c->pos, c->B, C, N,
                   c->causal);
        ref_check(t, c, out.gpu[0], ref, "mixing");
    } else {
        CHECK(0);
        free(ref);
    }
    free(xd);
    res_check(t, c, &out, "mixing");
    res_check(t, c, &cache, "mixing");
    res_check(t, c, &dx, "mixing");
    for (int i = 0; i < 4; i++) {
        res_check(t, c, &dP[i], "mixing");
        free(pd[i]);
        free(P[i]);
        free(dP0[i]);
    }
    free(x); free(dout); free(dx0);
}

UNIT_TEST(cuda_pos_mixing)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    each_case(t, &g, mixing_case, 0, 0);
    cuda_close(&g);
}
