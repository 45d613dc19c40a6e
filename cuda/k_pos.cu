// k_pos.cu - the position-only token mixers of attn_pos.h on the GPU:
// positional (PARec), the fixed patterns (average, linear-anneal,
// exp-anneal) and token mixing. fpositional is positional on the block of
// R1 R2^T: attn_pos.c forms it (and adds dR1, dR2) through the sq_gemm and
// sq_fill2d ops, so on a CUDA context its products are cuBLAS's and it
// needs no kernel of its own.
//
// ONE THREAD AN OUTPUT ELEMENT, THE CPU'S ORDER. Every kernel gives each
// result element (a column of a row, an entry of a parameter gradient) to
// one thread, which adds its terms in the order attn_pos.c adds them into
// that element (the dot products in sq_dot's order of eight partial sums),
// starting from the value already there where the op adds. So the results
// equal the CPU's up to CUDA's expf/erff against glibc's, no atomics, and
// two runs give the same bits. Activations: one thread a (row, column)
// over its segment's rows (O(L) each); parameter gradients: a block a row
// q of the [max_len, max_len] matrix (per head), a thread a column p,
// adding the segments that hold both positions in segment order (found by
// binary search: positions increase along a segment).
//
// The positional probabilities are cached in the CPU's layout (attn_pos.h:
// segment b, head h, an [L, L] block at H sum_{b'<b} L_b'^2 + h L^2),
// whose segment bases the host computes from the staged offsets and
// uploads (be_op_upload). The fixed patterns' backward needs every row's
// 1 / sum_j a_ij: a block a segment, the sums in chunks of shared memory.
//
// Budget: __launch_bounds__(256); static shared memory 1 KiB (the fixed
// backward's chunk), none elsewhere.
#include "common.cuh"

#define PS_THREADS 256 // element kernels
#define PS_ROW_THREADS 128 // a block a parameter row, a thread a column
#define PS_CHUNK 256 // fixed backward: rows' inverse sums at a time

enum { PS_AVERAGE = 2, PS_LINEAR_ANNEAL = 3, PS_EXP_ANNEAL = 4 }; // sq_attn_pos_kind

// The row of a segment (positions p[0..L-1], increasing) at position q, or -1.
static __device__ __forceinline__ int ps_row(const int *p, int L, int q)
{
    int lo = 0, hi = L - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (p[mid] == q)
            return mid;
        if (p[mid] < q)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

// The row t and column c of item e of T C, with its segment: b, its
// offset o and length L, and the row i of t within it.
struct ps_item {
    int t, c, b, o, L, i;
};
static __device__ __forceinline__ ps_item ps_item_of(size_t e, int C, const int *off, int B)
{
    ps_item it;
    it.t = (int)(e / (size_t)C);
    it.c = (int)(e % (size_t)C);
    it.b = be_seg_of(off, B, it.t);
    it.o = off[it.b];
    it.L = off[it.b + 1] - it.o;
    it.i = it.t - it.o;
    return it;
}

#define PS_EACH(e, n) \
    for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < (n); \
         e += (size_t)gridDim.x * blockDim.x)

// ---- 1. positional ------------------------------------------------------

// One thread a (row, head): the probability row in the cache (zeros past
// a causal row's end), as sq_softmax_row.
static __global__ __launch_bounds__(PS_THREADS) void k_pa_probs(
    float *att, const float *Rw, const int *off, const int *pos, const size_t *base, int B,
    int T, int H, int N, float scale, int causal)
{
    PS_EACH(e, (size_t)T * H) {
        int t = (int)(e / (size_t)H), h = (int)(e % (size_t)H), b = be_seg_of(off, B, t);
        int o = off[b], L = off[b + 1] - o, i = t - o, jend = causal ? i + 1 : L;
        const int *p = pos + o;
        const float *rrow = Rw + (size_t)h * N * N + (size_t)p[i] * N;
        float *a = att + base[b] + (size_t)h * L * L + (size_t)i * L;
        float mx = scale * rrow[p[0]];
        for (int j = 1; j < jend; j++) {
            float s = scale * rrow[p[j]];
            if (s > mx)
                mx = s;
        }
        float sum = 0;
        for (int j = 0; j < jend; j++) {
            float x = expf(scale * rrow[p[j]] - mx);
            a[j] = x;
            sum += x;
        }
        float inv = 1.0f / sum;
        for (int j = 0; j < jend; j++)
            a[j] *= inv;
        for (int j = jend; j < L; j++)
            a[j] = 0;
    }
}

