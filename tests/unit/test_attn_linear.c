/* Unit tests for lib/ops/attn_linear.c (linrec, linear, efficient, hydra).
 *
 * For every kind (linrec: its two scalings and three variants, full, no-l2
 * and no-elu, the ablations of --linrec-variant), causal and bidirectional, on odd shapes (C = 6 with H = 2
 * or 3, C = 5 with H = 1, C = 40 with H = 2; hydra also with H = C) and packed batches of
 * segments of lengths 1..7 (a length-1 segment always included), separate
 * and fused (ld = 3C) q, k, v:
 *   - the double build equals an explicit quadratic reference (tests/ref:
 *     the masked len x len score matrix, in long double) to 1e-10, the float build to
 *     1e-5 (normwise relative);
 *   - dq, dk, dv of the double build match fourth-order central finite
 *     differences (gradcheck.h) to 1e-6; backward adds into the gradients
 *     (they start non-zero) and the scratch starts as NaN garbage;
 *   - the float build agrees with the double one (output and gradients).
 * Then: efficient attention with logits ~ +-80..100 (where exp overflows in
 * float) stays finite and equal to the long double reference; the results
 * are bitwise the same for 1 and 2 threads; and one segment of N = 8192,
 * C = 64 runs forward + backward with buffers of O(N C + C^2) reals (and a
 * peak-RSS growth far below N^2 floats). SQ_TEST_VERBOSE=1 prints the
 * measured errors. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "attn_linear.h"
#include "gpu_ops.h"
#include "gradcheck.h"
#include "ops.h"
#include "ref_ops.h"
#include "rng.h"
#include "segs.h"
#include "unit.h"

#define GRAD_TOL 1e-6 /* finite differences vs backward, double build */
#define REF_TOL_F64 1e-10
#define REF_TOL_F32 1e-5
#define F32_TOL 1e-5  /* float build vs double build, normwise */

static const char *kind_name(sq_lattn_kind kind)
{
    switch (kind) {
    case SQ_LATTN_LINREC: return "linrec";
    case SQ_LATTN_LINREC_PAPER: return "linrec-paper";
    case SQ_LATTN_LINEAR: return "linear";
    case SQ_LATTN_EFFICIENT: return "efficient";
    case SQ_LATTN_HYDRA: return "hydra";
    case SQ_LATTN_LINREC_NO_L2: return "linrec-no-l2";
    case SQ_LATTN_LINREC_NO_L2_PAPER: return "linrec-no-l2-paper";
    case SQ_LATTN_LINREC_NO_ELU: return "linrec-no-elu";
    case SQ_LATTN_LINREC_NO_ELU_PAPER: return "linrec-no-elu-paper";
    }
    return "?";
}

/* ------------------------------------------------------------------------ */

/* q, k, v in one array: separate [T, C] blocks (ld = C) or interleaved rows
 * [T, 3C] (ld = 3C). */
typedef struct {
    sq_lattn_kind kind;
    const segs *s;
    int H, C, ld, causal;
    double *qkv, *out, *cache, *scratch, *w;
} lk_ctx;

static void qkv_ptrs(size_t T, int C, int ld, double *base, double **q,
                     double **k, double **v)
{
    int fused = ld == 3 * C;
    *q = base;
    *k = fused ? base + C : base + T * C;
    *v = fused ? base + 2 * C : base + 2 * T * C;
}

static void qkv_ptrs_f(size_t T, int C, int ld, float *base, float **q,
                       float **k, float **v)
{
    int fused = ld == 3 * C;
    *q = base;
    *k = fused ? base + C : base + T * C;
    *v = fused ? base + 2 * C : base + 2 * T * C;
}

static double lk_obj(void *p)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    lk_ctx *c = p;
    double *q, *k, *v;
    qkv_ptrs((size_t)c->s->T, c->C, c->ld, c->qkv, &q, &k, &v);
    sq_lattn_forward_f64(cx, c->kind, c->out, c->cache, c->scratch, q, k, v,
                         c->ld, c->s->off, c->s->B, c->H, c->C, c->causal);
    return gc_dot(c->out, c->w, (size_t)c->s->T * c->C);
}

