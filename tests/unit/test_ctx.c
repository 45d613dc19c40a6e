/* Unit tests for lib/ops/ctx.c: the backend allocator, host <-> backend
 * copies and the ops' thread count (CPU; CUDA too where a device is). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>

#include "ctx.h"
#include "gpu.h"
#include "unit.h"
#include "vec.h"

UNIT_TEST(test_ctx_alloc_zeroed_aligned)
{
    sq_ctx cx = sq_ctx_cpu();
    sq_err e = {0};
    size_t sizes[] = {0, 1, 3, 63, 64, 65, 1000, 1 << 20};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        unsigned char *p = sq_ctx_alloc(&cx, sizes[s], &e);
        CHECK(p != NULL);
        if (!p)
            continue;
        CHECK_EQ((uintptr_t)p % 64, 0);
        size_t nz = 0;
        for (size_t i = 0; i < sizes[s]; i++)
            nz += p[i] != 0;
        CHECK_EQ(nz, 0);
        memset(p, 0xab, sizes[s]); /* the whole block is writable */
        sq_ctx_free(&cx, p);
    }
    CHECK_EQ(e.code, 0);
    sq_ctx_free(&cx, NULL); /* like free(NULL) */
}

UNIT_TEST(test_ctx_alloc_failure)
{
    sq_ctx cx = sq_ctx_cpu();
    sq_err e = {0};
    void *p = sq_ctx_alloc(&cx, SIZE_MAX - 8, &e);
    CHECK(p == NULL);
    CHECK_EQ(e.code, SQ_EX_OSERR);
    sq_ctx_free(&cx, p);
}

UNIT_TEST(test_ctx_upload_download)
{
    sq_ctx cx = sq_ctx_cpu();
    sq_err e = {0};
    enum { N = 517 };
    float host[N], back[N];
    for (int i = 0; i < N; i++)
        host[i] = (float)i * 0.5f - 7, back[i] = 0;
    float *dev = sq_ctx_alloc(&cx, sizeof host, &e);
    CHECK(dev != NULL);
    if (!dev)
        return;
    CHECK_EQ(sq_ctx_upload(&cx, dev, host, sizeof host, &e), 0);
    CHECK_EQ(sq_ctx_download(&cx, back, dev, sizeof back, &e), 0);
    CHECK(memcmp(host, back, sizeof host) == 0);
    CHECK_EQ(sq_ctx_upload(&cx, dev, host, 0, &e), 0); /* 0 bytes: no-op */
    sq_ctx_free(&cx, dev);
}

UNIT_TEST(test_ctx_threads)
{
    sq_ctx cx = sq_ctx_cpu();
    CHECK_EQ(sq_ctx_threads(&cx), omp_get_max_threads());
    CHECK_EQ(sq_ctx_threads(NULL), omp_get_max_threads());
    cx.threads = 3;
    CHECK_EQ(sq_ctx_threads(&cx), 3);
    int seen = 0; /* an op's loop with num_threads(sq_ctx_threads(cx)) */
    #pragma omp parallel num_threads(sq_ctx_threads(&cx))
    {
        #pragma omp single
        seen = omp_get_num_threads();
    }
    CHECK(seen >= 1 && seen <= 3);
}

/* SQ_PAR_FOR over n = 10 in steps of 3 with context cx: every iteration
 * once (in hits), and the OpenMP level each ran at (in level) */
static void par_for_levels(const sq_ctx *cx, int *hits, int *level)
{
    SQ_PAR_FOR(int, i, 10, 3, {
        hits[i]++;
        level[i] = omp_get_level();
    });
}

/* vec.h's loops open a team only when it would have more than one
 * thread: not for a one-thread context, not inside a region (nesting
 * off), where libgomp would build a team of one for nothing */
UNIT_TEST(test_ctx_team_inline)
{
    sq_ctx one = sq_ctx_cpu(), two = sq_ctx_cpu();
    one.threads = 1;
    two.threads = 2;
    CHECK_EQ(sq_ctx_team(&one), 1);
    CHECK_EQ(sq_ctx_team(&two), 2);
    int hits[10] = {0}, level[10] = {0};
    par_for_levels(&two, hits, level); /* a team: level 1 */
    for (int i = 0; i < 10; i += 3)
        CHECK(hits[i] == 1 && level[i] == 1);
    par_for_levels(&one, hits, level); /* inline: level 0 */
    for (int i = 0; i < 10; i += 3)
        CHECK(hits[i] == 2 && level[i] == 0);
    /* inside a region, as a micro-batch part with the main context: with
     * nesting off (OpenMP's default) inline at the region's level 1 */
    int nested = omp_get_max_active_levels() > 1, ran[2] = {0, 0};
    int team_in[2] = {0, 0}, lv[2][10] = {{0}}, h2[2][10] = {{0}};
    #pragma omp parallel num_threads(2)
    {
        int k = omp_get_thread_num();
        if (k < 2) {
            ran[k] = 1;
            team_in[k] = sq_ctx_team(&two);
            par_for_levels(&two, h2[k], lv[k]);
        }
    }
    for (int k = 0; k < 2; k++) {
        if (!ran[k]) /* OpenMP gave the region one thread */
            continue;
        CHECK_EQ(team_in[k], nested ? 2 : 1);
        for (int i = 0; i < 10; i += 3)
            CHECK(h2[k][i] == 1 && lv[k][i] == (nested ? 2 : 1));
    }
    for (int i = 0; i < 10; i++) /* the other indices never ran */
        if (i % 3)
            CHECK(hits[i] == 0 && h2[0][i] == 0);
}

UNIT_TEST(test_ctx_cuda)
{
    char name[256];
    if (!sq_gpu_probe(name, sizeof name))
        SKIP(name);
    sq_err e = {0};
    sq_gpu *g = NULL;
    CHECK_EQ(sq_gpu_open(&g, 0, &e), 0);
    if (!g)
        return;
    sq_ctx cx = {SQ_BACKEND_CUDA, 0, g, 0};
    enum { N = 1000 };
    float host[N], back[N];
    for (int i = 0; i < N; i++)
        host[i] = (float)i, back[i] = -1;
    float *dev = sq_ctx_alloc(&cx, sizeof host, &e);
    CHECK(dev != NULL);
    if (dev) {
        /* fresh device memory reads back as zeros */
        CHECK_EQ(sq_ctx_download(&cx, back, dev, sizeof back, &e), 0);
        int nz = 0;
        for (int i = 0; i < N; i++)
            nz += back[i] != 0;
        CHECK_EQ(nz, 0);
        CHECK_EQ(sq_ctx_upload(&cx, dev, host, sizeof host, &e), 0);
        CHECK_EQ(sq_ctx_download(&cx, back, dev, sizeof back, &e), 0);
        CHECK(memcmp(host, back, sizeof host) == 0);
        sq_ctx_free(&cx, dev);
    }
    void *z = sq_ctx_alloc(&cx, 0, &e); /* a valid minimal block */
    CHECK(z != NULL);
    sq_ctx_free(&cx, z);
    CHECK_EQ(e.code, 0);
    sq_gpu_close(g);
}
