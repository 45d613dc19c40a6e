/* attn_linear.c - linear-complexity attention kernels (equations, buffers
 * and conventions: attn_linear.h).
 *
 * Written over `real` and compiled twice: as float, and as double into
 * attn_linear_f64.o (see real.h). Each kind is a pair of per-(segment,
 * head) sweeps driven by the same loop: work item (g, h) owns state slot
 * g*H + h of the scratch and does head h of segments g, g+G, ... in order.
 * Every output element and every gradient element is written by exactly one
 * work item in a fixed order, so results are bitwise the same for any
 * thread count.
 *
 * Backward pattern (all kinds). With out_t = u_t^T S_t, S_t = sum_{j in K(t)}
 * f(k_j) v_j^T:
 *   forward sweep   recompute S_t; du_t = S_t dout_t gives dq_t; per-row
 *                   terms the reverse sweep needs go to a [T, C] row buffer
 *   reverse sweep   G_j = sum_{t : j in K(t)} u_t dout_t^T (running, hs x hs)
 *                   gives dv_j = G_j^T f(k_j) and dk_j from G_j v_j
 * so no len x len matrix is ever formed. */
#ifndef SQ_REAL
#define SQ_REAL float
#endif

#include "attn_linear.h"
#include "real.h"
#include "ongpu.h"
#include "vec.h"

#include <string.h>

/* ------------------------------------------------------------------------ */
/* Buffer sizes (precision-free: compiled once, in the float build).        */

static int n_groups(int B)
{
    return B < SQ_LATTN_GROUPS ? B : SQ_LATTN_GROUPS;
}

/* Reals of one state slot: two hs x hs matrices and six hs vectors. */
static size_t slot_size(int hs)
{
    return 2 * (size_t)hs * hs + 6 * (size_t)hs;
}

#if !SQ_REAL_IS_F64
/* Row buffers (each [T, C]) the backward of a kind needs. */
static int row_bufs(sq_lattn_kind kind)
{
    return kind == SQ_LATTN_HYDRA ? 2 : 1;
}

/* linrec's kinds by [variant][scale] */
static const sq_lattn_kind linrec_kinds[3][2] = {
    {SQ_LATTN_LINREC, SQ_LATTN_LINREC_PAPER},
    {SQ_LATTN_LINREC_NO_L2, SQ_LATTN_LINREC_NO_L2_PAPER},
    {SQ_LATTN_LINREC_NO_ELU, SQ_LATTN_LINREC_NO_ELU_PAPER},
};

sq_lattn_kind sq_lattn_linrec(sq_linrec_scale scale, sq_linrec_variant variant)
{
    return linrec_kinds[variant][scale == SQ_LINREC_PAPER];
}

int sq_lattn_is_linrec(sq_lattn_kind kind, sq_linrec_scale *scale,
                       sq_linrec_variant *variant)
{
    for (int va = 0; va < 3; va++)
        for (int sc = 0; sc < 2; sc++)
            if (linrec_kinds[va][sc] == kind) {
                if (scale)
                    *scale = sc ? SQ_LINREC_PAPER : SQ_LINREC_CODE;
                if (variant)
                    *variant = (sq_linrec_variant)va;
                return 1;
            }
    return 0;
}

size_t sq_lattn_cache_size(sq_lattn_kind kind, const int *off, int B, int H,
                           int C)
{
    size_t T = (size_t)off[B];
    if (sq_lattn_is_linrec(kind, NULL, NULL))
        return T * (size_t)C + T * (size_t)H;
    switch (kind) {
    case SQ_LATTN_LINEAR:
        return T * (size_t)H;
    case SQ_LATTN_EFFICIENT:
        return T * (size_t)C;
    case SQ_LATTN_HYDRA:
        return 2 * T;
    default: /* linrec, above */
        break;
    }
    return 0;
}

size_t sq_lattn_scratch_size(sq_lattn_kind kind, const int *off, int B,
                             int H, int C)
{
    size_t T = (size_t)off[B];
    return (size_t)row_bufs(kind) * T * (size_t)C +
           (size_t)n_groups(B) * (size_t)H * slot_size(C / H);
}

/* A piece's state on a GPU: an hs x hs matrix and two columns (z, or
 * efficient's maximum and sum), per head */
size_t sq_lattn_gpu_scratch_size(sq_lattn_kind kind, const int *off, int B,
                                 int H, int C)
{
    size_t T = (size_t)off[B], P = SQ_LATTN_GPU_PIECE, hs = (size_t)(C / H);
    size_t pieces = (T + (P - 1) * (size_t)B) / P;
    size_t states = pieces * (size_t)H * (hs * hs + 2 * hs);
    size_t slots = (size_t)n_groups(B) * (size_t)H * slot_size(C / H);
    return (size_t)row_bufs(kind) * T * (size_t)C + (states > slots ? states : slots);
}
#endif

/* ------------------------------------------------------------------------ */
/* Small helpers                                                             */

