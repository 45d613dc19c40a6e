// lchunk.cuh - the block-wide steps of the chunked linear attention forms
// (k_lchunk.cu: linrec, linear, hydra; k_echunk.cu: efficient). A block
// of LC_THREADS threads owns one (segment, head); each step below is a loop
// over a chunk's rows spread over the block's threads and ends at a
// barrier. The steps are calls, not inlined (__noinline__, their geometry
// by value: no stack): each is a loop over a chunk, so a call costs nothing
// next to it, and inlining every use into one kernel took nvcc 39 s for
// k_lchunk.cu alone (13 s as calls).
#ifndef SQ_LCHUNK_CUH
#define SQ_LCHUNK_CUH

#include "lattn.cuh"

#define LC_THREADS 256

#define FOR_T(i, n) for (int i = (int)threadIdx.x; i < (n); i += LC_THREADS)

// A block's work: piece rows p0 .. p1 - 1 (segment rows; the piece is the
// segment's pid-th of np) of the segment at rows o .. o + L - 1, head h;
// its slot and its segment's are tile - pid + q (q = 0 .. np - 1) of the
// workspace (lat_slot floats a head, heads together). Chunk buffers and
// the state have rows sl = hs + 1 floats apart (a walk down a column then
// spreads over the banks); P, R x R, has rows pl = R + 1 apart.
struct lc_w {
    int o, L, h, hs, sl, R, pl, ld, C, H, T, causal, p0, p1, pid, np, tile;
};

enum { M_COPY, M_ELU, M_PHI }; // a row's feature map

static __device__ __forceinline__ float lc_map(int m, float x)
{
    return m == M_ELU ? elu_v(x) : m == M_PHI ? elu_v(x) + 1.0f : x;
}

static __device__ __forceinline__ float lc_dmap(int m, float x)
{
    return m == M_COPY ? 1.0f : elu_grad_v(x); // phi' = elu'
}

static __device__ __forceinline__ void lc_sync(void)
{
    __syncthreads();
}

static __device__ void lc_zero(float *x, int n)
{
    FOR_T(i, n)
        x[i] = 0.0f;
    lc_sync();
}

// B[i][d] = m(x[c0 + i][d]) (times rs[row] when rs), rows i < n; zeros to R
static __device__ __noinline__ void lc_load(float *B, const float *x, size_t ldx, const lc_w w, int c0, int n,
                               int m, const float *rs)
{
    FOR_T(e, w.R * w.hs) {
        int i = e / w.hs, d = e % w.hs;
        float val = 0.0f;
        if (i < n) {
            size_t t = (size_t)(w.o + c0 + i);
            val = lc_map(m, x[t * ldx + (size_t)w.h * w.hs + d]);
            if (rs)
                val *= rs[t];
        }
        B[i * w.sl + d] = val;
    }
    lc_sync();
}

// The steps below give each thread a micro-tile of outputs: the block's
// 256 threads as 16 x 16, thread (ty, tx) the outputs (i0 + ty + 16 r,
// e0 + tx + 16 c) of each 16 MR x 16 MC tile. A step's loads are then
// shared by the thread's MR rows and MC columns (MR + MC shared loads for
// MR MC products, where a thread an output made two a product: the loads,
// not the arithmetic, bounded the steps). Each output still sums its terms
// in the one order, so the bits are those of a thread an output.
#define LC_TX 16
#define LC_TY (LC_THREADS / LC_TX)

// idx[k] = base + step k where below lim, else -1 (k < n): a thread's
// rows or columns of its micro-tile
static __device__ __forceinline__ void lc_tile_idx(int *idx, int n, int base, int step, int lim)
{
    for (int k = 0; k < n; k++)
        idx[k] = base + step * k < lim ? base + step * k : -1;
}

