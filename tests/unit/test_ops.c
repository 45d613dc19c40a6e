/* Unit tests for lib/ops/ops.c and lib/ops/adam.c.
 *
 * THE TABLE. Every op with a gradient is a row of op_table below, and one
 * driver (run_case) checks every row the same way, on random small shapes
 * with odd sizes (a row's trials):
 *   - the double build's forward against the naive reference of tests/ref
 *     (REF_TOL, absolute),
 *   - every gradient of the double build against central finite differences
 *     of sum(out * w) (GRAD_TOL, gradcheck.h: the double build is the same
 *     source as the float build that trains),
 *   - the float build (forward and backward) against the double one on the
 *     same inputs (F32_TOL, normwise),
 * and then the row's own checks (padding rows, equal masks, ...), if any.
 * A new op is a new row: its context, a setup that draws shapes and inputs,
 * the double objective, the backward, the reference and the float run.
 *
 * The tests after the table are of other shapes: hand values, layouts,
 * Adam, clipping, determinism across threads, the memory ops, GEMM. Set
 * SQ_TEST_VERBOSE=1 to print the measured errors. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "adam.h"
#include "gradcheck.h"
#include "nextloss.h"
#include "ops.h"
#include "ref_ops.h"
#include "rng.h"
#include "segs.h"
#include "unit.h"

#define GRAD_TOL 1e-6 /* finite differences vs backward, double build */
#define F32_TOL 1e-5  /* float build vs double build, normwise */
#define REF_TOL 1e-12 /* double build vs tests/ref, absolute (values are O(1)) */
#define TRIALS 4      /* random shapes per op */

/* The rows' context (their objectives take no argument for it):
 * sq_ctx_cpu(), set by test_ops_gradcheck. */
static sq_ctx cpu_ctx;
static const sq_ctx *const cpu = &cpu_ctx;

static int rand_int(sq_rng *r, int lo, int hi) /* inclusive */
{
    return lo + (int)sq_rng_below(r, (uint64_t)(hi - lo + 1));
}

/* ------------------------------------------------------------------------ */
/* The table's machinery                                                    */

enum { OP_MAX = 8, OP_MEM = 64 };

/* An input of the op: finite differences of the objective over x against
 * dx, which the backward fills. */
typedef struct {
    const char *name;
    double *x, *dx;
    size_t n;
} op_in;

/* A result of the float build and the double one it must match. */
typedef struct {
    const char *name;
    const float *f;
    const double *d;
    size_t n;
} op_pair;

/* One trial of a row: what its setup and float run register. Every array
 * comes from the trial's arena (tr_*) and is freed with it. */
typedef struct {
    void *c; /* the row's context: the objective's argument */
    op_in in[OP_MAX];
    op_pair pair[OP_MAX];
    int nin, npair;
    double *out, *ref; /* the double forward's results; the reference's */
    size_t nout;
    void *mem[OP_MEM];
    int nmem;
} op_trial;

/* A row: the op's functions. reference writes tr->ref (tr->nout reals, the
 * objective has run); run_float registers its pairs; extra may be NULL. */
typedef struct {
    const char *name;
    uint64_t seed;
    int trials;
    void (*setup)(op_trial *tr, sq_rng *r, int trial);
    gc_objective objective; /* the double forward; sum(out * w) */
    void (*backward)(op_trial *tr);
    void (*reference)(op_trial *tr);
    void (*run_float)(op_trial *tr);
    void (*extra)(unit_ctx *t, op_trial *tr);
} op_case;

static void *tr_keep(op_trial *tr, void *p)
{
    if (!p || tr->nmem == OP_MEM)
        abort(); /* out of memory, or OP_MEM too small for a row */
    tr->mem[tr->nmem++] = p;
    return p;
}

static void *tr_calloc(op_trial *tr, size_t n, size_t size)
{
    return tr_keep(tr, calloc(n ? n : 1, size));
}

static double *tr_zeros(op_trial *tr, size_t n)
{
    return tr_keep(tr, gc_zeros(n));
}

static double *tr_normal(op_trial *tr, sq_rng *r, size_t n, double scale)
{
    return tr_keep(tr, gc_normal(r, n, scale));
}

static float *tr_float(op_trial *tr, const double *x, size_t n)
{
    return tr_keep(tr, gc_to_float(x, n));
}

static float *tr_fzeros(op_trial *tr, size_t n)
{
    return tr_calloc(tr, n, sizeof(float));
}

/* x is an input: returns its gradient buffer (zeros; the backward adds). */
static double *tr_input(op_trial *tr, const char *name, double *x, size_t n)
{
    if (tr->nin == OP_MAX)
        abort();
    double *dx = tr_zeros(tr, n);
    tr->in[tr->nin++] = (op_in){name, x, dx, n};
    return dx;
}

static void tr_pair(op_trial *tr, const char *name, const float *f, const double *d, size_t n)
{
    if (tr->npair == OP_MAX)
        abort();
    tr->pair[tr->npair++] = (op_pair){name, f, d, n};
}

/* out [n]: what the objective computes, checked against the reference. */
static void tr_output(op_trial *tr, double *out, size_t n)
{
    tr->out = out;
    tr->nout = n;
    tr->ref = tr_zeros(tr, n);
}

static void tr_free(op_trial *tr)
{
    for (int i = 0; i < tr->nmem; i++)
        free(tr->mem[i]);
}

/* A float copy of a double scalar, kept for a pair. */
static float *tr_scalar(op_trial *tr, double v)
{
    float *f = tr_fzeros(tr, 1);
    f[0] = (float)v;
    return f;
}

static double max_abs_diff(const double *a, const double *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs(a[i] - b[i]);
        if (!(d <= m)) /* also catches NaN */
            m = d;
    }
    return m;
}

/* One measured error against its tolerance: a check; the worst kept; a
 * failure names the row (t->name), the array and the trial. */
static void expect(unit_ctx *t, const char *what, const char *name, int trial, double err,
                   double tol, double *worst)
{
    t->checks++;
    if (!(err < tol)) {
        t->failed++;
        fprintf(stderr, "  %s: %s %s, trial %d: error %.3g (tolerance %.0e)\n", t->name,
                what, name, trial, err, tol);
    }
    if (!(err <= *worst))
        *worst = err;
}

/* Every trial of one row; failures and notes carry "test/row". */
static void run_case(unit_ctx *t, const op_case *oc)
{
    const char *test = t->name;
    char label[64], grads[64] = "grad";
    snprintf(label, sizeof label, "%s/%s", test, oc->name);
    t->name = label;
    sq_rng r;
    sq_rng_seed(&r, oc->seed, 0);
    double wref = 0, wgrad = 0, wf32 = 0;
    for (int trial = 0; trial < oc->trials; trial++) {
        op_trial tr;
        memset(&tr, 0, sizeof tr);
        oc->setup(&tr, &r, trial);
        oc->objective(tr.c);
        oc->reference(&tr);
        expect(t, "forward vs", "reference", trial, max_abs_diff(tr.out, tr.ref, tr.nout),
               REF_TOL, &wref);
        oc->backward(&tr);
        for (int i = 0; i < tr.nin; i++) {
            const op_in *in = &tr.in[i];
            expect(t, "grad", in->name, trial, gc_check(oc->objective, tr.c, in->x, in->dx, in->n),
                   GRAD_TOL, &wgrad);
            if (trial == 0 && strlen(grads) + strlen(in->name) + 3 < sizeof grads)
                strcat(strcat(grads, i ? ", " : " "), in->name);
        }
        oc->objective(tr.c); /* the outputs at the unperturbed inputs again */
        oc->run_float(&tr);
        for (int i = 0; i < tr.npair; i++) {
            const op_pair *p = &tr.pair[i];
            expect(t, "float vs double", p->name, trial, gc_rel_diff(p->f, p->d, p->n), F32_TOL,
                   &wf32);
        }
        if (oc->extra)
            oc->extra(t, &tr);
        tr_free(&tr);
    }
    gc_note(label, "vs reference (abs)", wref);
    gc_note(label, grads, wgrad);
    gc_note(label, "float vs double", wf32);
    t->name = test;
}

/* ------------------------------------------------------------------------ */
/* The rows: embedding                                                      */

typedef struct {
    int T, C, V1, ids[64];
    double scale, *table, *dtable, *out, *w;
} emb_ctx;

static void emb_setup(op_trial *tr, sq_rng *r, int trial)
{
    emb_ctx *c = tr->c = tr_calloc(tr, 1, sizeof *c);
    segs s;
    segs_random(r, &s, 4, 7);
    c->T = s.T, c->C = trial == 0 ? 5 : rand_int(r, 1, 6), c->V1 = 12;
    for (int i = 0; i < c->T; i++)
        c->ids[i] = rand_int(r, 0, c->V1 - 1);
    c->ids[0] = 0;
    c->ids[c->T - 1] = 3; /* a repeated item accumulates */
    if (c->T > 1)
        c->ids[c->T - 2] = 3;
    size_t n = (size_t)c->T * c->C, tn = (size_t)c->V1 * c->C;
    c->scale = sqrt((double)c->C);
    c->table = tr_normal(tr, r, tn, 1);
    c->w = tr_normal(tr, r, n, 1);
    c->out = tr_zeros(tr, n);
    c->dtable = tr_input(tr, "table", c->table, tn);
    tr_output(tr, c->out, n);
}

static double emb_obj(void *p)
{
    emb_ctx *c = p;
    sq_embedding_forward_f64(cpu, c->out, c->table, c->ids, c->T, c->C, c->scale);
    return gc_dot(c->out, c->w, (size_t)c->T * c->C);
}

static void emb_backward(op_trial *tr)
{
    emb_ctx *c = tr->c;
    sq_embedding_backward_f64(cpu, c->dtable, c->w, c->ids, c->T, c->C, c->scale);
}

static void emb_ref(op_trial *tr)
{
    emb_ctx *c = tr->c;
    ref_embedding(tr->ref, c->table, c->ids, c->T, c->C, c->scale);
}

static void emb_float(op_trial *tr)
{
    emb_ctx *c = tr->c;
    size_t n = (size_t)c->T * c->C, tn = (size_t)c->V1 * c->C;
    float *ft = tr_float(tr, c->table, tn), *fw = tr_float(tr, c->w, n);
    float *fo = tr_fzeros(tr, n), *fd = tr_fzeros(tr, tn);
    sq_embedding_forward(cpu, fo, ft, c->ids, c->T, c->C, (float)c->scale);
    sq_embedding_backward(cpu, fd, fw, c->ids, c->T, c->C, (float)c->scale);
    tr_pair(tr, "out", fo, c->out, n);
    tr_pair(tr, "dtable", fd, c->dtable, tn);
}

/* padding: the garbage in table row 0 never shows, row 0 gets no gradient */
static void emb_extra(unit_ctx *t, op_trial *tr)
{
    emb_ctx *c = tr->c;
    int pad_ok = 1;
    for (int i = 0; i < c->T; i++)
        for (int k = 0; k < c->C; k++)
            if (c->ids[i] == 0 && c->out[(size_t)i * c->C + k] != 0)
                pad_ok = 0;
    for (int k = 0; k < c->C; k++)
        if (c->dtable[k] != 0)
            pad_ok = 0;
    CHECK(pad_ok);
}

/* ------------------------------------------------------------------------ */
/* posemb                                                                   */

enum { POS_P = 7 };

typedef struct {
    segs s;
    int C, pos[64];
    double *inp, *pe, *dinp, *dpe, *out, *w;
} pos_ctx;

static void pos_setup(op_trial *tr, sq_rng *r, int trial)
{
    (void)trial;
    pos_ctx *c = tr->c = tr_calloc(tr, 1, sizeof *c);
    segs_random(r, &c->s, 4, 7);
    c->C = rand_int(r, 1, 6);
    size_t n = (size_t)c->s.T * c->C, pn = (size_t)POS_P * c->C;
    sq_pack_positions(c->pos, c->s.off, c->s.B, POS_P);
    c->inp = tr_normal(tr, r, n, 1);
    c->pe = tr_normal(tr, r, pn, 1);
    c->out = tr_zeros(tr, n);
    c->w = tr_normal(tr, r, n, 1);
    c->dinp = tr_input(tr, "inp", c->inp, n);
    c->dpe = tr_input(tr, "pe", c->pe, pn);
    tr_output(tr, c->out, n);
}

static double pos_obj(void *p)
{
    pos_ctx *c = p;
    sq_posemb_forward_f64(cpu, c->out, c->inp, c->pe, c->pos, c->s.T, c->C);
    return gc_dot(c->out, c->w, (size_t)c->s.T * c->C);
}

static void pos_backward(op_trial *tr)
{
    pos_ctx *c = tr->c;
    sq_posemb_backward_f64(cpu, c->dinp, c->dpe, c->w, c->pos, c->s.T, c->C);
}

static void pos_ref(op_trial *tr)
{
    pos_ctx *c = tr->c;
    ref_posemb(tr->ref, c->inp, c->pe, c->pos, c->s.T, c->C);
}

static void pos_float(op_trial *tr)
{
    pos_ctx *c = tr->c;
    size_t n = (size_t)c->s.T * c->C, pn = (size_t)POS_P * c->C;
    float *fi = tr_float(tr, c->inp, n), *fp = tr_float(tr, c->pe, pn);
    float *fw = tr_float(tr, c->w, n), *fo = tr_fzeros(tr, n);
    float *fdi = tr_fzeros(tr, n), *fdp = tr_fzeros(tr, pn);
    sq_posemb_forward(cpu, fo, fi, fp, c->pos, c->s.T, c->C);
    sq_posemb_backward(cpu, fdi, fdp, fw, c->pos, c->s.T, c->C);
    tr_pair(tr, "out", fo, c->out, n);
    tr_pair(tr, "dinp", fdi, c->dinp, n);
    tr_pair(tr, "dpe", fdp, c->dpe, pn);
}

/* the SASRec convention: the newest item of each sequence at P-1 */
static void pos_extra(unit_ctx *t, op_trial *tr)
{
    pos_ctx *c = tr->c;
    int conv_ok = 1;
    for (int b = 0; b < c->s.B; b++)
        conv_ok &= c->pos[c->s.off[b + 1] - 1] == POS_P - 1 &&
                   c->pos[c->s.off[b]] == POS_P - c->s.len[b];
    CHECK(conv_ok);
}

/* ------------------------------------------------------------------------ */
/* layernorm                                                                */

typedef struct {
    int T, C;
    double eps;
    double *inp, *wt, *bias, *dinp, *dwt, *db, *out, *mean, *rstd, *w;
} ln_ctx;