/* elu(x) = x (x > 0), e^x - 1 (x <= 0), and d elu / dx = 1 (x > 0), e^x
 * (x <= 0). The float build computes e^x with vec.h's exp, so that a row's
 * hs maps vectorise (libm's expm1f was a call per element, four to six
 * times per element of a step); e^x - 1 is within 2e-7 of expm1 (absolute:
 * elu's outputs are O(1) sums). The double build, which the gradient
 * checks use, keeps libm's. */
#if SQ_REAL_IS_F64
static inline double elu_v(double x)
{
    return x > 0 ? x : expm1(x);
}

static inline double elu_grad_v(double x)
{
    return x > 0 ? 1.0 : exp(x);
}
#else
static inline float elu_v(float x)
{
    return x > 0 ? x : sq_vexpf(x) - 1.0f;
}

static inline float elu_grad_v(float x)
{
    return x > 0 ? 1.0f : sq_vexpf(x);
}
#endif

/* M += x y^T, M [n, n] row-major. */
static inline void outer_add(real *M, const real *x, const real *y, int n)
{
    for (int a = 0; a < n; a++)
        sq_axpy(M + (size_t)a * n, x[a], y, n);
}

/* y = M^T x: y[e] = sum_a x[a] M[a][e], summed over a in order (as
 * row-wise axpys would). Blocks of MT_BLOCK columns (the last one
 * narrower) are summed in a local vector, which stays in registers: axpys
 * into y itself made each row wait
 * for the previous row's store (a head's state is small, hs = 16 at d 128
 * and 8 heads, so this is most of a sweep's time). */
#define MT_BLOCK 16

static inline void mt_vec(real *restrict y, const real *M, const real *x,
                          int n)
{
    for (int e0 = 0; e0 < n; e0 += MT_BLOCK) {
        int w = n - e0 < MT_BLOCK ? n - e0 : MT_BLOCK;
        real acc[MT_BLOCK] = {0};
        for (int a = 0; a < n; a++) {
            const real *m = M + (size_t)a * n + e0;
            real xa = x[a];
            _Pragma("omp simd")
            for (int l = 0; l < w; l++)
                acc[l] += xa * m[l];
        }
        memcpy(y + e0, acc, (size_t)w * sizeof *acc);
    }
}

/* y[a] = sum_e M[a][e] x[e] */
static inline void m_vec(real *y, const real *M, const real *x, int n)
{
    for (int a = 0; a < n; a++)
        y[a] = sq_dot(M + (size_t)a * n, x, n);
}

/* The running state of query t holds the keys it sees. Before query t the
 * forward sweep adds keys keys_from .. keys_to - 1: key t (causal), or all
 * keys before the first query and none after (bidirectional). */
static inline int keys_from(int t, int causal)
{
    return causal ? t : 0;
}

static inline int keys_to(int t, int L, int causal)
{
    return causal ? t + 1 : (t == 0 ? L : 0);
}

/* Mirror for the reverse sweep: before key j it adds the queries that see
 * key j and are not in yet: query j (causal), or all queries at the first
 * step j = L - 1 (bidirectional). */
static inline int queries_from(int j, int L, int causal)
{
    return causal ? j : (j == L - 1 ? 0 : L);
}

static inline int queries_to(int j, int L, int causal)
{
    return causal ? j + 1 : L;
}

/* Below this many multiply-adds (~ T C (hs + 4)) an op runs on one thread:
 * forking a team for a few microseconds of work costs more than it saves,
 * and much more on a loaded machine. Results are the same either way. */
#define PAR_MIN_WORK 16384

static int par_worth(int T, int C, int hs)
{
    return (double)T * C * (hs + 4) >= PAR_MIN_WORK;
}

/* The work-item loop shared by every kind: BODY runs for segment b
 * (rows o .. o+L-1), head h, with the slot `st`; the op's `off` and `cx`
 * (its thread count) must be in scope. */
#define FOR_SEGMENT_HEADS(scratch, rowbufs, T, B, H, C, BODY) do { \
    int G_ = n_groups(B), hs_ = (C) / (H), par_ = par_worth(T, C, hs_); \
    real *slots_ = (scratch) + (size_t)(rowbufs) * (size_t)(T) * (size_t)(C); \
    SQ_PAR_LOOP(dynamic, par_, int, gh_, G_ * (H), 1, { \
        int h = gh_ % (H); \
        real *st = slots_ + (size_t)gh_ * slot_size(hs_); \
        for (int b = gh_ / (H); b < (B); b += G_) { \
            int o = off[b], L = off[b + 1] - off[b]; \
            BODY; \
        } \
    }); } while (0)

#define ROW(p, t) ((p) + (size_t)(o + (t)) * ld + (size_t)h * hs)
#define OROW(p, t) ((p) + (size_t)(o + (t)) * C + (size_t)h * hs)

/* ------------------------------------------------------------------------ */
/* 1. LinRec                                                                 */

/* What a linrec sweep does: its form, its scaling and its variant's two
 * switches (attn_linear.h: elu on q and k, L2 normalisation of q rows and
 * k columns). */
typedef struct {
    int causal, paper, elu, l2;
} linrec_mode;

static linrec_mode linrec_mode_of(int causal, sq_linrec_scale scale,
                                  sq_linrec_variant variant)
{
    linrec_mode m = {causal, scale == SQ_LINREC_PAPER,
                     variant != SQ_LINREC_NO_ELU, variant != SQ_LINREC_NO_L2};
    return m;
}

