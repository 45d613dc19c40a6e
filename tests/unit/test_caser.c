/* Unit tests for lib/ops/conv.c (Caser's horizontal and vertical
 * convolutions) and the caser model (lib/model/caser.c).
 *
 * The ops, over windows of L in {1, 2, 3, 5} rows, F filters, output rows
 * at a stride wider than the op's columns and at a column offset:
 *   - the double build equals an explicit loop over conv.h's equations
 *     (tests/ref) to 1e-12 (the horizontal's arg too), and writes no column but its own;
 *   - dx, dw and db of the double build match fourth-order central finite
 *     differences (gradcheck.h) to 1e-6, the backward adding into non-zero
 *     buffers; for the horizontal op (a relu and a max) the elements whose
 *     differences change a recorded maximum or a relu's side are skipped
 *     and counted (at most a tenth);
 *   - the float build agrees with the double one to 1e-5 (normwise);
 *   - forward and backward are bitwise the same for 1 and 2 threads.
 * The model: its options and defaults, its tensors for a config (nh or nv
 * 0 leaves its filters out, both 0 is refused), the whole model's
 * gradients through flat.c's loss (flat_gradcheck: every tensor, CE and
 * BCE, targets all, last and random, with dropout, without either kind of
 * filter, a window longer than every sequence), and the window an entry
 * reads: its state in a packed batch equals that of its L newest items
 * scored alone. SQ_TEST_VERBOSE=1 prints the measured errors. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "conv.h"
#include "flat.h"
#include "flat_check.h"
#include "gradcheck.h"
#include "ops.h"
#include "ref_ops.h"
#include "rng.h"
#include "sasrec.h"
#include "unit.h"

#define GRAD_TOL 1e-6 /* finite differences vs backward, double build */
#define REF_TOL 1e-12 /* double build vs the explicit loop */
#define F32_TOL 1e-5  /* float build vs double build, normwise */

extern const sq_flat_def sq_flat_caser;
extern const sq_model_def sq_model_caser;

#define UPD(w, e) do { double e_ = (e); if (!(e_ <= (w))) (w) = e_; } while (0)

/* ------------------------------------------------------------------------ */
/* The ops                                                                  */

/* f = sum(out * wgt) over the op's columns [c0, c0 + width) of rows of
 * stride ldo. */
typedef struct {
    int vert, n, L, C, F, ldo, c0;
    double *x, *w, *b, *out, *wgt;
    int *arg, *arg0; /* horizontal: this evaluation's maxima, the base's */
    int crossed;     /* an evaluation's maxima differed from the base's */
} cv_ctx;

static int cv_width(const cv_ctx *c)
{
    return c->vert ? c->F * c->C : c->L * c->F;
}

static double cv_obj(void *p)
{
    const sq_ctx cx = sq_ctx_cpu();
    cv_ctx *c = p;
    if (c->vert)
        sq_vconv_forward_f64(&cx, c->out + c->c0, c->ldo, c->x, c->w, c->b, c->n, c->L, c->C,
                             c->F);
    else
        sq_hconv_forward_f64(&cx, c->out + c->c0, c->ldo, c->arg, c->x, c->w, c->b, c->n,
                             c->L, c->C, c->F);
    if (!c->vert && c->arg0)
        c->crossed |= memcmp(c->arg, c->arg0, (size_t)c->n * c->L * c->F * sizeof(int)) != 0;
    double s = 0;
    for (int i = 0; i < c->n; i++)
        s += gc_dot(c->out + (size_t)i * c->ldo + c->c0, c->wgt + (size_t)i * c->ldo + c->c0,
                    (size_t)cv_width(c));
    return s;
}

/* gc_check element by element, skipping (and counting) the elements whose
 * differences change a maximum or a relu's side. */
static double cv_check(cv_ctx *c, double *x, const double *g, size_t n, int *skipped,
                       int *checked)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        c->crossed = 0;
        double e = gc_check(cv_obj, c, x + i, g + i, 1);
        if (c->crossed) {
            ++*skipped;
            continue;
        }
        ++*checked;
        UPD(worst, e);
    }
    return worst;
}

static size_t w_size(const cv_ctx *c)
{
    return c->vert ? (size_t)c->F * c->L : sq_hconv_size(c->L, c->F, c->C);
}

static size_t b_size(const cv_ctx *c)
{
    return c->vert ? (size_t)c->F : (size_t)c->L * c->F;
}

