/* test_flat.c - flat.c's plumbing on a toy flat model defined here: the
 * state of a row is W relu?(no) E[item at the row] + P[user] (a linear map
 * of the row's item embedding plus a user row), scored against an output
 * table with a bias. Checks the config (unknown options, ranges, n_users in
 * the model file), the gradients through flat.c's loss (CE with a bias,
 * BCE without one), and scoring (knows_user, batch invariance). */
#include <stdlib.h>
#include <string.h>

#include "flat.h"
#include "flat_check.h"
#include "modelfile.h"
#include "ops.h"
#include "sasrec.h"
#include "unit.h"

typedef struct {
    sq_flat_head h;
    int dim;
    int bias;
} sq_toy_config;

#define OFF(f) offsetof(sq_toy_config, f)
static const sq_opt toy_opts[] = {
    {.name = "dim", .type = SQ_OPT_INT, .offset = OFF(dim), .def = "4", .lo = 1, .hi = 64,
     .arg = "N", .help = "toy: width"},
    {.name = "max-len", .type = SQ_OPT_INT, .offset = OFF(h.max_len), .def = "3", .lo = 1,
     .hi = 64, .arg = "N", .help = "toy: newest items"},
    {.name = "bias", .type = SQ_OPT_INT, .offset = OFF(bias), .def = "1", .lo = 0, .hi = 1,
     .arg = "0|1", .help = "toy: an output bias"},
    {0},
};
#undef OFF

static const sq_tensor_desc toy_tensors[] = {
    {"emb", 100, 1, SQ_INIT_WEIGHT, "WC"},
    {"w", 101, 1, SQ_INIT_WEIGHT, "CC"},
    {"users", 102, 1, SQ_INIT_WEIGHT, "UC"},
    {"out", 103, 1, SQ_INIT_WEIGHT, "WC"},
    {"out_b", 104, 0, SQ_INIT_ZERO, "W"},
};

static int toy_tensors_of(const void *cfg, sq_tensor_set *s, sq_err *e)
{
    const sq_toy_config *c = cfg;
    sq_dims d = {{0}};
    sq_dims_set(&d, 'W', c->h.n_items + 1);
    sq_dims_set(&d, 'C', (uint64_t)c->dim);
    sq_dims_set(&d, 'U', c->h.n_users);
    memset(s, 0, sizeof *s);
    if (sq_tensors_add(s, toy_tensors, 4, &d, 1, 0, e) ||
        sq_tensors_add(s, toy_tensors + 4, 1, &d, c->bias, 0, e))
        return e->code;
    sq_tensors_layout(s);
    return 0;
}