/* The feature map f (elu, or the identity without it) of a row's hs
 * entries, y = f(x), or with `grad` its derivative y = f'(x). */
static inline void lr_f_row(const linrec_mode *m, real *restrict y,
                            const real *restrict x, int hs, int grad)
{
    if (!m->elu) {
        for (int a = 0; a < hs; a++)
            y[a] = grad ? (real)1 : x[a];
    } else if (grad) {
        SQ_SIMD_IF_FLOAT
        for (int a = 0; a < hs; a++)
            y[a] = elu_grad_v(x[a]);
    } else {
        SQ_SIMD_IF_FLOAT
        for (int a = 0; a < hs; a++)
            y[a] = elu_v(x[a]);
    }
}

/* Key-column factor c_k(t): 1/sqrt(N(t)) (paper scaling), else 1. */
static inline real linrec_ck(const linrec_mode *m, int t, int L)
{
    return m->paper ? (real)1 / r_sqrt((real)(m->causal ? t + 1 : L))
                    : (real)1;
}

/* Without L2 normalisation the row and column factors nq_t and rk_t are 1
 * (and the cache holds ones), so forward and backward share every line.
 * Every loop over a row's hs entries is element-wise (vectorised in the
 * SQ_VEC clones) or, for the two reductions over a row (|f(q_t)|^2 and
 * ah . d ah), sequential in a fixed order: the same bits on every target. */
SQ_VEC static void R(linrec_fwd)(real *out, real *rk, real *rq, const real *q,
                              const real *k, const real *v, int ld, int C, int H,
                              int o, int L, int h, const linrec_mode *md, real *st)
{
    int hs = C / H, causal = md->causal;
    real *S = st, *z = S + (size_t)hs * hs, *u = z + hs, *kb = u + hs;
    real cq = (real)1 / r_sqrt((real)hs), eps = (real)SQ_LATTN_EPS;
    memset(S, 0, (size_t)hs * hs * sizeof *S);
    memset(z, 0, (size_t)hs * sizeof *z);
    for (int t = 0; t < L; t++) {
        /* bidirectional: all keys before the first query */
        for (int j = keys_from(t, causal); j < keys_to(t, L, causal); j++) {
            lr_f_row(md, kb, ROW(k, j), hs, 0);
            _Pragma("omp simd")
            for (int a = 0; a < hs; a++)
                z[a] += kb[a] * kb[a];
            outer_add(S, kb, ROW(v, j), hs);
        }
        real ck = linrec_ck(md, t, L);
        lr_f_row(md, u, ROW(q, t), hs, 0);
        real n2 = 0;
        for (int a = 0; a < hs; a++)
            n2 += u[a] * u[a];
        real nq = md->l2 ? (real)1 / r_sqrt(n2 + eps) : (real)1;
        rq[(size_t)(o + t) * H + h] = nq;
        real *rkt = OROW(rk, t);
        _Pragma("omp simd")
        for (int a = 0; a < hs; a++) {
            rkt[a] = md->l2 ? (real)1 / r_sqrt(z[a] + eps) : (real)1;
            u[a] *= cq * ck * nq * rkt[a];
        }
        mt_vec(OROW(out, t), S, u, hs);
    }
}

/* u_t = c_q c_k f(q_t) nq_t rk_t (also returns f(q_t) in ah, scaled by
 * nq_t: the unit row qh_t / c_q when normalised). */
static inline void linrec_u(real *restrict u, real *restrict ah, const real *qt,
                            const real *rkt, real nq, real c, int hs,
                            const linrec_mode *md)
{
    lr_f_row(md, ah, qt, hs, 0);
    _Pragma("omp simd")
    for (int a = 0; a < hs; a++) {
        ah[a] *= nq;
        u[a] = c * ah[a] * rkt[a];
    }
}

/* The products with the hs x hs states are all row-wise axpys (mt_vec,
 * outer_add): the forward sweep keeps S^T = sum v_j f(k_j)^T, so that
 * du = S dout_t is one, and the reverse sweep keeps G = sum u_t dout_t^T
 * and G^T side by side, for dv_j = G^T f(k_j) and G v_j (hs dot products
 * a row cost several times the second outer product). */
