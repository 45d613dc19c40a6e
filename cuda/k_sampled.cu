// k_sampled.cu - the sampled softmax (ops.h 10b: Blin's, no correction, hits
// kept), with the log-Q correction and gBCE (10c, 10d: each entry its own K
// negatives) and the same losses
// over one set of K negatives shared by a group of entries (10e).
//
// Per entry (10c, 10d), as the BCE of k_loss.cu: one warp a pair (entry,
// slot) for its logit s = h_row . E_item + b_item (- lq for a negative);
// gBCE's loss term and coefficient at once, the softmax's through one warp
// an entry (max, then the sum of exp(s - max) in double, its loss lse - s_p
// in double, the coefficients g (exp(s - lse) - [positive]) in place); the
// scatter into rows of dE, dbias and dh bucketed on the host (loss.cuh's
// pair plan: the pairs the CPU skips left out, masked hits included).
// Shared (10e), as the CPU's chunks, its scratch carved the same way:
//   E_neg = rows of the set, add = b - lq            (a thread an element)
//   per chunk: hc = the entries' rows of h, S = hc E_neg^T (cuBLAS); one
//   warp a row for its positive's logit, loss and dlogits in S; the rows'
//   losses added in double; dhc = S E_neg, dE_neg += S^T hc (cuBLAS);
//   dh += dhc + dsp E_p entry by entry; dbias of the set's slots += the
//   column sums of S
//   then the positives' rows of dE and dbias (bucketed by item, entries in
//   order), then the set's (bucketed by item, slots in order): the CPU's
//   order of additions into every row.
// Graph-safe: every launch a function of n, K, C and chunk; what follows
// the batch (the scale g, lq, the CSRs) is written straight into the op
// upload's pinned space (loss.cuh's op_words) and goes up in one copy, its
// layout fixed by them, the bucket counts read on the device. No float
// atomics: the same inputs give the same bits.
//
// Budgets (nvcc -Xptxas -v, sm_90; every kernel __launch_bounds__(256)):
//   spair_kernel         30 registers
//   sentry_kernel        40 registers
//   total_kernel         16 registers, 2 KiB static shared (256 doubles)
//   prepare_kernel       18 registers
//   srow_kernel          32 registers
//   sdh_distinct_kernel  20 registers
//   sdh_walk_kernel      29 registers
//   dbk_kernel           32 registers
//   (loss.cuh: gather 18, count 16, bucket 40 with dbias)
// no spills, no local memory (cuda.mk's -warn-spills,-warn-lmem-usage).
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "loss.cuh"

// What varies between the five ops.
struct samp_kind {
    int softmax;       // 1: 10b's and 10c's softmax; 0: gBCE
    int keep_hits;     // 10b: a negative equal to the positive is a term of its own
    const float *bias; // per-item logit bias (device), or NULL; dbias its gradient
    float *dbias;
    const float *lq;   // softmax: the host's corrections, or NULL
    float beta;        // gBCE: the positive's weight
    float scale;       // each entry's loss times this (gBCE: 1 / (K + 1))
};

// Whether slot k (-1: the positive) of an entry with positive p takes part
// (keep: 10b, accidental hits are not masked).
static __device__ __forceinline__ int slot_used(int p, int item, int k, int keep)
{
    return p && item && (k < 0 || keep || item != p);
}

