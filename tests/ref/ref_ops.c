/* ref_ops.c - the naive references of ref_ops.h: each op's definition as
 * plain loops. Slow on purpose; nothing here is shared with lib/ops but the
 * headers' constants and two layout helpers (sq_hconv_offset, where a
 * filter height's weights start; sq_lattn_is_linrec, which kinds are
 * linrec's). */
#include "ref_ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn_pos.h"
#include "conv.h"

typedef long double ldbl;

/* The row of entry i: rows[i], or i when rows is NULL. */
static int row_of(const int *rows, int i)
{
    return rows ? rows[i] : i;
}

static double dot(const double *a, const double *b, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* ------------------------------------------------------------------------ */
/* ops.h                                                                    */

void ref_embedding(double *out, const double *table, const int *ids, int T, int C,
                   double scale)
{
    for (int t = 0; t < T; t++)
        for (int c = 0; c < C; c++)
            out[(size_t)t * C + c] = ids[t] ? scale * table[(size_t)ids[t] * C + c] : 0;
}

void ref_posemb(double *out, const double *inp, const double *pe, const int *pos, int T,
                int C)
{
    for (int t = 0; t < T; t++)
        for (int c = 0; c < C; c++)
            out[(size_t)t * C + c] = inp[(size_t)t * C + c] + pe[(size_t)pos[t] * C + c];
}

void ref_layernorm(double *out, const double *inp, const double *w, const double *b, int T,
                   int C, double eps)
{
    for (int t = 0; t < T; t++) {
        const double *x = inp + (size_t)t * C;
        double mean = 0, var = 0;
        for (int c = 0; c < C; c++)
            mean += x[c];
        mean /= C;
        for (int c = 0; c < C; c++)
            var += (x[c] - mean) * (x[c] - mean);
        var /= C;
        for (int c = 0; c < C; c++)
            out[(size_t)t * C + c] = (x[c] - mean) / sqrt(var + eps) * w[c] + b[c];
    }
}

void ref_linear(double *out, const double *inp, const double *w, const double *b, int T,
                int C, int OC)
{
    for (int t = 0; t < T; t++)
        for (int o = 0; o < OC; o++)
            out[(size_t)t * OC + o] =
                (b ? b[o] : 0) + dot(inp + (size_t)t * C, w + (size_t)o * C, C);
}

void ref_gelu(double *out, const double *inp, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = inp[i] * (1 + erf(inp[i] / sqrt(2.0))) / 2;
}

void ref_relu(double *out, const double *inp, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = inp[i] > 0 ? inp[i] : 0;
}

void ref_dropout(double *out, const double *inp, const uint8_t *mask, size_t n, double p)
{
    for (size_t i = 0; i < n; i++)
        out[i] = mask[i] ? inp[i] / (1 - p) : 0;
}

void ref_residual(double *out, const double *a, const double *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = a[i] + b[i];
}

void ref_attention(double *out, const double *q, const double *k, const double *v, int ld,
                   const int *off, int B, int H, int C, int causal)
{
    int T = off[B], hs = C / H;
    int *seg = malloc((size_t)T * sizeof *seg);
    double *sc = malloc((size_t)T * sizeof *sc);
    for (int b = 0; b < B; b++)
        for (int i = off[b]; i < off[b + 1]; i++)
            seg[i] = b;
    for (int h = 0; h < H; h++)
        for (int i = 0; i < T; i++) {
            double mx = -1e300, sum = 0;
            for (int j = 0; j < T; j++) {
                int ok = seg[j] == seg[i] && (!causal || j <= i);
                sc[j] = -INFINITY;
                if (!ok)
                    continue;
                sc[j] = dot(q + (size_t)i * ld + h * hs, k + (size_t)j * ld + h * hs, hs) /
                        sqrt(hs);
                mx = fmax(mx, sc[j]);
            }
            for (int j = 0; j < T; j++) {
                sc[j] = exp(sc[j] - mx);
                sum += sc[j];
            }
            for (int e = 0; e < hs; e++) {
                double o = 0;
                for (int j = 0; j < T; j++)
                    o += sc[j] / sum * v[(size_t)j * ld + h * hs + e];
                out[(size_t)i * C + h * hs + e] = o;
            }
        }
    free(seg);
    free(sc);
}

double ref_ce_full(const double *h, const double *E, const double *bias, const int *rows,
                   const int *targets, int n, int C, int V1, int *count)
{
    double total = 0;
    *count = 0;
    for (int i = 0; i < n; i++) {
        if (!targets[i])
            continue;
        const double *hi = h + (size_t)row_of(rows, i) * C;
        double lse = 0, ly = 0;
        for (int j = 1; j < V1; j++) {
            double l = dot(hi, E + (size_t)j * C, C) + (bias ? bias[j] : 0);
            lse += exp(l);
            if (j == targets[i])
                ly = l;
        }
        total += log(lse) - ly;
        ++*count;
    }
    return *count ? total / *count : 0;
}

double ref_bce_sampled(const double *h, const double *E, const int *rows, const int *pos,
                       const int *neg, int n, int K, int C, int *count)
{
    double total = 0;
    *count = 0;
    for (int i = 0; i < n; i++) {
        if (!pos[i])
            continue;
        const double *hi = h + (size_t)row_of(rows, i) * C;
        double sp = dot(hi, E + (size_t)pos[i] * C, C);
        total -= log(1 / (1 + exp(-sp)));
        for (int k = 0; k < K; k++) {
            int item = neg[i * K + k];
            if (!item)
                continue;
            double sn = dot(hi, E + (size_t)item * C, C);
            total -= log(1 - 1 / (1 + exp(-sn)));
        }
        ++*count;
    }
    return *count ? total / *count : 0;
}

double ref_ce_sampled(const double *h, const double *E, const int *rows, const int *pos,
                      const int *neg, int n, int K, int C, int *count)
{
    ldbl total = 0;
    *count = 0;
    for (int i = 0; i < n; i++) {
        if (!pos[i])
            continue;
        const double *hi = h + (size_t)row_of(rows, i) * C;
        ldbl sp = 0, z;
        for (int d = 0; d < C; d++)
            sp += (ldbl)hi[d] * E[(size_t)pos[i] * C + d];
        z = expl(sp);
        for (int k = 0; k < K; k++) {
            int item = neg[i * K + k];
            if (!item)
                continue;
            ldbl s = 0;
            for (int d = 0; d < C; d++)
                s += (ldbl)hi[d] * E[(size_t)item * C + d];
            z += expl(s);
        }
        total -= logl(expl(sp) / z);
        ++*count;
    }
    return *count ? (double)(total / *count) : 0;
}

/* h . E_item + bias_item in long double */
static ldbl logit_l(const double *hi, const double *E, const double *bias, int item, int C)
{
    ldbl s = bias ? bias[item] : 0;
    for (int d = 0; d < C; d++)
        s += (ldbl)hi[d] * E[(size_t)item * C + d];
    return s;
}

double ref_ce_sampled_logq(const double *h, const double *E, const double *bias,
                           const int *rows, const int *pos, const int *neg, const float *lq,
                           int n, int K, int C, int *count)
{
    ldbl total = 0;
    *count = 0;
    for (int i = 0; i < n; i++) {
        if (!pos[i])
            continue;
        const double *hi = h + (size_t)row_of(rows, i) * C;
        ldbl sp = logit_l(hi, E, bias, pos[i], C), z = expl(sp);
        for (int k = 0; k < K; k++) {
            int item = neg[i * K + k];
            if (item && item != pos[i])
                z += expl(logit_l(hi, E, bias, item, C) - (ldbl)lq[i * K + k]);
        }
        total -= logl(expl(sp) / z);
        ++*count;
    }
    return *count ? (double)(total / *count) : 0;
}

double ref_gbce_sampled(const double *h, const double *E, const double *bias, const int *rows,
                        const int *pos, const int *neg, int n, int K, int C, double beta,
                        int *count)
{
    ldbl total = 0;
    *count = 0;
    for (int i = 0; i < n; i++) {
        if (!pos[i])
            continue;
        const double *hi = h + (size_t)row_of(rows, i) * C;
        ldbl sig = 1 / (1 + expl(-logit_l(hi, E, bias, pos[i], C))), li = logl(powl(sig, beta));
        for (int k = 0; k < K; k++) {
            int item = neg[i * K + k];
            if (item && item != pos[i])
                li += logl(1 - 1 / (1 + expl(-logit_l(hi, E, bias, item, C))));
        }
        total -= li / (K + 1);
        ++*count;
    }
    return *count ? (double)(total / *count) : 0;
}

void ref_gather_rows(double *out, const double *in, const int *rows, int n, int C)
{
    for (int i = 0; i < n; i++)
        for (int c = 0; c < C; c++)
            out[(size_t)i * C + c] = in[(size_t)row_of(rows, i) * C + c];
}

void ref_scatter_add_rows(double *out, const double *in, const int *rows, int n, int C)
{
    for (int i = 0; i < n; i++)
        for (int c = 0; c < C; c++)
            out[(size_t)row_of(rows, i) * C + c] += in[(size_t)i * C + c];
}

void ref_gemm(int trans_a, int trans_b, int M, int N, int K, double alpha, const double *A,
              int lda, const double *B, int ldb, double beta, double *Cm, int ldc)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k++)
                s += (trans_a ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k]) *
                     (trans_b ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j]);
            double c = beta == 0 ? 0 : beta * Cm[(size_t)i * ldc + j];
            Cm[(size_t)i * ldc + j] = alpha * s + c;
        }
}