/* The float build (threads 1 and 2) against the double results: out and
 * the gradients gx, gw, gb; 1 and 2 threads bitwise the same. */
static double cv_f32(unit_ctx *t, const cv_ctx *c, const double *out, const double *gx,
                     const double *gw, const double *gb)
{
    size_t nx = (size_t)c->n * c->L * c->C, no = (size_t)c->n * c->ldo;
    size_t nw = w_size(c), nb = b_size(c);
    float *fx = gc_to_float(c->x, nx), *fw = gc_to_float(c->w, nw), *fb = gc_to_float(c->b, nb);
    float *fg = gc_to_float(c->wgt, no), *res[2];
    size_t total = no + nx + nw + nb;
    int *arg = calloc((size_t)c->n * c->L * c->F + 1, sizeof *arg);
    for (int th = 0; th < 2; th++) {
        sq_ctx cx = sq_ctx_cpu();
        cx.threads = th + 1;
        float *r = res[th] = calloc(total, sizeof *r);
        float *o = r, *dx = r + no, *dw = dx + nx, *db = dw + nw;
        for (size_t i = 0; i < no; i++) /* the sentinels outside the op's columns */
            o[i] = (float)out[i];
        if (c->vert) {
            sq_vconv_forward(&cx, o + c->c0, c->ldo, fx, fw, fb, c->n, c->L, c->C, c->F);
            sq_vconv_backward(&cx, dx, dw, db, fg + c->c0, c->ldo, fx, fw, c->n, c->L, c->C,
                              c->F);
        } else {
            sq_hconv_forward(&cx, o + c->c0, c->ldo, arg, fx, fw, fb, c->n, c->L, c->C, c->F);
            sq_hconv_backward(&cx, dx, dw, db, fg + c->c0, c->ldo, arg, fx, fw, c->n, c->L,
                              c->C, c->F);
        }
    }
    CHECK(memcmp(res[0], res[1], total * sizeof(float)) == 0);
    float *o = res[0], *dx = o + no, *dw = dx + nx, *db = dw + nw;
    double e = fmax(gc_rel_diff(o, out, no), gc_rel_diff(dx, gx, nx));
    e = fmax(e, fmax(gc_rel_diff(dw, gw, nw), gc_rel_diff(db, gb, nb)));
    free(fx); free(fw); free(fb); free(fg); free(res[0]); free(res[1]); free(arg);
    return e;
}

typedef struct {
    double ref, grad, f32;
    int skipped, checked;
} op_worst;

/* x -= y: what a backward added onto non-zero buffers (in place). */
static void sub_from(double *x, const double *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] -= y[i];
}

static double *copy_of(const double *x, size_t n)
{
    double *y = gc_zeros(n);
    memcpy(y, x, n * sizeof *y);
    return y;
}

static int *copy_of_int(const int *x, size_t n)
{
    int *y = calloc(n + 1, sizeof *y);
    if (y)
        memcpy(y, x, n * sizeof *y);
    return y;
}

/* The reference, untouched columns, gradients and float build of one
 * random instance. */
