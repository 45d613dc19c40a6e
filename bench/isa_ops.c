/* isa_ops - the throughput of every vectorised CPU kernel on the
 * instruction set this binary runs (issue 33): the kernels target_clones
 * builds per set (vec.h SQ_VEC) and the shaped scoring tile (rowwise.c).
 * `make isa-test` builds it three times, with clones (the host's widest
 * set), for AVX2 alone and for baseline x86-64 alone (make ISA=...), runs
 * each build the host can run on one thread, and prints the table: a
 * kernel far slower on AVX2 than the width alone explains is one whose
 * accumulators spill.
 *
 * Usage: isa_ops [SECONDS]   (per op, default 0.3)
 * Prints CSV lines "op,isa,shape,us,rate,unit": microseconds a call (best
 * of the calls) and GB/s of the op's operands (element-wise ops) or GFLOP/s
 * (the GEMM-like ones), isa as sq_isa_name. Shapes are SASRec's on Beauty:
 * T = 128 x 50 rows of C = 64, H = 2 heads, V1 = 12102 items. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "adam.h"
#include "attn_linear.h"
#include "isa.h"
#include "ops.h"
#include "rowwise.h"

enum { B = 128, N = 50, T = B * N, C = 64, H = 2, V1 = 12102, U = 256 };

typedef struct {
    sq_ctx cx;
    float *x, *y, *z, *dx, *dy, *w, *bias, *mean, *rstd, *att, *cache, *scratch, *m, *v, *E;
    uint8_t *mask;
    int off[B + 1], *targets;
} bench;

typedef struct {
    const char *name, *shape, *unit;
    double work; /* bytes or flops a call */
    void (*run)(bench *s);
} op;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void ln_fwd(bench *s)
{
    sq_layernorm_forward(&s->cx, s->y, s->mean, s->rstd, s->x, s->w, s->bias, T, C, 1e-8f);
}
static void ln_bwd(bench *s)
{
    sq_layernorm_backward(&s->cx, s->dx, s->z, s->z + C, s->dy, s->x, s->w, s->mean,
                          s->rstd, T, C);
}
static void gelu_fwd(bench *s) { sq_gelu_forward(&s->cx, s->y, s->x, (size_t)T * C); }
static void gelu_bwd(bench *s) { sq_gelu_backward(&s->cx, s->dx, s->dy, s->x, (size_t)T * C); }
static void relu_fwd(bench *s) { sq_relu_forward(&s->cx, s->y, s->x, (size_t)T * C); }
static void relu_bwd(bench *s) { sq_relu_backward(&s->cx, s->dx, s->dy, s->x, (size_t)T * C); }
static void drop_fwd(bench *s)
{
    sq_dropout_forward(&s->cx, s->y, s->mask, s->x, T, C, 0.5f, 1, 1, 1);
}
static void drop_bwd(bench *s)
{
    sq_dropout_backward(&s->cx, s->dx, s->dy, s->mask, (size_t)T * C, 0.5f);
}
static void res_fwd(bench *s) { sq_residual_forward(&s->cx, s->y, s->x, s->z, (size_t)T * C); }
static void res_bwd(bench *s)
{
    sq_residual_backward(&s->cx, s->dx, s->z, s->dy, (size_t)T * C);
}
static void att_fwd(bench *s)
{
    sq_attention_forward(&s->cx, s->y, s->att, s->x, s->x, s->x, C, s->off, B, H, C, 1);
}
static void att_bwd(bench *s)
{
    sq_attention_backward(&s->cx, s->dx, s->dx, s->dx, s->dy, s->y, s->x, s->x, s->x, s->att,
                          C, s->off, B, H, C, 1);
}
static void lin_fwd(bench *s, sq_lattn_kind k)
{
    sq_lattn_forward(&s->cx, k, s->y, s->cache, s->scratch, s->x, s->x, s->x, C, s->off, B, H,
                     C, 1);
}
static void lin_bwd(bench *s, sq_lattn_kind k)
{
    sq_lattn_backward(&s->cx, k, s->dx, s->dx, s->dx, s->scratch, s->dy, s->x, s->x, s->x,
                      s->cache, C, s->off, B, H, C, 1);
}
static void linrec_fwd(bench *s) { lin_fwd(s, SQ_LATTN_LINREC); }
static void linrec_bwd(bench *s) { lin_bwd(s, SQ_LATTN_LINREC); }
static void linear_fwd(bench *s) { lin_fwd(s, SQ_LATTN_LINEAR); }
static void linear_bwd(bench *s) { lin_bwd(s, SQ_LATTN_LINEAR); }
static void ce(bench *s)
{
    int count;
    sq_ce_full(&s->cx, s->dx, s->E + (size_t)V1 * C, s->scratch, s->x, s->E, NULL, s->targets,
               B, C, V1, sq_ce_chunk(B, V1), 1.0f, &count);
}
static void adam(bench *s)
{
    sq_adam_cfg cfg = {1e-3, 0.9, 0.98, 1e-8, 0, 0, 0};
    sq_adam_update(&s->cx, s->E, s->E + (size_t)V1 * C, s->m, s->v, (size_t)V1 * C, &cfg, 3);
}
static void score(bench *s)
{
    sq_rowwise_linear(&s->cx, s->scratch, s->x, s->E, NULL, U, C, V1);
}