// Warp sum of doubles, a fixed tree (every lane gets the same bits).
static __device__ inline double warp_sum_d(double v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// acc[0] = ((first ? 0 : acc[0]) + the sum of x[0, n)) * mul, x floats (xf)
// or doubles (xd), in double in a fixed order.
static __global__ __launch_bounds__(LOSS_THREADS) void total_kernel(double *acc,
                                                                    const float *xf,
                                                                    const double *xd, int n,
                                                                    int first, float mul)
{
    __shared__ double sh[LOSS_THREADS];
    double s = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        s += xf ? (double)xf[i] : xd[i];
    s = be_block_sum_d(s, sh);
    if (threadIdx.x == 0)
        acc[0] = ((first ? 0.0 : acc[0]) + s) * (double)mul;
}

// ---------------------------------------------------------------------------
// Per entry (10c, 10d)

// One warp per pair q = i (K+1) + k+1 (k = -1: the positive pos[i], else
// neg[i K + k]): s = h_row . E_item (+ bias) (- lq[i K + k], a negative).
// Softmax: s into coef[q], for the entry kernel; gBCE: its loss term and
// coefficient (the CPU's: g (sigmoid(s) - [positive]), times beta for the
// positive). Both 0 for a pair the CPU skips.
static __global__ __launch_bounds__(LOSS_THREADS) void spair_kernel(
    float *coef, float *term, const float *h, const float *E, const float *bias,
    const int *rows, const int *pos, const int *neg, const float *lq, int n, int K, int C,
    int softmax, int keep, float beta, const float *gp)
{
    int lane = threadIdx.x % 32;
    long long q = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    if (q >= (long long)n * (K + 1))
        return; // the whole warp: q is the same on its lanes
    int i = (int)(q / (K + 1)), k = (int)(q % (K + 1)) - 1, p = pos[i];
    int item = k < 0 ? p : neg[(size_t)i * K + k];
    if (!slot_used(p, item, k, keep)) {
        if (lane == 0) {
            coef[q] = 0.0f;
            if (!softmax)
                term[q] = 0.0f;
        }
        return;
    }
    const float *hi = h + (size_t)(rows ? rows[i] : i) * C, *e = E + (size_t)item * C;
    float s = warp_dot(hi, e, C, lane);
    if (lane != 0)
        return;
    if (bias)
        s += bias[item];
    if (k >= 0 && lq)
        s -= lq[(size_t)i * K + k];
    if (softmax) {
        coef[q] = s;
        return;
    }
    float g = *gp, ds = g * (sigmoid_f(s) - (k < 0 ? 1.0f : 0.0f));
    term[q] = k < 0 ? beta * softplus_f(-s) : softplus_f(s);
    coef[q] = k < 0 ? ds * beta : ds;
}

// One warp per entry i (softmax), its logits in coef[i (K+1) ..] on entry:
// lse = max + log(sum of exp(s - max)) in double over the positive and the
// negatives in use, loss[i] = lse - s_p (0 without a target) and, with
// grad, coef = g (exp(s - lse) - [positive]) in place (0 where unused).
static __global__ __launch_bounds__(LOSS_THREADS) void sentry_kernel(
    float *coef, double *loss, const int *pos, const int *neg, int n, int K, const float *gp,
    int grad, int keep)
{
    int lane = threadIdx.x % 32;
    long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    if (i >= n)
        return;
    int p = pos[i];
    if (!p) { // its coefficients are 0 already
        if (lane == 0)
            loss[i] = 0;
        return;
    }
    float *ci = coef + (size_t)i * (K + 1);
    const int *ni = neg + (size_t)i * K;
    float sp = ci[0], mx = sp;
    for (int k = lane; k < K; k += 32)
        if (slot_used(p, ni[k], k, keep))
            mx = fmaxf(mx, ci[k + 1]);
    mx = be_warp_max(mx);
    double sum = lane == 0 ? exp((double)sp - (double)mx) : 0.0;
    for (int k = lane; k < K; k += 32)
        if (slot_used(p, ni[k], k, keep))
            sum += exp((double)ci[k + 1] - (double)mx);
    sum = warp_sum_d(sum); // every lane has read its logits
    double lse = (double)mx + log(sum);
    if (lane == 0)
        loss[i] = lse - (double)sp;
    if (!grad)
        return;
    float g = *gp;
    for (int j = lane; j <= K; j += 32) { // slot j - 1
        if (j && !slot_used(p, ni[j - 1], j - 1, keep))
            continue;
        float pr = (float)exp((double)ci[j] - lse);
        ci[j] = g * (pr - (j ? 0.0f : 1.0f));
    }
}

// The entries with a target (*count, *cnt); 0 when the op has nothing to
// queue: none, eagerly (a graph's step queues its launches whatever the
// batch), or the sticky error.
static int sampled_begin(sq_gpu_be *be, const int *pos, int n, int *count, int *cnt)
{
    *count = *cnt = count_nonzero(be, pos, n);
    return !be->failed && (*cnt > 0 || be->gmode != BE_G_EAGER);
}

// 10c and 10d per entry.
static double sampled_entries(sq_gpu_be *be, float *dh, float *dE, const float *h,
                              const float *E, const int *rows, const int *pos, const int *neg,
                              int n, int K, int C, float dloss, int *count, const samp_kind *sk)
{
    int cnt = 0;
    if (!sampled_begin(be, pos, n, count, &cnt))
        return 0;
    int grad = dh && dE;
    // the CPU's float; no target in a graph's batch: 0 / 1
    float g = cnt ? dloss * sk->scale / (float)cnt : 0.0f;
    size_t P = (size_t)n * (K + 1), nlq = sk->lq ? (size_t)n * K : 0;
    // one upload, its layout fixed by n, K and the kind (words): the
    // entries' losses (softmax, doubles first) or the pairs' loss terms,
    // the pairs' coefficients, g, the corrections, then (grad) the CSRs
    size_t at_coef = sk->softmax ? 2 * (size_t)n : P, at_g = at_coef + P;
    size_t at_lq = at_g + 1, at_plan = at_lq + nlq;
    size_t words = at_plan + (grad ? pair_plan_ints(n, K) : 0);
    int *dev = NULL, *hbuf = op_words(be, words, &dev);
    if (!hbuf)
        return 0;
    int *own[3] = {NULL, NULL, NULL};
    pair_plan pl;
    memset(&pl, 0, sizeof pl);
    int bad = grad && pair_plan_ids(be, &pl, hbuf + at_plan, rows, pos, neg, n, K,
                                    !sk->keep_hits, own);
    int ok = !op_send_words(be, hbuf, dev, words, bad, at_g, g, sk->lq, nlq);
    if (ok) {
        float *coef = (float *)(dev + at_coef), *term = (float *)dev;
        const float *dg = (const float *)(dev + at_g);
        const float *dlq = nlq ? (const float *)(dev + at_lq) : NULL;
        const int *drows = rows ? be_ints(be, rows) : NULL, *dpos = be_ints(be, pos);
        const int *dneg = K ? be_ints(be, neg) : NULL;
        SQ_LAUNCH(be, spair_kernel, be_blocks(P * 32, LOSS_THREADS), LOSS_THREADS, 0, coef,
                  sk->softmax ? (float *)NULL : term, h, E, sk->bias, drows, dpos, dneg, dlq, n,
                  K, C, sk->softmax, sk->keep_hits, sk->beta, dg);
        if (sk->softmax) {
            double *loss = (double *)dev;
            SQ_LAUNCH(be, sentry_kernel, be_blocks((size_t)n * 32, LOSS_THREADS), LOSS_THREADS,
                      0, coef, loss, dpos, dneg, n, K, dg, grad, sk->keep_hits);
            SQ_LAUNCH(be, total_kernel, 1, LOSS_THREADS, 0, be->red, (const float *)NULL,
                      (const double *)loss, n, 1, sk->scale);
        } else {
            SQ_LAUNCH(be, total_kernel, 1, LOSS_THREADS, 0, be->red, (const float *)term,
                      (const double *)NULL, (int)P, 1, sk->scale);
        }
        if (grad)
            pair_plan_scatter(be, &pl, hbuf + at_plan, dev + at_plan, (int)P, dh, dE, sk->dbias,
                              h, E, coef, C);
    }
    free_ids(own);
    return ok ? be_result(be, 0, cnt ? cnt : 1) : 0;
}

double be_ce_sampled(sq_gpu_be *be, float *dh, float *dE, const float *h, const float *E,
                     const int *rows, const int *pos, const int *neg, int n, int K, int C,
                     float dloss, int *count)
{
    samp_kind sk = {1, 1, NULL, NULL, NULL, 1.0f, 1.0f};
    return sampled_entries(be, dh, dE, h, E, rows, pos, neg, n, K, C, dloss, count, &sk);
}

double be_ce_sampled_logq(sq_gpu_be *be, float *dh, float *dE, float *dbias, const float *h,
                          const float *E, const float *bias, const int *rows, const int *pos,
                          const int *neg, const float *lq, int n, int K, int C, float dloss,
                          int *count)
{
    samp_kind sk = {1, 0, bias, dbias, lq, 1.0f, 1.0f};
    return sampled_entries(be, dh, dE, h, E, rows, pos, neg, n, K, C, dloss, count, &sk);
}

double be_gbce_sampled(sq_gpu_be *be, float *dh, float *dE, float *dbias, const float *h,
                       const float *E, const float *bias, const int *rows, const int *pos,
                       const int *neg, int n, int K, int C, float beta, float dloss, int *count)
{
    samp_kind sk = {0, 0, bias, dbias, NULL, beta, 1.0f / (float)(K + 1)};
    return sampled_entries(be, dh, dE, h, E, rows, pos, neg, n, K, C, dloss, count, &sk);
}

// ---------------------------------------------------------------------------
// One set shared by the entries (10e)

// E_neg[k] = E[neg[k]], add[k] = b_nk - lq[k] (a thread an element).
static __global__ __launch_bounds__(LOSS_THREADS) void prepare_kernel(
    float *En, float *add, const float *E, const float *bias, const int *neg, const float *lq,
    int K, int C)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)K * C)
        return;
    int k = (int)(i / C), c = (int)(i % C);
    En[i] = E[(size_t)neg[k] * C + c];
    if (c == 0)
        add[k] = (bias ? bias[neg[k]] : 0.0f) - (lq ? lq[k] : 0.0f);
}

