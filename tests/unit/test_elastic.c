/* test_elastic.c - ELASTIC (elastic.h): every parameter's gradient against
 * finite differences in double precision for the full model and each
 * ablation, the float build against the double one, the segment-mean op,
 * the query levels, segment isolation and the leakage that decides how
 * ELASTIC trains. */
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "elastic.h"
#include "gradcheck.h"
#include "ops.h"
#include "rng.h"
#include "unit.h"

#define GRAD_TOL 1e-6
#define F32_TOL 2e-5

/* Three sequences of lengths 1, 4, 7 (max_len 8). The entries: NEWEST,
 * each one's newest row, as ELASTIC trains; EVERY row (grouped, several a
 * sequence: what every-position training would ask); REVERSED, the newest
 * rows in the reverse order of the sequences (not grouped: the last layer
 * then runs on every row, elastic.h OUTPUT ROWS). */
enum { NEWEST, EVERY, REVERSED };
typedef struct {
    int ids[12], pos[12], off[4], rows[12], targets[12];
    uint32_t user[3];
    sq_packed pb;
} tiny_batch;

static void tiny_batch_init_as(tiny_batch *t, int max_len, int entries)
{
    static const int len[3] = {1, 4, 7};
    static const int ids[12] = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8};
    static const int tg[12] = {7, 2, 11, 4, 6, 1, 12, 9, 3, 10, 2, 5};
    memset(t, 0, sizeof *t);
    int T = sq_pack_offsets(t->off, len, 3), n = entries == EVERY ? T : 3;
    sq_pack_positions(t->pos, t->off, 3, max_len);
    memcpy(t->ids, ids, sizeof ids);
    for (int i = 0; i < n; i++) {
        int b = entries == REVERSED ? 2 - i : i;
        t->rows[i] = entries == EVERY ? i : t->off[b + 1] - 1;
        t->targets[i] = tg[i];
    }
    t->pb = (sq_packed){.B = 3, .T = T, .ids = t->ids, .off = t->off, .pos = t->pos,
                        .user = t->user, .n = n, .rows = t->rows, .targets = t->targets};
}

static void tiny_batch_init(tiny_batch *t, int max_len)
{
    tiny_batch_init_as(t, max_len, NEWEST);
}

static sq_elastic_config tiny_config(void)
{
    sq_elastic_config c;
    sq_elastic_defaults(&c);
    c.n_items = 12;
    c.dim = 8;
    c.n_heads = 2;
    c.ffn = 12;
    c.n_layers = 2;
    c.max_len = 8;
    c.pool = 4;
    c.topk = 2;
    c.stride = 2;
    c.dropout = 0;
    return c;
}

/* The objective, and the pieces it is on: the relu signs of every
 * feed-forward and the retrieved experts. top-k and relu are piecewise, so
 * a finite difference that crosses a boundary measures the jump, not the
 * gradient: such elements are skipped (and counted). */
typedef struct {
    sq_elastic_f64 *m;
    sq_elastic_work_f64 *w;
    const sq_packed *b;
    unsigned char *signs; /* base pattern, NULL: do not compare */
    int sel[6];
    int crossed;
} obj_ctx;

static size_t relu_pattern(const obj_ctx *c, unsigned char *out)
{
    const sq_elastic_config *cf = &c->m->cfg;
    size_t n = 0, F = (size_t)cf->ffn, Bk = (size_t)c->b->B * cf->topk;
    for (int l = 0; l < cf->n_layers; l++) {
        for (size_t i = 0; i < Bk * F; i++, n++)
            if (out)
                out[n] = c->w->pf[l].h1[i] > 0;
        for (size_t i = 0; i < (size_t)c->b->T * F; i++, n++)
            if (out)
                out[n] = c->w->xf[l].h1[i] > 0;
    }
    return n;
}

static double loss_obj(void *p)
{
    obj_ctx *c = p;
    int cnt;
    sq_elastic_forward_f64(c->m, c->w, c->b, 1, 7, 3);
    double L = sq_elastic_loss_f64(c->m, c->w, c->b, sq_loss_of(SQ_LOSS_CE), NULL, &cnt);
    if (c->signs) {
        size_t n = relu_pattern(c, NULL);
        unsigned char *now = malloc(n);
        if (now) {
            relu_pattern(c, now);
            c->crossed |= memcmp(now, c->signs, n) != 0;
            free(now);
        }
        if (!c->m->cfg.no_imr)
            c->crossed |= memcmp(c->sel, c->w->pkm_idx, sizeof c->sel) != 0;
    }
    return L;
}

