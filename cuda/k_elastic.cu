// k_elastic.cu - ELASTIC's own ops, the GPU twins of
//   ops.c's sq_segmean_forward/backward (the mean of each packed segment's
//     rows, ELASTIC's mean query);
//   attn_cross.c's sq_cross_attention_forward/backward (queries of one
//     packed set over the keys and values of the same segment of another:
//     the dispatcher's two attentions; attn_cross.h);
//   pkm.c's sq_pkm_forward/backward (product-key top-k retrieval of the
//     interest experts; pkm.h).
//
// First form, correct before fast: a thread per output row or column,
// each doing the CPU's loop in the CPU's order with real.h's 8-lane dot
// (be_dot8) and --fmad=false, so every sum is the CPU's; only the softmax's
// expf is CUDA's (within 2 ulp of the C library's). The top-k selection
// compares the same float scores under the same order (score, then index),
// so the GPU retrieves the CPU's experts. No atomics: two runs, the same
// bits.
//
// cross attention: the forward is a thread per (query row, head) writing
// its probability row and output; the backward a thread per (query row,
// head) for dq and one per (key row, head) for dk and dv, each summing the
// other set's rows in order (the CPU interleaves the three sums, each
// element's terms in the same order). dq must not share elements with dk
// or dv (ELASTIC's calls never do; the self-attention form of attn_cross.h
// is the CPU's only).
// pkm: the forward is a thread per query (its sub-key lists in shared
// memory; the CPU's work groups only share its scratch slots), the backward
// a thread per query for its g and dq, then a block per target row of dE,
// dC1 and dC2 with a thread per column, adding the entries that hit the
// row in order (b then m: the CPU's order, its bits).
//
// Budget: __launch_bounds__(256), registers for the dot's 8 partial sums;
// shared memory: the forward's lists (at most 48 KiB), the scatter's 1 KiB
// of staged experts.
#include "common.cuh"

#define EL_THREADS 256

// ------------------------------------------------------------------------
// Segment means

// thread (b, c): out_b[c] = (sum of the segment's rows in order) * (1 / n)
static __global__ __launch_bounds__(EL_THREADS) void k_segmean_fwd(float *out, const float *inp,
                                                                   const int *off, int B, int C)
{
    size_t id = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= (size_t)B * C)
        return;
    int b = (int)(id / C), c = (int)(id % C), n = off[b + 1] - off[b];
    float o = 0;
    for (int t = off[b]; t < off[b + 1]; t++)
        o += inp[(size_t)t * C + c];
    float s = n > 0 ? 1.0f / (float)n : 0.0f;
    out[id] = o * s;
}

// thread (t, c): dinp_t[c] += (1 / n) dout_b[c]
static __global__ __launch_bounds__(EL_THREADS) void k_segmean_bwd(float *dinp,
                                                                   const float *dout,
                                                                   const int *off, int B, int T,
                                                                   int C)
{
    size_t id = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= (size_t)T * C)
        return;
    int t = (int)(id / C), c = (int)(id % C), b = be_seg_of(off, B, t);
    float s = 1.0f / (float)(off[b + 1] - off[b]);
    dinp[id] += s * dout[(size_t)b * C + c];
}

void be_segmean_forward(sq_gpu_be *be, float *out, const float *inp, const int *off, int B,
                        int C)
{
    if (be_staged_rows(be, off, B, "segmean_forward: off not staged") < 0 || B == 0 || C < 1)
        return;
    SQ_LAUNCH(be, k_segmean_fwd, be_blocks((size_t)B * C, EL_THREADS), EL_THREADS, 0, out, inp,
              be_ints(be, off), B, C);
}

void be_segmean_backward(sq_gpu_be *be, float *dinp, const float *dout, const int *off, int B,
                         int C)
{
    int T = be_staged_rows(be, off, B, "segmean_backward: off not staged");
    if (T <= 0 || C < 1)
        return;
    SQ_LAUNCH(be, k_segmean_bwd, be_blocks((size_t)T * C, EL_THREADS), EL_THREADS, 0, dinp,
              dout, be_ints(be, off), B, T, C);
}

// ------------------------------------------------------------------------
// Cross attention

