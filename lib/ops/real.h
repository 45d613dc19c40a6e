/* real.h - one source, two precisions.
 *
 * The ops (and the models on them) are written once over the type `real`
 * and compiled twice: as float (the code that trains) and as double (the
 * same code, so that the unit tests can check every gradient against
 * central finite differences without float round-off drowning the
 * comparison). A source starts with `#ifndef SQ_REAL / #define SQ_REAL float
 * / #endif`; the Makefile finds such sources and compiles each a second time
 * with -DSQ_REAL=double into NAME_f64.o.
 *
 * Such a source includes this header, which provides
 *   real            the scalar type
 *   R(name)         the exported name: `name` for float, `name_f64` for double
 *   r_exp, r_log, ... the libm function of the matching precision
 *   r_gemm          sq_blas_gemm (pgemm.c): cblas_sgemm or cblas_dgemm on
 *                   the threads of the OpenMP team
 *   SQ_REAL_IS_F64  1 in the double build (for code that must exist once)
 * and the scalar maths shared by the CPU and CUDA backends as `static inline`
 * functions marked SQ_HD (host and device under nvcc). */
#ifndef SQ_REAL_H
#define SQ_REAL_H

#ifndef SQ_REAL
#error "define SQ_REAL (float or double) before including real.h"
#endif

#include <math.h>

#ifdef __CUDACC__
#define SQ_HD __host__ __device__
#else
#define SQ_HD
#include <cblas.h>
#endif

/* The preprocessor cannot compare tokens, so map the type name to 0/1. */
#define SQ_PREC_float 0
#define SQ_PREC_double 1
#define SQ_CAT2_(a, b) a##b
#define SQ_CAT2(a, b) SQ_CAT2_(a, b)
#define SQ_REAL_IS_F64 SQ_CAT2(SQ_PREC_, SQ_REAL)

typedef SQ_REAL real;

#if SQ_REAL_IS_F64
#define R(name) name##_f64
#define r_exp exp
#define r_log log
#define r_log1p log1p
#define r_sqrt sqrt
#define r_erf erf
#define r_fabs fabs
#else
#define R(name) name
#define r_exp expf
#define r_log logf
#define r_log1p log1pf
#define r_sqrt sqrtf
#define r_erf erff
#define r_fabs fabsf
#endif

/* Before a loop that calls vec.h's float exp or erf: vectorise it in the
 * float build. The double build calls libm there, which has no vector form
 * that gives the same bits at every width, so its loop stays scalar. */
#if SQ_REAL_IS_F64 || !defined(_OPENMP)
#define SQ_SIMD_IF_FLOAT
#else
#define SQ_SIMD_IF_FLOAT _Pragma("omp simd")
#endif

#ifndef __CUDACC__
/* cblas_?gemm's contract, with the work cut over the OpenMP team
 * (pgemm.c). */
void R(sq_blas_gemm)(CBLAS_ORDER order, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M,
                     int N, int K, real alpha, const real *A, int lda, const real *B,
                     int ldb, real beta, real *C, int ldc);
#define r_gemm R(sq_blas_gemm)
#endif

/* GELU, exact erf form (PyTorch nn.GELU() default, RecBole's "gelu"):
 * gelu(x) = x Phi(x), Phi(x) = (1 + erf(x / sqrt 2)) / 2. */
static inline SQ_HD real sq_gelu(real x)
{
    return (real)0.5 * x * ((real)1 + r_erf(x * (real)0.70710678118654752440));
}

/* d gelu / dx = Phi(x) + x phi(x), phi(x) = exp(-x^2 / 2) / sqrt(2 pi). */
static inline SQ_HD real sq_gelu_grad(real x)
{
    real cdf = (real)0.5 * ((real)1 + r_erf(x * (real)0.70710678118654752440));
    real pdf = (real)0.39894228040143267794 * r_exp((real)-0.5 * x * x);
    return cdf + x * pdf;
}

/* softplus(x) = log(1 + e^x) = -log sigmoid(-x), without overflow:
 * max(x, 0) + log1p(e^-|x|). */
static inline SQ_HD real sq_softplus(real x)
{
    return (x > 0 ? x : (real)0) + r_log1p(r_exp(-r_fabs(x)));
}

/* sigmoid(x) = 1 / (1 + e^-x), evaluated on the side where exp cannot
 * overflow. */
static inline SQ_HD real sq_sigmoid(real x)
{
    if (x >= 0)
        return (real)1 / ((real)1 + r_exp(-x));
    real e = r_exp(x);
    return e / ((real)1 + e);
}

/* Dot product with 8 partial sums: breaks the dependency chain of the
 * additions and lets the compiler use SIMD lanes, while the order of the
 * sum stays fixed (deterministic, and no -ffast-math needed). */
static inline real sq_dot(const real *a, const real *b, int n)
{
    real acc[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++)
            acc[l] += a[i + l] * b[i + l];
    real tail = 0;
    for (; i < n; i++)
        tail += a[i] * b[i];
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) +
           ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail;
}

/* y += a x; callers never pass overlapping y and x. Element-wise, so the
 * vector form gives the same bits; the pragma asks for it where -O2's cost
 * model would not (a head's hs of 16 is one AVX-512 vector: the linear
 * attention sweeps are made of these). */
static inline void sq_axpy(real *restrict y, real a, const real *restrict x, int n)
{
#ifdef _OPENMP
    _Pragma("omp simd")
#endif
    for (int i = 0; i < n; i++)
        y[i] += a * x[i];
}

/* In place over a[0, n): a = softmax(a), computed as exp(a - max a) / sum
 * so that nothing overflows; a[n, len) (keys a causal row may not see)
 * are set to 0. n >= 1. */
static inline void sq_softmax_row(real *a, int n, int len)
{
    real mx = a[0];
    for (int j = 1; j < n; j++)
        if (a[j] > mx)
            mx = a[j];
    real sum = 0;
    for (int j = 0; j < n; j++) {
        a[j] = r_exp(a[j] - mx);
        sum += a[j];
    }
    real inv = (real)1 / sum;
    for (int j = 0; j < n; j++)
        a[j] *= inv;
    for (int j = n; j < len; j++)
        a[j] = 0;
}

/* out[0, hs) = sum_j a[j] v_j over j < n, v_j = v + j * ld: one attention
 * row applied to the values of one head. */
static inline void sq_attend_row(real *out, const real *a, const real *v, int n, int ld, int hs)
{
    for (int d = 0; d < hs; d++)
        out[d] = 0;
    for (int j = 0; j < n; j++)
        sq_axpy(out, a[j], v + (size_t)j * ld, hs);
}

#endif