/* ------------------------------------------------------------------------ */
/* The other lib/ops headers                                                */

double ref_infonce(const double *h, const int *ra, const int *rb, int U, int C, double tau,
                   int cosine, const int *label)
{
    int M = 2 * U, *row = malloc((size_t)M * sizeof *row);
    for (int i = 0; i < U; i++) {
        row[i] = ra[i];
        row[U + i] = rb[i];
    }
    double L = 0;
    for (int i = 0; i < M; i++) {
        double den = 0, pos = 0;
        for (int k = 0; k < M; k++) {
            const double *hi = h + (size_t)row[i] * C, *hk = h + (size_t)row[k] * C;
            double s = dot(hi, hk, C);
            if (cosine)
                s /= sqrt(dot(hi, hi, C)) * sqrt(dot(hk, hk, C));
            int positive = k == (i + U) % M;
            int same = label && label[k % U] == label[i % U];
            if (k != i && (positive || !same))
                den += exp(s / tau);
            if (positive)
                pos = exp(s / tau);
        }
        L -= log(pos / den);
    }
    free(row);
    return L / M;
}

double ref_bkl(const double *h, const double *E, const int *ra, const int *rb,
               const int *cand, int S, int n, int C, int V1)
{
    int L = cand ? S : V1 - 1;
    ldbl *la = calloc((size_t)L, sizeof *la), *lb = calloc((size_t)L, sizeof *lb);
    ldbl total = 0;
    for (int i = 0; i < n; i++) {
        ldbl ma = -INFINITY, mb = -INFINITY;
        for (int k = 0; k < L; k++) {
            int item = cand ? cand[i * S + k] : k + 1;
            if (!item)
                continue;
            ldbl a = 0, b = 0;
            for (int d = 0; d < C; d++) {
                ldbl e = E[(size_t)item * C + d];
                a += (ldbl)h[(size_t)ra[i] * C + d] * e;
                b += (ldbl)h[(size_t)rb[i] * C + d] * e;
            }
            la[k] = a, lb[k] = b;
            ma = a > ma ? a : ma;
            mb = b > mb ? b : mb;
        }
        ldbl za = 0, zb = 0, D = 0;
        for (int k = 0; k < L; k++)
            if (!cand || cand[i * S + k]) {
                za += expl(la[k] - ma);
                zb += expl(lb[k] - mb);
            }
        for (int k = 0; k < L; k++)
            if (!cand || cand[i * S + k]) {
                ldbl lp = la[k] - ma - logl(za), lq = lb[k] - mb - logl(zb);
                D += (expl(lp) - expl(lq)) * (lp - lq);
            }
        total += D / 2;
    }
    free(la);
    free(lb);
    return (double)(total / n);
}

