/* The full cross-entropy under --precision bf16 (cuda/k_loss.cu's bf16
 * chunks): the logits and dlogits kept in bf16, h and E multiplied as
 * bf16, every sum fp32. Skipped without a backend.
 *
 * The reference emulates those roundings in double from the same float
 * inputs: h and E rounded to bf16; each logit their dot product rounded to
 * float, then to bf16 (cuBLAS's output); the row's softmax from those plus
 * the bias; each dlogit g (p - onehot) rounded to float, then to bf16; the
 * gradients their exact sums. The GPU sums in fp32 in other orders, so a
 * value near a bf16 rounding boundary may round the other way (one ulp of
 * bf16, 2^-8 relative, of one term): the loss is compared to 1e-5 relative
 * (the loss terms are ~7), the gradients to 1e-6 absolute + 1e-4 relative.
 * The fp32 logits (the other path, or rounding missed anywhere) miss them
 * by about 2^-9 relative of every term, so the gradients' 1e-4 tells them
 * apart. The sizes are odd (C = 24, V1 = 1001: rows padded to 1008), two
 * chunks of 32 and 5 entries; gradients start non-zero (the op adds). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_check.h"
#include "ops.h"
#include "rng.h"

#define BN 37
#define BC 24
#define BV1 1001
#define BCHUNK 32 /* the bf16 layout fits (under about 2 C rows it would not) */
#define BHROWS 53

/* x rounded to float, then to the nearest bf16 (ties to even) */
static double bf16r(double x)
{
    float f = (float)x;
    uint32_t u;
    memcpy(&u, &f, 4);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&f, &u, 4);
    return f;
}

typedef struct {
    const float *h, *E, *bias;
    const int *rows, *targets;
    float dloss;
} bf_in;

/* The emulated op: the loss (and *count); dh, dE, db (db NULL without a
 * bias) accumulate onto what they hold. */
static double ref_ce_bf16(const bf_in *in, double *dh, double *dE, double *db, int *count)
{
    int cnt = 0;
    for (int e = 0; e < BN; e++)
        cnt += in->targets[e] != 0;
    *count = cnt;
    double g = cnt ? (double)(in->dloss / (float)cnt) : 0, total = 0;
    double *l = malloc(sizeof(double) * BV1), *h16 = malloc(sizeof(double) * BC);
    double *E16 = malloc(sizeof(double) * BV1 * BC);
    if (!l || !h16 || !E16)
        abort();
    for (size_t i = 0; i < (size_t)BV1 * BC; i++)
        E16[i] = bf16r(in->E[i]);
    for (int e = 0; e < BN; e++) {
        int y = in->targets[e], row = in->rows ? in->rows[e] : e;
        if (!y)
            continue;
        for (int c = 0; c < BC; c++)
            h16[c] = bf16r(in->h[(size_t)row * BC + c]);
        double mx = -INFINITY, s = 0;
        for (int j = 1; j < BV1; j++) {
            double d = 0;
            for (int c = 0; c < BC; c++)
                d += h16[c] * E16[(size_t)j * BC + c];
            l[j] = bf16r(d) + (in->bias ? in->bias[j] : 0.0);
            mx = l[j] > mx ? l[j] : mx;
        }
        for (int j = 1; j < BV1; j++)
            s += exp(l[j] - mx);
        total += log(s) + mx - l[y];
        for (int j = 1; j < BV1; j++) {
            double d = bf16r(g * (exp(l[j] - mx) / s - (j == y)));
            for (int c = 0; c < BC; c++) {
                dh[(size_t)row * BC + c] += d * E16[(size_t)j * BC + c];
                dE[(size_t)j * BC + c] += d * h16[c];
            }
            if (db)
                db[j] += d;
        }
    }
    free(l);
    free(h16);
    free(E16);
    return cnt ? total / cnt : 0;
}

typedef struct {
    double loss;
    int count;
    float dh[BHROWS * BC], dE[BV1 * BC], db[BV1];
} bf_out;

