// lattn.cuh - what the linear attention kinds' two GPU forms share:
// k_lattn.cu (attn_linear.c's per-row sweeps, statement for statement) and
// k_lchunk.cu (the same sums a chunk of rows at a time).
#ifndef SQ_LATTN_CUH
#define SQ_LATTN_CUH

#include "common.cuh"

// sq_lattn_kind's values (attn_linear.h), as the op list passes them
enum { K_LINREC = 0, K_LINREC_PAPER, K_LINEAR, K_EFFICIENT, K_HYDRA, K_NO_L2, K_NO_L2_PAPER,
       K_NO_ELU, K_NO_ELU_PAPER };

// linrec's variant of a kind (attn_linear.h sq_linrec_variant: 0 full, 1
// no L2, 2 no elu) and whether it takes the paper's column scaling
static __device__ __forceinline__ int lat_variant(int kind)
{
    return kind >= K_NO_ELU ? 2 : kind >= K_NO_L2 ? 1 : 0;
}

static __device__ __forceinline__ int lat_paper(int kind)
{
    return kind == K_LINREC_PAPER || kind == K_NO_L2_PAPER || kind == K_NO_ELU_PAPER;
}

// The phases of a chunked call (k_lchunk.cu, k_echunk.cu), each a launch
// of a block per (piece, head), a piece SQ_LATTN_GPU_PIECE rows of a
// segment from its start: the forward is KEYS then FWD, the backward KEYS,
// BACK_Q, QUERIES, BACK_K. KEYS puts each piece's keys' state in its slot
// of the workspace, QUERIES the queries' state of the backward's second
// pass; FWD, BACK_Q and BACK_K start from the sum of the earlier (BACK_K:
// the later; bidirectional: all) pieces' slots.
enum { LC_KEYS, LC_FWD, LC_BACK_Q, LC_QUERIES, LC_BACK_K };

// One launch's arguments: the forward (fwd) or the backward of a kind;
// the chunked forms' phase, pieces (tiles: each piece's first row, -1
// past the batch's) and workspace (ws: a state per piece and head).
struct lat_args {
    int kind, fwd, ld, B, H, C, causal, T, shared, phase, ntiles;
    float *out, *cache, *scratch, *dq, *dk, *dv, *ws;
    const float *q, *k, *v, *dout;
    const int *off, *tiles;
};

/* elu(x) = x (x > 0), e^x - 1 (x <= 0), and d elu / dx = 1 (x > 0), e^x
 * (x <= 0): the CPU's float build computes e^x with vec.h's exp, e^x - 1
 * within 2e-7 of expm1. */
static __device__ __forceinline__ float elu_v(float x)
{
    return x > 0 ? x : expf(x) - 1.0f;
}

static __device__ __forceinline__ float elu_grad_v(float x)
{
    return x > 0 ? 1.0f : expf(x);
}

#define LC_SHARED_MAX (48 * 1024)

// The rows a chunk of the chunked forms for heads of hs dimensions (32
// while the block's buffers fit 48 KiB, else 16) and the shared bytes:
// the state, six chunk buffers, the scores, column vectors (efficient 3,
// the others 1) and a factor a row; 0 when not even 16 rows fit (heads
// over 70 dimensions): k_lattn.cu's sweep.
static inline int lat_chunk_rows(int kind, int hs, size_t *bytes)
{
    size_t vecs = kind == K_EFFICIENT ? 3 : 1;
    for (int R = 32; R >= 16; R /= 2) {
        size_t sl = (size_t)hs + 1;
        size_t f = (size_t)hs * sl + 6 * (size_t)R * sl + (size_t)R * (R + 1) + vecs * hs + R;
        if (f * sizeof(float) <= LC_SHARED_MAX) {
            *bytes = f * sizeof(float);
            return R;
        }
    }
    return 0;
}

// A piece's slot in the workspace: an hs x hs state, then two columns
static inline __host__ __device__ size_t lat_slot(int hs)
{
    return (size_t)hs * hs + 2 * (size_t)hs;
}

// One phase of a's chunked call, R rows a chunk, shared bytes: k_lchunk.cu
// (every kind but efficient) and k_echunk.cu (efficient)
void be_lchunk_launch(sq_gpu_be *be, const lat_args *a, int R, size_t bytes);
void be_echunk_launch(sq_gpu_be *be, const lat_args *a, int R, size_t bytes);

#endif