// One warp per row r of the chunk (entry pos[r], its logits against the set
// in S[r] on entry, its gathered h in hc[r]): s_p = hc_r . E_p + b_p, the
// row's loss (rowloss[r], in float as the CPU's) and, with grad, the
// dlogits in S[r] (masked slots 0) and the positive's in dsp[r]. Slots of
// item 0 or the positive are masked. The CPU's shared_ssm_row and
// shared_gbce_row, with expf and log1pf, the sums in double.
static __global__ __launch_bounds__(LOSS_THREADS) void srow_kernel(
    float *S, float *rowloss, float *dsp, const float *hc, const float *E, const float *bias,
    const float *add, const int *pos, const int *neg, int m, int K, int C, int softmax,
    float beta, const float *gp, int grad)
{
    int lane = threadIdx.x % 32;
    long long r = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    if (r >= m)
        return;
    int p = pos[r];
    float *lr = S + (size_t)r * K;
    if (!p) { // rides along with zero gradient
        for (int k = lane; k < K; k += 32)
            lr[k] = 0.0f;
        if (lane == 0)
            rowloss[r] = dsp[r] = 0.0f;
        return;
    }
    const float *hr = hc + (size_t)r * C, *ep = E + (size_t)p * C;
    float sp = 0.0f;
    for (int c = lane; c < C; c += 32)
        sp += hr[c] * ep[c];
    sp = be_warp_sum(sp);
    if (bias)
        sp += bias[p];
    float g = *gp;
    if (softmax) {
        float mx = sp;
        for (int k = lane; k < K; k += 32) {
            float v = lr[k] + add[k];
            lr[k] = v;
            if (neg[k] && neg[k] != p)
                mx = fmaxf(mx, v);
        }
        mx = be_warp_max(mx);
        double sum = 0;
        for (int k = lane; k < K; k += 32) {
            float e = neg[k] && neg[k] != p ? expf(lr[k] - mx) : 0.0f;
            lr[k] = e;
            sum += e;
        }
        sum = warp_sum_d(sum);
        float epos = (float)exp((double)sp - (double)mx);
        sum += epos;
        double lse = (double)mx + log(sum);
        if (lane == 0)
            rowloss[r] = (float)(lse - (double)sp);
        if (!grad)
            return;
        float inv = (float)(g / sum);
        for (int k = lane; k < K; k += 32)
            lr[k] *= inv;
        if (lane == 0)
            dsp[r] = g * ((float)(epos / sum) - 1.0f);
        return;
    }
    double acc = 0;
    for (int k = lane; k < K; k += 32) {
        float s = lr[k] + add[k], e = expf(-fabsf(s));
        int used = neg[k] && neg[k] != p;
        lr[k] = used ? g * (s >= 0 ? 1.0f : e) / (1.0f + e) : 0.0f;
        acc += used ? (s > 0 ? s : 0.0f) + log1pf(e) : 0.0f;
    }
    acc = warp_sum_d(acc);
    if (lane == 0) {
        rowloss[r] = (float)((double)(beta * softplus_f(-sp)) + acc);
        if (grad)
            dsp[r] = g * beta * (sigmoid_f(sp) - 1.0f);
    }
}

