/* cuda_check.h - what the GPU parity tests (test_cuda_*.c) share.
 *
 * A parity test runs a GPU op through its CPU API with a CUDA context
 * (the SQ_ON_GPU dispatch, the forwarder, the kernel) on device copies of
 * the inputs, and compares with the CPU op on the host arrays. It runs on
 * whatever backend sq_gpu_open finds: the simulated device of make check
 * (SEQREC_CUDA_LIB=build/lib/libseqrec-cuda-sim.so) or a real GPU (make
 * gpu-check); without either it skips, saying why.
 *
 *     cuda_env g;
 *     if (cuda_open(t, &g)) return;           (skipped or failed)
 *     float *d = cuda_up(&g, host, n);        (a device copy; NULL fails)
 *     sq_layernorm_forward(&g.cx, ...);       (device pointers)
 *     cuda_down(&g, out_host, d, n);          (syncs, checks the sticky error)
 *     CHECK(cuda_close_to(gpu, cpu, n, 1e-5, 1e-5, "layernorm out"));
 *     cuda_close(&g);                          (frees every cuda_up/cuda_zeros)
 */
#ifndef SQ_CUDA_CHECK_H
#define SQ_CUDA_CHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctx.h"
#include "gpu.h"
#include "rng.h"
#include "unit.h"

#define CUDA_CHECK_MAXBUF 4096 /* buffers a test may hold (one per cuda_up/zeros) */

typedef struct {
    sq_gpu *gpu;
    sq_ctx cx;          /* the CUDA context the ops take */
    sq_err e;
    void *buf[CUDA_CHECK_MAXBUF];
    int n_buf;
    int bad;            /* a copy or the sticky error failed */
} cuda_env;

/* 0 with g open; 1 when the test is skipped (no backend) or failed. */
static inline int cuda_open_(unit_ctx *t, cuda_env *g)
{
    char name[512];
    memset(g, 0, sizeof *g);
    if (!sq_gpu_probe(name, sizeof name)) {
        t->skipped = 1;
        fprintf(stderr, "  %s: skipped: %s\n", t->name, name);
        return 1;
    }
    if (sq_gpu_open(&g->gpu, 0, &g->e) != 0) {
        fprintf(stderr, "  %s: sq_gpu_open: %s\n", t->name, g->e.msg);
        t->failed = 1;
        return 1;
    }
    g->cx = (sq_ctx){SQ_BACKEND_CUDA, 0, g->gpu, 0};
    /* fp32 GEMMs: the twin is fp32, and a real GPU's default, tf32, misses
     * 1e-4 (the simulated device rounds tf32 as a GPU does); a test of
     * tf32 or bf16 sets it after this */
    if (sq_gpu_set_precision(g->gpu, 0, &g->e) != 0) {
        fprintf(stderr, "  %s: sq_gpu_set_precision: %s\n", t->name, g->e.msg);
        t->failed = 1;
        return 1;
    }
    return 0;
}
#define cuda_open(t, g) cuda_open_((t), (g))

static inline void *cuda_alloc(cuda_env *g, size_t bytes)
{
    if (g->n_buf == CUDA_CHECK_MAXBUF) {
        /* said, not left to a NULL pointer in a kernel (which poisons the
         * process's CUDA context for every later test) */
        fprintf(stderr, "    cuda_check: more than %d buffers in one test\n", CUDA_CHECK_MAXBUF);
        g->bad = 1;
        return NULL;
    }
    void *d = sq_ctx_alloc(&g->cx, bytes, &g->e); /* zeroed */
    if (!d) {
        g->bad = 1;
        return NULL;
    }
    g->buf[g->n_buf++] = d;
    return d;
}

/* A device copy of host[bytes]. */
static inline void *cuda_up_bytes(cuda_env *g, const void *host, size_t bytes)
{
    void *d = cuda_alloc(g, bytes);
    if (d && host && sq_gpu_upload(g->gpu, d, host, bytes, &g->e) != 0)
        g->bad = 1;
    return d;
}
static inline float *cuda_up(cuda_env *g, const float *host, size_t n)
{
    return cuda_up_bytes(g, host, n * sizeof(float));
}
static inline float *cuda_zeros(cuda_env *g, size_t n)
{
    return cuda_alloc(g, n * sizeof(float));
}

/* host[n] = the device array d, after the queued work; 0, or -1 (the
 * sticky error or the copy failed, in g->e). */
static inline int cuda_down_bytes(cuda_env *g, void *host, const void *d, size_t bytes)
{
    if (sq_gpu_sync(g->gpu, &g->e) != 0 || sq_gpu_download(g->gpu, host, d, bytes, &g->e) != 0) {
        g->bad = 1;
        fprintf(stderr, "    cuda: %s\n", g->e.msg);
        return -1;
    }
    return 0;
}
static inline int cuda_down(cuda_env *g, float *host, const float *d, size_t n)
{
    return cuda_down_bytes(g, host, d, n * sizeof(float));
}