/* The toy's math, once per precision. */
#define TOY_FNS(real, R)                                                                       \
    typedef struct {                                                                           \
        real *e, *h;                                                                           \
        int *ids;                                                                              \
    } R(toy_work);                                                                             \
    static int R(toy_work_alloc)(const R(sq_flat) *m, const sq_flat_cap *cap, void **w,       \
                                 sq_err *e)                                                    \
    {                                                                                          \
        int C = ((const sq_toy_config *)m->cfg)->dim;                                          \
        R(toy_work) *tw = calloc(1, sizeof *tw);                                               \
        *w = tw;                                                                               \
        if (!tw || !(tw->e = calloc((size_t)cap->n * C, sizeof(real))) ||                      \
            !(tw->h = calloc((size_t)cap->n * C, sizeof(real))) ||                             \
            !(tw->ids = calloc((size_t)cap->n * 2, sizeof(int))))                              \
            return sq_fail(e, SQ_EX_OSERR, "out of memory");                                   \
        return 0;                                                                              \
    }                                                                                          \
    static void R(toy_work_free)(void *w)                                                      \
    {                                                                                          \
        R(toy_work) *tw = w;                                                                   \
        if (tw) {                                                                              \
            free(tw->e);                                                                       \
            free(tw->h);                                                                       \
            free(tw->ids);                                                                     \
            free(tw);                                                                          \
        }                                                                                      \
    }                                                                                          \
    /* ids of the entries' rows, then their users */                                          \
    static void R(toy_ids)(const sq_packed *b, int *ids)                                       \
    {                                                                                          \
        for (int i = 0, s = 0; i < b->n; i++) {                                                \
            int row = b->rows ? b->rows[i] : i;                                                \
            while (b->off[s + 1] <= row)                                                       \
                s++;                                                                           \
            ids[i] = b->ids[row];                                                              \
            ids[b->n + i] = (int)b->uid[s];                                                    \
        }                                                                                      \
    }                                                                                          \
    static const real *R(toy_forward)(const R(sq_flat) *m, void *w, const sq_packed *b,       \
                                      int train, uint64_t seed, uint64_t step)                 \
    {                                                                                          \
        (void)train, (void)seed, (void)step;                                                   \
        R(toy_work) *tw = w;                                                                   \
        int C = ((const sq_toy_config *)m->cfg)->dim;                                          \
        R(toy_ids)(b, tw->ids);                                                                \
        R(sq_embedding_forward)(&m->cx, tw->e, m->t[0], tw->ids, b->n, C, 1);                 \
        R(sq_linear_forward)(&m->cx, tw->h, tw->e, m->t[1], NULL, b->n, C, C);                \
        R(sq_embedding_forward)(&m->cx, tw->e + 0, m->t[2], tw->ids + b->n, b->n, C, 1);      \
        R(sq_add2d)(&m->cx, tw->h, C, tw->e, C, b->n, C);                                      \
        R(sq_embedding_forward)(&m->cx, tw->e, m->t[0], tw->ids, b->n, C, 1);                 \
        return tw->h;                                                                          \
    }                                                                                          \
    static void R(toy_backward)(const R(sq_flat) *m, void *w, const sq_packed *b,             \
                                const real *dh, R(sq_flat) *g)                                 \
    {                                                                                          \
        R(toy_work) *tw = w;                                                                   \
        int C = ((const sq_toy_config *)m->cfg)->dim;                                          \
        real *de = tw->h; /* h is no longer needed */                                          \
        R(sq_embedding_backward)(&m->cx, g->t[2], dh, tw->ids + b->n, b->n, C, 1);            \
        R(sq_zero)(&m->cx, de, (size_t)b->n * C);                                              \
        R(sq_linear_backward)(&m->cx, de, g->t[1], NULL, dh, tw->e, m->t[1], b->n, C, C);     \
        R(sq_embedding_backward)(&m->cx, g->t[0], de, tw->ids, b->n, C, 1);                   \
    }

#define F32(name) name
#define F64(name) name##_f64
TOY_FNS(float, F32)
TOY_FNS(double, F64)

static const char *const toy_zero[] = {"emb", NULL};

static const sq_flat_def sq_flat_toy = {
    .name = "toy", .opts = toy_opts, .cfg_size = sizeof(sq_toy_config), .users = 1,
    .tensors = toy_tensors_of, .out = "out", .out_bias = "out_b", .zero_row0 = toy_zero,
    .init = {.xavier = 1},
    .f = {toy_work_alloc, toy_work_free, toy_forward, toy_backward},
    .d = {toy_work_alloc_f64, toy_work_free_f64, toy_forward_f64, toy_backward_f64},
};

SQ_FLAT_MODEL(toy, "a toy flat model (tests)", NULL);

UNIT_TEST(test_flat_config)
{
    sq_toy_config c;
    sq_err e = {0};
    sq_data_dims d = {.n_items = 9, .n_users = 5};
    CHECK_EQ(sq_model_toy.config(&c, "dim=8\n", &d, &e), 0);
    CHECK_EQ(c.dim, 8);
    CHECK_EQ(c.h.n_users, 5u);
    CHECK(c.h.def == &sq_flat_toy);
    e = (sq_err){0};
    CHECK_EQ(sq_model_toy.config(&c, "dim=8\nheads=2\n", &d, &e), SQ_EX_USAGE);
    CHECK(strstr(e.msg, "--heads is not an option of --model toy") != NULL);
    e = (sq_err){0};
    CHECK_EQ(sq_model_toy.config(&c, "dim=0\n", &d, &e), SQ_EX_USAGE);
    CHECK(strstr(e.msg, "--dim") != NULL);
    /* the padded stream's row length is the default --max-len */
    d.padded_len = 6;
    e = (sq_err){0};
    CHECK_EQ(sq_model_toy.config(&c, NULL, &d, &e), 0);
    CHECK_EQ(c.h.max_len, 6);
    /* the model file carries n_users */
    sq_modelfile mf;
    memset(&mf, 0, sizeof mf);
    CHECK_EQ(sq_modelfile_set_kv(&mf, "n_items", "9", &e), 0);
    CHECK_EQ(sq_model_toy.config_write(&c, &mf, &e), 0);
    sq_toy_config r;
    CHECK_EQ(sq_model_toy.config_read(&r, &mf, "m.sqm", &e), 0);
    CHECK_EQ(r.h.n_users, 5u);
    CHECK_EQ(r.h.max_len, 6);
    CHECK_EQ(r.dim, c.dim);
    sq_modelfile_free(&mf);
}

