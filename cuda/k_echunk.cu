// k_echunk.cu - efficient attention (attn_linear.h: a softmax of q over its
// features, a column softmax of k over the positions) a chunk of R rows at
// a time, as k_lchunk.cu does for the kinds whose state is a plain sum.
//
// With p_t = softmax(q_t), m_t[a] = max_{j <= t} k_j[a] and z_t[a] =
// sum_{j <= t} e^{k_j[a] - m_t[a]} (the cache keeps lse_t = m_t + log z_t):
//   out_t = sum_{j <= t} sum_a p_t[a] / z_t[a] e^{k_j[a] - m_t[a]} v_j.
// k_lattn.cu sweeps it a row at a time, as the CPU does; here a block
// (segment b, head h) takes R rows a step:
//   scan   m and z down each column of the chunk, a thread a column, as the
//          CPU's eff_add (the maximum first), carried from chunk to chunk;
//   out_c  = U_c S + A_c V_c, with U_c[i][a] = p_i[a] / z_i[a] e^{r[a] -
//          m_i[a]}, A_c[i][j] = sum_a p_i[a] / z_i[a] e^{k_j[a] - m_i[a]}
//          (j <= i), and S = sum over the earlier chunks of e^{k_j - r}
//          v_j^T, r the maximum after the previous chunk;
//   then   S = e^{r - r'} S + sum over the chunk of e^{k_j - r'} v_j^T, r'
//          the maximum after this chunk.
// Backward (the CPU's row buffer c_t = p_t (.) dp_t in the scratch):
//   pass 1, chunks forward, the scan again: dp_i[a] = (e^{r - m_i}[a]
//          (S dout_i)[a] + sum_{j <= i} e^{k_j[a] - m_i[a]} (v_j . dout_i))
//          / z_i[a], then dq_i = p_i (dp_i - p_i . dp_i);
//   pass 2, chunks backward, from the cache's lse (as the CPU's reverse
//          sweep), with G = sum over the later chunks of e^{r - lse_t} (.)
//          p_t dout_t^T, g likewise of c_t, r the lse of the later chunk's
//          first row, and F_j = e^{k_j - r}:
//          dv_j = F_j G + sum_{t >= j} A[t][j] dout_t,
//          dk_j[a] = F_j[a] (G[a] . v_j - g[a]) +
//                    sum_{t >= j} e^{k_j[a] - lse_t[a]} (p_t[a] (v_j . dout_t) - c_t[a]).
// Every exponent is <= 0 (the maximum and lse only grow down a column and
// bound every key above them), as in the CPU's sweep: nothing overflows,
// whatever the keys. The forward divides by z where the CPU does, rather
// than subtract a rounded lse, so it loses no more than the CPU's does to
// keys of large magnitude. The intra-chunk terms take an exp per (query,
// key, column), R^2 hs / 2 a chunk: the price of a stable form without a
// row-serial maximum. Pieces as k_lchunk.cu: phase KEYS puts each
// piece's m, z and S (at its own maximum) in its slot, and a block starts
// from the earlier pieces' folded at their largest maximum; QUERIES puts
// each piece's G and g at its first row's lse, and BACK_K folds the later
// pieces' at the next piece's first row's lse (every factor <= 1).
// Bidirectional: m and z are every key's (every piece folded), S (or G
// and g) every chunk's, and nothing is intra-chunk.
//
// Sums run in a fixed order: results equal the CPU's to float rounding
// (test_cuda_attn: 1e-5 absolute + 1e-4 relative, keys up to 60 times the
// usual scale), and two runs give the same bits. Budget:
// __launch_bounds__(256, 2) (two blocks an SM: registers were the bound),
// 123 (sm_80) and 127 (sm_90) registers, no spills; dynamic shared memory lc_rows(hs, 3): heads of up to 70
// dimensions; over that, k_lattn.cu's sweep.
#include "lchunk.cuh"

// The block's shared memory: the state (S, or G in pass 2), six chunk
// buffers, the scores, the lse scan's running maximum m and sum z (z is g
// in pass 2), the reference r of the state, and a factor a row.
struct ec_sh {
    float *S, *b[6], *P, *m, *z, *r, *rowf;
};