static void ln_setup(op_trial *tr, sq_rng *r, int trial)
{
    static const double eps_list[4] = {1e-5, 1e-8, 1e-12, 1e-5};
    ln_ctx *c = tr->c = tr_calloc(tr, 1, sizeof *c);
    segs s;
    segs_random(r, &s, 4, 7);
    /* C >= 3: for C = 2 the output is +-w + b whatever x, a zero gradient
     * that float round-off would dominate */
    c->T = s.T, c->C = trial == 0 ? 5 : rand_int(r, 3, 9), c->eps = eps_list[trial % 4];
    size_t n = (size_t)c->T * c->C, C = (size_t)c->C;
    c->inp = tr_normal(tr, r, n, 1);
    for (size_t i = 0; i < n; i++) /* an offset mean, as real activations */
        c->inp[i] += 3;
    c->wt = tr_normal(tr, r, C, 1);
    c->bias = tr_normal(tr, r, C, 1);
    c->w = tr_normal(tr, r, n, 1);
    c->out = tr_zeros(tr, n);
    c->mean = tr_zeros(tr, (size_t)c->T);
    c->rstd = tr_zeros(tr, (size_t)c->T);
    c->dinp = tr_input(tr, "inp", c->inp, n);
    c->dwt = tr_input(tr, "w", c->wt, C);
    c->db = tr_input(tr, "b", c->bias, C);
    tr_output(tr, c->out, n);
}

static double ln_obj(void *p)
{
    ln_ctx *c = p;
    sq_layernorm_forward_f64(cpu, c->out, c->mean, c->rstd, c->inp, c->wt, c->bias, c->T,
                             c->C, c->eps);
    return gc_dot(c->out, c->w, (size_t)c->T * c->C);
}

static void ln_backward(op_trial *tr)
{
    ln_ctx *c = tr->c;
    sq_layernorm_backward_f64(cpu, c->dinp, c->dwt, c->db, c->w, c->inp, c->wt, c->mean,
                              c->rstd, c->T, c->C);
}

static void ln_ref(op_trial *tr)
{
    ln_ctx *c = tr->c;
    ref_layernorm(tr->ref, c->inp, c->wt, c->bias, c->T, c->C, c->eps);
}

static void ln_float(op_trial *tr)
{
    ln_ctx *c = tr->c;
    size_t n = (size_t)c->T * c->C, C = (size_t)c->C;
    float *fi = tr_float(tr, c->inp, n), *fwt = tr_float(tr, c->wt, C);
    float *fb = tr_float(tr, c->bias, C), *fw = tr_float(tr, c->w, n);
    float *fo = tr_fzeros(tr, n), *fm = tr_fzeros(tr, (size_t)c->T);
    float *fr = tr_fzeros(tr, (size_t)c->T), *fdi = tr_fzeros(tr, n);
    float *fdw = tr_fzeros(tr, C), *fdb = tr_fzeros(tr, C);
    sq_layernorm_forward(cpu, fo, fm, fr, fi, fwt, fb, c->T, c->C, (float)c->eps);
    sq_layernorm_backward(cpu, fdi, fdw, fdb, fw, fi, fwt, fm, fr, c->T, c->C);
    tr_pair(tr, "out", fo, c->out, n);
    tr_pair(tr, "dinp", fdi, c->dinp, n);
    tr_pair(tr, "dw", fdw, c->dwt, C);
    tr_pair(tr, "db", fdb, c->db, C);
}

/* ------------------------------------------------------------------------ */
/* linear                                                                   */

typedef struct {
    int T, C, OC, has_bias;
    double *inp, *wt, *bias, *dinp, *dwt, *db, *out, *w;
} lin_ctx;

static void lin_setup(op_trial *tr, sq_rng *r, int trial)
{
    lin_ctx *c = tr->c = tr_calloc(tr, 1, sizeof *c);
    segs s;
    segs_random(r, &s, 4, 7);
    c->T = s.T, c->C = rand_int(r, 1, 7), c->OC = trial == 0 ? 5 : rand_int(r, 1, 9);
    c->has_bias = trial != 3;
    size_t n = (size_t)c->T * c->C, on = (size_t)c->T * c->OC, wn = (size_t)c->OC * c->C;
    c->inp = tr_normal(tr, r, n, 1);
    c->wt = tr_normal(tr, r, wn, 1);
    c->bias = c->has_bias ? tr_normal(tr, r, (size_t)c->OC, 1) : NULL;
    c->out = tr_zeros(tr, on);
    c->w = tr_normal(tr, r, on, 1);
    c->dinp = tr_input(tr, "inp", c->inp, n);
    c->dwt = tr_input(tr, "W", c->wt, wn);
    if (c->has_bias)
        c->db = tr_input(tr, "b", c->bias, (size_t)c->OC);
    tr_output(tr, c->out, on);
}

static double lin_obj(void *p)
{
    lin_ctx *c = p;
    sq_linear_forward_f64(cpu, c->out, c->inp, c->wt, c->bias, c->T, c->C, c->OC);
    return gc_dot(c->out, c->w, (size_t)c->T * c->OC);
}

static void lin_backward(op_trial *tr)
{
    lin_ctx *c = tr->c;
    sq_linear_backward_f64(cpu, c->dinp, c->dwt, c->db, c->w, c->inp, c->wt, c->T, c->C,
                           c->OC);
}

static void lin_ref(op_trial *tr)
{
    lin_ctx *c = tr->c;
    ref_linear(tr->ref, c->inp, c->wt, c->bias, c->T, c->C, c->OC);
}

static void lin_float(op_trial *tr)
{
    lin_ctx *c = tr->c;
    size_t n = (size_t)c->T * c->C, on = (size_t)c->T * c->OC, wn = (size_t)c->OC * c->C;
    float *fi = tr_float(tr, c->inp, n), *fwt = tr_float(tr, c->wt, wn);
    float *fb = c->has_bias ? tr_float(tr, c->bias, (size_t)c->OC) : NULL;
    float *fw = tr_float(tr, c->w, on), *fo = tr_fzeros(tr, on);
    float *fdi = tr_fzeros(tr, n), *fdw = tr_fzeros(tr, wn);
    float *fdb = c->has_bias ? tr_fzeros(tr, (size_t)c->OC) : NULL;
    sq_linear_forward(cpu, fo, fi, fwt, fb, c->T, c->C, c->OC);
    sq_linear_backward(cpu, fdi, fdw, fdb, fw, fi, fwt, c->T, c->C, c->OC);
    tr_pair(tr, "out", fo, c->out, on);
    tr_pair(tr, "dinp", fdi, c->dinp, n);
    tr_pair(tr, "dW", fdw, c->dwt, wn);
    if (c->has_bias)
        tr_pair(tr, "db", fdb, c->db, (size_t)c->OC);
}

/* ------------------------------------------------------------------------ */
/* gelu, relu: one context, the rows differ in their setup                  */

typedef struct {
    size_t n;
    int relu;
    double *inp, *dinp, *out, *w;
} act_ctx;

static void act_setup(op_trial *tr, sq_rng *r, int relu)
{
    act_ctx *c = tr->c = tr_calloc(tr, 1, sizeof *c);
    c->n = (size_t)rand_int(r, 1, 40);
    c->relu = relu;
    c->inp = tr_normal(tr, r, c->n, 2);
    for (size_t i = 0; i < c->n; i++) /* keep ReLU's kink out of reach of h */
        if (fabs(c->inp[i]) < 1e-3)
            c->inp[i] = 0.5;
    c->out = tr_zeros(tr, c->n);
    c->w = tr_normal(tr, r, c->n, 1);
    c->dinp = tr_input(tr, "inp", c->inp, c->n);
    tr_output(tr, c->out, c->n);
}

static void gelu_setup(op_trial *tr, sq_rng *r, int trial)
{
    (void)trial;
    act_setup(tr, r, 0);
}

static void relu_setup(op_trial *tr, sq_rng *r, int trial)
{
    (void)trial;
    act_setup(tr, r, 1);
}

static double act_obj(void *p)
{
    act_ctx *c = p;
    if (c->relu)
        sq_relu_forward_f64(cpu, c->out, c->inp, c->n);
    else
        sq_gelu_forward_f64(cpu, c->out, c->inp, c->n);
    return gc_dot(c->out, c->w, c->n);
}

static void act_backward(op_trial *tr)
{
    act_ctx *c = tr->c;
    if (c->relu)
        sq_relu_backward_f64(cpu, c->dinp, c->w, c->inp, c->n);
    else
        sq_gelu_backward_f64(cpu, c->dinp, c->w, c->inp, c->n);
}

static void act_ref(op_trial *tr)
{
    act_ctx *c = tr->c;
    if (c->relu)
        ref_relu(tr->ref, c->inp, c->n);
    else
        ref_gelu(tr->ref, c->inp, c->n);
}

static void act_float(op_trial *tr)
{
    act_ctx *c = tr->c;
    float *fi = tr_float(tr, c->inp, c->n), *fw = tr_float(tr, c->w, c->n);
    float *fo = tr_fzeros(tr, c->n), *fd = tr_fzeros(tr, c->n);
    if (c->relu) {
        sq_relu_forward(cpu, fo, fi, c->n);
        sq_relu_backward(cpu, fd, fw, fi, c->n);
    } else {
        sq_gelu_forward(cpu, fo, fi, c->n);
        sq_gelu_backward(cpu, fd, fw, fi, c->n);
    }
    tr_pair(tr, "out", fo, c->out, c->n);
    tr_pair(tr, "dinp", fd, c->dinp, c->n);
}

/* ------------------------------------------------------------------------ */
/* dropout: the double build's mask is the reference's given mask          */

typedef struct {
    int T, C;
    double p;
    uint8_t *mask, *fmask;
    double *inp, *dinp, *out, *w;
} drop_ctx;

static void drop_setup(op_trial *tr, sq_rng *r, int trial)
{
    drop_ctx *c = tr->c = tr_calloc(tr, 1, sizeof *c);
    segs s;
    segs_random(r, &s, 4, 7);
    c->T = s.T, c->C = rand_int(r, 1, 7), c->p = trial == 3 ? 0.0 : 0.3;
    size_t n = (size_t)c->T * c->C;
    c->mask = tr_calloc(tr, n, 1);
    c->inp = tr_normal(tr, r, n, 1);
    c->out = tr_zeros(tr, n);
    c->w = tr_normal(tr, r, n, 1);
    c->dinp = tr_input(tr, "inp", c->inp, n);
    tr_output(tr, c->out, n);
}

static double drop_obj(void *p)
{
    drop_ctx *c = p;
    sq_dropout_forward_f64(cpu, c->out, c->mask, c->inp, c->T, c->C, c->p, 42, 7, 3);
    return gc_dot(c->out, c->w, (size_t)c->T * c->C);
}

static void drop_backward(op_trial *tr)
{
    drop_ctx *c = tr->c;
    sq_dropout_backward_f64(cpu, c->dinp, c->w, c->mask, (size_t)c->T * c->C, c->p);
}

static void drop_ref(op_trial *tr)
{
    drop_ctx *c = tr->c;
    ref_dropout(tr->ref, c->inp, c->mask, (size_t)c->T * c->C, c->p);
}

static void drop_float(op_trial *tr)
{
    drop_ctx *c = tr->c;
    size_t n = (size_t)c->T * c->C;
    float *fi = tr_float(tr, c->inp, n), *fw = tr_float(tr, c->w, n);
    float *fo = tr_fzeros(tr, n), *fd = tr_fzeros(tr, n);
    c->fmask = tr_calloc(tr, n, 1);
    sq_dropout_forward(cpu, fo, c->fmask, fi, c->T, c->C, (float)c->p, 42, 7, 3);
    sq_dropout_backward(cpu, fd, fw, c->fmask, n, (float)c->p);
    tr_pair(tr, "out", fo, c->out, n);
    tr_pair(tr, "dinp", fd, c->dinp, n);
}

/* the float build draws the same mask */
static void drop_extra(unit_ctx *t, op_trial *tr)
{
    drop_ctx *c = tr->c;
    CHECK(memcmp(c->fmask, c->mask, (size_t)c->T * c->C) == 0);
}

/* relu_dropout: dropout(relu(inp)) fused, its backward fused too; the
 * ReLU's kink kept out of reach of the finite differences' h */

static void rdrop_setup(op_trial *tr, sq_rng *r, int trial)
{
    drop_setup(tr, r, trial);
    drop_ctx *c = tr->c;
    for (size_t i = 0; i < (size_t)c->T * c->C; i++)
        if (fabs(c->inp[i]) < 1e-3)
            c->inp[i] = 0.5;
}

static double rdrop_obj(void *p)
{
    drop_ctx *c = p;
    sq_relu_dropout_forward_f64(cpu, c->out, c->mask, c->inp, c->T, c->C, c->p, 42, 7, 5);
    return gc_dot(c->out, c->w, (size_t)c->T * c->C);
}

static void rdrop_backward(op_trial *tr)
{
    drop_ctx *c = tr->c;
    sq_relu_dropout_backward_to_f64(cpu, c->dinp, c->w, c->mask, c->inp,
                                    (size_t)c->T * c->C, c->p);
}

static void rdrop_ref(op_trial *tr)
{
    drop_ctx *c = tr->c;
    size_t n = (size_t)c->T * c->C;
    double *r = tr_zeros(tr, n);
    ref_relu(r, c->inp, n);
    ref_dropout(tr->ref, r, c->mask, n, c->p);
}

static void rdrop_float(op_trial *tr)
{
    drop_ctx *c = tr->c;
    size_t n = (size_t)c->T * c->C;
    float *fi = tr_float(tr, c->inp, n), *fw = tr_float(tr, c->w, n);
    float *fo = tr_fzeros(tr, n), *fd = tr_fzeros(tr, n);
    c->fmask = tr_calloc(tr, n, 1);
    sq_relu_dropout_forward(cpu, fo, c->fmask, fi, c->T, c->C, (float)c->p, 42, 7, 5);
    sq_relu_dropout_backward_to(cpu, fd, fw, c->fmask, fi, n, (float)c->p);
    tr_pair(tr, "out", fo, c->out, n);
    tr_pair(tr, "dinp", fd, c->dinp, n);
}

/* ------------------------------------------------------------------------ */
/* residual                                                                 */

typedef struct {
    size_t n;
    double *a, *b, *da, *db, *out, *w;
} res_ctx;

static void res_setup(op_trial *tr, sq_rng *r, int trial)
{
    (void)trial;
    res_ctx *c = tr->c = tr_calloc(tr, 1, sizeof *c);
    c->n = (size_t)rand_int(r, 1, 40);
    c->a = tr_normal(tr, r, c->n, 1);
    c->b = tr_normal(tr, r, c->n, 1);
    c->out = tr_zeros(tr, c->n);
    c->w = tr_normal(tr, r, c->n, 1);
    c->da = tr_input(tr, "a", c->a, c->n);
    c->db = tr_input(tr, "b", c->b, c->n);
    tr_output(tr, c->out, c->n);
}