static void fill_nan(double *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = NAN;
}

static void fill_nan_f(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = NAN;
}

typedef struct {
    double grad[2], ref64[2], ref32[2], f32[2];
} worst;

#define UPD(w, e) do { double e_ = (e); if (!(e_ <= (w))) (w) = e_; } while (0)

/* One random instance of a kind: reference, gradient and float checks. */
static void check_instance(unit_ctx *t, sq_rng *r, sq_lattn_kind kind, int C,
                           int H, int causal, int trial, double scale,
                           worst *wo)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    segs s;
    segs_edges(r, &s, trial, 5);
    int ld = trial % 2 ? 3 * C : C;
    size_t T = (size_t)s.T, n = T * C, qn = 3 * n;
    size_t cn = sq_lattn_cache_size(kind, s.off, s.B, H, C);
    size_t sn = sq_lattn_scratch_size(kind, s.off, s.B, H, C);
    lk_ctx c = {kind, &s, H, C, ld, causal, gc_normal(r, qn, scale),
                gc_zeros(n), gc_zeros(cn), gc_zeros(sn), gc_normal(r, n, 1)};
    /* elu has a kink in its second derivative at 0: keep inputs off it so
     * that the O(h^4) finite differences stay valid */
    for (size_t i = 0; i < qn; i++)
        if (fabs(c.qkv[i]) < 0.01)
            c.qkv[i] += c.qkv[i] < 0 ? -0.01 : 0.01;
    fill_nan(c.scratch, sn);
    double *q, *k, *v, *dq, *dk, *dv;
    qkv_ptrs(T, C, ld, c.qkv, &q, &k, &v);

    /* reference */
    double *ref = gc_zeros(n);
    lk_obj(&c);
    ref_lattn(kind, ref, q, k, v, ld, s.off, s.B, H, C, causal);
    double e = gc_rel_diff_f64(c.out, ref, n);
    CHECK(e < REF_TOL_F64);
    UPD(wo->ref64[causal], e);

    /* gradients: backward adds into non-zero buffers */
    double *d0 = gc_normal(r, qn, 1), *dqkv = gc_zeros(qn), *g = gc_zeros(qn);
    memcpy(dqkv, d0, qn * sizeof *dqkv);
    qkv_ptrs(T, C, ld, dqkv, &dq, &dk, &dv);
    fill_nan(c.scratch, sn);
    sq_lattn_backward_f64(cx, kind, dq, dk, dv, c.scratch, c.w, q, k, v, c.cache,
                          ld, s.off, s.B, H, C, causal);
    for (size_t i = 0; i < qn; i++)
        g[i] = dqkv[i] - d0[i];
    e = gc_check(lk_obj, &c, c.qkv, g, qn);
    CHECK(e < GRAD_TOL);
    UPD(wo->grad[causal], e);
    lk_obj(&c);

    /* float build */
    float *fqkv = gc_to_float(c.qkv, qn), *fw = gc_to_float(c.w, n);
    float *fo = calloc(n, sizeof *fo), *fc = calloc(cn ? cn : 1, sizeof *fc);
    float *fs = calloc(sn ? sn : 1, sizeof *fs), *fd = calloc(qn, sizeof *fd);
    float *fq, *fk, *fv, *fdq, *fdk, *fdv;
    qkv_ptrs_f(T, C, ld, fqkv, &fq, &fk, &fv);
    qkv_ptrs_f(T, C, ld, fd, &fdq, &fdk, &fdv);
    fill_nan_f(fs, sn);
    sq_lattn_forward(cx, kind, fo, fc, fs, fq, fk, fv, ld, s.off, s.B, H, C, causal);
    fill_nan_f(fs, sn);
    sq_lattn_backward(cx, kind, fdq, fdk, fdv, fs, fw, fq, fk, fv, fc, ld, s.off,
                      s.B, H, C, causal);
    e = gc_rel_diff(fo, ref, n);
    CHECK(e < REF_TOL_F32);
    UPD(wo->ref32[causal], e);
    e = fmax(gc_rel_diff(fo, c.out, n), gc_rel_diff(fd, g, qn));
    CHECK(e < F32_TOL);
    UPD(wo->f32[causal], e);
    if (t->failed && getenv("SQ_TEST_VERBOSE"))
        fprintf(stderr, "    (%s C=%d H=%d causal=%d trial=%d)\n",
                kind_name(kind), C, H, causal, trial);

    free(fqkv); free(fw); free(fo); free(fc); free(fs); free(fd);
    free(c.qkv); free(c.out); free(c.cache); free(c.scratch); free(c.w);
    free(ref); free(d0); free(dqkv); free(g);
}