/* gc_check over the elements whose differences stay on one piece;
 * *skipped counts the others. */
static double piecewise_check(obj_ctx *c, double *x, const double *g, size_t n,
                              size_t *skipped)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        c->crossed = 0;
        double e = gc_check(loss_obj, c, x + i, g + i, 1);
        if (c->crossed)
            ++*skipped;
        else if (!(e <= worst))
            worst = e;
    }
    return worst;
}

/* Biases and LayerNorm parameters away from 0 and 1, the item table and
 * the experts larger than Xavier's scale, so that every gradient is
 * exercised. */
static void perturb(sq_elastic_f64 *m)
{
    const sq_tensor_set *s = &m->ts;
    sq_rng r;
    sq_rng_seed(&r, 5, 0);
    for (int i = 0; i < s->n; i++) {
        double *at = m->mem + s->off[i];
        const char *name = s->desc[i]->name;
        for (size_t j = 0; j < s->size[i]; j++) {
            if (!s->desc[i]->decay)
                at[j] += 0.3 * sq_rng_normal(&r);
            else if (!strcmp(name, "item_emb") || !strcmp(name, "experts") ||
                     !strcmp(name, "p0"))
                at[j] *= 3;
        }
    }
    for (int c = 0; c < m->cfg.dim; c++)
        m->p.item_emb[c] = 0; /* the padding row */
}