SQ_VEC static void R(linrec_bwd)(real *dq, real *dk, real *dv, real *dz,
                              const real *dout, const real *q, const real *k,
                              const real *v, const real *rk, const real *rq, int ld,
                              int C, int H, int o, int L, int h,
                              const linrec_mode *md, real *st)
{
    int hs = C / H, causal = md->causal;
    real *M1 = st, *M2 = M1 + (size_t)hs * hs, *g = M2 + (size_t)hs * hs;
    real *u = g + hs, *ah = u + hs, *du = ah + hs, *kb = du + hs, *fg = kb + hs;
    real cq = (real)1 / r_sqrt((real)hs);
    /* Forward sweep (M1 = S^T): dq, and dz_t[a] = d loss / d z_t[a] to the
     * row buffer */
    memset(M1, 0, (size_t)hs * hs * sizeof *M1);
    for (int t = 0; t < L; t++) {
        for (int j = keys_from(t, causal); j < keys_to(t, L, causal); j++) {
            lr_f_row(md, kb, ROW(k, j), hs, 0);
            outer_add(M1, ROW(v, j), kb, hs);
        }
        real ck = linrec_ck(md, t, L), c = cq * ck;
        const real *qt = ROW(q, t), *rkt = OROW(rk, t);
        real nq = rq[(size_t)(o + t) * H + h];
        linrec_u(u, ah, qt, rkt, nq, c, hs, md);
        mt_vec(du, M1, OROW(dout, t), hs);
        /* u = c ah rk: d ah = c rk du; ah = x nq with x = f(q) and
         * nq = (|x|^2 + eps)^-1/2: dx = (d ah - ah (ah . d ah)) nq
         * (without L2: nq = 1 constant, dx = d ah) */
        _Pragma("omp simd")
        for (int a = 0; a < hs; a++)
            kb[a] = c * rkt[a] * du[a]; /* d ah */
        real s = 0;
        if (md->l2)
            for (int a = 0; a < hs; a++)
                s += ah[a] * kb[a];
        lr_f_row(md, fg, qt, hs, 1);
        real *dqt = ROW(dq, t), *dzt = OROW(dz, t);
        _Pragma("omp simd")
        for (int a = 0; a < hs; a++) {
            dqt[a] += fg[a] * (kb[a] - ah[a] * s) * nq;
            /* u = c ah (z + eps)^-1/2: du/dz = -u rk^2 / 2 (no L2: 0) */
            dzt[a] = md->l2 ? -(real)0.5 * u[a] * du[a] * rkt[a] * rkt[a]
                            : (real)0;
        }
    }
    /* Reverse sweep: M2 = G = sum u_t dout_t^T, M1 = G^T, g = sum dz_t over
     * the queries that see key j (t >= j causal, all t bidirectional). */
    memset(M1, 0, (size_t)hs * hs * sizeof *M1);
    memset(M2, 0, (size_t)hs * hs * sizeof *M2);
    memset(g, 0, (size_t)hs * sizeof *g);
    for (int j = L - 1; j >= 0; j--) {
        for (int t = queries_from(j, L, causal); t < queries_to(j, L, causal); t++) {
            linrec_u(u, ah, ROW(q, t), OROW(rk, t), rq[(size_t)(o + t) * H + h],
                     cq * linrec_ck(md, t, L), hs, md);
            outer_add(M2, u, OROW(dout, t), hs);
            outer_add(M1, OROW(dout, t), u, hs);
            sq_axpy(g, 1, OROW(dz, t), hs);
        }
        const real *kj = ROW(k, j);
        lr_f_row(md, kb, kj, hs, 0);
        mt_vec(du, M2, kb, hs);        /* G^T f(k_j) */
        sq_axpy(ROW(dv, j), 1, du, hs);
        mt_vec(ah, M1, ROW(v, j), hs); /* G v_j */
        lr_f_row(md, fg, kj, hs, 1);
        real *dkj = ROW(dk, j);
        _Pragma("omp simd")
        for (int a = 0; a < hs; a++)
            dkj[a] += fg[a] * (ah[a] + 2 * kb[a] * g[a]);
    }
}

void R(sq_linrec_forward)(const sq_ctx *cx, real *out, real *cache,
                          real *scratch, const real *q, const real *k,
                          const real *v, int ld, const int *off, int B, int H,
                          int C, int causal, sq_linrec_scale scale,
                          sq_linrec_variant variant)
{
    int T = off[B];
    linrec_mode md = linrec_mode_of(causal, scale, variant);
    real *rk = cache, *rq = cache + (size_t)T * C;
    FOR_SEGMENT_HEADS(scratch, 0, T, B, H, C,
        R(linrec_fwd)(out, rk, rq, q, k, v, ld, C, H, o, L, h, &md, st));
}

void R(sq_linrec_backward)(const sq_ctx *cx, real *dq, real *dk, real *dv,
                           real *scratch, const real *dout, const real *q,
                           const real *k, const real *v, const real *cache,
                           int ld, const int *off, int B, int H, int C,
                           int causal, sq_linrec_scale scale,
                           sq_linrec_variant variant)
{
    int T = off[B];
    linrec_mode md = linrec_mode_of(causal, scale, variant);
    const real *rk = cache, *rq = cache + (size_t)T * C;
    real *dz = scratch;
    FOR_SEGMENT_HEADS(scratch, 1, T, B, H, C,
        R(linrec_bwd)(dq, dk, dv, dz, dout, q, k, v, rk, rq, ld, C, H, o, L, h,
                   &md, st));
}

/* ------------------------------------------------------------------------ */
/* 2. Linear attention, phi = elu + 1                                        */

static inline void phi1(real *restrict y, const real *restrict x, int n)
{
    SQ_SIMD_IF_FLOAT
    for (int a = 0; a < n; a++)
        y[a] = elu_v(x[a]) + 1;
}

/* As linrec's sweeps: element-wise row loops, S^T and G^T kept beside S
 * and G so that every state product is an axpy (mt_vec). */