// Down each column a of the chunk's keys K: the running maximum m and sum
// z of e^{k - m} take row i (the CPU's eff_add: the maximum first), then
// M[i][a] = m, X[i][a] = z (div 0) or X[i][a] / z (div 1), and the cache's
// lse row m + log z when cache. run 0 (bidirectional): every row takes m
// and z as they are.
static __device__ __noinline__ void ec_scan(float *M, float *X, const float *K, float *m,
                                            float *z, float *cache, const lc_w w, int c0, int n,
                                            int run, int div)
{
    FOR_T(a, w.hs) {
        float mx = m[a], s = z[a];
        for (int i = 0; i < n; i++) {
            float x = K ? K[i * w.sl + a] : 0.0f;
            if (run && x > mx) {
                s *= expf(mx - x);
                mx = x;
            }
            if (run)
                s += expf(x - mx);
            if (M)
                M[i * w.sl + a] = mx;
            if (X)
                X[i * w.sl + a] = div ? X[i * w.sl + a] / s : s;
            if (cache)
                cache[(size_t)(w.o + c0 + i) * w.C + (size_t)w.h * w.hs + a] = mx + logf(s);
        }
        m[a] = mx;
        z[a] = s;
    }
    lc_sync();
}

// Each of the n rows of X to its softmax over the head's columns, a warp a row
static __device__ __noinline__ void ec_softmax(float *X, const lc_w w, int n)
{
    int lane = (int)threadIdx.x % 32;
    for (int i = (int)threadIdx.x / 32; i < n; i += LC_THREADS / 32) {
        float *x = X + i * w.sl, mx = -INFINITY, s = 0.0f;
        for (int a = lane; a < w.hs; a += 32)
            mx = fmaxf(mx, x[a]);
        mx = be_warp_max(mx);
        for (int a = lane; a < w.hs; a += 32) {
            x[a] = expf(x[a] - mx);
            s += x[a];
        }
        float inv = 1.0f / be_warp_sum(s);
        for (int a = lane; a < w.hs; a += 32)
            x[a] *= inv;
    }
    lc_sync();
}

// The chunk's weights A[i][j] = sum_a Pq[i][a] e^{K[j][a] - L[i][a]} of key
// j <= query i (else 0): P[i][j] (tr 0) or P[j][i] (tr 1)
static __device__ __noinline__ void ec_scores(float *P, const float *Pq, const float *K,
                                              const float *L, const lc_w w, int n, int tr)
{
    FOR_T(e, w.R * w.R) {
        int x = e / w.R, y = e % w.R;
        int i = tr ? y : x, j = tr ? x : y;
        float s = 0.0f;
        if (i < n && j <= i)
            for (int a = 0; a < w.hs; a++)
                s += Pq[i * w.sl + a] * expf(K[j * w.sl + a] - L[i * w.sl + a]);
        P[x * w.pl + y] = s;
    }
    lc_sync();
}

// X[i][a] *= e^{r[a] - L[i][a]} (sub 0) or X[i][a] = e^{X[i][a] - r[a]}
// (sub 1, L unused), rows i < n
static __device__ __noinline__ void ec_scale(float *X, const float *r, const float *L,
                                             const lc_w w, int n, int sub)
{
    FOR_T(e, n * w.hs) {
        int i = e / w.hs, a = e % w.hs;
        float *x = &X[i * w.sl + a];
        *x = sub ? expf(*x - r[a]) : *x * expf(r[a] - L[i * w.sl + a]);
    }
    lc_sync();
}

// S (and g, when g) to the reference rn: S[a][e] *= e^{r[a] - rn[a]}
// (forward) or e^{rn[a] - r[a]} (backward, back 1); g adds the column sums
// of e^{rn - L} (.) Cr; then r = rn
static __device__ __noinline__ void ec_rebase(float *S, float *g, const float *Cr, float *r,
                                              const float *rn, const float *L, const lc_w w,
                                              int n, int back)
{
    FOR_T(e2, w.hs * w.hs) {
        int a = e2 / w.hs, e = e2 % w.hs;
        S[a * w.sl + e] *= back ? expf(rn[a] - r[a]) : expf(r[a] - rn[a]);
    }
    FOR_T(a, g ? w.hs : 0) {
        float s = g[a] * expf(rn[a] - r[a]);
        for (int i = 0; i < n; i++)
            s += expf(rn[a] - L[i * w.sl + a]) * Cr[i * w.sl + a];
        g[a] = s;
    }
    lc_sync();
    FOR_T(a, w.hs)
        r[a] = rn[a];
    lc_sync();
}