// dh[row e] += dhc[r] + dsp[e] E[pos[e]] over the chunk's entries e = e0 +
// r with a target (the CPU's two axpys): one thread an element where the
// rows are distinct ...
static __global__ __launch_bounds__(LOSS_THREADS) void sdh_distinct_kernel(
    float *dh, const float *dhc, const float *dsp, const float *E, const int *rows,
    const int *pos, int e0, int m, int C)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)m * C)
        return;
    int r = (int)(i / C), c = (int)(i % C), e = e0 + r, p = pos[e];
    if (p)
        dh[(size_t)(rows ? rows[e] : e) * C + c] += dhc[i] + dsp[e] * E[(size_t)p * C + c];
}

// ... else one thread a column walking the entries in order.
static __global__ __launch_bounds__(LOSS_THREADS) void sdh_walk_kernel(
    float *dh, const float *dhc, const float *dsp, const float *E, const int *rows,
    const int *pos, int e0, int m, int C)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C)
        return;
    for (int r = 0; r < m; r++) {
        int e = e0 + r, p = pos[e];
        if (p)
            dh[(size_t)(rows ? rows[e] : e) * C + c] +=
                dhc[(size_t)r * C + c] + dsp[e] * E[(size_t)p * C + c];
    }
}

// dbk[k] += S[r][k] over the chunk's rows with a target, in order.
static __global__ __launch_bounds__(LOSS_THREADS) void dbk_kernel(float *dbk, const float *S,
                                                                  const int *pos, int m, int K)
{
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= K)
        return;
    float acc = dbk[k];
    for (int r = 0; r < m; r++)
        if (pos[r])
            acc += S[(size_t)r * K + k];
    dbk[k] = acc;
}