// attn_cross.c's xatt_base: where segment b's probability blocks start
static __device__ size_t xa_base(const int *offq, const int *offk, int b, int H)
{
    size_t n = 0;
    for (int i = 0; i < b; i++)
        n += (size_t)(offq[i + 1] - offq[i]) * (size_t)(offk[i + 1] - offk[i]);
    return n * (size_t)H;
}

// thread (query row r, head h): its probabilities over the segment's keys
// and its output (a zero row without keys)
static __global__ __launch_bounds__(EL_THREADS) void k_xatt_fwd(
    float *out, float *att, const float *q, int ldq, const int *offq, const float *k,
    const float *v, int ldk, const int *offk, int B, int Tq, int H, int C, float scale)
{
    size_t id = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= (size_t)Tq * H)
        return;
    int r = (int)(id / H), h = (int)(id % H), hs = C / H, b = be_seg_of(offq, B, r);
    int i = r - offq[b], nq = offq[b + 1] - offq[b], ok = offk[b], nk = offk[b + 1] - offk[b];
    float *oi = out + (size_t)r * C + h * hs;
    if (nk == 0) {
        for (int d = 0; d < hs; d++)
            oi[d] = 0;
        return;
    }
    float *arow = att + xa_base(offq, offk, b, H) + (size_t)h * nq * nk + (size_t)i * nk;
    const float *qi = q + (size_t)r * ldq + h * hs;
    const float *kh = k + (size_t)ok * ldk + h * hs, *vh = v + (size_t)ok * ldk + h * hs;
    for (int j = 0; j < nk; j++)
        arow[j] = scale * be_dot8(qi, kh + (size_t)j * ldk, hs);
    be_softmax_row(arow, nk);
    for (int d = 0; d < hs; d++)
        oi[d] = 0;
    for (int j = 0; j < nk; j++)
        for (int d = 0; d < hs; d++)
            oi[d] += arow[j] * vh[(size_t)j * ldk + d];
}

// thread (query row r, head h): dq_r += sum_j ds_rj k_j, keys in order
static __global__ __launch_bounds__(EL_THREADS) void k_xatt_dq(
    float *dq, const float *dout, const float *out, int ldq, const int *offq, const float *k,
    const float *v, int ldk, const int *offk, const float *att, int B, int Tq, int H, int C,
    float scale)
{
    size_t id = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= (size_t)Tq * H)
        return;
    int r = (int)(id / H), h = (int)(id % H), hs = C / H, b = be_seg_of(offq, B, r);
    int i = r - offq[b], nq = offq[b + 1] - offq[b], ok = offk[b], nk = offk[b + 1] - offk[b];
    if (nk == 0)
        return;
    const float *arow = att + xa_base(offq, offk, b, H) + (size_t)h * nq * nk + (size_t)i * nk;
    const float *doi = dout + (size_t)r * C + h * hs;
    float *dqi = dq + (size_t)r * ldq + h * hs;
    float rowdot = be_dot8(doi, out + (size_t)r * C + h * hs, hs);
    for (int j = 0; j < nk; j++) {
        size_t kr = (size_t)(ok + j) * ldk + h * hs;
        float ds = scale * arow[j] * (be_dot8(doi, v + kr, hs) - rowdot);
        for (int d = 0; d < hs; d++)
            dqi[d] += ds * k[kr + d];
    }
}

// thread (key row r, head h): dv_r += sum_i p_ir dout_i, dk_r += sum_i ds_ir
// q_i, queries in order
static __global__ __launch_bounds__(EL_THREADS) void k_xatt_dkv(
    float *dk, float *dv, const float *dout, const float *out, const float *q, int ldq,
    const int *offq, const float *v, int ldk, const int *offk, const float *att, int B, int Tk,
    int H, int C, float scale)
{
    size_t id = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= (size_t)Tk * H)
        return;
    int r = (int)(id / H), h = (int)(id % H), hs = C / H, b = be_seg_of(offk, B, r);
    int j = r - offk[b], oq = offq[b], nq = offq[b + 1] - offq[b], nk = offk[b + 1] - offk[b];
    const float *a = att + xa_base(offq, offk, b, H) + (size_t)h * nq * nk;
    size_t kr = (size_t)r * ldk + h * hs;
    for (int i = 0; i < nq; i++) {
        const float *doi = dout + (size_t)(oq + i) * C + h * hs;
        const float *qi = q + (size_t)(oq + i) * ldq + h * hs;
        float p = a[(size_t)i * nk + j];
        float rowdot = be_dot8(doi, out + (size_t)(oq + i) * C + h * hs, hs);
        float ds = scale * p * (be_dot8(doi, v + kr, hs) - rowdot);
        for (int d = 0; d < hs; d++) {
            dv[kr + d] += p * doi[d];
            dk[kr + d] += ds * qi[d];
        }
    }
}

