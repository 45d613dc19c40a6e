// k_lchunk.cu - the linear attention kinds whose state is a plain sum
// (linrec and its ablations, linear, hydra) a chunk of R rows at a time.
//
// k_lattn.cu sweeps a segment row by row, each row a dozen block-wide
// statements with a barrier each: L sequential steps for L rows, so one
// long segment (N = 16384, B = 1) is 16384 steps on two blocks. Here a
// block (a piece of a segment, head h, its state in shared memory) takes
// R rows a step (R = 32, or 16 for heads over 45 dimensions), as in the chunked
// forms of linear attention (Katharopoulos et al.; Yang et al.'s GLA):
// with S = sum over the earlier chunks of kf_j v_j^T,
//   out_c = U_c S + tril(U_c KF_c^T) V_c,   then   S += KF_c^T V_c
// (bidirectional: S summed over every chunk first, no intra-chunk term).
// What the kinds differ in is the rows U (queries' features) and KF (keys'
// features), and the backward's chain rule through them:
//   linrec  kf = f(k), u_t = c_q c_k(t) nq_t f(q_t) (.) rk_t, rk_t the
//           columns' 1/sqrt(z_t + eps), z_t the prefix of kf^2 (f: elu or
//           the identity; without L2 nq = rk = 1)
//   linear  kf = phi(k), u_t = phi(q_t) / (phi(q_t) . z_t + 1e-6), z_t the
//           prefix of kf (phi = elu + 1)
//   hydra   kf = k / |k| and u = q / |q| over the whole row (the caller's
//           norms in the cache)
// Backward, with G = sum over the later chunks of u_t dout_t^T:
//   pass 1 (chunks forward)  dU_c = dO_c S^T + tril(dO_c V_c^T) KF_c
//   pass 2 (chunks backward) dV_c = KF_c G + triu(KF_c U_c^T) dO_c,
//                            dKF_c = V_c G^T + triu(V_c dO_c^T) U_c
// then each kind's chain rule row by row; linrec's z and linear's z reach
// the keys through suffix sums of a row term (w_t below) down the columns.
// The caches and the backward's row buffers are the CPU's (attn_linear.h
// BUFFERS): the forward's cache is what the CPU's backward reads and back.
//
// Pieces: a segment's pieces of SQ_LATTN_GPU_PIECE (128) rows from its
// start each run on their own block, so one long segment fills the GPU
// (16384 rows: 128 blocks a head). Phase KEYS puts each piece's sum of kf
// v^T and of z's terms in its slot of the workspace (the GPU scratch after
// its row buffers); FWD and BACK_Q start from the sum of the earlier
// pieces' slots (bidirectional: of all), in piece order. Pass 2 likewise:
// QUERIES puts each piece's sum of u dout^T and of the row terms w in its
// slot, and BACK_K starts from the later pieces'. A causal segment's last
// (QUERIES: first) piece's slot is never read and not made.
//
// Sums run in a fixed order (a chunk's rows in order, the chunks in order),
// not the CPU's row-at-a-time order: results equal the CPU's to float
// rounding (test_cuda_attn: 1e-5 absolute + 1e-4 relative), and two runs
// give the same bits; pieces and chunks are counted from each segment's
// start, so a row's sums do not follow the packing. Budget:
// __launch_bounds__(256, 2) (two blocks an SM: registers were the bound),
// 115 (sm_80) and 126 (sm_90) registers, no stack, dynamic shared memory hs (hs + 1) + 6 R (hs + 1)
// + R (R + 1) + hs + R floats, at most 48 KiB (heads of up to 70
// dimensions); no spills. The block-wide steps (lc_load ... lc_rowdot) are
// lchunk.cuh's, shared with efficient's chunks (k_echunk.cu).
#include "lchunk.cuh"

// The block's shared memory: the state, six chunk buffers, the chunk's
// scores, a column carry (z or g) and a factor a row.
struct lc_sh {
    float *S, *b[6], *P, *z, *rowf;
};