// out_t[c] = sum_j A_ij v_j[c] over j in order (sq_attend_row)
static __global__ __launch_bounds__(PS_THREADS) void k_pa_out(
    float *out, const float *att, const float *v, int ld, const int *off, const size_t *base,
    int B, int T, int C, int hs, int causal)
{
    PS_EACH(e, (size_t)T * C) {
        ps_item it = ps_item_of(e, C, off, B);
        int h = it.c / hs, jend = causal ? it.i + 1 : it.L;
        const float *a = att + base[it.b] + (size_t)h * it.L * it.L +
                         (size_t)it.i * it.L;
        float acc = 0;
        for (int j = 0; j < jend; j++)
            acc += a[j] * v[(size_t)(it.o + j) * ld + it.c];
        out[e] = acc;
    }
}

// dv_j[c] += sum_i A_ij dout_i[c] over the rows i that see j, in order
static __global__ __launch_bounds__(PS_THREADS) void k_pa_dv(
    float *dv, const float *dout, const float *att, int ld, const int *off, const size_t *base,
    int B, int T, int C, int hs, int causal)
{
    PS_EACH(e, (size_t)T * C) {
        ps_item it = ps_item_of(e, C, off, B);
        int h = it.c / hs, j = it.i, L = it.L;
        const float *a = att + base[it.b] + (size_t)h * L * L;
        float *d = dv + (size_t)it.t * ld + it.c, acc = *d;
        for (int i = causal ? j : 0; i < L; i++)
            acc += a[(size_t)i * L + j] * dout[(size_t)(it.o + i) * C + it.c];
        *d = acc;
    }
}

// rd[t H + h] = dout_t . out_t over head h's columns: k_pa_drw's row dots,
// once a row and head instead of once a row, head and column p
static __global__ __launch_bounds__(PS_THREADS) void k_pa_rowdot(float *rd, const float *dout,
                                                                 const float *out, int T, int H,
                                                                 int C)
{
    int hs = C / H;
    PS_EACH(e, (size_t)T * H) {
        size_t t = e / (size_t)H, h = e % (size_t)H;
        rd[e] = be_dot8(dout + t * C + h * hs, out + t * C + h * hs, hs);
    }
}

// dRw[h, q, p] += scale A_ij (dout_i . v_j - dout_i . out_i) over the
// segments whose rows i, j sit at q, p (j allowed for i): a block a row
// (h, q), a thread a column p, the segments in order. rd: the row dots
// (k_pa_rowdot), or NULL: each computed where it is used.
static __global__ __launch_bounds__(PS_ROW_THREADS) void k_pa_drw(
    float *dRw, const float *dout, const float *out, const float *v, const float *att,
    const float *rd, int ld, const int *off, const int *pos, const size_t *base, int B, int H,
    int C, int N, float scale, int causal)
{
    int h = (int)(blockIdx.x / (unsigned)N), q = (int)(blockIdx.x % (unsigned)N), hs = C / H;
    float *drow = dRw + (size_t)h * N * N + (size_t)q * N;
    for (int pc = threadIdx.x; pc < (causal ? q + 1 : N); pc += blockDim.x) {
        float acc = drow[pc];
        int used = 0;
        for (int b = 0; b < B; b++) {
            int o = off[b], L = off[b + 1] - o;
            int i = ps_row(pos + o, L, q), j = i < 0 ? -1 : ps_row(pos + o, L, pc);
            if (j < 0 || (causal && j > i))
                continue;
            const float *doi = dout + (size_t)(o + i) * C + (size_t)h * hs;
            float rowdot = rd ? rd[(size_t)(o + i) * H + h]
                              : be_dot8(doi, out + (size_t)(o + i) * C + (size_t)h * hs, hs);
            float dA = be_dot8(doi, v + (size_t)(o + j) * ld + (size_t)h * hs, hs);
            float a = att[base[b] + (size_t)h * L * L + (size_t)i * L + j];
            acc += scale * a * (dA - rowdot);
            used = 1;
        }
        if (used)
            drow[pc] = acc;
    }
}

// ---- 3. fixed patterns --------------------------------------------------