// dp_i[a] = (e^{r[a] - M_i[a]} (S DO_i)[a] + sum_{j <= i} e^{K_j[a] -
// M_i[a]} VD[i][j]) / z_i[a] (the second sum only when VD), z_i the
// scan's sum, in DP on entry
static __device__ __noinline__ void ec_dp(float *DP, const float *S, const float *DO,
                                          const float *K, const float *VD, const float *r,
                                          const float *M, const lc_w w, int n)
{
    FOR_T(e2, n * w.hs) {
        int i = e2 / w.hs, a = e2 % w.hs;
        float mi = M[i * w.sl + a], s = 0.0f;
        for (int e = 0; e < w.hs; e++)
            s += S[a * w.sl + e] * DO[i * w.sl + e];
        float acc = expf(r[a] - mi) * s;
        for (int j = 0; VD && j <= i; j++)
            acc += expf(K[j * w.sl + a] - mi) * VD[i * w.pl + j];
        DP[i * w.sl + a] = acc / DP[i * w.sl + a];
    }
    lc_sync();
}

// The rows of a chunk's keys' gradient, added to dk (rows ldk apart):
// dk_j[a] += e^{K_j[a] - r[a]} (G[a] . V_j - g[a]) + sum_{t >= j}
// e^{K_j[a] - L_t[a]} (Pq_t[a] VD[j][t] - Cr_t[a]) (the sum only when VD)
struct ec_dk_in {
    const float *K, *V, *G, *g, *r, *Pq, *Cr, *VD, *L;
};

static __device__ __noinline__ void ec_dk(float *dk, size_t ldk, const ec_dk_in in,
                                          const lc_w w, int n)
{
    FOR_T(e2, n * w.hs) {
        int j = e2 / w.hs, a = e2 % w.hs;
        float kj = in.K[j * w.sl + a], s = 0.0f;
        for (int e = 0; e < w.hs; e++)
            s += in.G[a * w.sl + e] * in.V[j * w.sl + e];
        float acc = expf(kj - in.r[a]) * (s - in.g[a]);
        for (int t = j; in.VD && t < n; t++)
            acc += expf(kj - in.L[t * w.sl + a]) *
                   (in.Pq[t * w.sl + a] * in.VD[j * w.pl + t] - in.Cr[t * w.sl + a]);
        dk[(size_t)j * ldk + a] += acc;
    }
    lc_sync();
}

// The queries' softmax rows of a chunk into X
static __device__ void ec_queries(float *X, const lat_args &a, const lc_w &w, int c0, int n)
{
    lc_load(X, a.q, (size_t)a.ld, w, c0, n, M_COPY, nullptr);
    ec_softmax(X, w, n);
}

// S and z folded from the slots of pieces q0 .. q1 - 1 (slot0 the first
// piece's, sstride apart) at the reference ref: piece q's terms times
// e^{x_q[a] - ref[a]} (back 0) or e^{ref[a] - x_q[a]} (back 1), x_q the
// column at src0 + q fstride (its maximum, or its first row's lse). The
// factors go through F (the scores' buffer) a batch of pieces at a time:
// an exp a piece and column, not one per state entry.
struct ec_src {
    const float *slot0, *src0;
    size_t sstride, fstride;
    int back;
};

static __device__ __noinline__ void ec_fold(float *S, float *z, float *F, const ec_src in,
                                            const float *ref, const lc_w w, int q0, int q1)
{
    int nn = w.hs * w.hs, qb = w.R * w.pl / w.hs;
    FOR_T(e2, nn + w.hs) {
        if (e2 < nn)
            S[(e2 / w.hs) * w.sl + e2 % w.hs] = 0.0f;
        else
            z[e2 - nn] = 0.0f;
    }
    for (int q = q0; q < q1; q += qb) {
        int nq = q1 - q < qb ? q1 - q : qb;
        lc_sync();
        FOR_T(e, nq * w.hs) {
            int c = e % w.hs;
            float x = in.src0[(size_t)(q + e / w.hs) * in.fstride + c];
            F[e] = in.back ? expf(ref[c] - x) : expf(x - ref[c]);
        }
        lc_sync();
        FOR_T(e2, nn + w.hs) {
            int c = e2 < nn ? e2 / w.hs : e2 - nn;
            size_t at = e2 < nn ? (size_t)e2 : (size_t)(nn + w.hs + c);
            float acc = 0.0f;
            for (int j = 0; j < nq; j++)
                acc += F[j * w.hs + c] * in.slot0[(size_t)(q + j) * in.sstride + at];
            if (e2 < nn)
                S[c * w.sl + e2 % w.hs] += acc;
            else
                z[c] += acc;
        }
    }
    lc_sync();
}