static double res_obj(void *p)
{
    res_ctx *c = p;
    sq_residual_forward_f64(cpu, c->out, c->a, c->b, c->n);
    return gc_dot(c->out, c->w, c->n);
}

static void res_backward(op_trial *tr)
{
    res_ctx *c = tr->c;
    sq_residual_backward_f64(cpu, c->da, c->db, c->w, c->n);
}

static void res_ref(op_trial *tr)
{
    res_ctx *c = tr->c;
    ref_residual(tr->ref, c->a, c->b, c->n);
}

static void res_float(op_trial *tr)
{
    res_ctx *c = tr->c;
    float *fa = tr_float(tr, c->a, c->n), *fb = tr_float(tr, c->b, c->n);
    float *fw = tr_float(tr, c->w, c->n), *fo = tr_fzeros(tr, c->n);
    float *fda = tr_fzeros(tr, c->n), *fdb = tr_fzeros(tr, c->n);
    sq_residual_forward(cpu, fo, fa, fb, c->n);
    sq_residual_backward(cpu, fda, fdb, fw, c->n);
    tr_pair(tr, "out", fo, c->out, c->n);
    tr_pair(tr, "da", fda, c->da, c->n);
    tr_pair(tr, "db", fdb, c->db, c->n);
}

/* ------------------------------------------------------------------------ */
/* attention, bidirectional and causal                                      */

/* q, k, v live in one array qkv: separate [T, C] blocks (ld = C) or
 * interleaved rows [T, 3C] (ld = 3C), the fused-projection layout. */
typedef struct {
    segs s;
    int H, C, ld, causal;
    size_t an;
    double *qkv, *dqkv, *out, *att, *w;
} att_ctx;

/* q, k, v (or dq, dk, dv) in base, of either type */
#define ATT_PTRS(c, base, q, k, v) do { \
    size_t T_ = (size_t)(c)->s.T; \
    int fused_ = (c)->ld == 3 * (c)->C; \
    (q) = (base); \
    (k) = fused_ ? (base) + (c)->C : (base) + T_ * (c)->C; \
    (v) = fused_ ? (base) + 2 * (c)->C : (base) + 2 * T_ * (c)->C; \
    } while (0)

static void att_setup(op_trial *tr, sq_rng *r, int trial, int causal)
{
    att_ctx *c = tr->c = tr_calloc(tr, 1, sizeof *c);
    segs_random(r, &c->s, 4, 7);
    c->H = trial == 0 ? 1 : rand_int(r, 1, 3);
    int hs = trial == 0 ? 5 : rand_int(r, 1, 3);
    c->C = c->H * hs, c->ld = trial % 2 ? 3 * c->C : c->C, c->causal = causal;
    size_t n = (size_t)c->s.T * c->C;
    c->an = sq_attention_cache_size(c->s.off, c->s.B, c->H);
    c->qkv = tr_normal(tr, r, 3 * n, 1);
    c->out = tr_zeros(tr, n);
    c->att = tr_zeros(tr, c->an);
    c->w = tr_normal(tr, r, n, 1);
    c->dqkv = tr_input(tr, "q, k, v", c->qkv, 3 * n);
    tr_output(tr, c->out, n);
}

static void att_bidir_setup(op_trial *tr, sq_rng *r, int trial)
{
    att_setup(tr, r, trial, 0);
}

static void att_causal_setup(op_trial *tr, sq_rng *r, int trial)
{
    att_setup(tr, r, trial, 1);
}

static double att_obj(void *p)
{
    att_ctx *c = p;
    double *q, *k, *v;
    ATT_PTRS(c, c->qkv, q, k, v);
    sq_attention_forward_f64(cpu, c->out, c->att, q, k, v, c->ld, c->s.off, c->s.B, c->H,
                             c->C, c->causal);
    return gc_dot(c->out, c->w, (size_t)c->s.T * c->C);
}

static void att_backward(op_trial *tr)
{
    att_ctx *c = tr->c;
    double *q, *k, *v, *dq, *dk, *dv;
    ATT_PTRS(c, c->qkv, q, k, v);
    ATT_PTRS(c, c->dqkv, dq, dk, dv);
    sq_attention_backward_f64(cpu, dq, dk, dv, c->w, c->out, q, k, v, c->att, c->ld, c->s.off,
                              c->s.B, c->H, c->C, c->causal);
}

static void att_ref(op_trial *tr)
{
    att_ctx *c = tr->c;
    double *q, *k, *v;
    ATT_PTRS(c, c->qkv, q, k, v);
    ref_attention(tr->ref, q, k, v, c->ld, c->s.off, c->s.B, c->H, c->C, c->causal);
}

static void att_float(op_trial *tr)
{
    att_ctx *c = tr->c;
    size_t n = (size_t)c->s.T * c->C;
    float *fqkv = tr_float(tr, c->qkv, 3 * n), *fw = tr_float(tr, c->w, n);
    float *fo = tr_fzeros(tr, n), *fatt = tr_fzeros(tr, c->an), *fd = tr_fzeros(tr, 3 * n);
    float *q, *k, *v, *dq, *dk, *dv;
    ATT_PTRS(c, fqkv, q, k, v);
    ATT_PTRS(c, fd, dq, dk, dv);
    sq_attention_forward(cpu, fo, fatt, q, k, v, c->ld, c->s.off, c->s.B, c->H, c->C,
                         c->causal);
    sq_attention_backward(cpu, dq, dk, dv, fw, fo, q, k, v, fatt, c->ld, c->s.off, c->s.B,
                          c->H, c->C, c->causal);
    tr_pair(tr, "out", fo, c->out, n);
    tr_pair(tr, "att", fatt, c->att, c->an);
    tr_pair(tr, "dq, dk, dv", fd, c->dqkv, 3 * n);
}

/* ------------------------------------------------------------------------ */
/* The losses: full CE (with and without an output bias), sampled BCE. The */
/* output is {loss, count}; the float build's loss and count are pairs.     */

typedef struct {
    int n, C, V1, chunk, K, T;
    int rows[64], targets[64], neg[64 * 3];
    float lq[64 * 3]; /* sampled softmax: the log-Q corrections */
    double beta;      /* gBCE */
    const int *rowp; /* rows or NULL */
    double *h, *E, *bias, *dh, *dE, *dbias, *scratch, res[2];
} loss_ctx;

/* the float run's loss and count against the double ones */
static void loss_pairs(op_trial *tr, double loss, int count)
{
    loss_ctx *c = tr->c;
    tr_pair(tr, "loss", tr_scalar(tr, loss), &c->res[0], 1);
    tr_pair(tr, "count", tr_scalar(tr, count), &c->res[1], 1);
}

/* Full CE over a packed batch: entries are every row (rows NULL) or the
 * last row of each sequence, as the `all` and `last` training targets
 * select them; E's padding row 0 zero, as the embedding keeps it. */
static void ce_setup(op_trial *tr, sq_rng *r, int trial)
{
    loss_ctx *c = tr->c = tr_calloc(tr, 1, sizeof *c);
    segs s;
    segs_random(r, &s, 4, 7);
    c->C = trial == 0 ? 5 : rand_int(r, 1, 6), c->V1 = 12, c->T = s.T;
    int last = trial % 2;
    c->n = last ? s.B : s.T;
    for (int i = 0; i < c->n; i++) {
        c->rows[i] = last ? s.off[i + 1] - 1 : i;
        c->targets[i] = rand_int(r, 1, c->V1 - 1);
    }
    if (!last && c->n > 2)
        c->targets[1] = 0; /* ignored */
    c->chunk = rand_int(r, 1, 5);
    c->rowp = last ? c->rows : NULL;
    size_t hn = (size_t)c->T * c->C, en = (size_t)c->V1 * c->C;
    c->h = tr_normal(tr, r, hn, 1);
    c->E = tr_normal(tr, r, en, 1);
    for (int k = 0; k < c->C; k++)
        c->E[k] = 0;
    c->scratch = tr_zeros(tr, sq_ce_scratch_size(c->chunk, c->V1, c->C));
    c->dh = tr_input(tr, "h", c->h, hn);
    c->dE = tr_input(tr, "E", c->E, en);
    tr_output(tr, c->res, 2);
}

static double ce_obj(void *p)
{
    loss_ctx *c = p;
    int count;
    c->res[0] = sq_ce_full_f64(cpu, NULL, NULL, c->scratch, c->h, c->E, c->rowp, c->targets,
                               c->n, c->C, c->V1, c->chunk, 1, &count);
    c->res[1] = count;
    return c->res[0];
}

static void ce_backward(op_trial *tr)
{
    loss_ctx *c = tr->c;
    int count;
    sq_ce_full_f64(cpu, c->dh, c->dE, c->scratch, c->h, c->E, c->rowp, c->targets, c->n, c->C,
                   c->V1, c->chunk, 1, &count);
}

static void ce_ref(op_trial *tr)
{
    loss_ctx *c = tr->c;
    int count;
    tr->ref[0] = ref_ce_full(c->h, c->E, c->bias, c->rowp, c->targets, c->n, c->C, c->V1,
                             &count);
    tr->ref[1] = count;
}

/* dloss = 2 scales the float build's gradients */
static void ce_float(op_trial *tr)
{
    loss_ctx *c = tr->c;
    size_t hn = (size_t)c->T * c->C, en = (size_t)c->V1 * c->C;
    float *fh = tr_float(tr, c->h, hn), *fE = tr_float(tr, c->E, en);
    float *fdh = tr_fzeros(tr, hn), *fdE = tr_fzeros(tr, en);
    float *fs = tr_fzeros(tr, sq_ce_scratch_size(c->chunk, c->V1, c->C));
    double *dh2 = tr_zeros(tr, hn), *dE2 = tr_zeros(tr, en);
    int count;
    double loss = sq_ce_full(cpu, fdh, fdE, fs, fh, fE, c->rowp, c->targets, c->n, c->C,
                             c->V1, c->chunk, 2.0f, &count);
    for (size_t i = 0; i < hn; i++)
        dh2[i] = 2 * c->dh[i];
    for (size_t i = 0; i < en; i++)
        dE2[i] = 2 * c->dE[i];
    loss_pairs(tr, loss, count);
    tr_pair(tr, "dh", fdh, dh2, hn);
    tr_pair(tr, "dE", fdE, dE2, en);
}

/* the padding item gets no gradient */
static void ce_extra(unit_ctx *t, op_trial *tr)
{
    loss_ctx *c = tr->c;
    int pad_ok = 1;
    for (int k = 0; k < c->C; k++)
        pad_ok &= c->dE[k] == 0;
    CHECK(pad_ok);
}

/* With an output bias: n entries on rows 0..n-1. */
static void ceb_setup(op_trial *tr, sq_rng *r, int trial)
{
    loss_ctx *c = tr->c = tr_calloc(tr, 1, sizeof *c);
    c->n = rand_int(r, 1, 9), c->C = rand_int(r, 1, 6), c->V1 = 13;
    c->chunk = rand_int(r, 1, 4), c->T = c->n;
    for (int i = 0; i < c->n; i++)
        c->targets[i] = trial && i == 1 ? 0 : rand_int(r, 1, c->V1 - 1);
    size_t hn = (size_t)c->n * c->C, en = (size_t)c->V1 * c->C;
    c->h = tr_normal(tr, r, hn, 1);
    c->E = tr_normal(tr, r, en, 1);
    c->scratch = tr_zeros(tr, sq_ce_scratch_size(c->chunk, c->V1, c->C));
    c->bias = tr_normal(tr, r, (size_t)c->V1, 1);
    c->dh = tr_input(tr, "h", c->h, hn);
    c->dE = tr_input(tr, "E", c->E, en);
    c->dbias = tr_input(tr, "bias", c->bias, (size_t)c->V1);
    tr_output(tr, c->res, 2);
}

static double ceb_obj(void *p)
{
    loss_ctx *c = p;
    int count;
    c->res[0] = sq_ce_full_bias_f64(cpu, NULL, NULL, NULL, c->scratch, c->h, c->E, c->bias,
                                    NULL, c->targets, c->n, c->C, c->V1, c->chunk, 1, &count);
    c->res[1] = count;
    return c->res[0];
}

static void ceb_backward(op_trial *tr)
{
    loss_ctx *c = tr->c;
    int count;
    sq_ce_full_bias_f64(cpu, c->dh, c->dE, c->dbias, c->scratch, c->h, c->E, c->bias, NULL,
                        c->targets, c->n, c->C, c->V1, c->chunk, 1, &count);
}

static void ceb_float(op_trial *tr)
{
    loss_ctx *c = tr->c;
    size_t hn = (size_t)c->n * c->C, en = (size_t)c->V1 * c->C, V1 = (size_t)c->V1;
    float *fh = tr_float(tr, c->h, hn), *fE = tr_float(tr, c->E, en);
    float *fb = tr_float(tr, c->bias, V1), *fdh = tr_fzeros(tr, hn);
    float *fdE = tr_fzeros(tr, en), *fdb = tr_fzeros(tr, V1);
    float *fs = tr_fzeros(tr, sq_ce_scratch_size(c->chunk, c->V1, c->C));
    int count;
    double loss = sq_ce_full_bias(cpu, fdh, fdE, fdb, fs, fh, fE, fb, NULL, c->targets, c->n,
                                  c->C, c->V1, c->chunk, 1, &count);
    loss_pairs(tr, loss, count);
    tr_pair(tr, "dh", fdh, c->dh, hn);
    tr_pair(tr, "dE", fdE, c->dE, en);
    tr_pair(tr, "dbias", fdb, c->dbias, V1);
}

/* the bias is the logit of a constant feature: E with a column (bias) and
 * h with a column of ones give the same loss without a bias */
static void ceb_extra(unit_ctx *t, op_trial *tr)
{
    loss_ctx *c = tr->c;
    int n = c->n, C = c->C, V1 = c->V1, c1;
    double *h1 = gc_zeros((size_t)n * (C + 1)), *E1 = gc_zeros((size_t)V1 * (C + 1));
    double *s1 = gc_zeros(sq_ce_scratch_size(c->chunk, V1, C + 1));
    for (int i = 0; i < n; i++) {
        memcpy(h1 + (size_t)i * (C + 1), c->h + (size_t)i * C, (size_t)C * sizeof *h1);
        h1[(size_t)i * (C + 1) + C] = 1;
    }
    for (int j = 0; j < V1; j++) {
        memcpy(E1 + (size_t)j * (C + 1), c->E + (size_t)j * C, (size_t)C * sizeof *E1);
        E1[(size_t)j * (C + 1) + C] = c->bias[j];
    }
    CHECK_NEAR(sq_ce_full_f64(cpu, NULL, NULL, s1, h1, E1, NULL, c->targets, n, C + 1, V1,
                              c->chunk, 1, &c1), c->res[0], 1e-12);
    CHECK_EQ(c1, c->res[1]);
    free(h1); free(E1); free(s1);
}