static void gradcheck_entries(unit_ctx *t, const sq_elastic_config *cfg, double dropout,
                              int entries, const char *what)
{
    int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    sq_err e = {0};
    sq_elastic_config c = *cfg;
    c.dropout = dropout;
    tiny_batch tb;
    tiny_batch_init_as(&tb, c.max_len, entries);
    sq_elastic_cap cap = {.B = 3, .T = tb.pb.T, .n = tb.pb.n, .N = c.max_len, .train = 1};
    sq_elastic_f64 m, g;
    sq_elastic_work_f64 w;
    sq_ctx cpu = sq_ctx_cpu();
    CHECK_EQ(sq_elastic_alloc_on_f64(&m, &c, &cpu, &e), 0);
    CHECK_EQ(sq_elastic_alloc_on_f64(&g, &c, &cpu, &e), 0);
    CHECK_EQ(sq_elastic_work_alloc_f64(&w, &m, &cap, &e), 0);
    if (e.code) {
        fprintf(stderr, "  %s: %s\n", what, e.msg);
        omp_set_num_threads(saved);
        return;
    }
    sq_elastic_init_weights_f64(&m, 11);
    perturb(&m);
    int cnt = 0, sel[6] = {0};
    memset(g.mem, 0, g.n * sizeof *g.mem);
    sq_elastic_forward_f64(&m, &w, &tb.pb, 1, 7, 3);
    double L0 = sq_elastic_loss_f64(&m, &w, &tb.pb, sq_loss_of(SQ_LOSS_CE), &g, &cnt);
    sq_elastic_backward_f64(&m, &w, &tb.pb, &g);
    memcpy(sel, w.pkm_idx, sizeof sel);
    CHECK_EQ(cnt, tb.pb.n);
    CHECK(L0 > 0);
    CHECK_EQ(w.grouped, entries != REVERSED);

    obj_ctx oc = {&m, &w, &tb.pb, NULL, {0}, 0};
    memcpy(oc.sel, sel, sizeof sel);
    unsigned char *signs = malloc(relu_pattern(&oc, NULL));
    CHECK(signs != NULL);
    if (!signs)
        return;
    relu_pattern(&oc, signs);
    oc.signs = signs;
    size_t skipped = 0;
    double err = piecewise_check(&oc, m.mem, g.mem, m.n, &skipped);
    gc_note(t->name, what, err);
    CHECK(err < GRAD_TOL);
    CHECK(skipped * 10 < m.n); /* most parameters checked: under 10% near a kink */
    if (!(err < GRAD_TOL) || skipped * 10 >= m.n) {
        fprintf(stderr, "  %s: gradient error %.3g (%zu of %zu skipped)\n", what, err,
                skipped, m.n);
        for (int i = 0; i < m.ts.n; i++) /* which tensor */
            if (m.ts.size[i])
                fprintf(stderr, "    %-10s %.3g\n", m.ts.desc[i]->name,
                        piecewise_check(&oc, m.mem + m.ts.off[i], g.mem + m.ts.off[i],
                                        m.ts.size[i], &skipped));
    }
    free(signs);
    for (int i = 0; i < c.dim; i++)
        CHECK(g.p.item_emb[i] == 0); /* padding row */

    /* every parameter in use gets some gradient (nothing is dead weight),
     * except the keys and query network under Algorithm 1's plain gather */
    for (int i = 0; i < g.ts.n; i++) {
        double sum = 0;
        for (size_t j = 0; j < g.ts.size[i]; j++)
            sum += fabs(g.mem[g.ts.off[i] + j]);
        int gather = c.weights == SQ_ELASTIC_W_NONE &&
                     (!strncmp(g.ts.desc[i]->name, "qn_", 3) ||
                      !strncmp(g.ts.desc[i]->name, "q_ln", 4) ||
                      !strncmp(g.ts.desc[i]->name, "keys", 4));
        if (g.ts.size[i] && !gather && !(sum > 0))
            fprintf(stderr, "  %s: no gradient reaches %s\n", what, g.ts.desc[i]->name);
        CHECK(!g.ts.size[i] || gather || sum > 0);
        if (gather)
            CHECK(sum == 0);
    }

    /* the float build on the same parameters */
    sq_elastic mf, gf;
    sq_elastic_work wf;
    CHECK_EQ(sq_elastic_alloc_on(&mf, &c, &cpu, &e), 0);
    CHECK_EQ(sq_elastic_alloc_on(&gf, &c, &cpu, &e), 0);
    CHECK_EQ(sq_elastic_work_alloc(&wf, &mf, &cap, &e), 0);
    for (size_t i = 0; i < m.n; i++)
        mf.mem[i] = (float)m.mem[i];
    memset(gf.mem, 0, gf.n * sizeof *gf.mem);
    sq_elastic_forward(&mf, &wf, &tb.pb, 1, 7, 3);
    double Lf = sq_elastic_loss(&mf, &wf, &tb.pb, sq_loss_of(SQ_LOSS_CE), &gf, &cnt);
    sq_elastic_backward(&mf, &wf, &tb.pb, &gf);
    CHECK_NEAR(Lf, L0, 1e-5);
    double ferr = gc_rel_diff(gf.mem, g.mem, g.n);
    gc_note(t->name, "float vs double grads", ferr);
    CHECK(ferr < F32_TOL);

    sq_elastic_work_free(&wf);
    sq_elastic_free(&gf);
    sq_elastic_free(&mf);
    sq_elastic_work_free_f64(&w);
    sq_elastic_free_f64(&g);
    sq_elastic_free_f64(&m);
    omp_set_num_threads(saved);
}

static void gradcheck_cfg(unit_ctx *t, const sq_elastic_config *cfg, double dropout,
                          const char *what)
{
    gradcheck_entries(t, cfg, dropout, NEWEST, what);
}

UNIT_TEST(test_elastic_gradcheck)
{
    sq_elastic_config c = tiny_config();
    gradcheck_cfg(t, &c, 0, "elastic");
    gradcheck_cfg(t, &c, 0.2, "elastic, dropout 0.2");
    /* the last layer on several rows a sequence, and on every row */
    gradcheck_entries(t, &c, 0, EVERY, "every row an entry");
    gradcheck_entries(t, &c, 0, REVERSED, "entries not grouped");
}

UNIT_TEST(test_elastic_gradcheck_ablations)
{
    sq_elastic_config c = tiny_config();
    c.query = SQ_ELASTIC_QUERY_MEAN;
    gradcheck_cfg(t, &c, 0, "--query mean");
    c = tiny_config();
    c.no_imr = 1;
    gradcheck_cfg(t, &c, 0, "--no-imr");
    c = tiny_config();
    c.no_dispatcher = 1;
    gradcheck_cfg(t, &c, 0, "--no-dispatcher");
    c = tiny_config();
    c.weights = SQ_ELASTIC_W_NONE;
    gradcheck_cfg(t, &c, 0, "--expert-weights none");
    c = tiny_config();
    c.stride = 3; /* groups padded on the left: 1 -> 1, 4 -> 2 -> 1, 7 -> 3 -> 1 */
    c.n_layers = 1;
    gradcheck_cfg(t, &c, 0, "--stride 3, 1 layer");
}