void ref_attn_cross(double *out, double *att, const double *q, int ldq, const int *offq,
                    const double *k, const double *v, int ldk, const int *offk, int B, int H,
                    int C)
{
    int hs = C / H;
    size_t base = 0;
    for (int b = 0; b < B; b++) {
        int nq = offq[b + 1] - offq[b], nk = offk[b + 1] - offk[b];
        if (nk > 64)
            abort();
        for (int h = 0; h < H; h++)
            for (int i = 0; i < nq; i++) {
                const double *qi = q + (size_t)(offq[b] + i) * ldq + h * hs;
                ldbl s[64], mx = -INFINITY, sum = 0;
                for (int j = 0; j < nk; j++) {
                    const double *kj = k + (size_t)(offk[b] + j) * ldk + h * hs;
                    s[j] = 0;
                    for (int d = 0; d < hs; d++)
                        s[j] += (ldbl)qi[d] * kj[d];
                    s[j] /= sqrtl((ldbl)hs);
                    mx = fmaxl(mx, s[j]);
                }
                for (int j = 0; j < nk; j++)
                    sum += s[j] = expl(s[j] - mx);
                for (int j = 0; j < nk; j++) {
                    s[j] /= sum;
                    att[base + ((size_t)h * nq + i) * nk + j] = (double)s[j];
                }
                for (int d = 0; d < hs; d++) {
                    ldbl o = 0;
                    for (int j = 0; j < nk; j++)
                        o += s[j] * v[(size_t)(offk[b] + j) * ldk + h * hs + d];
                    out[(size_t)(offq[b] + i) * C + h * hs + d] = (double)o;
                }
            }
        base += (size_t)H * nq * nk;
    }
}