// Down each column a: out[i][a] = carry[a] + the sum of X[i'][a] (squared
// when sq) over i' <= i (rev 0) or i' >= i (rev 1); the carry then takes
// the chunk's sum. With run 0 every row gets the carry as it is (the
// bidirectional forms' totals) and the carry stays. out may be X when !sq.
static __device__ __noinline__ void lc_colscan(float *out, const float *X, float *carry, const lc_w w, int n,
                                  int sq, int rev, int run)
{
    FOR_T(a, w.hs) {
        float c = carry[a];
        for (int s = 0; s < n; s++) {
            int i = rev ? n - 1 - s : s;
            if (run) {
                float x = X[i * w.sl + a];
                c += sq ? x * x : x;
            }
            out[i * w.sl + a] = c;
        }
        carry[a] = c;
    }
    lc_sync();
}

// The kind's switches: the feature map of q and k, L2 (linrec), the
// paper's column scaling (linrec)
struct lc_kind {
    int kind, map, l2, paper;
};

static __device__ lc_kind lc_kind_of(int kind)
{
    lc_kind k = {kind, M_ELU, 0, lat_paper(kind)};
    if (kind == K_LINEAR) {
        k.map = M_PHI;
    } else if (kind == K_HYDRA) {
        k.map = M_COPY;
    } else {
        k.l2 = lat_variant(kind) != 1;
        k.map = lat_variant(kind) == 2 ? M_COPY : M_ELU;
    }
    return k;
}

static __device__ __forceinline__ int lc_linrec(const lc_kind &k)
{
    return k.kind != K_LINEAR && k.kind != K_HYDRA;
}

// linrec's c_q c_k(t) for segment row t
static __device__ __forceinline__ float lc_ck(const lc_kind &k, const lc_w &w, int t)
{
    float cq = 1.0f / sqrtf((float)w.hs);
    return k.paper ? cq * (1.0f / sqrtf((float)(w.causal ? t + 1 : w.L))) : cq;
}

// The keys' features KF and values V of rows c0 .. c0 + n - 1
static __device__ void lc_keys(const lat_args &a, const lc_w &w, const lc_kind &k, lc_sh &s,
                               int c0, int n)
{
    const float *nk = k.kind == K_HYDRA ? a.cache + a.T : nullptr;
    lc_load(s.b[0], a.k, (size_t)a.ld, w, c0, n, k.map, nk);
    lc_load(s.b[1], a.v, (size_t)a.ld, w, c0, n, M_COPY, nullptr);
}

// S and z the sums, in order, of the slots of pieces q0 .. q1 - 1 (q
// strides: the segment's slots of this head are H lat_slot floats apart)
static __device__ __noinline__ void lc_sum(float *S, float *z, const float *slot0, const lc_w w,
                                           int q0, int q1)
{
    size_t stride = (size_t)w.H * lat_slot(w.hs);
    FOR_T(e2, w.hs * w.hs + w.hs) {
        float s = 0.0f;
        for (int q = q0; q < q1; q++)
            s += slot0[(size_t)q * stride + e2];
        if (e2 < w.hs * w.hs)
            S[(e2 / w.hs) * w.sl + e2 % w.hs] = s;
        else
            z[e2 - w.hs * w.hs] = s;
    }
    lc_sync();
}

// Phase KEYS: the piece's keys' state, S = sum kf v^T and z (linrec's sum
// of kf^2, linear's of kf), to its slot. Causal: a segment's last piece's
// is never read, so it is not made.
static __device__ void lc_keys_state(const lat_args &a, const lc_w &w, const lc_kind &k, lc_sh &s)
{
    if (w.causal && w.pid == w.np - 1)
        return;
    lc_zero(s.S, w.hs * w.sl);
    lc_zero(s.z, w.hs);
    for (int c0 = w.p0; c0 < w.p1; c0 += w.R) {
        int n = lc_n(w, c0);
        lc_keys(a, w, k, s, c0, n);
        if (k.kind != K_HYDRA)
            lc_colscan(s.b[5], s.b[0], s.z, w, n, lc_linrec(k), 0, 1);
        lc_accum(s.S, s.b[0], s.b[1], w, n);
    }
    lc_put(lc_slot(a, w, w.pid), s.S, s.z, nullptr, w);
}