/* The segment mean and its backward against finite differences. */
typedef struct {
    double *x, *w, *out;
    const int *off;
    int B, C;
} segmean_ctx;

static double segmean_obj(void *p)
{
    segmean_ctx *s = p;
    sq_ctx cx = sq_ctx_cpu();
    sq_segmean_forward_f64(&cx, s->out, s->x, s->off, s->B, s->C);
    double f = 0;
    for (int i = 0; i < s->B * s->C; i++)
        f += s->out[i] * s->w[i];
    return f;
}

UNIT_TEST(test_segmean_op)
{
    enum { B = 3, C = 5, T = 6 };
    const int off[B + 1] = {0, 2, 2, 6}; /* an empty segment in the middle */
    double x[T * C], w[B * C], out[B * C], g[T * C] = {0};
    sq_rng r;
    sq_rng_seed(&r, 3, 0);
    for (int i = 0; i < T * C; i++)
        x[i] = sq_rng_normal(&r);
    for (int i = 0; i < B * C; i++)
        w[i] = sq_rng_normal(&r);
    segmean_ctx s = {x, w, out, off, B, C};
    sq_ctx cx = sq_ctx_cpu();
    segmean_obj(&s);
    for (int c = 0; c < C; c++) {
        CHECK_NEAR(out[c], (x[c] + x[C + c]) / 2, 1e-15);
        CHECK(out[C + c] == 0);
    }
    sq_segmean_backward_f64(&cx, g, w, off, B, C);
    double err = gc_check(segmean_obj, &s, x, g, T * C);
    gc_note(t->name, "segmean", err);
    CHECK(err < GRAD_TOL);
    float xf[T * C], of[B * C];
    for (int i = 0; i < T * C; i++)
        xf[i] = (float)x[i];
    sq_segmean_forward(&cx, of, xf, off, B, C);
    segmean_obj(&s);
    CHECK(gc_rel_diff(of, out, B * C) < 1e-6);
}

UNIT_TEST(test_elastic_levels_and_tensors)
{
    sq_elastic_config c = tiny_config();
    c.stride = 4, c.max_len = 256;
    CHECK_EQ(sq_elastic_levels(&c), 4);
    c.stride = 2, c.max_len = 8;
    CHECK_EQ(sq_elastic_levels(&c), 3);
    c.stride = 2, c.max_len = 9;
    CHECK_EQ(sq_elastic_levels(&c), 4);
    c.stride = 300, c.max_len = 256;
    CHECK_EQ(sq_elastic_levels(&c), 1);
    c.max_len = 1;
    CHECK_EQ(sq_elastic_levels(&c), 1);

    sq_err e = {0};
    sq_tensor_set s;
    c = tiny_config();
    CHECK_EQ(sq_elastic_tensor_set(&c, &s, &e), 0);
    int ex = sq_tensors_find(&s, "experts"), k1 = sq_tensors_find(&s, "keys1");
    CHECK(ex >= 0 && s.size[ex] == 16 * 8);
    CHECK(k1 >= 0 && s.size[k1] == 4 * 4);
    CHECK_EQ(s.size[sq_tensors_find(&s, "p0")], 0);
    CHECK_EQ(s.size[sq_tensors_find(&s, "qn_w")], 3 * 8 * 16);
    c.no_imr = 1;
    CHECK_EQ(sq_elastic_tensor_set(&c, &s, &e), 0);
    CHECK_EQ(s.size[sq_tensors_find(&s, "experts")], 0);
    CHECK_EQ(s.size[sq_tensors_find(&s, "qn_w")], 0);
    CHECK_EQ(s.size[sq_tensors_find(&s, "p0")], 2 * 8);
    c = tiny_config();
    c.no_dispatcher = 1;
    CHECK_EQ(sq_elastic_tensor_set(&c, &s, &e), 0);
    CHECK_EQ(s.size[sq_tensors_find(&s, "ag_q")], 0);
    c = tiny_config();
    c.topk = 5; /* more than the 4 sub-keys of a half */
    CHECK_EQ(sq_elastic_config_check(&c, &e), SQ_EX_USAGE);
    c = tiny_config();
    c.n_heads = 3;
    CHECK_EQ(sq_elastic_config_check(&c, &e), SQ_EX_USAGE);
}

