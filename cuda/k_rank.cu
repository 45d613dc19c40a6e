// k_rank.cu - each row's target ranked against every candidate (lib/ops/
// rank.h), on the device, so that ranking a batch of users downloads four
// counts a user rather than every item's score.
//
// A block a row: its threads walk the row's items TK_THREADS apart, each
// counting its candidates (ok, not the target, not in the row's sorted
// excluded list, searched only for an item that would count) that score
// above and the same as the target, and any NaN; the block adds the
// threads' counts with shared-memory integer atomics (integers: the same
// sums in any order, so the CPU twin's counts, every run).
//
// Budget: __launch_bounds__(256), 16 bytes of static shared memory.
#include "common.cuh"
#include "rank.h"
#include "topk.h"

#define RK_THREADS 256

static __global__ __launch_bounds__(RK_THREADS) void k_rank(int *cnt, const float *sc, int V1,
                                                            const int *tgt,
                                                            const unsigned char *ok,
                                                            const int *excl, const int *eoff)
{
    __shared__ int tot[SQ_RANK_COUNTS];
    int b = blockIdx.x, tid = threadIdx.x;
    const float *row = sc + (size_t)b * V1;
    const int *ex = excl ? excl + eoff[b] : NULL;
    int n_ex = excl ? eoff[b + 1] - eoff[b] : 0, t = tgt[b];
    float st = row[t];
    if (tid < SQ_RANK_COUNTS)
        tot[tid] = 0;
    __syncthreads();
    int above = 0, equal = 0, n = 0, nan = tid == 0 && st != st;
    for (int i = 1 + tid; i < V1; i += RK_THREADS) {
        if (i == t || !ok[i])
            continue;
        float x = row[i];
        if (ex && sq_sorted_has(ex, n_ex, i))
            continue;
        above += x > st;
        equal += x == st;
        nan |= x != x;
        n++;
    }
    if (above)
        atomicAdd(&tot[SQ_RANK_ABOVE], above);
    if (equal)
        atomicAdd(&tot[SQ_RANK_EQUAL], equal);
    if (n)
        atomicAdd(&tot[SQ_RANK_N], n);
    if (nan)
        atomicAdd(&tot[SQ_RANK_NAN], 1);
    __syncthreads();
    if (tid < SQ_RANK_COUNTS)
        cnt[(size_t)b * SQ_RANK_COUNTS + tid] =
            tid == SQ_RANK_NAN ? tot[tid] > 0 : tot[tid];
}

void be_rank_rows(sq_gpu_be *be, int *cnt, const float *sc, int B, int V1, const int *tgt,
                  const unsigned char *ok, const int *excl, const int *eoff)
{
    if (B <= 0)
        return;
    for (int b = 0; b < B; b++)
        if (tgt[b] < 1 || tgt[b] >= V1) {
            if (!be->failed) {
                be->failed = 1;
                sq_fail(&be->err, SQ_EX_SOFTWARE, "ranks on the GPU: row %d's target %d "
                        "(items 1 .. %d)", b, tgt[b], V1 - 1);
            }
            return;
        }
    const int *dt = (const int *)be_op_upload(be, tgt, (size_t)B * sizeof *tgt);
    const unsigned char *dok;
    const int *dex, *doff;
    if (!dt || be_upload_filter(be, ok, V1, excl, eoff, B, &dok, &dex, &doff))
        return; // the sticky error says which
    SQ_LAUNCH(be, k_rank, (unsigned)B, RK_THREADS, 0, cnt, sc, V1, dt, dok, dex, doff);
}