// The scratch of a shared op, carved as the CPU's (ops.c shared_carve).
struct shared_work {
    float *En, *dEn, *add, *dbk, *S, *hc, *dhc, *rowloss;
};

static shared_work shared_carve(float *s, int chunk, int K, int C)
{
    size_t KC = (size_t)K * C, mC = (size_t)chunk * C;
    shared_work w;
    w.En = s;
    w.dEn = s + KC;
    w.add = s + 2 * KC;
    w.dbk = w.add + K;
    w.S = w.dbk + K;
    w.hc = w.S + (size_t)chunk * K;
    w.dhc = w.hc + mC;
    w.rowloss = w.dhc + mC;
    return w;
}

// The host plans of a shared op: the entries' positives by item (source
// their row of h, coefficient dsp[e]) and the set's slots by item.
struct shared_plan {
    bucketing pos, set;
};

static int shared_plan_make(shared_plan *pl, int *ints, const int *hrows, const int *hpos,
                            const int *hneg, int n, int K)
{
    int M = n > K ? n : K, L = 0, mx = 0;
    int *buf = (int *)malloc(sizeof(int) * (3 * (size_t)M + 1));
    if (!buf)
        return -1;
    int *lp = buf, *key = buf + M, *src = buf + 2 * (size_t)M;
    for (int e = 0; e < n; e++)
        if (hpos[e]) {
            lp[L] = e;
            key[L] = hpos[e];
            src[L++] = hrows ? hrows[e] : e;
            mx = hpos[e] > mx ? hpos[e] : mx;
        }
    int rc = bucket_pairs(&pl->pos, key, src, lp, L, n, mx + 1, ints);
    L = mx = 0;
    for (int k = 0; k < K; k++)
        if (hneg[k]) {
            lp[L] = k;
            key[L] = hneg[k];
            src[L++] = k;
            mx = hneg[k] > mx ? hneg[k] : mx;
        }
    if (!rc)
        rc = bucket_pairs(&pl->set, key, src, lp, L, K, mx + 1, ints + bucket_ints(n));
    free(buf);
    return rc;
}