static void check_op(unit_ctx *t, sq_rng *r, int vert, int n, int L, int C, int F, int fd,
                     op_worst *wo)
{
    const sq_ctx cx = sq_ctx_cpu();
    cv_ctx c = {.vert = vert, .n = n, .L = L, .C = C, .F = F};
    c.c0 = 3;
    c.ldo = c.c0 + cv_width(&c) + 2;
    size_t nx = (size_t)n * L * C, no = (size_t)n * c.ldo, nw = w_size(&c), nb = b_size(&c);
    size_t na = (size_t)n * L * F;
    c.x = gc_normal(r, nx, 1);
    c.w = gc_normal(r, nw, 0.5);
    c.b = gc_normal(r, nb, 0.5);
    c.out = gc_normal(r, no, 1); /* sentinels outside the op's columns */
    c.wgt = gc_normal(r, no, 1);
    c.arg = calloc(na + 1, sizeof *c.arg);
    c.arg0 = NULL;
    double *out0 = copy_of(c.out, no), *ref = copy_of(c.out, no);
    int *rarg = calloc(na + 1, sizeof *rarg);
    cv_obj(&c);
    if (vert)
        ref_vconv(ref + c.c0, c.ldo, c.x, c.w, c.b, n, L, C, F);
    else
        ref_hconv(ref + c.c0, c.ldo, rarg, c.x, c.w, c.b, n, L, C, F);
    double e = gc_rel_diff_f64(c.out, ref, no);
    CHECK(e < REF_TOL);
    UPD(wo->ref, e);
    CHECK(vert || memcmp(rarg, c.arg, na * sizeof *rarg) == 0);
    for (int i = 0; i < n; i++) /* the columns outside the op's are untouched */
        for (int j = 0; j < c.ldo; j++)
            if (j < c.c0 || j >= c.c0 + cv_width(&c))
                CHECK(c.out[(size_t)i * c.ldo + j] == out0[(size_t)i * c.ldo + j]);

    /* gradients, added into non-zero buffers */
    double *dx0 = gc_normal(r, nx, 1), *dw0 = gc_normal(r, nw, 1), *db0 = gc_normal(r, nb, 1);
    double *dx = copy_of(dx0, nx), *dw = copy_of(dw0, nw), *db = copy_of(db0, nb);
    if (vert)
        sq_vconv_backward_f64(&cx, dx, dw, db, c.wgt + c.c0, c.ldo, c.x, c.w, n, L, C, F);
    else
        sq_hconv_backward_f64(&cx, dx, dw, db, c.wgt + c.c0, c.ldo, c.arg, c.x, c.w, n, L, C,
                              F);
    sub_from(dx, dx0, nx);
    sub_from(dw, dw0, nw);
    sub_from(db, db0, nb);
    const double *gx = dx, *gw = dw, *gb = db;
    c.arg0 = copy_of_int(c.arg, na);
    if (fd) { /* the finite differences (small instances) */
        e = fmax(cv_check(&c, c.x, gx, nx, &wo->skipped, &wo->checked),
                 cv_check(&c, c.w, gw, nw, &wo->skipped, &wo->checked));
        e = fmax(e, cv_check(&c, c.b, gb, nb, &wo->skipped, &wo->checked));
        CHECK(e < GRAD_TOL);
        UPD(wo->grad, e);
    }

    cv_obj(&c);
    e = cv_f32(t, &c, c.out, gx, gw, gb);
    CHECK(e < F32_TOL);
    UPD(wo->f32, e);
    if (t->failed && getenv("SQ_TEST_VERBOSE"))
        fprintf(stderr, "    (vert=%d n=%d L=%d C=%d F=%d)\n", vert, n, L, C, F);
    free(c.x); free(c.w); free(c.b); free(c.out); free(c.wgt); free(c.arg); free(c.arg0);
    free(out0); free(ref); free(rarg); free(dx0); free(dw0); free(db0); free(dx); free(dw);
    free(db);
}

UNIT_TEST(test_caser_conv_ops)
{
    static const int Ls[] = {1, 2, 3, 5};
    sq_rng r;
    sq_rng_seed(&r, 401, 0);
    op_worst wo[2];
    memset(wo, 0, sizeof wo);
    for (int vert = 0; vert < 2; vert++) {
        for (size_t i = 0; i < sizeof Ls / sizeof Ls[0]; i++)
            for (int trial = 0; trial < 3; trial++)
                check_op(t, &r, vert, 1 + trial * 2, Ls[i], 3 + trial % 2, 1 + trial, 1,
                         &wo[vert]);
        /* large enough for the threads to split it: bitwise the same */
        check_op(t, &r, vert, 64, 5, 16, 8, 0, &wo[vert]);
    }
    /* the horizontal's maxima skip a few elements, never many */
    CHECK(wo[0].checked > 0 && wo[0].skipped * 10 <= wo[0].checked + wo[0].skipped);
    CHECK_EQ(wo[1].skipped, 0);
    gc_note(t->name, "hconv vs loop", wo[0].ref);
    gc_note(t->name, "hconv grad", wo[0].grad);
    gc_note(t->name, "hconv f32 vs f64", wo[0].f32);
    gc_note(t->name, "vconv vs loop", wo[1].ref);
    gc_note(t->name, "vconv grad", wo[1].grad);
    gc_note(t->name, "vconv f32 vs f64", wo[1].f32);
    if (getenv("SQ_TEST_VERBOSE"))
        printf("    hconv: %d elements checked, %d at kinks skipped\n", wo[0].checked,
               wo[0].skipped);
}

/* ------------------------------------------------------------------------ */
/* The model                                                                */

/* A config buffer for sq_caser_config (private to caser.c). */
typedef union {
    sq_flat_head h;
    double d[32];
} cfg_buf;