static void check_kind(unit_ctx *t, sq_lattn_kind kind, uint64_t seed)
{
    /* the last shape: hs = 20, a whole 16-column block of the kernels'
     * blocked state products plus a tail (attn_linear.c, mt_vec) */
    static const int plain[][2] = {{6, 2}, {6, 3}, {5, 1}, {6, 2}, {40, 2}};
    static const int hydra[][2] = {{6, 6}, {5, 5}, {6, 2}, {6, 3}, {40, 2}};
    const int (*shape)[2] = kind == SQ_LATTN_HYDRA ? hydra : plain;
    sq_rng r;
    sq_rng_seed(&r, seed, 0);
    worst wo = {{0, 0}, {0, 0}, {0, 0}, {0, 0}};
    for (int causal = 0; causal < 2; causal++)
        for (int trial = 0; trial < 5; trial++)
            check_instance(t, &r, kind, shape[trial][0], shape[trial][1],
                           causal, trial, 1, &wo);
    gc_note(t->name, "grad q, k, v (bidir)", wo.grad[0]);
    gc_note(t->name, "grad q, k, v (causal)", wo.grad[1]);
    gc_note(t->name, "f64 vs quadratic (bidir)", wo.ref64[0]);
    gc_note(t->name, "f64 vs quadratic (causal)", wo.ref64[1]);
    gc_note(t->name, "f32 vs quadratic (bidir)", wo.ref32[0]);
    gc_note(t->name, "f32 vs quadratic (causal)", wo.ref32[1]);
    gc_note(t->name, "f32 vs f64 out+grad (bidir)", wo.f32[0]);
    gc_note(t->name, "f32 vs f64 out+grad (causal)", wo.f32[1]);
}

UNIT_TEST(test_attn_linear_linrec)
{
    check_kind(t, SQ_LATTN_LINREC, 101);
}

UNIT_TEST(test_attn_linear_linrec_paper)
{
    check_kind(t, SQ_LATTN_LINREC_PAPER, 102);
}

/* LinRec's ablations (Figure 4), each with both scalings */
UNIT_TEST(test_attn_linear_linrec_no_l2)
{
    check_kind(t, SQ_LATTN_LINREC_NO_L2, 109);
}

UNIT_TEST(test_attn_linear_linrec_no_l2_paper)
{
    check_kind(t, SQ_LATTN_LINREC_NO_L2_PAPER, 110);
}

UNIT_TEST(test_attn_linear_linrec_no_elu)
{
    check_kind(t, SQ_LATTN_LINREC_NO_ELU, 111);
}

UNIT_TEST(test_attn_linear_linrec_no_elu_paper)
{
    check_kind(t, SQ_LATTN_LINREC_NO_ELU_PAPER, 112);
}

UNIT_TEST(test_attn_linear_linear)
{
    check_kind(t, SQ_LATTN_LINEAR, 103);
}

UNIT_TEST(test_attn_linear_efficient)
{
    check_kind(t, SQ_LATTN_EFFICIENT, 104);
}

UNIT_TEST(test_attn_linear_hydra)
{
    check_kind(t, SQ_LATTN_HYDRA, 105);
}

/* ------------------------------------------------------------------------ */

/* Efficient attention with logits of size 80..100: exp overflows float at
 * 88.7, so a naive column softmax gives inf/NaN. The float build must stay
 * finite and match the long double reference on the same (float-rounded)
 * inputs; the double backward must still match finite differences. */