static double time_op(bench *s, const op *o, double budget)
{
    o->run(s); /* warm-up: every buffer touched */
    double best = 1e30, end = now() + budget;
    for (int calls = 0; calls < 3 || now() < end; calls++) {
        double t0 = now();
        o->run(s);
        double dt = now() - t0;
        best = dt < best ? dt : best;
    }
    return best;
}

static float *alloc_uniform(size_t n, unsigned long long *r)
{
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; p && i < n; i++) {
        *r ^= *r << 13;
        *r ^= *r >> 7;
        *r ^= *r << 17;
        p[i] = (float)((double)(*r >> 11) / 4503599627370496.0 - 1.0);
    }
    return p;
}

int main(int argc, char **argv)
{
    double budget = argc > 1 ? atof(argv[1]) : 0.3;
    if (argc > 2 || !(budget > 0)) {
        fprintf(stderr, "usage: isa_ops [SECONDS]\n");
        return 64;
    }
    bench s = {0};
    s.cx = sq_ctx_cpu();
    s.cx.threads = 1;
    s.cx.rowwise = 1;
    for (int b = 0; b <= B; b++)
        s.off[b] = b * N;
    size_t tc = (size_t)T * C, vc = (size_t)V1 * C;
    size_t cache = sq_lattn_cache_size(SQ_LATTN_LINREC, s.off, B, H, C);
    size_t scratch = (size_t)U * V1 + sq_ce_scratch_size(B, V1, C) +
                     sq_lattn_scratch_size(SQ_LATTN_LINREC, s.off, B, H, C);
    unsigned long long r = 88172645463325252ull;
    float **bufs[] = {&s.x, &s.y, &s.z, &s.dx, &s.dy, &s.w, &s.bias, &s.mean, &s.rstd,
                      &s.att, &s.cache, &s.scratch, &s.m, &s.v, &s.E};
    size_t lens[] = {tc, tc, tc, tc, tc, C, C, T, T, sq_attention_cache_size(s.off, B, H),
                     cache, scratch, vc, vc, 2 * vc};
    int ok = 1;
    for (size_t i = 0; i < sizeof lens / sizeof *lens; i++)
        ok &= (*bufs[i] = alloc_uniform(lens[i], &r)) != NULL;
    s.mask = malloc(tc);
    s.targets = malloc(B * sizeof *s.targets);
    if (!ok || !s.mask || !s.targets) {
        fprintf(stderr, "isa_ops: out of memory\n");
        return 71;
    }
    for (int i = 0; i < B; i++)
        s.targets[i] = 1 + i * 97 % (V1 - 1);
    for (size_t i = 0; i < vc; i++)
        s.v[i] = s.v[i] * s.v[i]; /* second moments are not negative */
    double rc = 4.0 * tc, a2 = 2.0 * N * (N + 1) / 2 * C * B; /* flops of q k^T or p v */
    const op ops[] = {
        {"layernorm_fwd", "6400x64", "GB/s", 2 * rc, ln_fwd},
        {"layernorm_bwd", "6400x64", "GB/s", 3 * rc, ln_bwd},
        {"gelu_fwd", "409600", "GB/s", 2 * rc, gelu_fwd},
        {"gelu_bwd", "409600", "GB/s", 3 * rc, gelu_bwd},
        {"relu_fwd", "409600", "GB/s", 2 * rc, relu_fwd},
        {"relu_bwd", "409600", "GB/s", 3 * rc, relu_bwd},
        {"dropout_fwd", "409600", "GB/s", 2.25 * rc, drop_fwd},
        {"dropout_bwd", "409600", "GB/s", 2.25 * rc, drop_bwd},
        {"residual_fwd", "409600", "GB/s", 3 * rc, res_fwd},
        {"residual_bwd", "409600", "GB/s", 3 * rc, res_bwd},
        {"softmax_attn_fwd", "128x50 d64 h2", "GFLOP/s", 2 * a2, att_fwd},
        {"softmax_attn_bwd", "128x50 d64 h2", "GFLOP/s", 4 * a2, att_bwd},
        {"linrec_fwd", "128x50 d64 h2", "GFLOP/s", 4.0 * T * C * C / H, linrec_fwd},
        {"linrec_bwd", "128x50 d64 h2", "GFLOP/s", 8.0 * T * C * C / H, linrec_bwd},
        {"linear_attn_fwd", "128x50 d64 h2", "GFLOP/s", 4.0 * T * C * C / H, linear_fwd},
        {"linear_attn_bwd", "128x50 d64 h2", "GFLOP/s", 8.0 * T * C * C / H, linear_bwd},
        {"ce_full", "128x12102 d64", "GFLOP/s", 6.0 * B * V1 * C, ce},
        {"adam", "774528", "GB/s", 7.0 * 4 * vc, adam},
        {"score_rowwise", "256x12102 d64", "GFLOP/s", 2.0 * U * V1 * C, score},
    };
    const char *isa = sq_isa_name(sq_isa_detect());
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        double t = time_op(&s, &ops[i], budget);
        printf("%s,%s,%s,%.1f,%.2f,%s\n", ops[i].name, isa, ops[i].shape, t * 1e6,
               ops[i].work / t / 1e9, ops[i].unit);
        fflush(stdout);
    }
    for (size_t i = 0; i < sizeof lens / sizeof *lens; i++)
        free(*bufs[i]);
    free(s.mask);
    free(s.targets);
    return 0;
}