/* Sampled BCE: K negatives an entry, one of them missing, one entry
 * ignored; rows as in ce_setup. */
static void bce_setup(op_trial *tr, sq_rng *r, int trial)
{
    loss_ctx *c = tr->c = tr_calloc(tr, 1, sizeof *c);
    segs s;
    segs_random(r, &s, 4, 7);
    c->C = trial == 0 ? 5 : rand_int(r, 1, 6), c->V1 = 12, c->T = s.T;
    c->K = rand_int(r, 1, 3);
    int last = trial % 2;
    c->n = last ? s.B : s.T;
    for (int i = 0; i < c->n; i++) {
        c->rows[i] = last ? s.off[i + 1] - 1 : i;
        c->targets[i] = rand_int(r, 1, c->V1 - 1);
        for (int k = 0; k < c->K; k++)
            c->neg[i * c->K + k] = rand_int(r, 1, c->V1 - 1);
    }
    if (c->n > 2) {
        c->targets[1] = 0;    /* ignored entry */
        c->neg[2 * c->K] = 0; /* a missing negative */
    }
    c->rowp = last ? c->rows : NULL;
    size_t hn = (size_t)c->T * c->C, en = (size_t)c->V1 * c->C;
    c->h = tr_normal(tr, r, hn, 1);
    c->E = tr_normal(tr, r, en, 1);
    c->dh = tr_input(tr, "h", c->h, hn);
    c->dE = tr_input(tr, "E", c->E, en);
    tr_output(tr, c->res, 2);
}

static double bce_obj(void *p)
{
    loss_ctx *c = p;
    int count;
    c->res[0] = sq_bce_sampled_f64(cpu, NULL, NULL, c->h, c->E, c->rowp, c->targets, c->neg,
                                   c->n, c->K, c->C, 1, &count);
    c->res[1] = count;
    return c->res[0];
}

static void bce_backward(op_trial *tr)
{
    loss_ctx *c = tr->c;
    int count;
    sq_bce_sampled_f64(cpu, c->dh, c->dE, c->h, c->E, c->rowp, c->targets, c->neg, c->n, c->K,
                       c->C, 1, &count);
}

static void bce_ref(op_trial *tr)
{
    loss_ctx *c = tr->c;
    int count;
    tr->ref[0] = ref_bce_sampled(c->h, c->E, c->rowp, c->targets, c->neg, c->n, c->K, c->C,
                                 &count);
    tr->ref[1] = count;
}

static void bce_float(op_trial *tr)
{
    loss_ctx *c = tr->c;
    size_t hn = (size_t)c->T * c->C, en = (size_t)c->V1 * c->C;
    float *fh = tr_float(tr, c->h, hn), *fE = tr_float(tr, c->E, en);
    float *fdh = tr_fzeros(tr, hn), *fdE = tr_fzeros(tr, en);
    int count;
    double loss = sq_bce_sampled(cpu, fdh, fdE, fh, fE, c->rowp, c->targets, c->neg, c->n,
                                 c->K, c->C, 1.0f, &count);
    loss_pairs(tr, loss, count);
    tr_pair(tr, "dh", fdh, c->dh, hn);
    tr_pair(tr, "dE", fdE, c->dE, en);
}

/* The sampled softmax with the log-Q correction (10c) and gBCE (10d): the
 * entries of bce_setup with an output bias on odd trials, one negative an
 * accidental hit (equal to its positive: masked), corrections log(K Q)
 * drawn in [-3, 1], beta in (0, 1]. */
static void samp_setup(op_trial *tr, sq_rng *r, int trial)
{
    bce_setup(tr, r, trial);
    loss_ctx *c = tr->c;
    if (c->n > 3)
        c->neg[3 * c->K] = c->targets[3]; /* an accidental hit */
    for (int i = 0; i < c->n * c->K; i++)
        c->lq[i] = (float)(4 * sq_rng_uniform(r) - 3);
    c->beta = 0.05 + 0.95 * sq_rng_uniform(r);
    if (trial % 2) {
        c->bias = tr_normal(tr, r, (size_t)c->V1, 1);
        c->dbias = tr_input(tr, "bias", c->bias, (size_t)c->V1);
    }
}

/* one double run: 10c (gbce 0) or 10d (gbce 1), gradients when dh */
static double samp_run(loss_ctx *c, int gbce, double *dh, double *dE, double *db, int *count)
{
    if (gbce)
        return sq_gbce_sampled_f64(cpu, dh, dE, db, c->h, c->E, c->bias, c->rowp, c->targets,
                                   c->neg, c->n, c->K, c->C, c->beta, 1, count);
    return sq_ce_sampled_logq_f64(cpu, dh, dE, db, c->h, c->E, c->bias, c->rowp, c->targets,
                                  c->neg, c->lq, c->n, c->K, c->C, 1, count);
}

static double samp_obj_of(void *p, int gbce)
{
    loss_ctx *c = p;
    int count;
    c->res[0] = samp_run(c, gbce, NULL, NULL, NULL, &count);
    c->res[1] = count;
    return c->res[0];
}
static double ssm_obj(void *p) { return samp_obj_of(p, 0); }
static double gbce_obj(void *p) { return samp_obj_of(p, 1); }

static void ssm_backward(op_trial *tr)
{
    loss_ctx *c = tr->c;
    int count;
    samp_run(c, 0, c->dh, c->dE, c->dbias, &count);
}

static void gbce_backward(op_trial *tr)
{
    loss_ctx *c = tr->c;
    int count;
    samp_run(c, 1, c->dh, c->dE, c->dbias, &count);
}

static void ssm_ref(op_trial *tr)
{
    loss_ctx *c = tr->c;
    int count;
    tr->ref[0] = ref_ce_sampled_logq(c->h, c->E, c->bias, c->rowp, c->targets, c->neg, c->lq,
                                     c->n, c->K, c->C, &count);
    tr->ref[1] = count;
}

static void gbce_ref(op_trial *tr)
{
    loss_ctx *c = tr->c;
    int count;
    tr->ref[0] = ref_gbce_sampled(c->h, c->E, c->bias, c->rowp, c->targets, c->neg, c->n, c->K,
                                  c->C, c->beta, &count);
    tr->ref[1] = count;
}

static void samp_float(op_trial *tr, int gbce)
{
    loss_ctx *c = tr->c;
    size_t hn = (size_t)c->T * c->C, en = (size_t)c->V1 * c->C;
    float *fh = tr_float(tr, c->h, hn), *fE = tr_float(tr, c->E, en);
    float *fdh = tr_fzeros(tr, hn), *fdE = tr_fzeros(tr, en);
    float *fb = c->bias ? tr_float(tr, c->bias, (size_t)c->V1) : NULL;
    float *fdb = c->bias ? tr_fzeros(tr, (size_t)c->V1) : NULL;
    int count;
    double loss = gbce ? sq_gbce_sampled(cpu, fdh, fdE, fdb, fh, fE, fb, c->rowp, c->targets,
                                         c->neg, c->n, c->K, c->C, (float)c->beta, 1.0f, &count)
                       : sq_ce_sampled_logq(cpu, fdh, fdE, fdb, fh, fE, fb, c->rowp, c->targets,
                                            c->neg, c->lq, c->n, c->K, c->C, 1.0f, &count);
    loss_pairs(tr, loss, count);
    tr_pair(tr, "dh", fdh, c->dh, hn);
    tr_pair(tr, "dE", fdE, c->dE, en);
    if (fdb)
        tr_pair(tr, "dbias", fdb, c->dbias, (size_t)c->V1);
}
static void ssm_float(op_trial *tr) { samp_float(tr, 0); }
static void gbce_float(op_trial *tr) { samp_float(tr, 1); }

/* The sampled losses over one shared set of negatives (10e): the entries
 * of bce_setup (rows or not, an ignored entry) with one set of K = 4..6
 * negatives written into every row (the per-entry ops and the references
 * read it so): slot 0 empty, slots 1 and 2 the same item, slot 3 entry
 * 0's positive (a hit for that entry only); corrections in [-3, 1], beta
 * in (0, 1], an output bias on odd trials, chunks of 1..4 entries. */
static void shs_setup(op_trial *tr, sq_rng *r, int trial)
{
    bce_setup(tr, r, trial);
    loss_ctx *c = tr->c;
    c->K = rand_int(r, 4, 6);
    if (c->n * c->K > (int)(sizeof c->neg / sizeof *c->neg))
        abort();
    for (int k = 0; k < c->K; k++) {
        c->neg[k] = rand_int(r, 1, c->V1 - 1);
        c->lq[k] = (float)(4 * sq_rng_uniform(r) - 3);
    }
    c->neg[0] = 0, c->neg[1] = c->neg[2], c->neg[3] = c->targets[0];
    for (int i = 1; i < c->n; i++) {
        memcpy(c->neg + i * c->K, c->neg, (size_t)c->K * sizeof *c->neg);
        memcpy(c->lq + i * c->K, c->lq, (size_t)c->K * sizeof *c->lq);
    }
    c->beta = 0.05 + 0.95 * sq_rng_uniform(r);
    c->chunk = rand_int(r, 1, 4);
    c->scratch = tr_zeros(tr, sq_sampled_shared_scratch_size(c->chunk, c->K, c->C));
    if (trial % 2) {
        c->bias = tr_normal(tr, r, (size_t)c->V1, 1);
        c->dbias = tr_input(tr, "bias", c->bias, (size_t)c->V1);
    }
}

/* one double run of 10e: the sampled softmax (gbce 0) or gBCE (gbce 1) */
static double shs_run(loss_ctx *c, int gbce, double *dh, double *dE, double *db, int *count)
{
    if (gbce)
        return sq_gbce_sampled_shared_f64(cpu, dh, dE, db, c->scratch, c->h, c->E, c->bias,
                                          c->rowp, c->targets, c->neg, c->n, c->K, c->C,
                                          c->chunk, c->beta, 1, count);
    return sq_ce_sampled_shared_f64(cpu, dh, dE, db, c->scratch, c->h, c->E, c->bias, c->rowp,
                                    c->targets, c->neg, c->lq, c->n, c->K, c->C, c->chunk, 1,
                                    count);
}

static double shs_obj_of(void *p, int gbce)
{
    loss_ctx *c = p;
    int count;
    c->res[0] = shs_run(c, gbce, NULL, NULL, NULL, &count);
    c->res[1] = count;
    return c->res[0];
}
static double ssm_shared_obj(void *p) { return shs_obj_of(p, 0); }
static double gbce_shared_obj(void *p) { return shs_obj_of(p, 1); }

static void shs_backward(op_trial *tr, int gbce)
{
    loss_ctx *c = tr->c;
    int count;
    shs_run(c, gbce, c->dh, c->dE, c->dbias, &count);
}
static void ssm_shared_backward(op_trial *tr) { shs_backward(tr, 0); }
static void gbce_shared_backward(op_trial *tr) { shs_backward(tr, 1); }

/* one float run: 10e (shared 1) or 10c / 10d with the set in every row */
static double shs_float_run(const loss_ctx *c, int gbce, int shared, float *s, float *dh,
                            float *dE, float *db, const float *h, const float *E,
                            const float *b, int *count)
{
    if (shared && gbce)
        return sq_gbce_sampled_shared(cpu, dh, dE, db, s, h, E, b, c->rowp, c->targets, c->neg,
                                      c->n, c->K, c->C, c->chunk, (float)c->beta, 1.0f, count);
    if (shared)
        return sq_ce_sampled_shared(cpu, dh, dE, db, s, h, E, b, c->rowp, c->targets, c->neg,
                                    c->lq, c->n, c->K, c->C, c->chunk, 1.0f, count);
    if (gbce)
        return sq_gbce_sampled(cpu, dh, dE, db, h, E, b, c->rowp, c->targets, c->neg, c->n,
                               c->K, c->C, (float)c->beta, 1.0f, count);
    return sq_ce_sampled_logq(cpu, dh, dE, db, h, E, b, c->rowp, c->targets, c->neg, c->lq,
                              c->n, c->K, c->C, 1.0f, count);
}

/* The float results of one run (shared or per-entry). */
typedef struct {
    double loss;
    int count;
    float *dh, *dE, *db;
} shs_result;

static shs_result shs_float_result(op_trial *tr, int gbce, int shared)
{
    loss_ctx *c = tr->c;
    size_t hn = (size_t)c->T * c->C, en = (size_t)c->V1 * c->C, V1 = (size_t)c->V1;
    float *fh = tr_float(tr, c->h, hn), *fE = tr_float(tr, c->E, en);
    float *fb = c->bias ? tr_float(tr, c->bias, V1) : NULL;
    float *fs = tr_fzeros(tr, sq_sampled_shared_scratch_size(c->chunk, c->K, c->C));
    shs_result res = {.dh = tr_fzeros(tr, hn), .dE = tr_fzeros(tr, en),
                      .db = c->bias ? tr_fzeros(tr, V1) : NULL};
    res.loss = shs_float_run(c, gbce, shared, fs, res.dh, res.dE, res.db, fh, fE, fb,
                             &res.count);
    return res;
}

static void shs_float(op_trial *tr, int gbce)
{
    loss_ctx *c = tr->c;
    shs_result f = shs_float_result(tr, gbce, 1);
    loss_pairs(tr, f.loss, f.count);
    tr_pair(tr, "dh", f.dh, c->dh, (size_t)c->T * c->C);
    tr_pair(tr, "dE", f.dE, c->dE, (size_t)c->V1 * c->C);
    if (f.db)
        tr_pair(tr, "dbias", f.db, c->dbias, (size_t)c->V1);
}
static void ssm_shared_float(op_trial *tr) { shs_float(tr, 0); }
static void gbce_shared_float(op_trial *tr) { shs_float(tr, 1); }

/* normwise agreement of two float arrays (b the yardstick) */
static double rel_diff_ff(const float *a, const float *b, size_t n)
{
    double dmax = 0, bmax = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        dmax = d <= dmax ? dmax : d;
        bmax = fmax(bmax, fabs((double)b[i]));
    }
    return dmax / fmax(bmax, 1e-30);
}

/* Shared against per-entry: the float builds within SHARED_TOL (the sums
 * run in another order, the float exp is vec.h's), and two shared runs the
 * same bits. */