UNIT_TEST(test_attn_linear_efficient_large)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    sq_rng r;
    sq_rng_seed(&r, 106, 0);
    double eref[2] = {0, 0}, egrad = 0, ef = 0;
    for (int causal = 0; causal < 2; causal++)
        for (int trial = 0; trial < 2; trial++) {
            segs s;
            segs_edges(&r, &s, trial, 5);
            int C = 6, H = trial ? 2 : 1, ld = C;
            size_t T = (size_t)s.T, n = T * C, qn = 3 * n;
            size_t cn = sq_lattn_cache_size(SQ_LATTN_EFFICIENT, s.off, s.B, H, C);
            size_t sn = sq_lattn_scratch_size(SQ_LATTN_EFFICIENT, s.off, s.B, H, C);
            double *x = gc_normal(&r, qn, 1);
            /* q, k: +-(80 + 10 N(0,1)); a column grows over the sequence so
             * the running max is rescaled often */
            for (size_t i = 0; i < 2 * n; i++) {
                double sign = sq_rng_uniform(&r) < 0.3 ? -1 : 1;
                x[i] = (float)(sign * (80 + 10 * x[i]) + (double)(i / C % 7));
            }
            for (size_t i = 2 * n; i < qn; i++)
                x[i] = (float)x[i];
            float *fx = gc_to_float(x, qn), *fo = calloc(n, sizeof *fo);
            float *fc = calloc(cn, sizeof *fc), *fs = calloc(sn, sizeof *fs);
            float *fw = calloc(n, sizeof *fw), *fd = calloc(qn, sizeof *fd);
            double *ref = gc_zeros(n);
            for (size_t i = 0; i < n; i++)
                fw[i] = (float)sq_rng_normal(&r);
            sq_efficient_attn_forward(cx, fo, fc, fs, fx, fx + n, fx + 2 * n, ld,
                                      s.off, s.B, H, C, causal);
            sq_efficient_attn_backward(cx, fd, fd + n, fd + 2 * n, fs, fw, fx,
                                       fx + n, fx + 2 * n, fc, ld, s.off, s.B,
                                       H, C, causal);
            ref_lattn(SQ_LATTN_EFFICIENT, ref, x, x + n, x + 2 * n, ld,
                      s.off, s.B, H, C, causal);
            int finite = 1;
            for (size_t i = 0; i < n; i++)
                finite &= isfinite(fo[i]) != 0;
            for (size_t i = 0; i < qn; i++)
                finite &= isfinite(fd[i]) != 0;
            CHECK(finite);
            double e = gc_rel_diff(fo, ref, n);
            CHECK(e < REF_TOL_F32);
            UPD(eref[causal], e);
            /* double: gradient check at these logits, float vs double grads */
            double *dw = gc_zeros(n);
            for (size_t i = 0; i < n; i++)
                dw[i] = fw[i];
            segs *sp = &s;
            lk_ctx c = {SQ_LATTN_EFFICIENT, sp, H, C, ld, causal, x,
                        gc_zeros(n), gc_zeros(cn), gc_zeros(sn), dw};
            double *g = gc_zeros(qn);
            lk_obj(&c);
            e = gc_rel_diff_f64(c.out, ref, n);
            CHECK(e < REF_TOL_F64);
            sq_efficient_attn_backward_f64(cx, g, g + n, g + 2 * n, c.scratch, dw,
                                           x, x + n, x + 2 * n, c.cache, ld,
                                           s.off, s.B, H, C, causal);
            e = gc_check(lk_obj, &c, x, g, qn);
            CHECK(e < GRAD_TOL);
            UPD(egrad, e);
            e = gc_rel_diff(fd, g, qn);
            CHECK(e < 1e-4); /* k - lse in float at |k| ~ 100: ulp 7.6e-6 */
            UPD(ef, e);
            free(x); free(fx); free(fo); free(fc); free(fs); free(fw); free(fd);
            free(ref); free(dw); free(c.out); free(c.cache); free(c.scratch); free(g);
        }
    /* and the naive float column softmax does overflow at these sizes */
    volatile float big = 95.0f;
    CHECK(isinf(expf(big)));
    gc_note(t->name, "f32 vs quadratic (bidir)", eref[0]);
    gc_note(t->name, "f32 vs quadratic (causal)", eref[1]);
    gc_note(t->name, "grad q, k, v (f64)", egrad);
    gc_note(t->name, "f32 vs f64 grad", ef);
}