/* One run on a bf16 context from the initial gradients (dh0, dE0, db0). */
static void bf_gpu(cuda_env *g, const bf_in *in, const float *dh0, const float *dE0,
                   const float *db0, bf_out *o)
{
    size_t nh = (size_t)BHROWS * BC, nE = (size_t)BV1 * BC;
    float *dh = cuda_up(g, dh0, nh), *dE = cuda_up(g, dE0, nE);
    float *db = in->bias ? cuda_up(g, db0, BV1) : NULL;
    float *hd = cuda_up(g, in->h, nh), *Ed = cuda_up(g, in->E, nE);
    float *bd = in->bias ? cuda_up(g, in->bias, BV1) : NULL;
    float *scratch = cuda_zeros(g, sq_ce_scratch_size(BCHUNK, BV1, BC));
    const void *host[2] = {in->rows, in->targets};
    size_t bytes[2] = {in->rows ? sizeof(int) * BN : 0, sizeof(int) * BN};
    if (g->bad || sq_gpu_stage(g->gpu, host, bytes, 2, &g->e) != 0) {
        g->bad = 1;
        return;
    }
    o->loss = in->bias ? sq_ce_full_bias(&g->cx, dh, dE, db, scratch, hd, Ed, bd, in->rows,
                                         in->targets, BN, BC, BV1, BCHUNK, in->dloss, &o->count)
                       : sq_ce_full(&g->cx, dh, dE, scratch, hd, Ed, in->rows, in->targets, BN,
                                    BC, BV1, BCHUNK, in->dloss, &o->count);
    cuda_down(g, o->dh, dh, nh);
    cuda_down(g, o->dE, dE, nE);
    if (db)
        cuda_down(g, o->db, db, BV1);
}

static void bf_case(unit_ctx *t, int with_bias, int rows_kind)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    CHECK(sq_gpu_set_precision(g.gpu, 2, &g.e) == 0); /* SQ_PREC_BF16 */
    sq_rng r;
    sq_rng_seed(&r, 1234 + (uint64_t)rows_kind, (uint64_t)with_bias);
    size_t nh = (size_t)BHROWS * BC, nE = (size_t)BV1 * BC;
    float *h = cuda_randn(nh, 0.3, &r), *E = cuda_randn(nE, 0.3, &r);
    float *bias = cuda_randn(BV1, 0.5, &r), *dh0 = cuda_randn(nh, 0.01, &r);
    float *dE0 = cuda_randn(nE, 0.01, &r), *db0 = cuda_randn(BV1, 0.01, &r);
    int targets[BN], rows[BN];
    for (int i = 0; i < BN; i++) { /* every 5th ignored; the last item once */
        targets[i] = i % 5 == 2 ? 0 : 1 + (int)sq_rng_below(&r, BV1 - 1);
        rows[i] = rows_kind == 1 ? i + i / 3 : (int)sq_rng_below(&r, BHROWS / 4);
    }
    targets[3] = BV1 - 1;
    bf_in in = {h, E, with_bias ? bias : NULL, rows_kind ? rows : NULL, targets, 1.7f};
    bf_out *o = calloc(2, sizeof *o);
    double *rdh = cuda_to_double(dh0, nh), *rdE = cuda_to_double(dE0, nE);
    double *rdb = cuda_to_double(db0, BV1);
    CHECK(h && E && bias && dh0 && dE0 && db0 && o && rdh && rdE && rdb);
    if (!g.bad && o && rdh && rdE && rdb) {
        for (int k = 0; k < 2 && !g.bad; k++)
            bf_gpu(&g, &in, dh0, dE0, db0, &o[k]);
        int rcount = -1;
        double rloss = ref_ce_bf16(&in, rdh, rdE, with_bias ? rdb : NULL, &rcount);
        CHECK(!g.bad);
        if (!g.bad) {
            CHECK_EQ(o[0].count, rcount);
            CHECK_NEAR(o[0].loss, rloss, 1e-5 * fabs(rloss));
            CHECK(cuda_close_to_ref(o[0].dh, rdh, nh, 1e-6, 1e-4, "bf16 ce dh"));
            CHECK(cuda_close_to_ref(o[0].dE, rdE, nE, 1e-6, 1e-4, "bf16 ce dE"));
            if (with_bias)
                CHECK(cuda_close_to_ref(o[0].db, rdb, BV1, 1e-6, 1e-4, "bf16 ce dbias"));
            /* two runs, the same bits */
            CHECK(o[0].loss == o[1].loss);
            CHECK(memcmp(o[0].dh, o[1].dh, sizeof o[0].dh) == 0);
            CHECK(memcmp(o[0].dE, o[1].dE, sizeof o[0].dE) == 0);
            CHECK(!with_bias || memcmp(o[0].db, o[1].db, sizeof o[0].db) == 0);
        }
    }
    cuda_close(&g);
    free(h); free(E); free(bias); free(dh0); free(dE0); free(db0);
    free(o); free(rdh); free(rdE); free(rdb);
}

UNIT_TEST(test_cuda_ce_full_bf16)
{
    for (int rk = 0; rk < 3; rk++)
        bf_case(t, 0, rk);
}

UNIT_TEST(test_cuda_ce_full_bias_bf16)
{
    for (int rk = 0; rk < 3; rk++)
        bf_case(t, 1, rk);
}