SQ_VEC static void R(linear_fwd)(real *out, real *rden, const real *q, const real *k,
                       const real *v, int ld, int C, int H, int o, int L,
                       int h, int causal, real *st)
{
    int hs = C / H;
    real *S = st, *z = S + (size_t)hs * hs, *pq = z + hs, *pk = pq + hs;
    memset(S, 0, (size_t)hs * hs * sizeof *S);
    memset(z, 0, (size_t)hs * sizeof *z);
    for (int t = 0; t < L; t++) {
        for (int j = keys_from(t, causal); j < keys_to(t, L, causal); j++) {
            phi1(pk, ROW(k, j), hs);
            sq_axpy(z, 1, pk, hs);
            outer_add(S, pk, ROW(v, j), hs);
        }
        phi1(pq, ROW(q, t), hs);
        real inv = (real)1 / (sq_dot(pq, z, hs) + (real)SQ_LATTN_EPS_DEN);
        rden[(size_t)(o + t) * H + h] = inv;
        for (int a = 0; a < hs; a++)
            pq[a] *= inv;
        mt_vec(OROW(out, t), S, pq, hs);
    }
}

SQ_VEC static void R(linear_bwd)(real *dq, real *dk, real *dv, real *dden,
                              const real *dout, const real *q, const real *k,
                              const real *v, const real *rden, int ld, int C, int H,
                              int o, int L, int h, int causal, real *st)
{
    int hs = C / H;
    real *M1 = st, *M2 = M1 + (size_t)hs * hs, *z = M2 + (size_t)hs * hs;
    real *g = z + hs, *pq = g + hs, *pk = pq + hs, *num = pk + hs;
    real *tmp = num + hs;
    /* M1 = S, M2 = S^T. out = num / den: dnum = dout / den,
     * dden = -(dout . num) / den^2; dphi(q_t) = S_t dnum + z_t dden */
    memset(M1, 0, (size_t)hs * hs * sizeof *M1);
    memset(M2, 0, (size_t)hs * hs * sizeof *M2);
    memset(z, 0, (size_t)hs * sizeof *z);
    for (int t = 0; t < L; t++) {
        for (int j = keys_from(t, causal); j < keys_to(t, L, causal); j++) {
            phi1(pk, ROW(k, j), hs);
            sq_axpy(z, 1, pk, hs);
            outer_add(M1, pk, ROW(v, j), hs);
            outer_add(M2, ROW(v, j), pk, hs);
        }
        const real *qt = ROW(q, t), *dt = OROW(dout, t);
        real inv = rden[(size_t)(o + t) * H + h];
        phi1(pq, qt, hs);
        mt_vec(num, M1, pq, hs);
        real dd = -sq_dot(dt, num, hs) * inv * inv;
        mt_vec(tmp, M2, dt, hs);
        real *dqt = ROW(dq, t);
        SQ_SIMD_IF_FLOAT
        for (int a = 0; a < hs; a++)
            dqt[a] += elu_grad_v(qt[a]) * (tmp[a] * inv + z[a] * dd);
        dden[(size_t)(o + t) * C + (size_t)h * hs] = dd;
    }
    /* M2 = G = sum phi(q_t) dnum_t^T, M1 = G^T, g = sum phi(q_t) dden_t
     * over t seeing j: dphi(k_j) = G v_j + g, dv_j = G^T phi(k_j). */
    memset(M1, 0, (size_t)hs * hs * sizeof *M1);
    memset(M2, 0, (size_t)hs * hs * sizeof *M2);
    memset(g, 0, (size_t)hs * sizeof *g);
    for (int j = L - 1; j >= 0; j--) {
        for (int t = queries_from(j, L, causal); t < queries_to(j, L, causal); t++) {
            real inv = rden[(size_t)(o + t) * H + h];
            real dd = dden[(size_t)(o + t) * C + (size_t)h * hs];
            phi1(pq, ROW(q, t), hs);
            sq_axpy(g, dd, pq, hs);
            for (int a = 0; a < hs; a++)
                pq[a] *= inv;
            outer_add(M2, pq, OROW(dout, t), hs);
            outer_add(M1, OROW(dout, t), pq, hs);
        }
        const real *kj = ROW(k, j);
        phi1(pk, kj, hs);
        mt_vec(tmp, M2, pk, hs);
        sq_axpy(ROW(dv, j), 1, tmp, hs);
        mt_vec(num, M1, ROW(v, j), hs); /* G v_j */
        real *dkj = ROW(dk, j);
        SQ_SIMD_IF_FLOAT
        for (int a = 0; a < hs; a++)
            dkj[a] += elu_grad_v(kj[a]) * (num[a] + g[a]);
    }
}

void R(sq_linear_attn_forward)(const sq_ctx *cx, real *out, real *cache,
                               real *scratch, const real *q, const real *k,
                               const real *v, int ld, const int *off, int B,
                               int H, int C, int causal)
{
    int T = off[B];
    FOR_SEGMENT_HEADS(scratch, 0, T, B, H, C,
        R(linear_fwd)(out, cache, q, k, v, ld, C, H, o, L, h, causal, st));
}