/* ------------------------------------------------------------------------ */

/* Float forward + backward of one kind on the given inputs; returns out and
 * the gradients (3 arrays of n) in res [4n]. */
static void run_f32(sq_lattn_kind kind, float *res, const float *qkv,
                    const float *w, const int *off, int B, int H, int C,
                    int causal)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    size_t n = (size_t)off[B] * C;
    size_t cn = sq_lattn_cache_size(kind, off, B, H, C);
    size_t sn = sq_lattn_scratch_size(kind, off, B, H, C);
    float *cache = calloc(cn, sizeof *cache), *scratch = calloc(sn, sizeof *scratch);
    memset(res, 0, 4 * n * sizeof *res);
    sq_lattn_forward(cx, kind, res, cache, scratch, qkv, qkv + n, qkv + 2 * n, C,
                     off, B, H, C, causal);
    sq_lattn_backward(cx, kind, res + n, res + 2 * n, res + 3 * n, scratch, w, qkv,
                      qkv + n, qkv + 2 * n, cache, C, off, B, H, C, causal);
    free(cache);
    free(scratch);
}

/* Bitwise the same results with 1 and 2 threads, with more segments than
 * SQ_LATTN_GROUPS so that groups hold several segments, and enough work
 * (T C (hs + 4) >= 16384) that the ops do fork a team. */
UNIT_TEST(test_attn_linear_threads)
{
#ifndef _OPENMP
    SKIP("built without OpenMP");
#else
    enum { B = 40 };
    int len[B], off[B + 1], C = 16;
    sq_rng r;
    sq_rng_seed(&r, 107, 0);
    for (int b = 0; b < B; b++)
        len[b] = 1 + (int)sq_rng_below(&r, 60);
    int T = sq_pack_offsets(off, len, B);
    size_t n = (size_t)T * C;
    float *qkv = calloc(3 * n, sizeof *qkv), *w = calloc(n, sizeof *w);
    for (size_t i = 0; i < 3 * n; i++)
        qkv[i] = (float)sq_rng_normal(&r);
    for (size_t i = 0; i < n; i++)
        w[i] = (float)sq_rng_normal(&r);
    float *a = calloc(4 * n, sizeof *a), *b2 = calloc(4 * n, sizeof *b2);
    int saved = omp_get_max_threads(), same = 1;
    for (int kind = SQ_LATTN_LINREC; kind <= SQ_LATTN_LINREC_NO_ELU_PAPER; kind++)
        for (int causal = 0; causal < 2; causal++) {
            int H = kind == SQ_LATTN_HYDRA ? C : 2;
            omp_set_num_threads(1);
            run_f32((sq_lattn_kind)kind, a, qkv, w, off, B, H, C, causal);
            omp_set_num_threads(2);
            run_f32((sq_lattn_kind)kind, b2, qkv, w, off, B, H, C, causal);
            same &= memcmp(a, b2, 4 * n * sizeof *a) == 0;
        }
    omp_set_num_threads(saved);
    CHECK(same);
    free(qkv); free(w); free(a); free(b2);
#endif
}

/* ------------------------------------------------------------------------ */

static long max_rss_kb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* One segment of N = 8192 rows, C = 64 (H = 1, hs = 64; hydra H = C):
 * causal forward + backward (the prefix-sum form; the bidirectional one
 * uses the same buffers) with caller buffers whose sizes are O(N C + C^2):
 * an N x N float matrix would be 256 MiB, ~20 times everything the test
 * allocates. The peak RSS may not grow by half of that either (ASan's
 * quarantine keeps freed blocks resident), and the test stays fast. */