// P[i][j] = X_i . A_j where the mask allows (1: j <= i, 2: j >= i), else 0;
// rows R (the buffers' and P's), so every P[i][j] is written
static __device__ __noinline__ void lc_scores(float *P, const float *X, const float *A, const lc_w w, int n,
                                 int mask)
{
    enum { MR = 2, MC = 2 };
    int tx = (int)threadIdx.x % LC_TX, ty = (int)threadIdx.x / LC_TX;
    for (int i0 = 0; i0 < w.R; i0 += LC_TY * MR)
        for (int j0 = 0; j0 < w.R; j0 += LC_TX * MC) {
            float s[MR][MC] = {};
            int ir[MR], jc[MC];
            for (int r = 0; r < MR; r++)
                ir[r] = i0 + ty + LC_TY * r;
            for (int c = 0; c < MC; c++)
                jc[c] = j0 + tx + LC_TX * c;
            for (int d = 0; d < w.hs; d++) {
                float x[MR], y[MC];
                for (int r = 0; r < MR; r++)
                    x[r] = ir[r] < n ? X[ir[r] * w.sl + d] : 0.0f;
                for (int c = 0; c < MC; c++)
                    y[c] = jc[c] < n ? A[jc[c] * w.sl + d] : 0.0f;
                for (int r = 0; r < MR; r++)
                    for (int c = 0; c < MC; c++)
                        s[r][c] += x[r] * y[c];
            }
            for (int r = 0; r < MR; r++)
                for (int c = 0; c < MC; c++) {
                    int i = ir[r], j = jc[c];
                    if (i < w.R && j < w.R)
                        P[i * w.pl + j] = i < n && j < n && (mask == 1 ? j <= i : j >= i)
                                              ? s[r][c] : 0.0f;
                }
        }
    lc_sync();
}

// dst[i][e] (+)= sum_a X[i][a] S'(a, e) + sum_j P[i][j] Bv[j][e], rows i <
// n, S'(a, e) = S[a][e] (tr 0) or S[e][a] (tr 1); no P: no second sum.
// dst's rows ldd apart (a chunk buffer, or the rows of a global array).
static __device__ __noinline__ void lc_apply(float *dst, size_t ldd, int add, const float *X, const float *S,
                                int tr, const float *P, const float *Bv, const lc_w w, int n)
{
    enum { MR = 2, MC = 4 };
    int tx = (int)threadIdx.x % LC_TX, ty = (int)threadIdx.x / LC_TX;
    for (int i0 = 0; i0 < n; i0 += LC_TY * MR)
        for (int e0 = 0; e0 < w.hs; e0 += LC_TX * MC) {
            float acc[MR][MC] = {};
            int ir[MR], ec[MC];
            lc_tile_idx(ir, MR, i0 + ty, LC_TY, n);
            lc_tile_idx(ec, MC, e0 + tx, LC_TX, w.hs);
            for (int a = 0; a < w.hs; a++) {
                float x[MR], y[MC];
                for (int r = 0; r < MR; r++)
                    x[r] = ir[r] >= 0 ? X[ir[r] * w.sl + a] : 0.0f;
                for (int c = 0; c < MC; c++)
                    y[c] = ec[c] < 0 ? 0.0f : tr ? S[ec[c] * w.sl + a] : S[a * w.sl + ec[c]];
                for (int r = 0; r < MR; r++)
                    for (int c = 0; c < MC; c++)
                        acc[r][c] += x[r] * y[c];
            }
            for (int j = 0; P && j < n; j++) {
                float x[MR], y[MC];
                for (int r = 0; r < MR; r++)
                    x[r] = ir[r] >= 0 ? P[ir[r] * w.pl + j] : 0.0f;
                for (int c = 0; c < MC; c++)
                    y[c] = ec[c] >= 0 ? Bv[j * w.sl + ec[c]] : 0.0f;
                for (int r = 0; r < MR; r++)
                    for (int c = 0; c < MC; c++)
                        acc[r][c] += x[r] * y[c];
            }
            for (int r = 0; r < MR; r++)
                for (int c = 0; c < MC; c++)
                    if (ir[r] >= 0 && ec[c] >= 0) {
                        float *y = dst + (size_t)ir[r] * ldd + ec[c];
                        *y = add ? *y + acc[r][c] : acc[r][c];
                    }
        }
    lc_sync();
}

// S[a][e] += sum_{i < n} A[i][a] Bv[i][e]
static __device__ __noinline__ void lc_accum(float *S, const float *A, const float *Bv, const lc_w w, int n)
{
    enum { MR = 4, MC = 4 };
    int tx = (int)threadIdx.x % LC_TX, ty = (int)threadIdx.x / LC_TX;
    for (int a0 = 0; a0 < w.hs; a0 += LC_TY * MR)
        for (int e0 = 0; e0 < w.hs; e0 += LC_TX * MC) {
            float s[MR][MC];
            int ar[MR], ec[MC];
            lc_tile_idx(ar, MR, a0 + ty, LC_TY, w.hs);
            lc_tile_idx(ec, MC, e0 + tx, LC_TX, w.hs);
            for (int r = 0; r < MR; r++)
                for (int c = 0; c < MC; c++)
                    s[r][c] = ar[r] >= 0 && ec[c] >= 0 ? S[ar[r] * w.sl + ec[c]] : 0.0f;
            for (int i = 0; i < n; i++) {
                float x[MR], y[MC];
                for (int r = 0; r < MR; r++)
                    x[r] = ar[r] >= 0 ? A[i * w.sl + ar[r]] : 0.0f;
                for (int c = 0; c < MC; c++)
                    y[c] = ec[c] >= 0 ? Bv[i * w.sl + ec[c]] : 0.0f;
                for (int r = 0; r < MR; r++)
                    for (int c = 0; c < MC; c++)
                        s[r][c] += x[r] * y[c];
            }
            for (int r = 0; r < MR; r++)
                for (int c = 0; c < MC; c++)
                    if (ar[r] >= 0 && ec[c] >= 0)
                        S[ar[r] * w.sl + ec[c]] = s[r][c];
        }
    lc_sync();
}

