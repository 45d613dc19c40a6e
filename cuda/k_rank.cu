// k_rank.cu - each row's target ranked against every candidate (lib/ops/
// rank.h), on the device, so that ranking a batch of users downloads four
// counts a user rather than every item's score.
//
// A block a row: its threads walk the row's items RK_THREADS apart, each
// counting its candidates (ok, not the target, not in the row's sorted
// excluded list, searched only for an item that would count) that score
// above and the same as the target, and any NaN; the block adds the
// threads' counts with shared-memory integer atomics (integers: the same
// sums in any order, so the CPU twin's counts, every run). Sampled
// candidates (drawn on the host) come as lists: k_rank_lists walks them.
//
// Budget: __launch_bounds__(256), 16 bytes of static shared memory.
#include "common.cuh"
#include "rank.h"
#include "topk.h"

#define RK_THREADS 256

// The block's sums of its threads' counts into cnt[0 .. SQ_RANK_COUNTS)
// (the NaN count as a flag); every thread calls it (barriers inside)
static __device__ void rk_block_counts(int *cnt, int *tot, int above, int equal, int n, int nan)
{
    int tid = threadIdx.x;
    if (tid < SQ_RANK_COUNTS)
        tot[tid] = 0;
    __syncthreads();
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
        cnt[tid] = tid == SQ_RANK_NAN ? tot[tid] > 0 : tot[tid];
}

// Block b: row b's items, a thread each in turn
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
    rk_block_counts(cnt + (size_t)b * SQ_RANK_COUNTS, tot, above, equal, n, nan);
}

// Block b: row b's given candidates cand[coff[b] .. coff[b+1]), a thread
// each in turn
static __global__ __launch_bounds__(RK_THREADS) void k_rank_lists(int *cnt, const float *sc,
                                                                  int V1, const int *tgt,
                                                                  const int *cand,
                                                                  const int *coff)
{
    __shared__ int tot[SQ_RANK_COUNTS];
    int b = blockIdx.x, tid = threadIdx.x;
    const float *row = sc + (size_t)b * V1;
    float st = row[tgt[b]];
    int above = 0, equal = 0, nan = tid == 0 && st != st;
    for (int j = coff[b] + tid; j < coff[b + 1]; j += RK_THREADS) {
        float x = row[cand[j]];
        above += x > st;
        equal += x == st;
        nan |= x != x;
    }
    rk_block_counts(cnt + (size_t)b * SQ_RANK_COUNTS, tot, above, equal,
                    tid == 0 ? coff[b + 1] - coff[b] : 0, nan);
}

// 0 when every target (and candidate) of B rows is an item of 1 .. V1 - 1;
// else the sticky error, naming the first that is not
static int rk_check_items(sq_gpu_be *be, const char *what, const int *x, int n, int V1)
{
    for (int i = 0; i < n; i++)
        if (x[i] < 1 || x[i] >= V1) {
            if (!be->failed) {
                be->failed = 1;
                sq_fail(&be->err, SQ_EX_SOFTWARE, "ranks on the GPU: %s %d is %d (items 1 .. %d)",
                        what, i, x[i], V1 - 1);
            }
            return -1;
        }
    return 0;
}

void be_rank_lists(sq_gpu_be *be, int *cnt, const float *sc, int B, int V1, const int *tgt,
                   const int *cand, const int *coff)
{
    if (B <= 0 || rk_check_items(be, "row's target", tgt, B, V1) ||
        rk_check_items(be, "candidate", cand, coff[B], V1))
        return;
    const int *dt = (const int *)be_op_upload(be, tgt, (size_t)B * sizeof *tgt);
    const int *doff = (const int *)be_op_upload(be, coff, (size_t)(B + 1) * sizeof *coff);
    const int *dc = coff[B] > 0 // no candidates at all: nothing read through it
                        ? (const int *)be_op_upload(be, cand, (size_t)coff[B] * sizeof *cand)
                        : doff;
    if (!dt || !doff || !dc)
        return; // the sticky error says which
    SQ_LAUNCH(be, k_rank_lists, (unsigned)B, RK_THREADS, 0, cnt, sc, V1, dt, dc, doff);
}

void be_rank_rows(sq_gpu_be *be, int *cnt, const float *sc, int B, int V1, const int *tgt,
                  const unsigned char *ok, const int *excl, const int *eoff)
{
    if (B <= 0 || rk_check_items(be, "row's target", tgt, B, V1))
        return;
    const int *dt = (const int *)be_op_upload(be, tgt, (size_t)B * sizeof *tgt);
    const unsigned char *dok;
    const int *dex, *doff;
    if (!dt || be_upload_filter(be, ok, V1, excl, eoff, B, &dok, &dex, &doff))
        return; // the sticky error says which
    SQ_LAUNCH(be, k_rank, (unsigned)B, RK_THREADS, 0, cnt, sc, V1, dt, dok, dex, doff);
}