UNIT_TEST(test_attn_linear_memory)
{
    enum { N = 8192, C = 64 };
    int off[2] = {0, N};
    size_t n = (size_t)N * C;
    long rss0 = max_rss_kb();
    double t0 = (double)clock() / CLOCKS_PER_SEC;
    float *qkv = malloc(3 * n * sizeof *qkv), *w = malloc(n * sizeof *w);
    float *res = malloc(4 * n * sizeof *res);
    sq_rng r;
    sq_rng_seed(&r, 108, 0);
    for (size_t i = 0; i < 3 * n; i++)
        qkv[i] = (float)(0.5 * sq_rng_normal(&r));
    for (size_t i = 0; i < n; i++)
        w[i] = (float)sq_rng_normal(&r);
    int ok = 1;
    for (int kind = SQ_LATTN_LINREC; kind <= SQ_LATTN_HYDRA; kind++) {
        if (kind == SQ_LATTN_LINREC_PAPER)
            continue; /* same code path as linrec */
        int H = kind == SQ_LATTN_HYDRA ? C : 1;
        size_t cn = sq_lattn_cache_size((sq_lattn_kind)kind, off, 1, H, C);
        size_t sn = sq_lattn_scratch_size((sq_lattn_kind)kind, off, 1, H, C);
        CHECK(cn <= 2 * n);
        CHECK(sn <= 2 * n + 3 * (size_t)C * C);
        CHECK(cn + sn < (size_t)N * N / 16);
        run_f32((sq_lattn_kind)kind, res, qkv, w, off, 1, H, C, 1);
        for (size_t i = 0; i < 4 * n; i++)
            ok &= isfinite(res[i]) != 0;
    }
    CHECK(ok);
    double secs = (double)clock() / CLOCKS_PER_SEC - t0;
    long grow_kb = max_rss_kb() - rss0;
    /* N^2 floats = 256 MiB; everything here is ~14 MiB */
    CHECK(grow_kb < 128 * 1024);
    CHECK(secs < 60); /* CPU seconds, generous: ~1 s here under ASan */
    gc_note(t->name, "peak RSS growth (MiB)", grow_kb / 1024.0);
    gc_note(t->name, "CPU seconds", secs);
    free(qkv); free(w); free(res);
}

/* The GPU's scratch (sq_lattn_gpu_scratch_size): the CPU's row buffers,
 * then the larger of the CPU's slots and a state per piece and head, the
 * pieces counted by a bound of T and B alone, so that any split of the
 * same rows into as many segments fits the size an even split gave. */
UNIT_TEST(test_attn_linear_gpu_scratch)
{
    enum { P = SQ_LATTN_GPU_PIECE };
    int H = 2, C = 64, hs = 32;
    size_t slot = (size_t)hs * hs + 2 * (size_t)hs;
    /* one segment of 1000 rows: 8 pieces */
    int one[2] = {0, 1000};
    size_t want = 1000 * (size_t)C + 8 * (size_t)H * slot;
    CHECK_EQ(sq_lattn_gpu_scratch_size(SQ_LATTN_LINREC, one, 1, H, C), want);
    CHECK_EQ(sq_lattn_gpu_scratch_size(SQ_LATTN_HYDRA, one, 1, C, C),
             2 * 1000 * (size_t)C + (size_t)((1000 + P - 1) / P) * C * 3);
    /* 3 segments of 300 rows (9 pieces) or of 1, 1 and 898 (1 + 1 + 8 =
     * 10): both sized by the bound (900 + 127 * 3) / 128 = 10 */
    int even[4] = {0, 300, 600, 900}, uneven[4] = {0, 1, 2, 900};
    size_t a = sq_lattn_gpu_scratch_size(SQ_LATTN_EFFICIENT, even, 3, H, C);
    size_t b = sq_lattn_gpu_scratch_size(SQ_LATTN_EFFICIENT, uneven, 3, H, C);
    CHECK_EQ(a, b);
    size_t pieces = (900 + (size_t)(P - 1) * 3) / P;
    CHECK(pieces >= 10);
    CHECK_EQ(a, 900 * (size_t)C + pieces * (size_t)H * slot);
    /* never less than the CPU's (many short segments: the slots win) */
    int many[41];
    for (int i = 0; i <= 40; i++)
        many[i] = i;
    CHECK(sq_lattn_gpu_scratch_size(SQ_LATTN_LINEAR, many, 40, H, C) >=
          sq_lattn_scratch_size(SQ_LATTN_LINEAR, many, 40, H, C));
    CHECK_EQ(sq_lattn_gpu_scratch_size(SQ_LATTN_LINEAR, many, 40, H, C),
             sq_lattn_scratch_size(SQ_LATTN_LINEAR, many, 40, H, C));
}