static ldbl elu_l(ldbl x)
{
    return x > 0 ? x : expm1l(x);
}

/* linrec's feature map: elu, or the identity (no-elu) */
static ldbl lr_f_l(sq_linrec_variant va, ldbl x)
{
    return va == SQ_LINREC_NO_ELU ? x : elu_l(x);
}

void ref_lattn(sq_lattn_kind kind, double *out, const double *q, const double *k,
               const double *v, int ld, const int *off, int B, int H, int C, int causal)
{
    int hs = C / H;
    const ldbl eps = SQ_LATTN_EPS;
    for (int b = 0; b < B; b++) {
        int o = off[b], L = off[b + 1] - off[b];
        if (L > REF_LATTN_MAXL || hs > REF_LATTN_MAXHS)
            abort();
        for (int h = 0; h < H; h++)
            for (int t = 0; t < L; t++) {
                int n = causal ? t + 1 : L; /* keys 0 .. n-1 */
                ldbl A[REF_LATTN_MAXL] = {0}, den = 0;
                const double *qt = q + (size_t)(o + t) * ld + h * hs;
                sq_linrec_scale sc;
                sq_linrec_variant va;
                if (sq_lattn_is_linrec(kind, &sc, &va)) {
                    int l2 = va != SQ_LINREC_NO_L2;
                    ldbl cq = 1 / sqrtl(hs), ck = 1, nq = 0;
                    if (sc == SQ_LINREC_PAPER)
                        ck = 1 / sqrtl(n);
                    for (int a = 0; a < hs; a++)
                        nq += lr_f_l(va, qt[a]) * lr_f_l(va, qt[a]);
                    nq = l2 ? sqrtl(nq + eps) : 1;
                    for (int a = 0; a < hs; a++) {
                        ldbl z = 0;
                        for (int j = 0; j < n; j++) {
                            ldbl x = lr_f_l(va, k[(size_t)(o + j) * ld + h * hs + a]);
                            z += x * x;
                        }
                        z = l2 ? sqrtl(z + eps) : 1;
                        for (int j = 0; j < n; j++)
                            A[j] += cq * lr_f_l(va, qt[a]) / nq * ck *
                                    lr_f_l(va, k[(size_t)(o + j) * ld + h * hs + a]) / z;
                    }
                } else if (kind == SQ_LATTN_LINEAR) {
                    for (int j = 0; j < n; j++) {
                        for (int a = 0; a < hs; a++)
                            A[j] += (elu_l(qt[a]) + 1) *
                                    (elu_l(k[(size_t)(o + j) * ld + h * hs + a]) + 1);
                        den += A[j];
                    }
                    den += (ldbl)SQ_LATTN_EPS_DEN;
                    for (int j = 0; j < n; j++)
                        A[j] /= den;
                } else if (kind == SQ_LATTN_EFFICIENT) {
                    ldbl p[REF_LATTN_MAXHS], mx = qt[0], sum = 0;
                    for (int a = 1; a < hs; a++)
                        mx = fmaxl(mx, qt[a]);
                    for (int a = 0; a < hs; a++)
                        sum += p[a] = expl(qt[a] - mx);
                    for (int a = 0; a < hs; a++) {
                        const double *kc = k + (size_t)o * ld + h * hs + a;
                        ldbl km = kc[0], ks = 0;
                        for (int j = 1; j < n; j++)
                            km = fmaxl(km, kc[(size_t)j * ld]);
                        for (int j = 0; j < n; j++)
                            ks += expl(kc[(size_t)j * ld] - km);
                        for (int j = 0; j < n; j++)
                            A[j] += p[a] / sum * expl(kc[(size_t)j * ld] - km) / ks;
                    }
                } else { /* hydra: norms over the whole row of C */
                    const double *qr = q + (size_t)(o + t) * ld;
                    ldbl nq = 0;
                    for (int c = 0; c < C; c++)
                        nq += (ldbl)qr[c] * qr[c];
                    nq = sqrtl(nq + eps);
                    for (int j = 0; j < n; j++) {
                        const double *kr = k + (size_t)(o + j) * ld;
                        ldbl nk = 0;
                        for (int c = 0; c < C; c++)
                            nk += (ldbl)kr[c] * kr[c];
                        nk = sqrtl(nk + eps);
                        for (int a = 0; a < hs; a++)
                            A[j] += qr[h * hs + a] / nq * kr[h * hs + a] / nk;
                    }
                }
                for (int e = 0; e < hs; e++) {
                    ldbl s = 0;
                    for (int j = 0; j < n; j++)
                        s += A[j] * v[(size_t)(o + j) * ld + h * hs + e];
                    out[(size_t)(o + t) * C + h * hs + e] = (double)s;
                }
            }
    }
}