// The unnormalised weight a_ij of key position pj for query position pi
// (attn_pos.c fixed_a).
static __device__ __forceinline__ float ps_fixed_a(int kind, int pi, int pj, int N,
                                                   float logdecay, int causal)
{
    int dist = pi > pj ? pi - pj : pj - pi;
    if (kind == PS_LINEAR_ANNEAL)
        return causal ? (float)(pj + 1) : (float)(N - dist);
    if (kind == PS_EXP_ANNEAL)
        return dist ? expf((float)dist * logdecay) : 1.0f;
    return 1.0f;
}

// out_i[c] = (sum_j a_ij v_j[c]) / sum_j a_ij, both sums over j in order
static __global__ __launch_bounds__(PS_THREADS) void k_fixed_fwd(
    float *out, const float *v, int ld, const int *off, const int *pos, int B, int T, int C,
    int N, int kind, float logdecay, int causal)
{
    PS_EACH(e, (size_t)T * C) {
        ps_item it = ps_item_of(e, C, off, B);
        const int *p = pos + it.o;
        int jend = causal ? it.i + 1 : it.L;
        float sum = 0, acc = 0;
        for (int j = 0; j < jend; j++) {
            float a = ps_fixed_a(kind, p[it.i], p[j], N, logdecay, causal);
            sum += a;
            acc += a * v[(size_t)(it.o + j) * ld + it.c];
        }
        out[e] = acc * (1.0f / sum);
    }
}

// dv_j[c] += sum_i (inv_i a_ij) dout_i[c] over the rows i that see j, in
// order: a block a segment; the rows' inv_i (1 / sum_j a_ij, summed in
// order) a chunk at a time in shared memory.
static __global__ __launch_bounds__(PS_THREADS) void k_fixed_dv(
    float *dv, const float *dout, int ld, const int *off, const int *pos, int C, int N, int kind,
    float logdecay, int causal)
{
    __shared__ float inv[PS_CHUNK];
    int o = off[blockIdx.x], L = off[blockIdx.x + 1] - o;
    const int *p = pos + o;
    for (int i0 = 0; i0 < L; i0 += PS_CHUNK) {
        int n = L - i0 < PS_CHUNK ? L - i0 : PS_CHUNK;
        for (int r = threadIdx.x; r < n; r += blockDim.x) {
            int i = i0 + r, jend = causal ? i + 1 : L;
            float sum = 0;
            for (int j = 0; j < jend; j++)
                sum += ps_fixed_a(kind, p[i], p[j], N, logdecay, causal);
            inv[r] = 1.0f / sum;
        }
        __syncthreads();
        for (size_t e = threadIdx.x; e < (size_t)L * C; e += blockDim.x) {
            int j = (int)(e / (size_t)C), c = (int)(e % (size_t)C);
            int from = causal && j > i0 ? j : i0;
            if (from >= i0 + n)
                continue;
            float *d = dv + (size_t)(o + j) * ld + c, acc = *d;
            for (int i = from; i < i0 + n; i++)
                acc += inv[i - i0] * ps_fixed_a(kind, p[i], p[j], N, logdecay, causal) *
                       dout[(size_t)(o + i) * C + c];
            *d = acc;
        }
        __syncthreads();
    }
}

// ---- 4. token mixing ----------------------------------------------------

static __device__ __forceinline__ float ps_gelu(float x)
{
    return 0.5f * x * (1.0f + erff(x * 0.70710678118654752440f));
}

static __device__ __forceinline__ float ps_gelu_grad(float x)
{
    float cdf = 0.5f * (1.0f + erff(x * 0.70710678118654752440f));
    float pdf = 0.39894228040143267794f * expf(-0.5f * x * x);
    return cdf + x * pdf;
}

// u_t[c] = b1[p_t] + sum_j W1[p_t, p_j] x_j[c], g_t[c] = gelu(u_t[c])
static __global__ __launch_bounds__(PS_THREADS) void k_mix_hidden(
    float *u, float *g, const float *x, int ld, const float *W1, const float *b1,
    const int *off, const int *pos, int B, int T, int C, int N, int causal)
{
    PS_EACH(e, (size_t)T * C) {
        ps_item it = ps_item_of(e, C, off, B);
        const int *p = pos + it.o;
        const float *w = W1 + (size_t)p[it.i] * N;
        int jend = causal ? it.i + 1 : it.L;
        float s = b1[p[it.i]];
        for (int j = 0; j < jend; j++)
            s += w[p[j]] * x[(size_t)(it.o + j) * ld + it.c];
        u[e] = s;
        g[e] = ps_gelu(s);
    }
}