// The forward's queries U of a chunk (b[2]) from KF (b[0]): linrec's rk
// and nq, linear's 1 / denominator into the cache; z's carry moves on
// (causal). b[5] is the scratch of its rows.
static __device__ void lc_queries(const lat_args &a, const lc_w &w, const lc_kind &k, lc_sh &s,
                                  int c0, int n)
{
    float *U = s.b[2], *Z = s.b[5];
    const float *nq = k.kind == K_HYDRA ? a.cache : nullptr;
    lc_load(U, a.q, (size_t)a.ld, w, c0, n, k.map, nq);
    if (k.kind == K_HYDRA)
        return;
    // Z: the keys' column sums each query sees (kf^2 for linrec, kf for linear)
    lc_colscan(Z, s.b[0], s.z, w, n, lc_linrec(k), 0, w.causal);
    size_t TC = (size_t)w.T * w.C;
    if (lc_linrec(k)) {
        lc_rowdot(s.rowf, U, U, w, n); // |f(q_t)|^2
        FOR_T(e, n * w.hs) {
            int i = e / w.hs, d = e % w.hs;
            size_t t = (size_t)(w.o + c0 + i);
            float rk = k.l2 ? 1.0f / sqrtf(Z[i * w.sl + d] + 1e-12f) : 1.0f;
            float nq_t = k.l2 ? 1.0f / sqrtf(s.rowf[i] + 1e-12f) : 1.0f;
            a.cache[t * w.C + (size_t)w.h * w.hs + d] = rk;
            if (d == 0)
                a.cache[TC + t * w.H + w.h] = nq_t;
            U[i * w.sl + d] *= lc_ck(k, w, c0 + i) * nq_t * rk;
        }
    } else {
        lc_rowdot(s.rowf, U, Z, w, n); // phi(q_t) . z_t
        FOR_T(e, n * w.hs) {
            int i = e / w.hs, d = e % w.hs;
            float inv = 1.0f / (s.rowf[i] + 1e-6f);
            if (d == 0)
                a.cache[(size_t)(w.o + c0 + i) * w.H + w.h] = inv;
            U[i * w.sl + d] *= inv;
        }
    }
    lc_sync();
}

// A forward-direction pass's start: S and z the sums of the earlier
// pieces' states (bidirectional: of every piece's)
static __device__ void lc_begin(const lat_args &a, const lc_w &w, lc_sh &s)
{
    lc_sum(s.S, s.z, lc_slot(a, w, 0), w, 0, w.causal ? w.pid : w.np);
}

static __device__ void lc_forward(const lat_args &a, const lc_w &w, const lc_kind &k, lc_sh &s)
{
    lc_begin(a, w, s);
    for (int c0 = w.p0; c0 < w.p1; c0 += w.R) {
        int n = lc_n(w, c0);
        if (w.causal)
            lc_keys(a, w, k, s, c0, n);
        lc_queries(a, w, k, s, c0, n);
        float *out = a.out + (size_t)(w.o + c0) * w.C + (size_t)w.h * w.hs;
        if (w.causal)
            lc_scores(s.P, s.b[2], s.b[0], w, n, 1);
        lc_apply(out, (size_t)w.C, 0, s.b[2], s.S, 0, w.causal ? s.P : nullptr, s.b[1], w, n);
        if (w.causal)
            lc_accum(s.S, s.b[0], s.b[1], w, n);
    }
}

