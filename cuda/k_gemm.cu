// k_gemm.cu - the batch-invariant GEMM of scoring (sq_ctx_invariant): the
// GPU's twin of rowwise.c's guarantee that a user's scores do not depend on
// the users scored with it (the batch, the shard).
//
// cuBLAS picks its kernel, tile and split of K by the shape, so one row's
// products summed by a batch of 1 and by a batch of 256 can differ in the
// last bits (the simulated device's OpenBLAS does the same, which is how
// device.bats sees it). While the mode is on, be_gemm runs this kernel
// instead: every output C[i][j] is
//     acc = 0; for k = 0 .. K-1: acc = acc + A(i,k) * B(k,j)   (in that order)
//     C[i][j] = alpha * acc (+ beta * C[i][j])
// in fp32, each product and sum rounded on its own (nvcc --fmad=false), by
// the same code whatever M, N, the tile or the position: the same bits for
// a row in any batch. Tensor cores are not used (their accumulation order
// inside an instruction is the hardware's), so --precision does not apply
// to it; it is scoring's GEMM, a forward of one batch, not training's.
//
// Tiles: 64 x 64 outputs a block of 256 threads, each thread 4 x 4 outputs
// (rows ty + 16 i, columns tx + 16 j: a warp reads 16 consecutive columns
// of the B tile and two rows of the A tile, no bank conflict), K in
// slices of 16 through shared memory. K's last slice is padded with zeros
// that are never added (the loop stops at K). Budget: __launch_bounds__
// (256), 8.3 KiB of static shared memory, no spills.
#include "common.cuh"

#define GI_T 64    // a block's tile: GI_T x GI_T outputs
#define GI_K 16    // K a slice
#define GI_THREADS 256

static __global__ __launch_bounds__(GI_THREADS) void k_gemm_inv(
    int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
    int ldb, float beta, float *C, int ldc)
{
    __shared__ float as[GI_K][GI_T + 1], bs[GI_K][GI_T + 1]; // + 1: the stores by k spread over banks
    int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    int m0 = blockIdx.y * GI_T, n0 = blockIdx.x * GI_T;
    float acc[4][4];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            acc[i][j] = 0.0f;
    for (int k0 = 0; k0 < K; k0 += GI_K) {
        // the slice: as[kk][m] = A(m0 + m, k0 + kk), bs[kk][n] = B(k0 + kk, n0 + n);
        // consecutive threads along the operand's contiguous dimension
        for (int r = 0; r < GI_K * GI_T / GI_THREADS; r++) {
            int e = tid + r * GI_THREADS, kk, m;
            if (ta) { kk = e / GI_T; m = e % GI_T; } else { m = e / GI_K; kk = e % GI_K; }
            int gm = m0 + m, gk = k0 + kk;
            as[kk][m] = gm < M && gk < K ? A[ta ? (size_t)gk * lda + gm : (size_t)gm * lda + gk]
                                         : 0.0f;
            int n;
            if (tb) { n = e / GI_K; kk = e % GI_K; } else { kk = e / GI_T; n = e % GI_T; }
            int gn = n0 + n;
            gk = k0 + kk;
            bs[kk][n] = gn < N && gk < K ? B[tb ? (size_t)gn * ldb + gk : (size_t)gk * ldb + gn]
                                         : 0.0f;
        }
        __syncthreads();
        // a thread whose first row is past M has no row to compute (a
        // scoring batch of 1 user: 16 of 256 threads); the others compute
        // their rows past M too, which are never stored
        int kn = m0 + ty < M ? (K - k0 < GI_K ? K - k0 : GI_K) : 0;
        for (int kk = 0; kk < kn; kk++) {
            float a[4], b[4];
            for (int i = 0; i < 4; i++) {
                a[i] = as[kk][ty + 16 * i];
                b[i] = bs[kk][tx + 16 * i];
            }
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 4; j++) {
                    float p = a[i] * b[j];
                    acc[i][j] = acc[i][j] + p;
                }
        }
        __syncthreads();
    }
    for (int i = 0; i < 4; i++) {
        int gm = m0 + ty + 16 * i;
        if (gm >= M)
            continue;
        for (int j = 0; j < 4; j++) {
            int gn = n0 + tx + 16 * j;
            if (gn >= N)
                continue;
            float *c = &C[(size_t)gm * ldc + gn];
            float v = alpha * acc[i][j];
            *c = beta != 0.0f ? v + beta * *c : v;
        }
    }
}

void be_gemm_invariant(sq_gpu_be *b, int ta, int tb, int M, int N, int K, float alpha,
                       const float *A, int lda, const float *B, int ldb, float beta, float *C,
                       int ldc)
{
    dim3 grid((unsigned)((N + GI_T - 1) / GI_T), (unsigned)((M + GI_T - 1) / GI_T));
    if (grid.y > 65535) { // 4M rows: no scoring batch comes near
        if (!b->failed) {
            b->failed = 1;
            sq_fail(&b->err, SQ_EX_SOFTWARE, "invariant GEMM: %d rows is too many", M);
        }
        return;
    }
    SQ_LAUNCH(b, k_gemm_inv, grid, GI_THREADS, 0, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta,
              C, ldc);
}

void be_invariant(sq_gpu_be *b, int on)
{
    b->invariant = on != 0;
}
