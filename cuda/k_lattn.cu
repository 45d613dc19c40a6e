// k_lattn.cu - the linear attention kinds (attn_linear.h: linrec and its
// ablations, linear, efficient, hydra), causal and bidirectional, on the
// GPU: attn_linear.c's per-(segment, head) sweeps, statement for statement.
// lat_launch first offers the work to the chunked forms, which take a
// chunk of rows a step and the pieces of a long segment on separate blocks
// (k_lchunk.cu, k_echunk.cu: every kind, heads of up to 70 dimensions).
// The sweeps below run the rest (and stay the row-at-a-time statement of
// each kind that the chunks regroup).
//
// One block runs one work item, head h of one segment: the sweep over the
// segment's positions is sequential, and each of its statements (a row map,
// an axpy, a product with the hs x hs state) is spread over the block's
// threads, thread e owning entries e, e + nt, ... of a row or column. Every
// sum runs over its index in the CPU's order (a state product's thread
// sums its column over a; a row reduction, |f(q_t)|^2 or a dot, is summed
// by every thread in the same order, the value then shared), so results
// equal the CPU's to float rounding (expf here, vec.h's exp there). Each
// block statement ends at a barrier: a row a statement writes is read
// whole by the next.
//
// The state lives in shared memory with its rows padded to hs + 1 floats
// (a column walk and a row walk then touch 32 banks), when it fits the
// default 48 KiB (hs <= 107); else in the caller's scratch slots, as the
// CPU's, one block a slot looping over segments g, g + G, ... (G =
// min(B, 32)). (The first form, stop 19 to 26, ran one thread a work item
// over min(B, 32) H items: an H200 took 13 s for an epoch of SASRec-linrec
// that softmax ran in 0.16 s.)
//
// Budget: __launch_bounds__(128, 1), 106 registers (sm_90), no spills;
// dynamic shared memory 4 (hs (hs + 1) + 6 hs) bytes, at most 48 KiB.
#include "lattn.cuh"


// this thread's entries of an n-entry row
#define FOR_MINE(a, n) for (int a = (int)threadIdx.x; a < (n); a += (int)blockDim.x)

// The block's end of a statement: what it wrote is visible to all.
static __device__ __forceinline__ void done(void)
{
    __syncthreads();
}

static __device__ __forceinline__ void b_zero(float *x, int n)
{
    FOR_MINE(i, n)
        x[i] = 0;
    done();
}

// the n x n state M (rows sl apart) to zero
static __device__ __forceinline__ void b_zero_m(float *M, int n, int sl)
{
    FOR_MINE(e, n)
        for (int a = 0; a < n; a++)
            M[(size_t)a * sl + e] = 0;
    done();
}

static __device__ __forceinline__ void b_axpy(float *__restrict__ y, float a,
                                              const float *__restrict__ x, int n)
{
    FOR_MINE(i, n)
        y[i] += a * x[i];
    done();
}