// r[i] = X_i . Y_i, a warp a row
static __device__ __noinline__ void lc_rowdot(float *r, const float *X, const float *Y, const lc_w w, int n)
{
    int lane = (int)threadIdx.x % 32;
    for (int i = (int)threadIdx.x / 32; i < n; i += LC_THREADS / 32) {
        float s = 0.0f;
        for (int a = lane; a < w.hs; a += 32)
            s += X[i * w.sl + a] * Y[i * w.sl + a];
        s = be_warp_sum(s);
        if (lane == 0)
            r[i] = s;
    }
    lc_sync();
}

// The rows of the chunk from segment row c0
static __device__ __forceinline__ int lc_n(const lc_w &w, int c0)
{
    return w.L - c0 < w.R ? w.L - c0 : w.R;
}

// The work of block (piece blockIdx.x, head blockIdx.y), chunks of R
// rows; w.L is 0 for a dummy piece past the batch's
static __device__ __forceinline__ lc_w lc_w_of(const lat_args &a, int R)
{
    lc_w w;
    w.tile = (int)blockIdx.x;
    int r0 = a.tiles[w.tile];
    w.L = 0;
    if (r0 < 0)
        return w;
    int b = be_seg_of(a.off, a.B, r0);
    w.o = a.off[b];
    w.L = a.off[b + 1] - w.o;
    w.p0 = r0 - w.o;
    w.p1 = w.L - w.p0 < SQ_LATTN_GPU_PIECE ? w.L : w.p0 + SQ_LATTN_GPU_PIECE;
    w.pid = w.p0 / SQ_LATTN_GPU_PIECE;
    w.np = (w.L + SQ_LATTN_GPU_PIECE - 1) / SQ_LATTN_GPU_PIECE;
    w.h = (int)blockIdx.y;
    w.hs = a.C / a.H;
    w.sl = w.hs + 1;
    w.R = R;
    w.pl = R + 1;
    w.ld = a.ld;
    w.C = a.C;
    w.H = a.H;
    w.T = a.T;
    w.causal = a.causal;
    return w;
}

// The block's dynamic shared memory carved: the state S, six chunk
// buffers b and the scores P (lattn.cuh lat_chunk_rows); returns where
// the column vectors start
static __device__ __forceinline__ float *lc_carve(float *sh, const lc_w &w, float **S, float **b,
                                                  float **P)
{
    *S = sh;
    for (int i = 0; i < 6; i++)
        b[i] = sh + (size_t)w.hs * w.sl + (size_t)i * w.R * w.sl;
    *P = b[5] + (size_t)w.R * w.sl;
    return *P + (size_t)w.R * w.pl;
}

// The slot of the segment's piece q (this head's)
static __device__ __forceinline__ float *lc_slot(const lat_args &a, const lc_w &w, int q)
{
    return a.ws + ((size_t)(w.tile - w.pid + q) * w.H + w.h) * lat_slot(w.hs);
}

// The last chunk's first row of the piece (a backward sweep's start)
static __device__ __forceinline__ int lc_last(const lc_w &w)
{
    return w.p0 + (w.p1 - 1 - w.p0) / w.R * w.R;
}

// The block's slot from its state S (rows sl apart) and columns z1, z2
// (z2 may be null: zeros)
static __device__ __noinline__ void lc_put(float *slot, const float *S, const float *z1,
                                           const float *z2, const lc_w w)
{
    int nn = w.hs * w.hs;
    FOR_T(e2, nn + 2 * w.hs) {
        int c = e2 - nn;
        slot[e2] = e2 < nn ? S[(e2 / w.hs) * w.sl + e2 % w.hs]
                   : c < w.hs ? z1[c] : z2 ? z2[c - w.hs] : 0.0f;
    }
    lc_sync();
}

#endif
