/* Unit tests for lib/ops/rowwise.c: the batch-invariant linear layer gives
 * the product (against a double reference), each output the fixed sum of
 * rowwise.h (against the plain loop, bit for bit), and a row's bits do not
 * depend on the rows beside it, the thread count or the instruction set's
 * tile shape. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ctx.h"
#include "rng.h"
#include "rowwise.h"
#include "unit.h"

UNIT_TEST(test_rowwise_linear)
{
    enum { T = 37, C = 45, OC = 300 }; /* tails in rows, columns and blocks */
    sq_rng r;
    sq_rng_seed(&r, 7, 0);
    float *x = malloc(sizeof(float) * T * C), *w = malloc(sizeof(float) * OC * C);
    float *b = malloc(sizeof(float) * OC), *out = malloc(sizeof(float) * T * OC);
    float *one = malloc(sizeof(float) * OC);
    CHECK(x && w && b && out && one);
    if (!x || !w || !b || !out || !one)
        goto done;
    for (int i = 0; i < T * C; i++) x[i] = (float)sq_rng_normal(&r);
    for (int i = 0; i < OC * C; i++) w[i] = (float)sq_rng_normal(&r);
    for (int i = 0; i < OC; i++) b[i] = (float)sq_rng_normal(&r);
    sq_ctx cx = sq_ctx_cpu();
    cx.threads = 2;
    sq_rowwise_linear(&cx, out, x, w, b, T, C, OC);
    double worst = 0;
    int same = 1;
    for (int i = 0; i < T; i++)
        for (int o = 0; o < OC; o++) {
            double ref = b[o];
            float s = 0; /* the order of rowwise.h, in float */
            for (int c = 0; c < C; c++) {
                ref += (double)x[i * C + c] * w[o * C + c];
                float p = x[i * C + c] * w[o * C + c];
                s += p;
            }
            s += b[o];
            double d = fabs(out[i * OC + o] - ref) / fmax(1.0, fabs(ref));
            if (d > worst) worst = d;
            if (memcmp(&s, &out[i * OC + o], sizeof s)) same = 0;
        }
    CHECK(worst < 1e-5);
    CHECK(same);
    /* the tile kernel of every instruction set this host runs (each shaped
     * for its registers): the same bits */
    for (int isa = SQ_ISA_BASE; isa <= (int)sq_isa_detect(); isa++) {
        float *o2 = malloc(sizeof(float) * T * OC);
        CHECK(o2 != NULL);
        if (!o2)
            break;
        sq_rowwise_linear_isa(&cx, (sq_isa)isa, o2, x, w, b, T, C, OC);
        CHECK(!memcmp(o2, out, sizeof(float) * T * OC));
        free(o2);
    }
    /* every row alone, on one thread: the same bits */
    cx.threads = 1;
    for (int i = 0; i < T; i++) {
        sq_rowwise_linear(&cx, one, x + i * C, w, b, 1, C, OC);
        CHECK(!memcmp(one, out + i * OC, sizeof(float) * OC));
    }
done:
    free(x); free(w); free(b); free(out); free(one);
}