/* |a - b| <= atol + rtol |b| everywhere, b the CPU's (bf) or a naive
 * reference of tests/ref in double (bd); prints the worst element when
 * not. */
static inline int cuda_near(const float *a, const float *bf, const double *bd, size_t n,
                            double atol, double rtol, const char *what, const char *other)
{
    size_t worst = 0;
    double wexcess = -1;
    for (size_t i = 0; i < n; i++) {
        double b = bf ? (double)bf[i] : bd[i];
        double d = fabs((double)a[i] - b), lim = atol + rtol * fabs(b);
        if (!(d <= lim) && (wexcess < 0 || d - lim > wexcess || isnan(d))) {
            wexcess = isnan(d) ? INFINITY : d - lim;
            worst = i;
        }
    }
    if (wexcess < 0)
        return 1;
    fprintf(stderr, "    %s: [%zu] gpu %.9g %s %.9g (atol %g rtol %g)\n", what, worst,
            (double)a[worst], other, bf ? (double)bf[worst] : bd[worst], atol, rtol);
    return 0;
}

/* Against the CPU twin's output. */
static inline int cuda_close_to(const float *a, const float *b, size_t n, double atol,
                                double rtol, const char *what)
{
    return cuda_near(a, b, NULL, n, atol, rtol, what, "cpu");
}

/* d's n floats brought into host (a buffer of n), then against the CPU's
 * cpu: cuda_down and cuda_close_to in one. */
static inline int cuda_down_close(cuda_env *g, float *host, const float *d, const float *cpu,
                                  size_t n, double atol, double rtol, const char *what)
{
    return cuda_down(g, host, d, n) == 0 && cuda_close_to(host, cpu, n, atol, rtol, what);
}

/* Against the op's definition (tests/ref): a GPU op is checked against its
 * naive reference as well as against its CPU twin. */
static inline int cuda_close_to_ref(const float *a, const double *ref, size_t n, double atol,
                                    double rtol, const char *what)
{
    return cuda_near(a, NULL, ref, n, atol, rtol, what, "reference");
}

/* A double copy of n floats (NULL when out of memory: the caller's CHECK). */
static inline double *cuda_to_double(const float *x, size_t n)
{
    double *d = malloc(n * sizeof *d);
    for (size_t i = 0; d && i < n; i++)
        d[i] = x[i];
    return d;
}

/* n floats from N(0, s^2) (NULL when out of memory: the caller's CHECK). */
static inline float *cuda_randn(size_t n, double s, sq_rng *r)
{
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; x && i < n; i++)
        x[i] = (float)(s * sq_rng_normal(r));
    return x;
}

/* A host copy of n floats (NULL when out of memory). */
static inline float *cuda_host_dup(const float *x, size_t n)
{
    float *d = malloc(n * sizeof *d);
    if (d)
        memcpy(d, x, n * sizeof *d);
    return d;
}

/* The same bits as the CPU's (the worst element printed when not). */
static inline int cuda_same_bits(const float *a, const float *b, size_t n, const char *what)
{
    return memcmp(a, b, n * sizeof *a) == 0 || cuda_close_to(a, b, n, 0, 0, what);
}

/* The largest |a - b|, b floats (bf) or doubles (bd): what a test measures
 * (gc_note, SQ_TEST_VERBOSE). */
static inline double cuda_max_diff(const float *a, const float *bf, const double *bd, size_t n)
{
    double w = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (bf ? (double)bf[i] : bd[i]));
        w = d > w ? d : w;
    }
    return w;
}

/* *w = max(*w, v): the worst difference a test reports (gc_note). */
static inline void cuda_keep_max(double *w, double v)
{
    if (v > *w)
        *w = v;
}

/* The segments' offsets off[0..B] staged, as the trainer stages a batch
 * (the ops read them through be_host_ints/be_ints). */
static inline int cuda_stage_off(cuda_env *g, const int *off, int B)
{
    const void *host[1] = {off};
    size_t bytes[1] = {(size_t)(B + 1) * sizeof(int)};
    return sq_gpu_stage(g->gpu, host, bytes, 1, &g->e);
}

/* Frees every buffer and closes; fails the test when a copy or the
 * sticky error failed. */
static inline void cuda_close_(unit_ctx *t, cuda_env *g)
{
    for (int i = 0; i < g->n_buf; i++)
        sq_ctx_free(&g->cx, g->buf[i]);
    if (g->bad) {
        fprintf(stderr, "  %s: GPU error: %s\n", t->name, g->e.msg);
        t->failed = 1;
    }
    sq_gpu_close(g->gpu);
    g->gpu = NULL;
}
#define cuda_close(g) cuda_close_(t, (g))

#endif