static int caser_config(cfg_buf *c, const char *given, uint32_t n_items, uint32_t n_users,
                        sq_err *e)
{
    sq_data_dims d = {.n_items = n_items, .n_users = n_users};
    return sq_model_caser.config(c, given, &d, e);
}

static size_t tensor_size(const sq_tensor_set *s, const char *name)
{
    int i = sq_tensors_find(s, name);
    return i < 0 ? (size_t)-1 : s->size[i];
}

UNIT_TEST(test_caser_config)
{
    cfg_buf c;
    sq_err e = {0};
    CHECK(sizeof c >= sq_model_caser.cfg_size);
    CHECK_EQ(caser_config(&c, NULL, 30, 7, &e), 0);
    CHECK_EQ(c.h.max_len, 5);
    CHECK_EQ(c.h.n_users, 7u);
    CHECK(c.h.def == &sq_flat_caser);
    sq_modelfile mf;
    memset(&mf, 0, sizeof mf);
    CHECK_EQ(sq_model_caser.config_write(&c, &mf, &e), 0);
    char v[32];
    static const char *const kv[][2] = {{"dim", "64"}, {"max_len", "5"}, {"nh", "16"},
                                        {"nv", "4"}, {"dropout", "0.5"}, {"n_users", "7"}};
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++) {
        CHECK(sq_modelfile_get(&mf, kv[i][0], v, sizeof v));
        CHECK_STR(v, kv[i][1]);
    }
    sq_modelfile_free(&mf);
    /* the tensors: conv_h holds every height's filters, fc1 reads both kinds */
    sq_tensor_set s;
    CHECK_EQ(sq_flat_caser.tensors(&c, &s, &e), 0);
    CHECK_EQ(tensor_size(&s, "item_emb"), 31 * 64);
    CHECK_EQ(tensor_size(&s, "user_emb"), 7 * 64);
    CHECK_EQ(tensor_size(&s, "conv_h"), 16 * 15 * 64);
    CHECK_EQ(tensor_size(&s, "conv_h_b"), 5 * 16);
    CHECK_EQ(tensor_size(&s, "conv_v"), 4 * 5);
    CHECK_EQ(tensor_size(&s, "fc1_w"), 64 * (4 * 64 + 5 * 16));
    CHECK_EQ(tensor_size(&s, "fc2_w"), 64 * 128);
    CHECK_EQ(caser_config(&c, "nh=0\n", 30, 7, &e), 0);
    CHECK_EQ(sq_flat_caser.tensors(&c, &s, &e), 0);
    CHECK_EQ(tensor_size(&s, "conv_h"), 0);
    CHECK_EQ(tensor_size(&s, "fc1_w"), 64 * 4 * 64);
    CHECK_EQ(caser_config(&c, "nv=0\n", 30, 7, &e), 0);
    CHECK_EQ(sq_flat_caser.tensors(&c, &s, &e), 0);
    CHECK_EQ(tensor_size(&s, "conv_v_b"), 0);
    /* out of range, or no filter at all */
    static const char *const bad[][2] = {{"nh=0\nnv=0\n", "--nh"}, {"dim=0\n", "--dim"},
                                         {"max_len=0\n", "--max-len"}, {"nv=-1\n", "--nv"},
                                         {"dropout=1\n", "--dropout"}, {"heads=2\n", "--heads"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        e = (sq_err){0};
        CHECK_EQ(caser_config(&c, bad[i][0], 30, 7, &e), SQ_EX_USAGE);
        CHECK(strstr(e.msg, bad[i][1]) != NULL);
    }
}