/* The state of the newest row of each sequence, batched and alone, and
 * the leak: an earlier row's state depends on a later item. */
UNIT_TEST(test_elastic_segments_and_leak)
{
    sq_err e = {0};
    sq_elastic_config c = tiny_config();
    sq_ctx cpu = sq_ctx_cpu();
    tiny_batch tb;
    tiny_batch_init(&tb, c.max_len);
    sq_elastic_cap cap = {.B = 3, .T = tb.pb.T, .n = 3, .N = c.max_len, .train = 0};
    sq_elastic_f64 m;
    sq_elastic_work_f64 w;
    CHECK_EQ(sq_elastic_alloc_on_f64(&m, &c, &cpu, &e), 0);
    CHECK_EQ(sq_elastic_work_alloc_f64(&w, &m, &cap, &e), 0);
    sq_elastic_init_weights_f64(&m, 3);
    perturb(&m);
    sq_elastic_forward_f64(&m, &w, &tb.pb, 0, 0, 0);
    double batched[3][8];
    for (int b = 0; b < 3; b++)
        memcpy(batched[b], w.out + (size_t)b * 8, sizeof batched[b]);
    /* sequence 2's 3rd row after the first layer */
    const double *x1 = w.X + (size_t)w.cap.T * 8 + (size_t)(tb.off[2] + 2) * 8;
    double row2[8];
    memcpy(row2, x1, sizeof row2);
    for (int b = 0; b < 3; b++) {
        int len = tb.off[b + 1] - tb.off[b], off[2] = {0, len}, row = len - 1;
        sq_packed one = {.B = 1, .T = len, .ids = tb.ids + tb.off[b], .off = off,
                         .pos = tb.pos + tb.off[b], .n = 1, .rows = &row,
                         .targets = tb.targets + b};
        sq_elastic_forward_f64(&m, &w, &one, 0, 0, 0);
        CHECK(gc_rel_diff_f64(w.out, batched[b], 8) < 1e-12);
    }
    /* the same states when the entries are not grouped (every row of the
     * last layer, then gathered) */
    tiny_batch rb;
    tiny_batch_init_as(&rb, c.max_len, REVERSED);
    sq_elastic_forward_f64(&m, &w, &rb.pb, 0, 0, 0);
    CHECK_EQ(w.grouped, 0);
    for (int i = 0; i < 3; i++)
        CHECK(gc_rel_diff_f64(w.out + (size_t)i * 8, batched[2 - i], 8) < 1e-12);
    /* change sequence 2's newest item: its 3rd row's state changes too */
    tb.ids[tb.off[3] - 1] = 10;
    sq_elastic_forward_f64(&m, &w, &tb.pb, 0, 0, 0);
    CHECK(gc_rel_diff_f64(x1, row2, 8) > 1e-6);
    sq_elastic_work_free_f64(&w);
    sq_elastic_free_f64(&m);
}

/* FIXED LEVELS (elastic.h, what a GPU runs): the query network on the most
 * groups a batch of the shapes can have, the dummies included, gives the
 * loss and gradients of the batch's own groups (the dummies add exact
 * zeros: 1e-12 in double, measured 0, as the GEMMs see other row counts);
 * so does the batch padded to a CUDA graph's bucket (sq_packed_pad_to:
 * padding sequences and entries without a target). */
typedef struct {
    sq_elastic_f64 g;
    sq_elastic_work_f64 w;
    double loss;
    int count;
} fixed_run;

static int fixed_step(fixed_run *r, const sq_elastic_f64 *m, const sq_packed *b, int fixed,
                      int B, int T, sq_err *e)
{
    sq_ctx cpu = sq_ctx_cpu();
    sq_elastic_cap cap = {.B = B, .T = T, .n = T, .N = m->cfg.max_len, .train = 1,
                          .fixed = fixed};
    if (sq_elastic_alloc_on_f64(&r->g, &m->cfg, &cpu, e))
        return e->code;
    if (sq_elastic_work_alloc_f64(&r->w, m, &cap, e)) {
        sq_elastic_free_f64(&r->g);
        return e->code;
    }
    sq_elastic_forward_f64(m, &r->w, b, 1, 7, 3);
    r->loss = sq_elastic_loss_f64(m, &r->w, b, sq_loss_of(SQ_LOSS_CE), &r->g, &r->count);
    sq_elastic_backward_f64(m, &r->w, b, &r->g);
    return 0;
}