// The query and key rows of the staged offsets, or -1 (the sticky error).
static int xa_rows(sq_gpu_be *be, const int *offq, const int *offk, int B, int H, int C,
                   int *Tk, const char *what)
{
    const int *hq = be_host_ints(be, offq), *hk = be_host_ints(be, offk);
    if (!hq || !hk || B < 0 || H < 1 || C % H) {
        be_note(be, cudaErrorInvalidValue, what);
        return -1;
    }
    *Tk = hk[B];
    return hq[B];
}

void be_cross_attention_forward(sq_gpu_be *be, float *out, float *att, const float *q, int ldq,
                                const int *offq, const float *k, const float *v, int ldk,
                                const int *offk, int B, int H, int C)
{
    int Tk, Tq = xa_rows(be, offq, offk, B, H, C, &Tk,
                         "cross_attention_forward: offsets not staged, or a bad shape");
    if (Tq <= 0)
        return;
    float scale = 1.0f / sqrtf((float)(C / H));
    SQ_LAUNCH(be, k_xatt_fwd, be_blocks((size_t)Tq * H, EL_THREADS), EL_THREADS, 0, out, att, q,
              ldq, be_ints(be, offq), k, v, ldk, be_ints(be, offk), B, Tq, H, C, scale);
}

void be_cross_attention_backward(sq_gpu_be *be, float *dq, float *dk, float *dv,
                                 const float *dout, const float *out, const float *q, int ldq,
                                 const int *offq, const float *k, const float *v, int ldk,
                                 const int *offk, const float *att, int B, int H, int C)
{
    int Tk, Tq = xa_rows(be, offq, offk, B, H, C, &Tk,
                         "cross_attention_backward: offsets not staged, or a bad shape");
    if (Tq < 0)
        return;
    if (dq == dk || dq == dv) {
        be_note(be, cudaErrorInvalidValue, "cross_attention_backward: dq shares dk or dv");
        return;
    }
    float scale = 1.0f / sqrtf((float)(C / H));
    const int *dq_off = be_ints(be, offq), *dk_off = be_ints(be, offk);
    if (Tq > 0)
        SQ_LAUNCH(be, k_xatt_dq, be_blocks((size_t)Tq * H, EL_THREADS), EL_THREADS, 0, dq, dout,
                  out, ldq, dq_off, k, v, ldk, dk_off, att, B, Tq, H, C, scale);
    if (Tk > 0)
        SQ_LAUNCH(be, k_xatt_dkv, be_blocks((size_t)Tk * H, EL_THREADS), EL_THREADS, 0, dk, dv,
                  dout, out, q, ldq, dq_off, v, ldk, dk_off, att, B, Tk, H, C, scale);
}

// ------------------------------------------------------------------------
// Product-key retrieval

// pkm.c's order: higher score first, then the smaller index
static __device__ __forceinline__ int pk_better(float sa, int ia, float sb, int ib)
{
    return sa > sb || (sa == sb && ia < ib);
}

// pkm.c's sub_insert: (s, i) into the sorted list vs/is (indices as floats)
static __device__ void pk_sub_insert(float *vs, float *is, int *cnt, int k, float s, int i)
{
    int c = *cnt;
    if (c == k && !pk_better(s, i, vs[k - 1], (int)is[k - 1]))
        return;
    int p = c < k ? c : k - 1;
    for (; p > 0 && pk_better(s, i, vs[p - 1], (int)is[p - 1]); p--) {
        vs[p] = vs[p - 1];
        is[p] = is[p - 1];
    }
    vs[p] = s;
    is[p] = (float)i;
    if (c < k)
        *cnt = c + 1;
}