// a . b over n entries, in order, by one thread
static __device__ __forceinline__ float dot_one(const float *a, const float *b, int n)
{
    float s = 0;
    for (int i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

// a . b, summed in order by every thread (the same value in each)
static __device__ __forceinline__ float b_dot(const float *a, const float *b, int n)
{
    float s = dot_one(a, b, n);
    done(); /* read by all before any statement writes a or b */
    return s;
}

/* M += x y^T, M [n, n]: thread e adds column e, one product an entry. */
static __device__ __forceinline__ void outer_add(float *M, const float *x, const float *y, int n,
                                                 int sl)
{
    FOR_MINE(e, n) {
        float ye = y[e];
        for (int a = 0; a < n; a++)
            M[(size_t)a * sl + e] += x[a] * ye;
    }
    done();
}

/* y = M^T x: y[e] = sum_a x[a] M[a][e], over a in order (the CPU's). */
static __device__ __forceinline__ void mt_vec(float *__restrict__ y, const float *M,
                                              const float *x, int n, int sl)
{
    FOR_MINE(e, n) {
        float acc = 0;
        for (int a = 0; a < n; a++)
            acc += x[a] * M[(size_t)a * sl + e];
        y[e] = acc;
    }
    done();
}

/* y[a] = sum_e M[a][e] x[e], over e in order */
static __device__ __forceinline__ void m_vec(float *y, const float *M, const float *x, int n,
                                             int sl)
{
    FOR_MINE(a, n) {
        const float *Ma = M + (size_t)a * sl;
        float s = 0;
        for (int e = 0; e < n; e++)
            s += Ma[e] * x[e];
        y[a] = s;
    }
    done();
}

/* The running state of query t holds the keys it sees. Before query t the
 * forward sweep adds keys keys_from .. keys_to - 1: key t (causal), or all
 * keys before the first query and none after (bidirectional). */
static __device__ __forceinline__ int keys_from(int t, int causal)
{
    return causal ? t : 0;
}

static __device__ __forceinline__ int keys_to(int t, int L, int causal)
{
    return causal ? t + 1 : (t == 0 ? L : 0);
}

/* Mirror for the reverse sweep: before key j it adds the queries that see
 * key j and are not in yet: query j (causal), or all queries at the first
 * step j = L - 1 (bidirectional). */
static __device__ __forceinline__ int queries_from(int j, int L, int causal)
{
    return causal ? j : (j == L - 1 ? 0 : L);
}

static __device__ __forceinline__ int queries_to(int j, int L, int causal)
{
    return causal ? j + 1 : L;
}

/* Where a sweep works: its segment (rows o .. o + L - 1), head h, the
 * state slot st with its matrices' row stride sl. */
struct lat_item {
    int ld, C, H, o, L, h, causal, sl;
    float *st;
};

#define ROW(p, t) ((p) + (size_t)(w.o + (t)) * w.ld + (size_t)w.h * hs)
#define OROW(p, t) ((p) + (size_t)(w.o + (t)) * w.C + (size_t)w.h * hs)
#define HROW(p, t) ((p)[(size_t)(w.o + (t)) * w.H + w.h])

/* ------------------------------------------------------------------------ */
/* 1. LinRec                                                                 */

/* What a linrec sweep does: its form, its scaling and its variant's two
 * switches (attn_linear.h: elu on q and k, L2 normalisation of q rows and
 * k columns). */
typedef struct {
    int causal, paper, elu, l2;
} linrec_mode;

// the kind's mode, as attn_linear.c's linrec_mode_of (sq_lattn_is_linrec)
static __device__ linrec_mode linrec_mode_of(int causal, int paper, int variant)
{
    linrec_mode m = {causal, paper, variant != 2 /* NO_ELU */, variant != 1 /* NO_L2 */};
    return m;
}

/* The feature map f (elu, or the identity without it) of a row's hs
 * entries, y = f(x), or with `grad` its derivative y = f'(x). */
static __device__ __forceinline__ void lr_f_row(const linrec_mode *m, float *__restrict__ y,
                                                const float *__restrict__ x, int hs, int grad)
{
    FOR_MINE(a, hs)
        y[a] = !m->elu ? (grad ? 1.0f : x[a]) : grad ? elu_grad_v(x[a]) : elu_v(x[a]);
    done();
}

/* Key-column factor c_k(t): 1/sqrt(N(t)) (paper scaling), else 1. */
static __device__ __forceinline__ float linrec_ck(const linrec_mode *m, int t, int L)
{
    return m->paper ? 1.0f / sqrtf((float)(m->causal ? t + 1 : L)) : 1.0f;
}

/* Without L2 normalisation the row and column factors nq_t and rk_t are 1
 * (and the cache holds ones), so forward and backward share every line. */
static __device__ __forceinline__ void linrec_fwd(float *out, float *rk, float *rq, const float *q,
                                                  const float *k, const float *v,
                                                  const linrec_mode *md, const lat_item &w)
{
    int hs = w.C / w.H, L = w.L, causal = md->causal, sl = w.sl;
    float *S = w.st, *z = S + (size_t)hs * sl, *u = z + hs, *kb = u + hs;
    float cq = 1.0f / sqrtf((float)hs), eps = 1e-12f;
    b_zero_m(S, hs, sl);
    b_zero(z, hs);
    for (int t = 0; t < L; t++) {
        /* bidirectional: all keys before the first query */
        for (int j = keys_from(t, causal); j < keys_to(t, L, causal); j++) {
            lr_f_row(md, kb, ROW(k, j), hs, 0);
            FOR_MINE(a, hs)
                z[a] += kb[a] * kb[a];
            outer_add(S, kb, ROW(v, j), hs, sl); /* its barrier ends z's too */
        }
        float ck = linrec_ck(md, t, L);
        lr_f_row(md, u, ROW(q, t), hs, 0);
        float n2 = b_dot(u, u, hs);
        float nq = md->l2 ? 1.0f / sqrtf(n2 + eps) : 1.0f;
        if (threadIdx.x == 0)
            HROW(rq, t) = nq;
        float *rkt = OROW(rk, t);
        FOR_MINE(a, hs) {
            rkt[a] = md->l2 ? 1.0f / sqrtf(z[a] + eps) : 1.0f;
            u[a] *= cq * ck * nq * rkt[a];
        }
        done();
        mt_vec(OROW(out, t), S, u, hs, sl);
    }
}

/* u_t = c_q c_k f(q_t) nq_t rk_t (also returns f(q_t) in ah, scaled by
 * nq_t: the unit row qh_t / c_q when normalised). */
static __device__ __forceinline__ void linrec_u(float *__restrict__ u, float *__restrict__ ah,
                                                const float *qt, const float *rkt, float nq,
                                                float c, int hs, const linrec_mode *md)
{
    lr_f_row(md, ah, qt, hs, 0);
    FOR_MINE(a, hs) {
        ah[a] *= nq;
        u[a] = c * ah[a] * rkt[a];
    }
    done();
}

/* The forward sweep keeps S^T = sum v_j f(k_j)^T, the reverse sweep G =
 * sum u_t dout_t^T. The CPU keeps G^T beside G, so that its products are
 * all row-wise axpys; here G v_j is m_vec's row walk over G, the same
 * products summed in the same order, so one state a sweep suffices. */
static __device__ __forceinline__ void linrec_bwd(float *dq, float *dk, float *dv, float *dz,
                                                  const float *dout, const float *q,
                                                  const float *k, const float *v,
                                                  const float *rk, const float *rq,
                                                  const linrec_mode *md, const lat_item &w)
{
    int hs = w.C / w.H, L = w.L, causal = md->causal, sl = w.sl;
    float *M1 = w.st, *g = M1 + (size_t)hs * sl;
    float *u = g + hs, *ah = u + hs, *du = ah + hs, *kb = du + hs, *fg = kb + hs;
    float cq = 1.0f / sqrtf((float)hs);
    /* Forward sweep (M1 = S^T): dq, and dz_t[a] = d loss / d z_t[a] to the
     * row buffer */
    b_zero_m(M1, hs, sl);
    for (int t = 0; t < L; t++) {
        for (int j = keys_from(t, causal); j < keys_to(t, L, causal); j++) {
            lr_f_row(md, kb, ROW(k, j), hs, 0);
            outer_add(M1, ROW(v, j), kb, hs, sl);
        }
        float ck = linrec_ck(md, t, L), c = cq * ck;
        const float *qt = ROW(q, t), *rkt = OROW(rk, t);
        float nq = HROW(rq, t);
        linrec_u(u, ah, qt, rkt, nq, c, hs, md);
        mt_vec(du, M1, OROW(dout, t), hs, sl);
        /* u = c ah rk: d ah = c rk du; ah = x nq with x = f(q) and
         * nq = (|x|^2 + eps)^-1/2: dx = (d ah - ah (ah . d ah)) nq
         * (without L2: nq = 1 constant, dx = d ah) */
        FOR_MINE(a, hs)
            kb[a] = c * rkt[a] * du[a]; /* d ah */
        done();
        float s = md->l2 ? b_dot(ah, kb, hs) : 0.0f;
        lr_f_row(md, fg, qt, hs, 1);
        float *dqt = ROW(dq, t), *dzt = OROW(dz, t);
        FOR_MINE(a, hs) {
            dqt[a] += fg[a] * (kb[a] - ah[a] * s) * nq;
            /* u = c ah (z + eps)^-1/2: du/dz = -u rk^2 / 2 (no L2: 0) */
            dzt[a] = md->l2 ? -0.5f * u[a] * du[a] * rkt[a] * rkt[a] : 0.0f;
        }
        done();
    }
    /* Reverse sweep: M1 = G = sum u_t dout_t^T, g = sum dz_t over the
     * queries that see key j (t >= j causal, all t bidirectional). */
    b_zero_m(M1, hs, sl);
    b_zero(g, hs);
    for (int j = L - 1; j >= 0; j--) {
        for (int t = queries_from(j, L, causal); t < queries_to(j, L, causal); t++) {
            linrec_u(u, ah, ROW(q, t), OROW(rk, t), HROW(rq, t), cq * linrec_ck(md, t, L), hs,
                     md);
            outer_add(M1, u, OROW(dout, t), hs, sl);
            b_axpy(g, 1, OROW(dz, t), hs);
        }
        const float *kj = ROW(k, j);
        lr_f_row(md, kb, kj, hs, 0);
        mt_vec(du, M1, kb, hs, sl);       /* G^T f(k_j) */
        b_axpy(ROW(dv, j), 1, du, hs);
        m_vec(ah, M1, ROW(v, j), hs, sl); /* G v_j */
        lr_f_row(md, fg, kj, hs, 1);
        float *dkj = ROW(dk, j);
        FOR_MINE(a, hs)
            dkj[a] += fg[a] * (ah[a] + 2 * kb[a] * g[a]);
        done();
    }
}

/* ------------------------------------------------------------------------ */
/* 2. Linear attention, phi = elu + 1                                        */

static __device__ __forceinline__ void phi1(float *__restrict__ y, const float *__restrict__ x,
                                            int n)
{
    FOR_MINE(a, n)
        y[a] = elu_v(x[a]) + 1;
    done();
}

static __device__ __forceinline__ void linear_fwd(float *out, float *rden, const float *q,
                                                  const float *k, const float *v,
                                                  const lat_item &w)
{
    int hs = w.C / w.H, L = w.L, causal = w.causal, sl = w.sl;
    float *S = w.st, *z = S + (size_t)hs * sl, *pq = z + hs, *pk = pq + hs;
    b_zero_m(S, hs, sl);
    b_zero(z, hs);
    for (int t = 0; t < L; t++) {
        for (int j = keys_from(t, causal); j < keys_to(t, L, causal); j++) {
            phi1(pk, ROW(k, j), hs);
            b_axpy(z, 1, pk, hs);
            outer_add(S, pk, ROW(v, j), hs, sl);
        }
        phi1(pq, ROW(q, t), hs);
        float inv = 1.0f / (b_dot(pq, z, hs) + 1e-6f);
        if (threadIdx.x == 0)
            HROW(rden, t) = inv;
        FOR_MINE(a, hs)
            pq[a] *= inv;
        done();
        mt_vec(OROW(out, t), S, pq, hs, sl);
    }
}

static __device__ __forceinline__ void linear_bwd(float *dq, float *dk, float *dv, float *dden,
                                                  const float *dout, const float *q,
                                                  const float *k, const float *v,
                                                  const float *rden, const lat_item &w)
{
    int hs = w.C / w.H, L = w.L, causal = w.causal, sl = w.sl;
    float *M1 = w.st, *z = M1 + (size_t)hs * sl;
    float *g = z + hs, *pq = g + hs, *pk = pq + hs, *num = pk + hs;
    float *tmp = num + hs;
    /* M1 = S (the CPU keeps S^T beside it; m_vec's row walk gives its
     * products in the same order). out = num / den: dnum = dout / den,
     * dden = -(dout . num) / den^2; dphi(q_t) = S_t dnum + z_t dden */
    b_zero_m(M1, hs, sl);
    b_zero(z, hs);
    for (int t = 0; t < L; t++) {
        for (int j = keys_from(t, causal); j < keys_to(t, L, causal); j++) {
            phi1(pk, ROW(k, j), hs);
            b_axpy(z, 1, pk, hs);
            outer_add(M1, pk, ROW(v, j), hs, sl);
        }
        const float *qt = ROW(q, t), *dt = OROW(dout, t);
        float inv = HROW(rden, t);
        phi1(pq, qt, hs);
        mt_vec(num, M1, pq, hs, sl);
        float dd = -b_dot(dt, num, hs) * inv * inv;
        m_vec(tmp, M1, dt, hs, sl);
        float *dqt = ROW(dq, t);
        FOR_MINE(a, hs)
            dqt[a] += elu_grad_v(qt[a]) * (tmp[a] * inv + z[a] * dd);
        if (threadIdx.x == 0)
            dden[(size_t)(w.o + t) * w.C + (size_t)w.h * hs] = dd;
        done();
    }
    /* M1 = G = sum phi(q_t) dnum_t^T, g = sum phi(q_t) dden_t over t
     * seeing j: dphi(k_j) = G v_j + g, dv_j = G^T phi(k_j). */
    b_zero_m(M1, hs, sl);
    b_zero(g, hs);
    for (int j = L - 1; j >= 0; j--) {
        for (int t = queries_from(j, L, causal); t < queries_to(j, L, causal); t++) {
            float inv = HROW(rden, t);
            float dd = dden[(size_t)(w.o + t) * w.C + (size_t)w.h * hs];
            phi1(pq, ROW(q, t), hs);
            b_axpy(g, dd, pq, hs);
            FOR_MINE(a, hs)
                pq[a] *= inv;
            done();
            outer_add(M1, pq, OROW(dout, t), hs, sl);
        }
        const float *kj = ROW(k, j);
        phi1(pk, kj, hs);
        mt_vec(tmp, M1, pk, hs, sl);
        b_axpy(ROW(dv, j), 1, tmp, hs);
        m_vec(num, M1, ROW(v, j), hs, sl); /* G v_j */
        float *dkj = ROW(dk, j);
        FOR_MINE(a, hs)
            dkj[a] += elu_grad_v(kj[a]) * (num[a] + g[a]);
        done();
    }
}

/* ------------------------------------------------------------------------ */
/* 3. Efficient attention: softmax of q over features, of k over positions  */

/* p = softmax(x) over n entries: the max and the sum by every thread, in
 * order. */
static __device__ __forceinline__ void softmax_row(float *p, const float *x, int n)
{
    float mx = x[0];
    for (int a = 1; a < n; a++)
        if (x[a] > mx)
            mx = x[a];
    FOR_MINE(a, n)
        p[a] = expf(x[a] - mx);
    done();
    float sum = 0;
    for (int a = 0; a < n; a++)
        sum += p[a];
    done(); /* read by all before they scale */
    float inv = 1.0f / sum;
    FOR_MINE(a, n)
        p[a] *= inv;
    done();
}

/* Online column softmax: add key row kj (value vj) to the running max m,
 * sum Z = sum exp(k - m) and S = sum exp(k - m) v^T; first != 0 starts the
 * columns. Every exp has an argument <= 0. Thread a owns row a of S. */
static __device__ __forceinline__ void eff_add(float *S, float *m, float *Z, const float *kj,
                                               const float *vj, int hs, int sl, int first)
{
    FOR_MINE(a, hs) {
        float x = kj[a], *Sa = S + (size_t)a * sl;
        if (first) {
            m[a] = x;
            Z[a] = 0;
            for (int e = 0; e < hs; e++)
                Sa[e] = 0;
        } else if (x > m[a]) {
            float f = expf(m[a] - x);
            Z[a] *= f;
            for (int e = 0; e < hs; e++)
                Sa[e] *= f;
            m[a] = x;
        }
        float wt = expf(x - m[a]);
        Z[a] += wt;
        for (int e = 0; e < hs; e++)
            Sa[e] += wt * vj[e];
    }
    done();
}

static __device__ __forceinline__ void eff_fwd(float *out, float *lse, const float *q,
                                               const float *k, const float *v, const lat_item &w)
{
    int hs = w.C / w.H, L = w.L, causal = w.causal, sl = w.sl;
    float *S = w.st, *m = S + (size_t)hs * sl, *Z = m + hs, *p = Z + hs;
    for (int t = 0; t < L; t++) {
        for (int j = keys_from(t, causal); j < keys_to(t, L, causal); j++)
            eff_add(S, m, Z, ROW(k, j), ROW(v, j), hs, sl, j == 0);
        softmax_row(p, ROW(q, t), hs);
        float *lt = OROW(lse, t);
        FOR_MINE(a, hs) {
            lt[a] = m[a] + logf(Z[a]);
            p[a] /= Z[a];
        }
        done();
        mt_vec(OROW(out, t), S, p, hs, sl);
    }
}

static __device__ __forceinline__ void eff_bwd(float *dq, float *dk, float *dv, float *c,
                                               const float *dout, const float *q,
                                               const float *k, const float *v,
                                               const float *lse, const lat_item &w)
{
    int hs = w.C / w.H, L = w.L, causal = w.causal, sl = w.sl;
    float *S = w.st, *Gm = S, *m = S + (size_t)hs * sl; /* S, then Gm */
    float *Z = m + hs, *g = Z + hs, *p = g + hs, *dp = p + hs;
    float *sg = dp + hs;
    /* Forward sweep: W_t = S / Z (the normalised key-weighted values),
     * dp_t = W_t dout_t, dq_t = p (dp - p.dp); c_t = p (.) dp to the row
     * buffer. */
    for (int t = 0; t < L; t++) {
        for (int j = keys_from(t, causal); j < keys_to(t, L, causal); j++)
            eff_add(S, m, Z, ROW(k, j), ROW(v, j), hs, sl, j == 0);
        softmax_row(p, ROW(q, t), hs);
        m_vec(dp, S, OROW(dout, t), hs, sl);
        FOR_MINE(a, hs)
            dp[a] /= Z[a];
        done();
        float s = b_dot(p, dp, hs);
        float *dqt = ROW(dq, t), *ct = OROW(c, t);
        FOR_MINE(a, hs) {
            dqt[a] += p[a] * (dp[a] - s);
            ct[a] = p[a] * dp[a];
        }
        done();
    }
    /* Reverse sweep with G_j = sum_{t sees j} exp(lse_j - lse_t) p_t dout_t^T
     * and g_j likewise over c_t (every factor <= 1 since lse_t grows with t):
     * with s_j = exp(k_j - lse_j),
     *   dv_j = G_j^T s_j,  dk_j[a] = s_j[a] (G_j[a] . v_j - g_j[a]). */
    b_zero_m(Gm, hs, sl);
    b_zero(g, hs);
    for (int j = L - 1; j >= 0; j--) {
        const float *lj = OROW(lse, j);
        if (causal && j < L - 1) {
            const float *lj1 = OROW(lse, j + 1);
            FOR_MINE(a, hs) {
                float f = expf(lj[a] - lj1[a]);
                g[a] *= f;
                float *Ga = Gm + (size_t)a * sl;
                for (int e = 0; e < hs; e++)
                    Ga[e] *= f;
            }
            done();
        }
        for (int t = queries_from(j, L, causal); t < queries_to(j, L, causal); t++) {
            softmax_row(p, ROW(q, t), hs);
            outer_add(Gm, p, OROW(dout, t), hs, sl);
            b_axpy(g, 1, OROW(c, t), hs);
        }
        const float *kj = ROW(k, j), *vj = ROW(v, j);
        FOR_MINE(a, hs)
            sg[a] = expf(kj[a] - lj[a]);
        done();
        mt_vec(dp, Gm, sg, hs, sl);
        b_axpy(ROW(dv, j), 1, dp, hs);
        float *dkj = ROW(dk, j);
        FOR_MINE(a, hs) {
            const float *Ga = Gm + (size_t)a * sl;
            float s = 0;
            for (int e = 0; e < hs; e++)
                s += Ga[e] * vj[e];
            dkj[a] += sg[a] * (s - g[a]);
        }
        done();
    }
}

/* ------------------------------------------------------------------------ */
/* x = n * row: phi of a hydra row from the row and its saved 1/norm. */
static __device__ __forceinline__ void scale_row(float *x, const float *row, float n, int hs)
{
    FOR_MINE(a, hs)
        x[a] = row[a] * n;
    done();
}

/* 4. Hydra: cosine kernel over the whole token vector, per-head products   */

static __device__ __forceinline__ void hydra_fwd(float *out, const float *nq, const float *nk,
                                                 const float *q, const float *k, const float *v,
                                                 const lat_item &w)
{
    int hs = w.C / w.H, L = w.L, causal = w.causal, sl = w.sl;
    float *S = w.st, *x = S + (size_t)hs * sl;
    b_zero_m(S, hs, sl);
    for (int t = 0; t < L; t++) {
        for (int j = keys_from(t, causal); j < keys_to(t, L, causal); j++) {
            scale_row(x, ROW(k, j), nk[w.o + j], hs);
            outer_add(S, x, ROW(v, j), hs, sl);
        }
        scale_row(x, ROW(q, t), nq[w.o + t], hs);
        mt_vec(OROW(out, t), S, x, hs, sl);
    }
}

/* Writes dphi(q) and dphi(k) of the head's columns into the row buffers
 * (assigned, not added) and adds dv. */
static __device__ __forceinline__ void hydra_bwd(float *dv, float *dpq, float *dpk,
                                                 const float *dout, const float *nq,
                                                 const float *nk, const float *q, const float *k,
                                                 const float *v, const lat_item &w)
{
    int hs = w.C / w.H, L = w.L, causal = w.causal, sl = w.sl;
    float *S = w.st, *Gm = S, *x = S + (size_t)hs * sl; /* S, then Gm */
    float *y = x + hs;
    b_zero_m(S, hs, sl);
    for (int t = 0; t < L; t++) {
        for (int j = keys_from(t, causal); j < keys_to(t, L, causal); j++) {
            scale_row(x, ROW(k, j), nk[w.o + j], hs);
            outer_add(S, x, ROW(v, j), hs, sl);
        }
        m_vec(OROW(dpq, t), S, OROW(dout, t), hs, sl);
    }
    b_zero_m(Gm, hs, sl);
    for (int j = L - 1; j >= 0; j--) {
        for (int t = queries_from(j, L, causal); t < queries_to(j, L, causal); t++) {
            scale_row(x, ROW(q, t), nq[w.o + t], hs);
            outer_add(Gm, x, OROW(dout, t), hs, sl);
        }
        scale_row(x, ROW(k, j), nk[w.o + j], hs);
        mt_vec(y, Gm, x, hs, sl);
        b_axpy(ROW(dv, j), 1, y, hs);
        m_vec(OROW(dpk, j), Gm, ROW(v, j), hs, sl);
    }
}

#undef ROW
#undef OROW
#undef HROW

// ---- the work items ----------------------------------------------------

// A scratch slot's floats, the CPU's (attn_linear.c slot_size): two hs x hs
// states and six rows; a sweep here uses one state, so shared memory holds
// hs (hs + 1) + 6 hs.
static __host__ __device__ __forceinline__ size_t slot_of(int hs)
{
    return 2 * (size_t)hs * hs + 6 * (size_t)hs;
}

static __device__ __forceinline__ void linrec_item(const lat_args &a, const lat_item &w)
{
    linrec_mode md = linrec_mode_of(a.causal, lat_paper(a.kind), lat_variant(a.kind));
    float *rk = a.cache, *rq = a.cache + (size_t)a.T * a.C;
    if (a.fwd)
        linrec_fwd(a.out, rk, rq, a.q, a.k, a.v, &md, w);
    else
        linrec_bwd(a.dq, a.dk, a.dv, a.scratch, a.dout, a.q, a.k, a.v, rk, rq, &md, w);
}

static __device__ __forceinline__ void lat_item_run(const lat_args &a, const lat_item &w)
{
    size_t TC = (size_t)a.T * a.C;
    switch (a.kind) {
    case K_LINEAR:
        if (a.fwd)
            linear_fwd(a.out, a.cache, a.q, a.k, a.v, w);
        else
            linear_bwd(a.dq, a.dk, a.dv, a.scratch, a.dout, a.q, a.k, a.v, a.cache, w);
        break;
    case K_EFFICIENT:
        if (a.fwd)
            eff_fwd(a.out, a.cache, a.q, a.k, a.v, w);
        else
            eff_bwd(a.dq, a.dk, a.dv, a.scratch, a.dout, a.q, a.k, a.v, a.cache, w);
        break;
    case K_HYDRA:
        if (a.fwd)
            hydra_fwd(a.out, a.cache, a.cache + a.T, a.q, a.k, a.v, w);
        else
            hydra_bwd(a.dv, a.scratch, a.scratch + TC, a.dout, a.cache, a.cache + a.T, a.q,
                      a.k, a.v, w);
        break;
    default:
        linrec_item(a, w);
    }
}

// A block a work item. In shared memory: block (b, h) sweeps segment b.
// In the scratch: block gh owns slot gh and sweeps segments gh / H, + G...
static __global__ __launch_bounds__(128, 1) void k_lattn(lat_args a)
{
    BE_DYN_SHARED(float, sh);
    int hs = a.C / a.H, gh = (int)blockIdx.x;
    lat_item w = {a.ld, a.C, a.H, 0, 0, gh % a.H, a.causal, hs, nullptr};
    int G = a.B;
    if (a.shared) {
        w.sl = hs + 1;
        w.st = sh;
    } else {
        G = a.B < 32 ? a.B : 32;
        size_t rowbufs = a.fwd ? 0 : a.kind == K_HYDRA ? 2 : 1;
        w.st = a.scratch + rowbufs * (size_t)a.T * a.C + (size_t)gh * slot_of(hs);
    }
    for (int b = gh / a.H; b < a.B; b += G) {
        w.o = a.off[b];
        w.L = a.off[b + 1] - a.off[b];
        lat_item_run(a, w);
    }
}

// Hydra's whole-row norms: n[t] = 1 / sqrt(|x_t|^2 + eps) over C columns
static __global__ __launch_bounds__(256) void k_rnorms(float *n, const float *x, int ld, int T,
                                                       int C)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < T) {
        const float *xt = x + (size_t)t * ld;
        n[t] = 1.0f / sqrtf(dot_one(xt, xt, C) + 1e-12f);
    }
}