#define SHARED_TOL 1e-5
static void shs_extra(unit_ctx *t, op_trial *tr, int gbce)
{
    loss_ctx *c = tr->c;
    size_t hn = (size_t)c->T * c->C, en = (size_t)c->V1 * c->C, V1 = (size_t)c->V1;
    shs_result a = shs_float_result(tr, gbce, 1), b = shs_float_result(tr, gbce, 1);
    shs_result e = shs_float_result(tr, gbce, 0);
    CHECK_EQ(a.count, e.count);
    CHECK(fabs(a.loss - e.loss) <= SHARED_TOL * fmax(1, fabs(e.loss)));
    CHECK(rel_diff_ff(a.dh, e.dh, hn) < SHARED_TOL);
    CHECK(rel_diff_ff(a.dE, e.dE, en) < SHARED_TOL);
    CHECK(!a.db || rel_diff_ff(a.db, e.db, V1) < SHARED_TOL);
    CHECK(memcmp(&a.loss, &b.loss, sizeof a.loss) == 0);
    CHECK(memcmp(a.dh, b.dh, hn * sizeof *a.dh) == 0);
    CHECK(memcmp(a.dE, b.dE, en * sizeof *a.dE) == 0);
    CHECK(!a.db || memcmp(a.db, b.db, V1 * sizeof *a.db) == 0);
    /* the padding row gets nothing from the empty slot 0 */
    int pad_ok = 1;
    for (int k = 0; k < c->C; k++)
        pad_ok &= c->dE[k] == 0;
    CHECK(pad_ok);
}
static void ssm_shared_extra(unit_ctx *t, op_trial *tr) { shs_extra(t, tr, 0); }
static void gbce_shared_extra(unit_ctx *t, op_trial *tr) { shs_extra(t, tr, 1); }

/* ------------------------------------------------------------------------ */
/* gather of rows, whose backward is the scatter-add                        */

/* f(in) = sum_i w_i . in[rows[i]]: rows listed twice accumulate. Trial 0
 * is a fixed case, trial 3 has rows NULL (row i). */
typedef struct {
    int nin, n, C, rows[16];
    const int *rowp;
    double *in, *din, *out, *w;
} gat_ctx;

static void gat_setup(op_trial *tr, sq_rng *r, int trial)
{
    static const int fixed[9] = {2, 0, 2, 5, 1, 2, 4, 0, 3};
    gat_ctx *c = tr->c = tr_calloc(tr, 1, sizeof *c);
    if (trial == 0) {
        c->nin = 6, c->n = 9, c->C = 5;
        memcpy(c->rows, fixed, sizeof fixed);
    } else {
        c->nin = rand_int(r, 1, 7), c->n = rand_int(r, 1, 16), c->C = rand_int(r, 1, 6);
        for (int i = 0; i < c->n; i++)
            c->rows[i] = rand_int(r, 0, c->nin - 1);
    }
    if (trial == 3)
        c->n = c->nin;
    c->rowp = trial == 3 ? NULL : c->rows;
    size_t nn = (size_t)c->nin * c->C, on = (size_t)c->n * c->C;
    c->in = tr_normal(tr, r, nn, 1);
    c->w = tr_normal(tr, r, on, 1);
    c->out = tr_zeros(tr, on);
    c->din = tr_input(tr, "in", c->in, nn);
    tr_output(tr, c->out, on);
}

static double gat_obj(void *p)
{
    gat_ctx *c = p;
    sq_gather_rows_f64(cpu, c->out, c->in, c->rowp, c->n, c->C);
    return gc_dot(c->out, c->w, (size_t)c->n * c->C);
}

static void gat_backward(op_trial *tr)
{
    gat_ctx *c = tr->c;
    sq_scatter_add_rows_f64(cpu, c->din, c->w, c->rowp, c->n, c->C);
}

static void gat_ref(op_trial *tr)
{
    gat_ctx *c = tr->c;
    ref_gather_rows(tr->ref, c->in, c->rowp, c->n, c->C);
}

static void gat_float(op_trial *tr)
{
    gat_ctx *c = tr->c;
    size_t nn = (size_t)c->nin * c->C, on = (size_t)c->n * c->C;
    float *fi = tr_float(tr, c->in, nn), *fw = tr_float(tr, c->w, on);
    float *fo = tr_fzeros(tr, on), *fd = tr_fzeros(tr, nn);
    sq_gather_rows(cpu, fo, fi, c->rowp, c->n, c->C);
    sq_scatter_add_rows(cpu, fd, fw, c->rowp, c->n, c->C);
    tr_pair(tr, "out", fo, c->out, on);
    tr_pair(tr, "din", fd, c->din, nn);
}

/* ------------------------------------------------------------------------ */
/* The table                                                                */

static const op_case op_table[] = {
    {"embedding", 1, TRIALS, emb_setup, emb_obj, emb_backward, emb_ref, emb_float, emb_extra},
    {"posemb", 2, TRIALS, pos_setup, pos_obj, pos_backward, pos_ref, pos_float, pos_extra},
    {"layernorm", 3, TRIALS, ln_setup, ln_obj, ln_backward, ln_ref, ln_float, NULL},
    {"linear", 4, TRIALS, lin_setup, lin_obj, lin_backward, lin_ref, lin_float, NULL},
    {"gelu", 5, TRIALS, gelu_setup, act_obj, act_backward, act_ref, act_float, NULL},
    {"relu", 15, TRIALS, relu_setup, act_obj, act_backward, act_ref, act_float, NULL},
    {"dropout", 6, TRIALS, drop_setup, drop_obj, drop_backward, drop_ref, drop_float,
     drop_extra},
    {"relu_dropout", 28, TRIALS, rdrop_setup, rdrop_obj, rdrop_backward, rdrop_ref,
     rdrop_float, drop_extra},
    {"residual", 7, TRIALS, res_setup, res_obj, res_backward, res_ref, res_float, NULL},
    {"attention", 8, TRIALS + 2, att_bidir_setup, att_obj, att_backward, att_ref, att_float,
     NULL},
    {"attention_causal", 18, TRIALS + 2, att_causal_setup, att_obj, att_backward, att_ref,
     att_float, NULL},
    {"ce_full", 10, TRIALS + 2, ce_setup, ce_obj, ce_backward, ce_ref, ce_float, ce_extra},
    {"ce_full_bias", 11, TRIALS, ceb_setup, ceb_obj, ceb_backward, ce_ref, ceb_float,
     ceb_extra},
    {"bce_sampled", 12, TRIALS + 2, bce_setup, bce_obj, bce_backward, bce_ref, bce_float, NULL},
    {"ce_sampled_logq", 24, TRIALS + 2, samp_setup, ssm_obj, ssm_backward, ssm_ref, ssm_float,
     NULL},
    {"gbce_sampled", 25, TRIALS + 2, samp_setup, gbce_obj, gbce_backward, gbce_ref, gbce_float,
     NULL},
    {"ce_sampled_shared", 26, TRIALS + 2, shs_setup, ssm_shared_obj, ssm_shared_backward,
     ssm_ref, ssm_shared_float, ssm_shared_extra},
    {"gbce_sampled_shared", 27, TRIALS + 2, shs_setup, gbce_shared_obj, gbce_shared_backward,
     gbce_ref, gbce_shared_float, gbce_shared_extra},
    {"gather_rows", 23, TRIALS, gat_setup, gat_obj, gat_backward, gat_ref, gat_float, NULL},
};

UNIT_TEST(test_ops_gradcheck)
{
    cpu_ctx = sq_ctx_cpu();
    for (size_t i = 0; i < sizeof op_table / sizeof op_table[0]; i++)
        run_case(t, &op_table[i]);
}

/* ------------------------------------------------------------------------ */
/* 10e at a size where the GEMMs and vec.h's exp run whole vectors         */

/* N entries (entry 3 without a target), one set of K negatives written
 * into every row (slot 5 empty, slots 7 and 8 one item, slot 9 entry 0's
 * positive), corrections, an output bias. */
enum { BIG_N = 300, BIG_K = 203, BIG_C = 24, BIG_V1 = 500 };
typedef struct {
    float h[BIG_N * BIG_C], E[BIG_V1 * BIG_C], b[BIG_V1], lq[BIG_N * BIG_K];
    int pos[BIG_N], neg[BIG_N * BIG_K];
} big_in;

static big_in *big_setup(uint64_t seed)
{
    big_in *in = calloc(1, sizeof *in);
    if (!in)
        abort();
    sq_rng r;
    sq_rng_seed(&r, seed, 0);
    for (int i = 0; i < BIG_N * BIG_C; i++)
        in->h[i] = (float)(0.5 * sq_rng_normal(&r));
    for (int i = 0; i < BIG_V1 * BIG_C; i++)
        in->E[i] = (float)(0.5 * sq_rng_normal(&r));
    for (int i = 0; i < BIG_V1; i++)
        in->b[i] = (float)(0.5 * sq_rng_normal(&r));
    for (int i = 0; i < BIG_N; i++)
        in->pos[i] = rand_int(&r, 1, BIG_V1 - 1);
    in->pos[3] = 0;
    for (int k = 0; k < BIG_K; k++) {
        in->neg[k] = rand_int(&r, 1, BIG_V1 - 1);
        in->lq[k] = (float)(4 * sq_rng_uniform(&r) - 3);
    }
    in->neg[5] = 0, in->neg[8] = in->neg[7], in->neg[9] = in->pos[0];
    for (int i = 1; i < BIG_N; i++) {
        memcpy(in->neg + i * BIG_K, in->neg, BIG_K * sizeof *in->neg);
        memcpy(in->lq + i * BIG_K, in->lq, BIG_K * sizeof *in->lq);
    }
    return in;
}

/* The gradients of one float run and its loss. */
typedef struct {
    float dh[BIG_N * BIG_C], dE[BIG_V1 * BIG_C], db[BIG_V1];
    double loss;
    int count;
} big_out;

/* sampled softmax (gbce 0) or gBCE (gbce 1, beta 0.3); per entry when
 * chunk is 0, else shared in chunks of `chunk` entries */
static void big_run(const big_in *in, big_out *o, int gbce, int chunk)
{
    static float scratch[2 * BIG_K * BIG_C + 2 * BIG_K + BIG_N * (BIG_K + 2 * BIG_C + 2)];
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    memset(o, 0, sizeof *o);
    if (chunk && gbce)
        o->loss = sq_gbce_sampled_shared(cx, o->dh, o->dE, o->db, scratch, in->h, in->E, in->b,
                                         NULL, in->pos, in->neg, BIG_N, BIG_K, BIG_C, chunk,
                                         0.3f, 1, &o->count);
    else if (chunk)
        o->loss = sq_ce_sampled_shared(cx, o->dh, o->dE, o->db, scratch, in->h, in->E, in->b,
                                       NULL, in->pos, in->neg, in->lq, BIG_N, BIG_K, BIG_C,
                                       chunk, 1, &o->count);
    else if (gbce)
        o->loss = sq_gbce_sampled(cx, o->dh, o->dE, o->db, in->h, in->E, in->b, NULL, in->pos,
                                  in->neg, BIG_N, BIG_K, BIG_C, 0.3f, 1, &o->count);
    else
        o->loss = sq_ce_sampled_logq(cx, o->dh, o->dE, o->db, in->h, in->E, in->b, NULL,
                                     in->pos, in->neg, in->lq, BIG_N, BIG_K, BIG_C, 1,
                                     &o->count);
}

/* a within SHARED_TOL of b (normwise, loss relative) */
static void big_near(unit_ctx *t, const big_out *a, const big_out *b)
{
    CHECK_EQ(a->count, b->count);
    CHECK(fabs(a->loss - b->loss) <= SHARED_TOL * fmax(1, fabs(b->loss)));
    CHECK(rel_diff_ff(a->dh, b->dh, BIG_N * BIG_C) < SHARED_TOL);
    CHECK(rel_diff_ff(a->dE, b->dE, BIG_V1 * BIG_C) < SHARED_TOL);
    CHECK(rel_diff_ff(a->db, b->db, BIG_V1) < SHARED_TOL);
}

/* Shared (one chunk, chunks of 7) against per-entry, for both losses;
 * two runs the same bits. (Not across thread counts: pgemm's blocks of
 * another size can take another OpenBLAS kernel, its small-matrix one.) */
UNIT_TEST(test_ops_sampled_shared_big)
{
    big_in *in = big_setup(26);
    big_out *e = malloc(sizeof *e), *a = malloc(sizeof *a), *b = malloc(sizeof *b);
    if (!e || !a || !b)
        abort();
    CHECK_EQ(sq_sampled_shared_chunk((size_t)1 << 30, BIG_N, BIG_K, BIG_C), BIG_N);
    for (int gbce = 0; gbce < 2; gbce++) {
        big_run(in, e, gbce, 0);
        CHECK_EQ(e->count, BIG_N - 1);
        big_run(in, a, gbce, BIG_N);
        big_near(t, a, e);
        big_run(in, b, gbce, 7);
        big_near(t, b, e);
        big_run(in, b, gbce, BIG_N);
        CHECK(memcmp(a, b, sizeof *a) == 0);
    }
    free(in); free(e); free(a); free(b);
}

/* sq_next_item_loss takes 10e for a batch of shared negatives when the
 * full CE's scratch holds a chunk (the same bits as 10e called with
 * sq_sampled_shared_chunk's chunk), and 10c / 10d without a scratch or
 * with a set an entry. */