// pkm.c's expert_insert
static __device__ void pk_expert_insert(float *sc, int *ix, int *cnt, int k, float s, int e)
{
    int c = *cnt;
    if (c == k && !pk_better(s, e, sc[k - 1], ix[k - 1]))
        return;
    int p = c < k ? c : k - 1;
    for (; p > 0 && pk_better(s, e, sc[p - 1], ix[p - 1]); p--) {
        sc[p] = sc[p - 1];
        ix[p] = ix[p - 1];
    }
    sc[p] = s;
    ix[p] = e;
    if (c < k)
        *cnt = c + 1;
}

// thread b: query b (pkm.c's select_query and emit_query), its two
// sub-key lists (pkm.c's scratch slot, 4 k floats) in the block's shared
// memory: a thread a query, where the CPU's G work groups share slots
static __global__ __launch_bounds__(EL_THREADS) void k_pkm_fwd(
    float *out, int *idx, float *cache, const float *q, const float *C1, const float *C2,
    const float *E, int B, int n, int d, int k, int weighted)
{
    BE_DYN_SHARED(float, sh);
    int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= B)
        return;
    int h = d / 2;
    float *v1 = sh + (size_t)threadIdx.x * 4 * k, *i1 = v1 + k, *v2 = i1 + k, *i2 = v2 + k;
    size_t r = (size_t)b * k;
    float *sc = cache + r, *w = cache + (size_t)B * k + r;
    int *ix = idx + r;
    const float *qb = q + (size_t)b * d;
    int c1 = 0, c2 = 0, c = 0;
    for (int i = 0; i < n; i++)
        pk_sub_insert(v1, i1, &c1, k, be_dot8(qb, C1 + (size_t)i * h, h), i);
    for (int j = 0; j < n; j++)
        pk_sub_insert(v2, i2, &c2, k, be_dot8(qb + h, C2 + (size_t)j * h, h), j);
    for (int a = 0; a < k; a++) {
        int bb = 0;
        for (; bb < k; bb++) {
            float s = v1[a] + v2[bb];
            if (c == k && s < sc[k - 1])
                break;
            pk_expert_insert(sc, ix, &c, k, s, (int)i1[a] * n + (int)i2[bb]);
        }
        if (bb == 0)
            break;
    }
    for (int m = 0; m < k; m++)
        w[m] = sc[m];
    be_softmax_row(w, k);
    for (int m = 0; m < k; m++) {
        const float *e = E + (size_t)ix[m] * d;
        float *o = out + (r + m) * d;
        for (int cc = 0; cc < d; cc++)
            o[cc] = weighted ? w[m] * e[cc] : e[cc];
    }
}

// thread b (pkm.c's query_grad): g_m = w_m (dout_m . E[ix_m] - mean), dq_b
static __global__ __launch_bounds__(EL_THREADS) void k_pkm_qgrad(
    float *dq, float *gsc, const float *dout, const float *C1, const float *C2, const float *E,
    const int *idx, const float *cache, int B, int n, int d, int k)
{
    int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= B)
        return;
    int h = d / 2;
    size_t r = (size_t)b * k;
    const float *wb = cache + (size_t)B * k + r, *doutb = dout + r * d;
    const int *ix = idx + r;
    float *gb = gsc + r, *dqb = dq + (size_t)b * d;
    float mean = 0;
    for (int m = 0; m < k; m++) {
        gb[m] = be_dot8(doutb + (size_t)m * d, E + (size_t)ix[m] * d, d);
        mean += wb[m] * gb[m];
    }
    for (int m = 0; m < k; m++) {
        gb[m] = wb[m] * (gb[m] - mean);
        int i = ix[m] / n, j = ix[m] % n;
        for (int c = 0; c < h; c++)
            dqb[c] += gb[m] * C1[(size_t)i * h + c];
        for (int c = 0; c < h; c++)
            dqb[h + c] += gb[m] * C2[(size_t)j * h + c];
    }
}