// A chunk of m entries from e0: gather, logits, rows, loss, backward.
struct shared_call {
    float *dh;
    const float *h, *E;
    const int *drows, *dpos, *dneg;
    int n, K, C, grad, distinct;
    const float *dg;
    float *dsp;
};

static void shared_chunk(sq_gpu_be *be, const shared_call *sc, const shared_work *w,
                         const samp_kind *sk, int e0, int m)
{
    int K = sc->K, C = sc->C, last = e0 + m >= sc->n;
    gather_rows(be, w->hc, sc->h, sc->drows, sc->dpos, e0, m, C);
    be_gemm(be, 0, 1, m, K, C, 1.0f, w->hc, C, w->En, C, 0.0f, w->S, K);
    SQ_LAUNCH(be, srow_kernel, be_blocks((size_t)m * 32, LOSS_THREADS), LOSS_THREADS, 0, w->S,
              w->rowloss, sc->dsp + e0, w->hc, sc->E, sk->bias, (const float *)w->add,
              sc->dpos + e0, sc->dneg, m, K, C, sk->softmax, sk->beta, sc->dg, sc->grad);
    SQ_LAUNCH(be, total_kernel, 1, LOSS_THREADS, 0, be->red, (const float *)w->rowloss,
              (const double *)NULL, m, e0 == 0, last ? sk->scale : 1.0f);
    if (!sc->grad)
        return;
    be_gemm(be, 0, 0, m, C, K, 1.0f, w->S, K, w->En, C, 0.0f, w->dhc, C);
    be_gemm(be, 1, 0, K, C, m, 1.0f, w->S, K, w->hc, C, 1.0f, w->dEn, C);
    if (sc->distinct)
        SQ_LAUNCH(be, sdh_distinct_kernel, be_blocks((size_t)m * C, LOSS_THREADS), LOSS_THREADS,
                  0, sc->dh, (const float *)w->dhc, (const float *)sc->dsp, sc->E, sc->drows,
                  sc->dpos, e0, m, C);
    else
        SQ_LAUNCH(be, sdh_walk_kernel, be_blocks(C, LOSS_THREADS), LOSS_THREADS, 0, sc->dh,
                  (const float *)w->dhc, (const float *)sc->dsp, sc->E, sc->drows, sc->dpos, e0,
                  m, C);
    if (sk->dbias)
        SQ_LAUNCH(be, dbk_kernel, be_blocks(K, LOSS_THREADS), LOSS_THREADS, 0, w->dbk,
                  (const float *)w->S, sc->dpos + e0, m, K);
}