UNIT_TEST(test_ops_next_item_loss_shared)
{
    big_in *in = big_setup(27);
    big_out *o = malloc(sizeof *o), *d = malloc(sizeof *d);
    int cc = sq_ce_chunk(BIG_N, BIG_V1);
    float *scratch = calloc(sq_ce_scratch_size(cc, BIG_V1, BIG_C), sizeof *scratch);
    if (!o || !d || !scratch)
        abort();
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    int sc = sq_sampled_shared_chunk(sq_ce_scratch_size(cc, BIG_V1, BIG_C), BIG_N, BIG_K,
                                     BIG_C);
    CHECK(sc > 0);
    sq_packed p = {.n = BIG_N, .targets = in->pos, .K = BIG_K, .neg = in->neg, .lq = in->lq};
    for (int gbce = 0; gbce < 2; gbce++) {
        sq_loss_spec l = sq_loss_of(gbce ? SQ_LOSS_GBCE : SQ_LOSS_SAMPLED_SOFTMAX);
        l.gbce_t = 0.5;
        float beta = (float)sq_gbce_beta(l.gbce_t, BIG_K, BIG_V1 - 1);
        for (int shared = 0; shared < 2; shared++)
            for (int with_scratch = 0; with_scratch < 2; with_scratch++) {
                p.neg_share = shared ? SQ_SHARE_BATCH : SQ_SHARE_POSITION;
                memset(o, 0, sizeof *o), memset(d, 0, sizeof *d);
                o->loss = sq_next_item_loss(cx, l, &p, NULL, o->dh, o->dE, o->db,
                                            with_scratch ? scratch : NULL, in->h, in->E, in->b,
                                            BIG_C, BIG_V1, cc, 1, &o->count);
                int ch = shared && with_scratch ? sc : 0;
                if (ch && gbce)
                    d->loss = sq_gbce_sampled_shared(cx, d->dh, d->dE, d->db, scratch, in->h,
                                                     in->E, in->b, NULL, in->pos, in->neg,
                                                     BIG_N, BIG_K, BIG_C, ch, beta, 1,
                                                     &d->count);
                else if (ch)
                    d->loss = sq_ce_sampled_shared(cx, d->dh, d->dE, d->db, scratch, in->h,
                                                   in->E, in->b, NULL, in->pos, in->neg, in->lq,
                                                   BIG_N, BIG_K, BIG_C, ch, 1, &d->count);
                else if (gbce)
                    d->loss = sq_gbce_sampled(cx, d->dh, d->dE, d->db, in->h, in->E, in->b,
                                              NULL, in->pos, in->neg, BIG_N, BIG_K, BIG_C,
                                              beta, 1, &d->count);
                else
                    d->loss = sq_ce_sampled_logq(cx, d->dh, d->dE, d->db, in->h, in->E, in->b,
                                                 NULL, in->pos, in->neg, in->lq, BIG_N, BIG_K,
                                                 BIG_C, 1, &d->count);
                CHECK(memcmp(o, d, sizeof *o) == 0);
            }
    }
    /* a scratch too small for one entry: 0, the per-entry op */
    CHECK_EQ(sq_sampled_shared_chunk(sq_sampled_shared_scratch_size(1, BIG_K, BIG_C) - 1,
                                     BIG_N, BIG_K, BIG_C), 0);
    CHECK_EQ(sq_sampled_shared_chunk(sq_sampled_shared_scratch_size(1, BIG_K, BIG_C), BIG_N,
                                     BIG_K, BIG_C), 1);
    free(in); free(o); free(d); free(scratch);
}

/* --neg-share sequence through sq_next_item_loss: sequences of uneven
 * lengths (one without a target, entries that are rows through `rows`),
 * each with its own set, one GEMM a sequence; against the per-entry op on
 * the same rows (SHARED_TOL), both losses, the same bits twice. */
UNIT_TEST(test_ops_next_item_loss_by_sequence)
{
    big_in *in = big_setup(28);
    big_out *o = malloc(sizeof *o), *d = malloc(sizeof *d), *o2 = malloc(sizeof *o2);
    int cc = sq_ce_chunk(BIG_N, BIG_V1);
    float *scratch = calloc(sq_ce_scratch_size(cc, BIG_V1, BIG_C), sizeof *scratch);
    int *rows = malloc(BIG_N * sizeof *rows);
    if (!o || !d || !o2 || !scratch || !rows)
        abort();
    /* segments of 1, 37, 0, 90, 5, ... rows; entry e is row e (rows given) */
    int off[64], B = 0, lens[] = {1, 37, 0, 90, 5, 60, 2, 105};
    off[0] = 0;
    for (int j = 0; j < 8; j++, B++)
        off[B + 1] = off[B] + lens[j];
    for (int i = 0; i < BIG_N; i++)
        rows[i] = i;
    sq_rng r;
    sq_rng_seed(&r, 29, 0);
    for (int j = 0; j < B; j++) { /* each sequence's own set: row off[j] copied on */
        for (int k = 0; k < BIG_K && off[j] < BIG_N; k++)
            in->neg[off[j] * BIG_K + k] = rand_int(&r, 0, BIG_V1 - 1);
        if (j == 3) /* a hit of its first entry */
            in->neg[off[3] * BIG_K + 4] = in->pos[off[3]];
        for (int e = off[j] + 1; e < off[j + 1]; e++)
            memcpy(in->neg + e * BIG_K, in->neg + off[j] * BIG_K, BIG_K * sizeof *in->neg);
    }
    for (int e = off[5]; e < off[6]; e++) /* a sequence without targets */
        in->pos[e] = 0;
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    sq_packed p = {.B = B, .T = BIG_N, .off = off, .rows = rows, .n = BIG_N,
                   .targets = in->pos, .K = BIG_K, .neg = in->neg, .lq = in->lq,
                   .neg_share = SQ_SHARE_SEQUENCE};
    for (int gbce = 0; gbce < 2; gbce++) {
        sq_loss_spec l = sq_loss_of(gbce ? SQ_LOSS_GBCE : SQ_LOSS_SAMPLED_SOFTMAX);
        l.gbce_t = 0.5;
        big_out *runs[2] = {o, o2};
        for (int k = 0; k < 2; k++) {
            memset(runs[k], 0, sizeof *o);
            runs[k]->loss = sq_next_item_loss(cx, l, &p, rows, runs[k]->dh, runs[k]->dE,
                                              runs[k]->db, scratch, in->h, in->E, in->b, BIG_C,
                                              BIG_V1, cc, 1, &runs[k]->count);
        }
        CHECK(memcmp(o, o2, sizeof *o) == 0);
        p.neg_share = SQ_SHARE_POSITION; /* the per-entry op on the same rows */
        memset(d, 0, sizeof *d);
        d->loss = sq_next_item_loss(cx, l, &p, rows, d->dh, d->dE, d->db, scratch, in->h,
                                    in->E, in->b, BIG_C, BIG_V1, cc, 1, &d->count);
        p.neg_share = SQ_SHARE_SEQUENCE;
        CHECK(d->count == BIG_N - 1 - lens[5]);
        big_near(t, o, d);
    }
    free(in); free(o); free(o2); free(d); free(scratch); free(rows);
}

/* ------------------------------------------------------------------------ */
/* Hand values, layouts and edges of the ops of the table                  */

UNIT_TEST(test_ops_layernorm_values)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    /* Hand values: x = (1, 2, 3, 4): mean 2.5, var 1.25, w = 1, b = 0. */
    double x[4] = {1, 2, 3, 4}, w[4] = {1, 1, 1, 1}, b[4] = {0}, out[4], m, s;
    sq_layernorm_forward_f64(cx, out, &m, &s, x, w, b, 1, 4, 1e-12);
    CHECK_NEAR(m, 2.5, 1e-15);
    CHECK_NEAR(s, 1 / sqrt(1.25), 1e-12);
    CHECK_NEAR(out[0], -1.5 / sqrt(1.25), 1e-12);
    CHECK_NEAR(out[3], 1.5 / sqrt(1.25), 1e-12);
}

/* GELU reference values (PyTorch nn.GELU()(x)) */
UNIT_TEST(test_ops_gelu_values)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    double x[3] = {-1, 0.5, 2}, y[3];
    sq_gelu_forward_f64(cx, y, x, 3);
    CHECK_NEAR(y[0], -0.15865525393145707, 1e-15);
    CHECK_NEAR(y[1], 0.34573123063700656, 1e-15);
    CHECK_NEAR(y[2], 1.9544997361036416, 1e-15);
}

UNIT_TEST(test_ops_dropout_mask)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    /* Rate, scaling, and the mask as a function of (seed, step, site, row). */
    int T = 400, C = 50;
    size_t n = (size_t)T * C;
    float *inp = malloc(n * sizeof *inp), *out = malloc(n * sizeof *out);
    uint8_t *m1 = malloc(n), *m2 = malloc(n), *m3 = malloc(n);
    for (size_t i = 0; i < n; i++)
        inp[i] = 1.0f;
    sq_dropout_forward(cx, out, m1, inp, T, C, 0.25f, 9, 100, 2);
    size_t kept = 0;
    int scale_ok = 1;
    for (size_t i = 0; i < n; i++) {
        kept += m1[i];
        scale_ok &= m1[i] ? fabsf(out[i] - 1 / 0.75f) < 1e-6f : out[i] == 0;
    }
    CHECK(scale_ok);
    /* 20000 Bernoulli(0.75): sd = 61; 5 sd */
    CHECK(fabs((double)kept - 0.75 * (double)n) < 310);
    sq_dropout_forward(cx, out, m2, inp, T, C, 0.25f, 9, 100, 2);
    CHECK(memcmp(m1, m2, n) == 0);
    sq_dropout_forward(cx, out, m3, inp, T, C, 0.25f, 9, 101, 2);
    CHECK(memcmp(m1, m3, n) != 0);
    sq_dropout_forward(cx, out, m3, inp, T, C, 0.25f, 9, 100, 3);
    CHECK(memcmp(m1, m3, n) != 0);
    /* a row's mask does not depend on how many rows the batch has */
    sq_dropout_forward(cx, out, m3, inp, T / 2, C, 0.25f, 9, 100, 2);
    CHECK(memcmp(m1, m3, n / 2) == 0);
#ifdef _OPENMP
    int nt = omp_get_max_threads();
    omp_set_num_threads(1);
    sq_dropout_forward(cx, out, m3, inp, T, C, 0.25f, 9, 100, 2);
    omp_set_num_threads(nt);
    CHECK(memcmp(m1, m3, n) == 0);
#endif
    free(inp); free(out); free(m1); free(m2); free(m3);
}

/* The fused dropouts (ops.h 6): out = res + dropout(inp) and out =
 * dropout(relu(inp)) give the masks and the bits of the two ops in turn,
 * in both builds, at p 0 and p > 0, and in place (out = res or inp); the
 * backwards into their gradient (not added), those of zeros added to. */
UNIT_TEST(test_ops_dropout_fused)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    enum { T = 37, C = 53 };
    size_t n = (size_t)T * C;
    sq_rng r;
    sq_rng_seed(&r, 77, 1);
    float *x = malloc(n * sizeof *x), *res = malloc(n * sizeof *res);
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *tmp = malloc(n * sizeof *tmp);
    double *xd = malloc(n * sizeof *xd), *rd = malloc(n * sizeof *rd);
    double *ad = malloc(n * sizeof *ad), *bd = malloc(n * sizeof *bd);
    double *td = malloc(n * sizeof *td);
    uint8_t *m1 = malloc(n), *m2 = malloc(n);
    CHECK(x && res && a && b && tmp && xd && rd && ad && bd && td && m1 && m2);
    if (!(x && res && a && b && tmp && xd && rd && ad && bd && td && m1 && m2))
        goto done;
    for (size_t i = 0; i < n; i++) {
        x[i] = (float)sq_rng_normal(&r);
        res[i] = (float)sq_rng_normal(&r);
        xd[i] = sq_rng_normal(&r);
        rd[i] = sq_rng_normal(&r);
    }
    const float ps[] = {0.3f, 0.0f};
    for (int k = 0; k < 2; k++) {
        float p = ps[k];
        /* res + dropout(x) */
        sq_dropout_forward(cx, tmp, m1, x, T, C, p, 5, 9, 4);
        sq_residual_forward(cx, a, res, tmp, n);
        sq_dropout_add_forward(cx, b, m2, res, x, T, C, p, 5, 9, 4);
        CHECK(memcmp(a, b, n * sizeof *a) == 0 && memcmp(m1, m2, n) == 0);
        memcpy(b, res, n * sizeof *b); /* in place: out = res */
        sq_dropout_add_forward(cx, b, m2, b, x, T, C, p, 5, 9, 4);
        CHECK(memcmp(a, b, n * sizeof *a) == 0);
        /* dropout(relu(x)) */
        sq_relu_forward(cx, tmp, x, n);
        sq_dropout_forward(cx, a, m1, tmp, T, C, p, 5, 9, 6);
        sq_relu_dropout_forward(cx, b, m2, x, T, C, p, 5, 9, 6);
        CHECK(memcmp(a, b, n * sizeof *a) == 0 && memcmp(m1, m2, n) == 0);
        memcpy(b, x, n * sizeof *b); /* in place: out = inp */
        sq_relu_dropout_forward(cx, b, m2, b, T, C, p, 5, 9, 6);
        CHECK(memcmp(a, b, n * sizeof *a) == 0);
        /* its backward, written: the dropout's into zeros, then the
         * ReLU's into zeros (res as d out, b as dinp holding garbage) */
        if (p > 0) {
            memset(tmp, 0, n * sizeof *tmp);
            sq_dropout_backward(cx, tmp, res, m1, n, p);
            memset(a, 0, n * sizeof *a);
            sq_relu_backward(cx, a, tmp, x, n);
            memcpy(b, x, n * sizeof *b);
            sq_relu_dropout_backward_to(cx, b, res, m1, x, n, p);
            CHECK(memcmp(a, b, n * sizeof *a) == 0);
        }
        /* dropout's backward into dinp (b, holding garbage) against it
         * added to zeros (a) */
        if (p > 0) {
            memset(a, 0, n * sizeof *a);
            sq_dropout_backward(cx, a, res, m1, n, p);
            memcpy(b, x, n * sizeof *b);
            sq_dropout_backward_to(cx, b, res, m1, n, p);
            CHECK(memcmp(a, b, n * sizeof *a) == 0);
            memset(ad, 0, n * sizeof *ad);
            sq_dropout_backward_f64(cx, ad, rd, m1, n, p);
            memcpy(bd, xd, n * sizeof *bd);
            sq_dropout_backward_to_f64(cx, bd, rd, m1, n, p);
            CHECK(memcmp(ad, bd, n * sizeof *ad) == 0);
        }
        /* the double build */
        sq_dropout_forward_f64(cx, td, m1, xd, T, C, p, 5, 9, 4);
        sq_residual_forward_f64(cx, ad, rd, td, n);
        sq_dropout_add_forward_f64(cx, bd, m2, rd, xd, T, C, p, 5, 9, 4);
        CHECK(memcmp(ad, bd, n * sizeof *ad) == 0 && memcmp(m1, m2, n) == 0);
        sq_relu_forward_f64(cx, td, xd, n);
        sq_dropout_forward_f64(cx, ad, m1, td, T, C, p, 5, 9, 6);
        sq_relu_dropout_forward_f64(cx, bd, m2, xd, T, C, p, 5, 9, 6);
        CHECK(memcmp(ad, bd, n * sizeof *ad) == 0 && memcmp(m1, m2, n) == 0);
    }
done:
    free(x); free(res); free(a); free(b); free(tmp);
    free(xd); free(rd); free(ad); free(bd); free(td); free(m1); free(m2);
}