// out_i[c] = b2[p_i] + sum_t W2[p_i, p_t] g_t[c]
static __global__ __launch_bounds__(PS_THREADS) void k_mix_out(
    float *out, const float *g, const float *W2, const float *b2, const int *off,
    const int *pos, int B, int T, int C, int N, int causal)
{
    PS_EACH(e, (size_t)T * C) {
        ps_item it = ps_item_of(e, C, off, B);
        const int *p = pos + it.o;
        const float *w = W2 + (size_t)p[it.i] * N;
        int tend = causal ? it.i + 1 : it.L;
        float s = b2[p[it.i]];
        for (int t = 0; t < tend; t++)
            s += w[p[t]] * g[(size_t)(it.o + t) * C + it.c];
        out[e] = s;
    }
}

// du_t[c] = gelu'(u_t[c]) sum_i W2[p_i, p_t] dout_i[c] over the rows i that see t
static __global__ __launch_bounds__(PS_THREADS) void k_mix_du(
    float *du, const float *dout, const float *u, const float *W2, const int *off,
    const int *pos, int B, int T, int C, int N, int causal)
{
    PS_EACH(e, (size_t)T * C) {
        ps_item it = ps_item_of(e, C, off, B);
        const int *p = pos + it.o;
        float s = 0;
        for (int i = causal ? it.i : 0; i < it.L; i++)
            s += W2[(size_t)p[i] * N + p[it.i]] * dout[(size_t)(it.o + i) * C + it.c];
        du[e] = s * ps_gelu_grad(u[e]);
    }
}

// dx_j[c] += sum_t W1[p_t, p_j] du_t[c] over the rows t that see j
static __global__ __launch_bounds__(PS_THREADS) void k_mix_dx(
    float *dx, const float *du, const float *W1, int ld, const int *off, const int *pos, int B,
    int T, int C, int N, int causal)
{
    PS_EACH(e, (size_t)T * C) {
        ps_item it = ps_item_of(e, C, off, B);
        const int *p = pos + it.o;
        float *d = dx + (size_t)it.t * ld + it.c, acc = *d;
        for (int t = causal ? it.i : 0; t < it.L; t++)
            acc += W1[(size_t)p[t] * N + p[it.i]] * du[(size_t)(it.o + t) * C + it.c];
        *d = acc;
    }
}

// dW2[q, p] += dout_i . g_j, dW1[q, p] += du_i . x_j over the segments
// whose rows i, j sit at q, p: a block a row q, a thread a column p
static __global__ __launch_bounds__(PS_ROW_THREADS) void k_mix_dw(
    float *dW1, float *dW2, const float *dout, const float *du, const float *g, const float *x,
    int ld, const int *off, const int *pos, int B, int C, int N, int causal)
{
    int q = (int)blockIdx.x;
    float *dw1 = dW1 + (size_t)q * N, *dw2 = dW2 + (size_t)q * N;
    for (int pc = threadIdx.x; pc < (causal ? q + 1 : N); pc += blockDim.x) {
        float a1 = dw1[pc], a2 = dw2[pc];
        int used = 0;
        for (int b = 0; b < B; b++) {
            int o = off[b], L = off[b + 1] - o;
            int i = ps_row(pos + o, L, q), j = i < 0 ? -1 : ps_row(pos + o, L, pc);
            if (j < 0 || (causal && j > i))
                continue;
            a2 += be_dot8(dout + (size_t)(o + i) * C, g + (size_t)(o + j) * C, C);
            a1 += be_dot8(du + (size_t)(o + i) * C, x + (size_t)(o + j) * ld, C);
            used = 1;
        }
        if (used) {
            dw1[pc] = a1;
            dw2[pc] = a2;
        }
    }
}