// A forward-direction pass's start: m, z and S (at r = m) the earlier
// pieces' (bidirectional: every piece's) folded at their largest maximum;
// none: m = r = -inf, z = 0, S = 0
static __device__ void ec_begin(const lat_args &a, const lc_w &w, const ec_sh &s)
{
    int q1 = w.causal ? w.pid : w.np;
    const float *slot0 = lc_slot(a, w, 0);
    size_t stride = (size_t)w.H * lat_slot(w.hs), nn = (size_t)w.hs * w.hs;
    FOR_T(c, w.hs) {
        float mx = -INFINITY;
        for (int q = 0; q < q1; q++)
            mx = fmaxf(mx, slot0[(size_t)q * stride + nn + c]);
        s.m[c] = mx;
        s.r[c] = mx;
    }
    lc_sync();
    ec_src in = {slot0, slot0 + nn, stride, stride, 0};
    ec_fold(s.S, s.z, s.P, in, s.m, w, 0, q1);
}

// A forward-direction chunk's keys and values into b[0] and b[1] (the
// causal passes'; the bidirectional ones have every key in S already)
static __device__ void ec_keys(const lat_args &a, const lc_w &w, const ec_sh &s, int c0, int n)
{
    lc_load(s.b[0], a.k, (size_t)a.ld, w, c0, n, M_COPY, nullptr);
    lc_load(s.b[1], a.v, (size_t)a.ld, w, c0, n, M_COPY, nullptr);
}

// After a chunk (causal passes, and every piece's KEYS): S to the
// reference of its last row, the running maximum M[n - 1]: S = e^{r - r'} S + sum_j e^{k_j - r'} v_j^T (K is
// overwritten)
static __device__ void ec_push(const lc_w &w, const ec_sh &s, const float *M, int n)
{
    const float *rn = M + (n - 1) * w.sl;
    ec_scale(s.b[0], rn, nullptr, w, n, 1);
    ec_rebase(s.S, nullptr, nullptr, s.r, rn, M, w, n, 0);
    lc_accum(s.S, s.b[0], s.b[1], w, n);
}

// Phase KEYS: the piece's keys scanned and summed as the forward does,
// its m, z and S (at r = m) to its slot. Causal: a segment's last piece's
// is never read, so it is not made.
static __device__ void ec_keys_state(const lat_args &a, const lc_w &w, const ec_sh &s)
{
    if (w.causal && w.pid == w.np - 1)
        return;
    lc_zero(s.S, w.hs * w.sl);
    FOR_T(c, w.hs) {
        s.m[c] = -INFINITY;
        s.z[c] = 0.0f;
        s.r[c] = -INFINITY;
    }
    lc_sync();
    for (int c0 = w.p0; c0 < w.p1; c0 += w.R) {
        int n = lc_n(w, c0);
        ec_keys(a, w, s, c0, n);
        ec_scan(s.b[5], nullptr, s.b[0], s.m, s.z, nullptr, w, c0, n, 1, 0);
        ec_push(w, s, s.b[5], n);
    }
    lc_put(lc_slot(a, w, w.pid), s.S, s.m, s.z, w);
}

// out_i = U_i S + sum_{j <= i} A[i][j] v_j with U_i = p_i / z_i (.)
// e^{r - M_i}, A from p_i / z_i: the CPU's p / Z, M the running maximum
static __device__ void ec_forward(const lat_args &a, const lc_w &w, const ec_sh &s)
{
    float *K = s.b[0], *V = s.b[1], *U = s.b[2], *M = s.b[5];
    ec_begin(a, w, s);
    for (int c0 = w.p0; c0 < w.p1; c0 += w.R) {
        int n = lc_n(w, c0);
        if (w.causal)
            ec_keys(a, w, s, c0, n);
        ec_queries(U, a, w, c0, n);
        ec_scan(M, U, w.causal ? K : nullptr, s.m, s.z, a.cache, w, c0, n, w.causal, 1);
        if (w.causal)
            ec_scores(s.P, U, K, M, w, n, 0);
        ec_scale(U, s.r, M, w, n, 0);
        float *out = a.out + (size_t)(w.o + c0) * w.C + (size_t)w.h * w.hs;
        lc_apply(out, (size_t)w.C, 0, U, s.S, 0, w.causal ? s.P : nullptr, V, w, n);
        if (w.causal)
            ec_push(w, s, M, n);
    }
}