void ref_attn_silu(double *out, const double *q, const double *k, const double *v, int ld,
                   const double *rab, const int *off, int B, int H, int dqk, int dv,
                   int max_len, double scale)
{
    for (int b = 0; b < B; b++)
        for (int row = off[b]; row < off[b + 1]; row++)
            for (int h = 0; h < H; h++)
                for (int col = 0; col < dv; col++) {
                    int i = row - off[b];
                    double acc = 0;
                    for (int j = 0; j <= i; j++) {
                        const double *qi = q + (size_t)row * ld + h * dqk;
                        const double *kj = k + (size_t)(off[b] + j) * ld + h * dqk;
                        double s = rab[h * max_len + i - j];
                        for (int d = 0; d < dqk; d++)
                            s += qi[d] * kj[d];
                        double a = scale * s / (1 + exp(-s));
                        acc += a * v[(size_t)(off[b] + j) * ld + h * dv + col];
                    }
                    out[(size_t)row * H * dv + h * dv + col] = acc;
                }
}

void ref_silu(double *out, const double *x, int ld, int rows, int cols)
{
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            double z = x[(size_t)r * ld + c];
            out[(size_t)r * ld + c] = z / (1 + exp(-z));
        }
}

void ref_gate(double *out, const double *a, int lda, const double *b, int ldb, int rows,
              int cols)
{
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            out[(size_t)r * cols + c] = a[(size_t)r * lda + c] * b[(size_t)r * ldb + c];
}

static double sigm(double x)
{
    return 1 / (1 + exp(-x));
}