// Backward pass 1, chunks forward: dU = S dout (b[3]) from dO (b[2]), then
// each kind's rows: linrec's dq and dz (the scratch's row buffer), linear's
// dq and dden (its first column), hydra's d phi(q) (the scratch, assigned).
static __device__ void lc_rows_q(const lat_args &a, const lc_w &w, const lc_kind &k, lc_sh &s,
                                 int c0, int n)
{
    float *DU = s.b[3], *X = s.b[4], *Z = s.b[5];
    size_t TC = (size_t)w.T * w.C, col = (size_t)w.h * w.hs;
    if (k.kind == K_HYDRA) {
        FOR_T(e, n * w.hs)
            a.scratch[(size_t)(w.o + c0 + e / w.hs) * w.C + col + e % w.hs] =
                DU[(e / w.hs) * w.sl + e % w.hs];
        lc_sync();
        return;
    }
    lc_load(X, a.q, (size_t)a.ld, w, c0, n, k.map, nullptr); // f(q), phi(q)
    if (lc_linrec(k)) {
        // ah = nq f(q) (in X), d ah = c rk du (in Z); s = ah . d ah
        FOR_T(e, n * w.hs) {
            int i = e / w.hs, d = e % w.hs;
            size_t t = (size_t)(w.o + c0 + i);
            X[i * w.sl + d] *= a.cache[TC + t * w.H + w.h];
            Z[i * w.sl + d] = lc_ck(k, w, c0 + i) * a.cache[t * w.C + col + d] * DU[i * w.sl + d];
        }
        lc_sync();
        if (k.l2)
            lc_rowdot(s.rowf, X, Z, w, n);
        FOR_T(e, n * w.hs) {
            int i = e / w.hs, d = e % w.hs;
            size_t t = (size_t)(w.o + c0 + i);
            float ah = X[i * w.sl + d], rk = a.cache[t * w.C + col + d];
            float nq = a.cache[TC + t * w.H + w.h], sd = k.l2 ? s.rowf[i] : 0.0f;
            float dq = lc_dmap(k.map, a.q[t * a.ld + col + d]) * (Z[i * w.sl + d] - ah * sd) * nq;
            a.dq[t * a.ld + col + d] += dq;
            float u = lc_ck(k, w, c0 + i) * ah * rk;
            a.scratch[t * w.C + col + d] = k.l2 ? -0.5f * u * DU[i * w.sl + d] * rk * rk : 0.0f;
        }
    } else {
        // linear: dq = elu'(q) (du inv + z dd), dd = -(phi(q) . du) inv^2
        lc_colscan(Z, s.b[0], s.z, w, n, 0, 0, w.causal);
        lc_rowdot(s.rowf, X, DU, w, n);
        FOR_T(e, n * w.hs) {
            int i = e / w.hs, d = e % w.hs;
            size_t t = (size_t)(w.o + c0 + i);
            float inv = a.cache[t * w.H + w.h], dd = -s.rowf[i] * inv * inv;
            a.dq[t * a.ld + col + d] +=
                elu_grad_v(a.q[t * a.ld + col + d]) * (DU[i * w.sl + d] * inv + Z[i * w.sl + d] * dd);
            if (d == 0)
                a.scratch[t * w.C + col] = dd;
        }
    }
    lc_sync();
}

static __device__ void lc_back_q(const lat_args &a, const lc_w &w, const lc_kind &k, lc_sh &s)
{
    lc_begin(a, w, s);
    for (int c0 = w.p0; c0 < w.p1; c0 += w.R) {
        int n = lc_n(w, c0);
        if (w.causal)
            lc_keys(a, w, k, s, c0, n);
        lc_load(s.b[2], a.dout, (size_t)w.C, w, c0, n, M_COPY, nullptr);
        if (w.causal)
            lc_scores(s.P, s.b[2], s.b[1], w, n, 1);
        lc_apply(s.b[3], (size_t)w.sl, 0, s.b[2], s.S, 1, w.causal ? s.P : nullptr, s.b[0], w, n);
        lc_rows_q(a, w, k, s, c0, n);
        if (w.causal)
            lc_accum(s.S, s.b[0], s.b[1], w, n);
    }
}

// The backward's queries of a chunk: U (b[4]) as the forward made them,
// from the cache, and the row terms W (b[5]) whose suffix sums reach the
// keys: linrec's dz rows, linear's dd phi(q)
static __device__ void lc_urows(const lat_args &a, const lc_w &w, const lc_kind &k, lc_sh &s,
                                int c0, int n)
{
    float *U = s.b[4], *W = s.b[5];
    size_t TC = (size_t)w.T * w.C, col = (size_t)w.h * w.hs;
    lc_load(U, a.q, (size_t)a.ld, w, c0, n, k.map, k.kind == K_HYDRA ? a.cache : nullptr);
    if (k.kind == K_HYDRA)
        return;
    FOR_T(e, n * w.hs) {
        int i = e / w.hs, d = e % w.hs;
        size_t t = (size_t)(w.o + c0 + i);
        float *u = &U[i * w.sl + d];
        if (lc_linrec(k)) {
            W[i * w.sl + d] = a.scratch[t * w.C + col + d];
            *u = lc_ck(k, w, c0 + i) * (*u * a.cache[TC + t * w.H + w.h]) *
                 a.cache[t * w.C + col + d];
        } else {
            W[i * w.sl + d] = a.scratch[t * w.C + col] * *u;
            *u *= a.cache[t * w.H + w.h];
        }
    }
    lc_sync();
}

