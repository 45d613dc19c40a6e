/* GPU tests of the data-parallel ops (issue 36): sq_scale against its CPU
 * twin and its definition, and NCCL's id, communicator and in-place sums of
 * every type with one rank (the sum of one rank is its own buffer; two
 * ranks cannot share one GPU). On the simulated device NCCL is its one-rank
 * stand-in (cuda/k_nccl.cu); on a GPU the real library (make gpu-check). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_check.h"
#include "ops.h"
#include "rng.h"

UNIT_TEST(cuda_scale)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    enum { N = 1000 };
    float x[N], cpu[N], gpu[N];
    double ref[N];
    sq_rng r;
    sq_rng_seed(&r, 5, 0);
    for (int i = 0; i < N; i++)
        x[i] = (float)(sq_rng_uniform(&r) * 4 - 2);
    sq_ctx c = sq_ctx_cpu();
    for (int rep = 0; rep < 2; rep++) {
        float a = rep ? 0.375f : -1.5f;
        memcpy(cpu, x, sizeof x);
        sq_scale(&c, cpu, N, a);
        float *d = cuda_up(&g, x, N);
        sq_scale(&g.cx, d, N, a);
        CHECK(cuda_down(&g, gpu, d, N) == 0);
        for (int i = 0; i < N; i++)
            ref[i] = (double)x[i] * a; /* exact in double */
        CHECK(cuda_close_to(gpu, cpu, N, 0, 0, "scale vs cpu"));
        CHECK(cuda_close_to_ref(gpu, ref, N, 0, 1.2e-7, "scale vs tests/ref"));
    }
    cuda_close(&g);
}

UNIT_TEST(cuda_nccl_one_rank)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    unsigned char id[128];
    sq_err e = {0};
    if (sq_ctx_nccl_id(&g.cx, id, sizeof id, &e)) {
        /* a GPU machine without NCCL says so; that is not this test's */
        fprintf(stderr, "  %s: skipped: %s\n", t->name, e.msg);
        t->skipped = 1;
        cuda_close(&g);
        return;
    }
    CHECK_EQ(sq_ctx_nccl_sum(&g.cx, g.buf[0], 1, SQ_NCCL_F32, &e), SQ_EX_SOFTWARE);
    CHECK(strstr(e.msg, "no communicator") != NULL);
    e = (sq_err){0};
    CHECK_EQ(sq_ctx_nccl_open(&g.cx, id, sizeof id, 1, 0, &e), 0);
    float f[5] = {1.5f, -2, 0, 3e-8f, 7};
    double dd[3] = {1e-300, -4, 0.1};
    unsigned char b[4] = {0, 255, 7, 128};
    float fo[5];
    double ddo[3];
    unsigned char bo[4];
    float *df = cuda_up(&g, f, 5);
    void *dd_ = cuda_up_bytes(&g, dd, sizeof dd), *db = cuda_up_bytes(&g, b, sizeof b);
    CHECK_EQ(sq_ctx_nccl_sum(&g.cx, df, 5, SQ_NCCL_F32, &e), 0);
    CHECK_EQ(sq_ctx_nccl_sum(&g.cx, dd_, 3, SQ_NCCL_F64, &e), 0);
    CHECK_EQ(sq_ctx_nccl_sum(&g.cx, db, 4, SQ_NCCL_U8, &e), 0);
    CHECK(cuda_down(&g, fo, df, 5) == 0);
    CHECK(cuda_down_bytes(&g, ddo, dd_, sizeof ddo) == 0);
    CHECK(cuda_down_bytes(&g, bo, db, sizeof bo) == 0);
    CHECK(memcmp(f, fo, sizeof f) == 0);
    CHECK(memcmp(dd, ddo, sizeof dd) == 0);
    CHECK(memcmp(b, bo, sizeof b) == 0);
    /* one communicator a context */
    CHECK_EQ(sq_ctx_nccl_open(&g.cx, id, sizeof id, 1, 0, &e), SQ_EX_SOFTWARE);
    cuda_close(&g);
}