UNIT_TEST(test_ops_attention_layout)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    /* Causal probabilities: row i of each block sums to 1 over j <= i and
     * is 0 above the diagonal; a length-1 segment attends to itself. */
    int len[3] = {3, 1, 4}, off[4], H = 2, C = 4;
    int T = sq_pack_offsets(off, len, 3);
    size_t an = sq_attention_cache_size(off, 3, H);
    CHECK_EQ(an, (size_t)H * (9 + 1 + 16));
    double q[32], k[32], v[32], out[32], *att = gc_zeros(an);
    sq_rng r;
    sq_rng_seed(&r, 9, 0);
    for (int i = 0; i < T * C; i++) {
        q[i] = sq_rng_normal(&r);
        k[i] = sq_rng_normal(&r);
        v[i] = sq_rng_normal(&r);
    }
    sq_attention_forward_f64(cx, out, att, q, k, v, C, off, 3, H, C, 1);
    int ok = 1;
    size_t base = 0;
    for (int b = 0; b < 3; b++)
        for (int h = 0; h < H; h++, base += (size_t)len[b] * len[b])
            for (int i = 0; i < len[b]; i++) {
                double sum = 0;
                for (int j = 0; j < len[b]; j++) {
                    double p = att[base + (size_t)i * len[b] + j];
                    if (j > i && p != 0)
                        ok = 0;
                    sum += p;
                }
                if (fabs(sum - 1) > 1e-12)
                    ok = 0;
            }
    CHECK(ok);
    /* the one-row segment (row 3) copies its own v */
    CHECK_NEAR(out[3 * C + 0], v[3 * C + 0], 1e-15);
    CHECK_NEAR(out[3 * C + 3], v[3 * C + 3], 1e-15);
    /* the first row of a causal segment copies its own v */
    CHECK_NEAR(out[4 * C + 1], v[4 * C + 1], 1e-15);
    free(att);
}

/* Chunks of the full CE: logits of about 2^20 reals, 16 rows at least, no
 * more rows than entries */
UNIT_TEST(test_ops_ce_chunk)
{
    CHECK(sq_ce_chunk(1000, 12102) == 86);
    CHECK(sq_ce_chunk(50, 12102) == 50);
    CHECK(sq_ce_chunk(1000, 1 << 22) == 16);
    CHECK(sq_ce_chunk(10, 1 << 22) == 10);
    CHECK(sq_ce_chunk(700, 61) == 700);
    CHECK(sq_ce_chunk(0, 61) == 1);
}

/* The losses with nothing to score, and with huge scores */
UNIT_TEST(test_ops_loss_edges)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    int zero[2] = {0, 0}, count = -1;
    double h2[2] = {1, 2}, E2[4] = {0, 0, 1, 1}, sc[16];
    CHECK(sq_ce_full_f64(cx, NULL, NULL, sc, h2, E2, NULL, zero, 2, 1, 2, 4, 1, &count) == 0);
    CHECK_EQ(count, 0);
    /* no overflow for huge scores: softplus(1000) = 1000 */
    double h1[1] = {1000}, E1[2] = {0, 1};
    int p1[1] = {1}, n1[1] = {1};
    double l = sq_bce_sampled_f64(cx, NULL, NULL, h1, E1, NULL, p1, n1, 1, 1, 1, 1, &count);
    CHECK(isfinite(l));
    CHECK_NEAR(l, 1000, 1e-12);
}

/* ------------------------------------------------------------------------ */
/* Adam and clipping                                                        */

UNIT_TEST(test_ops_adam)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    /* Two steps on three parameters, against the formulas written out. */
    double p0[3] = {0.5, -1.0, 2.0}, g1[3] = {0.1, -0.2, 0.3}, g2[3] = {-0.05, 0.4, 0.0};
    for (int decoupled = 0; decoupled < 2; decoupled++) {
        sq_adam_cfg cfg = {0.01, 0.9, 0.999, 1e-8, 0.1, decoupled, 0};
        double p[3], m[3] = {0}, v[3] = {0};
        memcpy(p, p0, sizeof p);
        sq_adam_update_f64(cx, p, g1, m, v, 3, &cfg, 1);
        sq_adam_update_f64(cx, p, g2, m, v, 3, &cfg, 2);
        float pf[3], gf1[3], gf2[3], mf[3] = {0}, vf[3] = {0};
        for (int i = 0; i < 3; i++) {
            pf[i] = (float)p0[i];
            gf1[i] = (float)g1[i];
            gf2[i] = (float)g2[i];
        }
        sq_adam_update(cx, pf, gf1, mf, vf, 3, &cfg, 1);
        sq_adam_update(cx, pf, gf2, mf, vf, 3, &cfg, 2);
        for (int i = 0; i < 3; i++) {
            double x = p0[i], mm = 0, vv = 0;
            const double *gs[2] = {g1, g2};
            for (int s = 1; s <= 2; s++) {
                double g = gs[s - 1][i] + (decoupled ? 0 : 0.1 * x);
                if (decoupled)
                    x *= 1 - 0.01 * 0.1;
                mm = 0.9 * mm + 0.1 * g;
                vv = 0.999 * vv + 0.001 * g * g;
                double mhat = mm / (1 - pow(0.9, s)), vhat = vv / (1 - pow(0.999, s));
                x -= 0.01 * mhat / (sqrt(vhat) + 1e-8);
            }
            CHECK_NEAR(p[i], x, 1e-14);
            CHECK_NEAR(m[i], mm, 1e-15);
            CHECK_NEAR(v[i], vv, 1e-15);
            CHECK_NEAR(pf[i], x, 1e-6);
        }
    }
    /* The first Adam step moves every weight by about lr (sign of g). */
    sq_adam_cfg plain = {0.001, 0.9, 0.999, 1e-8, 0, 0, 0};
    double p[2] = {0, 0}, g[2] = {3, -1e-3}, m[2] = {0}, v[2] = {0};
    sq_adam_update_f64(cx, p, g, m, v, 2, &plain, 1);
    CHECK_NEAR(p[0], -0.001, 1e-10);
    CHECK_NEAR(p[1], 0.001, 1e-7);
}

/* Lazy Adam by a list of rows (sq_adam_update_rows) against the lazy
 * pieces' marked rows (sq_adam_update_pieces, the trainer's CPU path):
 * the same bits in every element, the unlisted rows untouched, for a
 * list in any order with SQ_ADAM_NO_ROW entries among its rows. */
#define AR_ROWS 37
#define AR_W 5
UNIT_TEST(test_ops_adam_rows)
{
    const sq_ctx cx = sq_ctx_cpu();
    enum { N = AR_ROWS * AR_W };
    float p0[N], g[N], m0[N], v0[N], pa[N], ga[N], ma[N], va[N], pb[N], mb[N], vb[N];
    uint32_t mark[AR_ROWS] = {0}, list[AR_ROWS + 4];
    size_t nl = 0;
    for (int i = 0; i < N; i++) {
        p0[i] = (float)sin(0.7 * i);
        m0[i] = (float)(1e-3 * (1 + i % 5));
        v0[i] = (float)(1e-4 * (1 + i % 3));
    }
    for (int r = AR_ROWS - 1; r >= 0; r--) { /* decreasing: any order */
        int on = r % 3 == 0 || r == 7;
        mark[r] = on ? 9 : 0;
        for (int j = 0; j < AR_W; j++)
            g[r * AR_W + j] = on ? (float)cos(1.3 * (r * AR_W + j)) : 0.0f;
        if (on)
            list[nl++] = (uint32_t)r;
        if (r == 20 || r == 0)
            list[nl++] = SQ_ADAM_NO_ROW;
    }
    for (int decoupled = 0; decoupled < 2; decoupled++) {
        sq_adam_cfg cfg = {1e-2, 0.9, 0.98, 1e-8, 0.1, decoupled, 1};
        const sq_adam_cfg *cfgs[1] = {&cfg};
        sq_adam_piece pc = {.off = 0, .a = 0, .b = AR_ROWS, .width = AR_W, .cfg = 0};
        memcpy(pa, p0, sizeof pa);
        memcpy(ga, g, sizeof ga);
        memcpy(ma, m0, sizeof ma);
        memcpy(va, v0, sizeof va);
        float *parts[1] = {ga};
        sq_adam_update_pieces(&cx, pa, ga, parts, NULL, 1, ma, va, &pc, 1, cfgs, 1, mark, 9, 4);
        memcpy(pb, p0, sizeof pb);
        memcpy(mb, m0, sizeof mb);
        memcpy(vb, v0, sizeof vb);
        sq_adam_update_rows(&cx, pb, g, mb, vb, AR_W, list, nl, &cfg, 4);
        CHECK(memcmp(pa, pb, sizeof pa) == 0 && memcmp(ma, mb, sizeof ma) == 0 &&
              memcmp(va, vb, sizeof va) == 0);
        int moved = 0, still = 1;
        for (int i = 0; i < N; i++) {
            if (mark[i / AR_W])
                moved += pb[i] != p0[i];
            else
                still &= pb[i] == p0[i] && mb[i] == m0[i] && vb[i] == v0[i];
        }
        CHECK(still);
        CHECK(moved > 0);
    }
}

UNIT_TEST(test_ops_grad_clip)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    double g[2] = {3, 4};
    CHECK_NEAR(sq_grad_norm_f64(cx, g, 2), 5, 1e-15);
    CHECK_NEAR(sq_grad_clip_f64(cx, g, 2, 10), 5, 1e-15); /* below: untouched */
    CHECK(g[0] == 3 && g[1] == 4);
    CHECK_NEAR(sq_grad_clip_f64(cx, g, 2, 1), 5, 1e-15);
    CHECK_NEAR(g[0], 0.6, 1e-6);
    CHECK_NEAR(g[1], 0.8, 1e-6);
    CHECK_NEAR(sq_grad_norm_f64(cx, g, 2), 1, 1e-6);
    /* float, many elements (several blocks, uneven last block) */
    size_t n = 1001;
    float *gf = malloc(n * sizeof *gf);
    for (size_t i = 0; i < n; i++)
        gf[i] = 2.0f;
    CHECK_NEAR(sq_grad_clip(cx, gf, n, 2.0), 2 * sqrt(1001.0), 1e-12);
    CHECK_NEAR(sq_grad_norm(cx, gf, n), 2.0, 1e-5);
    gf[7] = NAN; /* divergence: reported, nothing scaled */
    CHECK(isnan(sq_grad_clip(cx, gf, n, 1.0)));
    CHECK(gf[0] == gf[1]);
    CHECK_EQ(sq_grad_norm(cx, gf, 0) == 0, 1);
    free(gf);
}

/* ------------------------------------------------------------------------ */

/* Every op once with one thread and once with four, set through OpenMP's
 * default and through the context: bitwise equal. */
#ifdef _OPENMP
static void run_all_float(float *res, size_t *nres, int T, int C, const int *off, int B,
                          int threads)
{
    sq_ctx cx0 = sq_ctx_cpu();
    cx0.threads = threads;
    const sq_ctx *cx = &cx0;
    sq_rng r;
    sq_rng_seed(&r, 12, 0);
    int H = 2, V1 = 97, ld = C;
    size_t n = (size_t)T * C, k = 0;
    float *x = malloc(n * sizeof *x), *w = malloc(n * sizeof *w), *y = calloc(n, sizeof *y);
    float *E = malloc((size_t)V1 * C * sizeof *E), *dE = calloc((size_t)V1 * C, sizeof *dE);
    float *dx = calloc(n, sizeof *dx), *mean = calloc((size_t)T, sizeof *mean);
    float *rstd = calloc((size_t)T, sizeof *rstd), *lw = malloc((size_t)C * sizeof *lw);
    float *lb = calloc((size_t)C, sizeof *lb), *dlw = calloc((size_t)C, sizeof *dlw);
    float *dlb = calloc((size_t)C, sizeof *dlb);
    size_t an = sq_attention_cache_size(off, B, H);
    float *att = calloc(an, sizeof *att);
    float *scratch = calloc(sq_ce_scratch_size(64, V1, C), sizeof *scratch);
    int *ids = malloc((size_t)T * sizeof *ids);
    for (size_t i = 0; i < n; i++) {
        x[i] = (float)sq_rng_normal(&r);
        w[i] = (float)sq_rng_normal(&r);
    }
    for (size_t i = 0; i < (size_t)V1 * C; i++)
        E[i] = (float)sq_rng_normal(&r) * 0.1f;
    for (int c = 0; c < C; c++)
        lw[c] = 1 + 0.1f * (float)c;
    for (int i = 0; i < T; i++)
        ids[i] = 1 + (int)sq_rng_below(&r, (uint64_t)(V1 - 1));
    sq_layernorm_forward(cx, y, mean, rstd, x, lw, lb, T, C, 1e-8f);
    sq_layernorm_backward(cx, dx, dlw, dlb, w, x, lw, mean, rstd, T, C);
    sq_embedding_backward(cx, dE, w, ids, T, C, 2.0f);
    sq_scatter_add_rows(cx, dE, x, ids, T, C);
    sq_attention_forward(cx, y, att, x, w, x, ld, off, B, H, C, 1);
    sq_attention_backward(cx, dx, dx, dx, w, y, x, w, x, att, ld, off, B, H, C, 1);
    int count;
    double loss = sq_ce_full(cx, dx, dE, scratch, y, E, NULL, ids, T, C, V1, 64, 1, &count);
    double norm = sq_grad_norm(cx, dx, n);
    memcpy(res + k, dx, n * sizeof *dx), k += n;
    memcpy(res + k, dE, (size_t)V1 * C * sizeof *dE), k += (size_t)V1 * C;
    memcpy(res + k, dlw, (size_t)C * sizeof *dlw), k += (size_t)C;
    memcpy(res + k, dlb, (size_t)C * sizeof *dlb), k += (size_t)C;
    memcpy(res + k, att, an * sizeof *att), k += an;
    res[k++] = (float)loss;
    res[k++] = (float)norm;
    *nres = k;
    free(x); free(w); free(y); free(E); free(dE); free(dx); free(mean); free(rstd);
    free(lw); free(lb); free(dlw); free(dlb); free(att); free(scratch); free(ids);
}
#endif