UNIT_TEST(test_flat_gradients)
{
    sq_toy_config c;
    sq_err e = {0};
    sq_data_dims d = {.n_items = 9, .n_users = 5};
    CHECK_EQ(sq_model_toy.config(&c, NULL, &d, &e), 0);
    flat_gradcheck(t, &sq_flat_toy, &c, SQ_TARGET_ALL, SQ_LOSS_CE, 1e-6);
    flat_gradcheck(t, &sq_flat_toy, &c, SQ_TARGET_LAST, SQ_LOSS_CE, 1e-6);
    /* the sampled losses, with the output bias (nextloss.h) */
    flat_gradcheck(t, &sq_flat_toy, &c, SQ_TARGET_ALL, SQ_LOSS_SAMPLED_SOFTMAX, 1e-6);
    flat_gradcheck(t, &sq_flat_toy, &c, SQ_TARGET_LAST, SQ_LOSS_GBCE, 1e-6);
    CHECK_EQ(sq_model_toy.config(&c, "bias=0\n", &d, &e), 0);
    flat_gradcheck(t, &sq_flat_toy, &c, SQ_TARGET_ALL, SQ_LOSS_BCE, 1e-6);
    /* --loss bce with an output bias is refused */
    CHECK_EQ(sq_model_toy.config(&c, NULL, &d, &e), 0);
    sq_step_opts so = {.loss = SQ_LOSS_BCE, .neg = 1, .target = SQ_TARGET_ALL, .batch = 4};
    CHECK_EQ(sq_model_toy.check_step(&c, &so, &e), SQ_EX_USAGE);
}

UNIT_TEST(test_flat_scores)
{
    sq_toy_config c;
    sq_err e = {0};
    sq_data_dims d = {.n_items = 9, .n_users = 3};
    CHECK_EQ(sq_model_toy.config(&c, NULL, &d, &e), 0);
    sq_net n;
    memset(&n, 0, sizeof n);
    sq_ctx cx = sq_ctx_cpu();
    cx.threads = 2;
    CHECK_EQ(sq_model_toy.net_alloc(&n, &c, &cx, &e), 0);
    sq_model_toy.net_init(&n, 1);
    sq_model m;
    sq_model_toy.view(&m, &n);
    CHECK(m.knows_user && m.knows_user(&m, 2) && !m.knows_user(&m, 3));
    uint32_t items[] = {1, 2, 3, 4, 5, 9}, off[] = {0, 3, 5}, len[] = {3, 2, 0};
    uint32_t user[] = {0, 2, 1};
    sq_batch all = {items, off, len, 3, user, NULL};
    float s3[30], s1[10];
    CHECK_EQ(m.scores(&m, &all, s3, &e), 0);
    /* a user's scores do not depend on whom it is scored with */
    uint32_t off1[] = {0};
    sq_batch one = {items + 3, off1, len + 1, 1, user + 1, NULL};
    CHECK_EQ(m.scores(&m, &one, s1, &e), 0);
    CHECK(memcmp(s1, s3 + 10, sizeof s1) == 0);
    /* a user without a row is refused */
    uint32_t bad[] = {3};
    sq_batch nb = {items, off1, len, 1, bad, NULL};
    CHECK_EQ(m.scores(&m, &nb, s1, &e), SQ_EX_DATA);
    sq_model_toy.net_free(&n);
}
