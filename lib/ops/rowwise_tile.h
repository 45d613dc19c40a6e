/* rowwise_tile.h - one tile kernel of rowwise.c, shaped for one register
 * file. rowwise.c includes it once per instruction set with
 *   TILE_SUFFIX  the name suffix (avx512, avx2, base)
 *   TILE_TARGET  the target attribute's string, or empty for the build's own
 *   TILE_BYTES   the vector width in bytes (64, 32, 16)
 *   TILE_R       rows scored together
 *   TILE_K       vectors of outputs per row
 * A tile holds TILE_R x TILE_K accumulators, TILE_K vectors of w and one
 * broadcast and one product in flight: it must fit the set's registers
 * (32 zmm; 16 ymm; 16 xmm), or the accumulators spill and the kernel runs
 * at a tenth of its speed (issue 33: 8 x 16 floats on AVX2 spilled).
 * Every output is still summed over c = 0 .. C-1 in order, one product
 * then one add, so every shape gives the same bits. */

#define TILE_CAT_(a, b) a##_##b
#define TILE_CAT(a, b) TILE_CAT_(a, b)
#define TILE_R_(name) R(name) /* R() pastes: expand the suffix first */
#define TILE_NAME(n) TILE_R_(TILE_CAT(n, TILE_SUFFIX))
#define TILE_W ((int)(TILE_BYTES / sizeof(real))) /* reals per vector */
#define TILE_NC (TILE_K * TILE_W)                  /* outputs per tile */

typedef real TILE_NAME(tile_vec) __attribute__((vector_size(TILE_BYTES)));

/* o[r][0 .. ncols) = x[r] . panel columns (+ b), r < nrows: the panel is
 * C rows of TILE_NC reals (row c: the weights of channel c, zero past the
 * block's last output). The arrays of vectors live in registers: the
 * loops over r and k are unrolled whole, so each element is a name. */
TILE_TARGET static void TILE_NAME(tile)(const real *const *x, const real *panel, int C,
                                       const real *b, real *const *o, int nrows, int ncols)
{
    TILE_NAME(tile_vec) acc[TILE_R][TILE_K];
#pragma GCC unroll 16
    for (int r = 0; r < TILE_R; r++)
#pragma GCC unroll 16
        for (int k = 0; k < TILE_K; k++)
            acc[r][k] = (TILE_NAME(tile_vec)){0};
    for (int c = 0; c < C; c++) {
        TILE_NAME(tile_vec) e[TILE_K];
#pragma GCC unroll 16
        for (int k = 0; k < TILE_K; k++)
            memcpy(&e[k], panel + (size_t)c * TILE_NC + k * TILE_W, sizeof e[k]);
#pragma GCC unroll 16
        for (int r = 0; r < TILE_R; r++) {
            real xv = x[r][c];
#pragma GCC unroll 16
            for (int k = 0; k < TILE_K; k++)
                acc[r][k] += xv * e[k];
        }
    }
    if (ncols == TILE_NC) { /* whole tile: the bias (+ 0 without one) in registers */
        TILE_NAME(tile_vec) bv[TILE_K];
#pragma GCC unroll 16
        for (int k = 0; k < TILE_K; k++) {
            bv[k] = (TILE_NAME(tile_vec)){0};
            if (b)
                memcpy(&bv[k], b + k * TILE_W, sizeof bv[k]);
        }
#pragma GCC unroll 16
        for (int r = 0; r < TILE_R; r++)
            if (r < nrows)
#pragma GCC unroll 16
                for (int k = 0; k < TILE_K; k++) {
                    TILE_NAME(tile_vec) y = acc[r][k] + bv[k];
                    memcpy(o[r] + k * TILE_W, &y, sizeof y);
                }
        return;
    }
    /* the last outputs of a block: through memory, ncols of them */
    real tile[TILE_R][TILE_NC];
#pragma GCC unroll 16
    for (int r = 0; r < TILE_R; r++)
#pragma GCC unroll 16
        for (int k = 0; k < TILE_K; k++)
            memcpy(&tile[r][k * TILE_W], &acc[r][k], sizeof acc[r][k]);
    real bias[TILE_NC] = {0}; /* no bias: + 0, as row_plain (a -0 sum turns +0) */
    if (b)
        memcpy(bias, b, (size_t)ncols * sizeof *bias);
    for (int r = 0; r < nrows; r++) {
        for (int j = 0; j < ncols; j++)
            tile[r][j] += bias[j];
        memcpy(o[r], tile[r], (size_t)ncols * sizeof *o[r]);
    }
}

/* One task: rows [t0, t1) x outputs [o0, o0 + n), n <= SQ_CBLK, through
 * the block packed into panels of TILE_NC outputs (rowwise.c). Rows missing
 * from the last group of TILE_R repeat its first row, computed and dropped. */
TILE_TARGET static void TILE_NAME(task)(real *out, const real *inp, const real *wt,
                                       const real *b, int t0, int t1, int C, int OC, int o0,
                                       int n)
{
    for (int g = t0; g < t1; g += TILE_R) {
        const real *xr[TILE_R];
        real *orow[TILE_R];
        int nrows = t1 - g < TILE_R ? t1 - g : TILE_R;
        for (int r = 0; r < TILE_R; r++) {
            int t = g + (r < nrows ? r : 0);
            xr[r] = inp + (size_t)t * C;
            orow[r] = out + (size_t)t * OC + o0;
        }
        for (int j0 = 0; j0 < n; j0 += TILE_NC) {
            real *oj[TILE_R];
            for (int r = 0; r < TILE_R; r++)
                oj[r] = orow[r] + j0;
            TILE_NAME(tile)(xr, wt + (size_t)j0 * C, C, b ? b + o0 + j0 : NULL, oj, nrows,
                            n - j0 < TILE_NC ? n - j0 : TILE_NC);
        }
    }
}

/* Pack outputs [o0, o0 + n) of w [OC x C] into panels: output o0 + j,
 * channel c at wt[(j / NC) * C * NC + c * NC + j % NC], zero up to SQ_CBLK. */
static void TILE_NAME(pack)(real *wt, const real *w, int C, int o0, int n)
{
    for (int j = 0; j < SQ_CBLK; j++) {
        real *p = wt + (size_t)(j / TILE_NC) * C * TILE_NC + j % TILE_NC;
        const real *src = w + (size_t)(o0 + j) * C;
        for (int c = 0; c < C; c++)
            p[(size_t)c * TILE_NC] = j < n ? src[c] : 0;
    }
}

static const R(row_kernel) TILE_NAME(kernel) = {
    TILE_NAME(pack), TILE_NAME(task), TILE_R, TILE_NC,
};

#undef TILE_CAT_
#undef TILE_CAT
#undef TILE_NAME
#undef TILE_R_
#undef TILE_W
#undef TILE_NC
#undef TILE_SUFFIX
#undef TILE_TARGET
#undef TILE_BYTES
#undef TILE_R
#undef TILE_K