// 10e: 10c and 10d with neg[K] (and lq[K]) shared by the n entries.
static double sampled_shared(sq_gpu_be *be, float *dh, float *dE, float *scratch,
                             const float *h, const float *E, const int *rows, const int *pos,
                             const int *neg, int n, int K, int C, int chunk, float dloss,
                             int *count, const samp_kind *sk)
{
    int cnt = 0, graph = be->gmode != BE_G_EAGER;
    if (!sampled_begin(be, pos, n, count, &cnt))
        return 0;
    int grad = dh && dE;
    float g = cnt ? dloss * sk->scale / (float)cnt : 0.0f;
    // one upload (words), its layout fixed by n, K and the kind: the
    // entries' positive dlogits dsp [n], g, lq [K], then (grad) the plans
    size_t nlq = sk->lq ? (size_t)K : 0, at_g = (size_t)n, at_lq = at_g + 1;
    size_t at_plan = at_lq + nlq;
    size_t words = at_plan + (grad ? bucket_ints(n) + bucket_ints(K) : 0);
    int *dev = NULL, *hbuf = op_words(be, words, &dev);
    if (!hbuf)
        return 0;
    int *own_rows = NULL, *own_pos = NULL, *own_neg = NULL;
    const int *hrows = NULL, *hpos = NULL;
    shared_plan pl;
    memset(&pl, 0, sizeof pl);
    int bad = 0;
    if (grad) {
        hrows = host_ids(be, rows, (size_t)n, &own_rows);
        hpos = host_ids(be, pos, (size_t)n, &own_pos);
        const int *hneg = host_ids(be, neg, (size_t)K, &own_neg);
        bad = (rows && !hrows) || !hpos || !hneg ||
              shared_plan_make(&pl, hbuf + at_plan, hrows, hpos, hneg, n, K) != 0;
    }
    int ok = !op_send_words(be, hbuf, dev, words, bad, at_g, g, sk->lq, nlq);
    if (ok) {
        shared_work w = shared_carve(scratch, chunk, K, C);
        shared_call sc = {dh, h, E, rows ? be_ints(be, rows) : NULL, be_ints(be, pos),
                          be_ints(be, neg), n, K, C, grad,
                          !rows || (hrows && hpos && rows_increasing(hrows, hpos, n)),
                          (const float *)(dev + at_g), (float *)dev};
        SQ_LAUNCH(be, prepare_kernel, be_blocks((size_t)K * C, LOSS_THREADS), LOSS_THREADS, 0,
                  w.En, w.add, E, sk->bias, sc.dneg, nlq ? (const float *)(dev + at_lq) : NULL,
                  K, C);
        if (grad) {
            be_memset_async(be, w.dEn, 0, (size_t)K * C * sizeof(float), "sampled: dE_neg");
            be_memset_async(be, w.dbk, 0, (size_t)K * sizeof(float), "sampled: dbias_neg");
        }
        for (int e0 = 0; e0 < n; e0 += chunk)
            shared_chunk(be, &sc, &w, sk, e0, n - e0 < chunk ? n - e0 : chunk);
        if (grad && (pl.pos.nb > 0 || graph)) {
            const int *d = dev + at_plan;
#define DEV(p) (d + ((p) - (hbuf + at_plan)))
            SQ_LAUNCH(be, bucket_kernel, graph ? n : pl.pos.nb, LOSS_THREADS, 0, dE, sk->dbias,
                      h, (const float *)sc.dsp, (const float *)sc.dsp, DEV(pl.pos.start),
                      DEV(pl.pos.dest), DEV(pl.pos.pair), DEV(pl.pos.src), DEV(pl.pos.src + n),
                      C);
            // the set's slots by item: dE row += their dE_neg rows (weight
            // 1), dbias += their dbk, slots in order (pair = src = slot)
            SQ_LAUNCH(be, bucket_kernel, graph ? K : pl.set.nb, LOSS_THREADS, 0, dE, sk->dbias,
                      (const float *)w.dEn, (const float *)NULL, (const float *)w.dbk,
                      DEV(pl.set.start), DEV(pl.set.dest), DEV(pl.set.pair), DEV(pl.set.src),
                      DEV(pl.set.src + K), C);
#undef DEV
        }
    }
    free(own_rows);
    free(own_pos);
    free(own_neg);
    return ok ? be_result(be, 0, cnt ? cnt : 1) : 0;
}

double be_ce_sampled_shared(sq_gpu_be *be, float *dh, float *dE, float *dbias, float *scratch,
                            const float *h, const float *E, const float *bias, const int *rows,
                            const int *pos, const int *neg, const float *lq, int n, int K,
                            int C, int chunk, float dloss, int *count)
{
    samp_kind sk = {1, 0, bias, dbias, lq, 1.0f, 1.0f};
    return sampled_shared(be, dh, dE, scratch, h, E, rows, pos, neg, n, K, C, chunk, dloss,
                          count, &sk);
}

double be_gbce_sampled_shared(sq_gpu_be *be, float *dh, float *dE, float *dbias,
                              float *scratch, const float *h, const float *E, const float *bias,
                              const int *rows, const int *pos, const int *neg, int n, int K,
                              int C, int chunk, float beta, float dloss, int *count)
{
    samp_kind sk = {0, 0, bias, dbias, NULL, beta, 1.0f / (float)(K + 1)};
    return sampled_shared(be, dh, dE, scratch, h, E, rows, pos, neg, n, K, C, chunk, dloss,
                          count, &sk);
}