// db2[q] += sum_c dout_i[c], db1[q] += sum_c du_i[c] (in order) over the
// segments whose row i sits at q: a thread a position q
static __global__ __launch_bounds__(PS_THREADS) void k_mix_db(
    float *db1, float *db2, const float *dout, const float *du, const int *off, const int *pos,
    int B, int C, int N)
{
    PS_EACH(q, (size_t)N) {
        for (int b = 0; b < B; b++) {
            int o = off[b], L = off[b + 1] - o, i = ps_row(pos + o, L, (int)q);
            if (i < 0)
                continue;
            const float *doi = dout + (size_t)(o + i) * C, *dui = du + (size_t)(o + i) * C;
            float s2 = 0, s1 = 0;
            for (int c = 0; c < C; c++) {
                s2 += doi[c];
                s1 += dui[c];
            }
            db2[q] += s2;
            db1[q] += s1;
        }
    }
}

// ---- the ops ------------------------------------------------------------

// The rows T = off[B] of the staged host offsets, or -1 (and the sticky
// error) when off is not a staged host array or a size is out of range.
static int ps_rows(sq_gpu_be *be, const int *off, int B, int H, int C, int N, const char *what)
{
    const int *h = be_host_ints(be, off);
    if (!h || B < 0 || H <= 0 || C <= 0 || C % H || N <= 0) {
        be_note(be, cudaErrorInvalidValue, what);
        return -1;
    }
    return h[B];
}

// The device copy of the segments' probability bases (H sum_{b'<b} L^2),
// or NULL (and the sticky error).
static const size_t *ps_bases(sq_gpu_be *be, const int *off, int B, int H, const char *what)
{
    const int *h = be_host_ints(be, off);
    size_t *base = (size_t *)malloc(((size_t)B + 1) * sizeof *base);
    if (!base) {
        be_note(be, cudaErrorMemoryAllocation, what);
        return NULL;
    }
    size_t n = 0;
    for (int b = 0; b < B; b++) {
        base[b] = n;
        size_t L = (size_t)(h[b + 1] - h[b]);
        n += (size_t)H * L * L;
    }
    base[B] = n;
    const size_t *d = (const size_t *)be_op_upload(be, base, ((size_t)B + 1) * sizeof *base);
    free(base);
    return d;
}

static unsigned ps_grid(size_t n)
{
    size_t g = be_blocks(n, PS_THREADS);
    return g < 65536 ? (unsigned)g : 65536u; // the kernels loop past the grid
}

void be_pa_forward(sq_gpu_be *be, float *out, float *att, const float *Rw, const float *v,
                   int ld, const int *off, const int *pos, int B, int H, int C, int max_len,
                   int causal)
{
    const char *what = "pa_forward: off not staged, or bad sizes";
    int T = ps_rows(be, off, B, H, C, max_len, what);
    if (T <= 0)
        return;
    const size_t *base = ps_bases(be, off, B, H, what);
    if (!base)
        return;
    int hs = C / H;
    const int *doff = be_ints(be, off), *dpos = be_ints(be, pos);
    SQ_LAUNCH(be, k_pa_probs, ps_grid((size_t)T * H), PS_THREADS, 0, att, Rw, doff, dpos, base,
              B, T, H, max_len, 1.0f / sqrtf((float)hs), causal);
    SQ_LAUNCH(be, k_pa_out, ps_grid((size_t)T * C), PS_THREADS, 0, out, (const float *)att, v,
              ld, doff, base, B, T, C, hs, causal);
}

void be_pa_backward(sq_gpu_be *be, float *dRw, float *dv, const float *dout, const float *out,
                    const float *v, const float *att, int ld, const int *off, const int *pos,
                    int B, int H, int C, int max_len, int causal)
{
    const char *what = "pa_backward: off not staged, or bad sizes";
    int T = ps_rows(be, off, B, H, C, max_len, what);
    if (T <= 0)
        return;
    const size_t *base = ps_bases(be, off, B, H, what);
    if (!base)
        return;
    int hs = C / H;
    const int *doff = be_ints(be, off), *dpos = be_ints(be, pos);
    if (dv)
        SQ_LAUNCH(be, k_pa_dv, ps_grid((size_t)T * C), PS_THREADS, 0, dv, dout, att, ld, doff,
                  base, B, T, C, hs, causal);
    if (!dRw)
        return;
    // the row dots in the context's workspace (no column sum runs inside
    // this op), where they fit
    float *rd = (size_t)T * H <= BE_SUM_WS ? be->sum_ws : NULL;
    if (rd)
        SQ_LAUNCH(be, k_pa_rowdot, ps_grid((size_t)T * H), PS_THREADS, 0, rd, dout, out, T, H, C);
    SQ_LAUNCH(be, k_pa_drw, (unsigned)H * (unsigned)max_len, PS_ROW_THREADS, 0, dRw, dout, out,
              v, att, (const float *)rd, ld, doff, dpos, base, B, H, C, max_len,
              1.0f / sqrtf((float)hs), causal);
}

