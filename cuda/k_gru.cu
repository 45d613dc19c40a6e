// k_gru.cu - one GRU layer over packed sequences (gru.h: PyTorch's gate
// equations, h_0 = 0, each sequence scanned oldest to newest), forward and
// backward through time, the GPU twins of gru.c.
//
// The same plan as the CPU's: the input projections of every row are one
// GEMM (cuBLAS), then step t = 0, 1, ... multiplies the previous states by
// W_hh (one GEMM) and a kernel applies the gates. The CPU gathers the
// sequences still running at t into a compact block; here the block keeps
// a row for every sequence b (zeros for those that ended: their gradient
// rows are zero too, so they add nothing), so no index list moves and the
// GEMM has the same shape every step. A step is two launches each way:
// the gate kernel leaves h_t in the block the next GEMM reads, and the
// backward's carry into h_{t-1} rides in dP to the next step's kernel. The
// weights' gradients are not summed step by step: after the loop dA's rows
// become every step's dQ rows, db_hh their column sums and dw_hh one GEMM
// with h shifted a row (the first steps' rows zeroed: h_0 = 0). Column
// sums are k_rows.cu's two passes; the GEMMs are cuBLAS's, in a fixed
// algorithm: two runs give the same bits. The gates use CUDA's
// expf/tanhf (the CPU: the C library's), so the results agree with gru.c
// to float rounding, not bit for bit.
//
// Scratch (sq_gru_scratch_size(B, T, H) reals, as the CPU's): forward
// P [B, H] | Q [B, 3H]; backward dH [T, H] (the CPU's; unused here) | dA
// [T, 3H] | P | dQ | dP [B, H].
//
// Budget: __launch_bounds__(256), no shared memory, a few registers.
#include "common.cuh"

#define GR_THREADS 256

// P[b] = h_{t-1} of sequence b (row off[b] + t - 1), zeros at t = 0 or for
// a sequence that has ended (length <= t)
static __global__ __launch_bounds__(GR_THREADS) void k_gru_prev(float *P, const float *h,
                                                                const int *off, int B, int t,
                                                                int H)
{
    size_t id = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= (size_t)B * H)
        return;
    int b = (int)(id / H), j = (int)(id % H);
    int running = off[b + 1] - off[b] > t;
    P[id] = t > 0 && running ? h[(size_t)(off[b] + t - 1) * H + j] : 0.0f;
}

// gru.c's step_forward for the running sequences: the cache row holds W_i x
// + b_i and becomes r, z, n, W_hn h + b_hn; Q[b] = W_hh h_{t-1} (plus b_hh,
// added here when b_hh). P[b] = h_{t-1} becomes h_t (zeros for a sequence
// that has ended): the next step's GEMM reads it, so no kernel gathers it.
static __global__ __launch_bounds__(GR_THREADS) void k_gru_step(
    float *h, float *cache, float *P, const float *Q, const float *b_hh, const int *off, int B,
    int t, int H)
{
    size_t id = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= (size_t)B * H)
        return;
    int b = (int)(id / H), j = (int)(id % H);
    if (off[b + 1] - off[b] <= t) {
        P[id] = 0.0f;
        return;
    }
    size_t row = (size_t)(off[b] + t);
    float *c = cache + row * 4 * H;
    const float *q = Q + (size_t)b * 3 * H;
    float qr = q[j], qz = q[H + j], hn = q[2 * H + j];
    if (b_hh) {
        qr += b_hh[j];
        qz += b_hh[H + j];
        hn += b_hh[2 * H + j];
    }
    float r = be_sigmoid(c[j] + qr);
    float z = be_sigmoid(c[H + j] + qz);
    float n = tanhf(c[2 * H + j] + r * hn);
    c[j] = r;
    c[H + j] = z;
    c[2 * H + j] = n;
    c[3 * H + j] = hn;
    float hv = (1.0f - z) * n + z * P[id];
    h[row * H + j] = hv;
    P[id] = hv;
}

// gru.c's step_backward for the running sequences: the input
// pre-activations' gradients into dA's rows, W_hh h + b_hh's into dQ[b]
// (zeros for the sequences that have ended), and dP[b] = z dh, onto which
// the step's GEMM adds dQ W_hh: the carry into h_{t-1}, which step t - 1
// adds to its dh (where the sequence ran at t), so no kernel carries it.
static __global__ __launch_bounds__(GR_THREADS) void k_gru_step_back(
    float *dA, float *dQ, float *dP, const float *dh, const float *cache, const float *h,
    const int *off, int B, int t, int H)
{
    size_t id = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= (size_t)B * H)
        return;
    int b = (int)(id / H), j = (int)(id % H), len = off[b + 1] - off[b];
    float *dq = dQ + (size_t)b * 3 * H;
    if (len <= t) {
        dq[j] = dq[H + j] = dq[2 * H + j] = 0;
        dP[id] = 0;
        return;
    }
    size_t row = (size_t)(off[b] + t);
    const float *c = cache + row * 4 * H;
    float r = c[j], z = c[H + j], n = c[2 * H + j], hn = c[3 * H + j];
    float dhv = dh[row * H + j] + (len > t + 1 ? dP[id] : 0.0f);
    float hp = t > 0 ? h[(row - 1) * H + j] : 0.0f;
    float dan = dhv * (1.0f - z) * (1.0f - n * n);
    float daz = dhv * (hp - n) * z * (1.0f - z);
    float dar = dan * hn * r * (1.0f - r);
    float *da = dA + row * 3 * H;
    da[j] = dar;
    da[H + j] = daz;
    da[2 * H + j] = dan;
    dq[j] = dar;
    dq[H + j] = daz;
    dq[2 * H + j] = dan * r;
    dP[id] = dhv * z;
}