// Backward pass 1, chunks forward: dp (b[3]), then dq and the row buffer c
// (the scan again: the running maximum and sum, as the CPU's sweep keeps)
static __device__ void ec_back_q(const lat_args &a, const lc_w &w, const ec_sh &s)
{
    float *K = s.b[0], *V = s.b[1], *DO = s.b[2], *DP = s.b[3], *Pq = s.b[4], *M = s.b[5];
    size_t col = (size_t)w.h * w.hs;
    ec_begin(a, w, s);
    for (int c0 = w.p0; c0 < w.p1; c0 += w.R) {
        int n = lc_n(w, c0);
        if (w.causal)
            ec_keys(a, w, s, c0, n);
        ec_scan(M, DP, w.causal ? K : nullptr, s.m, s.z, nullptr, w, c0, n, w.causal, 0);
        lc_load(DO, a.dout, (size_t)w.C, w, c0, n, M_COPY, nullptr);
        ec_queries(Pq, a, w, c0, n);
        if (w.causal)
            lc_scores(s.P, DO, V, w, n, 1);
        ec_dp(DP, s.S, DO, K, w.causal ? s.P : nullptr, s.r, M, w, n);
        lc_rowdot(s.rowf, Pq, DP, w, n);
        FOR_T(e, n * w.hs) {
            int i = e / w.hs, d = e % w.hs;
            size_t t = (size_t)(w.o + c0 + i);
            float p = Pq[i * w.sl + d], dp = DP[i * w.sl + d];
            a.dq[t * a.ld + col + d] += p * (dp - s.rowf[i]);
            a.scratch[t * w.C + col + d] = p * dp;
        }
        lc_sync();
        if (w.causal)
            ec_push(w, s, M, n);
    }
}

// The cache's lse row of segment row t, this head's columns
static __device__ __forceinline__ const float *ec_lse(const lat_args &a, const lc_w &w, int t)
{
    return a.cache + (size_t)(w.o + t) * w.C + (size_t)w.h * w.hs;
}

// Phase QUERIES: the piece's queries' state of pass 2 at r, its first
// row's lse: G = sum e^{r - lse_t} (.) p_t dout_t^T and g likewise of c_t,
// to its slot. Causal: a segment's first piece's is never read.
static __device__ void ec_queries_state(const lat_args &a, const lc_w &w, const ec_sh &s)
{
    if (w.causal && w.pid == 0)
        return;
    float *DO = s.b[2], *Cr = s.b[3], *Pq = s.b[4], *L = s.b[5];
    lc_zero(s.S, w.hs * w.sl);
    const float *r0 = ec_lse(a, w, w.p0);
    FOR_T(c, w.hs) {
        s.m[c] = 0.0f; // the slot's unused column
        s.z[c] = 0.0f;
        s.r[c] = r0[c];
    }
    lc_sync();
    for (int c0 = w.p0; c0 < w.p1; c0 += w.R) {
        int n = lc_n(w, c0);
        ec_queries(Pq, a, w, c0, n);
        lc_load(DO, a.dout, (size_t)w.C, w, c0, n, M_COPY, nullptr);
        lc_load(Cr, a.scratch, (size_t)w.C, w, c0, n, M_COPY, nullptr);
        lc_load(L, a.cache, (size_t)w.C, w, c0, n, M_COPY, nullptr);
        ec_rebase(s.S, s.z, Cr, s.r, s.r, L, w, n, 1); // g += e^{r - lse} c
        ec_scale(Pq, s.r, L, w, n, 0);
        lc_accum(s.S, Pq, DO, w, n);
    }
    lc_put(lc_slot(a, w, w.pid), s.S, s.m, s.z, w);
}