void be_fixed_forward(sq_gpu_be *be, float *out, const float *v, int ld, const int *off,
                      const int *pos, int B, int C, int max_len, int kind, float decay,
                      int causal)
{
    int T = ps_rows(be, off, B, 1, C, max_len, "fixed_forward: off not staged, or bad sizes");
    if (T <= 0)
        return;
    float logdecay = kind == PS_EXP_ANNEAL ? logf(decay) : 0.0f;
    SQ_LAUNCH(be, k_fixed_fwd, ps_grid((size_t)T * C), PS_THREADS, 0, out, v, ld,
              be_ints(be, off), be_ints(be, pos), B, T, C, max_len, kind, logdecay, causal);
}

void be_fixed_backward(sq_gpu_be *be, float *dv, const float *dout, int ld, const int *off,
                       const int *pos, int B, int C, int max_len, int kind, float decay,
                       int causal)
{
    int T = ps_rows(be, off, B, 1, C, max_len, "fixed_backward: off not staged, or bad sizes");
    if (T <= 0)
        return;
    float logdecay = kind == PS_EXP_ANNEAL ? logf(decay) : 0.0f;
    SQ_LAUNCH(be, k_fixed_dv, (unsigned)B, PS_THREADS, 0, dv, dout, ld, be_ints(be, off),
              be_ints(be, pos), C, max_len, kind, logdecay, causal);
}

void be_mixing_forward(sq_gpu_be *be, float *out, float *cache, const float *x, int ld,
                       const float *W1, const float *b1, const float *W2, const float *b2,
                       const int *off, const int *pos, int B, int C, int max_len, int causal)
{
    int T = ps_rows(be, off, B, 1, C, max_len, "mixing_forward: off not staged, or bad sizes");
    if (T <= 0)
        return;
    size_t TC = (size_t)T * C;
    const int *doff = be_ints(be, off), *dpos = be_ints(be, pos);
    SQ_LAUNCH(be, k_mix_hidden, ps_grid(TC), PS_THREADS, 0, cache, cache + TC, x, ld, W1, b1,
              doff, dpos, B, T, C, max_len, causal);
    SQ_LAUNCH(be, k_mix_out, ps_grid(TC), PS_THREADS, 0, out, (const float *)cache + TC, W2, b2,
              doff, dpos, B, T, C, max_len, causal);
}

void be_mixing_backward(sq_gpu_be *be, float *dx, float *dW1, float *db1, float *dW2,
                        float *db2, float *scratch, const float *dout, const float *x,
                        const float *cache, const float *W1, const float *W2, int ld,
                        const int *off, const int *pos, int B, int C, int max_len, int causal)
{
    int T = ps_rows(be, off, B, 1, C, max_len, "mixing_backward: off not staged, or bad sizes");
    if (T <= 0)
        return;
    size_t TC = (size_t)T * C;
    const int *doff = be_ints(be, off), *dpos = be_ints(be, pos);
    SQ_LAUNCH(be, k_mix_du, ps_grid(TC), PS_THREADS, 0, scratch, dout, cache, W2, doff, dpos, B,
              T, C, max_len, causal);
    if (dx)
        SQ_LAUNCH(be, k_mix_dx, ps_grid(TC), PS_THREADS, 0, dx, (const float *)scratch, W1, ld,
                  doff, dpos, B, T, C, max_len, causal);
    SQ_LAUNCH(be, k_mix_dw, (unsigned)max_len, PS_ROW_THREADS, 0, dW1, dW2, dout,
              (const float *)scratch, cache + TC, x, ld, doff, dpos, B, C, max_len, causal);
    SQ_LAUNCH(be, k_mix_db, ps_grid((size_t)max_len), PS_THREADS, 0, db1, db2, dout,
              (const float *)scratch, doff, dpos, B, C, max_len);
}