UNIT_TEST(test_ops_deterministic_threads)
{
#ifndef _OPENMP
    SKIP("built without OpenMP");
#else
    int len[40], off[41], B = 40, C = 36;
    sq_rng r;
    sq_rng_seed(&r, 13, 0);
    for (int b = 0; b < B; b++)
        len[b] = 1 + (int)sq_rng_below(&r, 50);
    int T = sq_pack_offsets(off, len, B);
    size_t cap = (size_t)T * C * 2 + 97 * (size_t)C + 2 * (size_t)C + 2 * 2500 * 40 + 2;
    float *a = malloc(cap * sizeof *a), *b1 = malloc(cap * sizeof *b1);
    float *c1 = malloc(cap * sizeof *c1), *c4 = malloc(cap * sizeof *c4);
    size_t na, nb, nc1, nc4;
    int nt = omp_get_max_threads();
    omp_set_num_threads(1);
    run_all_float(a, &na, T, C, off, B, 0);
    run_all_float(c4, &nc4, T, C, off, B, 4); /* the context overrides */
    omp_set_num_threads(4);
    run_all_float(b1, &nb, T, C, off, B, 0);
    run_all_float(c1, &nc1, T, C, off, B, 1);
    omp_set_num_threads(nt);
    CHECK_EQ(na, nb);
    CHECK_EQ(na, nc1);
    CHECK_EQ(na, nc4);
    CHECK(memcmp(a, b1, na * sizeof *a) == 0);
    CHECK(memcmp(a, c1, na * sizeof *a) == 0);
    CHECK(memcmp(a, c4, na * sizeof *a) == 0);
    free(a); free(b1); free(c1); free(c4);
#endif
}

/* ------------------------------------------------------------------------ */
/* Memory ops and GEMM                                                      */

UNIT_TEST(test_ops_zero_copy)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    sq_rng r;
    sq_rng_seed(&r, 20, 0);
    enum { N = 1003 };
    float *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
    double *d = gc_normal(&r, N, 1), *e = gc_zeros(N);
    for (int i = 0; i < N; i++)
        a[i] = (float)sq_rng_normal(&r), b[i] = -1;
    sq_copy(cx, b, a, N - 1);
    CHECK(memcmp(a, b, (N - 1) * sizeof *a) == 0);
    CHECK(b[N - 1] == -1); /* nothing past n */
    sq_zero(cx, b + 1, N - 2);
    CHECK(b[0] == a[0] && b[N - 1] == -1);
    int nz = 0;
    for (int i = 1; i < N - 1; i++)
        nz += b[i] != 0;
    CHECK_EQ(nz, 0);
    sq_copy_f64(cx, e, d, N);
    CHECK(memcmp(d, e, N * sizeof *d) == 0);
    sq_zero_f64(cx, e, N);
    CHECK(gc_dot(e, e, N) == 0);
    sq_zero(cx, NULL, 0); /* n = 0 touches nothing */
    sq_copy(cx, NULL, NULL, 0);
    free(a); free(b); free(d); free(e);
}

UNIT_TEST(test_ops_fill_copy_add_2d)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    sq_rng r;
    sq_rng_seed(&r, 21, 0);
    enum { ROWS = 7, COLS = 5, LDD = 9, LDS = 6 };
    double src[ROWS * LDS], dst[ROWS * LDD], ref[ROWS * LDD];
    for (int i = 0; i < ROWS * LDS; i++)
        src[i] = sq_rng_normal(&r);
    for (int bcast = 0; bcast <= 1; bcast++) {
        int lds = bcast ? 0 : LDS;
        /* fill: the view only, the columns past cols keep their values */
        for (int i = 0; i < ROWS * LDD; i++)
            dst[i] = ref[i] = 100 + i;
        sq_fill2d_f64(cx, dst, LDD, ROWS, COLS, 2.5);
        for (int rr = 0; rr < ROWS; rr++)
            for (int c = 0; c < COLS; c++)
                ref[rr * LDD + c] = 2.5;
        CHECK(memcmp(dst, ref, sizeof dst) == 0);
        /* copy */
        sq_copy2d_f64(cx, dst, LDD, src, lds, ROWS, COLS);
        for (int rr = 0; rr < ROWS; rr++)
            for (int c = 0; c < COLS; c++)
                ref[rr * LDD + c] = src[rr * lds + c];
        CHECK(memcmp(dst, ref, sizeof dst) == 0);
        /* add (dst holds src now: the result is 2 src) */
        sq_add2d_f64(cx, dst, LDD, src, lds, ROWS, COLS);
        for (int rr = 0; rr < ROWS; rr++)
            for (int c = 0; c < COLS; c++)
                ref[rr * LDD + c] += src[rr * lds + c];
        CHECK(memcmp(dst, ref, sizeof dst) == 0);
        for (int c = 0; c < COLS; c++) /* broadcast: every row is row 0 */
            CHECK(dst[(ROWS - 1) * LDD + c] == (bcast ? 2 * src[c] : 2 * src[(ROWS - 1) * LDS + c]));
    }
    /* float build, contiguous */
    float fs[ROWS * COLS], fd[ROWS * COLS];
    for (int i = 0; i < ROWS * COLS; i++)
        fs[i] = (float)src[i], fd[i] = 1;
    sq_add2d(cx, fd, COLS, fs, COLS, ROWS, COLS);
    int bad = 0;
    for (int i = 0; i < ROWS * COLS; i++)
        bad += fd[i] != 1 + fs[i];
    sq_copy2d(cx, fd, COLS, fs, 0, ROWS, COLS);
    for (int i = 0; i < ROWS * COLS; i++)
        bad += fd[i] != fs[i % COLS];
    sq_fill2d(cx, fd, COLS, ROWS, COLS, -3.0f);
    for (int i = 0; i < ROWS * COLS; i++)
        bad += fd[i] != -3.0f;
    CHECK_EQ(bad, 0);
}

UNIT_TEST(test_ops_gather_scatter_rows)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    sq_rng r;
    sq_rng_seed(&r, 22, 0);
    enum { NIN = 11, N = 17, C = 37 }; /* C spans several column blocks */
    int rows[N];
    for (int i = 0; i < N; i++)
        rows[i] = (int)sq_rng_below(&r, NIN); /* 17 of 11: duplicates */
    rows[3] = rows[9] = rows[14] = 4;
    double *in = gc_normal(&r, (size_t)NIN * C, 1), *g = gc_zeros((size_t)N * C);
    double *y = gc_normal(&r, (size_t)N * C, 1), *s = gc_zeros((size_t)NIN * C);
    sq_gather_rows_f64(cx, g, in, rows, N, C);
    int bad = 0;
    for (int i = 0; i < N; i++)
        bad += memcmp(g + (size_t)i * C, in + (size_t)rows[i] * C, C * sizeof *g) != 0;
    CHECK_EQ(bad, 0);
    /* scatter-add is the adjoint of the gather: <gather x, y> = <x, scatter y>;
     * and it is the reference's loop in i order, bitwise */
    double *sr = gc_zeros((size_t)NIN * C);
    sq_scatter_add_rows_f64(cx, s, y, rows, N, C);
    ref_scatter_add_rows(sr, y, rows, N, C);
    CHECK_NEAR(gc_dot(g, y, (size_t)N * C), gc_dot(in, s, (size_t)NIN * C), 1e-12);
    CHECK(memcmp(s, sr, (size_t)NIN * C * sizeof *s) == 0);
    free(sr);
    /* float: bitwise the serial loop in i order (duplicates included), on
     * top of what out held */
    float *fy = gc_to_float(y, (size_t)N * C), *fo = gc_to_float(in, (size_t)NIN * C);
    float *fr = gc_to_float(in, (size_t)NIN * C);
    for (int i = 0; i < N; i++)
        for (int c = 0; c < C; c++)
            fr[(size_t)rows[i] * C + c] += fy[(size_t)i * C + c];
    sq_scatter_add_rows(cx, fo, fy, rows, N, C);
    CHECK(memcmp(fo, fr, (size_t)NIN * C * sizeof *fo) == 0);
    /* rows NULL: row i, for both */
    float *fg = calloc((size_t)N * C, sizeof *fg);
    sq_gather_rows(cx, fg, fy, NULL, N, C);
    CHECK(memcmp(fg, fy, (size_t)N * C * sizeof *fg) == 0);
    sq_scatter_add_rows(cx, fg, fy, NULL, N, C);
    bad = 0;
    for (size_t i = 0; i < (size_t)N * C; i++)
        bad += fg[i] != fy[i] + fy[i];
    CHECK_EQ(bad, 0);
    free(in); free(g); free(y); free(s); free(fy); free(fo); free(fr); free(fg);
}

UNIT_TEST(test_ops_gemm)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    sq_rng r;
    sq_rng_seed(&r, 23, 0);
    enum { M = 7, N = 5, K = 9, PAD = 3 };
    for (int ta = 0; ta <= 1; ta++)
        for (int tb = 0; tb <= 1; tb++) {
            /* op(A) [M, K], op(B) [K, N], every stride padded */
            int ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
            int lda = ac + PAD, ldb = bc + PAD, ldc = N + PAD;
            double *A = gc_normal(&r, (size_t)ar * lda, 1), *B = gc_normal(&r, (size_t)br * ldb, 1);
            double *Cm = gc_normal(&r, (size_t)M * ldc, 1), *C0 = gc_zeros((size_t)M * ldc);
            memcpy(C0, Cm, (size_t)M * ldc * sizeof *C0);
            double alpha = 0.75, beta = -0.5, worst = 0;
            sq_gemm_f64(cx, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, Cm, ldc);
            double *want = gc_zeros((size_t)M * ldc);
            memcpy(want, C0, (size_t)M * ldc * sizeof *want);
            ref_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, want, ldc);
            for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++)
                    worst = fmax(worst, fabs(Cm[(size_t)i * ldc + j] - want[(size_t)i * ldc + j]));
            CHECK(worst < 1e-12);
            int bad = 0; /* the padding columns of C are left alone */
            for (int i = 0; i < M; i++)
                for (int j = N; j < ldc; j++)
                    bad += Cm[(size_t)i * ldc + j] != C0[(size_t)i * ldc + j];
            CHECK_EQ(bad, 0);
            /* float, beta = 0: C's old contents (NaN here) are ignored */
            float *fA = gc_to_float(A, (size_t)ar * lda), *fB = gc_to_float(B, (size_t)br * ldb);
            float *fC = malloc((size_t)M * ldc * sizeof *fC);
            for (int i = 0; i < M * ldc; i++)
                fC[i] = NAN;
            sq_gemm(cx, ta, tb, M, N, K, 1.0f, fA, lda, fB, ldb, 0.0f, fC, ldc);
            /* against the reference on the float inputs (beta 0: want's NaN unread) */
            for (size_t i = 0; i < (size_t)ar * lda; i++)
                A[i] = fA[i];
            for (size_t i = 0; i < (size_t)br * ldb; i++)
                B[i] = fB[i];
            for (int i = 0; i < M * ldc; i++)
                want[i] = NAN;
            ref_gemm(ta, tb, M, N, K, 1, A, lda, B, ldb, 0, want, ldc);
            double fw = 0;
            for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++) {
                    double d = fabs(fC[(size_t)i * ldc + j] - want[(size_t)i * ldc + j]);
                    if (!(d <= fw))
                        fw = d;
                }
            CHECK(fw < 1e-4);
            free(A); free(B); free(Cm); free(C0); free(want); free(fA); free(fB); free(fC);
        }
}

/* The _to backwards (ops.h CONVENTIONS) write dinp over garbage with the
 * bits of the adding backward into a zeroed dinp, and still add to dw and
 * db; the positional embedding's backward without dinp gives the same
 * dpe. T x C rows into OC outputs, in each build. */
#define BACKWARD_TO_CASE(real, SFX)                                                          \
    static int backward_to_##real(unit_ctx *t, sq_rng *r)                                   \
    {                                                                                        \
        const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;                                         \
        enum { T = 29, C = 21, OC = 35, N = 4 * T * OC };                                    \
        real *v = malloc(N * 12 * sizeof *v), mean[T], rstd[T];                              \
        int pos[T], ok = v != NULL;                                                          \
        CHECK(ok);                                                                           \
        if (!ok)                                                                             \
            return 0;                                                                        \
        for (size_t i = 0; i < (size_t)N * 12; i++)                                          \
            v[i] = (real)sq_rng_normal(r);                                                   \
        for (int i = 0; i < T; i++)                                                          \
            pos[i] = i % 5;                                                                  \
        real *x = v, *w = v + N, *dout = v + 2 * N, *a = v + 3 * N, *b = v + 4 * N;          \
        real *dwa = v + 5 * N, *dwb = v + 6 * N, *dba = v + 7 * N, *dbb = v + 8 * N;         \
        real *y = v + 9 * N;                                                                 \
        memcpy(dwb, dwa, N * sizeof *v);                                                     \
        memcpy(dbb, dba, N * sizeof *v);                                                     \
        sq_layernorm_forward##SFX(cx, y, mean, rstd, x, w, dout, T, C, (real)1e-5);          \
        memset(a, 0, N * sizeof *a);                                                         \
        sq_layernorm_backward##SFX(cx, a, dwa, dba, dout, x, w, mean, rstd, T, C);           \
        sq_layernorm_backward_to##SFX(cx, b, dwb, dbb, dout, x, w, mean, rstd, T, C);        \
        CHECK(memcmp(a, b, (size_t)T * C * sizeof *a) == 0);                                 \
        CHECK(memcmp(dwa, dwb, N * sizeof *v) == 0 && memcmp(dba, dbb, N * sizeof *v) == 0); \
        memset(a, 0, N * sizeof *a);                                                         \
        memcpy(b, y, N * sizeof *b);                                                         \
        sq_linear_backward##SFX(cx, a, dwa, dba, dout, x, w, T, C, OC);                      \
        sq_linear_backward_to##SFX(cx, b, dwb, dbb, dout, x, w, T, C, OC);                   \
        CHECK(memcmp(a, b, (size_t)T * C * sizeof *a) == 0);                                 \
        CHECK(memcmp(dwa, dwb, N * sizeof *v) == 0 && memcmp(dba, dbb, N * sizeof *v) == 0); \
        memset(a, 0, N * sizeof *a);                                                         \
        memcpy(b, y, N * sizeof *b);                                                         \
        sq_gelu_backward##SFX(cx, a, dout, x, (size_t)T * C);                                \
        sq_gelu_backward_to##SFX(cx, b, dout, x, (size_t)T * C);                             \
        CHECK(memcmp(a, b, (size_t)T * C * sizeof *a) == 0);                                 \
        sq_posemb_backward##SFX(cx, a, dwa, dout, pos, T, C);                                \
        sq_posemb_backward##SFX(cx, NULL, dwb, dout, pos, T, C);                             \
        CHECK(memcmp(dwa, dwb, N * sizeof *v) == 0);                                         \
        free(v);                                                                             \
        return 1;                                                                            \
    }
BACKWARD_TO_CASE(float, )
BACKWARD_TO_CASE(double, _f64)
#undef BACKWARD_TO_CASE

UNIT_TEST(test_ops_backward_to)
{
    sq_rng r;
    sq_rng_seed(&r, 91, 3);
    CHECK(backward_to_float(t, &r));
    CHECK(backward_to_double(t, &r));
}