// Pass 2's start: G and g the later pieces' (bidirectional: every
// piece's) at r, the next piece's first row's lse (bidirectional: the one
// lse row); none: G = 0, g = 0, r = +inf
static __device__ void ec_back_begin(const lat_args &a, const lc_w &w, const ec_sh &s)
{
    int q0 = w.causal ? w.pid + 1 : 0;
    const float *ref = q0 < w.np ? ec_lse(a, w, q0 * SQ_LATTN_GPU_PIECE) : nullptr;
    FOR_T(c, w.hs)
        s.r[c] = ref ? ref[c] : INFINITY;
    lc_sync();
    size_t stride = (size_t)w.H * lat_slot(w.hs);
    ec_src in = {lc_slot(a, w, 0), ec_lse(a, w, 0), stride,
                 (size_t)SQ_LATTN_GPU_PIECE * w.C, 1};
    ec_fold(s.S, s.z, s.P, in, s.r, w, q0, w.np);
}

// Backward pass 2, chunks backward: dv and dk
static __device__ void ec_back_k(const lat_args &a, const lc_w &w, const ec_sh &s)
{
    float *K = s.b[0], *V = s.b[1], *DO = s.b[2], *FC = s.b[3], *Pq = s.b[4], *L = s.b[5];
    size_t col = (size_t)w.h * w.hs;
    ec_back_begin(a, w, s);
    for (int c0 = lc_last(w); c0 >= w.p0; c0 -= w.R) {
        int n = lc_n(w, c0);
        size_t r0 = (size_t)(w.o + c0);
        lc_load(K, a.k, (size_t)a.ld, w, c0, n, M_COPY, nullptr);
        lc_load(V, a.v, (size_t)a.ld, w, c0, n, M_COPY, nullptr);
        lc_load(DO, a.dout, (size_t)w.C, w, c0, n, M_COPY, nullptr);
        lc_load(FC, a.k, (size_t)a.ld, w, c0, n, M_COPY, nullptr);
        if (w.causal) {
            lc_load(L, a.cache, (size_t)w.C, w, c0, n, M_COPY, nullptr);
            ec_queries(Pq, a, w, c0, n);
            ec_scores(s.P, Pq, K, L, w, n, 1);
        }
        ec_scale(FC, s.r, nullptr, w, n, 1); // F = e^{k - r}
        lc_apply(a.dv + r0 * a.ld + col, (size_t)a.ld, 1, FC, s.S, 0, w.causal ? s.P : nullptr,
                 DO, w, n);
        if (w.causal) {
            lc_load(FC, a.scratch, (size_t)w.C, w, c0, n, M_COPY, nullptr); // c
            lc_scores(s.P, V, DO, w, n, 2);
        }
        ec_dk_in in = {K, V, s.S, s.z, s.r, Pq, FC, w.causal ? s.P : nullptr, L};
        ec_dk(a.dk + r0 * a.ld + col, (size_t)a.ld, in, w, n);
        if (w.causal) { // G and g to the chunk's first row
            ec_rebase(s.S, s.z, FC, s.r, L, L, w, n, 1);
            ec_scale(Pq, s.r, L, w, n, 0);
            lc_accum(s.S, Pq, DO, w, n);
        }
    }
}

// A block a (piece, head): one phase of a chunked call (lattn.cuh)
static __global__ __launch_bounds__(LC_THREADS, 2) void k_echunk(lat_args a, int R)
{
    BE_DYN_SHARED(float, sh);
    lc_w w = lc_w_of(a, R);
    if (w.L <= 0)
        return;
    ec_sh s;
    s.m = lc_carve(sh, w, &s.S, s.b, &s.P);
    s.z = s.m + w.hs;
    s.r = s.z + w.hs;
    s.rowf = s.r + w.hs;
    switch (a.phase) {
    case LC_KEYS:
        ec_keys_state(a, w, s);
        break;
    case LC_FWD:
        ec_forward(a, w, s);
        break;
    case LC_BACK_Q:
        ec_back_q(a, w, s);
        break;
    case LC_QUERIES:
        ec_queries_state(a, w, s);
        break;
    default:
        ec_back_k(a, w, s);
    }
}

void be_echunk_launch(sq_gpu_be *be, const lat_args *a, int R, size_t bytes)
{
    SQ_LAUNCH(be, k_echunk, dim3((unsigned)a->ntiles, (unsigned)a->H), LC_THREADS, bytes, *a, R);
}