void R(sq_linear_attn_backward)(const sq_ctx *cx, real *dq, real *dk, real *dv,
                                real *scratch, const real *dout, const real *q,
                                const real *k, const real *v, const real *cache,
                                int ld, const int *off, int B, int H, int C,
                                int causal)
{
    int T = off[B];
    real *dden = scratch;
    FOR_SEGMENT_HEADS(scratch, 1, T, B, H, C,
        R(linear_bwd)(dq, dk, dv, dden, dout, q, k, v, cache, ld, C, H, o, L, h,
                   causal, st));
}

/* ------------------------------------------------------------------------ */
/* 3. Efficient attention: softmax of q over features, of k over positions  */

/* p = softmax(x) over n entries. */
static inline void softmax_row(real *p, const real *x, int n)
{
    real mx = x[0];
    for (int a = 1; a < n; a++)
        if (x[a] > mx)
            mx = x[a];
    real sum = 0;
    for (int a = 0; a < n; a++) {
        p[a] = r_exp(x[a] - mx);
        sum += p[a];
    }
    real inv = (real)1 / sum;
    for (int a = 0; a < n; a++)
        p[a] *= inv;
}

/* Online column softmax: add key row kj (value vj) to the running max m,
 * sum Z = sum exp(k - m) and S = sum exp(k - m) v^T; first != 0 starts the
 * columns. Every exp has an argument <= 0. */
static inline void eff_add(real *S, real *m, real *Z, const real *kj,
                           const real *vj, int hs, int first)
{
    for (int a = 0; a < hs; a++) {
        real x = kj[a], *Sa = S + (size_t)a * hs;
        if (first) {
            m[a] = x;
            Z[a] = 0;
            for (int e = 0; e < hs; e++)
                Sa[e] = 0;
        } else if (x > m[a]) {
            real f = r_exp(m[a] - x);
            Z[a] *= f;
            for (int e = 0; e < hs; e++)
                Sa[e] *= f;
            m[a] = x;
        }
        real w = r_exp(x - m[a]);
        Z[a] += w;
        sq_axpy(Sa, w, vj, hs);
    }
}

static void eff_fwd(real *out, real *lse, const real *q, const real *k,
                    const real *v, int ld, int C, int H, int o, int L, int h,
                    int causal, real *st)
{
    int hs = C / H;
    real *S = st, *m = S + (size_t)hs * hs, *Z = m + hs, *p = Z + hs;
    for (int t = 0; t < L; t++) {
        for (int j = keys_from(t, causal); j < keys_to(t, L, causal); j++)
            eff_add(S, m, Z, ROW(k, j), ROW(v, j), hs, j == 0);
        softmax_row(p, ROW(q, t), hs);
        real *lt = OROW(lse, t);
        for (int a = 0; a < hs; a++) {
            lt[a] = m[a] + r_log(Z[a]);
            p[a] /= Z[a];
        }
        mt_vec(OROW(out, t), S, p, hs);
    }
}

static void eff_bwd(real *dq, real *dk, real *dv, real *c, const real *dout,
                    const real *q, const real *k, const real *v,
                    const real *lse, int ld, int C, int H, int o, int L,
                    int h, int causal, real *st)
{
    int hs = C / H;
    real *S = st, *Gm = S + (size_t)hs * hs, *m = Gm + (size_t)hs * hs;
    real *Z = m + hs, *g = Z + hs, *p = g + hs, *dp = p + hs;
    real *sg = dp + hs;
    /* Forward sweep: W_t = S / Z (the normalised key-weighted values),
     * dp_t = W_t dout_t, dq_t = p (dp - p.dp); c_t = p (.) dp to the row
     * buffer. */
    for (int t = 0; t < L; t++) {
        for (int j = keys_from(t, causal); j < keys_to(t, L, causal); j++)
            eff_add(S, m, Z, ROW(k, j), ROW(v, j), hs, j == 0);
        softmax_row(p, ROW(q, t), hs);
        m_vec(dp, S, OROW(dout, t), hs);
        real s = 0;
        for (int a = 0; a < hs; a++) {
            dp[a] /= Z[a];
            s += p[a] * dp[a];
        }
        real *dqt = ROW(dq, t), *ct = OROW(c, t);
        for (int a = 0; a < hs; a++) {
            dqt[a] += p[a] * (dp[a] - s);
            ct[a] = p[a] * dp[a];
        }
    }
    /* Reverse sweep with G_j = sum_{t sees j} exp(lse_j - lse_t) p_t dout_t^T
     * and g_j likewise over c_t (every factor <= 1 since lse_t grows with t):
     * with s_j = exp(k_j - lse_j),
     *   dv_j = G_j^T s_j,  dk_j[a] = s_j[a] (G_j[a] . v_j - g_j[a]). */
    memset(Gm, 0, (size_t)hs * hs * sizeof *Gm);
    memset(g, 0, (size_t)hs * sizeof *g);
    for (int j = L - 1; j >= 0; j--) {
        const real *lj = OROW(lse, j);
        if (causal && j < L - 1) {
            const real *lj1 = OROW(lse, j + 1);
            for (int a = 0; a < hs; a++) {
                real f = r_exp(lj[a] - lj1[a]);
                g[a] *= f;
                real *Ga = Gm + (size_t)a * hs;
                for (int e = 0; e < hs; e++)
                    Ga[e] *= f;
            }
        }
        for (int t = queries_from(j, L, causal); t < queries_to(j, L, causal); t++) {
            softmax_row(p, ROW(q, t), hs);
            outer_add(Gm, p, OROW(dout, t), hs);
            sq_axpy(g, 1, OROW(c, t), hs);
        }
        const real *kj = ROW(k, j), *vj = ROW(v, j);
        for (int a = 0; a < hs; a++)
            sg[a] = r_exp(kj[a] - lj[a]);
        mt_vec(dp, Gm, sg, hs);
        sq_axpy(ROW(dv, j), 1, dp, hs);
        real *dkj = ROW(dk, j);
        for (int a = 0; a < hs; a++)
            dkj[a] += sg[a] * (sq_dot(Gm + (size_t)a * hs, vj, hs) - g[a]);
    }
}