// dx_t += n_t (dphi_t - x_t (x_t . dphi_t) n_t^2)
static __global__ __launch_bounds__(256) void k_rnorms_back(float *dx, const float *dphi,
                                                            const float *x, const float *n,
                                                            int ld, int T, int C)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= T)
        return;
    const float *xt = x + (size_t)t * ld, *dp = dphi + (size_t)t * C;
    float nt = n[t], s = dot_one(xt, dp, C) * nt * nt;
    float *d = dx + (size_t)t * ld;
    for (int c = 0; c < C; c++)
        d[c] += nt * (dp[c] - xt[c] * s);
}

static int lat_setup(sq_gpu_be *be, lat_args *a, const int **hp, int kind, const int *off, int B,
                     int H, int C, const char *what)
{
    const int *h = be_host_ints(be, off);
    *hp = h;
    if (!h || H <= 0 || C % H || kind < 0 || kind > K_NO_ELU_PAPER) {
        be_note(be, cudaErrorInvalidValue, what);
        return -1;
    }
    a->kind = kind;
    a->B = B;
    a->H = H;
    a->C = C;
    a->T = h[B];
    a->off = be_ints(be, off);
    return a->T > 0 ? 0 : -1;
}

// The chunked forms (k_lchunk.cu, k_echunk.cu) when the head fits them:
// the pieces' list, the workspace after the scratch's row buffers (where
// the sweep keeps its slots), and each phase a launch (lattn.cuh). 0: the
// caller sweeps.
static int lat_chunked(sq_gpu_be *be, lat_args *a, const int *h)
{
    static const int fwd[] = {LC_KEYS, LC_FWD}, bwd[] = {LC_KEYS, LC_BACK_Q, LC_QUERIES, LC_BACK_K};
    size_t bytes = 0;
    int R = lat_chunk_rows(a->kind, a->C / a->H, &bytes);
    if (!R)
        return 0;
    a->tiles = be_seg_tiles(be, h, a->B, SQ_LATTN_GPU_PIECE, &a->ntiles, "lattn: the pieces");
    if (!a->tiles)
        return 1; // the sticky error is noted
    // the offsets' device address again: the upload may have grown its
    // buffer, moving what was staged in it (a graph step's batch arrays)
    a->off = be_ints(be, h);
    size_t rowbufs = a->kind == K_HYDRA ? 2 : 1;
    a->ws = a->scratch + rowbufs * (size_t)a->T * a->C;
    const int *ph = a->fwd ? fwd : bwd;
    int n = a->fwd ? 2 : 4;
    for (int i = 0; i < n; i++) {
        a->phase = ph[i];
        if (a->kind == K_EFFICIENT)
            be_echunk_launch(be, a, R, bytes);
        else
            be_lchunk_launch(be, a, R, bytes);
    }
    return 1;
}