void ref_gru(double *h, const double *x, const double *wi, const double *wh, const double *bi,
             const double *bh, const int *off, int B, int In, int H)
{
    double *hp = calloc((size_t)H, sizeof *hp), *a = calloc((size_t)6 * H, sizeof *a);
    for (int b = 0; b < B; b++) {
        memset(hp, 0, (size_t)H * sizeof *hp);
        for (int row = off[b]; row < off[b + 1]; row++) {
            for (int g = 0; g < 3 * H; g++) {
                double ai = bi ? bi[g] : 0, ah = bh ? bh[g] : 0;
                for (int k = 0; k < In; k++)
                    ai += wi[(size_t)g * In + k] * x[(size_t)row * In + k];
                for (int k = 0; k < H; k++)
                    ah += wh[(size_t)g * H + k] * hp[k];
                a[g] = ai;
                a[3 * H + g] = ah;
            }
            for (int j = 0; j < H; j++) {
                double r = sigm(a[j] + a[3 * H + j]), z = sigm(a[H + j] + a[4 * H + j]);
                double n = tanh(a[2 * H + j] + r * a[5 * H + j]);
                h[(size_t)row * H + j] = (1 - z) * n + z * hp[j];
            }
            memcpy(hp, h + (size_t)row * H, (size_t)H * sizeof *hp);
        }
    }
    free(hp);
    free(a);
}

void ref_hconv(double *out, int ldo, int *arg, const double *x, const double *w,
               const double *b, int n, int L, int C, int F)
{
    for (int i = 0; i < n; i++)
        for (int h = 1; h <= L; h++)
            for (int f = 0; f < F; f++) {
                const double *wf = w + sq_hconv_offset(h, F, C) + (size_t)f * h * C;
                double best = 0;
                int at = -1;
                for (int p = 0; p + h <= L; p++) {
                    double a = b[(h - 1) * F + f];
                    for (int k = 0; k < h; k++)
                        for (int c = 0; c < C; c++)
                            a += wf[k * C + c] * x[((size_t)i * L + p + k) * C + c];
                    if (at < 0 || a > best) {
                        best = a;
                        at = p;
                    }
                }
                out[(size_t)i * ldo + (h - 1) * F + f] = best > 0 ? best : 0;
                arg[((size_t)i * L + h - 1) * F + f] = best > 0 ? at : -1;
            }
}

void ref_vconv(double *out, int ldo, const double *x, const double *w, const double *b, int n,
               int L, int C, int F)
{
    for (int i = 0; i < n; i++)
        for (int f = 0; f < F; f++)
            for (int c = 0; c < C; c++) {
                double y = b ? b[f] : 0; /* b NULL: no bias */
                for (int k = 0; k < L; k++)
                    y += w[f * L + k] * x[((size_t)i * L + k) * C + c];
                out[(size_t)i * ldo + f * C + c] = y;
            }
}

void ref_dwconv(double *out, const double *x, int ld, const double *w, const double *b, int K,
                const int *off, int B, int C, int causal)
{
    int lo = causal ? K - 1 : (K - 1) / 2;
    for (int sb = 0; sb < B; sb++)
        for (int t = off[sb]; t < off[sb + 1]; t++)
            for (int c = 0; c < C; c++) {
                double y = b ? b[c] : 0;
                for (int k = 0; k < K; k++) {
                    int j = t + k - lo;
                    if (j >= off[sb] && j < off[sb + 1])
                        y += w[(size_t)k * C + c] * x[(size_t)j * ld + c];
                }
                out[(size_t)t * C + c] += y;
            }
}

/* ------------------------------------------------------------------------ */
/* attn_pos.h                                                               */

/* seg[t] = the segment of row t, for t < off[B] (malloc'ed). */
static int *segments(const int *off, int B)
{
    int *seg = malloc((size_t)off[B] * sizeof *seg + 1);
    for (int b = 0; b < B; b++)
        for (int t = off[b]; t < off[b + 1]; t++)
            seg[t] = b;
    return seg;
}

/* Key row j allowed for query row i: the same segment, and p_j <= p_i
 * when causal. */
static int pos_allowed(const int *seg, const int *pos, int i, int j, int causal)
{
    return seg[i] == seg[j] && (!causal || pos[j] <= pos[i]);
}