void R(sq_efficient_attn_forward)(const sq_ctx *cx, real *out, real *cache,
                                  real *scratch, const real *q, const real *k,
                                  const real *v, int ld, const int *off, int B,
                                  int H, int C, int causal)
{
    int T = off[B];
    FOR_SEGMENT_HEADS(scratch, 0, T, B, H, C,
        eff_fwd(out, cache, q, k, v, ld, C, H, o, L, h, causal, st));
}

void R(sq_efficient_attn_backward)(const sq_ctx *cx, real *dq, real *dk,
                                   real *dv, real *scratch, const real *dout,
                                   const real *q, const real *k, const real *v,
                                   const real *cache, int ld, const int *off,
                                   int B, int H, int C, int causal)
{
    int T = off[B];
    real *c = scratch;
    FOR_SEGMENT_HEADS(scratch, 1, T, B, H, C,
        eff_bwd(dq, dk, dv, c, dout, q, k, v, cache, ld, C, H, o, L, h,
                causal, st));
}

/* ------------------------------------------------------------------------ */
/* x = n * row: phi of a hydra row from the row and its saved 1/norm. */
static inline void scale_row(real *x, const real *row, real n, int hs)
{
    for (int a = 0; a < hs; a++)
        x[a] = row[a] * n;
}

/* 4. Hydra: cosine kernel over the whole token vector, per-head products   */

static void hydra_fwd(real *out, const real *nq, const real *nk,
                      const real *q, const real *k, const real *v, int ld,
                      int C, int H, int o, int L, int h, int causal, real *st)
{
    int hs = C / H;
    real *S = st, *x = S + (size_t)hs * hs;
    memset(S, 0, (size_t)hs * hs * sizeof *S);
    for (int t = 0; t < L; t++) {
        for (int j = keys_from(t, causal); j < keys_to(t, L, causal); j++) {
            scale_row(x, ROW(k, j), nk[o + j], hs);
            outer_add(S, x, ROW(v, j), hs);
        }
        scale_row(x, ROW(q, t), nq[o + t], hs);
        mt_vec(OROW(out, t), S, x, hs);
    }
}

/* Writes dphi(q) and dphi(k) of the head's columns into the row buffers
 * (assigned, not added) and adds dv. */
static void hydra_bwd(real *dv, real *dpq, real *dpk, const real *dout,
                      const real *nq, const real *nk, const real *q,
                      const real *k, const real *v, int ld, int C, int H,
                      int o, int L, int h, int causal, real *st)
{
    int hs = C / H;
    real *S = st, *Gm = S + (size_t)hs * hs, *x = Gm + (size_t)hs * hs;
    real *y = x + hs;
    memset(S, 0, (size_t)hs * hs * sizeof *S);
    for (int t = 0; t < L; t++) {
        for (int j = keys_from(t, causal); j < keys_to(t, L, causal); j++) {
            scale_row(x, ROW(k, j), nk[o + j], hs);
            outer_add(S, x, ROW(v, j), hs);
        }
        m_vec(OROW(dpq, t), S, OROW(dout, t), hs);
    }
    memset(Gm, 0, (size_t)hs * hs * sizeof *Gm);
    for (int j = L - 1; j >= 0; j--) {
        for (int t = queries_from(j, L, causal); t < queries_to(j, L, causal); t++) {
            scale_row(x, ROW(q, t), nq[o + t], hs);
            outer_add(Gm, x, OROW(dout, t), hs);
        }
        scale_row(x, ROW(k, j), nk[o + j], hs);
        mt_vec(y, Gm, x, hs);
        sq_axpy(ROW(dv, j), 1, y, hs);
        m_vec(OROW(dpk, j), Gm, ROW(v, j), hs);
    }
}

/* n[t] = 1 / sqrt(|x_t|^2 + eps) over the C columns of row t. */
static void row_rnorms(const sq_ctx *cx, real *n, const real *x, int ld,
                       int T, int C)
{
    SQ_PAR_LOOP(static, par_worth(T, C, 0), int, t, T, 1, {
        const real *xt = x + (size_t)t * ld;
        n[t] = (real)1 / r_sqrt(sq_dot(xt, xt, C) + (real)SQ_LATTN_EPS);
    });
}