enum { LAT_THREADS_MAX = 128 };

// The launch of k_lattn: its blocks, threads and dynamic shared bytes; the
// state in shared memory when it fits (a->shared).
static void lat_launch(sq_gpu_be *be, lat_args *a, const int *h)
{
    if (lat_chunked(be, a, h))
        return;
    int hs = a->C / a->H;
    size_t sh = ((size_t)hs * (hs + 1) + 6 * (size_t)hs) * sizeof(float);
    a->shared = sh <= LC_SHARED_MAX;
    int G = a->shared ? a->B : a->B < 32 ? a->B : 32;
    int nt = (hs + 31) / 32 * 32;
    nt = nt < LAT_THREADS_MAX ? nt : LAT_THREADS_MAX;
    SQ_LAUNCH(be, k_lattn, (unsigned)G * (unsigned)a->H, (unsigned)nt, a->shared ? sh : 0, *a);
}

void be_lattn_forward(sq_gpu_be *be, int kind, float *out, float *cache, float *scratch,
                      const float *q, const float *k, const float *v, int ld, const int *off,
                      int B, int H, int C, int causal)
{
    lat_args a = {};
    const int *h = nullptr;
    if (lat_setup(be, &a, &h, kind, off, B, H, C, "lattn_forward: off not staged, or a bad kind"))
        return;
    a.fwd = 1;
    a.ld = ld;
    a.causal = causal;
    a.out = out;
    a.cache = cache;
    a.scratch = scratch;
    a.q = q;
    a.k = k;
    a.v = v;
    if (kind == K_HYDRA) {
        SQ_LAUNCH(be, k_rnorms, be_blocks(a.T, 256), 256, 0, cache, q, ld, a.T, C);
        SQ_LAUNCH(be, k_rnorms, be_blocks(a.T, 256), 256, 0, cache + a.T, k, ld, a.T, C);
    }
    lat_launch(be, &a, h);
}

void be_lattn_backward(sq_gpu_be *be, int kind, float *dq, float *dk, float *dv, float *scratch,
                       const float *dout, const float *q, const float *k, const float *v,
                       const float *cache, int ld, const int *off, int B, int H, int C,
                       int causal)
{
    lat_args a = {};
    const int *h = nullptr;
    if (lat_setup(be, &a, &h, kind, off, B, H, C, "lattn_backward: off not staged, or a bad kind"))
        return;
    a.fwd = 0;
    a.ld = ld;
    a.causal = causal;
    a.cache = (float *)cache;
    a.scratch = scratch;
    a.dq = dq;
    a.dk = dk;
    a.dv = dv;
    a.q = q;
    a.k = k;
    a.v = v;
    a.dout = dout;
    lat_launch(be, &a, h);
    if (kind == K_HYDRA) {
        size_t TC = (size_t)a.T * C;
        SQ_LAUNCH(be, k_rnorms_back, be_blocks(a.T, 256), 256, 0, dq, scratch, q,
                  (const float *)cache, ld, a.T, C);
        SQ_LAUNCH(be, k_rnorms_back, be_blocks(a.T, 256), 256, 0, dk, scratch + TC, k,
                  (const float *)cache + a.T, ld, a.T, C);
    }
}