/* Every tensor against finite differences through flat.c's loss. */
UNIT_TEST(test_caser_gradcheck)
{
    static const struct {
        const char *given;
        int target, loss;
    } runs[] = {
        {"dim=7\nmax_len=3\nnh=2\nnv=2\ndropout=0\n", SQ_TARGET_ALL, SQ_LOSS_CE},
        {"dim=6\nmax_len=3\nnh=2\nnv=2\ndropout=0.3\n", SQ_TARGET_ALL, SQ_LOSS_CE},
        {"dim=5\nmax_len=4\nnh=3\nnv=1\ndropout=0.2\n", SQ_TARGET_LAST, SQ_LOSS_CE},
        {"dim=6\nmax_len=3\nnh=2\nnv=2\ndropout=0\n", SQ_TARGET_RANDOM, SQ_LOSS_BCE},
        {"dim=5\nmax_len=9\nnh=2\nnv=2\ndropout=0\n", SQ_TARGET_ALL, SQ_LOSS_BCE},
        {"dim=6\nmax_len=3\nnh=0\nnv=3\ndropout=0\n", SQ_TARGET_ALL, SQ_LOSS_CE},
        {"dim=6\nmax_len=3\nnh=3\nnv=0\ndropout=0\n", SQ_TARGET_ALL, SQ_LOSS_CE},
    };
    double worst = 0;
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        cfg_buf c;
        sq_err e = {0};
        CHECK_EQ(caser_config(&c, runs[i].given, 9, 5, &e), 0);
        if (e.code)
            continue;
        UPD(worst, flat_gradcheck(t, &sq_flat_caser, &c, runs[i].target, runs[i].loss,
                                  GRAD_TOL));
    }
    gc_note(t->name, "whole model, every tensor", worst);
}

/* h of one packed batch (double build, no dropout) into out [n, D]. */
static void states_of(const sq_flat_f64 *m, const sq_packed *b, int D, double *out, sq_err *e)
{
    sq_flat_cap cap = {.B = b->B, .T = b->T, .n = b->n, .N = 3, .train = 0};
    void *w = NULL;
    if (sq_flat_caser.d.work_alloc(m, &cap, &w, e) == 0)
        memcpy(out, sq_flat_caser.d.forward(m, w, b, 0, 0, 0), (size_t)b->n * D * sizeof *out);
    sq_flat_caser.d.work_free(w);
}

/* Entry i of a packed batch reads the L newest items up to its row, of its
 * own sequence, and its sequence's user: its state is that of those items
 * scored alone, and a window shorter than L is the same window behind
 * padding tokens. */
UNIT_TEST(test_caser_window)
{
    enum { D = 4, L = 3 };
    cfg_buf c;
    sq_err e = {0};
    CHECK_EQ(caser_config(&c, "dim=4\nmax_len=3\nnh=2\nnv=2\n", 9, 4, &e), 0);
    sq_ctx cx = sq_ctx_cpu();
    sq_flat_f64 m;
    CHECK_EQ(sq_flat_alloc_f64(&m, &sq_flat_caser, &c, &cx, &e), 0);
    if (e.code)
        return;
    sq_flat_init_f64(&m, 5);
    sq_rng r;
    sq_rng_seed(&r, 9, 0);
    for (size_t i = 0; i < m.ts.total; i++) /* biases off 0: live relus */
        m.mem[i] += 0.2 * sq_rng_normal(&r);
    int ids[] = {1, 2, 3, 4, 5, 6, 7}, off[] = {0, 5, 7};
    uint32_t uid[] = {2, 0};
    sq_packed b = {.B = 2, .T = 7, .ids = ids, .off = off, .uid = uid, .n = 7, .views = 1};
    double all[7 * D], one[D], worst = 0;
    states_of(&m, &b, D, all, &e);
    for (int i = 0; i < 7; i++) {
        int s = i >= 5, lo = i - L + 1 > off[s] ? i - L + 1 : off[s], len = i + 1 - lo;
        int o1[] = {0, len}, row = len - 1;
        sq_packed a = {.B = 1, .T = len, .ids = ids + lo, .off = o1, .uid = uid + s, .n = 1,
                       .rows = &row, .views = 1};
        states_of(&m, &a, D, one, &e);
        worst = fmax(worst, gc_rel_diff_f64(one, all + i * D, D));
    }
    CHECK(worst < REF_TOL);
    /* [6, 7] and [0, 6, 7]: the same window */
    int padded[] = {0, 6, 7}, o3[] = {0, 3}, row = 2;
    sq_packed p = {.B = 1, .T = 3, .ids = padded, .off = o3, .uid = uid + 1, .n = 1,
                   .rows = &row, .views = 1};
    states_of(&m, &p, D, one, &e);
    CHECK(gc_rel_diff_f64(one, all + 6 * D, D) < REF_TOL);
    /* another user, another state */
    uint32_t other = 3;
    p.uid = &other;
    states_of(&m, &p, D, one, &e);
    CHECK(gc_rel_diff_f64(one, all + 6 * D, D) > 1e-6);
    CHECK_EQ(e.code, 0);
    gc_note(t->name, "entry vs its window alone", worst);
    sq_flat_free_f64(&m);
}