void ref_pa(double *out, const double *Rw, const double *v, int ld, const int *off,
            const int *pos, int B, int H, int C, int max_len, int causal)
{
    int T = off[B], hs = C / H, n = max_len;
    int *seg = segments(off, B);
    double *w = malloc((size_t)T * sizeof *w + 1);
    for (int h = 0; h < H; h++)
        for (int i = 0; i < T; i++) {
            double mx = -INFINITY, sum = 0;
            for (int j = 0; j < T; j++)
                if (pos_allowed(seg, pos, i, j, causal))
                    mx = fmax(mx, Rw[((size_t)h * n + pos[i]) * n + pos[j]] / sqrt(hs));
            for (int j = 0; j < T; j++) {
                w[j] = pos_allowed(seg, pos, i, j, causal)
                           ? exp(Rw[((size_t)h * n + pos[i]) * n + pos[j]] / sqrt(hs) - mx)
                           : 0;
                sum += w[j];
            }
            for (int e = 0; e < hs; e++) {
                double o = 0;
                for (int j = 0; j < T; j++)
                    o += w[j] / sum * v[(size_t)j * ld + h * hs + e];
                out[(size_t)i * C + h * hs + e] = o;
            }
        }
    free(seg);
    free(w);
}

void ref_fpa(double *out, const double *R1, const double *R2, int k, const double *v, int ld,
             const int *off, const int *pos, int B, int H, int C, int max_len, int causal)
{
    int n = max_len;
    double *Rw = malloc((size_t)H * n * n * sizeof *Rw);
    for (int h = 0; h < H; h++)
        for (int a = 0; a < n; a++)
            for (int b = 0; b < n; b++) {
                double s = 0;
                for (int l = 0; l < k; l++)
                    s += R1[((size_t)h * n + a) * k + l] * R2[((size_t)h * n + b) * k + l];
                Rw[((size_t)h * n + a) * n + b] = s;
            }
    ref_pa(out, Rw, v, ld, off, pos, B, H, C, max_len, causal);
    free(Rw);
}

void ref_fixed(double *out, const double *v, int ld, const int *off, const int *pos, int B,
               int C, int max_len, int kind, double decay, int causal)
{
    int T = off[B];
    int *seg = segments(off, B);
    for (int i = 0; i < T; i++) {
        double sum = 0;
        for (int c = 0; c < C; c++)
            out[(size_t)i * C + c] = 0;
        for (int j = 0; j < T; j++) {
            if (!pos_allowed(seg, pos, i, j, causal))
                continue;
            int dist = abs(pos[i] - pos[j]);
            double a = 1;
            if (kind == SQ_ATTN_LINEAR_ANNEAL)
                a = causal ? pos[j] + 1 : max_len - dist;
            else if (kind == SQ_ATTN_EXP_ANNEAL)
                a = pow(decay, dist);
            sum += a;
            for (int c = 0; c < C; c++)
                out[(size_t)i * C + c] += a * v[(size_t)j * ld + c];
        }
        for (int c = 0; c < C; c++)
            out[(size_t)i * C + c] /= sum;
    }
    free(seg);
}

void ref_mixing(double *out, const double *x, int ld, const double *W1, const double *b1,
                const double *W2, const double *b2, const int *off, const int *pos, int B,
                int C, int max_len, int causal)
{
    int T = off[B], n = max_len;
    int *seg = segments(off, B);
    for (int i = 0; i < T; i++)
        for (int c = 0; c < C; c++) {
            double s = b2[pos[i]];
            for (int t = 0; t < T; t++) {
                if (!pos_allowed(seg, pos, i, t, causal))
                    continue;
                double u = b1[pos[t]];
                for (int j = 0; j < T; j++)
                    if (pos_allowed(seg, pos, t, j, causal))
                        u += W1[(size_t)pos[t] * n + pos[j]] * x[(size_t)j * ld + c];
                s += W2[(size_t)pos[i] * n + pos[t]] * 0.5 * u * (1 + erf(u / sqrt(2.0)));
            }
            out[(size_t)i * C + c] = s;
        }
    free(seg);
}

/* ------------------------------------------------------------------------ */
/* adam.h                                                                   */