/* dx_t += n_t (dphi_t - phi_t (phi_t . dphi_t)), phi_t = n_t x_t. */
static void row_rnorms_backward(const sq_ctx *cx, real *dx, const real *dphi,
                                const real *x, const real *n, int ld, int T,
                                int C)
{
    SQ_PAR_LOOP(static, par_worth(T, C, 0), int, t, T, 1, {
        const real *xt = x + (size_t)t * ld, *dp = dphi + (size_t)t * C;
        real nt = n[t], s = sq_dot(xt, dp, C) * nt * nt;
        real *d = dx + (size_t)t * ld;
        for (int c = 0; c < C; c++)
            d[c] += nt * (dp[c] - xt[c] * s);
    });
}

void R(sq_hydra_attn_forward)(const sq_ctx *cx, real *out, real *cache,
                              real *scratch, const real *q, const real *k,
                              const real *v, int ld, const int *off, int B,
                              int H, int C, int causal)
{
    int T = off[B];
    real *nq = cache, *nk = cache + T;
    row_rnorms(cx, nq, q, ld, T, C);
    row_rnorms(cx, nk, k, ld, T, C);
    FOR_SEGMENT_HEADS(scratch, 0, T, B, H, C,
        hydra_fwd(out, nq, nk, q, k, v, ld, C, H, o, L, h, causal, st));
}

void R(sq_hydra_attn_backward)(const sq_ctx *cx, real *dq, real *dk, real *dv,
                               real *scratch, const real *dout, const real *q,
                               const real *k, const real *v, const real *cache,
                               int ld, const int *off, int B, int H, int C,
                               int causal)
{
    int T = off[B];
    const real *nq = cache, *nk = cache + T;
    real *dpq = scratch, *dpk = scratch + (size_t)T * C;
    FOR_SEGMENT_HEADS(scratch, 2, T, B, H, C,
        hydra_bwd(dv, dpq, dpk, dout, nq, nk, q, k, v, ld, C, H, o, L, h,
                  causal, st));
    row_rnorms_backward(cx, dq, dpq, q, nq, ld, T, C);
    row_rnorms_backward(cx, dk, dpk, k, nk, ld, T, C);
}

/* ------------------------------------------------------------------------ */
/* Dispatch                                                                  */

void R(sq_lattn_forward)(const sq_ctx *cx, sq_lattn_kind kind, real *out,
                         real *cache, real *scratch, const real *q,
                         const real *k, const real *v, int ld, const int *off,
                         int B, int H, int C, int causal)
{
    SQ_ON_GPU(cx, lattn_forward,
              (kind, out, cache, scratch, q, k, v, ld, off, B, H, C, causal));
    sq_linrec_scale sc;
    sq_linrec_variant va;
    if (sq_lattn_is_linrec(kind, &sc, &va)) {
        R(sq_linrec_forward)(cx, out, cache, scratch, q, k, v, ld, off, B, H, C,
                             causal, sc, va);
        return;
    }
    switch (kind) {
    case SQ_LATTN_LINEAR:
        R(sq_linear_attn_forward)(cx, out, cache, scratch, q, k, v, ld, off, B,
                                  H, C, causal);
        break;
    case SQ_LATTN_EFFICIENT:
        R(sq_efficient_attn_forward)(cx, out, cache, scratch, q, k, v, ld, off,
                                     B, H, C, causal);
        break;
    case SQ_LATTN_HYDRA:
        R(sq_hydra_attn_forward)(cx, out, cache, scratch, q, k, v, ld, off, B,
                                 H, C, causal);
        break;
    default: /* the linrec kinds, above */
        break;
    }
}

void R(sq_lattn_backward)(const sq_ctx *cx, sq_lattn_kind kind, real *dq,
                          real *dk, real *dv, real *scratch, const real *dout,
                          const real *q, const real *k, const real *v,
                          const real *cache, int ld, const int *off, int B,
                          int H, int C, int causal)
{
    SQ_ON_GPU(cx, lattn_backward,
              (kind, dq, dk, dv, scratch, dout, q, k, v, cache, ld, off, B, H, C, causal));
    sq_linrec_scale sc;
    sq_linrec_variant va;
    if (sq_lattn_is_linrec(kind, &sc, &va)) {
        R(sq_linrec_backward)(cx, dq, dk, dv, scratch, dout, q, k, v, cache, ld,
                              off, B, H, C, causal, sc, va);
        return;
    }
    switch (kind) {
    case SQ_LATTN_LINEAR:
        R(sq_linear_attn_backward)(cx, dq, dk, dv, scratch, dout, q, k, v,
                                   cache, ld, off, B, H, C, causal);
        break;
    case SQ_LATTN_EFFICIENT:
        R(sq_efficient_attn_backward)(cx, dq, dk, dv, scratch, dout, q, k, v,
                                      cache, ld, off, B, H, C, causal);
        break;
    case SQ_LATTN_HYDRA:
        R(sq_hydra_attn_backward)(cx, dq, dk, dv, scratch, dout, q, k, v, cache,
                                  ld, off, B, H, C, causal);
        break;
    default: /* the linrec kinds, above */
        break;
    }
}