// dA's rows into every step's dQ rows (the third block times r), in
// place, after dA's own uses
static __global__ __launch_bounds__(GR_THREADS) void k_gru_dq_rows(float *dA, const float *cache,
                                                                   int T, int H)
{
    size_t id = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= (size_t)T * H)
        return;
    size_t row = id / H, j = id % H;
    dA[row * 3 * H + 2 * H + j] *= cache[row * 4 * H + j];
}

// The rows of the sequences' first steps to zero (h_0 = 0: no W_hh term)
static __global__ __launch_bounds__(GR_THREADS) void k_gru_zero_first(float *d, const int *off,
                                                                      int B, int G)
{
    size_t id = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= (size_t)B * G)
        return;
    int b = (int)(id / G), c = (int)(id % G);
    if (off[b + 1] > off[b])
        d[(size_t)off[b] * G + c] = 0.0f;
}

// The staged offsets' device mirror and the batch's longest sequence; -1
// (and the sticky error) when off is not a staged host array.
static int gr_steps(sq_gpu_be *be, const int *off, int B, int H, const char *what)
{
    const int *h = be_host_ints(be, off);
    if (!h || B < 0 || H < 1) {
        be_note(be, cudaErrorInvalidValue, what);
        return -1;
    }
    int n = 0;
    for (int b = 0; b < B; b++)
        if (h[b + 1] - h[b] > n)
            n = h[b + 1] - h[b];
    return n;
}

void be_gru_forward(sq_gpu_be *be, float *h, float *cache, float *scratch, const float *x,
                    const float *w_ih, const float *w_hh, const float *b_ih, const float *b_hh,
                    const int *off, int B, int In, int H)
{
    int N = gr_steps(be, off, B, H, "gru_forward: off not staged, or a bad shape");
    int T = N > 0 ? be_host_ints(be, off)[B] : 0, G = 3 * H;
    if (T <= 0)
        return;
    const int *doff = be_ints(be, off);
    float *P = scratch, *Q = P + (size_t)B * H;
    unsigned nb = be_blocks((size_t)B * H, GR_THREADS);
    be_gemm(be, 0, 1, T, G, In, 1, x, In, w_ih, In, 0, cache, 4 * H);
    if (b_ih)
        be_add2d(be, cache, 4 * H, b_ih, 0, T, G);
    SQ_LAUNCH(be, k_gru_prev, nb, GR_THREADS, 0, P, h, doff, B, 0, H); // h_0 = 0
    for (int t = 0; t < N; t++) {
        be_gemm(be, 0, 1, B, G, H, 1, P, H, w_hh, H, 0, Q, G);
        SQ_LAUNCH(be, k_gru_step, nb, GR_THREADS, 0, h, cache, P, Q, b_hh, doff, B, t, H);
    }
}

void be_gru_backward(sq_gpu_be *be, float *dx, float *dw_ih, float *dw_hh, float *db_ih,
                     float *db_hh, float *scratch, const float *dh, const float *x,
                     const float *h, const float *cache, const float *w_ih, const float *w_hh,
                     const int *off, int B, int In, int H)
{
    int N = gr_steps(be, off, B, H, "gru_backward: off not staged, or a bad shape");
    int T = N > 0 ? be_host_ints(be, off)[B] : 0, G = 3 * H;
    if (T <= 0)
        return;
    const int *doff = be_ints(be, off);
    float *dH = scratch, *dA = dH + (size_t)T * H, *P = dA + (size_t)T * G;
    float *dQ = P + (size_t)B * H, *dP = dQ + (size_t)B * G;
    unsigned nb = be_blocks((size_t)B * H, GR_THREADS);
    (void)dH; // the CPU's carry rows: here the carry rides in dP from step to step
    for (int t = N - 1; t >= 0; t--) {
        SQ_LAUNCH(be, k_gru_step_back, nb, GR_THREADS, 0, dA, dQ, dP, dh, cache, h, doff, B, t,
                  H);
        if (t > 0) // h_0 = 0: nothing before
            be_gemm(be, 0, 0, B, H, G, 1, dQ, G, w_hh, H, 1, dP, H); // onto z dh
    }
    if (dx)
        be_gemm(be, 0, 0, T, In, G, 1, dA, G, w_ih, In, 1, dx, In);
    be_gemm(be, 1, 0, G, In, T, 1, dA, G, x, In, 1, dw_ih, In);
    if (db_ih)
        be_colsum(be, db_ih, dA, T, G);
    // every step's dQ rows at once: db_hh their column sums, dw_hh their
    // product with h_{t-1} (row - 1; the first steps' rows zeroed)
    SQ_LAUNCH(be, k_gru_dq_rows, be_blocks((size_t)T * H, GR_THREADS), GR_THREADS, 0, dA, cache,
              T, H);
    if (db_hh)
        be_colsum(be, db_hh, dA, T, G);
    SQ_LAUNCH(be, k_gru_zero_first, be_blocks((size_t)B * G, GR_THREADS), GR_THREADS, 0, dA,
              doff, B, G);
    if (T > 1)
        be_gemm(be, 1, 0, G, H, T - 1, 1, dA + G, G, h, H, 1, dw_hh, H);
}