void ref_adam(double *param, const double *grad, double *m, double *v, size_t n,
              const sq_adam_cfg *cfg, long t)
{
    double b1 = cfg->beta1, b2 = cfg->beta2, wd = cfg->weight_decay;
    for (size_t i = 0; i < n; i++) {
        double g = grad[i] + (cfg->decoupled ? 0 : wd * param[i]);
        if (cfg->decoupled)
            param[i] *= 1 - cfg->lr * wd;
        m[i] = b1 * m[i] + (1 - b1) * g;
        v[i] = b2 * v[i] + (1 - b2) * g * g;
        double mhat = m[i] / (1 - pow(b1, (double)t)), vhat = v[i] / (1 - pow(b2, (double)t));
        param[i] -= cfg->lr * mhat / (sqrt(vhat) + cfg->eps);
    }
}

double ref_grad_norm(const double *g, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += g[i] * g[i];
    return sqrt(s);
}

double ref_grad_clip(double *g, size_t n, double max_norm)
{
    double norm = ref_grad_norm(g, n);
    if (isfinite(norm) && max_norm > 0 && norm > max_norm)
        for (size_t i = 0; i < n; i++)
            g[i] *= max_norm / (norm + 1e-6);
    return norm;
}

void ref_l2norm(double *out, double *norm, const double *x, int T, int C, double s, double eps)
{
    for (int t = 0; t < T; t++) {
        double ss = 0;
        for (int c = 0; c < C; c++)
            ss += x[(size_t)t * C + c] * x[(size_t)t * C + c];
        norm[t] = sqrt(ss);
        double d = norm[t] > eps ? norm[t] : eps;
        for (int c = 0; c < C; c++)
            out[(size_t)t * C + c] = s * x[(size_t)t * C + c] / d;
    }
}

void ref_attnpool(double *out, double *alpha, const double *score, const double *x,
                  const int *off, int B, int C)
{
    for (int b = 0; b < B; b++) {
        int t0 = off[b], t1 = off[b + 1];
        double z = 0;
        for (int t = t0; t < t1; t++) /* no max shift: the scores are O(1) */
            z += score ? exp(score[t]) : 1;
        for (int t = t0; t < t1; t++)
            alpha[t] = (score ? exp(score[t]) : 1) / z;
        for (int c = 0; c < C; c++) {
            double o = 0;
            for (int t = t0; t < t1; t++)
                o += alpha[t] * x[(size_t)t * C + c];
            out[(size_t)b * C + c] = o;
        }
    }
}

void ref_segmean(double *out, const double *x, const int *off, int B, int C)
{
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++) {
            double sum = 0;
            int n = off[b + 1] - off[b];
            for (int t = off[b]; t < off[b + 1]; t++)
                sum += x[(size_t)t * C + c];
            out[(size_t)b * C + c] = n ? sum / n : 0;
        }
}

void ref_pkm(double *out, int *idx, const double *q, const double *C1, const double *C2,
             const double *E, int B, int n, int d, int k, int weighted)
{
    int h = d / 2, N = n * n;
    double *s = malloc((size_t)N * sizeof *s), *w = malloc((size_t)k * sizeof *w);
    char *taken = malloc((size_t)N);
    if (!s || !w || !taken)
        abort();
    for (int b = 0; b < B; b++) {
        const double *qb = q + (size_t)b * d;
        for (int e = 0; e < N; e++) {
            double v = 0;
            for (int c = 0; c < h; c++)
                v += qb[c] * C1[(size_t)(e / n) * h + c] + qb[h + c] * C2[(size_t)(e % n) * h + c];
            s[e] = v;
        }
        memset(taken, 0, (size_t)N);
        double z = 0;
        for (int m = 0; m < k; m++) {
            int best = -1;
            for (int e = 0; e < N; e++) /* ascending e: the first of equals */
                if (!taken[e] && (best < 0 || s[e] > s[best]))
                    best = e;
            taken[best] = 1;
            idx[(size_t)b * k + m] = best;
            w[m] = exp(s[best] - s[idx[(size_t)b * k]]);
            z += w[m];
        }
        for (int m = 0; m < k; m++)
            for (int c = 0; c < d; c++)
                out[((size_t)b * k + m) * d + c] =
                    (weighted ? w[m] / z : 1) * E[(size_t)idx[(size_t)b * k + m] * d + c];
    }
    free(s);
    free(w);
    free(taken);
}