static void fixed_case(unit_ctx *t, const sq_elastic_config *cfg, const int *rows,
                       const char *what)
{
    int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    sq_err e = {0};
    sq_elastic_config c = *cfg;
    c.dropout = 0.2;
    tiny_batch tb;
    tiny_batch_init(&tb, c.max_len);
    sq_packed_pad pad;
    sq_elastic_f64 m;
    sq_ctx cpu = sq_ctx_cpu();
    CHECK_EQ(sq_elastic_alloc_on_f64(&m, &c, &cpu, &e), 0);
    CHECK_EQ(sq_packed_pad_init(&pad, tb.pb.T, 3, 5, c.max_len, 0, &e), 0);
    sq_packed src = tb.pb;
    src.uid = tb.user; /* the padding copies them */
    const sq_packed *pb = e.code ? NULL : sq_packed_pad_to(&pad, &src, &e);
    CHECK(pb && pb->B == 4 && pb->T == 15 && pb->n == 5);
    if (!pb) {
        fprintf(stderr, "  %s: %s\n", what, e.msg);
        omp_set_num_threads(saved);
        return;
    }
    sq_elastic_init_weights_f64(&m, 11);
    perturb(&m);
    fixed_run r[3];
    CHECK_EQ(fixed_step(&r[0], &m, &tb.pb, 0, 3, tb.pb.T, &e), 0);
    CHECK_EQ(fixed_step(&r[1], &m, &tb.pb, 1, 3, tb.pb.T, &e), 0);
    CHECK_EQ(fixed_step(&r[2], &m, pb, 1, pb->B, pb->T, &e), 0);
    if (e.code) {
        fprintf(stderr, "  %s: %s\n", what, e.msg);
        omp_set_num_threads(saved);
        return;
    }
    for (int j = 0; j < r[0].w.levels; j++) { /* the dummies are there */
        CHECK_EQ(r[1].w.lev[j].rows, rows[j]);
        CHECK(r[1].w.lev[j].rows > r[0].w.lev[j].rows);
        CHECK_EQ(r[1].w.lev[j].segs, 3 + rows[j]);
    }
    for (int i = 1; i < 3; i++) {
        CHECK_EQ(r[i].count, 3);
        CHECK(fabs(r[i].loss - r[0].loss) <= 1e-12 * r[0].loss);
        double d = gc_rel_diff_f64(r[i].g.mem, r[0].g.mem, m.n);
        gc_note(t->name, what, d);
        CHECK(d < 1e-12);
        if (!(d < 1e-12))
            fprintf(stderr, "  %s, %s: gradients differ by %.3g\n", what,
                    i == 1 ? "fixed levels" : "padded", d);
    }
    for (int i = 0; i < 3; i++) {
        sq_elastic_work_free_f64(&r[i].w);
        sq_elastic_free_f64(&r[i].g);
    }
    sq_packed_pad_free(&pad);
    sq_elastic_free_f64(&m);
    omp_set_num_threads(saved);
}

UNIT_TEST(test_elastic_fixed_levels)
{
    /* lengths 1, 4, 7 (T 12, B 3), stride 2: groups 1 + 2 + 4, 1 + 1 + 2,
     * 3 of at most 9, 7, 6 */
    static const int s2[3] = {9, 7, 6}, s3[2] = {7, 5};
    sq_elastic_config c = tiny_config();
    fixed_case(t, &c, s2, "fixed levels");
    c.stride = 3; /* 1 + 2 + 3, then 3 of at most 7, 5 */
    fixed_case(t, &c, s3, "fixed levels, --stride 3");
    c = tiny_config();
    c.weights = SQ_ELASTIC_W_NONE;
    c.no_dispatcher = 1;
    fixed_case(t, &c, s2, "fixed levels, --expert-weights none --no-dispatcher");
}