// Phase QUERIES: the piece's queries' state of pass 2, G = sum u dout^T
// and g the sum of the row terms W, to its slot. Causal: a segment's first
// piece's is never read, so it is not made.
static __device__ void lc_queries_state(const lat_args &a, const lc_w &w, const lc_kind &k,
                                        lc_sh &s)
{
    if (w.causal && w.pid == 0)
        return;
    lc_zero(s.S, w.hs * w.sl);
    lc_zero(s.z, w.hs);
    for (int c0 = w.p0; c0 < w.p1; c0 += w.R) {
        int n = lc_n(w, c0);
        lc_urows(a, w, k, s, c0, n);
        lc_load(s.b[2], a.dout, (size_t)w.C, w, c0, n, M_COPY, nullptr);
        lc_accum(s.S, s.b[4], s.b[2], w, n);
        if (k.kind != K_HYDRA)
            lc_colscan(s.b[5], s.b[5], s.z, w, n, 0, 0, 1);
    }
    lc_put(lc_slot(a, w, w.pid), s.S, s.z, nullptr, w);
}

// Backward pass 2, chunks backward: dv, and the keys' features' gradient
// through each kind's map into dk (hydra's into the scratch's second row
// buffer, assigned)
static __device__ void lc_back_k(const lat_args &a, const lc_w &w, const lc_kind &k, lc_sh &s)
{
    float *KF = s.b[0], *V = s.b[1], *DO = s.b[2], *DKF = s.b[3], *U = s.b[4], *W = s.b[5];
    size_t TC = (size_t)w.T * w.C, col = (size_t)w.h * w.hs;
    lc_sum(s.S, s.z, lc_slot(a, w, 0), w, w.causal ? w.pid + 1 : 0, w.np); // G, g
    for (int c0 = lc_last(w); c0 >= w.p0; c0 -= w.R) {
        int n = lc_n(w, c0);
        lc_urows(a, w, k, s, c0, n);
        lc_load(DO, a.dout, (size_t)w.C, w, c0, n, M_COPY, nullptr);
        lc_keys(a, w, k, s, c0, n);
        size_t r0 = (size_t)(w.o + c0);
        if (w.causal)
            lc_scores(s.P, KF, U, w, n, 2);
        lc_apply(a.dv + r0 * a.ld + col, (size_t)a.ld, 1, KF, s.S, 0, w.causal ? s.P : nullptr,
                 DO, w, n);
        if (w.causal)
            lc_scores(s.P, V, DO, w, n, 2);
        if (k.kind == K_HYDRA) {
            lc_apply(a.scratch + TC + r0 * w.C + col, (size_t)w.C, 0, V, s.S, 1,
                     w.causal ? s.P : nullptr, U, w, n);
        } else {
            lc_apply(DKF, (size_t)w.sl, 0, V, s.S, 1, w.causal ? s.P : nullptr, U, w, n);
            lc_colscan(W, W, s.z, w, n, 0, 1, w.causal);
            FOR_T(e, n * w.hs) {
                int i = e / w.hs, d = e % w.hs;
                size_t t = r0 + (size_t)i;
                float c = lc_linrec(k) ? 2.0f * KF[i * w.sl + d] : 1.0f;
                a.dk[t * a.ld + col + d] += lc_dmap(k.map, a.k[t * a.ld + col + d]) *
                                            (DKF[i * w.sl + d] + c * W[i * w.sl + d]);
            }
            lc_sync();
        }
        if (w.causal)
            lc_accum(s.S, U, DO, w, n);
    }
}

// A block a (piece, head): one phase of a chunked call (lattn.cuh)
static __global__ __launch_bounds__(LC_THREADS, 2) void k_lchunk(lat_args a, int R)
{
    BE_DYN_SHARED(float, sh);
    lc_w w = lc_w_of(a, R);
    if (w.L <= 0)
        return;
    lc_sh s;
    s.z = lc_carve(sh, w, &s.S, s.b, &s.P);
    s.rowf = s.z + w.hs;
    lc_kind k = lc_kind_of(a.kind);
    switch (a.phase) {
    case LC_KEYS:
        lc_keys_state(a, w, k, s);
        break;
    case LC_FWD:
        lc_forward(a, w, k, s);
        break;
    case LC_BACK_Q:
        lc_back_q(a, w, k, s);
        break;
    case LC_QUERIES:
        lc_queries_state(a, w, k, s);
        break;
    default:
        lc_back_k(a, w, k, s);
    }
}

void be_lchunk_launch(sq_gpu_be *be, const lat_args *a, int R, size_t bytes)
{
    SQ_LAUNCH(be, k_lchunk, dim3((unsigned)a->ntiles, (unsigned)a->H), LC_THREADS, bytes, *a, R);
}