// Block t, a target row: dE's row t (t < n n), dC1's row t - n n or dC2's
// row t - n n - n, a thread a column. The B k entries pass through shared
// memory PK_STAGE at a time; each thread adds the entries that hit its row
// in order (b, then m: the CPU's order, into the row's value: its bits).
// Every block reads every entry's expert, B k n n reads for dE, but no
// thread walks more than the entries (the first form: a thread a column
// of d, each walking every entry's scattered rows: d threads in all).
#define PK_STAGE 256
static __global__ __launch_bounds__(PK_STAGE) void k_pkm_scatter(
    float *dC1, float *dC2, float *dE, const float *gsc, const float *dout, const float *q,
    const int *idx, const float *w, int B, int n, int d, int k)
{
    __shared__ int sidx[PK_STAGE];
    int t = (int)blockIdx.x, M = n * n, h = d / 2, R = B * k, x = (int)threadIdx.x;
    int part = t < M ? 0 : t < M + n ? 1 : 2, row = part == 0 ? t : part == 1 ? t - M : t - M - n;
    int cols = part == 0 ? d : h;
    float *dst = part == 0 ? dE + (size_t)row * d : (part == 1 ? dC1 : dC2) + (size_t)row * h;
    for (int c0 = 0; c0 < cols; c0 += PK_STAGE) {
        int c = c0 + x;
        float acc = c < cols ? dst[c] : 0.0f;
        for (int r0 = 0; r0 < R; r0 += PK_STAGE) {
            __syncthreads(); // the last round's readers are done
            sidx[x] = r0 + x < R ? idx[r0 + x] : -1;
            __syncthreads();
            int nr = R - r0 < PK_STAGE ? R - r0 : PK_STAGE;
            for (int s = 0; c < cols && s < nr; s++) {
                int e = sidx[s];
                if ((part == 0 ? e : part == 1 ? e / n : e % n) != row)
                    continue;
                size_t r = (size_t)(r0 + s);
                if (part == 0)
                    acc += (w ? w[r] : 1.0f) * dout[r * d + c];
                else
                    acc += gsc[r] * q[(r / k) * d + (part == 1 ? c : h + c)];
            }
        }
        if (c < cols)
            dst[c] = acc;
    }
}

void be_pkm_forward(sq_gpu_be *be, float *out, int *idx, float *cache, float *scratch,
                    const float *q, const float *C1, const float *C2, const float *E, int B,
                    int n, int d, int k, int weighted)
{
    (void)scratch; // the sub-key lists live in shared memory
    if (B <= 0 || k <= 0)
        return;
    // threads a block: as many 4 k-float slots as 48 KiB holds, at most 64
    size_t slot = 4 * (size_t)k * sizeof(float);
    int nt = (int)(48 * 1024 / slot);
    nt = nt > 64 ? 64 : nt < 1 ? 1 : nt;
    SQ_LAUNCH(be, k_pkm_fwd, be_blocks((size_t)B, (unsigned)nt), (unsigned)nt,
              (size_t)nt * slot, out, idx, cache, q, C1, C2, E, B, n, d, k, weighted);
}

void be_pkm_backward(sq_gpu_be *be, float *dq, float *dC1, float *dC2, float *dE,
                     float *scratch, const float *dout, const float *q, const float *C1,
                     const float *C2, const float *E, const int *idx, const float *cache, int B,
                     int n, int d, int k, int weighted)
{
    if (B <= 0)
        return;
    const float *w = cache + (size_t)B * k;
    float *g = weighted ? scratch : NULL;
    if (weighted)
        SQ_LAUNCH(be, k_pkm_qgrad, be_blocks((size_t)B, EL_THREADS), EL_THREADS, 0, dq, g, dout,
                  C1, C2, E, idx, cache, B, n, d, k);
    unsigned rows = (unsigned)(n * n + (weighted ? 2 * n : 0)); // dE's, then dC1's and dC2's
    SQ_LAUNCH(be, k_pkm_scatter, rows, PK_STAGE, 0, dC1, dC2, dE, g, dout, q, idx,
              weighted ? w : (const float *)NULL, B, n, d, k);
}
