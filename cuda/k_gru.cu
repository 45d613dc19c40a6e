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
// GEMM has the same shape every step. Sums over rows (the biases'
// gradients) are a thread per column adding the rows in order; the GEMMs'
// are cuBLAS's, in a fixed algorithm: two runs give the same bits. The
// gates use CUDA's expf/tanhf (the CPU: the C library's), so the results
// agree with gru.c to float rounding, not bit for bit.
//
// Scratch (sq_gru_scratch_size(B, T, H) reals, as the CPU's): forward
// P [B, H] | Q [B, 3H]; backward dH [T, H] | dA [T, 3H] | P | dQ | dP [B, H].
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
// + b_i and becomes r, z, n, W_hn h + b_hn; Q[b] = W_hh h_{t-1} + b_hh
static __global__ __launch_bounds__(GR_THREADS) void k_gru_step(
    float *h, float *cache, const float *P, const float *Q, const int *off, int B, int t, int H)
{
    size_t id = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= (size_t)B * H)
        return;
    int b = (int)(id / H), j = (int)(id % H);
    if (off[b + 1] - off[b] <= t)
        return;
    size_t row = (size_t)(off[b] + t);
    float *c = cache + row * 4 * H;
    const float *q = Q + (size_t)b * 3 * H;
    float r = be_sigmoid(c[j] + q[j]);
    float z = be_sigmoid(c[H + j] + q[H + j]);
    float hn = q[2 * H + j];
    float n = tanhf(c[2 * H + j] + r * hn);
    c[j] = r;
    c[H + j] = z;
    c[2 * H + j] = n;
    c[3 * H + j] = hn;
    h[row * H + j] = (1.0f - z) * n + z * P[(size_t)b * H + j];
}

// gru.c's step_backward: the input pre-activations' gradients into dA's
// rows, W_hh h + b_hh's into dQ[b], z dh into dP[b]; zeros for the
// sequences that have ended
static __global__ __launch_bounds__(GR_THREADS) void k_gru_step_back(
    float *dA, float *dQ, float *dP, const float *dH, const float *cache, const float *P,
    const int *off, int B, int t, int H)
{
    size_t id = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= (size_t)B * H)
        return;
    int b = (int)(id / H), j = (int)(id % H);
    float *dq = dQ + (size_t)b * 3 * H;
    if (off[b + 1] - off[b] <= t) {
        dq[j] = dq[H + j] = dq[2 * H + j] = 0;
        dP[id] = 0;
        return;
    }
    size_t row = (size_t)(off[b] + t);
    const float *c = cache + row * 4 * H;
    float r = c[j], z = c[H + j], n = c[2 * H + j], hn = c[3 * H + j], dh = dH[row * H + j];
    float dan = dh * (1.0f - z) * (1.0f - n * n);
    float daz = dh * (P[id] - n) * z * (1.0f - z);
    float dar = dan * hn * r * (1.0f - r);
    float *da = dA + row * 3 * H;
    da[j] = dar;
    da[H + j] = daz;
    da[2 * H + j] = dan;
    dq[j] = dar;
    dq[H + j] = daz;
    dq[2 * H + j] = dan * r;
    dP[id] = dh * z;
}

// dH[row of h_{t-1}] += dP[b] for the sequences running at t (t >= 1)
static __global__ __launch_bounds__(GR_THREADS) void k_gru_carry(float *dH, const float *dP,
                                                                 const int *off, int B, int t,
                                                                 int H)
{
    size_t id = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= (size_t)B * H)
        return;
    int b = (int)(id / H), j = (int)(id % H);
    if (off[b + 1] - off[b] > t)
        dH[(size_t)(off[b] + t - 1) * H + j] += dP[id];
}

// db[c] += the rows of d [rows, G] at column c, in row order
static __global__ __launch_bounds__(GR_THREADS) void k_gru_colsum(float *db, const float *d,
                                                                  int rows, int G)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= G)
        return;
    float acc = db[c];
    for (int i = 0; i < rows; i++)
        acc += d[(size_t)i * G + c];
    db[c] = acc;
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
    for (int t = 0; t < N; t++) {
        SQ_LAUNCH(be, k_gru_prev, nb, GR_THREADS, 0, P, h, doff, B, t, H);
        if (b_hh)
            be_copy2d(be, Q, G, b_hh, 0, B, G);
        be_gemm(be, 0, 1, B, G, H, 1, P, H, w_hh, H, b_hh ? 1.0f : 0.0f, Q, G);
        SQ_LAUNCH(be, k_gru_step, nb, GR_THREADS, 0, h, cache, P, Q, doff, B, t, H);
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
    be_copy(be, dH, dh, (size_t)T * H);
    for (int t = N - 1; t >= 0; t--) {
        SQ_LAUNCH(be, k_gru_prev, nb, GR_THREADS, 0, P, h, doff, B, t, H);
        SQ_LAUNCH(be, k_gru_step_back, nb, GR_THREADS, 0, dA, dQ, dP, dH, cache, P, doff, B, t,
                  H);
        if (db_hh)
            SQ_LAUNCH(be, k_gru_colsum, be_blocks((size_t)G, GR_THREADS), GR_THREADS, 0, db_hh,
                      dQ, B, G);
        if (t == 0) // h_0 = 0: no weight gradient, nothing before
            break;
        be_gemm(be, 1, 0, G, H, B, 1, dQ, G, P, H, 1, dw_hh, H);
        be_gemm(be, 0, 0, B, H, G, 1, dQ, G, w_hh, H, 1, dP, H); // onto z dh
        SQ_LAUNCH(be, k_gru_carry, nb, GR_THREADS, 0, dH, dP, doff, B, t, H);
    }
    if (dx)
        be_gemm(be, 0, 0, T, In, G, 1, dA, G, w_ih, In, 1, dx, In);
    be_gemm(be, 1, 0, G, In, T, 1, dA, G, x, In, 1, dw_ih, In);
    if (db_ih)
        SQ_LAUNCH(be, k_gru_colsum, be_blocks((size_t)G, GR_THREADS), GR_THREADS, 0, db_ih, dA,
                  T, G);
}
